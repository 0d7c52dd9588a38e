"""bench.interleave: the point's prompts split into mirrored blocks, the arms pooled over their blocks, and the
interleaved launch pair (rates, round speedups, and the cycle of two servers that wrote one trace at once)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import synthetic_arm
from test_cycle import T0, _arm, _cycle, _plain, _trace

from eagle3lab.bench import cycle, interleave, launch_spread
from eagle3lab.bench.workload import SweepConfig, measure_prompts
from eagle3lab.errors import BenchError
from eagle3lab.sidecars import LaunchSample


def config(**changes) -> SweepConfig:
    return dataclasses.replace(SweepConfig(concurrency=[1, 2, 4], input_len=8, output_len=8, num_prompts=16,
                                           vocab_size=512), **changes)


def test_rounds_mirror_the_order_of_the_arms_and_need_one_round():
    assert interleave.round_order(4) == [("baseline", "eagle3"), ("eagle3", "baseline")] * 2
    with pytest.raises(BenchError, match="at least one round"):
        interleave.round_order(0)


def test_blocks_partition_exactly_the_prompts_of_the_point_in_order():
    point = config()
    blocks = interleave.block_configs(point, 1, 3)
    assert [b.num_prompts for b in blocks] == [6, 5, 5]
    assert all(b.concurrency == [1] for b in blocks)
    joined = [prompt for block in blocks for prompt in measure_prompts(block, 1)]
    assert joined == measure_prompts(point, 1)
    assert len({tuple(p) for p in joined}) == 16  # no prompt twice


def test_more_prompts_than_the_point_continue_its_stream_past_the_points_own():
    point = config()
    blocks = interleave.block_configs(point, 1, 6, prompts=48)
    assert [b.num_prompts for b in blocks] == [8] * 6
    joined = [prompt for block in blocks for prompt in measure_prompts(block, 1)]
    assert joined[:16] == measure_prompts(point, 1) and len({tuple(p) for p in joined}) == 48
    with pytest.raises(BenchError, match="at least one prompt"):
        interleave.block_configs(point, 1, 6, prompts=0)


def test_a_small_point_gets_fewer_rounds_never_a_block_below_the_concurrency():
    blocks = interleave.block_configs(config(num_prompts=5), 2, 4)
    assert [b.num_prompts for b in blocks] == [3, 2]
    scaled = interleave.block_configs(config(prompts_per_concurrency=4), 4, 4)  # 16 prompts at concurrency 4
    assert [b.num_prompts for b in scaled] == [4, 4, 4, 4] and all(b.prompts_per_concurrency is None for b in scaled)


def test_an_offset_below_zero_is_refused_in_one_line():
    with pytest.raises(BenchError, match="measure_offset must be an integer >= 0"):
        config(measure_offset=-1)


def test_pooled_rate_is_tokens_over_time_not_the_mean_of_block_rates():
    fast, slow = (synthetic_arm(name, [1], step, kind="baseline").points[0] for name, step in (("a", 0.01), ("b", 0.04)))
    got = interleave.pooled([fast, slow])
    tokens = fast.metrics.output_tokens + slow.metrics.output_tokens
    assert got.tok_s == pytest.approx(tokens / (fast.metrics.duration_s + slow.metrics.duration_s))
    assert got.tok_s < (fast.metrics.output_tok_per_s + slow.metrics.output_tok_per_s) / 2
    assert got.accept_length is None  # no speculation


def test_pooled_acceptance_is_completion_tokens_over_verify_steps():
    three = synthetic_arm("e1", [1], 0.01, verify_ct=3, kind="eagle3").points[0]  # 9 tokens in 3 verifies
    nine = synthetic_arm("e2", [1], 0.01, verify_ct=9, kind="eagle3").points[0]  # 9 tokens in 9 verifies
    assert interleave.pooled([three, nine]).accept_length == pytest.approx(18 / 12)


def test_pooled_acceptance_is_unknown_when_one_block_has_none():
    spec = synthetic_arm("e1", [1], 0.01, verify_ct=3, kind="eagle3").points[0]
    plain = synthetic_arm("b1", [1], 0.01, kind="baseline").points[0]
    assert interleave.pooled([spec]).accept_length is not None
    assert interleave.pooled([spec, plain]).accept_length is None  # not the acceptance of the blocks that have one


def test_the_schedule_measures_every_concurrency_in_each_round_on_the_same_blocks_in_mirrored_order():
    blocks = {c: interleave.block_configs(config(), c, 4, prompts=16) for c in (4, 1, 2)}
    plan = interleave.schedule(blocks)
    assert [(b.round, b.concurrency, b.arm) for b in plan[:6]] == [
        (1, 1, "baseline"), (1, 1, "eagle3"), (1, 2, "baseline"), (1, 2, "eagle3"), (1, 4, "baseline"),
        (1, 4, "eagle3")]
    assert [(b.concurrency, b.arm) for b in plan if b.round == 2][:2] == [(1, "eagle3"), (1, "baseline")]
    for c, configs in blocks.items():  # each arm runs every block of each point, in order, and nothing else
        for arm in ("baseline", "eagle3"):
            assert [b.config for b in plan if b.concurrency == c and b.arm == arm] == configs
    assert len(plan) == 2 * sum(len(configs) for configs in blocks.values())


def test_a_variant_arm_joins_the_rounds_of_its_own_concurrency_in_the_mirrored_order():
    """The layer-mismatch arm beside the pair at concurrency 1: on every block of that point, after the pair in one
    round and first in the next (the whole order reversed), and nowhere else."""
    blocks = {c: interleave.block_configs(config(), c, 4, prompts=16) for c in (1, 4)}
    plan = interleave.schedule(blocks, extra={1: ["eagle3-shifted"]})
    by_round = {r: [(b.concurrency, b.arm) for b in plan if b.round == r] for r in (1, 2)}
    assert by_round[1] == [(1, "baseline"), (1, "eagle3"), (1, "eagle3-shifted"), (4, "baseline"), (4, "eagle3")]
    assert by_round[2] == [(1, "eagle3-shifted"), (1, "eagle3"), (1, "baseline"), (4, "eagle3"), (4, "baseline")]
    assert [b.config for b in plan if b.arm == "eagle3-shifted"] == blocks[1]
    assert [b for b in plan if b.arm != "eagle3-shifted"] == interleave.schedule(blocks)  # the pair's plan unchanged


def test_a_point_with_fewer_rounds_sits_out_the_last_ones_and_no_point_is_refused():
    plan = interleave.schedule({1: interleave.block_configs(config(), 1, 4, prompts=16),
                                4: interleave.block_configs(config(), 4, 4, prompts=8)})  # 8 prompts: 2 rounds at 4
    assert max(b.round for b in plan if b.concurrency == 4) == 2 and max(b.round for b in plan) == 4
    with pytest.raises(BenchError, match="at least one concurrency"):
        interleave.schedule({})


def _with_tpot(point, mean: float, count: int):
    metrics = dataclasses.replace(point.metrics, tpot_s=dataclasses.replace(point.metrics.tpot_s, mean=mean,
                                                                            count=count))
    return dataclasses.replace(point, metrics=metrics)


def test_the_pooled_decode_rate_is_running_requests_over_the_requests_mean_tpot():
    point = synthetic_arm("b", [2], 0.01, kind="baseline").points[0]
    assert interleave.pooled([point]).decode_tok_s == pytest.approx(point.metrics.decode_tok_per_s)
    fast, slow = _with_tpot(point, 0.01, 6), _with_tpot(point, 0.04, 2)
    # weighted by requests: (6 x 10 ms + 2 x 40 ms) / 8 = 17.5 ms, not the mean of the two blocks' rates or TPOTs
    assert interleave.pooled([fast, slow]).decode_tok_s == pytest.approx(2 / 0.0175)
    other = synthetic_arm("c", [1], 0.01, kind="baseline").points[0]
    assert interleave.pooled([point, other]).decode_tok_s is None  # two concurrencies have no one decode rate


def test_a_block_that_measured_nothing_is_refused():
    lost = synthetic_arm("x", [2], 0.01, kind="baseline").points[0]
    lost.status = "failed"
    with pytest.raises(BenchError, match="1 of 1 blocks measured nothing"):
        interleave.pooled([lost])


def blocks(arm: str, steps: list[float], verify_ct: int | None = None, start: float = T0, kind: str | None = None):
    out = []
    for number, step in enumerate(steps, start=1):
        a = synthetic_arm(f"{arm}-launch2-round{number}", [1], step, verify_ct=verify_ct, kind=kind or arm)
        window = _arm(a.name, start + 10 * number, start + 10 * number + 5)
        a.started_at, a.finished_at = window.started_at, window.finished_at
        out.append(a)
    return out


def test_an_interleaved_pair_pools_each_arm_and_keeps_every_round(tmp_path):
    base = blocks("baseline", [0.02, 0.04])  # the machine halves its speed in round 2, for both arms
    spec = blocks("eagle3", [0.01, 0.02], verify_ct=3)
    records = [r for i in range(5) for r in _plain(T0 + 12 + i)] + [r for i in range(4) for r in _cycle(T0 + 22 + i)]
    sample = launch_spread.interleaved_sample(2, base, spec, 1, _trace(tmp_path, records), "cpu")
    assert isinstance(sample, LaunchSample) and sample.method == "interleaved"
    assert sample.baseline_arm == "baseline-launch2" and sample.eagle3_arm == "eagle3-launch2"
    rates = [(e.points[0].metrics.output_tok_per_s, b.points[0].metrics.output_tok_per_s) for b, e in zip(base, spec)]
    assert sample.round_speedups == pytest.approx([e / b for e, b in rates], abs=1e-4)
    assert sample.speedup == pytest.approx(sample.eagle3_tok_s / sample.baseline_tok_s)
    assert min(sample.round_speedups) < sample.speedup < max(sample.round_speedups)
    assert sample.accept_length == pytest.approx(3.0)
    assert sample.plain_step_ms and sample.cycle_ms and sample.cycle_ms > sample.plain_step_ms
    assert sample.round_accept_lengths == pytest.approx([3.0, 3.0])
    assert sample.round_prompts == [e.points[0].metrics.requests for e in spec]  # each round's prompts, kept
    assert launch_spread.how_measured(sample).endswith("acceptance 3.00 to 3.00)")
    assert sample.concurrency == 1 and sample.baseline_decode_tok_s == pytest.approx(1 / 0.03)  # TPOTs 20, 40 ms
    assert sample.eagle3_decode_tok_s == pytest.approx(1 / 0.015)
    row, = launch_spread.point_rows([sample])
    assert (row["concurrency"], row["decode speedup"], row["rounds"]) == (1, 2.0, 2)
    assert row["bootstrap interval"] == f"{sample.speedup_low:.2f} to {sample.speedup_high:.2f}"


def test_an_interleaved_pair_with_a_lost_block_is_a_reason():
    base = blocks("baseline", [0.02, 0.04])
    spec = blocks("eagle3", [0.01, 0.02], verify_ct=3)
    spec[1].points = []
    reason = launch_spread.interleaved_sample(2, base, spec, 1)
    assert reason == "launch 2: eagle3-launch2-round2 measured nothing at concurrency 1"


def test_two_servers_in_one_window_are_told_apart_by_their_records(tmp_path):
    records = [r for i in range(6) for r in (*_plain(T0 + i), *_cycle(T0 + i + 0.5))]  # both servers, same seconds
    table = cycle.table_from_shared_window(_trace(tmp_path, records), [(_arm("b", T0, T0 + 6).started_at,
                                           _arm("e", T0, T0 + 6).finished_at)], "cpu", "baseline", "eagle3")
    alone = cycle.table_from_arms(_trace(tmp_path, [r for i in range(6) for r in _plain(T0 + i)]
                                         + [r for i in range(6) for r in _cycle(T0 + 100 + i)]),
                                  _arm("b", T0, T0 + 6), _arm("e", T0 + 100, T0 + 106), "cpu")
    assert (table.plain_step_ms, table.cycle_ms) == (alone.plain_step_ms, alone.cycle_ms)


def test_a_third_server_up_beside_the_pair_is_left_out_by_the_pairs_block_windows(tmp_path):
    """A variant EAGLE-3 server measured in its own blocks between the pair's: its cycles (slower here) fall
    outside the pair's block windows, so the pair's cycle is its own EAGLE-3 server's."""
    pair = [r for i in range(6) for r in (*_plain(T0 + i), *_cycle(T0 + i + 0.5))]
    variant = [r for i in range(6) for r in _cycle(T0 + 50 + i, verify=36.0)]
    windows = [(_arm("b", T0, T0 + 6).started_at, _arm("b", T0, T0 + 6).finished_at)]
    table = cycle.table_from_shared_window(_trace(tmp_path, pair + variant), windows, "cpu", "baseline", "eagle3")
    mixed = cycle.table_from_shared_window(_trace(tmp_path, pair + variant),
                                           [*windows, (_arm("v", T0 + 50, T0 + 56).started_at,
                                                       _arm("v", T0 + 50, T0 + 56).finished_at)],
                                           "cpu", "baseline", "eagle3")
    assert table.cycle_ms < mixed.cycle_ms
    alone = cycle.table_from_shared_window(_trace(tmp_path, pair), windows, "cpu", "baseline", "eagle3")
    assert table.cycle_ms == alone.cycle_ms


