"""Advisories as data: the schema refuses what it does not know, matching needs every named fact to be known
and to hold, and check, doctor and preflight name a match with its source and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rocmstack.advisories.load import load_all, load_file
from rocmstack.advisories.match import Inventory, match, match_text
from rocmstack.advisories.model import Advisory
from rocmstack.errors import InputError
from tests.conftest import run_cli

GOOD = {
    "id": "lab-vllm-0.27-test",
    "title": "vLLM 0.27 on gfx942 with the AITER FP4 BMM path on crashes at start",
    "severity": "fail",
    "versions_alone": "fail",
    "affects": [{"component": "vllm", "versions": ">=0.27,<0.28"}],
    "arch": ["gfx942"],
    "env": {"VLLM_ROCM_USE_AITER": "1"},
    "symptom": "RuntimeError: no kernel image for gfx942",
    "signatures": [r"no kernel image for gfx94\d"],
    "cause": "the fast path ships kernels for gfx950 only",
    "fix": "set VLLM_ROCM_USE_AITER_FP4BMM=0",
    "fixed_in": {"vllm": "0.28.0"},
    "source": "https://github.com/example/lab/issues/1",
    "date": "2026-11-30",
}


def _write(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"severity": "bad"}, "severity"),
        ({"affects": [{"component": "pytorch", "versions": ">=2"}]}, "'pytorch' is not a component"),
        ({"affects": [{"component": "vllm", "versions": "0.27+"}]}, "is not a version specifier"),
        ({"arch": ["mi300x"]}, "is not a gfx target"),
        ({"signatures": ["(unclosed"]}, "is not a regex"),
        ({"source": "http://x"}, "source"),
        ({"typo": 1}, "typo"),
    ],
)
def test_a_bad_advisory_is_one_line_naming_the_file_and_field(tmp_path, change, said):
    path = _write(tmp_path, {**GOOD, **change})
    with pytest.raises(InputError, match=r"advisory .*lab-vllm-0\.27-test\.yaml") as caught:
        load_file(path)
    assert said in str(caught.value)


def test_the_id_is_the_file_name_and_unique(tmp_path):
    path = _write(tmp_path, GOOD)
    path.rename(tmp_path / "other.yaml")
    with pytest.raises(InputError, match="is not the file's name"):
        load_file(tmp_path / "other.yaml")
    _write(tmp_path / "a", GOOD)
    _write(tmp_path / "b", GOOD)
    with pytest.raises(InputError, match="is also"):
        load_all([tmp_path / "a", tmp_path / "b"])


def test_every_named_fact_must_be_known_and_hold():
    advisory = Advisory.model_validate(GOOD)
    node = {"versions": {"vllm": "0.27.0+rocm714"}, "archs": frozenset({"gfx942"})}
    hit = match([advisory], Inventory("n", env={"VLLM_ROCM_USE_AITER": "1"}, **node))
    assert [m.why for m in hit] == ["vllm 0.27.0+rocm714 in >=0.27,<0.28; gfx942; VLLM_ROCM_USE_AITER=1"]
    assert not match([advisory], Inventory("n", env={}, **node))  # the variable unset
    assert not match([advisory], Inventory("n", env=None, **node))  # the environment unknown (a recipe)
    assert not match(
        [advisory], Inventory("n", {"vllm": "0.28.1"}, frozenset({"gfx942"}), {"VLLM_ROCM_USE_AITER": "1"})
    )
    assert not match(
        [advisory], Inventory("n", {"vllm": "0.27.0"}, frozenset({"gfx950"}), {"VLLM_ROCM_USE_AITER": "1"})
    )
    assert not match([advisory], Inventory("n", {}, frozenset({"gfx942"}), {"VLLM_ROCM_USE_AITER": "1"}))
    unset = Advisory.model_validate({**GOOD, "arch": [], "env": {"HSA_ENABLE_IPC_MODE_LEGACY": "<unset>|0"}})
    assert match([unset], Inventory("n", {"vllm": "0.27.0rc1"}, env={}))  # a pre-release of 0.27 is 0.27
    assert not match([unset], Inventory("n", {"vllm": "0.27.0"}, env={"HSA_ENABLE_IPC_MODE_LEGACY": "1"}))


def test_a_signature_names_the_line_it_matched():
    advisory = Advisory.model_validate(GOOD)
    text = "INFO start\n(EngineCore pid=7) RuntimeError: no kernel image for gfx942\nINFO exit\n"
    assert match_text([advisory], text) == [
        (advisory, "(EngineCore pid=7) RuntimeError: no kernel image for gfx942")
    ]
    assert match_text([advisory], "INFO healthy\n") == []
    # a log read as written keeps a progress bar's redraws on one line: each is a line of its own here
    bar = "(Worker pid=7) \rwarmup 1/3\rwarmup 2/3\rRuntimeError: no kernel image for gfx942\r\nINFO exit\n"
    assert match_text([advisory], bar) == [(advisory, "RuntimeError: no kernel image for gfx942")]


def test_check_names_a_known_bad_pin_before_the_build(tmp_path):
    lab = tmp_path / "advisories"
    _write(
        lab,
        {
            **GOOD,
            "id": "lab-ray-2.58",
            "arch": [],
            "env": {},
            "affects": [{"component": "ray", "versions": "==2.58.0"}],
        },
    )
    ran = run_cli("check", "verl-0.9.0-rocm10", "--offline", "--json", "--advisories-dir", str(lab))
    assert ran.code == 1, ran
    (one,) = json.loads(ran.out)
    row = next(r for r in one["results"] if r["id"] == "advisory:lab-ray-2.58")
    assert row["status"] == "fail" and row["source"] == GOOD["source"] and row["fix"] == GOOD["fix"]
    assert "ray 2.58.0 in ==2.58.0" in row["reason"]
    ignored = run_cli(
        "check", "verl-0.9.0-rocm10", "--offline", "--json", "--advisories-dir", str(lab),
        "--ignore-rule", "advisory:lab-ray-2.58",
    )  # fmt: skip
    assert not any(r["id"].startswith("advisory:lab") for r in json.loads(ignored.out)[0]["results"])
    bad = run_cli("check", "verl-0.9.0-rocm10", "--offline", "--ignore-rule", "advisory:nope")
    assert bad.code == 2 and "no such advisory" in bad.err


def test_the_doctor_names_a_known_bad_version_on_the_node(tmp_path):
    from rocmstack.doctor.checks.advisories import known_advisories
    from rocmstack.doctor.model import DoctorOptions
    from rocmstack.status import Status
    from tests.fixtures.doctor.doctor_fakes import make_snapshot

    lab = tmp_path / "advisories"
    _write(lab, GOOD)
    snap = make_snapshot(
        kfd_archs=(90402,), dists={"vllm": "0.27.1+rocm714"}, env={"VLLM_ROCM_USE_AITER": "1"}
    )
    result = known_advisories(snap, DoctorOptions(advisories_dirs=(lab,), sysfs_root=tmp_path / "sys"))
    assert result.status is Status.FAIL, result
    assert (
        "known-bad version(s) here: lab-vllm-0.27-test: vLLM 0.27 on gfx942" in result.summary
    )  # a fail first
    assert GOOD["source"] in "\n".join(result.details) and f"lab-vllm-0.27-test: {GOOD['fix']}" in (
        result.fix or ""
    )
    fine = make_snapshot(kfd_archs=(90402,), dists={"vllm": "0.28.0"}, env={"VLLM_ROCM_USE_AITER": "1"})
    later = known_advisories(fine, DoctorOptions(advisories_dirs=(lab,), sysfs_root=tmp_path / "sys"))
    assert later.status is not Status.FAIL
    assert "lab-vllm-0.27-test" not in "\n".join([later.summary, *later.details])


def test_a_failing_doctor_row_gets_its_known_cause(tmp_path):
    from rocmstack.doctor.model import DoctorOptions
    from rocmstack.doctor.runner import name_known_causes

    lab = tmp_path / "advisories"
    _write(lab, GOOD)
    rows = [
        {
            "status": "fail",
            "summary": "engine did not start",
            "details": ["RuntimeError: no kernel image for gfx942"],
        },
        {"status": "pass", "summary": "no kernel image for gfx942", "details": []},
    ]
    name_known_causes(rows, DoctorOptions(advisories_dirs=(lab,)))
    assert rows[0]["advisories"][0]["id"] == "lab-vllm-0.27-test" and "advisories" not in rows[1]


def test_the_advisories_command(tmp_path):
    lab = tmp_path / "advisories"
    _write(lab, GOOD)
    listed = run_cli("advisories", "--advisories-dir", str(lab), "--component", "vllm", "--json")
    assert listed.code == 0 and "lab-vllm-0.27-test" in [a["id"] for a in json.loads(listed.out)]
    shown = run_cli("advisories", "lab-vllm-0.27-test", "--advisories-dir", str(lab))
    assert shown.code == 0 and f"source: {GOOD['source']}" in shown.out
    for args, said in (
        (["nope-x"], "no advisory 'nope-x'"),
        (["--component", "pytorch"], "is not a component"),
    ):
        bad = run_cli("advisories", *args)
        assert bad.code == 2 and said in bad.err and "Traceback" not in bad.err


def test_versions_alone_warn_by_default_and_none_leaves_it_to_the_failures_words():
    conditional = Advisory.model_validate({k: v for k, v in GOOD.items() if k != "versions_alone"})
    assert conditional.versions_alone == "warn"
    inv = Inventory("n", {"vllm": "0.27.0"}, frozenset({"gfx942"}), {"VLLM_ROCM_USE_AITER": "1"})
    assert [m.advisory.versions_alone for m in match([conditional], inv)] == ["warn"]
    words_only = Advisory.model_validate({**GOOD, "versions_alone": "none"})
    assert match([words_only], inv) == []
    assert match_text([words_only], "RuntimeError: no kernel image for gfx942")[0][0] is words_only


SHIPPED_ROCM_70 = "rocm-7.0-hiplaunchhostfunc-stream-capture-unsupported"


def test_check_names_a_shipped_advisory_on_a_recipe_pinning_its_versions():
    ran = run_cli("check", "verl-0.7.1-rocm7.0.2", "--offline", "--json")
    rows = {r["id"]: r for run in json.loads(ran.out) for r in run["results"]}
    row = rows[f"advisory:{SHIPPED_ROCM_70}"]
    assert row["status"] == "warn" and row["source"] == "https://github.com/ROCm/TheRock/issues/7877"
    assert "(rocm 7.0.2 in >=7.0.0,<8)" in row["reason"] and row["fix"]


def test_the_doctor_names_a_shipped_advisory_on_a_replayed_rocm_70_node(tmp_path):
    from rocmstack.doctor.checks.advisories import known_advisories
    from rocmstack.doctor.model import DoctorOptions
    from tests.fixtures.doctor.doctor_fakes import make_snapshot

    snap = make_snapshot(kfd_archs=(90402,), amd_render=1, dists={"torch": "2.9.1+rocm7.0.2"})
    result = known_advisories(snap, DoctorOptions(sysfs_root=tmp_path / "sys"))
    assert any(d.startswith(f"{SHIPPED_ROCM_70} (warn)") and "https://github.com/ROCm/TheRock/issues/7877" in d
               for d in result.details), result  # fmt: skip
    assert SHIPPED_ROCM_70 in (result.fix or "")


def test_the_nodes_cxx_runtime_level_is_read_from_its_file(tmp_path):
    from rocmstack.doctor.checks.advisories import glibcxx_level

    lib = tmp_path / "libstdc++.so.6"
    lib.write_bytes(b"\x7fELF...GLIBCXX_3.4.29\x00GLIBCXX_3.4.30\x00GLIBCXX_3.4\x00CXXABI_1.3.13\x00")
    assert glibcxx_level((tmp_path / "missing.so", lib)) == "3.4.30"
    assert glibcxx_level((tmp_path / "missing.so",)) is None
    # a wheel built for 3.4.31 on that image: the shipped advisory holds by the numbers alone
    aiter = next(a for a in load_all() if a.id == "aiter-0.1.12.post1-wheel-needs-glibcxx-3.4.31")
    node = Inventory("n", {"aiter": "0.1.12.post1", "libstdcxx": "3.4.30", "rocm": "7.0.2"}, env={})
    newer = Inventory("n", {"aiter": "0.1.12.post1", "libstdcxx": "3.4.32", "rocm": "7.0.2"}, env={})
    assert [m.advisory.id for m in match([aiter], node)] == [aiter.id] and match([aiter], newer) == []


def test_the_rocm_release_is_the_installations_own_record_not_hips_build_number(tmp_path):
    from rocmstack.doctor.checks.advisories import rocm_release
    from tests.fixtures.doctor.doctor_fakes import make_snapshot, probe

    (tmp_path / ".info").mkdir()
    (tmp_path / ".info/version").write_text("7.2.1-81\n")
    hip = {"torch": probe("torch", {"hip": "7.2.26015-ab12"})}
    assert rocm_release(make_snapshot(env={"ROCM_PATH": str(tmp_path)}, probes=hip)) == "7.2.1"
    nowhere = {"ROCM_PATH": str(tmp_path / "none")}
    assert rocm_release(make_snapshot(env=nowhere, dists={"torch": "2.9.1+rocm7.0.2"})) == "7.0.2"
    # HIP's third field is a build: 7.2 only, so "7.2.1 or later" is never claimed from it
    assert rocm_release(make_snapshot(env=nowhere, probes=hip)) == "7.2"
