"""Bisect over vLLM releases: when an architecture appeared, when it gained EAGLE-3, when an EAGLE-3 launch of it
stops crashing (interface and allow-list together), and for every wrapper any release's audit flags, the releases
it was a defect in and the first one that fixed it.

Each release's audit comes from the shipped record (offline), else it is traced; every release is opened, not only
those a binary search would, since a class can gain and lose the interface (a refactor of the protocol did).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from packaging.version import Version

from eagle3lab.errors import EntryClassError
from eagle3lab.trace.vllm import preflight

KIMI_K25 = "KimiK25ForConditionalGeneration"
KIMI_K25_TEXT_TYPE = "deepseek_v3"  # Kimi-K2.5's text_config.model_type (its config.json; the tiny model's too)


def arch_rows(audits: list[dict[str, Any]], arch: str, model_type: Optional[str] = None) -> list[dict[str, Any]]:
    """One row per release (oldest first): present, implements, how, defect, and the preflight's verdict."""
    rows = []
    for audit in sorted(audits, key=lambda a: Version(a["release"])):
        found = next((r for r in audit["classes"] if r["arch"] == arch), None)
        row: dict[str, Any] = {"release": audit["release"], "present": found is not None}
        if found is not None:
            try:
                verdict = preflight.answer(audit, [arch], model_type)
            except EntryClassError:  # pragma: no cover - found above, so registered
                verdict = {"will_crash": None, "first_error": None, "gate": {"admits": None}}
            row.update(implements=found["implements"], how=found["how"], defect=found["defect"],
                       passes_check=found["passes_check"], wrapper_of=found["wrapper_of"],
                       gate_admits=verdict["gate"]["admits"], will_crash=verdict["will_crash"],
                       first_error=(verdict["first_error"] or {}).get("raises"))
        rows.append(row)
    return rows


def _first(rows: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> Optional[str]:
    return next((str(r["release"]) for r in rows if r["present"] and test(r)), None)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """When it appeared, first implemented, first passed the gate, first would not crash; defect releases."""
    return {"appeared": _first(rows, lambda r: True), "first_implements": _first(rows, lambda r: r["implements"]),
            "first_admitted": _first(rows, lambda r: r["gate_admits"] is not False),
            "first_not_crashing": _first(rows, lambda r: r["will_crash"] is False),
            "defect_in": [r["release"] for r in rows if r["present"] and r["defect"]]}


def bisect_arch(audits: list[dict[str, Any]], arch: str, model_type: Optional[str] = None) -> dict[str, Any]:
    rows = arch_rows(audits, arch, model_type)
    return {"arch": arch, "model_type": model_type, "rows": rows, **summary(rows)}


def flagged_wrappers(audits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every architecture some release's audit flags as a defect: the releases it was one in, and the first later
    release where it implements the interface (None: not fixed in these releases)."""
    flagged = sorted({r["arch"] for a in audits for r in a["classes"] if r["defect"]})
    out = []
    for arch in flagged:
        rows = arch_rows(audits, arch)
        defects = [r["release"] for r in rows if r["present"] and r["defect"]]
        last = Version(defects[-1])
        fixed = next((r["release"] for r in rows if r["present"] and Version(r["release"]) > last
                      and r["implements"]), None)
        inner = next(r["wrapper_of"] for r in rows if r["present"] and r["defect"])
        out.append({"arch": arch, "wrapper_of": inner, "defect_from": defects[0], "defect_to": defects[-1],
                    "defect_releases": len(defects), "fixed_in": fixed,
                    "still_defect_in_newest": rows[-1]["present"] and bool(rows[-1].get("defect"))})
    return out