def test_the_order_label_names_every_round():
    assert interleave.order_label(3) == "both up, 3 rounds BE EB BE"


# the bootstrap interval of the pooled speedup, rounds resampled in pairs

STEADY_BASE, STEADY_SPEC = [0.020, 0.021, 0.019, 0.020, 0.022, 0.020], [0.010, 0.011, 0.010, 0.010, 0.011, 0.010]
SHAKY_SPEC = [0.010, 0.016, 0.008, 0.014, 0.009, 0.018]  # same baseline, EAGLE-3 rounds far apart


def interleaved(base_steps: list[float], spec_steps: list[float]) -> LaunchSample:
    sample = launch_spread.interleaved_sample(2, blocks("baseline", base_steps),
                                              blocks("eagle3", spec_steps, verify_ct=3), 1)
    assert isinstance(sample, LaunchSample)
    return sample


def test_the_interval_contains_the_pooled_speedup_and_is_kept_with_its_rounds():
    sample = interleaved(STEADY_BASE, SHAKY_SPEC)
    assert sample.speedup_low is not None and sample.speedup_high is not None
    assert sample.speedup_low < sample.speedup < sample.speedup_high
    assert (sample.interval_level_pct, sample.interval_resamples, sample.interval_seed) == (95.0, 10_000, 0)
    assert len(sample.round_baseline) == len(sample.round_eagle3) == 6
    # each round's [tokens, seconds] pools back to the sample's rates and round speedups
    rate = lambda rounds: sum(t for t, _ in rounds) / sum(s for _, s in rounds)  # noqa: E731
    assert rate(sample.round_eagle3) / rate(sample.round_baseline) == pytest.approx(sample.speedup)
    assert [rate([e]) / rate([b]) for b, e in zip(sample.round_baseline, sample.round_eagle3)] == pytest.approx(
        sample.round_speedups, abs=1e-4)


