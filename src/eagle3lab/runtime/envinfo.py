"""What software and hardware a run used: shown in every notebook and stored in every sidecar.

The version check runs before any launch, because a wrong sglang release would make every later result about
a different code base than the profile claims.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess

import psutil

from eagle3lab.errors import EnvironmentProblem, PatchError
from eagle3lab.package.location import installed_root
from eagle3lab.package.release import drift
from eagle3lab.paths import REPO_ROOT

PACKAGES = ("sglang", "sgl-kernel", "torch", "transformers", "papermill")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_sglang(expected: str) -> str:
    """The installed sglang release, or one line saying what is wrong and how to fix it."""
    found = package_version("sglang")
    if found is None:
        raise EnvironmentProblem(f"sglang is not installed in this Python environment; run `make setup` "
                                 f"(the profile pins sglang=={expected})", package="sglang",
                                 expected=expected, found=None, problem="not_installed")
    if found != expected:
        raise EnvironmentProblem(f"sglang {found} is installed but the profile pins {expected}; "
                                 f"run `make setup` or set 'sglang_version' in the profile", package="sglang",
                                 expected=expected, found=found, problem="wrong_version")
    return found


def installed_changes() -> dict[str, list[str]]:
    """Files of the installed sglang that differ from its release's RECORD (``package.release.drift``):
    ``modified`` and ``missing``, both empty when the install is the release as published (or has no RECORD)."""
    try:
        diff = drift(installed_root())
    except PatchError:
        diff = None
    if diff is None:
        return {"modified": [], "missing": []}
    return {"modified": list(diff.modified), "missing": list(diff.missing)}


def git_revision() -> str | None:
    """The commit the run came from, with '+dirty' if the tree had changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("+dirty" if dirty else "")


def accelerators() -> str:
    """GPUs seen by torch, or 'none'. Importing torch here is fine: the notebook kernel never imports sglang."""
    try:
        import torch
    except ImportError:
        return "torch missing"
    if not torch.cuda.is_available():
        return "none"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return f"{len(names)}x {names[0]}"


def environment_table() -> dict[str, str]:
    """Versions, device and machine, one row each."""
    rows = {name: package_version(name) or "not installed" for name in PACKAGES}
    rows.update({
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{psutil.virtual_memory().total / 2**30:.0f} GiB",
        "accelerators": accelerators(),
        "git revision": git_revision() or "unknown",
    })
    return rows
