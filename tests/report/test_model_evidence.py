"""The model's evidence for the report, and the model against a run measured here (the CPU check): calibrated on
the run's plain single-stream step only, it predicts the rest; the numbers it reports are the model's own."""

from __future__ import annotations

import json

import pytest

from conftest import synthetic_arm
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.report import model_evidence
from eagle3lab.costmodel.cycle import plain_tok_s, speedup
from eagle3lab.report.model_evidence import measured_run_check, published_acceptance
from eagle3lab.report.run_model import run_deployment
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.speculative import SpeculativeSpec

BANDWIDTH = 5e9  # fixed instead of probed, so two calls build the same deployment


@pytest.fixture(scope="module")
def cpu():
    return load_profile("cpu")


def test_run_check_calibrates_on_the_single_stream_step_and_predicts_the_rest(cpu):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    check = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)
    dep, calibrated = run_deployment(cpu, report, mem_bandwidth=BANDWIDTH)
    spec = SpeculativeSpec.from_profile(cpu, cpu.draft_model)
    one, four = check["rows"]
    assert (one["baseline_role"], four["baseline_role"]) == ("calibration", "predicted")
    assert one["measured_baseline_tok_s"] == pytest.approx(50.0) and one["baseline_error_pct"] == pytest.approx(0, abs=1e-6)
    assert four["predicted_baseline_tok_s"] == pytest.approx(plain_tok_s(dep, 4))
    assert four["baseline_error_pct"] == pytest.approx((plain_tok_s(dep, 4) - 200.0) / 200.0 * 100)
    assert check["baseline_mape_pct"] == pytest.approx(abs(four["baseline_error_pct"]))
    for row in (one, four):  # EAGLE-3 decodes at half the baseline's rate with acceptance 9/6
        assert row["accept_length"] == pytest.approx(1.5) and row["measured_speedup"] == pytest.approx(0.5)
        assert row["predicted_speedup"] == pytest.approx(speedup(dep, spec, row["concurrency"], 1.5))
        # a cycle emits 1.5 tokens per request: at half the plain rate it takes 3 plain steps (0.02 s each)
        assert row["measured_cycle_ms"] == pytest.approx(3 * 20.0)
        # the modelled cycle comes from the model's own rates only (its plain rate, its speedup)
        predicted_plain = row["concurrency"] / row["predicted_baseline_tok_s"] * 1e3
        assert row["predicted_cycle_ms"] == pytest.approx(1.5 * predicted_plain / row["predicted_speedup"])
        assert row["unmodelled_cycle_ms"] == pytest.approx(row["measured_cycle_ms"] - row["predicted_cycle_ms"])
    assert check["speedup_mape_pct"] == pytest.approx(
        (abs(one["speedup_error_pct"]) + abs(four["speedup_error_pct"])) / 2)
    assert set(check["speedup_trend"]) == {"measured", "predicted"} and check["speedup_trend"]["measured"] == "flat"
    assert check["calibrated_on"] == calibrated and "measured plain single-stream TPOT (1 / decode rate)" in calibrated
    assert sum(check["single_stream_pct_by_part"].values()) == pytest.approx(100)


def _split(speculative: bool, concurrency: int, decode_ms: float, prefill_ms: float, other_ms: float,
           arm: str | None = None):
    from eagle3lab.sidecars import PointTimeRecord

    return PointTimeRecord(arm=arm or ("eagle3" if speculative else "baseline"), speculative=speculative,
                           concurrency=concurrency, window_s=1.0, decode_batches=10, prefill_batches=2,
                           mean_batch_size=concurrency, full_batch_share=1.0, decode_ms=decode_ms,
                           prefill_ms=prefill_ms, other_ms=other_ms, wall_ms=decode_ms + prefill_ms + other_ms)


