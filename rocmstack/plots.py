"""What every rocmstack plot shares: the legend sits below the axes, where it can cover no point."""

from __future__ import annotations

from typing import Any


def legend_below(ax: Any, fontsize: int = 8) -> None:
    """The legend under the axes (and their x label), in as many columns as fit; save the figure with
    ``bbox_inches="tight"`` so it is kept."""
    handles, _ = ax.get_legend_handles_labels()
    if not handles:
        return
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=min(len(handles), 3),
        fontsize=fontsize,
        frameon=False,
    )
