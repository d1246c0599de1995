"""The command line as a whole: program-wide options (-q, --recipes-dir), empty values, bare commands."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocmstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.parametrize("args", [(), ("bench",), ("smoke",)])
def test_a_bare_group_prints_its_help_and_exits_2_without_an_empty_error(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 2 and "Usage" in out + err
    assert "error:" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", ""),
        ("render", "verl-0.9.0-rocm10", "--gpu-arch", "", "-o", "x"),
        ("render", "verl-0.9.0-rocm10", "--gpu-arch=", "-o", "x"),
        ("render", "verl-0.9.0-rocm10", "-o", " "),
        ("doctor", "--ray-address", ""),
        ("validate", ""),
        ("show", ""),
    ],
)
def test_an_empty_value_is_refused_not_replaced_by_a_default(capsys, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    assert code == 2, err
    assert err.startswith("rocmstack: error: empty value") and err.count("\n") == 1
    assert "leave an option out to get its default" in err
    assert list(tmp_path.iterdir()) == []


def test_quiet_hides_warnings_before_or_after_the_command(capsys):
    _, out, err = run(capsys, "show", "verl-0.9.0-rocm10", "--json")
    assert "warning:" in err
    for args in (
        ("-q", "show", "verl-0.9.0-rocm10", "--json"),
        ("show", "verl-0.9.0-rocm10", "--quiet", "--json"),
    ):
        code, quiet_out, quiet_err = run(capsys, *args)
        assert code == 0 and quiet_err == "" and quiet_out == out


def test_quiet_keeps_errors(capsys):
    code, _, err = run(capsys, "-q", "show", "no-such-recipe")
    assert code == 2 and "rocmstack: error: unknown recipe 'no-such-recipe'" in err


def test_recipes_dir_finds_a_users_recipe_by_name_and_restores_the_environment(capsys, monkeypatch):
    monkeypatch.delenv("ROCMSTACK_RECIPES_PATH", raising=False)
    code, out, err = run(capsys, "-q", "--recipes-dir", str(EXAMPLES), "show", "my-verl", "--json")
    assert code == 0, err
    assert '"extends": "verl-0.9.0-rocm10"' in out
    code, out, _ = run(capsys, "recipes", "--json", "--recipes-dir", str(EXAMPLES))
    assert code == 0 and '"name": "my-verl"' in out and '"name": "verl-0.9.0-rocm10"' in out
    assert "ROCMSTACK_RECIPES_PATH" not in os.environ
    code, _, err = run(capsys, "show", "my-verl")
    assert code == 2 and "--recipes-dir" in err and "ROCMSTACK_RECIPES_PATH" in err


def test_recipes_dir_must_be_a_folder(capsys, tmp_path):
    code, _, err = run(capsys, "--recipes-dir", str(tmp_path / "nope"), "recipes")
    assert code == 2 and "is not a folder" in err


@pytest.mark.parametrize(
    "command", [("show", "verl-0.9.0-rocm10"), ("recipes",), ("check", "--all", "--offline")]
)
def test_a_recipes_path_folder_that_does_not_exist_is_exit_2_naming_it(
    capsys, monkeypatch, tmp_path, command
):
    """ROCMSTACK_RECIPES_PATH=/nonexistent was skipped silently (a name then found the shipped
    recipe of that name), while --recipes-dir /nonexistent is exit 2."""
    missing = tmp_path / "nonexistent"
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", os.pathsep.join([str(EXAMPLES), str(missing)]))
    code, out, err = run(capsys, *command)
    assert code == 2 and out == ""
    assert err.strip() == (
        f"rocmstack: error: $ROCMSTACK_RECIPES_PATH: '{missing}' is not a folder "
        "(create it, or take it out of $ROCMSTACK_RECIPES_PATH)"
    )
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", str(EXAMPLES))  # every folder there: found by name
    code, out, err = run(capsys, "show", "my-verl", "--json")
    assert code == 0, err


LATIN1 = '{"name": "caf\u00e9"}'.encode("latin-1")


def test_files_the_user_gives_with_bad_bytes_are_one_line_not_a_traceback(tmp_path):
    from rocmstack.bench.baseline import load_baseline
    from rocmstack.errors import RocmstackError
    from rocmstack.gpu.shapes import load_config
    from rocmstack.lock.file import read_lock
    from rocmstack.validate.report import load

    bad = tmp_path / "bad.json"
    bad.write_bytes(LATIN1)
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "report.json").write_bytes(LATIN1)
    for call in (
        lambda: read_lock(bad),
        lambda: load(report_dir),
        lambda: load_baseline(bad),
        lambda: load_config(str(bad)),
    ):
        with pytest.raises(RocmstackError) as err:
            call()
        assert "\n" not in err.value.one_line() and int(err.value.exit_code) == 2


def test_bench_plot_of_a_non_utf8_report_exits_2(capsys, tmp_path):
    bad = tmp_path / "r.json"
    bad.write_bytes(LATIN1)
    code, _, err = run(capsys, "bench", "plot", str(bad), "-o", str(tmp_path / "p.png"))
    assert code == 2 and err.startswith(f"rocmstack: error: {bad}: cannot read a JSON report")


def test_inspect_prints_no_terminal_escape_from_the_image(capsys, monkeypatch):
    """Labels and lock.json come out of the image: escapes in them are shown, never sent (issue 20)."""
    from rocmstack.container import engine as engines

    evil = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    monkeypatch.setattr(
        engines, "detect", lambda choice: engines.Engine(name="podman", argv=("podman",), version="4")
    )
    monkeypatch.setattr(
        engines,
        "inspect_image",
        lambda e, ref: {
            "id": "sha256:" + "a" * 64,
            "repo_tags": [],
            "labels": {"dev.rocmstack.recipe": evil},
        },
    )
    lock = {"recipe": evil, "render_hash": "h", "gpu_archs": [evil], "components": {"x": {"version": evil}}}
    seen = {}

    def read_file(e, ref, path, limit=engines.READ_LIMIT):
        seen[path] = limit
        return json.dumps(lock).encode() if path.endswith("lock.json") else (evil + '\n{"a": 1}\n').encode()

    monkeypatch.setattr(engines, "read_file", read_file)
    code, out, err = run(capsys, "inspect", "img")
    assert code == 1 and "\\x1b]0;owned" in out
    assert seen["/opt/rocmstack/lock.json"] <= 16 << 20  # a bounded read
    code, out, err = run(capsys, "inspect", "img", "--sbom")
    assert code == 0 and out.endswith('\n{"a": 1}\n') and "\\x9b31m" in out
    for text in (out, err):
        assert not any((ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F for ch in text)


@pytest.mark.parametrize("command", ["publish", "tags"])
def test_promote_without_a_report_is_refused(capsys, command):
    code, _, err = run(capsys, command, "verl-0.9.0-rocm10", "--promote")
    assert code == 2 and "--promote needs --reports DIR" in err


@pytest.mark.parametrize(
    ("command", "flag"), [("publish", "--reports"), ("publish", "--report"), ("tags", "--report")]
)
def test_promote_runs_the_gate_under_either_spelling_and_tags_says_it_is_deprecated(
    capsys, monkeypatch, tmp_path, command, flag
):
    from rocmstack.container import engine as engines
    from rocmstack.publish import gate

    seen = {}

    def promote(**kw):
        seen.update(kw)
        return [{"ref": "x", "pushed": True}]

    found = engines.Engine(name="podman", argv=("podman",), version="4")
    monkeypatch.setattr(engines, "detect", lambda choice, **k: found)
    monkeypatch.setattr(gate, "load_reports", lambda dirs: [{"dir": str(d)} for d in dirs])
    monkeypatch.setattr(gate, "promote", promote)
    code, out, err = run(capsys, command, "verl-0.9.0-rocm10", "--promote", flag, str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["promoted"] == [{"ref": "x", "pushed": True}]
    assert seen["reports"] == [{"dir": str(tmp_path)}] and seen["engine"].tls_verify
    note = "note: 'rocmstack tags --promote' is deprecated; use 'rocmstack publish --promote'"
    assert (note in err) == (command == "tags")
    old_flag = "note: --report is deprecated; use --reports"
    assert (old_flag in err) == ((command, flag) == ("publish", "--report"))


@pytest.mark.parametrize(
    "args",
    [
        ("recipes",),
        ("check", "--all"),
        ("show", "verl-0.9.0-rocm10"),
        ("--help",),
        ("doctor", "--fast", "--expect-gpus", "0", "--json"),
    ],
)
def test_a_closed_pipe_exits_quietly_never_1(args):
    # `rocmstack ... | head -1`: the reader gone before rocmstack writes is the sure way to meet it.
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rocmstack", *args], stdout=write, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert proc.returncode in (0, 141), (proc.returncode, err)
    assert "Traceback" not in err and "Broken pipe" not in err and "error" not in err, err


def test_head_1_in_a_shell_exits_0_or_141():
    import subprocess
    import sys

    shell = f"{sys.executable} -m rocmstack -q check --all | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.stdout.strip() in ("0", "141"), proc


@pytest.mark.parametrize(
    "front", [[], ["-q"], ["--recipes-dir", "recipes"], ["--recipes-dir=recipes", "--quiet"]]
)
def test_the_command_is_found_after_the_global_options(front):
    from rocmstack.cli import _command

    assert _command([*front, "doctor", "--json"]) == "doctor"
    assert _command([*front, "--help"]) is None and _command(front) is None