def test_the_timers_split_says_whether_a_cycle_miss_is_in_the_cycles_or_between_them(cpu):
    from eagle3lab.report.run_check_text import _between_cycles_lines

    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    bare = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)["rows"]
    model_ms = {r["concurrency"]: r["predicted_cycle_ms"] for r in bare}
    # at 4 the decode batches take what the model says; prefills and the rest add 30 ms per cycle
    between = [_split(True, 1, model_ms[1], 1.0, 1.0), _split(True, 4, model_ms[4], 20.0, 10.0),
               _split(False, 4, 15.0, 1.0, 1.0)]
    one, four = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, point_times=between)["rows"]
    assert four["eagle3_split"]["prefill_ms"] == 20.0 and four["baseline_split"]["decode_ms"] == 15.0
    assert "baseline_split" not in one and four["between_cycles_ms"] == pytest.approx(30.0)
    assert four["decode_minus_model_ms"] == pytest.approx(0.0)
    lines = _between_cycles_lines([one, four])
    assert len(lines) == 2 and "mostly between the cycles, not in them" in lines[1]
    # the same miss inside the decode batches: the sentence says so instead
    inside = [_split(True, c, model_ms[c] + 40.0, 1.0, 1.0) for c in (1, 4)]
    rows = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, point_times=inside)["rows"]
    assert "in the cycles themselves" in _between_cycles_lines(rows)[1]
    assert _between_cycles_lines(bare) == []  # no trace: nothing said


def test_request_turnover_is_predicted_from_the_baseline_and_control_prefills_not_the_headline_arm(cpu):
    """Prefills timed at concurrency 1: baseline 2 per 10 steps of 5 ms each (25 ms per prefill), control 40 ms.
    Every request decodes bench_output_len - 1 tokens; at 4 each is stalled by the 3 others' prefills."""
    from eagle3lab.costmodel.cycle import plain_step, spec_cycle

    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6),
                                        synthetic_arm("untrained", (1,), 0.05, verify_ct=8, kind="eagle3_control")])
    dep, _ = run_deployment(cpu, report, mem_bandwidth=BANDWIDTH)
    spec = SpeculativeSpec.from_profile(cpu, cpu.draft_model)
    tokens = cpu.bench_output_len - 1
    timed = [_split(False, 1, 20.0, 5.0, 1.0), _split(True, 1, 30.0, 8.0, 1.0, arm="untrained"),
             _split(True, 4, 30.0, 500.0, 1.0)]  # the headline arm's own prefills: never read
    check = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, point_times=timed)
    assert check["turnover"]["baseline_prefill_ms"] == pytest.approx(25.0)
    assert check["turnover"]["eagle3_prefill_ms"] == pytest.approx(40.0)
    assert "arm 'untrained' at concurrency 1" in check["turnover"]["sources"]["eagle3"]
    one, four = check["rows"]
    assert one["turnover_speedup"] == pytest.approx(one["predicted_speedup"])  # alone: no other prefill
    base = 4 / (plain_step(dep, 4).total_s + 3 * 0.025 / tokens)
    spec_rate = 4 / (spec_cycle(dep, spec, 4).total_s / 1.5 + 3 * 0.040 / tokens)
    assert four["turnover_baseline_tok_s"] == pytest.approx(base)
    assert four["turnover_speedup"] == pytest.approx(spec_rate / base)
    assert four["turnover_speedup"] < four["predicted_speedup"]
    assert four["turnover_speedup_error_pct"] == pytest.approx((spec_rate / base - 0.5) / 0.5 * 100)
    assert check["turnover"]["speedup_mape_pct"] == pytest.approx(
        (abs(one["turnover_speedup_error_pct"]) + abs(four["turnover_speedup_error_pct"])) / 2)
    # without the control arm's window there is no EAGLE-3 prefill to count: said, and not predicted
    bare = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, point_times=timed[:1])
    assert bare["turnover"]["eagle3_prefill_ms"] is None and "turnover_speedup" not in bare["rows"][1]
    assert bare["turnover"]["missing"] == ["no prefill timed in the eagle3_control arm's window at concurrency 1"]
    assert bare["rows"][1]["turnover_baseline_tok_s"] == pytest.approx(base)


