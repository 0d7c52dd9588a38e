"""The main job in one call: run 01 -> 02 -> 03, export HTML, draw the model's figures, write REPORT.md.

At the top of the stage order: it runs the notebooks (``runbook``) and then renders the report (``report``) from
what they wrote, so neither of those needs to know about the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from eagle3lab import runguard
from eagle3lab.paths import REPO_ROOT
from eagle3lab.report import model_evidence
from eagle3lab.report.build import gather_sources
from eagle3lab.report.evidence_file import write_report
from eagle3lab.report.figures import model_figures
from eagle3lab.report.html import export_html
from eagle3lab.report.inputs import check_inputs, check_sidecar, sidecars_of
from eagle3lab.runbook import (available_notebooks, executed_path, notebook_path, profile_name, profile_overrides,
                               run_all)


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
                 notebooks: Sequence[str] | None = None, parameters: dict[str, Any] | None = None) -> ReportOutputs:
    """Run the notebooks (unless ``run=False``), export HTML, draw the model's figures, write REPORT.md.

    ``profile`` is a name or a YAML path; outputs are labelled with the profile's own name. With ``run=False``
    nothing is written unless every executed notebook and sidecar is there, readable and from the same run.
    """
    runguard.check_writable(runguard.output_folders(report_path()))
    with runguard.run_lock("writing the report"):
        return _build_report(profile, run, hide_code, notebooks, parameters)


def _build_report(profile: str, run: bool, hide_code: bool, notebooks: Sequence[str] | None,
                  parameters: dict[str, Any] | None) -> ReportOutputs:
    out = ReportOutputs()
    label = profile_name(profile)
    names = [notebook_path(n).stem for n in (notebooks or available_notebooks())]
    executed = run_all(profile, names, parameters) if run else [executed_path(n, label) for n in names]
    check_inputs(label, names, executed)
    for other in set(available_notebooks()) - set(names):  # the report reads their sidecars too
        for path in sidecars_of(other, label):
            if path.exists():
                check_sidecar(other, label, path, f"rerun it: python -m eagle3lab report --profile {profile}")
    out.executed = executed
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
