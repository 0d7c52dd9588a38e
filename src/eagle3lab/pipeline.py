"""The main job in one call: run 01 -> 02 -> 03, export HTML, draw the model's figures, write REPORT.md.

At the top of the stage order: it runs the notebooks (``runbook``) and then renders the report (``report``) from
what they wrote, so neither of those needs to know about the other.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from eagle3lab import runguard, signals, staging
from eagle3lab.errors import Eagle3LabError
from eagle3lab.paths import REPO_ROOT
from eagle3lab.report import model_evidence
from eagle3lab.report.build import gather_sources
from eagle3lab.report.evidence_file import write_report
from eagle3lab.report.figures import model_figures
from eagle3lab.report.html import export_html
from eagle3lab.report.inputs import check_inputs, check_sidecar, sidecars_of
from eagle3lab.runbook import (EXTRA_NOTEBOOKS, NOTEBOOKS, available_notebooks, executed_path, notebook_path,
                               profile_name, profile_overrides, run_all)


@dataclass
class ReportOutputs:
    executed: list[Path] = field(default_factory=list)
    html: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    report_md: Path | None = None



def report_path() -> Path:
    """``REPORT.md`` at the top of the repository (``EAGLE3LAB_REPORT_MD`` moves it, for tests)."""
    return Path(os.environ.get("EAGLE3LAB_REPORT_MD", REPO_ROOT / "REPORT.md"))


def build_report(profile: str = "cpu", run: bool = True, hide_code: bool = False,
                 notebooks: Sequence[str] | None = None, parameters: dict[str, Any] | None = None,
                 per_notebook: Mapping[str, Mapping[str, Any]] | None = None) -> ReportOutputs:
    """Run the notebooks (unless ``run=False``), export HTML, draw the model's figures, write REPORT.md.

    ``profile`` is a name or a YAML path; outputs are labelled with the profile's own name. With ``run=False``
    nothing is written unless every executed notebook and sidecar is there, readable and from the same run.
    ``per_notebook``: one notebook's own parameters (``runbook.run_all``).
    """
    runguard.check_writable(runguard.output_folders(report_path()))
    with runguard.run_lock("writing the report"):
        return _build_report(profile, run, hide_code, notebooks, parameters, per_notebook)


def _build_report(profile: str, run: bool, hide_code: bool, notebooks: Sequence[str] | None,
                  parameters: dict[str, Any] | None,
                  per_notebook: Mapping[str, Mapping[str, Any]] | None = None) -> ReportOutputs:
    """Everything the run writes goes to a staging folder first and is published only once all of it is written:
    a failure at any cell or step leaves figures/, reports/, the sidecars and REPORT.md as the last good run left
    them, and its one line says where this run's copies are (``staging``)."""
    label = profile_name(profile)
    given = list(notebooks or available_notebooks())  # numbers, names or .ipynb paths, as the user gave them
    names = [notebook_path(n).stem for n in given]
    others = [nb for nb in available_notebooks() if nb not in names]  # the report reads their sidecars too
    if not run:  # checked where they are, before anything is staged or written
        _check_inputs(profile, label, names, others, [executed_path(n, label) for n in names])
    seeds = [path for nb in NOTEBOOKS + EXTRA_NOTEBOOKS for path in sidecars_of(nb, label)]
    seeds += [] if run else [executed_path(n, label) for n in names]
    with staging.staged(label, report_path()) as stage:
        stage.seed(seeds)
        try:
            out = _render(profile, label, given, others, run, hide_code, parameters, per_notebook)
        except BaseException as exc:
            _say_kept(exc, stage)
            raise
        published = stage.publish()
    out.executed, out.html, out.figures = ([_published(p, stage) for p in paths]
                                           for paths in (out.executed, out.html, out.figures))
    out.report_md = report_path()
    print(f"published {len(published)} file(s) of this run", flush=True)
    return out


def _check_inputs(profile: str, label: str, names: Sequence[str], others: Sequence[str],
                  executed: list[Path]) -> list[Path]:
    check_inputs(label, names, executed)
    for other in others:
        for path in sidecars_of(other, label):
            if path.exists():
                check_sidecar(other, label, path, f"rerun it: python -m eagle3lab report --profile {profile}")
    return executed


def _render(profile: str, label: str, given: Sequence[str], others: Sequence[str], run: bool, hide_code: bool,
            parameters: dict[str, Any] | None,
            per_notebook: Mapping[str, Mapping[str, Any]] | None = None) -> ReportOutputs:
    """The run and the report, inside the stage: every path below is the staging folder's. ``given`` are the
    notebooks as the user named them (a path to an ``.ipynb`` outside notebooks/ is run from where it is)."""
    out = ReportOutputs()
    names = [notebook_path(n).stem for n in given]
    if run:
        out.executed = _check_inputs(profile, label, names, others, run_all(profile, given, parameters, per_notebook))
    else:
        out.executed = [executed_path(n, label) for n in names]
    for path in out.executed:
        out.html.append(export_html(path))
        if hide_code:
            out.html.append(export_html(path, hide_code=True))
    out.figures = model_figures(profile, profile_overrides(parameters))
    sources = gather_sources(label, out.figures)
    model_evidence.save(sources.model, label)
    out.report_md = report_path()
    write_report(sources, out.report_md)  # and reports-evidence/<profile>.json beside it (what it was rendered from)
    return out


def _published(path: Path, stage: staging.Stage) -> Path:
    """A staged path as it is after publishing."""
    for name, real in stage.targets.items():
        if name != "top" and Path(path).is_relative_to(stage.folder(name)):
            return real / Path(path).relative_to(stage.folder(name))
    return Path(path)


def _say_kept(exc: BaseException, stage: staging.Stage) -> None:
    """Add to the failure's one line that nothing was published, and where this run's copies are."""
    if not stage.written():
        return
    note = (f"; nothing was published: figures, reports, sidecars and {stage.report_name} stay as the last good run "
            f"left them; this run's copies are in {stage.root}")
    if isinstance(exc, Eagle3LabError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (exc.args[0] + note, *exc.args[1:])
    elif isinstance(exc, KeyboardInterrupt):
        signals.restored(note.removeprefix("; "))
    else:
        print(note.removeprefix("; "), file=sys.stderr, flush=True)
