"""Per-release trace results shipped with the package, so a fresh machine does not fetch and parse every release.

Why: notebook 02's bisect audits every sglang release from 0.5.6 on (25 wheels: 137 s on a cold 2-core machine,
most of it parsing), its capture-order bisect opens several more, and its per-release table of captured layers reads
the hook of every release, yet each row depends only on the release (a published wheel never changes) and on this
package's trace code. The record holds the rows this code computed, keyed by both, with when they were traced: a
row found there is not traced again and is labelled so. Any change to the trace code changes every key, so a stale
record is never read; it is traced again release by release, and a test names the command that rewrites the record.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from eagle3lab import resultcache

RECORD = resultcache.PACKAGE_ROOT / "trace" / "data" / "release_rows.json"
RECORD_COMMAND = "python -m eagle3lab upstream-fixes --record"
BISECT_ROW, CAPTURE_ORDER = "audit bisect row", "capture-order defect"
CAPTURE_RULE = "capture layers"  # the order defect and the Kimi family's hook body (trace.release_layers)
# The trace code of the other engine and of the engine-neutral view, which sglang's rows never run.
NOT_SGLANG = ("trace/vllm/", "trace/engine_audit.py")


@lru_cache(maxsize=1)
def _trace_code() -> str:
    files = sorted(p.relative_to(resultcache.PACKAGE_ROOT).as_posix()
                   for p in (resultcache.PACKAGE_ROOT / "trace").rglob("*.py"))
    return resultcache.code_hash([f for f in files if not f.startswith(NOT_SGLANG)])


def row_key(kind: str, version: str, *args: str) -> str:
    """The key of one release's row: what it is, the release, its arguments and the trace code."""
    return resultcache.key_of(kind, version, *args, _trace_code())


def recorded(kind: str, versions: Iterable[str], *args: str, path: Path | None = None) -> dict[str, Any]:
    """The rows the record (``RECORD`` unless ``path``) holds for these releases under this code, by version (stale
    or absent ones left out)."""
    entries = resultcache.load_record(path or RECORD)
    found = {version: entries.get(row_key(kind, version, *args)) for version in versions}
    return {version: entry["result"]["row"] for version, entry in found.items() if entry and "row" in entry["result"]}


def entries_for(kind: str, rows: Mapping[str, Any], *args: str) -> dict[str, dict[str, Any]]:
    """Rows just traced (for a new record), by version -> key -> {"check", "result", "measured_at"}."""
    taken = resultcache.taken_now()
    label = f" ({', '.join(args)})" if args else ""
    return {row_key(kind, version, *args): {"check": f"{kind} of sglang {version}{label}", "result": {"row": row},
                                            "measured_at": taken}
            for version, row in rows.items()}


def write(entries: dict[str, dict[str, Any]], releases: Sequence[str], path: Path | None = None) -> Path:
    """The record, atomically, with the command that made it and the releases it covers."""
    return resultcache.write_record(path or RECORD, entries, {"made_by": RECORD_COMMAND, "releases": list(releases)})