def test_the_interval_is_recomputed_from_the_sidecar_alone():
    sample = interleaved(STEADY_BASE, SHAKY_SPEC)
    loaded = LaunchSample.model_validate_json(sample.model_dump_json())
    again = interleave.speedup_interval(loaded.round_baseline, loaded.round_eagle3, loaded.interval_resamples,
                                        loaded.interval_level_pct / 100, loaded.interval_seed)
    assert again is not None and (again.low, again.high) == (sample.speedup_low, sample.speedup_high)


def test_identical_rounds_give_a_zero_width_interval_at_the_speedup():
    sample = interleaved([0.02] * 6, [0.01] * 6)
    assert sample.speedup_low == sample.speedup_high
    assert sample.speedup_low == pytest.approx(sample.speedup)


def test_the_interval_widens_when_the_rounds_disagree_more():
    steady, shaky = interleaved(STEADY_BASE, STEADY_SPEC), interleaved(STEADY_BASE, SHAKY_SPEC)
    assert steady.speedup_low is not None and steady.speedup_high is not None
    assert shaky.speedup_low is not None and shaky.speedup_high is not None
    assert shaky.speedup_high - shaky.speedup_low > 2 * (steady.speedup_high - steady.speedup_low) > 0


def test_the_rounds_are_resampled_in_pairs_not_arm_by_arm():
    # the machine slows both arms alike from round to round: every round's speedup is 2x, so is every resample's
    base, spec = [[9.0, 0.1 * k] for k in (1, 3, 2, 5)], [[9.0, 0.05 * k] for k in (1, 3, 2, 5)]
    interval = interleave.speedup_interval(base, spec)
    assert interval is not None and interval.low == pytest.approx(2.0) and interval.high == pytest.approx(2.0)


