"""One audit shape for both engines: ``{"release", "engine", "classes": [{"arch", "class", "module", "wrapper_of",
"implements", "how", "defect", "evidence"}]}``, from sglang's conformance audit or vLLM's protocol audit.

Why: users run the same drafter on both engines, and the question is the same on both ("does this wrapper offer
what its inner model offers?"); one shape lets the CLI, the notebook and the report put them side by side. The
engines' own audits keep their detail (``trace.audit.conformance``, ``trace.vllm.audit.audit``).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from packaging.version import InvalidVersion, Version

from eagle3lab.errors import SourceError
from eagle3lab.trace import audit as sglang_audit
from eagle3lab.trace.sources import INSTALLED, SglangSource, open_source
from eagle3lab.trace.vllm import record as vllm_record
from eagle3lab.trace.vllm.audit import audit as vllm_audit
from eagle3lab.trace.vllm.source import open_vllm

ENGINES = ("sglang", "vllm")
ROW_KEYS = ("arch", "class", "module", "wrapper_of", "implements", "how", "defect", "evidence")
# sglang member statuses -> how the class has the member
_SGLANG_HOW = {"provided": "direct", "inherited": "inherited", "delegated": "delegated", "proxied": "proxied"}


def _sglang_row(res: sglang_audit.Resolver, entry: dict[str, Any], members: list[str]) -> dict[str, Any]:
    """One sglang entry class in the shared shape: implements when every required member resolves."""
    ref = res.index.resolve(entry["module"], entry["entry"]) if entry["module"] else None
    statuses: dict[str, str] = entry["status"]
    if not statuses and ref is not None and ref.node is not None:
        rep = res.report(ref, members)
        statuses = {m: rep.members[m].status for m in members}
    missing = [m for m, s in statuses.items() if s not in sglang_audit.SATISFIED]
    implements = bool(statuses) and not missing
    hows = sorted({_SGLANG_HOW.get(s, s) for s in statuses.values()} - {"direct"}) if implements else []
    how = (hows[0] if len(hows) == 1 else "+".join(hows)) if hows else ("direct" if implements else "")
    wrapper_of = entry["inner"].rsplit(".", 1)[-1] if entry["inner"] else None
    gaps = [m for m, g in entry["gaps"].items() if g == "delegation gap"]
    evidence = (f"lacks {', '.join(missing)}" if missing else "has " + ", ".join(members)) if statuses else entry["reason"]
    if gaps:
        evidence += f"; its inner {wrapper_of} has {', '.join(gaps)} (delegation gap)"
    return {"arch": entry["entry"], "class": entry["entry"], "module": entry["module"], "wrapper_of": wrapper_of,
            "implements": implements, "how": how, "defect": bool(gaps) and entry["kind"] == sglang_audit.WRAPPER,
            "evidence": evidence, "kind": entry["kind"], "file": entry["file"]}


def sglang_classes(src: SglangSource) -> dict[str, Any]:
    """sglang's conformance audit of every entry class, in the shared shape."""
    conf = sglang_audit.conformance(src)
    res = sglang_audit.Resolver(src)
    rows = [_sglang_row(res, e, conf["members"]) for e in conf["entries"]]
    return {"release": src.version, "engine": "sglang", "provenance": conf["provenance"],
            "interface": {"members": conf["members"], "kind": "duck typing: members the start-up path calls"},
            "counts": _counts(rows), "classes": rows}


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {"classes": len(rows), "implements": sum(r["implements"] for r in rows),
            "wrappers": sum(r["wrapper_of"] is not None for r in rows), "defects": sum(r["defect"] for r in rows)}


def vllm_version(version: str) -> str:
    """The release string, normalised, or one line saying it is not one."""
    try:
        return str(Version(version))
    except InvalidVersion:
        raise SourceError(f"'{version}' is not a vLLM release; pass one such as 0.18.0", version=version,
                          problem="not_a_version") from None


def vllm_classes(version: str, use_record: bool = True) -> dict[str, Any]:
    """vLLM's audit of a release (from the shipped record when it holds this code's audit, else traced now)."""
    return vllm_record.audit_release(vllm_version(version), lambda v: vllm_audit(open_vllm(v)), use_record)


def vllm_audits(versions: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """The audits of these releases (default: every release the shipped record names), oldest first."""
    chosen = versions if versions is not None else vllm_record.releases()
    return [vllm_classes(v) for v in sorted(chosen, key=Version)]


def engine_audit(engine: str, release: Optional[str] = None, use_record: bool = True) -> dict[str, Any]:
    """The audit of one engine's release in the shared shape (sglang's default: the installed one)."""
    if engine == "sglang":
        return sglang_classes(open_source(release or INSTALLED))
    if engine == "vllm":
        if not release:
            raise SourceError("vLLM has no installed release to default to; pass --release, e.g. --release 0.18.0",
                              problem="no_release")
        return vllm_classes(release, use_record)
    raise SourceError(f"unknown engine '{engine}'; use one of {', '.join(ENGINES)}", problem="unknown_engine")


def text(result: dict[str, Any]) -> str:
    """The audit as a few lines: counts, the defects, then one line per class."""
    counts = result["counts"]
    label = " (release record)" if result.get("from_record") else ""
    lines = [f"{result['engine']} {result['release']}: {counts['classes']} classes, {counts['implements']} implement "
             f"EAGLE-3, {counts['wrappers']} wrappers, {counts['defects']} defects{label}"]
    for row in result["classes"]:
        if row["defect"]:
            lines.append(f"DEFECT {row['arch']}: wrapper of {row['wrapper_of']}; {row['evidence']}")
    for row in result["classes"]:
        state = f"yes ({row['how']})" if row["implements"] else "no"
        inner = f" [wrapper of {row['wrapper_of']}]" if row["wrapper_of"] else ""
        lines.append(f"  {row['arch']}: {state}{inner}")
    lines.append(f"({result['provenance']})")
    return "\n".join(lines)


FIRST_VLLM_RECORDED = "0.10.0"  # the last release without the protocol, then every release since


def _trace_vllm(version: str) -> dict[str, Any]:
    return vllm_audit(open_vllm(version))


def write_vllm_record(versions: list[str], workers: int = 2, first: Sequence[str] = ()) -> tuple[Any, list[str]]:
    """Trace every release in ``versions`` (``first`` ones first; ``workers`` processes: releases are independent)
    and add each audit to the record the package ships as it arrives, so an interrupted run keeps what it traced."""
    from concurrent.futures import ProcessPoolExecutor  # delayed: only the record's writer forks

    order = [v for v in first if v in versions] + [v for v in versions if v not in first]
    kept = {v: a for v in vllm_record.releases() if (a := vllm_record.recorded(v)) is not None}
    todo = [v for v in order if v not in kept]
    path = vllm_record.RECORD
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        for audit in pool.map(_trace_vllm, todo):
            kept[audit["release"]] = audit
            path = vllm_record.write(sorted(kept.values(), key=lambda a: Version(a["release"])))
    return path, sorted(kept, key=Version)
