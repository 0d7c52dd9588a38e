"""Acceptance readings side by side, the layer-mismatch summary and the speedup rows, from hand-written arms."""

from __future__ import annotations

import json

import pytest

from eagle3lab.bench.acceptance import (acceptance_records, acceptance_table, expect_acceptance_consistent,
                                        layer_mismatch, offline_vs_served, speedup_records)
from eagle3lab.notebook.patch_and_bench.arm_plans import Drafters, drafter_layer_ids, eagle3_arm_plans
from eagle3lab.notebook.patch_and_bench.server_arms import check_greedy
from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
from eagle3lab.bench.sweep import (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL,
                                   ARM_KIND_EAGLE3_SHIFTED, ArmResult, PointResult)
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError, ExpectationError, ModelPathError


def _point(concurrency: int, tokens: int, verify: int | None, server: float | None = None,
           reported: float | None = None, histogram: list[int] | None = None, seconds: float = 1.0) -> PointResult:
    rec = RequestRecord("r", concurrency, "measure", True, 0.0, t_sent=0.0, token_times=[0.1, seconds],
                        t_end=seconds, completion_tokens=tokens, spec_verify_ct=verify,
                        spec_accept_length=reported if reported is not None else (tokens / verify if verify else None),
                        spec_accept_histogram=histogram)
    point = PointResult(concurrency, "ok", None, compute_point_metrics([rec]), {}, concurrency, 0, 0, True, "t")
    point.server_avg_accept_length = server
    return point


def _arms() -> list[ArmResult]:
    return [
        ArmResult("baseline", "measured", ARM_KIND_BASELINE, points=[_point(1, 32, None), _point(2, 32, None, seconds=0.5)]),
        ArmResult("eagle3", "measured", ARM_KIND_EAGLE3,
                  points=[_point(1, 32, 14, server=2.4, histogram=[4, 3, 4, 3]),
                          _point(2, 32, 16, seconds=0.8)]),
        ArmResult("eagle3-shifted", "measured", ARM_KIND_EAGLE3_SHIFTED, points=[_point(1, 32, 20)]),
        ArmResult("eagle3-untrained", "measured", ARM_KIND_EAGLE3_CONTROL, points=[_point(1, 32, 31)]),
    ]


def test_acceptance_records_put_every_reading_of_each_speculative_point_side_by_side():
    records = acceptance_records(_arms())
    assert [(r["arm"], r["concurrency"]) for r in records] == [("eagle3", 1), ("eagle3", 2), ("eagle3-shifted", 1),
                                                             ("eagle3-untrained", 1)]
    first = records[0]
    assert first["accept_length"] == pytest.approx(32 / 14) and first["disagreements"] == 0
    # histogram [4, 3, 4, 3]: (1*4 + 2*3 + 3*4 + 4*3) / 14 tokens per verify step
    assert first["accept_length_per_step"] == pytest.approx(34 / 14)
    assert first["server_minus_per_step"] == pytest.approx(2.4 - 34 / 14)
    assert json.loads(json.dumps(records)) == records
    table = acceptance_table(records)
    assert table[0]["accept length (tokens / verify step)"] == round(32 / 14, 3)
    expect_acceptance_consistent(_arms())


def test_a_request_where_the_server_disagrees_fails():
    arms = [ArmResult("eagle3", "measured", ARM_KIND_EAGLE3, points=[_point(1, 32, 14, reported=2.0)])]
    with pytest.raises(ExpectationError) as err:
        expect_acceptance_consistent(arms)
    assert (err.value.problem, err.value.arm, err.value.concurrency, err.value.found) == ("disagreement", "eagle3", 1, 1)


def test_layer_mismatch_compares_aligned_and_shifted_where_both_were_measured():
    mismatch = layer_mismatch(_arms(), 8, {"eagle3": (2, 4, 6), "eagle3-shifted": (1, 3, 5)})
    assert mismatch is not None and mismatch.concurrency == [1]
    assert mismatch.aligned_accept_length == pytest.approx([32 / 14])
    assert mismatch.shifted_accept_length == pytest.approx([32 / 20])
    data = mismatch.to_dict()
    assert data["drop"] == pytest.approx([32 / 14 - 32 / 20])
    assert data["relative_drop"] == pytest.approx([(32 / 14 - 32 / 20) / (32 / 14)])
    assert data["aligned_layer_ids"] == [2, 4, 6] and data["shifted_layer_ids"] == [1, 3, 5]
    assert json.loads(json.dumps(data)) == data
    assert layer_mismatch(_arms()[:2], 8, {}) is None


