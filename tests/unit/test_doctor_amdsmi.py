"""amdsmi-import and amdsmi-duplicate."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot, probe

from rocmstack.doctor.checks.amdsmi import amdsmi_duplicate, amdsmi_import
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions()
AMD = {"kfd_archs": (90402,), "amd_render": 1}


def test_keyerror_named():
    data = {"import_error": "KeyError: 'libamd_smi.so'", "import_error_type": "KeyError"}
    result = amdsmi_import(make_snapshot(probes={"amdsmi": probe("amdsmi", data)}, **AMD), OPTS)
    assert (
        result.status == Status.FAIL
        and "KeyError" in result.summary
        and "ImportError guard" in result.summary
    )


def test_not_installed_on_amd_fails_elsewhere_skips():
    data = {
        "import_error": "ModuleNotFoundError: No module named 'amdsmi'",
        "import_error_type": "ModuleNotFoundError",
    }
    assert (
        amdsmi_import(make_snapshot(probes={"amdsmi": probe("amdsmi", data)}, **AMD), OPTS).status
        == Status.FAIL
    )
    assert amdsmi_import(make_snapshot(probes={"amdsmi": probe("amdsmi", data)}), OPTS).status == Status.SKIP


def test_zero_handles_while_kfd_has_gpus():
    snap = make_snapshot(probes={"amdsmi": probe("amdsmi", {"count": 0})}, modules={"amdsmi": "/x"}, **AMD)
    result = amdsmi_import(snap, OPTS)
    assert result.status == Status.FAIL and "amdsmi-duplicate" in result.fix


def test_healthy():
    snap = make_snapshot(probes={"amdsmi": probe("amdsmi", {"count": 1, "module_file": "/x"})}, **AMD)
    assert amdsmi_import(snap, OPTS).status == Status.PASS


def test_two_copies_mapped_into_torch_fail():
    torch = {
        "count": 0,
        "libamd_smi_loaded": ["/sp/_rocm_sdk_core/lib/libamd_smi.so.26", "/sp/amdsmi/libamd_smi.so"],
    }
    result = amdsmi_duplicate(make_snapshot(probes={"torch": probe("torch", torch)}, **AMD), OPTS)
    assert result.status == Status.FAIL and "2 different libamd_smi copies" in result.summary


def test_symlinked_copy_is_one_file():  # SGLang's fix: the pip copy is a symlink to the SDK's
    files = [
        {"path": "/sp/amdsmi/libamd_smi.so", "real": "/sp/_rocm_sdk_core/lib/libamd_smi.so.26", "size": 1},
        {
            "path": "/sp/_rocm_sdk_core/lib/libamd_smi.so.26",
            "real": "/sp/_rocm_sdk_core/lib/libamd_smi.so.26",
            "size": 1,
        },
    ]
    site = {"libamd_smi_files": files, "preload": {"sdk_default_global": True}}
    snap = make_snapshot(site=site, modules={"amdsmi": "/sp/amdsmi"}, **AMD)
    assert amdsmi_duplicate(snap, OPTS).status == Status.PASS


def test_two_files_and_global_preload_fail_local_preload_warns():
    files = [
        {"path": "/a/libamd_smi.so", "real": "/a/libamd_smi.so", "size": 1},
        {"path": "/b/libamd_smi.so.26", "real": "/b/libamd_smi.so.26", "size": 2},
    ]
    glob = make_snapshot(
        site={"libamd_smi_files": files, "preload": {"sdk_default_global": True}},
        modules={"amdsmi": "/a"},
        **AMD,
    )
    assert amdsmi_duplicate(glob, OPTS).status == Status.FAIL
    local = make_snapshot(
        site={"libamd_smi_files": files, "preload": {"sdk_default_global": False}},
        modules={"amdsmi": "/a"},
        **AMD,
    )
    assert amdsmi_duplicate(local, OPTS).status == Status.WARN
    patched = make_snapshot(
        site={"libamd_smi_files": files, "preload": {"sdk_default_global": True, "torch_passes": False}},
        modules={"amdsmi": "/a"},
        **AMD,
    )
    assert amdsmi_duplicate(patched, OPTS).status == Status.WARN


def test_nothing_rocm_skips():
    assert amdsmi_duplicate(make_snapshot(), OPTS).status == Status.SKIP
