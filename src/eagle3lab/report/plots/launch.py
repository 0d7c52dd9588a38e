"""Notebook 01's figure: how long each launch took to reach its outcome, and how much memory it used."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def draw_launch_timings(rows: list[dict], profile: str, date: str) -> Figure:
    """Horizontal bars: seconds from launch to outcome per launch, with the outcome and peak memory as labels."""
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.6 * len(rows)))
    names = [row["launch"] for row in rows]
    seconds = [row["seconds"] for row in rows]
    colours = ["#c0392b" if row["outcome"] == "died" else "#27ae60" for row in rows]
    ax.barh(names, seconds, color=colours)
    for y, row in enumerate(rows):
        ax.text(row["seconds"], y, f"  {row['outcome']} after {row['seconds']:.1f} s, "
                                   f"peak {row['peak RSS (GiB)']} GiB", va="center")
    ax.set_xlim(0, max(seconds) * 2.4)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from launch")
    ax.set_title(f"sglang launches, measured ({profile} profile, {date})", fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig
