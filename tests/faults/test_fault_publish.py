"""Outputs change together or not at all (issue 43, item 2): a run writes into a staging folder and publishes only at
the end. A failure at the figure, model or render step of the report leaves figures/, reports/, the sidecars,
REPORT.md, its appendices and evidence byte-identical (and untouched: same mtimes), and its one line names the
staging folder holding this run's copies.

The report is rendered for real, in this process, from the real sidecars of the committed cpu run (the evidence
tree of ``reports-evidence/cpu.json``); each failure is injected by replacing the one function that fails.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from eagle3lab import sidecars, staging
from eagle3lab.errors import OutputWriteError, PerfModelError
from eagle3lab.paths import REPO_ROOT
from eagle3lab.pipeline import build_report

from .faultkit import cli, make_notebook, one_line

SIDECARS = (("crash", sidecars.CrashReproSidecar), ("trace", sidecars.InterfaceTraceSidecar),
            ("patch", sidecars.PatchBenchSidecar))
NOTEBOOKS = ("01_crash_repro", "02_interface_trace", "03_patch_and_bench")
LAST_GOOD_HTML = "<html>the last good run's notebook</html>"


def fingerprint(work: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of the published set with its mtime and bytes: all but artifacts/, and of artifacts/ the
    sidecars and the model's evidence of the cpu profile."""
    files = [p for p in sorted(work.rglob("*")) if p.is_file() and not p.is_relative_to(work / "artifacts")]
    files += sorted((work / "artifacts").glob("*.cpu.json"))
    return {str(p.relative_to(work)): (p.stat().st_mtime_ns, p.read_bytes()) for p in files}


