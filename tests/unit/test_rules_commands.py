"""`rocmstack check`, `rocmstack lock` and the render gate, through the real console entry point."""

from __future__ import annotations

import json
import shutil

import pytest

from rocmstack.recipe.load import find_recipe

NAME = "verl-0.9.0-rocm10"
pytestmark = pytest.mark.timeout(300)


def _table_row(out: str, rule: str) -> list[str]:
    """The cells of one rule's row in the rich table, with folded lines joined back together."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"│ {rule} "))
    cells = [c.strip() for c in lines[start].split("│")[1:-1]]
    for ln in lines[start + 1 :]:
        more = [c.strip() for c in ln.split("│")[1:-1]]
        if len(more) != len(cells) or more[0]:
            break
        cells = [
            a + (" " if a and b and not a.endswith("/") and k in (2, 3) else "") + b
            for k, (a, b) in enumerate(zip(cells, more, strict=False))
        ]
    return cells


def test_check_passes_a_shipped_recipe_with_one_row_per_rule(cli):
    res = cli("check", NAME, "--json")
    assert res.code == 0, res.err
    (run,) = json.loads(res.out)
    assert run["passed"] and run["gpu_archs"] == ["gfx942", "gfx950"]
    row = {r["id"]: r for r in run["results"]}["verl-vllm-floor"]
    assert row["status"] == "pass" and row["source"] == "https://github.com/verl-project/verl/pull/7190"
    assert set(row) == {"id", "status", "severity", "reason", "fix", "source", "description"}


def test_check_fails_with_exit_1_and_names_rule_reason_fix_source(cli):
    res = cli("check", NAME, "--set", "vllm.version=0.17.0", "--set", "vllm.ref=v0.17.0")
    assert res.code == 1
    row = _table_row(res.out, "verl-vllm-floor")
    assert row[1] == "fail" and row[4] == "https://github.com/verl-project/verl/pull/7190"
    assert row[2] == "verl 0.9.0 needs vLLM >= 0.18.0, the recipe pins vLLM 0.17.0"
    assert res.err.strip() == (
        "rocmstack: error: verl-0.9.0-rocm10 [gfx942;gfx950]: rule verl-vllm-floor failed: "
        "verl 0.9.0 needs vLLM >= 0.18.0, the recipe pins vLLM 0.17.0 "
        "(pin vLLM >= 0.18.0 (e.g. v0.27.0), or use verl < 0.9)"
    )
    warned = cli(
        "check",
        NAME,
        "--set",
        "vllm.version=0.17.0",
        "--set",
        "vllm.ref=v0.17.0",
        "--ignore-rule",
        "verl-vllm-floor",
        "--json",
    )
    assert warned.code == 0
    rows = {r["id"]: r for r in json.loads(warned.out)[0]["results"]}
    assert rows["verl-vllm-floor"]["status"] == "skip"
    assert (
        rows["validated:sglang-on-primus-vllm"]["reason"]
        == "re-validate sglang: components.vllm.ref v0.27.0 -> v0.17.0"
    )


def test_check_quiet_hides_the_warn_rows_and_keeps_the_summary(cli):
    """`check -q` printed every warn row, though -q hides warnings on any command."""
    loud = cli("check", "vime-megatron-vllm-rocm7.14", "--offline")
    assert loud.code == 0 and "│ warn " in loud.out  # the recipe has warnings to hide
    res = cli("check", "vime-megatron-vllm-rocm7.14", "--offline", "-q")
    assert res.code == 0, res.err
    # 2 warn rows of the rules, 5 of the advisories of ROCm 7.x that ROCm 7.14 falls in
    assert res.out.splitlines() == ["vime-megatron-vllm-rocm7.14 [gfx942]: 42 pass, 7 warn"] and not res.err
    every = cli("check", "--all", "--offline", "-q")
    assert every.code == 0 and "│" not in every.out  # no table: only a summary line per recipe x archs
    assert "vime-megatron-vllm-rocm7.14 [gfx950]: 42 pass, 6 warn" in every.out.splitlines()


def test_check_quiet_still_shows_every_failure(cli):
    res = cli("check", NAME, "--gpu-arch", "gfx950", "--offline", "-q", "--set", "base.python=3.10")
    assert res.code == 1
    assert _table_row(res.out, "vllm-rocm-python")[1] == "fail"
    assert "│ warn " not in res.out and "verl-transformers-range" not in res.out
    assert res.out.splitlines()[0].strip() == f"{NAME} [gfx950]: 42 pass, 1 fail, 2 warn"
    assert "rule vllm-rocm-python failed" in res.err.strip().splitlines()[-1]


def test_check_bad_input_is_one_line_exit_2(cli):
    res = cli("check", NAME, "--ignore-rule", "no-such-rule")
    assert (
        res.code == 2 and res.err.count("\n") == 1 and "--ignore-rule no-such-rule: no such rule" in res.err
    )
    res = cli("check")
    assert res.code == 2 and "give a RECIPE or --all" in res.err


def test_lock_then_render_uses_the_lock_and_refuses_drift(cli, tmp_path):
    recipe = tmp_path / f"{NAME}.yaml"
    shutil.copy(find_recipe(NAME), recipe)
    # --pins-only: the pins and rules without the resolver (no network); the full lock is in test_resolver.
    res = cli("lock", str(recipe), "--gpu-arch", "gfx950", "--pins-only", "--json")
    assert res.code == 0, res.err
    lock = json.loads((tmp_path / f"{NAME}.lock.json").read_text())
    assert list(lock["entries"]) == ["gfx950"] and json.loads(res.out)[0]["packages"] == 0
    ok = cli("render", str(recipe), "--gpu-arch", "gfx950", "-o", str(tmp_path / "ctx"), "--json")
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)["render_hash"] == lock["entries"]["gfx950"]["render_hash"]
    recipe.write_text(recipe.read_text().replace("version: 0.18.0", "version: 0.18.1"))
    drift = cli("render", str(recipe), "--gpu-arch", "gfx950", "-o", str(tmp_path / "ctx2"))
    assert drift.code == 2 and not (tmp_path / "ctx2").exists()
    assert drift.err.strip().startswith(
        "rocmstack: error: verl-0.9.0-rocm10: recipe drifted from "
        "verl-0.9.0-rocm10.lock.json [gfx950]: components.megatron-core.version ("
    )
    relock = cli("render", str(recipe), "--gpu-arch", "gfx950", "-o", str(tmp_path / "ctx2"), "--relock")
    assert relock.code == 0, relock.err
    assert "relocked" in relock.err


def test_render_refuses_a_failing_set_and_labels_an_ignored_rule(cli, tmp_path):
    bad = cli("render", NAME, "--set", "env.SGLANG_ATTENTION_BACKEND=aiter", "-o", str(tmp_path / "a"))
    assert bad.code == 1 and not (tmp_path / "a").exists()
    assert "rule sglang-attention-triton failed" in bad.err
    ok = cli(
        "render",
        NAME,
        "--set",
        "env.SGLANG_ATTENTION_BACKEND=aiter",
        "--ignore-rule",
        "sglang-attention-triton",
        "-o",
        str(tmp_path / "b"),
    )
    assert ok.code == 0, ok.err
    assert "ignored rules: sglang-attention-triton" in ok.out
    assert (
        'dev.rocmstack.ignored-rules="sglang-attention-triton"' in (tmp_path / "b" / "Dockerfile").read_text()
    )


def test_lock_table_keeps_the_render_hash_and_path_whole_at_60_columns(tmp_path, capsys, monkeypatch):
    from rocmstack.cli import main

    copy = tmp_path / "deep" / "folder" / f"{NAME}.yaml"
    copy.parent.mkdir(parents=True)
    shutil.copy(find_recipe(NAME), copy)
    monkeypatch.setenv("COLUMNS", "60")
    with pytest.raises(SystemExit) as exc:
        main(["-q", "lock", str(copy), "--gpu-arch", "gfx950", "--pins-only"])
    out = capsys.readouterr().out
    entry = json.loads(copy.with_name(f"{NAME}.lock.json").read_text())["entries"]["gfx950"]
    assert exc.value.code == 0 and entry["render_hash"][:16] in out and str(copy.with_suffix("")) in out


def test_gpu_arch_in_torch_fails_as_a_rule_and_can_be_ignored(cli, tmp_path):
    args = ["render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--set", "base.torch_archs=[gfx942]"]
    refused = cli(*args, "-o", str(tmp_path / "a"))
    assert refused.code == 1 and "gpu-arch-in-torch" in refused.err, refused.err
    ignored = cli(*args, "--ignore-rule", "gpu-arch-in-torch", "-o", str(tmp_path / "b"))
    assert ignored.code == 0, ignored.err
