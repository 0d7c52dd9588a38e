"""Report figures: files are written, predicted/measured/reported are drawn apart, break-even sits where the
cost model puts it."""

from __future__ import annotations

import pytest
from matplotlib.lines import Line2D

from eagle3lab import incident
from eagle3lab.errors import PerfModelError
from eagle3lab.perfmodel import break_even_accept_length
from eagle3lab.perfpresets import incident_hardware, incident_spec, kimi_k25, kimi_k25_eagle3_drafter
from eagle3lab.plots_report import (
    MeasuredPoint,
    breakdown_cases,
    draw_speedup,
    draw_step_breakdown,
    draw_throughput,
    measured_speedups,
    save_figure,
)

CTX = 1152


@pytest.fixture(scope="module")
def setup():
    pcie, h200 = incident_hardware(CTX)
    return kimi_k25(), kimi_k25_eagle3_drafter(), pcie, h200, incident_spec()


def _lines(fig, label_part: str) -> list[Line2D]:
    return [ln for ax in fig.axes for ln in ax.get_lines() if label_part in str(ln.get_label())]


def test_step_breakdown_bars_sum_to_step_time(setup, tmp_path):
    m, _, pcie, h200, spec = setup
    cases = breakdown_cases(m, [pcie, h200], spec, CTX, batches=(1,))
    fig = draw_step_breakdown(cases)
    ax = fig.axes[0]
    right_edges: dict[float, float] = {}
    for patch in ax.patches:
        y = round(patch.get_y(), 6)
        right_edges[y] = max(right_edges.get(y, 0.0), patch.get_x() + patch.get_width())
    totals = sorted(right_edges.items())
    assert [pytest.approx(t) for _, t in totals] == [c.total_s * 1e3 for _, c in cases]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"weights read", "all-reduces", "fixed overhead"}
    path = save_figure(fig, "breakdown", tmp_path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_step_breakdown_rejects_empty():
    with pytest.raises(PerfModelError, match="no cases"):
        draw_step_breakdown([])


def test_speedup_marks_break_even_where_the_model_puts_it(setup):
    m, d, pcie, _, spec = setup
    fig = draw_speedup(m, d, pcie, spec, CTX, batches=(1, 48), spec_max_batch=48, max_batch=128)
    for batch in (1, 48):
        (marker,) = _lines(fig, f"break-even {break_even_accept_length(m, d, pcie, spec, batch, CTX):.2f} at {batch}")
        assert marker.get_xdata()[0] == pytest.approx(break_even_accept_length(m, d, pcie, spec, batch, CTX))
        assert marker.get_ydata()[0] == 1.0
    assert _lines(fig, "request limit (48)")
    assert not _lines(fig, "measured")


def test_speedup_overlays_measured_points_only_when_given(setup):
    m, d, pcie, _, spec = setup
    points = [MeasuredPoint(4, 100.0, "baseline"), MeasuredPoint(4, 150.0, "eagle3", 2.5, "measured here (gpu, test)"),
              MeasuredPoint(8, 90.0, "eagle3", 2.0)]  # no baseline at 8: no speedup point
    assert measured_speedups(points) == [(4, 1.5, 2.5)]
    fig = draw_speedup(m, d, pcie, spec, CTX, measured=points)
    overlays = _lines(fig, "measured here (gpu, test)")
    assert len(overlays) == 2  # speedup vs acceptance and vs concurrency
    assert {tuple(ln.get_ydata()) for ln in overlays} == {(1.5,)}


def test_throughput_draws_reported_numbers_hollow_and_labelled(setup):
    m, d, pcie, _, spec = setup
    fig = draw_throughput(m, d, pcie, spec, CTX, max_batch=200, spec_max_batch=48, show_reported=True)
    reported = _lines(fig, incident.REPORTED_LABEL)
    assert len(reported) == 2
    assert all(ln.get_markerfacecolor() == "none" for ln in reported)
    assert sorted(ln.get_ydata()[0] for ln in reported) == [incident.SINGLE_STREAM.value, incident.PEAK.value]
    assert not _lines(fig, "measured")


def test_throughput_without_reported_and_with_measured(setup):
    m, d, pcie, _, spec = setup
    measured = [MeasuredPoint(1, 60.0, "baseline", label="measured here (cpu, test)")]
    fig = draw_throughput(m, d, pcie, spec, CTX, max_batch=64, spec_max_batch=48, measured=measured)
    assert not _lines(fig, incident.REPORTED_LABEL)
    (point,) = _lines(fig, "measured here (cpu, test): baseline")
    assert point.get_markerfacecolor() != "none"
    eagle_lines = _lines(fig, "EAGLE-3, acceptance 4")
    ydata = list(eagle_lines[0].get_ydata())
    assert ydata[-1] == ydata[-2]  # capped at the request limit: flat beyond 48
    with pytest.raises(PerfModelError):
        draw_throughput(m, d, pcie, spec, CTX, max_batch=0, spec_max_batch=48)
