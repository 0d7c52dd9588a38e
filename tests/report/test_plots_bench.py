"""Benchmark figures from a hand-written report: measured points only, not-runnable arms as notes, never zeros."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from eagle3lab.bench.sweep import (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, ArmResult,
                                   BenchReport, PointResult, not_runnable_arm)
from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
from eagle3lab.report.plots.bench import (draw_bench_figures, plot_accept_distribution, plot_acceptance,
                                          plot_latency, plot_throughput, reason_text)


def point(concurrency: int, tokens: int, status: str = "ok", verify: int | None = None,
          histogram: list[int] | None = None) -> PointResult:
    """One request sent at t=0 that streamed ``tokens`` tokens, one every 0.1 s, first at 0.1 s."""
    times = [0.1 * (i + 1) for i in range(tokens)]
    rec = RequestRecord("r", concurrency, "measure", True, 0.0, t_sent=0.0, token_times=times, t_end=times[-1],
                        completion_tokens=tokens, spec_verify_ct=verify, spec_accept_histogram=histogram)
    return PointResult(concurrency, status, None, compute_point_metrics([rec]), {}, concurrency, 0, 0, True, "t")


@pytest.fixture()
def report() -> BenchReport:
    baseline = ArmResult("baseline", "measured", ARM_KIND_BASELINE,
                         points=[point(1, 4), point(2, 8), point(4, 8, status="failed")])
    eagle = not_runnable_arm("eagle3", {"summary": "EAGLE is not supported in decode attention backend torch_native"},
                             kind=ARM_KIND_EAGLE3)
    return BenchReport("cpu", "2026-11-29", {}, [baseline, eagle],
                       cross_check={"concurrency": 2, "theirs_output_tok_per_s": 9.0, "ratio": 8.0 / 9.0})


def lines_by_label(fig) -> dict[str, tuple[list, list]]:
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ax in fig.axes for ln in ax.get_lines()}


def notes(fig) -> str:
    return " ".join(t.get_text() for t in [*fig.texts, *(t for ax in fig.axes for t in ax.texts)]).replace("\n", " ")


def test_throughput_draws_measured_points_and_notes_the_missing_arm(report):
    fig = plot_throughput(report)
    lines = lines_by_label(fig)
    # 4 tokens in 0.4 s = 10 tok/s; 8 tokens in 0.8 s = 10 tok/s; the failed c=4 point is left out.
    assert lines["baseline"][0] == [1, 2]
    assert lines["baseline"][1] == pytest.approx([10.0, 10.0])
    assert not any(label.startswith("eagle3") for label in lines)
    assert "eagle3: not runnable on 'cpu'" in notes(fig) and "torch_native" in notes(fig)
    assert "profile 'cpu', measured 2026-11-29" in fig.axes[0].get_title()
    assert any("bench_serving" in label for label in lines)
    plt.close(fig)


def test_acceptance_says_why_there_is_no_line(report):
    fig = plot_acceptance(report)
    assert [label for label in lines_by_label(fig) if not label.startswith("_")] == []
    assert "baseline: no speculation" in notes(fig) and "eagle3: not runnable" in notes(fig)
    assert "no measured points" in notes(fig) and list(fig.axes[0].get_yticks()) == []  # no scale to read 0 off
    plt.close(fig)
    report.arms.append(ArmResult("spec", "measured", ARM_KIND_EAGLE3,
                                 points=[point(1, 12, verify=4), point(2, 8, verify=4)]))
    fig = plot_acceptance(report)
    assert lines_by_label(fig)["spec: mean per request"][1] == pytest.approx([3.0, 2.0])
    assert lines_by_label(fig)["spec: pooled"][1] == pytest.approx([3.0, 2.0])
    plt.close(fig)


def test_accept_distribution_is_the_share_of_verify_steps_per_accepted_count(report):
    fig = plot_accept_distribution(report)
    assert "no measured points" in notes(fig)
    plt.close(fig)
    # 4 + 4 verify steps: accepted 0 draft tokens in 2, 1 in 2, 3 in 4 (the histograms sum over points)
    report.arms.append(ArmResult("spec", "measured", ARM_KIND_EAGLE3,
                                 points=[point(1, 12, verify=4, histogram=[0, 1, 0, 3]),
                                         point(2, 8, verify=4, histogram=[2, 1, 0, 1])]))
    report.arms.append(ArmResult("ctl", "measured", ARM_KIND_EAGLE3_CONTROL,
                                 points=[point(1, 4, verify=4, histogram=[4])]))
    fig = plot_accept_distribution(report)
    bars = {c.get_label(): [r.get_height() for r in c] for c in fig.axes[0].containers}
    spec = next(v for k, v in bars.items() if k.startswith("spec (8 verify steps"))
    ctl = next(v for k, v in bars.items() if k.startswith("ctl (4 verify steps"))
    assert spec == pytest.approx([0.25, 0.25, 0.0, 0.5]) and ctl == pytest.approx([1.0])
    plt.close(fig)


def test_latency_percentiles_in_milliseconds(report):
    fig = plot_latency(report)
    ttft, itl, e2e = ({ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()} for ax in fig.axes)
    assert ttft["baseline p50"] == pytest.approx([100.0, 100.0])  # first token 0.1 s after sending
    assert itl["baseline p99"] == pytest.approx([100.0, 100.0])
    assert e2e["baseline p50"] == pytest.approx([400.0, 800.0])
    plt.close(fig)


def test_figures_are_redrawn_from_the_saved_sidecar(report, tmp_path):
    path = report.save(tmp_path / "bench.json")
    again = BenchReport.load(path)
    assert again == report
    files = draw_bench_figures(again, tmp_path)
    assert sorted(p.name for p in files.values()) == [
        "bench_accept_distribution_cpu.png", "bench_acceptance_cpu.png", "bench_latency_cpu.png",
        "bench_throughput_cpu.png"]
    assert all(p.stat().st_size > 1000 for p in files.values())


def test_reason_text_is_short_and_never_empty():
    assert reason_text(None) == "no reason recorded"
    assert reason_text({"kind": "cpu_limitation"}) == "cpu_limitation"
    assert len(reason_text({"message": "x" * 1000}, width=40)) <= 80


def test_the_latency_scale_is_set_by_the_arms_being_compared(tmp_path):
    """An experiment arm's tail (the untrained drafter's p99 in seconds) neither sets the scale nor is drawn; the
    note names it."""
    def slow_point(concurrency: int, step_s: float) -> PointResult:
        times = [step_s * (i + 1) for i in range(8)]
        rec = RequestRecord("r", concurrency, "measure", True, 0.0, t_sent=0.0, token_times=times, t_end=times[-1],
                            completion_tokens=8, spec_verify_ct=8)
        return PointResult(concurrency, "ok", None, compute_point_metrics([rec]), {}, concurrency, 0, 0, True, "t")

    baseline = ArmResult("baseline", "measured", ARM_KIND_BASELINE, points=[point(1, 8), point(2, 8)])
    eagle = ArmResult("eagle3", "measured", ARM_KIND_EAGLE3, points=[point(1, 8, verify=4), point(2, 8, verify=4)])
    control = ArmResult("eagle3-untrained", "measured", ARM_KIND_EAGLE3_CONTROL,
                        points=[slow_point(1, 6.6), slow_point(2, 6.6)])
    fig = plot_latency(BenchReport("cpu", "2026-12-04", {}, [baseline, eagle, control]))
    drawn = lines_by_label(fig)
    assert not any(label.startswith("eagle3-untrained") for label in drawn)
    compared = max(max(y) for label, (_, y) in drawn.items() if label.split()[0] in ("baseline", "eagle3"))
    for ax in fig.axes:
        if ax.get_lines():
            assert ax.get_ylim()[1] < 2 * compared  # the compared arms fill the panel
    assert "not drawn (experiments" in notes(fig) and "eagle3-untrained" in notes(fig)
    fig.savefig(tmp_path / "bench_latency.png", dpi=110)
    plt.close(fig)
