"""Paths around the publish gate, for real: an image that reads what lies beside the baseline, claims an arch
and options the host never gave it, or writes a malformed report; and a promote of a swapped tag.

One image serves every case (built once, like test_hostile_image.py's, on the build test's image): its
in-image rocmstack is a script that picks what to do by the `--smoke-steps` value the host passes (1: a
report that claims a full GPU pass of 8 GPUs on the image's own arch; 2: a report missing `host`, a stage's
`summary` and the smoke's `criteria`), and with `--baseline` it reads all it can find under /baseline into
its report. buildah runs it (chroot isolation), and the gate faces a real registry (test_validate_podman.py's
fixture); this host has no AMD driver, so the host sees no GPU arch.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from test_build_podman import RECIPE, RENDER, podman, rocmstack
from test_validate_podman import _need, registry  # noqa: F401  (registry: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
GATE = "localhost/rocmstack-test-gate:latest"
SECRET = "git-credential-do-not-leak"
FORGED_PASS, MALFORMED = "1", "2"

FAKE_ROCMSTACK = textwrap.dedent("""\
    #!/usr/bin/python3
    import json, os, sys
    HASH, ARCH = {render_hash!r}, {arch!r}
    argv = sys.argv[1:]
    def opt(name):
        return argv[argv.index(name) + 1] if name in argv else None
    report = {{"schema": "rocmstack.validate/2", "created": "now", "seconds": 1.0, "mode": "in-place",
              "passed": True, "verdict": "PASS: doctor, smoke, bench", "render_hash": HASH}}
    if opt("--smoke-steps") == "2":
        report["stages"] = [{{"name": "doctor", "status": "pass", "seconds": 1.0}}]
        report["smoke"] = {{"summary": {{"device": "cuda", "final": {{}}}}}}
    else:
        seen = {{}}
        if opt("--baseline"):
            for top in {{os.path.dirname(opt("--baseline")), "/baseline"}}:
                for where, _, files in os.walk(top):
                    for name in files:
                        try:
                            seen[os.path.join(where, name)] = open(os.path.join(where, name)).read()
                        except OSError as exc:
                            seen[os.path.join(where, name)] = str(exc)
        report.update({{
            "gpu_arch": ARCH, "gpu_archs": [ARCH], "baseline_seen": seen,
            "options": {{"expect_gpus": 8, "doctor_skip": []}},
            "host": {{"hostname": "node"}},
            "stages": [{{"name": n, "status": "pass", "seconds": 1.0, "summary": "ok"}}
                       for n in ("doctor", "smoke", "bench")],
            "doctor": {{"report": {{"verdict": "READY", "platform": {{"visible_gpus": 8, "gpu_archs": [ARCH]}},
                       "checks": [{{"id": "gpu-count", "group": "gpus", "status": "pass", "summary": "8"}}]}}}},
            "smoke": {{"summary": {{"device": "cuda", "criteria": [], "placement": "colocated", "dtype": "bf16",
                                   "shape": "s", "params": 1, "steps": 1, "time_to_verdict_s": 1.0,
                                   "final": {{"reward_first_window": 0.1, "reward_last_window": 0.9,
                                             "tokens_per_gpu_per_sec_avg": 1.0}}}}}},
            "bench": {{"report": {{"shape": {{"name": "s"}}, "settings": {{"prompt_len": 1, "new_tokens": 1,
                                                                     "dtype": "bf16"}},
                                  "device": {{"name": "MI300X", "type": "cuda", "backend": "cuda",
                                             "copy_bandwidth_gb_s": 1.0}}, "results": []}}}},
        }})
    with open("/report/report.json", "w") as f:
        json.dump(report, f)
