"""Which layers each sglang release captures for a drafter's ids, on graph-replayed and on eager forwards.

Two facts per release decide it, both read from the release's own source: whether the CUDA-graph runner resets the
capture layers before capturing (``trace.capture_order``: the order defect, fixed in 0.5.11 by sglang PR #22836),
and what the target's ``set_eagle3_layers_to_capture`` does with the ids (``trace.capture_rule``: +1 to every id
until 0.5.12, +1 only when the first id is 1 from 0.5.13, sglang PR #25454). The release record
(``trace.release_record``) ships both for every release, the hook as its source text, so the rows for any drafter's
ids are computed offline, without the wheels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from packaging.version import Version

from eagle3lab.trace import capture_order, capture_rule, release_record
from eagle3lab.trace.capture_rule import HookRule
from eagle3lab.trace.sources import SglangSource

# Drafter id sets every release is shown with: (what, target depth, ids).
KIMI_CASE = ("AQ-MedAI/Kimi-K25-eagle3 on Kimi-K2.5", 61, (2, 30, 58))
SPECFORGE_CASE = ("SpecForge's default ids on Kimi-K2.5", 61, (1, 29, 57))  # [1, n // 2 - 1, n - 4]


@dataclass(frozen=True)
class ReleaseCapture:
    """One release's two facts: the order defect and the Kimi family's hook (None where the release has none)."""

    release: str
    defect: bool
    rule: Optional[HookRule]
    families: Mapping[str, Mapping[str, str]]  # every family's rule name and site, for the record's readers
    from_record: bool = False

    def layers(self, depth: int, ids: Optional[Sequence[int]]) -> dict[str, Any]:
        return capture_order.captured_layers(self.release, self.defect, self.rule, depth, ids)

    def to_row(self) -> dict[str, Any]:
        """What the release record keeps (the hook as source text, so any ids can be applied offline)."""
        hook = None if self.rule is None else {"family": self.rule.family, "path": self.rule.path,
                                               "line": self.rule.line, "source": self.rule.source}
        return {"defect": self.defect, "hook": hook, "families": {k: dict(v) for k, v in self.families.items()}}

    @classmethod
    def from_row(cls, release: str, row: Mapping[str, Any]) -> "ReleaseCapture":
        hook = row.get("hook")
        rule = HookRule(release, hook["family"], hook["path"], int(hook["line"]), hook["source"]) if hook else None
        return cls(release, bool(row["defect"]), rule, row.get("families", {}), from_record=True)


def trace_release(src: SglangSource) -> ReleaseCapture:
    """Both facts, traced now from ``src``."""
    families = {name: {"rule": rule.rule(), "where": rule.where}
                for name, rule in sorted(capture_rule.hook_rules(src).items())}
    return ReleaseCapture(src.version, capture_order.trace_capture_order(src).defect, capture_rule.kimi_rule(src),
                          families)


def release_captures(versions: Sequence[str], open_release: Callable[[str], SglangSource],
                     known: Optional[Mapping[str, Mapping[str, Any]]] = None) -> list[ReleaseCapture]:
    """Every release in ``versions``, from the shipped record where it holds the release, else traced."""
    if known is None:
        known = release_record.recorded(release_record.CAPTURE_RULE, versions)
    return [ReleaseCapture.from_row(v, known[v]) if v in known else trace_release(open_release(v)) for v in versions]


def case_rows(captures: Sequence[ReleaseCapture],
              cases: Sequence[tuple[str, int, Sequence[int]]] = (KIMI_CASE, SPECFORGE_CASE)) -> list[dict[str, Any]]:
    """One row per run of consecutive releases that capture the same layers for every case, oldest first."""
    spans: list[dict[str, Any]] = []
    for cap in captures:
        if cap.rule is None:  # no Kimi-family hook in this release
            continue
        cells = {what: cap.layers(depth, ids) for what, depth, ids in cases}
        signature = (cap.defect, cap.rule.rule(),
                     tuple((tuple(c["cuda_graph_layers"]), tuple(c["eager_layers"])) for c in cells.values()))
        if spans and spans[-1]["_signature"] == signature:
            spans[-1]["last"] = cap.release
            continue
        spans.append({"_signature": signature, "first": cap.release, "last": cap.release,
                      "order_defect": cap.defect, "rule": cap.rule.rule(), "rule_site": cap.rule.where,
                      "cells": {what: {"ids": c["drafter_ids"], "depth": c["depth"],
                                       "cuda_graph_layers": c["cuda_graph_layers"],
                                       "eager_layers": c["eager_layers"]} for what, c in cells.items()}})
    for span in spans:
        span.pop("_signature")
        span["releases"] = span["first"] if span["first"] == span["last"] else f"{span['first']} - {span['last']}"
    return spans


def first_with(captures: Sequence[ReleaseCapture], want: Callable[[ReleaseCapture], bool]) -> Optional[str]:
    """The oldest release in ``captures`` for which ``want`` holds from there on (None if the newest lacks it)."""
    ordered = sorted(captures, key=lambda c: Version(c.release))
    first = None
    for cap in ordered:
        if want(cap):
            first = first or cap.release
        else:
            first = None
    return first


def has_convention_rule(cap: ReleaseCapture) -> bool:
    """The Kimi family's hook adds 1 only when the first id is 1 (sglang PR #25454)."""
    return cap.rule is not None and cap.rule.rule() == capture_rule.RULE_FIRST_ID_ONE


def milestones(captures: Sequence[ReleaseCapture]) -> dict[str, Optional[str]]:
    """The first release with the order fixed, with PR #25454's rule, and with both."""
    return {"order_fixed": first_with(captures, lambda c: not c.defect),
            "convention_rule": first_with(captures, has_convention_rule),
            "both": first_with(captures, lambda c: not c.defect and has_convention_rule(c)),
            "order_pr": capture_order.FIX_PR, "convention_pr": capture_rule.PR_25454}
