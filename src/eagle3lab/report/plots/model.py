"""Report figures from the cost model, with measured points overlaid and the incident's reported numbers apart.

Three kinds of number meet here and must never be confused: *predicted* (lines, from ``perfmodel``),
*measured here* (filled markers, from a benchmark sidecar) and *reported by the engineer* (hollow markers,
from ``incident``). Every figure says which is which in its legend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")  # figures are files; never ask for a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eagle3lab.report import incident  # noqa: E402
from eagle3lab.errors import PerfModelError  # noqa: E402
from eagle3lab.paths import repo_dir  # noqa: E402
from eagle3lab.report.perfmodel import (  # noqa: E402
    DraftModelConfig,
    Hardware,
    MoEModelConfig,
    SpecConfig,
    StepCost,
    baseline_tok_s,
    break_even_accept_length,
    spec_tok_s,
    speedup,
    target_forward,
)

COMPONENTS = ("weights", "kv_cache", "compute_excess", "all_reduce", "overhead")
COMPONENT_LABELS = {"weights": "weights read", "kv_cache": "KV cache read", "compute_excess": "compute beyond memory",
                    "all_reduce": "all-reduces", "overhead": "fixed overhead"}
COMPONENT_COLORS = {"weights": "#4c72b0", "kv_cache": "#64b5cd", "compute_excess": "#8172b2",
                    "all_reduce": "#dd8452", "overhead": "#937860"}
REPORTED_STYLE = dict(marker="o", markersize=11, markerfacecolor="none", markeredgewidth=2, linestyle="none",
                      color="crimson")
MEASURED_STYLE = dict(marker="s", markersize=7, linestyle="none", color="black")


@dataclass(frozen=True)
class MeasuredPoint:
    """One benchmark point measured here: concurrency, output tok/s, which arm, its acceptance length."""

    batch: int
    tok_s: float
    arm: str  # "baseline" or "eagle3"
    accept_length: Optional[float] = None
    label: str = "measured here"


def measured_speedups(points: Sequence[MeasuredPoint]) -> list[tuple[int, float, Optional[float]]]:
    """(batch, eagle3 / baseline tok/s, eagle3 acceptance) where both arms were measured at the same batch."""
    base = {p.batch: p.tok_s for p in points if p.arm == "baseline" and p.tok_s > 0}
    return [(p.batch, p.tok_s / base[p.batch], p.accept_length) for p in points
            if p.arm == "eagle3" and p.batch in base]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def save_figure(fig: Figure, name: str, out_dir: Optional[Path] = None) -> Path:
    """Write ``<name>.png`` into ``figures/`` (or out_dir) and release the figure."""
    path = (out_dir or repo_dir("figures")) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ step breakdown
def breakdown_cases(m: MoEModelConfig, hardware: Sequence[Hardware], spec: SpecConfig, context_len: float,
                    batches: Sequence[int] = (1, 48)) -> list[tuple[str, StepCost]]:
    """Per preset: a plain step and a verify step (num_draft_tokens per request) at each batch size."""
    cases = []
    for hw in hardware:
        for batch in batches:
            cases.append((f"{hw.name}\nplain, {batch} req", target_forward(m, hw, batch, context_len)))
            cases.append((f"{hw.name}\nverify {spec.num_draft_tokens} tok, {batch} req",
                          target_forward(m, hw, batch, context_len, tokens_per_request=spec.num_draft_tokens)))
    return cases


def draw_step_breakdown(cases: Sequence[tuple[str, StepCost]], title: str = "Predicted decode step time") -> Figure:
    """Stacked horizontal bars: where each forward's time goes (predicted)."""
    if not cases:
        raise PerfModelError("step breakdown: no cases to draw")
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(cases) + 1.8))
    labels = [label for label, _ in cases]
    left = [0.0] * len(cases)
    for comp in COMPONENTS:
        widths = [cost.breakdown()[comp] * 1e3 for _, cost in cases]
        if not any(widths):
            continue
        ax.barh(labels, widths, left=left, color=COMPONENT_COLORS[comp], label=COMPONENT_LABELS[comp])
        left = [a + b for a, b in zip(left, widths)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total:.1f} ms", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("ms per forward, one GPU (predicted by the cost model)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------- speedup
