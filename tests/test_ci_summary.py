"""The CI job's verdict table (``python -m eagle3lab ci-summary``): computed from the notebooks' sidecars of a real
run, and, where a notebook failed or never ran, rows that say so without failing the step themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagle3lab import ci_summary, sidecars
from timing import patience


def summary_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EAGLE3LAB_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
           "EAGLE3LAB_REPORTS_DIR": str(tmp_path / "reports")}
    return subprocess.run([sys.executable, "-m", "eagle3lab", "ci-summary", *args], capture_output=True, text=True,
                          env=env, timeout=patience(120))


def table_rows(markdown: str) -> dict[str, tuple[str, str]]:
    cells = [line.strip("|").split(" | ") for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    return {check.strip(): (verdict.strip(), evidence.strip()) for check, verdict, evidence in cells[1:]}


def test_a_run_that_never_started_gives_every_row_as_not_run_and_exit_0(tmp_path):
    done = summary_cli(tmp_path)
    assert done.returncode == 0, done.stderr
    rows = table_rows(done.stdout)
    assert list(rows) == ["crash reproduced (01)", "interface trace (02)", "patch (03)", "relaunch (03)",
                          "speedup (03)"]
    assert all(verdict == "notebook not run" for verdict, _ in rows.values())
    assert rows["crash reproduced (01)"][1] == "no sidecar 01_crash_repro.cpu.json"  # outside the checkout: its name


def test_a_failed_notebook_and_an_unreadable_sidecar_are_rows_that_say_so(tmp_path):
    reports, artifacts = tmp_path / "reports", tmp_path / "artifacts"
    reports.mkdir()
    artifacts.mkdir()
    (reports / "01_crash_repro.cpu.failed.ipynb").write_text("{}")
    (reports / "02_interface_trace.cpu.ipynb").write_text("{}")
    (artifacts / "02_interface_trace.cpu.json").write_text("{ not json")
    done = summary_cli(tmp_path)
    assert done.returncode == 0, done.stderr
    rows = table_rows(done.stdout)
    assert rows["crash reproduced (01)"][0] == "notebook failed"
    assert "01_crash_repro.cpu.failed.ipynb" in rows["crash reproduced (01)"][1]
    assert rows["interface trace (02)"][0] == "no sidecar" and "is unreadable" in rows["interface trace (02)"][1]
    assert "01_crash_repro failed (01_crash_repro.cpu.failed.ipynb); 02_interface_trace passed" in done.stdout


def test_a_failed_run_that_published_nothing_is_summarised_from_its_staged_copies(tmp_path):
    """``report`` stages a run's outputs (``eagle3lab.staging``): a run that failed in 03 after 01 passed leaves the
    last good run published and its own copies staged; the summary describes the failed run, and says so."""
    reports, artifacts = tmp_path / "reports", tmp_path / "artifacts"
    reports.mkdir()
    (reports / "01_crash_repro.cpu.ipynb").write_text("{}")  # the last good run, published
    (reports / "03_patch_and_bench.cpu.ipynb").write_text("{}")
    stage = artifacts / "staging" / "cpu-20261205T050000Z-123"
    (stage / "reports").mkdir(parents=True)
    (stage / "sidecars").mkdir()
    (stage / "reports" / "01_crash_repro.cpu.ipynb").write_text("{}")
    (stage / "reports" / "03_patch_and_bench.cpu.failed.ipynb").write_text("{}")
    done = summary_cli(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "A run that published nothing; from its copies in cpu-20261205T050000Z-123." in done.stdout
    assert "03_patch_and_bench failed (03_patch_and_bench.cpu.failed.ipynb)" in done.stdout
    assert table_rows(done.stdout)["patch (03)"][0] == "notebook failed"

    os.utime(stage / "reports" / "03_patch_and_bench.cpu.failed.ipynb", (1, 1))  # a later good run published
    os.utime(stage / "reports" / "01_crash_repro.cpu.ipynb", (1, 1))
    assert "published nothing" not in summary_cli(tmp_path).stdout


def test_an_unknown_profile_is_one_line(tmp_path):
    done = summary_cli(tmp_path, "--profile", "no-such-profile")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no-such-profile" in done.stderr


@pytest.mark.notebook
@pytest.mark.server
def test_the_verdicts_of_the_full_report_come_from_its_sidecars(full_report):
    """The README's main job, end to end: each row says what the notebooks measured and asserted."""
    rows = {row.check: row for row in ci_summary.verdict_rows("cpu")}
    crash = sidecars.read(sidecars.CrashReproSidecar, "cpu")
    trace = sidecars.read(sidecars.InterfaceTraceSidecar, "cpu")
    bench = sidecars.read(sidecars.PatchBenchSidecar, "cpu")
    assert rows["crash reproduced (01)"].verdict == "yes"
    assert f"has no {crash.crash.report.missing_attribute}" in rows["crash reproduced (01)"].evidence
    missing = trace.verdict.missing_members
    assert rows["interface trace (02)"].verdict == f"{len(missing)} member(s) missing" and missing
    assert ", ".join(missing) in rows["interface trace (02)"].evidence
    assert rows["patch (03)"].verdict == "applied" and ", ".join(bench.delegated_members) in rows["patch (03)"].evidence
    assert rows["relaunch (03)"].verdict == "serves" and "full delegation patch: ready" in rows["relaunch (03)"].evidence
    head = min(bench.interleaved_sweep, key=lambda s: s.concurrency or 0)
    speed = rows["speedup (03)"]
    assert speed.verdict.startswith(f"{head.speedup:.2f}x, ") and f"concurrency {head.concurrency}" in speed.evidence
    if head.speedup_low is not None:
        assert f"{head.speedup_low:.2f}-{head.speedup_high:.2f}" in speed.verdict
    assert json.dumps(ci_summary.markdown("cpu")).count("| speedup (03) |") == 1
