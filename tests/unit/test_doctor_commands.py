"""The `rocmstack doctor` CLI through the real entry point: exit codes, formats, usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import run_cli


def test_list_checks_json():
    from rocmstack.doctor.checks import ALL_CHECKS

    result = run_cli("doctor", "--list-checks", "--json")
    assert result.code == 0
    ids = [c["id"] for c in json.loads(result.out)]
    assert ids == [c.id for c in ALL_CHECKS]
    only = run_cli("doctor", "--list-checks", "--json", "--only", "ray-env")
    assert [c["id"] for c in json.loads(only.out)] == ["ray-env"]
    assert {
        "gpu-count",
        "ray-gpus",
        "amdsmi-import",
        "visibility-masks",
        "lock-drift",
        "patches-applied",
    } <= set(ids)


def test_list_checks_table_shows_each_checks_level():
    from rocmstack.doctor.checks import ALL_CHECKS

    result = run_cli("doctor", "--list-checks", env={"COLUMNS": "250"})
    assert result.code == 0, result.err
    lines = [[cell.strip() for cell in line.replace("┃", "│").split("│")] for line in result.out.splitlines()]
    assert lines[0][:2] == ["id", "level"]
    rows = {cells[0]: cells[1] for cells in lines[2:] if len(cells) > 1 and cells[0]}
    for check in ALL_CHECKS:
        assert rows.get(check.id) == str(check.level), check.id
    assert {c.level for c in ALL_CHECKS} >= {1, 2}


def test_fast_json_exit_zero_and_junit(tmp_path):
    junit = tmp_path / "doctor.xml"
    result = run_cli("doctor", "--fast", "--json", "--junit", str(junit), "--expect-gpus", "0")
    assert result.code == 0, result.err
    assert json.loads(result.out)["schema"] == "rocmstack.doctor/2"
    assert ET.parse(junit).getroot().tag == "testsuites"


def test_a_node_without_a_gpu_is_not_ready_unless_none_is_expected():
    import os

    if any(os.path.exists(p) for p in ("/dev/kfd", "/dev/nvidia0", "/dev/dri/renderD128")):
        pytest.skip("this machine has GPU device nodes")
    result = run_cli("doctor", "--fast", "--only", "gpu-count")
    assert result.code == 1 and "NOT READY: gpu-count" in result.out
    assert run_cli("doctor", "--fast", "--only", "gpu-count", "--expect-gpus", "0").code == 0


def test_failure_exits_one():
    result = run_cli("doctor", "--fast", "--expect-gpus", "1", "--only", "gpu-count", "--markdown")
    assert result.code == 1
    assert "| `gpu-count` | ❌ fail |" in result.out


def test_usage_errors_exit_two_without_traceback():
    for args in (
        ("--only", "nope"),
        ("--json", "--markdown"),
        ("--expect-gpus", "-1"),
        ("--fast", "--deep"),
        ("--probe-timeout", "0"),
        ("--tensor-parallel", "0"),
    ):
        result = run_cli("doctor", *args)
        assert result.code == 2, (args, result)
        assert "Traceback" not in result.err and result.err.startswith("rocmstack: error:")


def test_an_unwritable_junit_path_is_refused_before_the_checks():
    result = run_cli("doctor", "--junit", "/nonexistent/doctor.xml")
    assert result.code == 2 and result.err.count("\n") == 1
    assert result.err.startswith("rocmstack: error: --junit '/nonexistent/doctor.xml': '/nonexistent' is not")


def test_only_accepts_commas_and_repeats():
    result = run_cli(
        "doctor", "--fast", "--json", "--only", "ray-env,nofile-limit", "--only", "alloc-allreduce"
    )
    assert [c["id"] for c in json.loads(result.out)["checks"]] == [
        "ray-env",
        "nofile-limit",
        "alloc-allreduce",
    ]


def test_module_entry_point():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "rocmstack.doctor", "--fast", "--json", "--only", "ray-env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["checks"][0]["id"] == "ray-env"
    # Usage errors through the module entry point are the CLI's one line and exit code, not click's panel.
    proc = subprocess.run(
        [sys.executable, "-m", "rocmstack.doctor", "--fats"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("rocmstack: error: No such option: --fats") and proc.stderr.count("\n") == 1


def test_bad_ray_address_is_one_line(tmp_path):
    result = run_cli("doctor", "--ray-address", "127.0.0.1:1", "--cluster-timeout", "20", timeout=180)
    assert result.code in (2, 4) and "Traceback" not in result.err
    assert "cannot connect to the Ray cluster" in result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "5x"], "--budget '5x' is not a positive duration"),
        (["--slurm", "cron"], "--slurm 'cron' is not a hook"),
        (["--node", "gpu07"], "--node names the Slurm node of --slurm"),
        (["--prometheus", "doctor.txt"], "reads only *.prom files"),
        (
            ["--prometheus", "/tmp/x.prom", "--ray-address", "127.0.0.1:1"],
            "--prometheus keeps this node's own",
        ),
        (["--level", "4", "--ray-address", "127.0.0.1:1"], "--level 4 (the burn-in) runs on this node"),
        (["--level", "4", "--burn-in", "0"], "--burn-in '0' is not a positive duration"),
        (["--level", "5"], "--level 5 is not 1, 2, 3 or 4"),
    ],
)
def test_fleet_options_refuse_bad_input_in_one_line(args, message):
    result = run_cli("doctor", *args)
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_minutes_is_an_old_spelling_of_burn_in_with_a_note():
    result = run_cli("doctor", "--level", "4", "--minutes", "0")
    assert result.code == 2
    assert result.err.splitlines()[0] == "note: --minutes is deprecated; use --burn-in"
    assert "--burn-in 0m must be positive" in result.err


def test_the_help_groups_the_options_by_level_and_names_only_real_ones(capsys):
    import inspect

    from rocmstack.cli import main, make_app
    from rocmstack.commands.doctor import help_panels

    panels = help_panels()  # from the option groups the command's parameters are built from
    assert len(panels) == 5
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    text = capsys.readouterr().out
    at = [text.index(f"─ {panel} ") for panel in panels]
    assert at == sorted(at)  # level 1, 2, 3, 4, then the fleet hooks
    command = next(c for c in make_app().registered_commands if c.name == "doctor").callback
    flags = {
        d
        for p in inspect.signature(command).parameters.values()
        for d in getattr(p.default, "param_decls", ())
    }
    named = [flag for flags_ in panels.values() for flag in flags_]
    assert len(named) == len(set(named)) and set(named) <= flags  # each once, and each a real option
    for panel, in_panel in panels.items():  # each under its own panel, not typer's "Options"
        box = text[text.index(f"─ {panel} ") :].split("╰", 1)[0]
        assert all(f" {flag} " in box for flag in in_panel), panel


def test_typer_reads_the_doctor_parameters_and_their_types_from_the_groups():
    # typer reads inspect.signature(eval_str=True) for the options and typing.get_type_hints for the types
    import dataclasses
    import typing
    from pathlib import Path

    from typer.utils import get_params_from_function

    from rocmstack.cli import make_app
    from rocmstack.commands.doctor import groups

    command = next(c for c in make_app().registered_commands if c.name == "doctor").callback
    declared = [
        (f.name, typing.get_type_hints(group)[f.name])
        for group in groups().values()
        for f in dataclasses.fields(group)
    ]
    read = get_params_from_function(command)
    assert [(name, meta.annotation) for name, meta in read.items()] == declared
    assert ("allow_pid", list[int]) in declared and ("junit", Path | None) in declared
