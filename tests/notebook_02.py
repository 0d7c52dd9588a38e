"""Notebook 02 run end to end through papermill, as the tests that check its sidecar run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from eagle3lab.paths import REPO_ROOT
from timing import patience


def run_notebook_02(tmp_path: Path, params: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run it with ``params`` (YAML), figures and artifacts under ``tmp_path`` and ``env`` on top of this one; the
    sidecar it wrote (the executed notebook is ``tmp_path / "out.ipynb"``)."""
    full = {**os.environ, **(env or {}), "CI": "1", "EAGLE3LAB_FIGURES_DIR": str(tmp_path / "figures"),
            "EAGLE3LAB_ARTIFACTS_DIR": str(tmp_path / "artifacts")}
    path = tmp_path / "params.yaml"
    path.write_text(params)
    cmd = [sys.executable, "-m", "papermill", "-k", "eagle3lab", "-f", str(path), "--cwd", str(tmp_path),
           str(REPO_ROOT / "notebooks" / "02_interface_trace.ipynb"), str(tmp_path / "out.ipynb")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((tmp_path / "artifacts" / "02_interface_trace.cpu.json").read_text())
