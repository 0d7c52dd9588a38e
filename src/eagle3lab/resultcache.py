"""Measured results kept on disk by key, so a warm run does not measure the same thing twice.

Why: some checks (the generated fixes' ModelRunner capture runs) take minutes on CPU, yet depend only on their
inputs: the patch text, the installed sglang, the versions of torch and transformers and the project code that
runs them. The key hashes all of those, so a change to any of them measures again. A cached result is never
shown as new: it carries the date and machine it was measured on and ``cached: true``. A damaged entry is
measured again, never trusted; a failed check is not stored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

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


def cached_result(namespace: str, key: str, measure: Callable[[], dict[str, Any]],
                  keep: Callable[[dict[str, Any]], bool] = lambda result: True) -> dict[str, Any]:
    """The result stored under ``namespace/key``, or ``measure()`` now, stored with when and where it was taken.

    Only results that ``keep`` accepts are stored (e.g. passing checks: a failure may be the machine's, so it is
    measured again next time)."""
    path = cache_dir(namespace) / f"{key}.json"
    if path.is_file():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored.get("format") == FORMAT and isinstance(stored.get("result"), dict):
                return {**stored["result"], "measured_at": stored["measured_at"], "cached": True}
        except (OSError, ValueError, KeyError):
            pass  # damaged: measure again
    result = measure()
    taken = {"measured_at": {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                             "machine": f"{platform.machine()}, {platform.system()}"}}
    if keep(result):
        write_json_atomic(path, {"format": FORMAT, "result": result, **taken})
    return {**result, **taken, "cached": False}


def measured_label(result: dict[str, Any]) -> str:
    """When a verification was measured, and whether this run took it from the cache."""
    taken = result.get("measured_at") or {}
    if not taken:
        return "now"
    return f"{taken['date']} ({'cached' if result.get('cached') else 'now'})"
