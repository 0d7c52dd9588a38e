"""The project's Jupyter kernel, registered where the environment's own Jupyter looks (a venv's or a conda
environment's prefix, else the user's), and ``make lab`` rooted at the repository without set-up beyond the venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from eagle3lab.commands import setup
from eagle3lab.paths import REPO_ROOT
from eagle3lab.runbook import KERNEL_NAME


def test_the_kernel_goes_to_a_venvs_or_a_conda_environments_own_prefix(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "python"))
    assert setup.kernel_prefix() == tmp_path / "venv"  # a venv: --sys-prefix
    conda = tmp_path / "conda-env"
    (conda / "conda-meta").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(conda))
    monkeypatch.setattr(sys, "base_prefix", str(conda))  # conda's python is its environment's own
    assert setup.kernel_prefix() == conda
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "system"))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "system"))
    assert setup.kernel_prefix() is None  # neither: the user's kernels


def test_the_registered_kernel_runs_this_interpreter_from_the_prefix_jupyter_reads(tmp_path):
    folder = setup.register_kernel(tmp_path)
    assert folder == tmp_path / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec = json.loads((folder / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["display_name"] == setup.KERNEL_DISPLAY_NAME


def test_make_lab_roots_jupyter_at_the_repository_and_trains_nothing(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".eagle3lab-installed"
    stamp.touch()
    later = time.time() + 60  # newer than requirements.txt and pyproject.toml: the venv is up to date
    os.utime(stamp, (later, later))
    done = subprocess.run(["make", "-n", "lab", f"VENV={venv}"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    commands = done.stdout.strip().splitlines()
    assert any("jupyter lab --notebook-dir=. " in c for c in commands)
    assert not any("eagle3lab setup" in c or "drafter" in c for c in commands)
