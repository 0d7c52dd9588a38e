"""Report figures from the cost model, with measured points overlaid and the incident's reported numbers apart.

Three kinds of number meet here and must never be confused: *predicted* (lines, from the cost model),
*measured here* (filled markers, from a benchmark sidecar, through the bench's own metrics) and *reported*
(hollow markers: the engineer's numbers, or published measurements in the validation figure). Every figure says
which is which in its legend.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, TypedDict

import matplotlib

matplotlib.use("Agg")  # figures are files; never ask for a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eagle3lab.atomic import save_figure_atomic  # noqa: E402
from eagle3lab.errors import PerfModelError  # noqa: E402
from eagle3lab.paths import repo_dir  # noqa: E402
from eagle3lab.report import incident  # noqa: E402
from eagle3lab.costmodel.perfmodel import (COMPONENTS, Deployment, PassCost, SpeculativeFlags,
                                           break_even_accept_length, max_accept_length, plain_step, plain_tok_s,
                                           spec_tok_s, speedup, verify_tokens)
from eagle3lab.costmodel.forward import Pass, forward_cost
from eagle3lab.costmodel.perfmodel import load_dataset, validate
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3
from eagle3lab.report.run_model import run_deployment, single_stream_step_s
from eagle3lab.runtime.speculative import SpeculativeSpec
from eagle3lab.report.incident_model import incident_deployment, incident_setup, incident_spec, predict_incident

COMPONENT_LABELS = {"weights": "weights read", "gemm_compute": "GEMM compute beyond weights",
                    "kv_cache": "KV cache read", "attention_compute": "attention compute beyond KV",
                    "activations": "activations", "all_reduce": "all-reduces", "sampling": "logits and sampling",
                    "launch": "fixed per-step overhead (calibrated residual)",
                    "per_request_host": "host work per running request (measured)"}
COMPONENT_COLORS = {"weights": "#4c72b0", "gemm_compute": "#8172b2", "kv_cache": "#64b5cd",
                    "attention_compute": "#2a9d8f", "activations": "#b3b3b3", "all_reduce": "#dd8452",
                    "sampling": "#c44e52", "launch": "#937860", "per_request_host": "#da8bc3"}


class PointStyle(TypedDict, total=False):
    """The ``Axes.plot`` keywords a marker style sets (typed, so that unpacking one checks against ``plot``)."""

    marker: str
    markersize: float
    markerfacecolor: str
    markeredgewidth: float
    linestyle: str
    color: str


REPORTED_STYLE: PointStyle = dict(marker="o", markersize=11, markerfacecolor="none", markeredgewidth=2,
                                  linestyle="none", color="crimson")
MEASURED_STYLE: PointStyle = dict(marker="s", markersize=7, linestyle="none", color="black")


def measured_style(marker: str, color: str = MEASURED_STYLE["color"]) -> PointStyle:
    """``MEASURED_STYLE`` with another marker (one per arm) and colour."""
    return {**MEASURED_STYLE, "marker": marker, "color": color}


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
    """Write ``<name>.png`` into ``figures/`` (or out_dir) atomically and release the figure."""
    path = (out_dir or repo_dir("figures")) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return save_figure_atomic(fig, path, dpi=110)
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------ step breakdown
def breakdown_cases(deployments: Sequence[Deployment], spec: SpeculativeFlags,
                    batches: Sequence[int] = (1, 48)) -> list[tuple[str, PassCost]]:
    """Per deployment: a plain step and a verify pass (num_draft_tokens per request) at each batch size."""

    cases = []
    for dep in deployments:
        for batch in batches:
            cases.append((f"{dep.hardware.name} x{dep.tp}\nplain, {batch} req", plain_step(dep, batch).target))
            d = verify_tokens(spec)
            cases.append((f"{dep.hardware.name} x{dep.tp}\nverify {d} tok, {batch} req",
                          forward_cost(dep.target, dep.hardware, dep.tp, dep.engine, Pass(batch, d, dep.context, d))))
    return cases


def draw_step_breakdown(cases: Sequence[tuple[str, PassCost]], title: str = "Predicted decode pass time") -> Figure:
    """Stacked horizontal bars: where each forward pass's time goes (predicted)."""
    if not cases:
        raise PerfModelError("step breakdown: no cases to draw", parameter="cases", problem="empty")
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
    ax.set_xlabel("ms per forward pass, one GPU (predicted by the cost model)")
    ax.set_title("\n".join(textwrap.wrap(title, 90)) if "\n" not in title else title, fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------- speedup
def draw_speedup(dep: Deployment, spec: SpeculativeFlags, batches: Sequence[int] = (1, 8, 48),
                 accept_taus: Sequence[float] = (2.0, 3.0, 4.0), max_batch: int = 256,
                 spec_max_batch: Optional[int] = None, measured: Sequence[MeasuredPoint] = ()) -> Figure:
    """Left: predicted speedup vs acceptance length per batch size, each line's break-even marked.
    Right: predicted speedup vs concurrency per acceptance length, EAGLE-3 capped at its request limit.
    Measured speedups (both arms at one batch) are overlaid as filled squares."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.6))
    top = max_accept_length(spec)
    taus = [1.0 + i * (top - 1.0) / 60 for i in range(61)]
    for batch in batches:
        line, = left.plot(taus, [speedup(dep, spec, batch, t) for t in taus],
                          label=f"{batch} request{'s' if batch > 1 else ''} (predicted)")
        tau_be = break_even_accept_length(dep, spec, batch)
        if tau_be <= top:
            left.plot([tau_be], [1.0], marker="v", color=line.get_color(), linestyle="none",
                      label=f"break-even {tau_be:.2f} at {batch}")
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="speedup 1 (break-even)")
    left.set_xlabel("acceptance length (tokens per verify)")
    left.set_ylabel("EAGLE-3 / plain output tok/s")
    candidates = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, max_batch}
    batch_axis = sorted(b for b in candidates if b <= max_batch)
    cap = spec_max_batch or max_batch
    for tau in accept_taus:  # beyond the request limit EAGLE-3 runs only `cap` requests; the rest queue
        tau = min(tau, top)
        right.plot(batch_axis, [spec_tok_s(dep, spec, min(b, cap), tau) / plain_tok_s(dep, b) for b in batch_axis],
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
    for ax in (left, right):  # each legend under its panel, never over a line
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(f"Predicted EAGLE-3 speedup, {dep.target.name} on {dep.tp}x {dep.hardware.name}, "
                 f"{spec.num_steps} steps, topk {spec.eagle_topk}, context {dep.context:g}", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- throughput
def draw_throughput(dep: Deployment, spec: SpeculativeFlags, max_batch: int, spec_max_batch: int,
                    accept_taus: Sequence[float] = (2.0, 3.0, 4.0), measured: Sequence[MeasuredPoint] = (),
                    show_reported: bool = False) -> Figure:
    """Output tok/s vs running requests: plain decoding up to its KV limit, EAGLE-3 up to its request limit
    (flat beyond: more clients only queue). Measured points filled; the incident's reported numbers hollow."""
    if max_batch < 1 or spec_max_batch < 1:
        raise PerfModelError(f"throughput plot: batch limits must be >= 1, got {max_batch}, {spec_max_batch}",
                             parameter="max_batch", value=(max_batch, spec_max_batch))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    grid = sorted({max(1, round(2 ** (i / 4))) for i in range(0, 4 * max(1, max_batch.bit_length()) + 1)} | {max_batch})
    grid = [b for b in grid if b <= max_batch]
    ax.plot(grid, [plain_tok_s(dep, b) for b in grid], color="black",
            label=f"plain decoding (predicted, up to {max_batch} requests)")
    for tau in accept_taus:
        tau = min(tau, max_accept_length(spec))
        rates = [spec_tok_s(dep, spec, min(b, spec_max_batch), tau) for b in grid]
        ax.plot(grid, rates, linestyle="--", label=f"EAGLE-3, acceptance {tau:g} (predicted; capped at "
                                                   f"{spec_max_batch})")
    for arm, marker in (("baseline", "s"), ("eagle3", "D")):
        pts = [p for p in measured if p.arm == arm]
        if pts:
            ax.plot([p.batch for p in pts], [p.tok_s for p in pts], **measured_style(marker),
                    label=f"{pts[0].label}: {arm}")
    if show_reported:
        ax.plot([1], [incident.SINGLE_STREAM.value], label=f"{incident.REPORTED_LABEL}: single stream "
                f"{incident.SINGLE_STREAM.value:g} tok/s", **REPORTED_STYLE)
        # the concurrency of the reported peak is unknown: a level, never a point at a made-up concurrency
        ax.axhline(incident.PEAK.value, color="crimson", linestyle=":", linewidth=1.5,
                   label=f"{incident.REPORTED_LABEL}: peak {incident.PEAK.value:,.0f} tok/s (concurrency not reported)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("running requests (concurrency)")
    ax.set_ylabel("output tokens/s")
    ax.set_title(f"{dep.target.name} on {dep.tp}x {dep.hardware.name}, context {dep.context:g} tokens", fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    return fig


# ---------------------------------------------------------------------------------------------- validation
MAX_LEGEND_SERIES = 20  # beyond this a per-series legend is unreadable; the report's appendix lists every series
PANEL_COLUMNS = 4
LEGEND_PT = 7  # the smallest legend text that reads at 100%
TITLE_CHARS = 62  # a panel title's line at 9 pt within a 5.4 in panel
MARKERS = ("o", "^", "s", "D")  # one per constant set in the parity panel


def _parity_axes(ax, lo: float, hi: float) -> None:
    """A published-vs-predicted panel: the diagonal is a perfect prediction, the band +-15%."""
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="grey", alpha=0.15,
                    label="within 15%")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published speedup")
    ax.set_ylabel("predicted speedup")
    ax.grid(alpha=0.3)


def _source_panel(ax, src, constants: str = "") -> None:
    """One source: per series, published speedups (hollow) and the model's line against batch size, the
    calibration point filled. A source whose series each have one batch size has no line to draw: its panel is a
    parity plot of its own points instead."""
    cmap = plt.get_cmap("turbo")  # one distinct colour per series (the default cycle repeats after 10)
    colours = [matplotlib.colors.to_hex(cmap(0.05 + 0.9 * i / max(1, len(src.series) - 1)))
               for i in range(len(src.series))]
    title = f"{src.source}: MAPE {src.mape_pct:.1f}% over {len(src.predicted_points)} predicted points"
    if constants:
        title += f"; {constants}"
    if all(len({p.batch for p in s.points}) == 1 for s in src.series):  # no trend to judge in one batch size
        pts = src.predicted_points
        values = [p.published_speedup for p in pts] + [p.predicted_speedup for p in pts]
        _parity_axes(ax, 0.9 * min(values, default=0.5), 1.1 * max(values, default=3.0))
        batches = sorted({p.batch for p in pts})
        for s, colour in zip(src.series, colours):
            mine = [p for p in s.points if p.role == "predicted"]
            ax.plot([p.published_speedup for p in mine], [p.predicted_speedup for p in mine], marker="o",
                    linestyle="none", markersize=4, color=colour, label=s.series)
        title += f"; one batch size per series ({', '.join(str(b) for b in batches)}): parity"
    else:
        title += f", trends {src.trends_right}/{len(src.series)}"
        for s, colour in zip(src.series, colours):
            xs = [p.batch for p in s.points]
            ax.plot(xs, [p.predicted_speedup for p in s.points], linewidth=1, color=colour)
            ax.plot(xs, [p.published_speedup for p in s.points], marker="o", markerfacecolor="none",
                    linestyle="none", color=colour, label=s.series)
            fitted = [p for p in s.points if p.role == "calibration"]
            ax.plot([p.batch for p in fitted], [p.published_speedup for p in fitted], marker="o", linestyle="none",
                    color=colour)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size (concurrent requests)")
        ax.set_ylabel("speedup (EAGLE / plain tok/s)")
        ax.grid(alpha=0.3)
    ax.set_title(textwrap.fill(title, TITLE_CHARS), fontsize=9)  # wrapped here: a panel's title never runs into the next
    if len(src.series) <= MAX_LEGEND_SERIES:
        ax.legend(fontsize=LEGEND_PT, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    else:
        ax.text(0.5, -0.22, f"{len(src.series)} series: legend left out (every series is in the validation appendix)",
                transform=ax.transAxes, ha="center", va="top", fontsize=LEGEND_PT)


def constant_sets(protocol: Any) -> dict[str, str]:
    """Each split's constant set as the figure labels it ("constants frozen 2026-12-01, superseded"), from the
    protocol the results were evaluated under (``Protocol.constants_for``); empty without a protocol."""
    if protocol is None:
        return {}
    current = protocol.current
    out = {}
    for split in ("development", "held_out", "held_out_2", "held_out_3"):
        frozen = protocol.constants_for(split)
        if frozen is not None:
            out[split] = f"constants frozen {frozen.date}" + ("" if frozen is current else ", superseded")
    return out


def draw_validation(results, protocol: Any = None) -> Figure:
    """First panel: every predicted point against its published value (the diagonal is a perfect prediction, the
    band +-15%), one marker per constant set the points were predicted with (``constant_sets``). Then one panel per
    source (``_source_panel``), in rows of ``PANEL_COLUMNS``. Panel titles carry the computed MAPE and the source's
    constant set."""
    if not results:
        raise PerfModelError("validation figure: no results", parameter="results", problem="empty")
    panels_needed = len(results) + 1
    columns = min(PANEL_COLUMNS, panels_needed)
    rows = -(-panels_needed // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.4 * columns, 6.2 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    parity, panels = flat[0], flat[1:]
    every = [v for src in results for p in src.predicted_points for v in (p.published_speedup, p.predicted_speedup)]
    _parity_axes(parity, 0.9 * min(every), 1.05 * max(every))
    sets = constant_sets(protocol)
    marker_of = {label: MARKERS[i % len(MARKERS)] for i, label in enumerate(dict.fromkeys(sets.values()))}
    for src in results:
        pts = src.predicted_points
        label = sets.get(src.split, "")
        parity.plot([p.published_speedup for p in pts], [p.predicted_speedup for p in pts],
                    marker=marker_of.get(label, "o"), linestyle="none", markersize=4,
                    label=f"{src.source} (MAPE {src.mape_pct:.1f}%{'; ' + label if label else ''})")
    parity.set_title("predicted points only (calibration points left out)", fontsize=9)
    parity.legend(fontsize=LEGEND_PT, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    for ax, src in zip(panels, results):
        _source_panel(ax, src, sets.get(src.split, ""))
    for ax in panels[len(results):]:
        ax.set_visible(False)
    fig.suptitle("Cost model vs published speedup measurements (hollow = published, line = predicted, filled = "
                 "the single-stream point a series was calibrated on; each source predicted with the constants its "
                 "set is evaluated with)", fontsize=10)
    fig.tight_layout()
    return fig


def validation_figure(out_dir: Optional[Path] = None) -> Path:
    """The validation figure as a PNG (``figures/model_validation.png``)."""

    return save_figure(draw_validation(validate(), load_dataset().protocol), "model_validation", out_dir)


# ---------------------------------------------------------------------------------------- from bench sidecars
def measured_points_from_bench(report, rate: str = "output") -> list[MeasuredPoint]:
    """Measured points of a ``bench.sweep.BenchReport``: the baseline arm and the headline EAGLE-3 arm (by their
    ``kind``; the EAGLE-3 experiments -- control drafter, shifted layers -- are not the comparison the model makes).

    rate 'output': output tok/s as a client saw it (prefill and TTFT included). rate 'decode': the bench's
    decode-only rate (``PointMetrics.decode_tok_per_s``), the rate the cost model predicts.
    """
    if rate not in ("output", "decode"):
        raise PerfModelError(f"measured points: rate must be 'output' or 'decode', got {rate!r}",
                             parameter="rate", value=rate)
    points = []
    label = f"measured here ({report.profile}, {report.date}){', decode rate' if rate == 'decode' else ''}"

    for arm in report.arms:
        if arm.kind not in (ARM_KIND_BASELINE, ARM_KIND_EAGLE3):
            continue
        kind = arm.kind
        for point in arm.measured_points():
            metrics = point.metrics
            value = metrics.output_tok_per_s if rate == "output" else metrics.decode_tok_per_s
            if value is None:
                continue
            points.append(MeasuredPoint(point.concurrency, value, kind, metrics.accept_length, label))
    return points


# ---------------------------------------------------------------------------------------------- all at once
def incident_figure_objects(context_len: Optional[float] = None,
                            measured: Sequence[MeasuredPoint] = ()) -> dict[str, Figure]:
    """The report's model figures for the incident's deployment, as figures (``incident_figures`` writes them).

    ``measured`` points belong on this deployment only (a run modelled as it: ``run_model.is_incident``); every
    other run's points go to ``run_profile_figures``, which draws them against the run's own deployment.
    """

    ctx = context_len or incident_setup().context_len
    spec = incident_spec()
    pcie = incident_deployment("rtx-pro-6000-blackwell", ctx)
    pred = predict_incident(ctx)[0]
    return {
        "step_breakdown": draw_step_breakdown(
            breakdown_cases([pcie], spec),
            f"Predicted decode pass time, {pcie.target.name} on {pcie.tp}x {pcie.hardware.name}, context {ctx:g}\n"
            f"(fixed overhead calibrated on the reported {incident.SINGLE_STREAM.value:g} tok/s)"),
        "speedup": draw_speedup(pcie, spec, max_batch=pred.baseline_max_batch, spec_max_batch=pred.spec_max_batch,
                                measured=measured),
        "throughput": draw_throughput(pcie, spec, pred.baseline_max_batch, pred.spec_max_batch, measured=measured,
                                      show_reported=True),
    }


def incident_figures(out_dir: Optional[Path] = None, context_len: Optional[float] = None,
                     measured: Sequence[MeasuredPoint] = ()) -> dict[str, Path]:
    """The incident's model figures written as PNGs (names fixed: the report links them)."""
    hardware = slug(hardware_name())
    names = {"step_breakdown": "report_step_breakdown", "speedup": f"report_speedup_{hardware}",
             "throughput": f"report_throughput_{hardware}"}
    return {kind: save_figure(fig, names[kind], out_dir)
            for kind, fig in incident_figure_objects(context_len, measured).items()}


def hardware_name() -> str:
    return incident_deployment("rtx-pro-6000-blackwell", incident_setup().context_len).hardware.name


def draw_run_throughput(dep: Deployment, spec: SpeculativeFlags, measured: Sequence[MeasuredPoint],
                        title: str) -> Figure:
    """A measured run against the model calibrated on it, decode-only rates (the rate the run check table prints):
    plain decoding predicted (line) and measured (filled squares); EAGLE-3 predicted from each point's measured
    acceptance (hollow diamonds) and measured (filled diamonds). Predicted values are computed at exactly the
    measured concurrencies, so the figure and the table agree to the printed precision."""
    base = sorted((p for p in measured if p.arm == "baseline"), key=lambda p: p.batch)
    eagle = sorted(((p, p.accept_length) for p in measured if p.arm == "eagle3" and p.accept_length is not None),
                   key=lambda point_tau: point_tau[0].batch)  # each EAGLE-3 point with its measured acceptance
    if not base:
        raise PerfModelError("run figure: no measured baseline point")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    top = max(p.batch for p in measured)
    grid = sorted({1, 2, 4, 8, 16, 32, 64, top} & set(range(1, top + 1)) | {p.batch for p in measured})
    ax.plot(grid, [plain_tok_s(dep, b) for b in grid], color="black", label="plain decoding, predicted")
    ax.plot([p.batch for p in base], [p.tok_s for p in base], **MEASURED_STYLE, label=f"plain, {base[0].label}")
    if eagle:
        ax.plot([p.batch for p, _ in eagle], [spec_tok_s(dep, spec, p.batch, tau) for p, tau in eagle],
                marker="D", markersize=9, markerfacecolor="none", markeredgewidth=1.5, linestyle="--",
                color="tab:blue", label="EAGLE-3, predicted from the measured acceptance")
        ax.plot([p.batch for p, _ in eagle], [p.tok_s for p, _ in eagle], **measured_style("D", "tab:blue"),
                label=f"EAGLE-3, {eagle[0][0].label}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(grid, [str(b) for b in grid])
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("decode tokens/s (all requests)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


RUN_FIGURE_KINDS = ("step_breakdown", "throughput")  # a run's own model figures (``run_profile_figures``)


def run_figure_name(kind: str, profile: str) -> str:
    """The file name (no extension) of a run's own model figure: ``report_<kind>_<profile>``."""
    return f"report_{kind}_{slug(profile)}"


def run_figure_files(profile: str) -> set[str]:
    """The file names of a profile's own run figures, so the report tells them from the incident's."""
    return {f"{run_figure_name(kind, profile)}.png" for kind in RUN_FIGURE_KINDS}


def run_profile_figures(report, profile, out_dir: Optional[Path] = None,
                        mem_bandwidth: Optional[float] = None) -> dict[str, Path]:
    """A profile's measured run against the cost model calibrated on it, for the run's own deployment
    (``run_model.run_deployment``: what the profile's ``cost_model`` keys resolve to, the same deployment as the run
    check table); the titles name its target and GPU."""

    step = single_stream_step_s(report)
    if step is None:
        raise PerfModelError(f"run figures: bench report of '{report.profile}' has no measured baseline point at "
                             "concurrency 1; include 1 in bench_concurrency", parameter="bench_concurrency",
                             problem="no_single_stream")
    dep, calibrated = run_deployment(profile, report, mem_bandwidth)
    spec = SpeculativeSpec.from_profile(profile, profile.draft_model)
    measured = measured_points_from_bench(report, rate="decode")
    top = max(p.batch for p in measured if p.arm == "baseline")
    gpus = f"{dep.tp}x " if dep.tp > 1 else ""
    where = f"{dep.target.name} on {gpus}{dep.hardware.name}, context {dep.context:g} tokens"
    return {
        "step_breakdown": save_figure(draw_step_breakdown(
            [(f"plain, {b} req", plain_step(dep, b).target) for b in sorted({1, top})],
            f"{where}:\npredicted decode step, overhead calibrated on the measured {step * 1e3:.2f} ms"),
            run_figure_name("step_breakdown", report.profile), out_dir),
        "throughput": save_figure(draw_run_throughput(
            dep, spec, measured, f"{where}, {spec.num_steps} steps, topk {spec.eagle_topk}, "
                                 f"{spec.num_draft_tokens} draft tokens\nmodel calibrated on {calibrated}"),
            run_figure_name("throughput", report.profile), out_dir),
    }
