"""Benchmark figures, drawn only from a ``BenchReport`` (the sidecar), so they can be redrawn without a server.

Only measured points are drawn, for every arm (baseline, EAGLE-3 and its experiments, told apart by their kind).
An arm that could not run appears as a note with its reason, never as a line at zero; an arm without
speculation has no acceptance length and says so. Inter-token latency is per token (a chunk of k tokens spreads
its gap over k tokens, as sglang's bench_serving does). Every figure names the profile and the
date of the measurement, and its file name carries the profile.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # figures are files; never ask for a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eagle3lab.atomic import save_figure_atomic  # noqa: E402
from eagle3lab.bench.metrics import PointMetrics  # noqa: E402
from eagle3lab.bench.sweep import (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_NOT_RUNNABLE, ArmResult,  # noqa: E402
                                   BenchReport)
from eagle3lab.paths import repo_dir  # noqa: E402

PERCENTILE_STYLES = {"p50": "-", "p90": "--", "p99": ":"}


def measured_metrics(arm: ArmResult) -> list[tuple[int, PointMetrics]]:
    """Each measured point's concurrency and metrics: a measured point has metrics (``PointResult.measured``), so
    this drops nothing; it only says so to the type checker."""
    return [(p.concurrency, p.metrics) for p in arm.measured_points() if p.metrics is not None]


def reason_text(reason: dict[str, Any] | None, width: int = 70) -> str:
    """A short human line out of a classified reason (crash report or server death)."""
    if not reason:
        return "no reason recorded"
    for key in ("summary", "message", "classification", "kind", "error"):
        if reason.get(key):
            text = str(reason[key])
            break
    else:
        text = ", ".join(f"{k}={v}" for k, v in list(reason.items())[:3])
    return textwrap.shorten(text, width=width * 2, placeholder="...")


def _notes(report: BenchReport, *, acceptance: bool = False) -> list[str]:
    notes = []
    for arm in report.arms:
        if arm.status == ARM_NOT_RUNNABLE:
            notes.append(f"{arm.name}: not runnable on '{report.profile}' ({reason_text(arm.reason)})")
        elif not arm.measured_points():
            notes.append(f"{arm.name}: no measured point ({reason_text(arm.reason)})")
        elif acceptance and all(m.accept_length is None for _, m in measured_metrics(arm)):
            notes.append(f"{arm.name}: no speculation, so no acceptance length")
    return notes


def _finish(fig: Figure, ax: Axes, report: BenchReport, title: str) -> None:
    ax.set_title(f"{title}\nprofile '{report.profile}', measured {report.date}", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    else:  # nothing measured: say so where the lines would be, and show no scale that could read as zero
        ax.text(0.5, 0.5, "no measured points", transform=ax.transAxes, ha="center", va="center", color="gray")
        ax.set_yticks([])
    ax.grid(alpha=0.3)


def _footer(fig: Figure, notes: list[str]) -> None:
    """Notes about arms without points go under the axes, where they cannot hide a measured point."""
    text = "\n".join(textwrap.fill(n, 110) for n in notes)
    fig.tight_layout(rect=(0, 0.04 * (1 + text.count("\n")) if notes else 0, 1, 1))
    if notes:
        fig.text(0.01, 0.01, text, ha="left", va="bottom", fontsize=8,
                 bbox={"boxstyle": "round", "fc": "lightyellow", "alpha": 0.9})


def _concurrency_axis(ax: Axes, arms: list[ArmResult]) -> None:
    ticks = sorted({p.concurrency for arm in arms for p in arm.measured_points()})
    if ticks and len(ticks) > 1 and ticks[-1] / max(ticks[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    if ticks:
        ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("concurrency (requests in flight)")


def plot_throughput(report: BenchReport) -> Figure:
    """Output tokens per second against concurrency, one line per measured arm, plus bench_serving's point."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for arm in report.arms:
        points = measured_metrics(arm)
        if points:
            ax.plot([c for c, _ in points], [m.output_tok_per_s for _, m in points], marker="o", label=arm.name)
    check = report.cross_check
    if check:
        ax.plot([check["concurrency"]], [check["theirs_output_tok_per_s"]], marker="x", linestyle="none",
                markersize=10, color="black", label=f"sglang bench_serving (ratio {check['ratio']:.2f})")
    _concurrency_axis(ax, report.arms)
    ax.set_ylabel("output tokens / s")
    ax.set_ylim(bottom=0)
    _finish(fig, ax, report, "Output throughput vs concurrency")
    _footer(fig, _notes(report))
    return fig


