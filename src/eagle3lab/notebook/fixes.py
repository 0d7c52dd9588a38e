"""Notebook 02's fixes section as functions returning plain data: generate, check, compare, verify."""

from __future__ import annotations

import time
from typing import Any, Optional

from eagle3lab import resultcache
from eagle3lab.fix import fixseries, fixverify
from eagle3lab.trace import sources
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


def verify(results: dict[str, dict[str, Any]], run: bool = True, entries: Optional[list[str]] = None
           ) -> dict[str, Any]:
    """Run-time checks: the patched modules import (every release), and, for the installed release, the capture
    check through sglang's ModelRunner for the wrappers with a tiny config. ``run=False`` records that they
    were skipped, never that they passed. Passing checks are kept by key (``resultcache``): a warm run shows
    them with the date they were measured on."""

    out: dict[str, Any] = {"ran": run, "imports": {}, "capture": [], "refused": []}
    if not run:
        return out
    installed_src = sources.open_source(sources.INSTALLED)
    installed = installed_src.version
    # the checks depend only on the patches, the installed packages and this project's fix/harness/model code
    basis = (resultcache.environment_key(), installed_src.modified,
             resultcache.code_hash(["fix", "runtime/cpu_harness", *CAPTURE_MODEL_CODE]))
    for release, result in results.items():
        texts = sorted(f.text for f in result["_objects"] if f.ok)
        out["imports"][release] = resultcache.cached_result(
            "fix-verifications", resultcache.key_of("imports", release, texts, basis),
            lambda: fixverify.import_check(release, result["_objects"]), keep=lambda r: bool(r["ok"]))
    result = results.get(installed)
    for entry in entries or sorted(WRAPPER_CONFIGS):
        fix = next((f for f in (result or {}).get("_objects", []) if entry in f.entries), None)
        if fix is None or not fix.ok:
            out["refused"].append({"entry": entry, "reason": "no checked patch for it in the installed release"})
            continue
        out["capture"].append(resultcache.cached_result(
            "fix-verifications", resultcache.key_of("capture", entry, fix.text, basis),
            lambda: fixverify.capture_verify(fix, entry), keep=lambda r: bool(r["verified"])))
    return out


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

