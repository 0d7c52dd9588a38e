"""The headline pair on several launches: per-pair speedups, their spread, and the verdict against the rule."""

from __future__ import annotations

import pytest
from conftest import synthetic_arm

from eagle3lab.bench import launch_spread
from eagle3lab.errors import BenchError
from eagle3lab.sidecars import LaunchSample


def pair(launch: int, base_step_s: float, spec_step_s: float, concurrency: int = 1):
    return launch_spread.launch_sample(launch, synthetic_arm(f"baseline-launch{launch}", [concurrency], base_step_s,
                                                             kind="baseline"),
                                       synthetic_arm(f"eagle3-launch{launch}", [concurrency], spec_step_s,
                                                     verify_ct=4, kind="eagle3"), concurrency)


def test_spread_is_range_over_median_and_an_empty_list_is_refused():
    assert launch_spread.spread_pct([1.0, 1.5, 2.0]) == pytest.approx(66.666, rel=1e-3)
    assert launch_spread.spread_pct([3.0]) == 0.0
    with pytest.raises(BenchError):
        launch_spread.spread_pct([])


def test_each_pair_is_its_own_speedup_from_its_own_launches():
    sample = pair(2, base_step_s=0.02, spec_step_s=0.01)
    assert isinstance(sample, LaunchSample)
    assert sample.launch == 2 and sample.baseline_arm == "baseline-launch2"
    assert sample.speedup == pytest.approx(sample.eagle3_tok_s / sample.baseline_tok_s)
    assert sample.speedup > 1.5  # half the time per token
    assert sample.plain_step_ms is None  # no harness trace: rates only


def test_a_pair_that_measured_nothing_at_the_concurrency_is_a_reason_not_a_number():
    missing = launch_spread.launch_sample(3, synthetic_arm("baseline-launch3", [2], 0.02, kind="baseline"),
                                          synthetic_arm("eagle3-launch3", [2], 0.01, 4, kind="eagle3"), 1)
    assert missing == "launch 3: baseline-launch3 and eagle3-launch3 measured nothing at concurrency 1"


def test_launches_that_agree_and_launches_that_do_not():
    steady = [pair(1, 0.020, 0.010), pair(2, 0.021, 0.0105)]
    record = launch_spread.spread_record(steady, 1, "eagle3, baseline | baseline, eagle3")
    assert record is not None and record.agrees and record.speedup_spread_pct < record.tolerance_pct
    assert "The launches agree" in launch_spread.verdict(record)

    # the second launch of EAGLE-3 ran on a slow spell: same code, a third slower
    shaky = [pair(1, 0.020, 0.010), pair(2, 0.020, 0.015)]
    record = launch_spread.spread_record(shaky, 1, "eagle3, baseline | baseline, eagle3", skipped=["launch 3: x"])
    assert record is not None and not record.agrees
    assert record.speedup_min < record.speedup_max and record.speedup_spread_pct > record.tolerance_pct
    assert record.eagle3_spread_pct > 20 and record.baseline_spread_pct == pytest.approx(0.0, abs=1e-9)
    assert record.skipped == ["launch 3: x"]
    verdict = launch_spread.verdict(record)
    assert verdict.startswith("The launches disagree") and f"{record.speedup_median:.2f}x" in verdict
    rows = launch_spread.rows(record)
    assert [row["launch"] for row in rows] == [1, 2, "spread %"]


def test_one_pair_has_no_spread():
    assert launch_spread.spread_record([pair(1, 0.02, 0.01)], 1, "eagle3, baseline") is None
