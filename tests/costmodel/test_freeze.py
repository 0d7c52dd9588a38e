"""The third freeze (data/constants.yaml): refitting today reproduces it, every seen source is named, predict and
the evaluations use it, and the rules for the next sealed set were written down before that set was read."""

from __future__ import annotations

import subprocess

import pytest

from eagle3lab.costmodel.freeze import CONSTANTS, constants_commit, current_engine, load_constants, orchestration, refit
from eagle3lab.paths import REPO_ROOT
from eagle3lab.costmodel.validation import load_dataset


def test_refitting_the_seen_data_today_gives_the_frozen_constants():
    frozen = load_constants().freeze.engines
    again = refit()
    assert set(again) == set(frozen)
    for engine, values in frozen.items():
        for field, value in values.items():
            assert again[engine][field] == pytest.approx(value, abs=5e-7), (engine, field)


def test_the_freeze_names_every_seen_source_and_fits_nothing_for_the_async_engine():
    f = load_constants().freeze
    assert set(f.fitted_on) == {s.id for s in load_dataset().sources}
    assert orchestration("vllm-0.19") == {}
    assert current_engine("vllm-0.19").spec_cycle_extra_s == 0.0
    assert current_engine("sglang-0.5-spec-v2").spec_tp_extra_s == f.engines["sglang-0.5"]["spec_tp_extra_s"]
    assert "frozen_3" in current_engine("sglang-0.5").sources["spec_tp_extra_s"]


def test_the_sealed_evaluation_rules_cover_every_input_a_point_needs():
    rules = load_constants().sealed_evaluation_rules
    assert {"engine", "hardware", "tp", "context", "options", "calibration", "acceptance"} <= set(rules)
    assert "never instead" in rules["engine"]  # points the model has no engine for still count


def test_the_recorded_constants_commit_holds_the_constants_as_they_are_now():
    """The record names a commit whose constants.yaml is byte-identical to today's: a revision of the constants
    without a new record fails here (needs the repository's history, as a clone has it)."""
    commit = constants_commit()
    assert commit is not None, "costmodel/data/constants_commit.yaml is missing"
    rel = CONSTANTS.relative_to(REPO_ROOT).as_posix()
    then = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    assert then == CONSTANTS.read_bytes()
