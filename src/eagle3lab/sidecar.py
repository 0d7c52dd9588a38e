"""JSON sidecars: every notebook writes what it found next to its executed copy.

Figures and the report are drawn from sidecars, so they can be redrawn without rerunning a server. Writes are
atomic (temporary file, then rename) so a crash mid-write never leaves a truncated sidecar behind.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from eagle3lab.atomic import write_json_atomic
from eagle3lab.paths import repo_dir


def today() -> str:
    """The UTC date every measured figure is labelled with."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def sidecar_path(notebook: str, profile: str) -> Path:
    """``artifacts/<notebook>.<profile>.json``."""
    return repo_dir("artifacts") / f"{notebook}.{profile}.json"


def write_sidecar(notebook: str, profile: str, data: dict[str, Any]) -> Path:
    stamped = {"notebook": notebook, "profile": profile,
               "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **data}
    return write_json_atomic(sidecar_path(notebook, profile), stamped)


def read_sidecar(notebook: str, profile: str) -> dict[str, Any]:
    return json.loads(sidecar_path(notebook, profile).read_text(encoding="utf-8"))
