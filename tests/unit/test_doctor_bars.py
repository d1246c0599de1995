"""bars.yaml and --bars files: every bar has a source; bad files are one clear line; baselines round-trip."""

from __future__ import annotations

import pytest

from rocmstack.doctor.bars import default_baseline_path, load_bars, load_baseline, save_baseline
from rocmstack.errors import InputError


def test_shipped_bars_load_with_sources():
    bars = load_bars()
    mi300x = bars.for_collectives("AMD Instinct MI300X", 8)
    assert [(b.op, b.nbytes, b.min_busbw) for b in mi300x] == [("all_reduce", 8 << 30, 304.0)]
    assert bars.for_collectives("AMD Instinct MI350X", 8)[0].min_busbw == 350
    assert bars.for_collectives("AMD Instinct MI300X", 4) == []
    assert all(b.source for b in bars.collectives + bars.health)
    assert bars.for_health("NVIDIA H200").gemm_bf16_tflops == 700


def test_every_bar_names_a_pinned_source_or_says_it_has_none():
    # A URL into a moving branch (blob/main, blob/master) is no source: the file moves or was never there
    # (ROCm/cvs's rccl single-node configs are in no commit of its history). A pinned commit, an evidence
    # file of this repository, or "none (why the number is what it is)".
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    bars = load_bars()
    for bar in bars.collectives + bars.health + bars.bench:
        src = bar.source
        if src.startswith("none ("):
            continue
        url = re.search(r"https://github\.com/\S+/blob/([^/]+)/", src)
        if url:
            assert re.fullmatch(r"[0-9a-f]{40}", url[1]), (bar, "not pinned to a commit")
        else:
            evidence = re.search(r"docs/evidence/\S+", src)
            assert evidence and (root / evidence[0].rstrip(",;)")).exists(), bar


def test_rvs_gemm_targets_and_cvs_bars_as_their_sources_say():
    bars = load_bars()
    assert bars.for_health("AMD Instinct MI300X").gemm_bf16_tflops == 552  # RVS gst: 581 rand / 552 trig
    assert "581" in bars.for_health("AMD Instinct MI300X").source
    assert bars.for_health("AMD Instinct MI355X").gemm_bf16_tflops == 956
    assert all(b.source.startswith("none (") for b in bars.for_collectives("AMD Instinct MI300X", 8))


def test_every_arch_the_bench_knows_on_an_instinct_or_h200_has_a_decode_floor():
    bars = load_bars()
    for arch in ("gfx942", "gfx950", "sm_90"):
        bar = bars.for_bench(arch)
        assert bar is not None and 0.05 <= bar.min_mbu <= 0.2, arch
    assert bars.for_bench("sm_80") is None and bars.for_bench(None) is None


@pytest.mark.parametrize(
    "text,match",
    [
        (
            "collectives:\n  - {gpu: X, gpus: 2, op: allreduce, bytes: 1G, min_busbw: 1, source: s}\n",
            "op = 'allreduce'",
        ),
        (
            "collectives:\n  - {gpu: X, gpus: 2, op: all_reduce, bytes: lots, min_busbw: 1, source: s}\n",
            "bytes",
        ),
        (
            "collectives:\n  - {gpu: X, gpus: two, op: all_reduce, bytes: 1G, min_busbw: 1, source: s}\n",
            "gpus",
        ),
        ("collectives:\n  - {gpu: X, gpus: 2, op: all_reduce, bytes: 1G, min_busbw: 1}\n", "no 'source'"),
        ("[1, 2]\n", "mapping"),
        ("bench:\n  - {arch: gfx942, min_mbu: 30, source: s}\n", "not a share of the roofline"),
        ("bench:\n  - {arch: gfx942, min_mbu: 0.3}\n", "no 'source'"),
        ("a: [\n", "not YAML"),
    ],
)
def test_bad_bars_file(tmp_path, text, match):
    path = tmp_path / "bars.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        load_bars(path)


def test_missing_bars_file(tmp_path):
    with pytest.raises(InputError, match="No such file"):
        load_bars(tmp_path / "none.yaml")


def test_baseline_round_trip(tmp_path):
    path = tmp_path / "sub" / "baseline.json"
    assert load_baseline(path) == {}
    save_baseline(path, {"H200|2|all_reduce|1073741824": 331.5}, {"gpu": "H200"})
    assert load_baseline(path) == {"H200|2|all_reduce|1073741824": 331.5}
    path.write_text("{")
    with pytest.raises(InputError, match="unreadable"):
        load_baseline(path)


def test_default_baseline_path():
    assert str(default_baseline_path({"XDG_CACHE_HOME": "/c"})) == "/c/rocmstack/doctor-baseline.json"
