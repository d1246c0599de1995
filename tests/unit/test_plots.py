"""Every plot of the reports keeps its legend off the data: no point, bar or line lies under it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from rocmstack.bench.plot import plot_reports
from rocmstack.smoke.report import write_report

METRICS = [  # a run that learns: the reward climbs to the right-hand side, where a legend used to sit
    {
        "step": s, "raw_reward_mean": min(0.95, 0.05 + 0.04 * s), "raw_reward_std": 0.1,
        "zero_std_group_frac": max(0.0, 0.6 - 0.03 * s), "train_rollout_logprob_abs_diff_mean": 1e-7 * (1 + s % 3),
        "train_rollout_logprob_abs_diff_max": 1e-6 * (1 + s % 5), "time_rollout_s": 0.3, "time_logprobs_s": 0.1,
        "time_train_s": 0.4 + 0.01 * s, "time_sync_s": 0.02,
    }
    for s in range(30)
]  # fmt: skip
SUMMARY = {
    "placement": "colocated",
    "device": "cpu",
    "dtype": "float32",
    "shape": "tiny",
    "passed": True,
    "failed": [],
}


def _bench_report(shape: str) -> dict:
    def row(engine, batch, tps, mbu):
        return {
            "engine": engine, "batch": batch, "status": "pass", "tokens_per_s": tps * 0.8, "decode_tokens_per_s": tps,
            "mbu": mbu, "mbu_spec": mbu * 0.9,
            "median_step_ms": 5.0, "roofline_tokens_per_s": batch * 280.0, "roofline_tokens_per_s_spec": batch * 316.0,
            "peak_memory_gb": 31.0,
        }  # fmt: skip

    return {
        "shape": {"name": shape},
        "device": {"name": "NVIDIA H200", "copy_bandwidth_gb_s": 4248.0},
        "settings": {"prompt_len": 128, "new_tokens": 256},
        "results": [row("reference", 1, 206.0, 0.76), row("reference", 64, 9353.0, 0.71),
                    row("reference", 256, 17478.0, 0.54), row("hf", 1, 10.0, 0.035), row("hf", 64, 680.0, 0.044),
                    row("hf", 256, 3107.0, 0.074)],
    }  # fmt: skip


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting code made, kept open after it saved them."""
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda *_a, **_k: None)
    before = set(plt.get_fignums())
    yield lambda: [plt.figure(n) for n in plt.get_fignums() if n not in before]
    for n in set(plt.get_fignums()) - before:
        close(n)


def _points(ax) -> list[tuple[float, float]]:
    """Every drawn data point in display coordinates: line vertices, bar corners and tops, filled bands."""
    out = []
    for line in ax.get_lines():
        xy = line.get_xydata()
        out += [tuple(p) for p in ax.transData.transform(xy)]
    for patch in ax.patches:
        box = patch.get_window_extent()
        out += [(box.x0, box.y1), (box.x1, box.y1), ((box.x0 + box.x1) / 2, box.y1)]
    return out


def _check(fig) -> None:
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent()
        inside = [p for p in _points(ax) if box.x0 <= p[0] <= box.x1 and box.y0 <= p[1] <= box.y1]
        assert not inside, f"{ax.get_title()!r}: the legend covers {len(inside)} point(s)"
        assert not box.overlaps(ax.get_window_extent()), f"{ax.get_title()!r}: the legend lies on the axes"


def test_smoke_plots_keep_the_legend_off_every_point(tmp_path, figures):
    write_report(tmp_path, METRICS, SUMMARY)
    made = figures()
    assert len(made) == 3
    for fig in made:
        _check(fig)


def test_bench_plot_keeps_the_legend_off_every_point(tmp_path, figures):
    plot_reports([_bench_report("qwen3-8b")], tmp_path / "p.png")
    made = figures()
    assert len(made) == 1
    _check(made[0])
