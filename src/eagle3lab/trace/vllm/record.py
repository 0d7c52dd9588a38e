"""vLLM audits shipped with the package, so ``audit --engine vllm``, the bisect and notebook 04 work offline.

Why: each release's audit needs its source (4-15 MB fetched by range requests) and 6-15 s of parsing on one core;
a bisect over every release since v0.10 would take minutes and the network. A published wheel never changes, so an
audit depends only on the release and on the code that computed it: the record keeps each release's audit under a
key of both (the hash of ``trace/vllm/`` and the modules it reads with), with when it was traced. Any change to that
code changes every key; a stale record is never read, and a test names the command that rewrites it. The rows are
stored gzip-compressed (about 5 KB a release instead of 80).
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from eagle3lab import resultcache
from eagle3lab.atomic import write_bytes_atomic

RECORD = resultcache.PACKAGE_ROOT / "trace" / "data" / "vllm_audit.json.gz"
RECORD_COMMAND = "python -m eagle3lab audit --engine vllm --record"
FORMAT = 1
# The code an audit runs (not the preflight, bisect or this record's own reading of it).
CODE = tuple(f"trace/vllm/{name}.py" for name in ("source", "registry", "interface", "classes", "audit",
                                                          "layers")) + (
    "trace/modindex.py", "trace/sources.py", "package/ranged_wheel.py")
ROW_FIELDS = ("arch", "class", "module", "wrapper_of", "implements", "how", "defect", "evidence", "category",
              "passes_check", "inner_implements")
MODULE_PREFIX = "vllm.model_executor.models."


@lru_cache(maxsize=1)
def code_key() -> str:
    """The hash of the code an audit depends on."""
    return resultcache.code_hash(CODE)


def release_key(version: str) -> str:
    return resultcache.key_of("vllm audit", version, code_key())


def pack(result: dict[str, Any]) -> dict[str, Any]:
    """An audit with its rows as lists (``ROW_FIELDS`` order) and modules relative to vLLM's models package."""
    rows = [[r[f].removeprefix(MODULE_PREFIX) if f == "module" else r[f] for f in ROW_FIELDS]
            for r in result["classes"]]
    return {**{k: v for k, v in result.items() if k != "classes"}, "rows": rows}


def unpack(packed: dict[str, Any]) -> dict[str, Any]:
    classes = [{f: (MODULE_PREFIX + v if f == "module" and not v.startswith("vllm.") else v)
                for f, v in zip(ROW_FIELDS, row)}
               for row in packed["rows"]]
    return {**{k: v for k, v in packed.items() if k != "rows"}, "classes": classes}


def load(path: Optional[Path] = None) -> dict[str, Any]:
    """The record's entries by key; a missing, damaged or other-format record gives none."""
    try:
        data = json.loads(gzip.decompress((path or RECORD).read_bytes()))
        return data["entries"] if data.get("format") == FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return {}


def releases(path: Optional[Path] = None) -> list[str]:
    """The releases the record names (whether or not their entries are this code's)."""
    try:
        data = json.loads(gzip.decompress((path or RECORD).read_bytes()))
        return list(data.get("releases", [])) if data.get("format") == FORMAT else []
    except (OSError, ValueError, TypeError, EOFError):
        return []


def recorded(version: str, path: Optional[Path] = None) -> Optional[dict[str, Any]]:
    """The audit of ``version`` the record holds for this code, labelled with when it was traced; else None."""
    entry = load(path).get(release_key(version))
    if not entry:
        return None
    return {**unpack(entry["audit"]), "traced_at": entry["traced_at"], "from_record": True}


def write(audits: Sequence[dict[str, Any]], path: Optional[Path] = None) -> Path:
    """The record of these audits, atomically (an audit taken from the record keeps when it was traced)."""
    taken = resultcache.taken_now()
    entries = {release_key(a["release"]): {"release": a["release"],
                                           "audit": pack({k: v for k, v in a.items()
                                                          if k not in ("traced_at", "from_record")}),
                                           "traced_at": a.get("traced_at", taken)}
               for a in audits}
    data = {"format": FORMAT, "made_by": RECORD_COMMAND, "releases": [a["release"] for a in audits],
            "entries": entries}
    payload = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    return write_bytes_atomic(path or RECORD, gzip.compress(payload, mtime=0))


def audit_release(version: str, trace: Callable[[str], dict[str, Any]], use_record: bool = True) -> dict[str, Any]:
    """The record's audit of ``version`` when it holds one for this code, else ``trace(version)`` now."""
    found = recorded(version) if use_record else None
    if found is not None:
        return found
    return {**trace(version), "from_record": False}
