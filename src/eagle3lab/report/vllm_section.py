"""REPORT.md's section "The same class on vLLM", from notebook 04's sidecar (one context function, one template)."""

from __future__ import annotations

from typing import Any, Optional

from eagle3lab.sidecars import VllmInterface, VllmPreflightAnswer, VllmSameClassSidecar


def _gate(interface: VllmInterface) -> str:
    return ", ".join(interface.gate.allow_list) if interface.gate else "none"


def _line(text: str) -> str:
    """One line (a table cell or list item must not break)."""
    return " ".join(text.split())


def _first_error(answer: VllmPreflightAnswer) -> str:
    first = answer.first_error
    return _line(f"{first.stage}: `{first.raises}`: {first.message}") if first else "none"


def context(s04: Optional[VllmSameClassSidecar]) -> Optional[dict[str, Any]]:
    """The section's values, taken from the sidecar as they are (the provenance check finds each number there)."""
    if s04 is None:
        return None
    audits = [{"release": a.release, "protocol": "yes" if a.interface.present else "no",
               "bodies": "defaults" if a.interface.has_defaults else "stubs",
               "getter": ", ".join(a.interface.getters), "gate": _gate(a.interface),
               "checks": "; ".join(f"`{c.raises}` at `{c.where}`" for c in a.interface.check_sites),
               **a.counts, "defects": a.defects} for a in s04.audits]
    kimi = s04.kimi_bisect
    runs = [{"release": r.release, "mode": r.mode, "outcome": r.outcome, "stage": r.stage or "none",
             "cause": f"`{r.root_cause.cls}`: {_line(r.root_cause.message)[:200]}" if r.root_cause else "none",
             "where": r.root_cause.where if r.root_cause else "",
             "check": r.probe.supports_eagle3 if r.probe else None,
             "seconds": r.seconds} for r in s04.cpu_runs]
    return {"audits": audits, "kimi": kimi, "flagged": s04.flagged_wrappers,
            "preflight": [{"release": rel, "will_crash": a.will_crash, "error": _first_error(a)}
                          for rel, a in s04.preflight.items()],
            "layers": [{"engine": r.engine, "releases": r.releases, "reader": r.reader,
                        "cells": "; ".join(f"{k}: {v}" for k, v in r.captured.items())} for r in s04.layers],
            "runs": runs, "cpu_source": s04.cpu_source, "date": s04.date}
