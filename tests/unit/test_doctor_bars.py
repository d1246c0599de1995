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