def test_speedup_records_divide_the_headline_arm_by_the_baseline_only():
    records = speedup_records(_arms())
    # baseline: 32 tok in 1.0 s and 0.5 s; eagle3: 32 tok in 1.0 s and 0.8 s
    assert [r["concurrency"] for r in records] == [1, 2]
    assert [r["speedup"] for r in records] == pytest.approx([1.0, 0.5 / 0.8])


def test_arm_plans_run_the_experiments_at_fewer_concurrencies():
    drafters = Drafters("/t", (2, 4, 6), control="/u", control_layer_ids=(2, 4, 6), shifted="/s",
                        shifted_layer_ids=(1, 3, 5))
    plans = eagle3_arm_plans(drafters, experiment_concurrency=[1])
    assert [(p.name, p.kind, p.concurrency) for p in plans] == [
        ("eagle3", ARM_KIND_EAGLE3, None), ("eagle3-untrained", ARM_KIND_EAGLE3_CONTROL, (1,)),
        ("eagle3-shifted", ARM_KIND_EAGLE3_SHIFTED, (1,))]
    config = SweepConfig(concurrency=[1, 2, 4], input_len=8, output_len=8, num_prompts=4)
    assert plans[0].config(config) is config and plans[2].config(config).concurrency == [1]
    assert [p.name for p in eagle3_arm_plans(Drafters("/t", None))] == ["eagle3"]
    assert [p.name for p in eagle3_arm_plans(drafters, experiment_concurrency=[])] == ["eagle3"]
    # the control arm also at a larger batch (its cycle's growth per request), the shifted arm not
    more = eagle3_arm_plans(drafters, experiment_concurrency=[1], control_concurrency=[4])
    assert [(p.name, p.concurrency) for p in more[1:]] == [("eagle3-untrained", (1, 4)), ("eagle3-shifted", (1,))]
    assert [p.name for p in eagle3_arm_plans(drafters, [], control_concurrency=[4])] == ["eagle3"]


def test_drafter_layer_ids_come_from_the_drafters_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3]}}))
    assert drafter_layer_ids(tmp_path) == (1, 3)
    with pytest.raises(ModelPathError) as err:
        drafter_layer_ids(tmp_path / "missing")
    assert (err.value.problem, err.value.path) == ("missing", tmp_path / "missing" / "config.json")


def test_sampling_workloads_are_refused_for_speculative_cpu_runs(cpu_profile):
    greedy = SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=1)
    check_greedy(cpu_profile, greedy)
    check_greedy(cpu_profile, SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=1,
                                          extra_sampling_params={"temperature": 0.9, "top_k": 1}))
    with pytest.raises(BenchError) as err:
        check_greedy(cpu_profile, SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=1,
                                              extra_sampling_params={"temperature": 0.7}))
    assert (err.value.key, err.value.value) == ("temperature", 0.7)
    # the reason is the behaviour here: the user must learn that CPU verification is greedy only
    assert "speculative decoding on CPU verifies greedily only" in str(err.value)
    assert "\n" not in str(err.value)


def test_offline_simulation_sits_next_to_the_served_point_of_the_same_variant():
    offline = {"aligned": {"mean_accept_length": 2.3, "pooled_accept_length": 2.2,
                           "accepted_histogram": {"0": 4, "1": 3, "3": 3}},
               "shifted": {"mean_accept_length": 1.6, "pooled_accept_length": 1.6, "accepted_histogram": {"0": 20}}}
    records = offline_vs_served(_arms(), offline)
    assert [(r["arm"], r["offline_mean"]) for r in records] == [("eagle3", 2.3), ("eagle3-shifted", 1.6)]
    assert records[0]["served_pooled"] == pytest.approx(32 / 14) and records[0]["offline_histogram"] == [4, 3, 0, 3]
    assert records[0]["served_histogram"] == [4, 3, 4, 3]
    assert offline_vs_served(_arms(), None) == [] and offline_vs_served(_arms(), offline, concurrency=4) == []
