"""Notebook 01's assertion: it fails unless the server dies with exactly the expected signature."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3lab.repro.crashrepro import CrashRun, ExpectedCrash, expect_signature
from eagle3lab.errors import ExpectationError, NotebookFailed
from eagle3lab.runtime.server import LaunchOutcome


def outcome(status: str, tmp_path: Path) -> LaunchOutcome:
    return LaunchOutcome(status, 1.0, None if status != "died" else 1, tmp_path / "x.log", 0, 12345)


def test_a_server_that_comes_up_fails_the_expectation(tmp_path):
    with pytest.raises(ExpectationError) as err:
        expect_signature(CrashRun([], outcome("ready", tmp_path), None), ExpectedCrash())
    assert (err.value.found, err.value.expected) == ("ready", ExpectedCrash().describe())
    assert err.value.log == tmp_path / "x.log"


def test_a_server_that_hangs_fails_the_expectation(tmp_path):
    with pytest.raises(ExpectationError) as err:
        expect_signature(CrashRun([], outcome("timeout", tmp_path), None), ExpectedCrash())
    assert err.value.found == "timeout"


@pytest.mark.server
def test_the_real_crash_matches_the_default_signature(eagle3_crash):
    report = expect_signature(eagle3_crash, ExpectedCrash())
    assert report.missing_attribute == "set_eagle3_layers_to_capture"


@pytest.mark.server
def test_the_real_crash_fails_a_different_expected_signature(eagle3_crash):
    with pytest.raises(ExpectationError) as err:
        expect_signature(eagle3_crash, ExpectedCrash(missing_attribute="get_embed_and_head"))
    assert err.value.expected == ExpectedCrash(missing_attribute="get_embed_and_head").describe()
    assert err.value.found == eagle3_crash.report.signature


@pytest.mark.server
@pytest.mark.notebook
def test_notebook_01_fails_when_the_crash_is_not_the_expected_one(tmp_path, monkeypatch):
    """Through papermill: the notebook stops at its assertion cell, and the error names both signatures."""
    from eagle3lab.runbook import run_notebook
    from eagle3lab.runtime.server import free_port

    for name in ("artifacts", "reports", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(tmp_path / name))
    with pytest.raises(NotebookFailed) as err:
        run_notebook("01", "cpu", {"expected_attribute": "get_embed_and_head", "port": free_port()})
    assert (err.value.notebook, err.value.error_name) == ("01_crash_repro", "ExpectationError")
    assert "get_embed_and_head" in str(err.value)  # the cell's own one line reaches the user
    assert not (tmp_path / "artifacts" / "01_crash_repro.cpu.json").exists(), "no sidecar for a failed run"