""")


@pytest.fixture(scope="module")
def gate(podman_env, first_build, tmp_path_factory):
    """The image, and a validate run of it per case (each run once, when a test first asks for it)."""
    _need("buildah")
    root = tmp_path_factory.mktemp("gate")
    manifest = first_build["manifest"]
    ctx = root / "ctx"
    ctx.mkdir()
    (ctx / "rocmstack").write_text(
        FAKE_ROCMSTACK.format(render_hash=manifest["render_hash"], arch=manifest["gpu_archs"][0])
    )
    (ctx / "Containerfile").write_text(
        f"FROM {manifest['image']['id']}\nUSER 0\nCOPY --chmod=0755 rocmstack /usr/local/bin/rocmstack\nUSER 1000\n"
    )
    made = podman(
        podman_env, "build", "--isolation", "chroot", "--format", "docker", "-t", GATE, str(ctx), timeout=600
    )
    assert made.returncode == 0, made.stderr[-3000:]
    # A checkout: the baseline beside a secret file and the checkout's .git/config.
    checkout = root / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n")
    (checkout / "secret.txt").write_text(SECRET)
    (checkout / "h200.json").write_text('{"kind": "rocmstack.bench.baseline"}')
    cases = {
        "baseline": ["--expect-gpus", "1", "--baseline", str(checkout / "h200.json")],
        "arch": ["--expect-gpus", "8"],
    }
    runs: dict[str, dict] = {}

    def run(case: str) -> dict:
        if case not in runs:
            args = cases.get(case, ["--expect-gpus", "1"])
            steps = MALFORMED if case == "malformed" else FORGED_PASS
            out = root / case
            proc = rocmstack(
                podman_env,
                "validate",
                GATE,
                "--engine",
                "buildah",
                *args,
                "--steps",
                steps,
                "--output",
                str(out),
                "--json",
            )
            runs[case] = {"proc": proc, "dir": out}
        return runs[case]

    return {"run": run, "manifest": manifest, "checkout": checkout}


def _tag_locally(env, manifest, repo: str) -> str:
    refs = [f"{repo}:{manifest['tags']['descriptive']}", f"{repo}:{manifest['tags']['content']}"]
    for ref in refs:
        assert podman(env, "tag", GATE, ref).returncode == 0
    return refs[0]


def _in_registry(env, ref: str) -> bool:
    seen = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", "--no-tags", f"docker://{ref}"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    return seen.returncode == 0


def test_the_image_sees_only_a_copy_of_the_baseline_file(gate):
    ran = gate["run"]("baseline")
    proc, out = ran["proc"], ran["dir"]
    assert proc.returncode == 0, proc.stderr[-4000:]  # the host cannot tell a forged pass (the gate can)
    report = json.loads(proc.stdout)
    assert report["baseline_seen"] == {"/baseline/baseline.json": '{"kind": "rocmstack.bench.baseline"}'}
    for path in out.rglob("*"):
        assert SECRET not in path.read_text(errors="replace"), path
    assert report["engine"]["baseline"] == str(gate["checkout"] / "h200.json")
    assert not any(str(gate["checkout"]) + ":" in arg for cmd in report["engine"]["commands"] for arg in cmd)


def test_the_gate_refuses_options_the_host_did_not_give(gate, registry):  # noqa: F811  (a fixture)
    """The host ran with --expect-gpus 1; the image says it was asked for 8 and saw 8."""
    env, ran = registry["env"], gate["run"]("baseline")
    target = _tag_locally(env, gate["manifest"], f"{registry['host']}/options/tiny")
    proc = rocmstack(env, "publish", target, "--reports", str(ran["dir"]), "--engine", "podman", "--dry-run")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the doctor saw 8 GPU(s), the report expected 1" in proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(ran["proc"].stdout)
    assert report["host_checked"]["options"]["expect_gpus"] == 1
    assert report["image_claimed"]["options"]["expect_gpus"] == 8


def test_the_gate_refuses_an_arch_the_host_never_saw(gate, registry):  # noqa: F811  (a fixture)
    """Expected and seen GPU counts agree (8); the arch is the image's word only: this host has none."""
    env, ran = registry["env"], gate["run"]("arch")
    target = _tag_locally(env, gate["manifest"], f"{registry['host']}/arch/tiny")
    proc = rocmstack(env, "publish", target, "--reports", str(ran["dir"]), "--engine", "podman", "--dry-run")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "records no GPU arch the host saw it run on" in proc.stderr
    report = json.loads(ran["proc"].stdout)
    arch = gate["manifest"]["gpu_archs"][0]
    assert report["image_claimed"]["gpu_arch"] == arch and report["host_checked"]["gpu_arch"] is None
    assert report["gpu_arch"] is None


def test_a_promote_of_a_swapped_content_tag_is_refused(gate, registry, first_build):  # noqa: F811  (fixtures)
    """The reports are of the gate image; the registry's content tag holds another build of the same render
    (the first build's image, pushed there after validation): nothing is promoted."""
    env, host = registry["env"], registry["host"]
    ran = gate["run"]("baseline")
    args = [str(RECIPE), *RENDER, "--registry", host, "--insecure-registry", "--engine", "podman"]
    tags = json.loads(rocmstack(env, "tags", *args, "--json").stdout)
    content, descriptive = tags["refs"][1], tags["refs"][0]
    assert content.endswith(":" + first_build["manifest"]["tags"]["content"])
    assert podman(env, "tag", first_build["manifest"]["image"]["id"], content).returncode == 0
    assert podman(env, "push", "--tls-verify=false", content, timeout=600).returncode == 0
    proc = rocmstack(env, "publish", *args, "--promote", "--reports", str(ran["dir"]))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"refusing to publish {content}: the report was made from image" in proc.stderr
    assert "(same render, another build)" in proc.stderr and "Traceback" not in proc.stderr
    assert not _in_registry(env, descriptive)
    # Without a report there is no promotion at all.
    bare = rocmstack(env, "publish", *args, "--promote")
    assert bare.returncode == 2 and "--promote needs --reports DIR" in bare.stderr
    assert not _in_registry(env, descriptive)


def test_a_malformed_report_is_a_collect_failure_not_a_traceback(gate):
    ran = gate["run"]("malformed")
    proc = ran["proc"]
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    collect = report["stages"][0]
    assert collect["name"] == "collect" and collect["status"] == "fail"
    assert collect["summary"].startswith("report.json from the image: not a rocmstack.validate/2 report: ")
    assert report["passed"] is False and "collect fail" in report["verdict"]
    assert sorted(p.name for p in ran["dir"].iterdir()) == [
        "report.html",
        "report.json",
        "report.md",
        "sbom.cdx.json",
    ]
