"""Plot `bench rollout` reports: tokens/s and MBU against batch size, per shape, with the roofline."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rocmstack.bench.report import HEADLINE
from rocmstack.plots import legend_below
from rocmstack.status import Status

_STYLE = {"reference": ("C0", "o"), "hf": ("C3", "s"), "vllm": ("C2", "^"), "sglang": ("C4", "v")}


def plot_reports(reports: Iterable[Mapping[str, Any]], output: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_shape: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for report in reports:
        by_shape[
            Path(report["shape"]["name"]).stem if "/" in report["shape"]["name"] else report["shape"]["name"]
        ].append(report)
    if not by_shape:
        raise ValueError("no reports to plot")
    fig, axes = plt.subplots(len(by_shape), 2, figsize=(11, 4.2 * len(by_shape)), squeeze=False)
    for row, (shape, group) in enumerate(sorted(by_shape.items())):
        ax_tps, ax_mbu = axes[row]
        rows = [
            (rep, r)
            for rep in group
            for r in rep["results"]
            if r["status"] == Status.PASS and r[HEADLINE]  # the rate the roofline bounds
        ]
        roof: dict[int, tuple[float, float | None]] = {}
        for engine in sorted({r["engine"] for _, r in rows}):
            pts = sorted((r["batch"], r[HEADLINE], r["mbu"]) for _, r in rows if r["engine"] == engine)
            color, marker = _STYLE.get(engine, ("C7", "x"))
            ax_tps.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=engine)
            ax_mbu.plot([p[0] for p in pts], [p[2] for p in pts], marker=marker, color=color, label=engine)
        for _, r in sorted(rows, key=lambda row: row[1]["engine"] != "reference"):  # reference's run first
            roof.setdefault(r["batch"], (r["roofline_tokens_per_s"], r["roofline_tokens_per_s_spec"]))
        xs = sorted(roof)
        ax_tps.plot(
            xs, [roof[x][0] for x in xs], "k--", marker="_", ms=16, label="roofline (measured copy BW)"
        )
        if all(roof[x][1] for x in xs):
            ax_tps.plot(xs, [roof[x][1] for x in xs], "k:", marker="_", ms=16, label="roofline (spec BW)")
        dev = group[0]["device"]
        settings = group[0]["settings"]
        ax_tps.set_title(
            f"{shape} on {dev['name']}: decode tokens/s (P={settings['prompt_len']}, N={settings['new_tokens']})"
        )
        ax_mbu.set_title(f"{shape}: MBU vs measured copy BW ({dev['copy_bandwidth_gb_s']:.0f} GB/s)")
        for ax in (ax_tps, ax_mbu):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("batch")
            ax.grid(True, which="both", alpha=0.3)
            legend_below(ax)
        ax_tps.set_yscale("log")
        ax_tps.set_ylabel("decode tokens/s")
        ax_mbu.set_ylabel("MBU")
        ax_mbu.set_ylim(0, 1.05)
        ax_mbu.axhline(1.0, color="k", ls="--", lw=0.8)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return output


def markdown_table(reports: Iterable[Mapping[str, Any]]) -> str:
    """The README table: one row per (shape, engine, batch)."""
    lines = [
        "| shape | engine | batch | decode tok/s | step ms | MBU (measured BW) | MBU (spec BW) | roofline tok/s "
        "| peak GB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def f(v, spec):
        return "-" if v is None else format(v, spec)

    for rep in reports:
        for r in rep["results"]:
            if r["status"] != Status.PASS:
                continue
            lines.append(
                f"| {rep['shape']['name']} | {r['engine']} | {r['batch']} | {f(r[HEADLINE], ',.0f')} | "
                f"{f(r['median_step_ms'], '.2f')} | {f(r['mbu'], '.3f')} | {f(r['mbu_spec'], '.3f')} | "
                f"{f(r['roofline_tokens_per_s'], ',.0f')} | {f(r['peak_memory_gb'], '.1f')} |"
            )
    return "\n".join(lines) + "\n"
