"""Notebook 03's diagnostics get the cost model's break-even for the run, so the acceptance rule can fire."""

from __future__ import annotations

import pytest

from eagle3lab.notebook.patch_and_bench import diagnose_run, run_break_even_or_none
from conftest import synthetic_arm
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.costmodel import presets
from eagle3lab.report import run_model
from eagle3lab.runtime.profiles import load_profile

RULE = "acceptance length below break-even"


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))  # no notebook-02 sidecar: only the bench evidence
    monkeypatch.setattr(presets, "measure_copy_bandwidth", lambda *a, **k: 5e9)  # the same deployment every call
    return load_profile("cpu")


@pytest.mark.parametrize("verify_ct", [8, 3])
def test_acceptance_rule_judges_the_measured_acceptance_against_the_runs_break_even(cpu, tmp_path, verify_ct):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.03, verify_ct)])
    break_even, where = run_model.run_break_even(cpu, report)
    findings = {f["rule"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    finding = findings[RULE]
    accept = 9 / verify_ct
    assert finding["applies"] == (accept < break_even)
    assert f"vs break-even {break_even:.2f}" in finding["evidence"] and "at 4 requests" in finding["evidence"]
    assert f"mean accept length {accept:.2f}" in finding["evidence"]


def test_low_acceptance_fires_the_rule(cpu, tmp_path):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.03, 9)])
    findings = {f["rule"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    assert findings[RULE]["applies"]  # acceptance 1.0: every cycle costs more than the one token it yields


def test_without_a_calibration_point_the_rule_stays_out_and_says_why(cpu, tmp_path):
    report = BenchReport.create("cpu", [synthetic_arm("baseline", (2,), 0.02),
                                        synthetic_arm("eagle3", (2,), 0.03, 8)])
    value, why = run_break_even_or_none(cpu, report)
    assert value is None and "concurrency 1" in why
    assert RULE not in {f["rule"] for f in diagnose_run(cpu, report, tmp_path, tmp_path)}
    assert run_break_even_or_none(cpu, None) == (None, "no benchmark report")
