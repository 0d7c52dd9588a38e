"""Measured results kept on disk by key, so a warm run does not measure the same thing twice.

Why: some checks (the generated fixes' ModelRunner capture runs) take minutes on CPU, yet depend only on their
inputs: the patch text, the installed sglang, the versions of torch and transformers and the project code that
runs them. The key hashes all of those, so a change to any of them measures again. A cached result is never
shown as new: it carries the date and machine it was measured on and ``cached: true``. A damaged entry is
measured again, never trusted; a failed check is not stored.

A release record (a JSON file shipped in the package, written by ``write_record``) holds passing results measured
once per release under the same keys, so a fresh machine with pinned versions reuses them instead of spending
minutes: the lookup is the user's cache, then the record, then a measurement. A result from the record says so
(``from_record: true``; ``measured_label`` "<date> (release record)"); a damaged record is ignored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from eagle3lab.atomic import write_json_atomic
from eagle3lab.paths import cache_dir

FORMAT = 1
PACKAGE_ROOT = Path(__file__).resolve().parent


def code_hash(folders: Sequence[str]) -> str:
    """Hash of every ``.py`` file under these package folders, or of these ``.py`` files (relative to
    ``eagle3lab/``), in a stable order."""
    digest = hashlib.sha256()
    for folder in folders:
        where = PACKAGE_ROOT / folder
        for path in [where] if where.suffix == ".py" else sorted(where.rglob("*.py")):
            digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def environment_key(packages: Iterable[str] = ("sglang", "torch", "transformers")) -> str:
    """The installed versions a measurement depends on."""
    parts = []
    for name in packages:
        try:
            parts.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name}=absent")
    return ",".join(parts)


def key_of(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def taken_now() -> dict[str, str]:
    """When and on what kind of machine a result is measured (no host name, no path)."""
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {platform.system()}"}


def load_record(path: Path) -> dict[str, dict[str, Any]]:
    """A release record's entries by key; a missing, damaged or other-format record gives none (so the checks are
    measured, never taken from a file that cannot be read)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        entries = record["entries"] if record.get("format") == FORMAT else {}
        return {key: entry for key, entry in entries.items()
                if isinstance(entry, dict) and isinstance(entry.get("result"), dict)
                and isinstance(entry.get("measured_at"), dict) and "date" in entry["measured_at"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def write_record(path: Path, entries: dict[str, dict[str, Any]], about: dict[str, Any]) -> Path:
    """Write a release record atomically: ``entries`` maps key -> {"check", "result", "measured_at"}."""
    return write_json_atomic(path, {"format": FORMAT, **about, "entries": dict(sorted(entries.items()))})


def cached_result(namespace: str, key: str, measure: Callable[[], dict[str, Any]],
                  keep: Callable[[dict[str, Any]], bool] = lambda result: True,
                  record: Optional[Mapping[str, dict[str, Any]]] = None, fresh: bool = False) -> dict[str, Any]:
    """The result stored under ``namespace/key``, else the release ``record``'s entry for ``key``, else
    ``measure()`` now, stored with when and where it was taken.

    Only results that ``keep`` accepts are stored (e.g. passing checks: a failure may be the machine's, so it is
    measured again next time). ``fresh`` measures whatever is stored (to write a new record)."""
    path = cache_dir(namespace) / f"{key}.json"
    if path.is_file() and not fresh:
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored.get("format") == FORMAT and isinstance(stored.get("result"), dict):
                return {**stored["result"], "measured_at": stored["measured_at"], "cached": True}
        except (OSError, ValueError, KeyError):
            pass  # damaged: measure again
    shipped = None if fresh else (record or {}).get(key)
    if shipped is not None:
        return {**shipped["result"], "measured_at": shipped["measured_at"], "cached": True, "from_record": True}
    result = measure()
    taken = {"measured_at": taken_now()}
    if keep(result):
        write_json_atomic(path, {"format": FORMAT, "result": result, **taken})
    return {**result, **taken, "cached": False}


def measured_label(result: dict[str, Any]) -> str:
    """When a verification was measured, and whether this run took it from the cache or the release record."""
    taken = result.get("measured_at") or {}
    if not taken:
        return "now"
    where = "release record" if result.get("from_record") else "cached" if result.get("cached") else "now"
    return f"{taken['date']} ({where})"
