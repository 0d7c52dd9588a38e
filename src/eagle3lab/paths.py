"""Where things live: the repository's own folders and the per-user cache.

The cache (tiny models, downloaded wheels, the stub libcuda) lives outside the repository so a fresh clone
reuses it; ``EAGLE3LAB_CACHE`` moves it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def repo_dir(name: str) -> Path:
    """A top-level folder of the repository (``artifacts``, ``figures``, ``reports``, ...), created on demand."""
    path = Path(os.environ.get(f"EAGLE3LAB_{name.upper()}_DIR", REPO_ROOT / name))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_root() -> Path:
    """The eagle3lab cache: ``EAGLE3LAB_CACHE`` or ``~/.cache/eagle3lab`` (not created here)."""
    return Path(os.environ.get("EAGLE3LAB_CACHE", Path.home() / ".cache" / "eagle3lab"))


def cache_dir(*parts: str) -> Path:
    """A folder under the eagle3lab cache, created on demand."""
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def params_dir() -> Path:
    return REPO_ROOT / "params"


def sidecar_dir() -> Path:
    """Where the notebooks' sidecars live: ``artifacts/``, or ``EAGLE3LAB_SIDECARS_DIR`` (a staged run's folder)."""
    staged = os.environ.get("EAGLE3LAB_SIDECARS_DIR")
    if not staged:
        return repo_dir("artifacts")
    path = Path(staged)
    path.mkdir(parents=True, exist_ok=True)
    return path


def staged_as() -> list[tuple[str, str]]:
    """While a run is staged (``eagle3lab.staging``): each staging folder and the folder it is published to, so a
    path recorded during the run can be written as it will be after publishing."""
    import json

    try:
        pairs = json.loads(os.environ.get("EAGLE3LAB_STAGED_AS") or "[]")
    except ValueError:
        return []
    return [(str(staged), str(real)) for staged, real in pairs]


def published_path(path: Path | str) -> Path:
    """``path`` as it will be once the staged run is published (unchanged outside a staged run). Why: a sidecar
    records its figures' paths; a path into ``artifacts/staging/<run>/`` would name a folder that is gone (or another
    run's) by the time the report is rendered again with ``report --no-run``."""
    text = str(path)
    for staged, real in staged_as():
        if text == staged or text.startswith(staged + os.sep):
            return Path(real + text[len(staged):])
    return Path(path)
