"""Notebook 02's fixes section as functions returning plain data: generate, check, compare, verify."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from eagle3lab import resultcache
from eagle3lab.errors import ExpectationError
from eagle3lab.fix import fixseries, fixverify
from eagle3lab.notebook import interface_trace
from eagle3lab.paths import REPO_ROOT
from eagle3lab.trace import audit, sources
from eagle3lab.runtime.tinymodel.wrappers import WRAPPER_CONFIGS


def fixes(src: sources.SglangSource, conf: dict[str, Any]) -> dict[str, Any]:
    """Generated fixes for one release's lacking wrappers, their checks, the series re-audit, the committed state."""
    started = time.perf_counter()
    made, series = fixseries.fixes_with_series(src, conf)
    return {
        "release": src.version,
        "provenance": f"generated and checked from sglang {src.version}'s source ({src.origin_label})",
        "fixes": [{**f.to_dict(), "committed": fixseries.committed_state(f)} for f in made],
        "series": series,
        "checked": sum(f.ok for f in made),
        "refused": [{"class": f.owner, "entries": f.entries, "reason": f.refused} for f in made if not f.ok],
        "seconds": round(time.perf_counter() - started, 2),
        "_objects": made,  # not stored: the Fix objects the run-time checks need
    }


def fix_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per generated patch with its checks and whether the committed copy matches."""
    rows = []
    for f in result["fixes"]:
        checks = {k: ("ok" if v.get("ok") else "FAIL") for k, v in f["checks"].items()}
        rows.append({"release": f["release"], "patch": f"{f['name']}.patch" if f["ok"] else "(refused)",
                     "class patched": f["owner"], "forwards to": f"self.{f['attr']}", "members": f["members"],
                     "fixes": f["entries"], **checks, "committed": f["committed"], "refused": f["refused"]})
    return rows


# The tiny-model code the capture checks run (not the drafter's training, which they never use): a new drafter
# recipe must not measure the generated fixes again (minutes on a fresh machine).
CAPTURE_MODEL_CODE = tuple(f"runtime/tinymodel/{name}.py" for name in
                           ("__init__", "checkpoint", "configs", "probe", "tokenizer", "wrappers"))


# Passing checks measured once per release and shipped with the package (``resultcache.load_record``): a fresh
# machine with the pinned versions reuses them instead of minutes of ModelRunner runs. Regenerate with
# RECORD_COMMAND after any change to fix/, runtime/cpu_harness or the capture model code (the keys change).
RELEASE_RECORD = resultcache.PACKAGE_ROOT / "fix" / "data" / "fix_verifications.json"
RECORD_COMMAND = "python -m eagle3lab upstream-fixes --record"
NAMESPACE = "fix-verifications"


@dataclass(frozen=True)
class PlannedCheck:
    """One run-time check of notebook 02 and the key its result is kept under."""

    kind: str  # "imports" (one release's patched modules) or "capture" (one wrapper through ModelRunner)
    name: str  # the release or the entry class
    key: str
    measure: Callable[[], dict[str, Any]]
    keep: Callable[[dict[str, Any]], bool]


def _imports_ok(result: dict[str, Any]) -> bool:
    return bool(result["ok"])


def _capture_ok(result: dict[str, Any]) -> bool:
    return bool(result["verified"])


def plan_checks(results: dict[str, dict[str, Any]], entries: Optional[list[str]] = None
                ) -> tuple[list[PlannedCheck], list[dict[str, str]]]:
    """The checks ``verify`` runs for these fix results, with their keys, without running any; and the entries
    refused (no checked patch for them in the installed release)."""
    installed_src = sources.open_source(sources.INSTALLED)
    installed = installed_src.version
    # the checks depend only on the patches, the installed packages and this project's fix/harness/model code
    basis = (resultcache.environment_key(), installed_src.modified,
             resultcache.code_hash(["fix", "runtime/cpu_harness", *CAPTURE_MODEL_CODE]))
    planned, refused = [], []
    for release, result in results.items():
        texts = sorted(f.text for f in result["_objects"] if f.ok)
        planned.append(PlannedCheck("imports", release, resultcache.key_of("imports", release, texts, basis),
                                    partial(fixverify.import_check, release, result["_objects"]), _imports_ok))
    installed_result = results.get(installed)
    for entry in entries or sorted(WRAPPER_CONFIGS):
        fix = next((f for f in (installed_result or {}).get("_objects", []) if entry in f.entries), None)
        if fix is None or not fix.ok:
            refused.append({"entry": entry, "reason": "no checked patch for it in the installed release"})
            continue
        planned.append(PlannedCheck("capture", entry, resultcache.key_of("capture", entry, fix.text, basis),
                                    partial(fixverify.capture_verify, fix, entry), _capture_ok))
    return planned, refused


def check_keys(results: dict[str, dict[str, Any]], entries: Optional[list[str]] = None) -> dict[str, str]:
    """Key -> "<kind> <name>" of every check ``verify`` would run (nothing is run)."""
    return {c.key: f"{c.kind} {c.name}" for c in plan_checks(results, entries)[0]}


def verify(results: dict[str, dict[str, Any]], run: bool = True, entries: Optional[list[str]] = None,
           record: Optional[dict[str, dict[str, Any]]] = None, fresh: bool = False) -> dict[str, Any]:
    """Run-time checks: the patched modules import (every release), and, for the installed release, the capture
    check through sglang's ModelRunner for the wrappers with a tiny config. ``run=False`` records that they
    were skipped, never that they passed. Passing checks are kept by key (``resultcache``): a warm run shows
    them with the date they were measured on; a fresh machine takes them from the release record (default: the
    one shipped, ``RELEASE_RECORD``), labelled so. ``fresh`` measures every check now."""

    out: dict[str, Any] = {"ran": run, "imports": {}, "capture": [], "refused": []}
    if not run:
        return out
    record = resultcache.load_record(RELEASE_RECORD) if record is None else record
    planned, out["refused"] = plan_checks(results, entries)
    for check in planned:
        got = resultcache.cached_result(NAMESPACE, check.key, check.measure, keep=check.keep, record=record,
                                        fresh=fresh)
        if check.kind == "imports":
            out["imports"][check.name] = got
        else:
            out["capture"].append(got)
    return out


def notebook_results(newest: Optional[str] = None) -> dict[str, dict[str, Any]]:
    """The fix results notebook 02 checks by default: the installed release's and the newest release's (``newest``
    names it; default: the newest on the index)."""
    versions = [newest] if newest else interface_trace.bisect_versions([], record_fallback=False)
    pairs = [sources.open_source(sources.INSTALLED), sources.open_source(versions[-1])]
    return {src.version: fixes(src, audit.conformance(src)) for src in pairs}


def _machine_paths() -> list[str]:
    return [p for p in {str(Path.home()), sys.prefix, str(REPO_ROOT)} if len(p) > 1]


def write_release_record(results: dict[str, dict[str, Any]], path: Path = RELEASE_RECORD) -> dict[str, Any]:
    """Measure every check for real (``fresh``), and if all pass write them as the release record (atomically).
    A failing check, or a result holding a machine path, writes nothing and says which."""
    planned, _ = plan_checks(results)
    got = {c.key: resultcache.cached_result(NAMESPACE, c.key, c.measure, keep=c.keep, fresh=True) for c in planned}
    failed = [f"{c.kind} {c.name}" for c in planned if not c.keep(got[c.key])]
    if failed:
        raise ExpectationError(f"not writing the release record: {', '.join(failed)} failed here; see notebook 02's "
                               f"tables for why, fix it and rerun {RECORD_COMMAND}")
    entries = {}
    for check in planned:
        result = got[check.key]
        kept = {k: v for k, v in result.items() if k not in ("measured_at", "cached", "from_record")}
        if isinstance(kept.get("provenance"), str):
            kept["provenance"] = kept["provenance"].replace("measured here", "measured for the release record", 1)
        entries[check.key] = {"check": f"{check.kind} {check.name}", "result": kept,
                              "measured_at": result["measured_at"]}
    text = json.dumps(entries)
    leaked = [p for p in _machine_paths() if p in text]
    if leaked:
        raise ExpectationError(f"not writing the release record: a result names a machine path ({leaked[0]}); "
                               "the record is shipped and must hold none")
    about = {"namespace": NAMESPACE, "environment": resultcache.environment_key(), "releases": sorted(results),
             "made_by": RECORD_COMMAND}
    written = resultcache.write_record(path, entries, about)
    return {"path": written, "entries": len(entries), "releases": sorted(results)}


def import_rows(verification: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for release, check in verification["imports"].items():
        for module, row in check["modules"].items():
            rows.append({"release": release, "module": module, "pristine": row["pristine"], "patched": row["patched"],
                         "verdict": row["verdict"], "where": check["where"], "measured": resultcache.measured_label(check)})
    return rows


def stored(results: dict[str, dict[str, Any]], verification: dict[str, Any]) -> dict[str, Any]:
    """What the sidecar keeps: everything but the in-memory Fix objects."""
    return {"releases": {v: {k: x for k, x in r.items() if not k.startswith("_")} for v, r in results.items()},
            "verification": verification}

