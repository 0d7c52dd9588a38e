"""JSON sidecars: every notebook writes what it found next to its executed copy.

Figures and the report are drawn from sidecars, so they can be redrawn without rerunning a server. Writes are
atomic (temporary file, then rename) so a crash mid-write never leaves a truncated sidecar behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from eagle3lab.paths import repo_dir


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, (Path, dt.date)):
        return str(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in a sidecar")


def write_json_atomic(path: Path, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, default=_default, sort_keys=False)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


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
