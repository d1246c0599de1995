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


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "lab", "GIT_AUTHOR_EMAIL": "lab@example.org",
           "GIT_COMMITTER_NAME": "lab", "GIT_COMMITTER_EMAIL": "lab@example.org"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=30, env=env
    ).stdout.strip()


def test_a_labs_recipe_in_its_own_repository_labels_the_image_with_its_commit_and_url(tmp_path, monkeypatch):
    # in the lab's CI, GITHUB_REPOSITORY may name another checkout: the recipe's own repository counts
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "someone/else")
    lab = tmp_path / "lab"
    (lab / "recipes").mkdir(parents=True)
    _git(lab, "init", "-q")
    _git(lab, "remote", "add", "origin", "git@github.com:acme/rl-images.git")
    recipe = lab / "recipes" / "acme-verl.yaml"
    recipe.write_text("name: acme-verl\nextends: verl-0.9.0-rocm10\n")
    _git(lab, "add", "-A")
    _git(lab, "commit", "-qm", "acme-verl")
    sha = _git(lab, "rev-parse", "HEAD")
    assert P.recipe_provenance(recipe) == {
        "dev.rocmstack.recipe.revision": sha,
        "dev.rocmstack.recipe.source": "https://github.com/acme/rl-images",
    }
    recipe.write_text("name: acme-verl\nextends: verl-0.9.0-rocm10\ndescription: x\n")
    assert P.recipe_provenance(recipe)["dev.rocmstack.recipe.revision"] == f"{sha}-dirty"
    assert P.recipe_provenance(ROOT / "recipes" / "slime-rocm.yaml") == {}  # rocmstack's own: the OCI labels
    outside = tmp_path / "loose" / "r.yaml"
    outside.parent.mkdir()
    outside.write_text("name: r\n")
    assert P.recipe_provenance(outside) == {}  # in no repository: nothing to trace


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
        "--output",
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
    human = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--dry-run", "--output", str(tmp_path))
    assert human.code == 0 and "plan: build verl-0.9.0-rocm10 for gfx950" in human.out
    assert "command:" in human.out and "--iidfile" in human.out


def test_no_engine_is_one_line(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git").symlink_to(shutil.which("git"))
    env = {**os.environ, "PATH": str(bindir)}
    proc = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--output", str(tmp_path), env=env)
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
        "--output",
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
        "--output",
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
    proc = cli("build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--sign", "cosign.key", "--dry-run")
    assert proc.code == 2 and "--sign signs what --push pushes" in proc.err


def test_the_plan_fixes_the_image_time_at_the_revision_and_keeps_the_render_with_base_from(tmp_path):
    """--timestamp is the revision's commit time (ROCMSTACK_CREATED); --base-from changes where the base is
    read, not the recipe: the same render hash, tags and Dockerfile FROM."""
    base = ["build", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--dry-run", "--engine", "podman", "--json"]
    plain = json.loads(cli(*base, "--output", str(tmp_path / "a")).out)
    cmd = plain["command"]
    created = plain["build_args"]["ROCMSTACK_CREATED"]
    assert int(cmd[cmd.index("--timestamp") + 1]) == P.epoch(created) and plain["base_from"] is None
    assert P.epoch("1970-01-01T00:00:00Z") == 0 and P.epoch("2026-12-06T00:00:00Z") == 1796515200
    mirrored = json.loads(
        cli(*base, "--output", str(tmp_path / "b"), "--base-from", "mirror.lab:5000/rocm/primus").out
    )
    assert mirrored["render_hash"] == plain["render_hash"] and mirrored["tags"] == plain["tags"]
    assert mirrored["base_from"] == "docker://mirror.lab:5000/rocm/primus:v26.7"  # the recipe pins no digest
    folder = tmp_path / "base"
    folder.mkdir()
    carried = json.loads(cli(*base, "--output", str(tmp_path / "c"), "--base-from", f"dir:{folder}").out)
    assert carried["base_from"] == f"dir:{folder}"
    for bad, said in (
        (f"dir:{tmp_path / 'none'}", "no such file or folder"),
        ("Not A Repo!", "neither a registry repository nor an archive"),
    ):
        proc = cli(*base, "--output", str(tmp_path / "d"), "--base-from", bad)
        assert proc.code == 2 and said in proc.err.strip().splitlines()[-1], proc.err


# Verbatim: podman 4.3.1 (Debian bookworm, --isolation chroot, overlay) on a loaded 2-core machine, the
# tail of a build whose RUN step 15 never started: the engine's re-exec of itself from a sealed memfd copy
# lost a race with the kernel (the line is containers/storage's pkg/unshare/unshare.c, copy_self_proc_exe).
RACED = """\
STEP 9/26: ENV PIP_CONSTRAINT=/opt/rocmstack/constraints.txt
--> Using cache 18fef9f65d5827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
--> 18fef9f65d5
STEP 10/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install       "iniconfig==2.1.0"
Collecting iniconfig==2.1.0
Successfully installed iniconfig-2.1.0
--> 90065a7f16d
STEP 11/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install       "tomli==2.0.1"
Successfully installed tomli-2.0.1
--> ac1535f248d
STEP 12/26: COPY --chmod=0644 rocmstack/patches/tomli-marker.json /opt/rocmstack/patches/tomli-marker.json
--> 4b82ae6ee60
STEP 13/26: RUN python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/tomli-marker.json
rocmstack patch applied: [tomli-marker] /usr/local/lib/python3.11/dist-packages/tomli/__init__.py
--> 477da181327
STEP 14/26: ENV ROCMSTACK_FIXTURE="1"
--> 678b7dafb10
STEP 15/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install "cyclonedx-python-lib<12,>=11"
Close_Fd sealing memfd copy: Device or resource busy
subprocess exited with status 1
Error: building at STEP "RUN --mount=type=cache,target=/root/.cache/pip python3 -m pip install "cyclonedx-python-lib<12,>=11"": exit status 1
"""  # noqa: E501  (verbatim)
# The same build run again, in podman's format: the layers of the first attempt come from the cache.
AGAIN = """\
STEP 9/26: ENV PIP_CONSTRAINT=/opt/rocmstack/constraints.txt
--> Using cache 18fef9f65d5827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 10/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install       "iniconfig==2.1.0"
--> Using cache 90065a7f16d5827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 11/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install       "tomli==2.0.1"
--> Using cache ac1535f248d5827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 12/26: COPY --chmod=0644 rocmstack/patches/tomli-marker.json /opt/rocmstack/patches/tomli-marker.json
--> Using cache 4b82ae6ee605827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 13/26: RUN python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/tomli-marker.json
--> Using cache 477da1813275827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 14/26: ENV ROCMSTACK_FIXTURE="1"
--> Using cache 678b7dafb105827a96cc4cc5da6da6a236fa70657422e6dcdfe9d6c6c38fb1719
STEP 15/26: RUN --mount=type=cache,target=/root/.cache/pip     python3 -m pip install "cyclonedx-python-lib<12,>=11"
Successfully installed cyclonedx-python-lib-11.0.0
--> 5d1f0e2a3b4
STEP 16/26: LABEL "org.opencontainers.image.source"="https://x.y/z"
COMMIT
--> 932ad5181e9
"""


def _replay(*outputs: str):
    """The engine's runs, replayed through the real step tracker, one output per call."""
    from rocmstack.build.progress import StepTracker
    from rocmstack.container.engine import STEP_PROGRESS

    left = list(outputs)

    def run(plan, console) -> RunResult:
        text = left.pop(0)
        tracker = StepTracker(STEP_PROGRESS)
        for line in text.splitlines(keepends=True):
            tracker.feed(line)
        ok = "Error: building at STEP" not in text
        tracker.close(ok)
        return RunResult(
            returncode=0 if ok else 1,
            steps=tuple(tracker.steps),
            tail=tuple(text.splitlines()[-30:]),
            seconds=10.0,
            timed_out=False,
            failed_instruction=tracker.failed_instruction,
            error=tracker.error,
            cache=tracker.cache_counts(),
        )

    return run, left


def test_an_engine_race_at_a_steps_start_builds_once_more_and_counts_as_one_build(tmp_path):
    from rich.console import Console

    run, left = _replay(RACED, AGAIN)
    console = Console(record=True, width=200)
    result = P.build_through_races(_plan_stub(tmp_path), console, run)
    assert result.ok and not left
    assert result.retries == ("Close_Fd sealing memfd copy: Device or resource busy",)
    said = console.export_text()
    assert "step 15/26 did not start: Close_Fd sealing memfd copy: Device or resource busy" in said
    assert "building once more" in (tmp_path / "b.log").read_text()
    # Layers 10-14 were built by the first attempt: no cache hits of this build, whatever the second says.
    cached = {s.index: s.cached for s in result.steps}
    assert cached == {9: True, 10: False, 11: False, 12: False, 13: False, 14: False, 15: False, 16: False}
    assert result.cache == {"hits": 1, "misses": 7} and result.seconds == 20.0


def test_a_failing_step_is_not_run_again_and_a_second_race_is_the_failure(tmp_path):
    from rich.console import Console

    fails = RACED.replace(
        "Close_Fd sealing memfd copy: Device or resource busy", "ERROR: No matching distribution"
    )
    run, left = _replay(fails)
    result = P.build_through_races(_plan_stub(tmp_path), Console(record=True), run)
    assert not result.ok and result.retries == () and not left

    run, left = _replay(RACED, RACED, AGAIN)
    result = P.build_through_races(_plan_stub(tmp_path), Console(record=True), run)
    assert not result.ok and len(result.retries) == 1 and left == [AGAIN]  # once more, not until it passes
    assert "step 15/26" in P.failure_message(_plan_stub(tmp_path), result)
