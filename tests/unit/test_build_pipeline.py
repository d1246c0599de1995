"""The build pipeline without a full image build: plan, dry run, faults (no engine, unreachable base), messages.

The real build, tagging, Ctrl-C and cache behaviour are in tests/integration/test_build_podman.py.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rocmstack.build import pipeline as P
from rocmstack.build.progress import Step
from rocmstack.build.runner import RunResult
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


cli = functools.partial(run_cli, timeout=240)


def test_count_instructions():
    text = "# c\nFROM a\n\nRUN x \\\n  && y \\\n  # inner comment\n  && z\nENV A=1 \\\n    B=2\nLABEL a=b\n"
    assert P.count_instructions(text) == 4


def test_source_url(monkeypatch):
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    assert P.source_url("https://example.org/x") == "https://example.org/x"
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/rocmstack")
    assert P.source_url() == "https://github.com/acme/rocmstack"


def test_source_url_from_git_remote(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)
    for url, want in [
        ("git@github.com:acme/rocmstack.git", "https://github.com/acme/rocmstack"),
        ("https://github.com/acme/rocmstack.git", "https://github.com/acme/rocmstack"),
        ("https://user:tok@github.com/acme/r.git", None),  # never a credential in a label
        ("/srv/git/rocmstack", None),
    ]:
        subprocess.run(
            ["git", "-C", str(tmp_path), "remote", "remove", "origin"], capture_output=True, timeout=30
        )
        subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", url], check=True, timeout=30)
        assert P.source_url(repo=tmp_path) == want, url


def _result(tail, steps, returncode=1, timed_out=False):
    return RunResult(
        returncode=returncode,
        steps=tuple(steps),
        tail=tuple(tail),
        seconds=1.0,
        timed_out=timed_out,
        failed_instruction=None,
        error="exit status 3",
        cache={"hits": 0, "misses": 1},
    )


def _plan_stub(tmp_path):
    # Only the fields failure_message reads.
    class _P:
        recipe = "tiny-pip"
        log = tmp_path / "b.log"

    return _P()


def test_failure_message_names_patch_and_step(tmp_path):
    # The applier's own failure line (rocmstack/incontext/apply_patches.py output format).
    tail = [
        "rocmstack patch FAILED: [tomli-moved] edit 1 of 1 expected 1 match(es) of '__version__ = \"9.9.9\"' "
        "in /usr/local/lib/python3.11/dist-packages/tomli/__init__.py, found 0 (upstream text moved)",
        "subprocess exited with status 3",
    ]
    step = Step(
        index=14,
        total=24,
        instruction="RUN python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/x.json",
        seconds=1.0,
        cached=False,
        failed=True,
    )
    msg = P.failure_message(_plan_stub(tmp_path), _result(tail, [step]))
    assert msg.startswith(
        "build of tiny-pip failed at step 14/24 (RUN python3 /opt/rocmstack/bin/apply_patches.py"
    )
    assert "patch tomli-moved did not apply: edit 1 of 1" in msg and msg.endswith(
        f"full log: {tmp_path / 'b.log'}"
    )


def test_failure_message_guard_and_timeout(tmp_path):
    tail = ["rocmstack guard FAILED: CUDA wheels got installed: nvidia-nccl-cu12"]
    assert "guard failed: CUDA wheels got installed" in P.failure_message(
        _plan_stub(tmp_path), _result(tail, [])
    )
    msg = P.failure_message(_plan_stub(tmp_path), _result([], [], returncode=-2, timed_out=True))
    assert "before the first step" in msg and "time limit" in msg


def test_dry_run_prints_plan_and_exact_command(tmp_path):
    proc = cli(
        "build",
        "verl-0.9.0-rocm10",
        "--gpu-arch",
        "gfx950",
        "--dry-run",
        "--out-dir",
        str(tmp_path),
        "--source-url",
        "https://example.org/r",
        "--json",
    )
    assert proc.code == 0, proc.err
    plan = json.loads(proc.out)
    assert plan["dry_run"] and plan["base"] == "docker.io/rocm/primus:v26.7"
    assert plan["tags"]["descriptive"] == "verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950"
    cmd = plan["command"]
    assert cmd[-1] == str(tmp_path / "verl-0.9.0-rocm10-gfx950" / "context")
    assert (Path(cmd[-1]) / "Dockerfile").is_file() and (Path(cmd[-1]) / "rocmstack" / "lock.json").is_file()
    assert "ROCMSTACK_REVISION=" + subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%H"], capture_output=True, text=True, timeout=30
    ).stdout.strip() in " ".join(cmd)
    assert "org.opencontainers.image.source=https://example.org/r" in cmd
    assert plan["instructions"] > 30
    human = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--dry-run", "--out-dir", str(tmp_path))
    assert human.code == 0 and "plan: build verl-0.9.0-rocm10 for gfx950" in human.out
    assert "command:" in human.out and "--iidfile" in human.out


def test_no_engine_is_one_line(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git").symlink_to(shutil.which("git"))
    env = {**os.environ, "PATH": str(bindir)}
    proc = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--out-dir", str(tmp_path), env=env)
    assert proc.code == 4, proc.err
    last = proc.err.strip().splitlines()[-1]
    assert last.startswith(
        "rocmstack: error: no usable container engine (docker: not installed; podman: not installed)"
    )
    assert "apt-get install podman buildah" in last and "Traceback" not in proc.err
    # A dry run still prints the plan, naming why it could not run.
    dry = cli(
        "build",
        "verl-0.9.0-rocm10",
        "--gpu-arch",
        "gfx950",
        "--out-dir",
        str(tmp_path),
        "--dry-run",
        "--json",
        env=env,
    )
    assert dry.code == 0 and "no usable container engine" in json.loads(dry.out)["engine"]["note"]


def test_unreachable_base_names_image_and_registry(tmp_path, podman_store):
    # .invalid never resolves (RFC 2606): the same failure as a registry out of reach, on any machine.
    proc = cli(
        "build",
        "verl-0.9.0-rocm10",
        "--gpu-arch",
        "gfx950",
        "--engine",
        "podman",
        "--out-dir",
        str(tmp_path),
        "--set",
        "base.image=registry.invalid/rocm/primus",
        env=podman_store,
    )
    assert proc.code == 4, proc.err
    last = proc.err.strip().splitlines()[-1]
    assert last.startswith(
        "rocmstack: error: cannot pull base image registry.invalid/rocm/primus:v26.7: "
        "registry registry.invalid is unreachable from this machine"
    )
    assert "plan: build verl-0.9.0-rocm10 for gfx950" in proc.err and "command:" in proc.err
    assert "Traceback" not in proc.err


def test_push_options_are_checked(tmp_path):
    proc = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--push", "--push-tags", "some")
    assert proc.code == 2 and "--push-tags 'some'" in proc.err
    proc = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--push", "--dry-run")
    assert proc.code == 2 and "--dry-run and --push" in proc.err


def test_guard_refuses_a_tag_holding_another_build_of_the_same_render(monkeypatch):
    """The registry side is what skopeo reports for a tag: its labels and its config digest (image id)."""
    from rocmstack.build import engines, pipeline
    from rocmstack.errors import CheckFailed

    h = "a" * 64
    monkeypatch.setattr(engines, "remote_labels", lambda *a, **k: {pipeline.RENDER_HASH_LABEL: h})
    monkeypatch.setattr(
        engines, "remote_manifest", lambda *a, **k: {"digest": "sha256:m", "config": "sha256:" + "1" * 64}
    )
    eng = engines.Engine(name="podman", argv=("podman",), version="4")
    assert pipeline.guard_verdict(eng, "r.io/x:t", h) == "skip"  # render hash alone: the old answer
    assert pipeline.guard_verdict(eng, "r.io/x:t", h, image_id="1" * 64) == "skip"  # this very build
    with pytest.raises(
        CheckFailed,
        match=r"render hash aaaaaaaaaaaa but from another build \(image 111111111111, this is 222222222222\)",
    ):
        pipeline.guard_verdict(eng, "r.io/x:t", h, image_id="sha256:" + "2" * 64)
