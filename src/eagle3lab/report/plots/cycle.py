"""The cycle figure: one plain decode step next to one EAGLE-3 cycle, stacked by component group.

Drawn only from the component table (``sidecars.CycleComponentsRecord``, built by ``bench.cycle``), so it can be
redrawn without a server. The harness-only share (GPU kernels run as torch ports or interpreted Triton on this CPU)
is hatched, and a third bar shows the cycle without it; the right axis reads the same heights in plain steps.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; never ask for a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TABLEAU_COLORS  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

from eagle3lab.atomic import save_figure_atomic  # noqa: E402
from eagle3lab.paths import repo_dir  # noqa: E402
from eagle3lab.sidecars import CycleComponentsRecord  # noqa: E402

GROUP_ORDER = ("target forward", "draft forward", "model runner", "tree and acceptance", "KV bookkeeping",
               "orchestration", "harness kernels")
# matplotlib's tab10 colours, in its order, as named colours (a colormap's ``colors`` is untyped)
COLORS = list(TABLEAU_COLORS.values())


def figure_path(profile: str, out_dir: Path | None = None) -> Path:
    return (Path(out_dir) if out_dir else repo_dir("figures")) / f"cycle_components_{profile}.png"


def draw_cycle_figure(table: CycleComponentsRecord, out_dir: Path | None = None) -> Path:
    """Stacked bars (plain step, cycle, cycle without the harness kernels) in ms; returns the PNG path."""
    bars = ("one plain step", "one EAGLE-3 cycle", "cycle without\nharness kernels")
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    bottoms = [0.0, 0.0, 0.0]
    for index, group in enumerate(GROUP_ORDER):
        values = table.groups.get(group, {})
        heights = [values.get("plain_ms", 0.0), values.get("cycle_ms", 0.0),
                   0.0 if group == "harness kernels" else values.get("cycle_ms", 0.0)]
        if not any(heights):
            continue
        ax.bar(bars, heights, bottom=bottoms, label=group, color=COLORS[index % len(COLORS)],
               hatch="//" if group == "harness kernels" else None, edgecolor="white", linewidth=0.5)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        ax.text(x, total, f"{total:.1f} ms\n{total / table.plain_step_ms:.2f} plain steps", ha="center",
                va="bottom", fontsize=8)
    ax.set_ylabel("milliseconds (mean per step / cycle)")
    ax.set_ylim(0, max(bottoms) * 1.25)

    def to_steps(ms: ArrayLike) -> ArrayLike:
        return np.asarray(ms) / table.plain_step_ms

    def to_ms(steps: ArrayLike) -> ArrayLike:
        return np.asarray(steps) * table.plain_step_ms

    right = ax.secondary_yaxis("right", functions=(to_steps, to_ms))
    right.set_ylabel("plain decode steps")
    ax.set_title(f"sglang {table.speculative_num_steps}-step EAGLE-3 cycle vs plain decode step, batch size "
                 f"{table.batch_size}\nprofile '{table.profile}', measured {table.measured_on}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = figure_path(table.profile, out_dir)
    save_figure_atomic(fig, path, dpi=110)
    plt.close(fig)
    return path


SPLIT_PARTS = (("decode_ms", "decode batches"), ("prefill_ms", "prefill batches"), ("other_ms", "the rest"))


def server_time_figure_path(profile: str, out_dir: Path | None = None) -> Path:
    return (Path(out_dir) if out_dir else repo_dir("figures")) / f"server_time_{profile}.png"


def draw_server_time_figure(table: CycleComponentsRecord, out_dir: Path | None = None) -> Path | None:
    """Each concurrency's plain step and EAGLE-3 cycle as the measured windows split them (``table.by_point``,
    ``bench.server_time``): decode batches, prefill batches and the rest, stacked, in ms per decode batch; None
    when the table has no split."""
    points = sorted(table.by_point, key=lambda p: (p.concurrency, p.speculative))
    if not points:
        return None
    concurrencies = sorted({p.concurrency for p in points})
    width = 0.38
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for offset, speculative, label in ((-width / 2, False, "plain step"), (width / 2, True, "EAGLE-3 cycle")):
        mine = {p.concurrency: p for p in points if p.speculative == speculative}
        xs = [i + offset for i, c in enumerate(concurrencies) if c in mine]
        rows = [mine[c] for c in concurrencies if c in mine]
        bottoms = [0.0] * len(rows)
        for index, (field, part) in enumerate(SPLIT_PARTS):
            heights = [getattr(p, field) for p in rows]
            ax.bar(xs, heights, width, bottom=bottoms, color=COLORS[index], edgecolor="white", linewidth=0.5,
                   hatch="//" if speculative else None, label=f"{part} ({label})")
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        for x, total, p in zip(xs, bottoms, rows):
            ax.text(x, total, f"{total:.1f} ms\n{p.mean_batch_size:.2f} req", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(concurrencies)), [f"concurrency {c}" for c in concurrencies])
    ax.set_ylabel("milliseconds per decode batch (window / batches)")
    ax.set_ylim(0, max(p.wall_ms for p in points) * 1.3)
    ax.set_title(f"Where each measured window went, per plain step (plain) and per EAGLE-3 cycle (hatched)\n"
                 f"profile '{table.profile}', cycle timers, measured {table.measured_on}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    path = server_time_figure_path(table.profile, out_dir)
    save_figure_atomic(fig, path, dpi=110)
    plt.close(fig)
    return path
