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


OLD_INTERLEAVED = {"launch": 2, "baseline_arm": "baseline-launch2", "eagle3_arm": "eagle3-launch2",
                   "baseline_tok_s": 40.0, "eagle3_tok_s": 60.0, "speedup": 1.5, "accept_length": 3.0,
                   "method": "interleaved", "round_speedups": [1.4, 1.6], "round_accept_lengths": [3.0, 3.0]}


def test_a_launch_sample_written_before_the_interval_still_loads_and_reads_without_one():
    old = LaunchSample.model_validate(OLD_INTERLEAVED)
    assert old.round_baseline == [] and old.round_eagle3 == []
    assert old.speedup_low is None and old.speedup_high is None and old.interval_level_pct is None
    assert "bootstrap" not in launch_spread.how_measured(old)
    assert launch_spread.how_measured(old).endswith("spread 13.3%; EAGLE-3 acceptance 3.00 to 3.00)")


def test_the_sentence_carries_the_interval_only_when_there_is_one():
    rounds = {"round_baseline": [[9.0, 0.2], [9.0, 0.22]], "round_eagle3": [[9.0, 0.14], [9.0, 0.15]]}
    without = LaunchSample.model_validate({**OLD_INTERLEAVED, **rounds})
    assert "bootstrap" not in launch_spread.how_measured(without)
    sample = LaunchSample.model_validate({**OLD_INTERLEAVED, **rounds, "speedup_low": 1.234, "speedup_high": 1.789,
                                          "interval_level_pct": 90.0, "interval_resamples": 100, "interval_seed": 0})
    clause = "; pooled speedup's 90% bootstrap interval over 2 rounds 1.23x to 1.79x; EAGLE-3 acceptance"
    assert clause in launch_spread.how_measured(sample)
    record = launch_spread.spread_record([sample, pair(3, 0.02, 0.01)], 1, "eagle3, baseline | both up")
    assert record is not None
    assert f"Launch 2: 1.50x over 2 interleaved rounds (round speedups 1.40x to 1.60x, spread 13.3%{clause}" in (
        launch_spread.verdict(record))
    assert clause in launch_spread.rows(record)[0]["measured"]
    assert "bootstrap" not in launch_spread.rows(record)[1]["measured"]  # a sequential pair has no rounds


# ------------------------------------------------------------------------------------------------ common prompts
def interleaved(rounds: list[tuple[float, float, float, int]], concurrency: int = 1) -> LaunchSample:
    """An interleaved sample from (baseline seconds, EAGLE-3 seconds, EAGLE-3 acceptance, prompts) per round, each
    prompt 32 output tokens (the cpu profile's fixed output length)."""
    base = [[32.0 * n, b] for b, _, _, n in rounds]
    spec = [[32.0 * n, e] for _, e, _, n in rounds]
    b_rate = sum(t for t, _ in base) / sum(s for _, s in base)
    e_rate = sum(t for t, _ in spec) / sum(s for _, s in spec)
    return LaunchSample(launch=2, baseline_arm="b", eagle3_arm="e", baseline_tok_s=b_rate, eagle3_tok_s=e_rate,
                        speedup=e_rate / b_rate, concurrency=concurrency, method="interleaved",
                        round_speedups=[b / e for b, e, _, _ in rounds],
                        round_accept_lengths=[a for _, _, a, _ in rounds], round_baseline=base, round_eagle3=spec)


def test_the_launches_are_compared_on_the_leading_rounds_that_cover_the_sequential_launchs_prompts():
    sample = interleaved([(4.0, 2.0, 2.5, 8), (4.0, 3.0, 2.0, 8), (4.0, 4.0, 1.5, 8)])
    row = launch_spread.common_prompts(60.0, 120.0, 16, sample, output_len=32)
    assert row["rounds"] == 2 and row["prompts"] == 16 and row["interleaved_prompts"] == 24
    assert row["interleaved_speedup_common"] == pytest.approx(8.0 / 5.0)  # rounds 1-2 pooled: 512/5 over 512/8
    assert row["interleaved_speedup_all"] == pytest.approx(sample.speedup)
    assert row["apart_common_pct"] == pytest.approx(abs(1.6 / 2.0 - 1) * 100)
    # completion tokens over verify steps over the two rounds: 512 / (256/2.5 + 256/2.0)
    assert row["interleaved_accept_common"] == pytest.approx(512 / (256 / 2.5 + 256 / 2.0))


def test_no_common_prompts_when_no_round_boundary_falls_on_the_sequential_count():
    sample = interleaved([(4.0, 2.0, 2.5, 8), (4.0, 3.0, 2.0, 8)])
    assert launch_spread.common_prompts(60.0, 120.0, 12, sample, output_len=32) is None
    assert launch_spread.common_prompts(60.0, 120.0, 16, sample, output_len=0) is None  # prompts not recoverable


def test_round_prompts_come_from_the_record_else_from_whole_prompts_of_tokens():
    sample = interleaved([(4.0, 2.0, 2.5, 8), (4.0, 3.0, 2.0, 8)])
    assert launch_spread.round_prompts(sample, 32) == [8, 8]
    assert launch_spread.round_prompts(sample, 30) == []  # 256 tokens are not whole 30-token prompts
    kept = sample.model_copy(update={"round_prompts": [7, 9]})
    assert launch_spread.round_prompts(kept, 30) == [7, 9]
