"""`rocmstack validate` / `rocmstack publish` through the real console entry point."""

from __future__ import annotations

import json

import pytest


def test_image_or_in_place_is_required(cli, tmp_path):
    r = cli("validate", "--output", str(tmp_path))
    assert r.code == 2 and r.err.strip() == (
        "rocmstack: error: IMAGE missing (rocmstack validate IMAGE [--engine buildah], or --in-place)"
    )
    r = cli("validate", "img", "--in-place", "--output", str(tmp_path))
    assert r.code == 2 and "--in-place validates this node; IMAGE 'img' was given too" in r.err
    assert "Traceback" not in r.err


def test_bad_values_are_one_line_exit_2(cli, tmp_path):
    for args, text in (
        (["--engine", "lxc"], "--engine 'lxc': unknown engine"),
        (["--device", "gpu"], "--device 'gpu' is not one of auto, cuda, cpu"),
        (["--baseline", str(tmp_path / "none.json")], "no such file"),
        (["--skip", "no-such-check"], "unknown check id 'no-such-check'"),
        (["--output", str(tmp_path / "file.txt")], "file.txt': exists and is not a folder"),
    ):
        (tmp_path / "file.txt").write_text("a file where the report folder would go\n")
        r = cli("validate", "localhost/x:1", "--dry-run", "--output", str(tmp_path), *args)
        assert r.code == 2 and text in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_dry_run_prints_the_exact_buildah_commands(cli, tmp_path):
    r = cli(
        "validate",
        "localhost/x:1",
        "--engine",
        "buildah",
        "--expect-gpus",
        "0",
        "--skip-smoke",
        "--output",
        str(tmp_path / "rep"),
        "--dry-run",
        env={"ROCMSTACK_PODMAN_STORAGE_DRIVER": "vfs"},
    )
    assert r.code == 0, r.err
    lines = r.out.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("buildah --storage-driver vfs from --pull=never --name rocmstack-validate-")
    assert lines[0].endswith(" localhost/x:1")
    name = lines[0].split("--name ")[1].split()[0]
    assert f"--volume {(tmp_path / 'rep').resolve()}/.{name}/report:/report " in lines[1]
    assert lines[1].endswith(
        "-- /usr/local/bin/rocmstack validate --in-place --report /report --device auto "
        "--expect-gpus 0 --skip-smoke"
    )
    assert lines[2].startswith("buildah --storage-driver vfs rm rocmstack-validate-")
    assert not (tmp_path / "rep").exists()  # a dry run touches nothing


def test_dry_run_json(cli, tmp_path):
    r = cli(
        "validate", "localhost/x:1", "--engine", "docker", "--output", str(tmp_path), "--dry-run", "--json"
    )
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert plan["engine"] == "docker" and len(plan["commands"]) == 2 and plan["seccomp_unconfined"] is False
    assert plan["commands"][1] == ["docker", "rm", "--force", plan["container"]]


@pytest.mark.parametrize("engine", ["docker", "podman", "buildah"])
def test_dry_run_shows_the_shared_memory_every_run_gets(cli, tmp_path, engine):
    # security.md: /dev/shm of 16 GB on every host (this one has no GPU): what is shown is what runs.
    r = cli("validate", "localhost/x:1", "--engine", engine, "--output", str(tmp_path), "--dry-run", "--json")
    assert r.code == 0, r.err
    starts = json.loads(r.out)["commands"][0]  # docker/podman run, buildah from: where the flags go
    assert starts[starts.index("--shm-size") + 1] == "16g", starts
    assert not any(a.startswith("--ipc") for a in starts)


@pytest.mark.timeout(240)
def test_in_place_failure_exits_1_with_a_report(cli, tmp_path):
    r = cli(
        "validate",
        "--in-place",
        "--expect-gpus",
        "1",
        "--skip-smoke",
        "--skip-bench",
        "--output",
        str(tmp_path),
        timeout=220,
    )
    assert r.code == 1, r.err
    assert "FAIL: doctor fail (smoke, bench skipped)" in r.out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] is False and report["stages"][0]["status"] == "fail"
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.html").is_file()


