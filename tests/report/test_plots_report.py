"""Report figures: files are written, predicted/measured/reported are drawn apart, break-even sits where the
cost model puts it, and the validation figure draws the computed validation."""

from __future__ import annotations

import pytest

from eagle3lab.runtime.profiles import load_profile
from matplotlib.lines import Line2D

from eagle3lab.errors import PerfModelError
from eagle3lab.report import incident
from eagle3lab.costmodel.perfmodel import break_even_accept_length, plain_step
from eagle3lab.report.plots.model import (
    LEGEND_PT,
    MAX_LEGEND_SERIES,
    constant_sets,
    MeasuredPoint,
    breakdown_cases,
    draw_speedup,
    draw_step_breakdown,
    draw_throughput,
    draw_validation,
    measured_speedups,
    save_figure,
)
from eagle3lab.report.incident_model import incident_deployment, incident_spec

CTX = 1152


@pytest.fixture(scope="module")
def setup():
    return incident_deployment("rtx-pro-6000-blackwell", CTX), incident_deployment("h200", CTX), incident_spec()


def _lines(fig, label_part: str) -> list[Line2D]:
    return [ln for ax in fig.axes for ln in ax.get_lines() if label_part in str(ln.get_label())]


def test_step_breakdown_bars_sum_to_step_time(setup, tmp_path):
    pcie, h200, spec = setup
    cases = breakdown_cases([pcie, h200], spec, batches=(1,))
    fig = draw_step_breakdown(cases)
    ax = fig.axes[0]
    right_edges: dict[float, float] = {}
    for patch in ax.patches:
        y = round(patch.get_y(), 6)
        right_edges[y] = max(right_edges.get(y, 0.0), patch.get_x() + patch.get_width())
    totals = sorted(right_edges.items())
    assert [pytest.approx(t) for _, t in totals] == [c.total_s * 1e3 for _, c in cases]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"weights read", "all-reduces",
                                                                    "fixed per-step overhead (calibrated residual)"}
    assert cases[0][1].total_s == pytest.approx(plain_step(pcie, 1).target.total_s)
    path = save_figure(fig, "breakdown", tmp_path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_step_breakdown_rejects_empty():
    with pytest.raises(PerfModelError) as err:
        draw_step_breakdown([])
    assert (err.value.problem, err.value.parameter) == ("empty", "cases")


def test_speedup_marks_break_even_where_the_model_puts_it(setup):
    pcie, _, spec = setup
    fig = draw_speedup(pcie, spec, batches=(1, 48), spec_max_batch=48, max_batch=128)
    for batch in (1, 48):
        (marker,) = _lines(fig, f"break-even {break_even_accept_length(pcie, spec, batch):.2f} at {batch}")
        assert marker.get_xdata()[0] == pytest.approx(break_even_accept_length(pcie, spec, batch))
        assert marker.get_ydata()[0] == 1.0
    assert _lines(fig, "request limit (48)")
    assert not _lines(fig, "measured")


def test_speedup_overlays_measured_points_only_when_given(setup):
    pcie, _, spec = setup
    points = [MeasuredPoint(4, 100.0, "baseline"), MeasuredPoint(4, 150.0, "eagle3", 2.5, "measured here (gpu, test)"),
              MeasuredPoint(8, 90.0, "eagle3", 2.0)]  # no baseline at 8: no speedup point
    assert measured_speedups(points) == [(4, 1.5, 2.5)]
    fig = draw_speedup(pcie, spec, measured=points)
    overlays = _lines(fig, "measured here (gpu, test)")
    assert len(overlays) == 2  # speedup vs acceptance and vs concurrency
    assert {tuple(ln.get_ydata()) for ln in overlays} == {(1.5,)}


def test_throughput_draws_reported_numbers_hollow_and_labelled(setup):
    pcie, _, spec = setup
    fig = draw_throughput(pcie, spec, max_batch=200, spec_max_batch=48, show_reported=True)
    reported = _lines(fig, incident.REPORTED_LABEL)
    assert len(reported) == 2
    single = next(ln for ln in reported if "single stream" in ln.get_label())
    peak = next(ln for ln in reported if "peak" in ln.get_label())
    assert single.get_markerfacecolor() == "none" and list(single.get_ydata()) == [incident.SINGLE_STREAM.value]
    # the peak's concurrency was not reported: a level across the axis, no marker at a made-up concurrency
    assert peak.get_marker() in ("None", None, "") and set(peak.get_ydata()) == {incident.PEAK.value}
    assert "concurrency not reported" in peak.get_label()
    assert not _lines(fig, "measured")


def test_throughput_without_reported_and_with_measured(setup):
    pcie, _, spec = setup
    measured = [MeasuredPoint(1, 60.0, "baseline", label="measured here (cpu, test)")]
    fig = draw_throughput(pcie, spec, max_batch=64, spec_max_batch=48, measured=measured)
    assert not _lines(fig, incident.REPORTED_LABEL)
    (point,) = _lines(fig, "measured here (cpu, test): baseline")
    assert point.get_markerfacecolor() != "none"
    eagle_lines = _lines(fig, "EAGLE-3, acceptance 4")
    ydata = list(eagle_lines[0].get_ydata())
    assert ydata[-1] == ydata[-2]  # capped at the request limit: flat beyond 48
    with pytest.raises(PerfModelError):
        draw_throughput(pcie, spec, max_batch=0, spec_max_batch=48)


# ------------------------------------------------------------------------------------------- bench sidecars
def _bench_report(concurrencies=(1, 2), step_s=0.01, eagle_step_s=None):
    from eagle3lab.bench.sweep import ARM_MEASURED, ArmResult, BenchReport, PointResult
    from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics

    def arm(name, kind, step, verifies):
        points = []
        for conc in concurrencies:
            records = [RequestRecord(request_id=f"{name}-{conc}-{i}", concurrency=conc, phase="measure", ok=True,
                                     t_scheduled=0.0, t_sent=0.0, token_times=[0.05 + k * step for k in range(9)],
                                     t_end=0.05 + 8 * step, prompt_len=32, prompt_tokens=32, completion_tokens=9,
                                     finish_reason="length", spec_verify_ct=verifies)
                       for i in range(conc)]
            points.append(PointResult(conc, "ok", None, compute_point_metrics(records), None, conc, 0, 0, True, "now"))
        return ArmResult(name=name, status=ARM_MEASURED, kind=kind, sweep={"input_len": 32, "output_len": 9},
                         points=points)

    arms = [arm("baseline", "baseline", step_s, None)]
    if eagle_step_s:
        arms.append(arm("eagle3", "eagle3", eagle_step_s, 4))
    return BenchReport.create("cpu", arms)


def test_bench_report_gives_measured_points_and_calibration_step(tmp_path):
    from eagle3lab.report.plots.model import run_profile_figures, measured_points_from_bench
    from eagle3lab.report.run_model import single_stream_step_s

    report = _bench_report()
    points = measured_points_from_bench(report)
    assert [(p.batch, p.arm) for p in points] == [(1, "baseline"), (2, "baseline")]
    assert points[0].tok_s == pytest.approx(report.arms[0].points[0].metrics.output_tok_per_s)
    assert "measured here (cpu," in points[0].label
    assert single_stream_step_s(report) == pytest.approx(report.arms[0].points[0].metrics.tpot_s.mean)
    decode = measured_points_from_bench(report, rate="decode")
    metrics = report.arms[0].points[1].metrics
    assert decode[1].tok_s == metrics.decode_tok_per_s == pytest.approx(2 / metrics.tpot_s.mean)  # the bench's own
    assert decode[0].tok_s > points[0].tok_s  # output rate also pays the prefill and first-token wait
    with pytest.raises(PerfModelError) as err:
        measured_points_from_bench(report, rate="tokens")
    assert (err.value.parameter, err.value.value) == ("rate", "tokens")
    profile = load_profile("cpu")
    paths = run_profile_figures(report, profile, tmp_path, mem_bandwidth=1e10)
    assert set(paths) == {"step_breakdown", "throughput"}
    with pytest.raises(PerfModelError) as err:
        run_profile_figures(_bench_report(concurrencies=(2,)), profile, tmp_path, mem_bandwidth=1e10)
    assert (err.value.problem, err.value.parameter) == ("no_single_stream", "bench_concurrency")


def test_cpu_figure_is_the_run_check_deployment_and_agrees_with_its_table():
    """The figure draws the run's own deployment (depth and dtype of the profile, in the title) and its predicted
    and measured points are the run check table's values at the printed precision, EAGLE-3 included."""
    from eagle3lab.report.model_evidence import measured_run_check
    from eagle3lab.report.plots.model import draw_run_throughput, measured_points_from_bench
    from eagle3lab.report.run_model import run_deployment
    from eagle3lab.runtime.speculative import SpeculativeSpec

    profile = load_profile("cpu")
    report = _bench_report(concurrencies=(1, 2, 4), eagle_step_s=0.02)
    dep, _ = run_deployment(profile, report, 1e10)
    assert f"{profile.model_num_layers} layers, {profile.dtype}" in dep.target.name
    fig = draw_run_throughput(dep, SpeculativeSpec.from_profile(profile, profile.draft_model),
                              measured_points_from_bench(report, rate="decode"), dep.target.name)
    assert f"{profile.model_num_layers} layers, {profile.dtype}" in fig.axes[0].get_title()
    table = measured_run_check(profile, report, 1e10)["rows"]
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    plain = lines["plain decoding, predicted"]
    at = dict(zip(plain.get_xdata(), plain.get_ydata()))
    predicted_eagle = lines["EAGLE-3, predicted from the measured acceptance"]
    measured_eagle = next(ln for label, ln in lines.items() if label.startswith("EAGLE-3, measured here"))
    for i, row in enumerate(table):
        assert f"{at[row['concurrency']]:.1f}" == f"{row['predicted_baseline_tok_s']:.1f}"
        assert f"{measured_eagle.get_ydata()[i]:.1f}" == f"{row['measured_eagle3_tok_s']:.1f}"
        # the table prints the predicted speedup: the figure's predicted EAGLE-3 rate over its predicted plain rate
        ratio = predicted_eagle.get_ydata()[i] / at[row["concurrency"]]
        assert f"{ratio:.2f}" == f"{row['predicted_speedup']:.2f}"


def test_incident_figures_show_only_the_incident_deployment_and_its_reported_numbers(tmp_path):
    from eagle3lab.report.plots.model import incident_figure_objects, incident_figures

    figs = incident_figure_objects()
    bars = [t.get_text() for t in figs["step_breakdown"].axes[0].get_yticklabels()]
    assert bars and all("RTX PRO 6000" in b for b in bars)  # no H200 rows the report never discusses
    reported = _lines(figs["throughput"], incident.REPORTED_LABEL)
    assert {ln.get_label().split(":")[1].split()[0] for ln in reported} == {"single", "peak"}
    paths = incident_figures(tmp_path)
    assert {p.name for p in paths.values()} == {"report_step_breakdown.png", "report_speedup_rtx-pro-6000-blackwell-pcie.png",
                                                "report_throughput_rtx-pro-6000-blackwell-pcie.png"}


def test_validation_figure_draws_every_published_and_predicted_point():
    from eagle3lab.costmodel.perfmodel import load_dataset, validate

    results = validate()
    protocol = load_dataset().protocol
    fig = draw_validation(results, protocol)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == len(results) + 1  # the parity panel, then one per source (spare grid cells hidden)
    parity = shown[0]
    assert sum(len(ln.get_xdata()) for ln in parity.get_lines()[1:]) == sum(len(r.predicted_points) for r in results)
    kinds = set()
    sets = constant_sets(protocol)
    assert len(set(sets.values())) >= 2, "the figure mixes constant sets: each must be named"
    for ax, src in zip(shown[1:], results):
        title = " ".join(ax.get_title().split())  # wrapped onto lines so that it never runs into the next panel
        assert f"MAPE {src.mape_pct:.1f}%" in title and sets[src.split] in title
        if all(len({p.batch for p in s.points}) == 1 for s in src.series):
            # one batch size per series: a parity panel of this source's predicted points, one colour per series
            kinds.add("parity")
            assert "trends" not in title  # one batch size: no trend to judge
            dots = ax.get_lines()[1:]
            assert sum(len(ln.get_xdata()) for ln in dots) == len(src.predicted_points)
            assert "parity" in title
            colours = [ln.get_color() for ln in dots]
        else:
            kinds.add("batch")
            hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "none"]
            assert sum(len(ln.get_xdata()) for ln in hollow) == sum(len(s.points) for s in src.series)
            colours = [ln.get_color() for ln in hollow]
        assert len(set(colours)) == len(colours)  # no two series of a panel share a colour
        assert (ax.get_legend() is not None) == (len(src.series) <= MAX_LEGEND_SERIES)
    assert kinds == {"parity", "batch"}, "the dataset has both kinds of source"
    legends = [ax.get_legend() for ax in shown if ax.get_legend()]
    assert legends and all(t.get_fontsize() >= LEGEND_PT for lg in legends for t in lg.get_texts())
    parity_labels = [t.get_text() for t in parity.get_legend().get_texts()]
    for label in set(sets.values()):  # the parity panel says which constants predicted each source's points
        assert any(label in text for text in parity_labels)
    with pytest.raises(PerfModelError) as err:
        draw_validation([])
    assert (err.value.problem, err.value.parameter) == ("empty", "results")


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_the_speedup_figures_legends_sit_outside_the_data(setup):
    pcie, _, spec = setup
    fig = draw_speedup(pcie, spec, spec_max_batch=48, max_batch=128)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert not _overlaps(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
        assert all(t.get_fontsize() >= LEGEND_PT for t in legend.get_texts())