def test_the_interval_is_the_same_for_the_same_seed():
    base = [[9.0, s] for s in (0.2, 0.22, 0.19, 0.21, 0.23, 0.2)]
    spec = [[9.0, s] for s in (0.1, 0.16, 0.08, 0.14, 0.09, 0.18)]
    first, second = (interleave.speedup_interval(base, spec, resamples=200, seed=7) for _ in range(2))
    assert first == second and first is not None
    assert (first.rounds, first.resamples, first.seed, first.level) == (6, 200, 7, 0.95)
    other = interleave.speedup_interval(base, spec, resamples=200, seed=8)
    assert other is not None and (other.low, other.high) != (first.low, first.high)  # the seed is really used
    narrower = interleave.speedup_interval(base, spec, resamples=200, level=0.5, seed=7)
    assert narrower is not None and first.low < narrower.low <= narrower.high < first.high  # the level is used


def test_one_round_has_no_interval():
    assert interleave.speedup_interval([[9.0, 0.2]], [[9.0, 0.1]]) is None
    sample = interleaved([0.02], [0.01])
    assert sample.round_baseline and sample.speedup_low is None and sample.speedup_high is None
    assert "bootstrap" not in launch_spread.how_measured(sample)


def test_rounds_that_cannot_be_resampled_are_refused_in_one_line():
    with pytest.raises(BenchError, match="2 baseline rounds against 1 EAGLE-3 rounds"):
        interleave.speedup_interval([[9.0, 0.2]] * 2, [[9.0, 0.1]])
    with pytest.raises(BenchError, match="no round to resample"):
        interleave.speedup_interval([], [])
    with pytest.raises(BenchError, match="no output tokens or no measured time"):
        interleave.speedup_interval([[9.0, 0.2], [0.0, 0.2]], [[9.0, 0.1], [9.0, 0.1]])
    with pytest.raises(BenchError, match="level must be between 0 and 1"):
        interleave.speedup_interval([[9.0, 0.2]] * 2, [[9.0, 0.1]] * 2, level=95)
    with pytest.raises(BenchError, match="at least one resample"):
        interleave.speedup_interval([[9.0, 0.2]] * 2, [[9.0, 0.1]] * 2, resamples=0)


