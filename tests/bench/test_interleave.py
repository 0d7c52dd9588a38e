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


def test_a_block_that_measured_nothing_is_refused():
    lost = synthetic_arm("x", [2], 0.01, kind="baseline").points[0]
    lost.status = "failed"
    with pytest.raises(BenchError, match="1 of 1 blocks measured nothing"):
        interleave.pooled([lost])


def blocks(arm: str, steps: list[float], verify_ct: int | None = None, start: float = T0):
    out = []
    for number, step in enumerate(steps, start=1):
        a = synthetic_arm(f"{arm}-launch2-round{number}", [1], step, verify_ct=verify_ct, kind=arm)
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
    assert launch_spread.how_measured(sample).endswith("acceptance 3.00 to 3.00)")


def test_an_interleaved_pair_with_a_lost_block_is_a_reason():
    base = blocks("baseline", [0.02, 0.04])
    spec = blocks("eagle3", [0.01, 0.02], verify_ct=3)
    spec[1].points = []
    reason = launch_spread.interleaved_sample(2, base, spec, 1)
    assert reason == "launch 2: eagle3-launch2-round2 measured nothing at concurrency 1"


def test_two_servers_in_one_window_are_told_apart_by_their_records(tmp_path):
    records = [r for i in range(6) for r in (*_plain(T0 + i), *_cycle(T0 + i + 0.5))]  # both servers, same seconds
    table = cycle.table_from_shared_window(_trace(tmp_path, records), _arm("b", T0, T0 + 6).started_at,
                                           _arm("e", T0, T0 + 6).finished_at, "cpu", "baseline", "eagle3")
    alone = cycle.table_from_arms(_trace(tmp_path, [r for i in range(6) for r in _plain(T0 + i)]
                                         + [r for i in range(6) for r in _cycle(T0 + 100 + i)]),
                                  _arm("b", T0, T0 + 6), _arm("e", T0 + 100, T0 + 106), "cpu")
    assert (table.plain_step_ms, table.cycle_ms) == (alone.plain_step_ms, alone.cycle_ms)


def test_the_order_label_names_every_round():
    assert interleave.order_label(3) == "both up, 3 rounds BE EB BE"