def plot_acceptance(report: BenchReport) -> Figure:
    """Acceptance length against concurrency, for arms that speculate: sglang's per-request
    ``spec_accept_length`` averaged over requests (solid), and all tokens / all verify steps (dashed)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for index, arm in enumerate(report.arms):
        # both lengths are measured together (``bench.metrics``): None on both without speculation
        points = [(c, m.accept_length_mean, m.accept_length) for c, m in measured_metrics(arm)
                  if m.accept_length is not None and m.accept_length_mean is not None]
        if points:
            ax.plot([c for c, _, _ in points], [mean for _, mean, _ in points], marker="o", color=f"C{index}",
                    label=f"{arm.name}: mean per request")
            ax.plot([c for c, _, _ in points], [pooled for _, _, pooled in points], marker="x", linestyle="--",
                    color=f"C{index}", label=f"{arm.name}: pooled")
    _concurrency_axis(ax, report.arms)
    ax.set_ylabel("acceptance length (tokens / verify step)")
    _finish(fig, ax, report, "Speculative acceptance length vs concurrency")
    _footer(fig, _notes(report, acceptance=True))
    return fig


def pooled_histogram(arm: ArmResult) -> list[int]:
    """Verify steps by accepted draft tokens (entry k: steps that accepted k), summed over the arm's points."""
    total: list[int] = []
    for _, metrics in measured_metrics(arm):
        hist = metrics.accepted_per_verify_histogram or []
        total.extend([0] * (len(hist) - len(total)))
        for k, count in enumerate(hist):
            total[k] += count
    return total


def plot_accept_distribution(report: BenchReport) -> Figure:
    """Share of verify steps that accepted k draft tokens (k = 0 .. draft steps), one bar group per speculative
    arm, from the server's per-request ``spec_accept_histogram`` summed over the arm's measured points."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    arms = [(arm, pooled_histogram(arm)) for arm in report.arms if arm.speculative]
    arms = [(arm, hist) for arm, hist in arms if sum(hist)]
    width = 0.8 / max(len(arms), 1)
    for index, (arm, hist) in enumerate(arms):
        total = sum(hist)
        levels = sorted({p.concurrency for p in arm.measured_points()})
        ax.bar([k + (index - (len(arms) - 1) / 2) * width for k in range(len(hist))], [h / total for h in hist],
               width=width, color=f"C{index + 1}",
               label=f"{arm.name} ({total} verify steps, concurrency {', '.join(map(str, levels))})")
    if arms:
        ax.set_xticks(range(max(len(h) for _, h in arms)))
    ax.set_xlabel("draft tokens accepted in one verify step")
    ax.set_ylabel("share of verify steps")
    ax.set_ylim(0, 1)
    _finish(fig, ax, report, "Accepted draft tokens per verify step")
    _footer(fig, [n for n in _notes(report, acceptance=True) if "no speculation" not in n])
    return fig


COMPARED_KINDS = (ARM_KIND_BASELINE, ARM_KIND_EAGLE3)  # the arms the latency figure compares


def plot_latency(report: BenchReport) -> Figure:
    """TTFT, inter-token latency and end-to-end latency percentiles against concurrency, for the arms being compared
    (the baseline and the headline EAGLE-3 arm): their values set the scale, so an experiment arm's tail (the
    untrained drafter's p99 ran to seconds) cannot flatten the comparison the figure exists for. The experiment
    arms are named in a note; their latencies are in the benchmark table."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.0))
    compared = [arm for arm in report.arms if arm.kind in COMPARED_KINDS] or list(report.arms)
    for ax, (attr, label) in zip(axes, [("ttft_s", "TTFT"), ("itl_s", "inter-token latency per token"),
                                        ("e2e_s", "end-to-end latency")]):
        for index, arm in enumerate(report.arms):
            if arm not in compared:
                continue
            points = arm.measured_points()
            for pct, style in PERCENTILE_STYLES.items():
                values = [getattr(getattr(p.metrics, attr), pct) for p in points]
                pairs = [(p.concurrency, v * 1000) for p, v in zip(points, values) if v is not None]
                if pairs:
                    ax.plot(*zip(*pairs), linestyle=style, marker="o", markersize=3, color=f"C{index}",
                            label=f"{arm.name} {pct}")
        _concurrency_axis(ax, compared)
        ax.set_ylabel(f"{label} (ms)")
        ax.set_ylim(bottom=0)
        _finish(fig, ax, report, label)
        if ax.get_legend():  # one legend for the three panels, under them, never over a measured point
            ax.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    left_out = [arm.name for arm in report.arms if arm not in compared and arm.measured_points()]
    notes = _notes(report) + ([f"not drawn (experiments, their latencies in the benchmark table): "
                               f"{', '.join(left_out)}"] if left_out else [])
    _footer(fig, notes)
    note_lines = sum(textwrap.fill(n, 110).count("\n") + 1 for n in notes)
    above_notes = 0.02 + 0.06 * note_lines if notes else 0.0  # the legend stands on the notes, never under them
    if handles:
        fig.legend(handles, labels, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, above_notes),
                   ncol=min(6, len(labels)), frameon=False)
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, 0.3 + above_notes))
    return fig


def figure_paths(profile: str, out_dir: Path | None = None) -> dict[str, Path]:
    folder = Path(out_dir) if out_dir else repo_dir("figures")
    return {kind: folder / f"bench_{kind}_{profile}.png" for kind in FIGURES}


def draw_bench_figures(report: BenchReport, out_dir: Path | None = None) -> dict[str, Path]:
    """Write the three figures for ``report``; returns kind -> PNG path."""
    paths = figure_paths(report.profile, out_dir)
    for kind, draw in FIGURES.items():
        fig = draw(report)
        paths[kind].parent.mkdir(parents=True, exist_ok=True)
        save_figure_atomic(fig, paths[kind], dpi=110)
        plt.close(fig)
    return paths


FIGURES = {"throughput": plot_throughput, "acceptance": plot_acceptance, "accept_distribution": plot_accept_distribution,
           "latency": plot_latency}