def test_a_variant_measured_in_the_same_rounds_costs_its_rate_against_the_headline_arms_with_a_paired_interval():
    """The layer-mismatch arm in the pair's rounds: its throughput over the headline EAGLE-3 arm's, pooled over the
    rounds; the machine slowing in round 2 moves both arms, so the paired interval stays tight; the report's
    verdict follows the interval's ends."""
    from eagle3lab.report.contexts import variant_context

    base = blocks("baseline", [0.02, 0.04, 0.02])
    spec = blocks("eagle3", [0.010, 0.020, 0.010], verify_ct=3)
    shifted = blocks("eagle3-shifted", [0.0125, 0.025, 0.0125], verify_ct=4, kind="eagle3_shifted")  # slower by the same share each round
    headline = launch_spread.interleaved_sample(2, base, spec, 1)
    variant = launch_spread.interleaved_sample(2, base, shifted, 1)
    cost = launch_spread.variant_cost(headline, variant)
    assert cost.variant_arm == "eagle3-shifted-launch2" and cost.headline_arm == "eagle3-launch2"
    assert cost.rate_ratio == pytest.approx(variant.eagle3_tok_s / headline.eagle3_tok_s) and cost.rate_ratio < 1
    assert cost.cost_pct == pytest.approx((1 - cost.rate_ratio) * 100) and cost.rounds == 3
    assert cost.ratio_low <= cost.rate_ratio <= cost.ratio_high < 1  # a steady cost: every round agrees
    assert (cost.headline_speedup, cost.variant_speedup) == (headline.speedup, variant.speedup)
    assert "resolve a cost" in variant_context(cost)["verdict"]
    assert "do not resolve" in variant_context(cost.model_copy(update={"ratio_high": 1.02}))["verdict"]
    assert "no interval" in variant_context(cost.model_copy(update={"ratio_low": None, "ratio_high": None}))["verdict"]
    other_launch = variant.model_copy(update={"launch": 3})
    assert launch_spread.variant_cost(headline, other_launch) is None  # not the same rounds: no comparison
    row = launch_spread.variant_rows([cost])[0]
    assert row["throughput cost %"] == round(cost.cost_pct, 1) and row["rounds"] == 3