def test_publish_needs_a_report(cli, tmp_path):
    r = cli("publish", "localhost/x:1", "--reports", str(tmp_path))
    assert r.code == 2 and f"--reports '{tmp_path}': no report.json in it or in a folder under it" in r.err
    r = cli("publish", "localhost/x:1")
    assert r.code == 2 and "publish needs --reports DIR" in r.err


@pytest.mark.parametrize(
    ("old", "new", "args"),
    [
        ("--report", "--reports", []),
        ("--allow-skip", "--accept-skipped", ["--reports", "."]),
    ],
)
def test_publish_old_spellings_still_work_with_a_note(cli, tmp_path, old, new, args):
    value = str(tmp_path) if old == "--report" else "no-such-check"
    r = cli("publish", "localhost/x:1", *args, old, value)
    assert r.code == 2 and f"note: {old} is deprecated; use {new}" in r.err
    assert ("no report.json" if old == "--report" else "unknown check id 'no-such-check'") in r.err


@pytest.mark.parametrize(
    ("old", "new", "value"), [("--doctor-skip", "--skip", "no-such-check"), ("--smoke-steps", "--steps", "0")]
)
def test_validate_old_spellings_still_work_with_a_note(cli, tmp_path, old, new, value):
    r = cli("validate", "localhost/x:1", "--dry-run", "--output", str(tmp_path), old, value)
    assert r.code == 2 and f"note: {old} is deprecated; use {new}" in r.err
    assert ("unknown check id 'no-such-check'" if value != "0" else "--steps 0 must be >= 1") in r.err


def test_validate_report_is_now_output_and_reads_with_a_note(cli, tmp_path):
    r = cli("validate", "localhost/x:1", "--dry-run", "--json", "--report", str(tmp_path / "r"))
    assert r.code == 0 and r.err.startswith("note: --report is deprecated; use --output\n")
    assert str(tmp_path / "r") in r.out


def test_the_in_image_run_prints_no_note_for_spellings_the_host_wrote(cli, tmp_path):
    """A user who typed --skip never reads that --doctor-skip is deprecated: the host writes the old
    spelling for the image (its previous release's rocmstack knows only that one) and says so in the env."""
    from rocmstack.validate.container import InImageArgs, plan

    dry = cli(
        "validate", "localhost/x:1", "--dry-run", "--output", str(tmp_path / "r"), "--skip", "x", "--json"
    )
    assert dry.code == 2 and "deprecated" not in dry.err  # the typed spelling: no note (x is unknown: exit 2)
    run = plan(
        engine="podman",
        host="cpu",
        image="i",
        report_dir=tmp_path / "p",
        args=InImageArgs(doctor_skip=("x",)),
    )
    env = dict(run.run[i + 1].split("=", 1) for i, a in enumerate(run.run) if a == "--env")
    argv = list(run.run[run.run.index("i") + 1 :])
    assert argv[argv.index("--doctor-skip") + 1] == "x"
    inside = cli(*argv, env=env)  # what the image runs, with what the plan gives it
    assert inside.code == 2 and "unknown check id 'x'" in inside.err
    assert "deprecated" not in inside.err
    assert "deprecated" in cli(*argv).err  # typed by a person, the old spelling still gets its note


def test_seccomp_unconfined_is_the_hosts_flag(cli, tmp_path):
    args = ["validate", "localhost/x:1", "--engine", "docker", "--output", str(tmp_path / "r"), "--dry-run"]
    plain = cli(*args, "--json")
    assert plain.code == 0, plain.err
    assert "--security-opt" not in json.loads(plain.out)["commands"][0]
    asked = cli(*args, "--seccomp-unconfined", "--json")
    assert asked.code == 0, asked.err
    cmd = json.loads(asked.out)["commands"][0]
    assert cmd[cmd.index("--security-opt") + 1] == "seccomp=unconfined"
    refused = cli("validate", "--in-place", "--seccomp-unconfined", "--output", str(tmp_path / "i"))
    assert refused.code == 2 and "--seccomp-unconfined is about the engine command" in refused.err