def test_the_control_arm_measures_one_cycle_in_plain_steps(cpu):
    """Untrained drafter: 9 tokens in 8 verifies; each request's tokens come 0.05 s apart, plain ones 0.02 s."""
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 2), 0.02),
                                        synthetic_arm("untrained", (1,), 0.05, verify_ct=8, kind="eagle3_control")])
    (row,) = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)["control_cycles"]
    assert row["arm"] == "untrained" and row["concurrency"] == 1 and row["accept_length"] == pytest.approx(9 / 8)
    assert row["plain_step_ms"] == pytest.approx(20.0)
    assert row["cycle_ms"] == pytest.approx(9 / 8 * 50.0)  # 1.125 tokens per cycle at 20 tok/s
    assert row["plain_steps_per_cycle"] == pytest.approx(row["cycle_ms"] / 20.0)


def test_run_check_without_eagle3_points_checks_only_the_baseline(cpu):
    check = measured_run_check(cpu, BenchReport.create("cpu", [synthetic_arm("baseline", (1, 2, 4), 0.02)]),
                               mem_bandwidth=BANDWIDTH)
    assert [r["concurrency"] for r in check["rows"]] == [1, 2, 4]
    assert not any("predicted_speedup" in r for r in check["rows"]) and check["speedup_mape_pct"] is None
    assert "speedup_trend" not in check and check["baseline_trend"]["measured"] == "rises"


def test_run_check_says_why_an_impossible_acceptance_is_not_predicted(cpu):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1,), 0.02),
                                        synthetic_arm("eagle3", (1,), 0.04, verify_ct=1)])
    (row,) = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)["rows"]
    assert row["accept_length"] == 9 and "predicted_speedup" not in row and "acceptance length must be in" in row["note"]


def test_run_check_missing_says_why(tmp_path):
    assert model_evidence._run_check("cpu", None) == (None, "notebook 03 ran no benchmark on this profile")
    check, why = model_evidence._run_check("cpu", str(tmp_path / "bench_report.json"))
    assert check is None and "bench_report.json of notebook 03 is missing" in why
    path = BenchReport.create("cpu", [synthetic_arm("baseline", (2,), 0.02)], copy_bandwidth=BANDWIDTH).save(
        tmp_path / "bench_report.json")
    check, why = model_evidence._run_check("cpu", str(path))
    assert check is None and "concurrency 1" in why
    check, why = model_evidence._run_check("cpu", str(path), {"name": "cpu", "no_such_key": 1})
    assert check is None and "rerun notebook 03" in why


def test_run_check_uses_the_profile_values_notebook_03_ran_with(tmp_path, cpu):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 2), 0.02)], copy_bandwidth=BANDWIDTH)
    path = report.save(tmp_path / "bench_report.json")
    ran_with = cpu.model_copy(update={"bench_input_len": 200}).model_dump(mode="json")
    check, why = model_evidence._run_check("cpu", str(path), ran_with)
    assert why is None and check["context"] == 200 + cpu.bench_output_len / 2


def test_published_acceptance_keeps_fitted_values_apart_from_published_ones():
    from eagle3lab.costmodel.validation import PUBLISHED, SHAPE_ONLY, validate

    results = validate()
    rows = published_acceptance(results)
    assert {r["kind"] for r in rows} == {PUBLISHED, SHAPE_ONLY}  # the data holds both kinds
    for row in rows:
        src = next(x for x in results if x.source == row["source"])
        values = [s.points[0].accept_length for s in src.series if s.acceptance == row["kind"]]
        assert row == {"source": src.source, "kind": row["kind"], "fitted": row["kind"] == SHAPE_ONLY,
                       "series": len(values), "min": min(values), "max": max(values)}


