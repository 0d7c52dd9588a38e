"""What software and hardware a run used: shown in every notebook and stored in every sidecar.

The version check runs before any launch, because a wrong sglang release would make every later result about
a different code base than the profile claims.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
import os
import platform
import subprocess

import psutil

from eagle3lab.errors import EnvironmentProblem, PatchError
from eagle3lab.package.location import installed_root
from eagle3lab.runtime import gpuinfo
from eagle3lab.package.release import drift
from eagle3lab.paths import REPO_ROOT

PACKAGES = ("sglang", "sgl-kernel", "torch", "transformers", "papermill")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def sgl_kernel_arch_dirs() -> list[str]:
    """The per-architecture op libraries the installed sgl-kernel ships (``sm90``, ``sm100``, ...), found on disk
    without importing it (its import loads CUDA libraries)."""
    spec = importlib.util.find_spec("sgl_kernel")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(list(spec.submodule_search_locations)[0])
    return sorted((d.name for d in root.iterdir() if d.is_dir() and d.name.startswith("sm")
                   and any(d.glob("common_ops*"))), key=lambda n: int("".join(filter(str.isdigit, n)) or 0))


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
    """GPUs seen by torch, or 'none', asked in a child process (``gpuinfo.inventory``): a process that touches
    CUDA holds a context on every GPU, and the notebook kernel must not hold one while servers need the memory."""
    inv = gpuinfo.inventory()
    if inv.count == 0:
        return "none" if not inv.error or "no NVIDIA driver" in inv.error else f"none ({inv.error})"
    return f"{inv.count}x {inv.gpus[0].name}"


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
