"""Notebook 04 end to end on CPU (papermill, from the records the package ships), and REPORT.md's section on vLLM
rendered from its sidecar: every number in it is one of the sidecar's, and every block with a number is tagged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from timing import patience

from eagle3lab import sidecars
from eagle3lab.paths import REPO_ROOT
from eagle3lab.report import provenance, vllm_section
from eagle3lab.sidecars import SCHEMA_VERSION, VllmSameClassSidecar


@pytest.fixture(scope="module")
def notebook_04(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nb04")
    env = {**os.environ, "CI": "1", "EAGLE3LAB_FIGURES_DIR": str(root / "figures"),
           "EAGLE3LAB_ARTIFACTS_DIR": str(root / "artifacts")}
    cmd = [sys.executable, "-m", "papermill", "-k", "eagle3lab", "--cwd", str(root),
           str(REPO_ROOT / "notebooks" / "04_vllm_same_class.ipynb"), str(root / "out.ipynb")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "artifacts" / "04_vllm_same_class.cpu.json"


@pytest.mark.notebook
def test_notebook_04_shows_the_failure_on_the_last_unfixed_release_and_not_on_the_first_fixed(notebook_04):
    side = json.loads(notebook_04.read_text())
    assert side["schema_version"] == SCHEMA_VERSION
    assert [a["release"] for a in side["audits"]] == ["0.15.0", "0.17.1", "0.18.0", "0.34.0"]
    assert side["preflight"]["0.17.1"]["will_crash"] is True and side["preflight"]["0.18.0"]["will_crash"] is False
    assert side["kimi_bisect"]["first_not_crashing"] == "0.18.0"
    runs = {(r["release"], r["mode"]): r for r in side["cpu_runs"]}
    assert "allow-list" in runs[("0.17.1", "eagle3")]["stage"]
    assert "allow-list" not in runs[("0.18.0", "eagle3")]["stage"]
    assert side["cpu_source"].startswith(("release record", "measured now"))
    engines = {row["engine"] for row in side["layers"]}
    assert engines == {"vllm", "sglang"}


@pytest.mark.notebook
def test_the_vllm_section_of_report_md_takes_every_number_from_the_sidecar(notebook_04):
    side = sidecars.read(VllmSameClassSidecar, "cpu", path=notebook_04)  # as the report reads it (digest checked)
    loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                undefined=jinja2.StrictUndefined)
    text = loader.get_template("vllm_section.md.jinja").render(vllm=vllm_section.context(side))
    assert "## What notebook 04 found" in text and "0.18.0" in text  # the vLLM appendix of REPORT.md
    evidence = provenance.Evidence.of(side)
    structural = {"8", "04", "3"}  # the section's number, the notebook's, EAGLE-3's
    assert [(t.text, t.line) for t in provenance.unsourced_numbers(text, evidence, structural)] == []
    assert [(b.first_line, b.text[:80]) for b in provenance.untagged_blocks(text, structural)] == []
    assert loader.get_template("vllm_section.md.jinja").render(vllm=None).strip() == ""  # no sidecar, no section