def test_the_run_check_says_which_arm_the_cycles_measured_terms_come_from(cpu, tmp_path, monkeypatch):
    """The CPU engine entry timed on the control arm: measured, not the headline arm; on the headline arm: said
    so; absent: the model took nothing but the plain step (sglang's frozen engine term named)."""
    from eagle3lab.costmodel import measured_cycle
    from eagle3lab.report.run_check_text import _calibration_clause

    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1,), 0.02),
                                        synthetic_arm("eagle3", (1,), 0.04, verify_ct=6)])
    table = tmp_path / "cycle_components.cpu.json"
    monkeypatch.setattr(measured_cycle, "cycle_components_path", lambda profile: table)
    clause = _calibration_clause(measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH))
    assert clause.startswith(" and on nothing else") and "sglang's engine term" in clause
    for arm, whose in (("eagle3-untrained", "not the headline EAGLE-3 arm"),
                       ("eagle3", "the headline EAGLE-3 arm's own cycles")):
        table.write_text(json.dumps({
            "schema_id": "eagle3lab.cycle_components/1", "profile": "cpu", "measured_on": "2026-12-03",
            "eagle_arm": arm, "plain_step_ms": 12.0, "speculative_num_steps": 3,
            "groups": {"target forward": {"plain_ms": 10.0, "cycle_ms": 12.0},
                       "draft forward": {"plain_ms": 0.0, "cycle_ms": 7.0},
                       "orchestration": {"plain_ms": 2.0, "cycle_ms": 3.5},
                       "harness kernels": {"plain_ms": 0.0, "cycle_ms": 0.5}}}))
        check = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)
        assert check["cycle_extra"]["measured"] and check["cycle_extra"]["ms"] == pytest.approx(2.0)
        clause = _calibration_clause(check)
        assert f"arm '{arm}'" in clause and clause.endswith(f"{whose})") and "2.00 ms per cycle" in clause


def test_the_naive_baseline_holds_the_single_stream_speedup_on_the_models_own_points(cpu):
    """EAGLE-3 at half the plain rate at 1 and 4 (speedup 0.5 both): holding 0.5 misses nothing; the model's
    MAPE beside it counts concurrency 4 only, the point the naive baseline is scored on."""
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    check = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)
    four = check["rows"][1]
    assert check["naive"]["concurrencies"] == [4] and check["naive"]["held_speedup"] == pytest.approx(0.5)
    assert check["naive"]["naive_mape_pct"] == pytest.approx(0.0)
    assert check["naive"]["model_mape_pct"] == pytest.approx(abs(four["speedup_error_pct"]))
    assert check["naive"]["turnover_mape_pct"] is None  # no prefill timed: no turnover on these points
    # EAGLE-3 twice as slow at 4 as at 1: the held speedup misses by 100%
    slower = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1,), 0.04, verify_ct=6),
                                        synthetic_arm("eagle3-c4", (4,), 0.08, verify_ct=6, kind="eagle3")])
    assert measured_run_check(cpu, slower, mem_bandwidth=BANDWIDTH)["naive"]["naive_mape_pct"] == pytest.approx(100.0)
    alone = BenchReport.create("cpu", [synthetic_arm("baseline", (1,), 0.02),
                                       synthetic_arm("eagle3", (1,), 0.04, verify_ct=6)])
    assert measured_run_check(cpu, alone, mem_bandwidth=BANDWIDTH)["naive"] is None


def _interleaved(launch: int, concurrency: int, base_step_s: float, spec_step_s: float, rounds: int = 2):
    """One interleaved launch's pair at ``concurrency`` from synthetic blocks (no server): acceptance 9 / 3."""
    from eagle3lab.bench import launch_spread

    base = [synthetic_arm(f"baseline-launch{launch}-c{concurrency}-round{r}", (concurrency,), base_step_s,
                          kind="baseline") for r in range(1, rounds + 1)]
    spec = [synthetic_arm(f"eagle3-launch{launch}-c{concurrency}-round{r}", (concurrency,), spec_step_s, verify_ct=3,
                          kind="eagle3") for r in range(1, rounds + 1)]
    return launch_spread.interleaved_sample(launch, base, spec, concurrency)


