"""The trained drafter's learning curves, drawn only from its stored training history (training.json).

Left: the training loss of each draft step (a moving average over optimizer steps, raw values faint). Right: the
held-out teacher-forced accuracy of each draft step and the held-out acceptance length the offline simulation of
sglang's greedy verify gives, at each evaluation. The title carries the profile, the date and the provenance the
history records (measured here, offline), and the footer the aux layer ids, the recipe's size and the CPU time.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # figures are files; never ask for a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eagle3lab.atomic import save_figure_atomic  # noqa: E402
from eagle3lab.errors import TinyModelError  # noqa: E402
from eagle3lab.paths import repo_dir  # noqa: E402

STEP_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2")
REQUIRED = ("train_curve", "evals", "date", "provenance", "aux_layer_ids", "recipe", "train_time")


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over at most ``window`` values (the first points average what exists so far)."""
    out, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


def _check(history: Mapping[str, Any]) -> None:
    missing = [key for key in REQUIRED if key not in history]
    if missing or not history.get("train_curve") or not history.get("evals"):
        raise TinyModelError(f"the training history lacks {', '.join(missing) or 'curve points'}; "
                               "rebuild the drafter (build_trained_drafter) to record it", parameter="history",
                             value=missing or ["train_curve", "evals"], problem="incomplete_history")


def plot_training(history: Mapping[str, Any], profile: str) -> Figure:
    """Loss and per-step accuracy curves of one trained drafter (nothing here is computed, only drawn)."""
    _check(history)
    curve, evals = history["train_curve"], history["evals"]
    steps = len(curve[0]["loss_per_step"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    x = [point["step"] for point in curve]
    window = max(1, len(curve) // 50)
    for k in range(steps):
        raw = [point["loss_per_step"][k] for point in curve]
        color = STEP_COLORS[k % len(STEP_COLORS)]
        left.plot(x, raw, color=color, alpha=0.15, linewidth=0.7)
        left.plot(x, moving_average(raw, window), color=color, label=f"draft step {k + 1}")
    left.set_xlabel("optimizer step")
    left.set_ylabel("cross-entropy on the target's greedy token")
    left.set_title(f"training loss (moving mean over {window} steps)", fontsize=10)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)

    ex = [e["step"] for e in evals]
    for k in range(steps):
        right.plot(ex, [e["heldout"]["accuracy_per_step"][k] for e in evals], marker="o",
                   color=STEP_COLORS[k % len(STEP_COLORS)], label=f"step {k + 1} accuracy (teacher-forced)")
    right.set_ylim(0, 1)
    right.set_xlabel("optimizer step")
    right.set_ylabel("held-out accuracy")
    twin = right.twinx()
    twin.plot(ex, [e["heldout"]["acceptance"]["mean_accept_length"] for e in evals], marker="s", color="black",
              linestyle="--", label="acceptance length (simulated verify)")
    twin.set_ylim(1, steps + 1)
    twin.set_ylabel("held-out acceptance length (tokens per verify)")
    handles = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    labels = right.get_legend_handles_labels()[1] + twin.get_legend_handles_labels()[1]
    right.legend(handles, labels, fontsize=8, loc="lower right")
    right.set_title(f"held-out prompts ({evals[-1]['heldout']['acceptance']['requests']} requests)", fontsize=10)
    right.grid(alpha=0.3)

    recipe, time_used = history["recipe"], history["train_time"]
    fig.suptitle(f"Tiny EAGLE-3 drafter training - profile '{profile}', {history['date']}\n"
                 f"{history['provenance']}", fontsize=10)
    footer = (f"aux layer ids {history['aux_layer_ids']} of a {history.get('num_layers', '?')}-layer target; "
              f"{recipe['train_prompts']} training prompts, {recipe['optimizer_steps']} steps of "
              f"{recipe['batch_size']}; training took {time_used['cpu_s']} s CPU, {time_used['wall_s']} s wall "
              f"({recipe['threads']} thread(s); wall time depends on the machine's load)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.text(0.01, 0.01, textwrap.fill(footer, 150), fontsize=8, ha="left", va="bottom")
    return fig


def training_figure_path(profile: str, out_dir: Path | None = None) -> Path:
    return (Path(out_dir) if out_dir else repo_dir("figures")) / f"drafter_training_{profile}.png"


def draw_training_figure(history: Mapping[str, Any], profile: str, out_dir: Path | None = None) -> Path:
    """Write the figure atomically; returns its path."""
    fig = plot_training(history, profile)
    try:
        return save_figure_atomic(fig, training_figure_path(profile, out_dir), dpi=110)
    finally:
        plt.close(fig)
