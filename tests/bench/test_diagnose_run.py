"""Notebook 03's diagnostics get the cost model's break-even for the run, so the acceptance rule can fire."""

from __future__ import annotations

import pytest

from eagle3lab.bench.arms import diagnose_run, run_break_even_or_none
from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_MEASURED, ArmResult, BenchReport, PointResult
from eagle3lab.report import presets
from eagle3lab.runtime.profiles import load_profile

RULE = "acceptance length below break-even"


def arm(name: str, kind: str, concurrencies, step_s: float, verify_ct: int | None = None) -> ArmResult:
    points = []
    for conc in concurrencies:
        records = [RequestRecord(request_id=f"{name}{conc}-{i}", concurrency=conc, phase="measure", ok=True,
                                 t_scheduled=0.0, t_sent=0.0, token_times=[0.05 + k * step_s for k in range(9)],
                                 t_end=0.05 + 8 * step_s, prompt_len=32, prompt_tokens=32, completion_tokens=9,
                                 spec_verify_ct=verify_ct, finish_reason="length") for i in range(conc)]
        points.append(PointResult(conc, "ok", None, compute_point_metrics(records), None, conc, 0, 0, True, "now"))
    return ArmResult(name=name, status=ARM_MEASURED, kind=kind, points=points)


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))  # no notebook-02 sidecar: only the bench evidence
    monkeypatch.setattr(presets, "measure_copy_bandwidth", lambda *a, **k: 5e9)  # the same deployment every call
    return load_profile("cpu")


@pytest.mark.parametrize("verify_ct", [8, 3])
def test_acceptance_rule_judges_the_measured_acceptance_against_the_runs_break_even(cpu, tmp_path, verify_ct):
    report = BenchReport.create("cpu", [arm("baseline", ARM_KIND_BASELINE, (1, 4), 0.02),
                                        arm("eagle3", ARM_KIND_EAGLE3, (1, 4), 0.03, verify_ct)])
    break_even, where = presets.run_break_even(cpu, report)
    findings = {f["rule"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    finding = findings[RULE]
    accept = 9 / verify_ct
    assert finding["applies"] == (accept < break_even)
    assert f"vs break-even {break_even:.2f}" in finding["evidence"] and "at 4 requests" in finding["evidence"]
    assert f"mean accept length {accept:.2f}" in finding["evidence"]


def test_low_acceptance_fires_the_rule(cpu, tmp_path):
    report = BenchReport.create("cpu", [arm("baseline", ARM_KIND_BASELINE, (1, 4), 0.02), arm("eagle3", ARM_KIND_EAGLE3, (1, 4), 0.03, 9)])
    findings = {f["rule"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    assert findings[RULE]["applies"]  # acceptance 1.0: every cycle costs more than the one token it yields


def test_without_a_calibration_point_the_rule_stays_out_and_says_why(cpu, tmp_path):
    report = BenchReport.create("cpu", [arm("baseline", ARM_KIND_BASELINE, (2,), 0.02),
                                        arm("eagle3", ARM_KIND_EAGLE3, (2,), 0.03, 8)])
    value, why = run_break_even_or_none(cpu, report)
    assert value is None and "concurrency 1" in why
    assert RULE not in {f["rule"] for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    assert run_break_even_or_none(cpu, None) == (None, "no benchmark report")