def test_the_interleaved_launch_is_checked_calibrated_on_its_own_single_stream_step_not_the_sweeps(cpu):
    """The sweep's baseline steps at 20 ms, the interleaved launch's at 25 ms (another spell): the interleaved check
    is calibrated on 25 ms and predicts its own points from the acceptance pooled there (9 tokens in 3 verifies)."""
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    samples = [_interleaved(2, 1, 0.025, 0.03), _interleaved(2, 4, 0.025, 0.045)]
    check = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, interleaved=samples)
    inter = check["interleaved"]
    assert inter["launch"] == 2 and "25.00 ms (launch 2, both servers up, 2 interleaved rounds" in inter["calibrated_on"]
    dep, _ = run_deployment(cpu, None, mem_bandwidth=BANDWIDTH, step=(0.025, "here"))
    spec = SpeculativeSpec.from_profile(cpu, cpu.draft_model)
    one, four = inter["rows"]
    assert one["baseline_role"] == "calibration" and one["measured_baseline_tok_s"] == pytest.approx(40.0)
    assert four["measured_baseline_tok_s"] == pytest.approx(160.0)
    assert four["predicted_baseline_tok_s"] == pytest.approx(plain_tok_s(dep, 4))
    assert four["measured_speedup"] == pytest.approx(0.025 / 0.045) and four["accept_length"] == pytest.approx(3.0)
    assert four["predicted_speedup"] == pytest.approx(speedup(dep, spec, 4, 3.0))
    assert inter["speedup_mape_pct"] == pytest.approx(
        (abs(one["speedup_error_pct"]) + abs(four["speedup_error_pct"])) / 2)
    assert inter["naive"]["held_speedup"] == pytest.approx(0.025 / 0.03)  # the interleaved one, not the sweep's 0.5
    assert inter["naive"]["naive_mape_pct"] == pytest.approx(abs(0.025 / 0.03 - 0.025 / 0.045) / (0.025 / 0.045) * 100)
    # the sweep's own check is untouched by it
    assert check["rows"][0]["measured_baseline_tok_s"] == pytest.approx(50.0)


def test_the_interleaved_check_needs_a_single_stream_point_to_calibrate_on(cpu):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    assert measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH)["interleaved"] is None
    only_four = [_interleaved(2, 4, 0.025, 0.045)]
    assert measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, interleaved=only_four)["interleaved"] is None
    # two interleaved launches: the first is checked, not a mix of both
    two = [_interleaved(3, 1, 0.05, 0.03), _interleaved(2, 1, 0.025, 0.03), _interleaved(2, 4, 0.025, 0.045)]
    inter = measured_run_check(cpu, report, mem_bandwidth=BANDWIDTH, interleaved=two)["interleaved"]
    assert inter["launch"] == 2 and [r["concurrency"] for r in inter["rows"]] == [1, 4]


def test_the_sweep_gap_is_the_largest_difference_at_a_concurrency_both_measured():
    sweep = [{"concurrency": 1, "measured_speedup": 1.42}, {"concurrency": 2, "measured_speedup": 1.32},
             {"concurrency": 4, "measured_speedup": 1.13}, {"concurrency": 8, "measured_speedup": 0.5}]
    interleaved = [{"concurrency": 1, "measured_speedup": 1.28}, {"concurrency": 2},
                   {"concurrency": 4, "measured_speedup": 1.39}]
    gap = model_evidence.sweep_gap(sweep, interleaved)
    assert (gap["concurrency"], gap["sweep_speedup"], gap["interleaved_speedup"]) == (4, 1.13, 1.39)
    assert gap["gap_pct"] == pytest.approx((1.39 - 1.13) / 1.39 * 100)
    assert model_evidence.sweep_gap(sweep[3:], interleaved) is None  # no concurrency measured by both
