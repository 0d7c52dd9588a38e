"""Notebook 03's diagnostics are the doctor's rules engine on the run's own artifacts: the acceptance rule uses the
break-even the control arm measures (the cost model's beside it) and says "yes" where the run measures a slowdown."""

from __future__ import annotations

import pytest

from conftest import synthetic_arm
from eagle3lab.report import run_model
from eagle3lab.notebook.patch_and_bench.diagnosis import diagnose_run, run_break_even_or_none
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.bench.diagnostics.control_arm import control_cycles, measured_break_even
from eagle3lab.runtime.profiles import load_profile

RULE = "low_acceptance"


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))  # no notebook-02 sidecar: only the bench evidence
    return load_profile("cpu")


def recorded_run(arms):
    """A benchmark record as notebook 03 writes it: the host's copy bandwidth measured during the run."""
    return BenchReport.create("cpu", arms, copy_bandwidth=5e9)


def _findings(cpu, report, tmp_path, offline=None):
    return {f["cause"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path, offline)}


def test_without_a_control_arm_the_modelled_break_even_judges(cpu, tmp_path):
    report = recorded_run([synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.03, 3)])
    break_even, where = run_model.run_break_even(cpu, report)
    finding = _findings(cpu, report, tmp_path)[RULE]
    assert finding["threshold_provenance"] == "modelled"
    assert finding["applies"] == ("yes" if 9 / 3 < break_even else "no")
    assert f"{break_even:.2f} [modelled" in finding["evidence"]


def test_a_control_arm_measures_the_break_even_and_a_slowdown_says_yes(cpu, tmp_path):
    # control: acceptance 1.0 at 0.06 s per token vs the plain 0.02 s step -> one cycle = 3 plain steps
    report = recorded_run([synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.03, 4),
                                        synthetic_arm("eagle3-untrained", (1,), 0.06, 9, kind="eagle3_control")])
    rows = control_cycles(report)
    assert [r["concurrency"] for r in rows] == [1]
    threshold, at = measured_break_even(report)
    assert at == 1 and threshold.provenance == "measured"
    assert threshold.value == pytest.approx(rows[0]["cycle_ms"] / rows[0]["plain_step_ms"])
    finding = _findings(cpu, report, tmp_path)[RULE]
    assert finding["threshold_provenance"] == "measured"
    accept = 9 / 4
    assert finding["applies"] == ("yes" if accept < threshold.value else "no") == "yes"
    assert "[modelled" in finding["evidence"] and "slower than plain decoding" in finding["evidence"]


def test_prompt_rule_uses_the_drafters_offline_acceptance(cpu, tmp_path):
    report = recorded_run([synthetic_arm("baseline", (1,), 0.02),
                                        synthetic_arm("eagle3", (1,), 0.03, 4)])
    near = {"aligned": {"mean_accept_length": 9 / 4, "requests": 16}}
    far = {"aligned": {"mean_accept_length": 4.0, "requests": 16}}
    assert _findings(cpu, report, tmp_path, near)["chat_template_mismatch"]["applies"] == "no"
    assert _findings(cpu, report, tmp_path, far)["chat_template_mismatch"]["applies"] == "yes"
    assert _findings(cpu, report, tmp_path)["chat_template_mismatch"]["applies"] == "unknown"


def test_without_a_calibration_point_the_rule_says_unknown_and_why(cpu, tmp_path):
    report = recorded_run([synthetic_arm("baseline", (2,), 0.02),
                                        synthetic_arm("eagle3", (2,), 0.03, 8)])
    value, why = run_break_even_or_none(cpu, report)
    assert value is None and "concurrency 1" in why
    assert _findings(cpu, report, tmp_path)[RULE]["applies"] == "unknown"
    assert run_break_even_or_none(cpu, None) == (None, "no benchmark report")


def test_the_cycle_table_measures_the_break_even_before_the_control_arm():
    """The headline arm's own cycles (bench.cycle) decide the measured break-even; a control arm serving another
    drafter comes second, and the cost model's is shown beside either."""
    from eagle3lab.bench.diagnostics.artifacts import evidence_from_artifacts
    from eagle3lab.bench.diagnostics.control_arm import cycle_break_even

    table = {"cycle_in_plain_steps": 1.77, "cycle_ms": 15.97, "plain_step_ms": 9.01, "batch_size": 1,
             "eagle_arm": "eagle3", "profile": "cpu", "measured_on": "2026-12-01T17:40:00+00:00"}
    threshold, size = cycle_break_even(table)
    assert (threshold.value, threshold.provenance, size) == (1.77, "measured", 1)
    assert "one cycle 16.0 ms / plain step 9.0 ms at batch size 1" in threshold.where
    assert cycle_break_even(None) is None and cycle_break_even({"cycle_in_plain_steps": 0}) is None
    assert evidence_from_artifacts(cycle_components=table).break_even is None  # no bench report: nothing served


def test_with_a_cycle_table_the_served_arms_own_cycle_judges_not_the_control_arm(cpu, tmp_path):
    """A control arm whose cycle is slow (another drafter, or a loaded machine) must not overrule the headline arm's
    own measured cycle: with the cycle table the acceptance 2.25 against 1.5 plain steps per cycle is no cause."""
    report = recorded_run([synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.03, 4),
                                        synthetic_arm("eagle3-untrained", (1,), 0.5, 9, kind="eagle3_control")])
    table = {"cycle_in_plain_steps": 1.5, "cycle_ms": 30.0, "plain_step_ms": 20.0, "batch_size": 1,
             "eagle_arm": "eagle3", "profile": "cpu", "measured_on": "2026-12-01"}
    with_table = {f["cause"]: f for f in diagnose_run(cpu, report, tmp_path, tmp_path, None, table)}[RULE]
    without = _findings(cpu, report, tmp_path)[RULE]
    assert with_table["applies"] == "no" and "cycle table: arm 'eagle3'" in with_table["evidence"]
    assert without["applies"] == "yes"  # the slow control arm alone would call it low acceptance