def draw_speedup(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, context_len: float,
                 batches: Sequence[int] = (1, 8, 48), accept_taus: Sequence[float] = (2.0, 3.0, 4.0),
                 max_batch: int = 256, spec_max_batch: Optional[int] = None,
                 measured: Sequence[MeasuredPoint] = ()) -> Figure:
    """Left: predicted speedup vs acceptance length per batch size, each line's break-even marked.
    Right: predicted speedup vs concurrency per acceptance length, EAGLE-3 capped at its request limit.
    Speedup 1 is the break-even line.
    Measured speedups (both arms at one batch) are overlaid as filled squares."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.3))
    taus = [1.0 + i * (spec.max_accept_length - 1.0) / 60 for i in range(61)]
    for batch in batches:
        line, = left.plot(taus, [speedup(m, d, hw, spec, batch, context_len, t) for t in taus],
                          label=f"{batch} request{'s' if batch > 1 else ''} (predicted)")
        tau_be = break_even_accept_length(m, d, hw, spec, batch, context_len)
        if tau_be <= spec.max_accept_length:
            left.plot([tau_be], [1.0], marker="v", color=line.get_color(), linestyle="none",
                      label=f"break-even {tau_be:.2f} at {batch}")
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="speedup 1 (break-even)")
    left.set_xlabel("acceptance length (tokens per verify)")
    left.set_ylabel("EAGLE-3 / plain output tok/s")
    candidates = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, max_batch}
    batch_axis = sorted(b for b in candidates if b <= max_batch)
    cap = spec_max_batch or max_batch
    for tau in accept_taus:  # beyond the request limit EAGLE-3 runs only `cap` requests; the rest queue
        right.plot(batch_axis, [spec_tok_s(m, d, hw, spec, min(b, cap), context_len, tau)
                                / baseline_tok_s(m, hw, b, context_len) for b in batch_axis],
                   label=f"acceptance {tau:g} (predicted)")
    right.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="speedup 1 (break-even)")
    if spec_max_batch:
        right.axvline(spec_max_batch, color="black", linestyle=":", linewidth=1,
                      label=f"sglang EAGLE request limit ({spec_max_batch})")
    right.set_xscale("log", base=2)
    right.set_xlabel("concurrent requests (EAGLE-3 runs at most the limit, plain decoding all)")
    points = measured_speedups(measured)
    if points:
        label = next(p.label for p in measured if p.arm == "eagle3")
        right.plot([b for b, _, _ in points], [s for _, s, _ in points], label=label, **MEASURED_STYLE)
        with_tau = [(t, s) for _, s, t in points if t is not None]
        if with_tau:
            left.plot([t for t, _ in with_tau], [s for _, s in with_tau], label=label, **MEASURED_STYLE)
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Predicted EAGLE-3 speedup, {m.name} on {hw.name}, "
                 f"{spec.num_steps} draft steps, context {context_len:g}", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- throughput
def draw_throughput(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, context_len: float,
                    max_batch: int, spec_max_batch: int, accept_taus: Sequence[float] = (2.0, 3.0, 4.0),
                    measured: Sequence[MeasuredPoint] = (), show_reported: bool = False) -> Figure:
    """Output tok/s vs running requests: plain decoding up to its KV limit, EAGLE-3 up to its request limit
    (flat beyond: more clients only queue). Measured points filled; the incident's reported numbers hollow."""
    if max_batch < 1 or spec_max_batch < 1:
        raise PerfModelError(f"throughput plot: batch limits must be >= 1, got {max_batch}, {spec_max_batch}")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    grid = sorted({max(1, round(2 ** (i / 4))) for i in range(0, 4 * max(1, max_batch.bit_length()) + 1)} | {max_batch})
    grid = [b for b in grid if b <= max_batch]
    ax.plot(grid, [baseline_tok_s(m, hw, b, context_len) for b in grid], color="black",
            label=f"plain decoding (predicted, up to {max_batch} requests)")
    for tau in accept_taus:
        rates = [spec_tok_s(m, d, hw, spec, min(b, spec_max_batch), context_len, tau) for b in grid]
        ax.plot(grid, rates, linestyle="--", label=f"EAGLE-3, acceptance {tau:g} (predicted; capped at "
                                                   f"{spec_max_batch})")
    for arm, marker in (("baseline", "s"), ("eagle3", "D")):
        pts = [p for p in measured if p.arm == arm]
        if pts:
            ax.plot([p.batch for p in pts], [p.tok_s for p in pts], **{**MEASURED_STYLE, "marker": marker},
                    label=f"{pts[0].label}: {arm}")
    if show_reported:
        ax.plot([1], [incident.SINGLE_STREAM.value], label=f"{incident.REPORTED_LABEL}: single stream "
                f"{incident.SINGLE_STREAM.value:g} tok/s", **REPORTED_STYLE)
        ax.axhline(incident.PEAK.value, color="crimson", linestyle=":", linewidth=1)
        ax.plot([max_batch], [incident.PEAK.value], label=f"{incident.REPORTED_LABEL}: peak {incident.PEAK.value:,.0f} "
                "tok/s (concurrency not reported)", **{**REPORTED_STYLE, "marker": "^"})
    ax.set_xscale("log", base=2)
    ax.set_xlabel("running requests (concurrency)")
    ax.set_ylabel("output tokens/s")
    ax.set_title(f"{m.name} on {hw.name}, context {context_len:g} tokens", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------- from bench sidecars
def measured_points_from_bench(report, rate: str = "output") -> list[MeasuredPoint]:
    """Measured points of a ``bench.BenchReport``: the baseline arm and the headline EAGLE-3 arm (by their
    ``kind``; the EAGLE-3 experiments -- control drafter, shifted layers -- are not the comparison the model makes).

    rate 'output': output tok/s as a client saw it (prefill and TTFT included). rate 'decode': concurrency /
    mean TPOT, the decode-only rate the cost model predicts.
    """
    if rate not in ("output", "decode"):
        raise PerfModelError(f"measured points: rate must be 'output' or 'decode', got {rate!r}")
    points = []
    label = f"measured here ({report.profile}, {report.date}){', decode rate' if rate == 'decode' else ''}"
    from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3

    for arm in report.arms:
        if arm.kind not in (ARM_KIND_BASELINE, ARM_KIND_EAGLE3):
            continue
        kind = arm.kind
        for point in arm.measured_points():
            metrics = point.metrics
            value = metrics.output_tok_per_s
            if rate == "decode":
                if not metrics.tpot_s.mean:
                    continue
                value = point.concurrency / metrics.tpot_s.mean
            points.append(MeasuredPoint(point.concurrency, value, kind, metrics.accept_length, label))
    return points


def single_stream_step_s(report) -> Optional[float]:
    """Mean time per output token of the baseline at concurrency 1 (TPOT): the step time the cost model's
    fixed overhead is calibrated on. None if that point was not measured."""
    for arm in report.arms:
        if arm.speculative:
            continue
        for point in arm.measured_points():
            if point.concurrency == 1 and point.metrics.tpot_s.mean:
                return float(point.metrics.tpot_s.mean)
    return None


# ---------------------------------------------------------------------------------------------- all at once
def incident_figures(out_dir: Optional[Path] = None, context_len: Optional[float] = None,
                     measured: Sequence[MeasuredPoint] = ()) -> dict[str, Path]:
    """The report's model figures for the incident's deployment (and the H200 comparison), written as PNGs.

    ``measured`` points belong on this deployment only (a gpu-profile run); cpu-profile points go to
    ``cpu_profile_figures``, which draws them against the tiny model on this machine.
    """
    from eagle3lab.report.presets import (INCIDENT_CONTEXT_LEN, incident_hardware, incident_spec, kimi_k25,
                                       kimi_k25_eagle3_drafter, predict_incident)

    ctx = context_len or INCIDENT_CONTEXT_LEN
    m, d, spec = kimi_k25(), kimi_k25_eagle3_drafter(), incident_spec()
    pcie, nvlink = incident_hardware(ctx)
    pred = predict_incident(ctx)[0]
    return {
        "step_breakdown": save_figure(draw_step_breakdown(
            breakdown_cases(m, [pcie, nvlink], spec, ctx),
            f"Predicted decode step time, {m.name}, context {ctx:g} (overhead calibrated on the reported 63.6 tok/s)"),
            "report_step_breakdown", out_dir),
        "speedup": save_figure(draw_speedup(m, d, pcie, spec, ctx, max_batch=pred.baseline_max_batch,
                                            spec_max_batch=pred.spec_max_batch, measured=measured),
                               f"report_speedup_{slug(pcie.name)}", out_dir),
        "throughput": save_figure(draw_throughput(m, d, pcie, spec, ctx, pred.baseline_max_batch, pred.spec_max_batch,
                                                  measured=measured, show_reported=True),
                                  f"report_throughput_{slug(pcie.name)}", out_dir),
    }


def cpu_profile_figures(report, out_dir: Optional[Path] = None,
                        mem_bandwidth: Optional[float] = None) -> dict[str, Path]:
    """The cpu profile's measured baseline against the cost model calibrated on it (tiny model, this machine).

    EAGLE-3 cannot run on CPU in sglang 0.5.9, so only plain decoding is predicted here; the figure shows how
    much of a CPU step is fixed overhead, which is why the cpu profile says nothing about GPU speedups.
    """
    from eagle3lab.report.presets import cpu_preset, incident_spec, kimi_k25_eagle3_drafter, tiny_kimi

    step = single_stream_step_s(report)
    if step is None:
        raise PerfModelError(f"cpu figures: bench report of '{report.profile}' has no measured baseline point at "
                             "concurrency 1; include 1 in bench_concurrency")
    sweep = next((a.sweep for a in report.arms if a.sweep), None) or {}
    ctx = float(sweep.get("input_len", 32)) + float(sweep.get("output_len", 32)) / 2
    m = tiny_kimi()
    hw = cpu_preset(step, ctx, m, mem_bandwidth, f"profile {report.profile}, {report.date}")
    measured = [p for p in measured_points_from_bench(report, rate="decode") if p.arm == "baseline"]
    top = max([p.batch for p in measured] + [1])
    return {
        "step_breakdown": save_figure(draw_step_breakdown(
            [(f"{hw.name}\nplain, {b} req", target_forward(m, hw, b, ctx)) for b in sorted({1, top})],
            f"{m.name}: predicted step time, overhead calibrated on the measured {step * 1e3:.1f} ms"),
            f"report_step_breakdown_{slug(report.profile)}", out_dir),
        "throughput": save_figure(draw_throughput(m, kimi_k25_eagle3_drafter(), hw, incident_spec(), ctx, top, top,
                                                  accept_taus=(), measured=measured),
                                  f"report_throughput_{slug(report.profile)}", out_dir),
    }