@pytest.fixture
def last_good_run(tmp_path, monkeypatch) -> Path:
    """A checkout's outputs after a good cpu run: the committed figures, REPORT.md and evidence, the sidecars that
    evidence was rendered from, executed notebooks of that run and their HTML."""
    work = tmp_path / "work"
    for name in ("artifacts", "reports", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(work / name))
    monkeypatch.setenv("EAGLE3LAB_REPORT_MD", str(work / "REPORT.md"))
    monkeypatch.delenv("EAGLE3LAB_SIDECARS_DIR", raising=False)
    shutil.copytree(REPO_ROOT / "figures", work / "figures")
    shutil.copytree(REPO_ROOT / "reports-evidence", work / "reports-evidence")
    shutil.copy2(REPO_ROOT / "REPORT.md", work / "REPORT.md")
    started = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)).isoformat()
    (work / "reports").mkdir()
    for name in NOTEBOOKS:
        (work / "reports" / f"{name}.cpu.ipynb").write_text(json.dumps({
            "cells": [], "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"papermill": {"start_time": started, "exception": False}}}))
        (work / "reports" / f"{name}.cpu.html").write_text(LAST_GOOD_HTML)
    tree = json.loads((REPO_ROOT / "reports-evidence" / "cpu.json").read_text())["tree"]
    for key, schema in SIDECARS:
        sidecars.write(schema.model_validate(tree[key]))
    return work


def report_again() -> None:
    """``report --no-run`` of notebooks 01 and 02 (03's sidecar is read too; its benchmark record is not shipped)."""
    build_report("cpu", run=False, notebooks=["01", "02"])


def kept_stage(message: str, work: Path) -> Path:
    stages = sorted((work / "artifacts" / staging.STAGING_DIR).iterdir())
    assert len(stages) == 1
    assert "nothing was published: figures, reports, sidecars and REPORT.md stay as the last good run left them" \
           in message
    assert message.endswith(f"this run's copies are in {stages[0]}")
    return stages[0]


def test_a_failed_figure_leaves_the_last_good_set_untouched(last_good_run, monkeypatch, capsys):
    """The validation figure fails (a plotting error, not one of ours) after the incident's figures and the HTML
    were drawn: none of them is published, and the line on stderr says where they are."""
    from eagle3lab.report import figures

    before = fingerprint(last_good_run)

    def fails() -> Path:
        raise ValueError("x and y must have same first dimension")

    monkeypatch.setattr(figures, "validation_figure", fails)
    with pytest.raises(ValueError):
        report_again()
    assert fingerprint(last_good_run) == before
    stage = kept_stage(capsys.readouterr().err.strip().splitlines()[-1], last_good_run)
    assert (stage / "figures" / "report_step_breakdown.png").is_file()  # drawn, kept in the stage
    assert (stage / "reports" / "01_crash_repro.cpu.html").read_text() != LAST_GOOD_HTML


def test_a_failed_model_step_leaves_the_last_good_set_untouched(last_good_run, monkeypatch):
    from eagle3lab.report import model_evidence

    before = fingerprint(last_good_run)

    def fails(*_, **__) -> Path:
        raise PerfModelError("calibration: the measured step time is below what the model allows")

    monkeypatch.setattr(model_evidence, "save", fails)
    with pytest.raises(PerfModelError) as err:
        report_again()
    assert fingerprint(last_good_run) == before
    assert str(err.value).startswith("calibration: the measured step time is below what the model allows; ")
    stage = kept_stage(str(err.value), last_good_run)
    assert (stage / "figures" / "model_validation.png").is_file()


def test_a_failed_render_leaves_the_last_good_set_untouched(last_good_run, monkeypatch):
    """The evidence beside REPORT.md cannot be written after REPORT.md and its appendices were: neither is
    published (without the stage, REPORT.md would no longer match its evidence)."""
    from eagle3lab.report import evidence_file

    before = fingerprint(last_good_run)

    def fails(path, *_, **__) -> Path:
        raise OutputWriteError(f"no space left on the device while writing {path}; free some space and rerun "
                               f"(nothing was replaced)", path=Path(path))

    monkeypatch.setattr(evidence_file, "write_json_atomic", fails)
    with pytest.raises(OutputWriteError) as err:
        report_again()
    assert fingerprint(last_good_run) == before
    stage = kept_stage(str(err.value), last_good_run)
    assert (stage / "top" / "REPORT.md").is_file() and (stage / "top" / "docs" / "report" / "benchmark.md").is_file()


def test_a_good_run_publishes_everything_and_leaves_no_stage(last_good_run):
    before = fingerprint(last_good_run)
    report_again()
    after = fingerprint(last_good_run)
    changed = {name for name in after if before.get(name) != after[name]}
    assert {"REPORT.md", "reports-evidence/cpu.json", "reports/01_crash_repro.cpu.html",
            "figures/model_validation.png", "docs/report/benchmark.md", "artifacts/report_model_evidence.cpu.json"} \
        <= changed
    assert not any(name.startswith(("artifacts/0", "reports/0")) and name.endswith((".json", ".ipynb"))
                   for name in changed)  # the sidecars and executed notebooks it read: seeded, not published again
    assert "staging" not in (last_good_run / "reports-evidence" / "cpu.json").read_text()
    assert not (last_good_run / "artifacts" / staging.STAGING_DIR).exists()


def test_a_refused_report_stages_nothing(last_good_run):
    """Inputs are checked where they are, before a stage exists: a refusal leaves no staging folder behind."""
    (last_good_run / "artifacts" / "02_interface_trace.cpu.json").write_text('{"verdict": ')
    before = fingerprint(last_good_run)
    with pytest.raises(Exception, match="is unreadable"):
        report_again()
    assert fingerprint(last_good_run) == before
    assert not (last_good_run / "artifacts" / staging.STAGING_DIR).exists()


@pytest.mark.notebook
def test_a_failed_notebook_cell_after_its_figure_publishes_nothing(sandbox, no_leftover_processes, tmp_path):
    """A notebook run by ``report`` draws a figure into figures/ and then fails (as notebook 03's model cell did):
    figures/, reports/ and REPORT.md stay byte-identical; the line names the stage with the figure and the failed
    notebook's copy."""
    work = sandbox.work
    (work / "figures").mkdir()
    (work / "figures" / "bench_throughput_cpu.png").write_bytes(b"the last good run's figure")
    (work / "REPORT.md").write_text("# the last good report\n")
    (work / "reports").mkdir()
    (work / "reports" / "late.cpu.ipynb").write_text("the last good executed copy")
    notebook = make_notebook(tmp_path / "late.ipynb",
                             "from eagle3lab.paths import repo_dir\n"
                             "(repo_dir('figures') / 'bench_throughput_cpu.png').write_bytes(b'this run')",
                             "raise RuntimeError('the model cell fails')")
    before = fingerprint(work)
    result = cli(sandbox, "report", "--notebooks", str(notebook))
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert "notebook late failed in cell" in line and "RuntimeError: the model cell fails" in line
    assert fingerprint(work) == before
    stage = kept_stage(line, work)
    assert (stage / "figures" / "bench_throughput_cpu.png").read_bytes() == b"this run"
    assert "the model cell fails" in (stage / "reports" / "late.cpu.failed.ipynb").read_text()
    sandbox.assert_nothing_left()


def test_a_path_recorded_inside_a_stage_is_written_as_it_will_be_published(tmp_path, monkeypatch):
    """Notebook 03 records its figures' paths in its sidecar while its run is staged: they must name figures/, not
    the staging folder (``report --no-run`` later renders from another stage, and the first one is gone)."""
    from eagle3lab.paths import published_path, repo_dir

    for name in ("artifacts", "reports", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(tmp_path / name))
    monkeypatch.delenv("EAGLE3LAB_SIDECARS_DIR", raising=False)
    outside = tmp_path / "elsewhere" / "x.png"
    with staging.staged("cpu", tmp_path / "REPORT.md") as stage:
        drawn = repo_dir("figures") / "bench_throughput_cpu.png"
        assert drawn.is_relative_to(stage.root)
        assert published_path(drawn) == tmp_path / "figures" / "bench_throughput_cpu.png"
        assert published_path(outside) == outside
    assert published_path(drawn) == drawn  # outside a stage nothing is mapped
