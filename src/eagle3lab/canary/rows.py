"""One release's canary rows, the comparison with the release before it, and the tables a person reads.

A row is one model class of one release: is the EAGLE-3 interface there (the static audit), would an EAGLE-3 launch
crash (``preflight-model``'s verdict), and how the release turns a drafter's layer ids into captured layers. A row
regresses when its verdict gets worse from the previous release to this one: a class that now crashes where it did
not (a wrapper that arrives without the interface counts: it is how Kimi-K2.5 came to sglang 0.5.9), or one that
passed and is now undecided or gone. A changed layer-id convention is reported beside, not counted: whether it is a
fix or a break depends on the drafter's training convention, which the release cannot tell.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

PASS, FAIL, UNDECIDED, ABSENT = "pass", "FAIL", "undecided", "absent"
VERDICTS = (PASS, FAIL, UNDECIDED, ABSENT)
INTERFACE = {PASS: "present", FAIL: "lacking", UNDECIDED: "undecided", ABSENT: "-"}


@dataclass(frozen=True)
class Row:
    """One model class of one release, as the canary sees it."""

    architecture: str  # the name in a config's ``architectures`` (the registered class name)
    model: str  # what a person calls it ("Kimi-K2.5"); the class name for wrappers nobody named
    verdict: str  # one of VERDICTS
    missing: list[str] = field(default_factory=list)  # contract members the class lacks
    layer_ids: str = "-"  # the release's layer-id convention for this class (``sglang_engine.layer_id_convention``)
    watched: bool = False  # a model the canary names, checked in every release
    kind: str = ""  # the audit's kind (wrapper of an EAGLE-3-capable model, not a wrapper, ...)
    first_raise: str = ""  # where start-up raises first (file:line member), for a FAIL
    fix: Optional[str] = None  # a patch under patches/ that makes the class conform, if one does
    # whether the class offers the interface, where the verdict does not say it (vLLM: a class can implement it and
    # still be refused by the allow-list gate); None: the verdict says it (sglang)
    has_interface: Optional[bool] = None
    how: str = ""  # how it offers it, as the engine's audit says (vLLM: direct, inherited, protocol default, ...)

    @property
    def interface(self) -> str:
        """The interface column: present, lacking (and what), undecided, or - for an absent class."""
        if self.has_interface is None or self.verdict == ABSENT:
            text = INTERFACE[self.verdict]
        else:
            text = INTERFACE[PASS] if self.has_interface else INTERFACE[FAIL]
        text += f" ({self.how})" if self.how else ""
        return f"{text}: {', '.join(self.missing)}" if self.missing else text


@dataclass
class ReleaseRows:
    """Every row of one release of one engine, and where they were read from."""

    engine: str
    release: str
    source: str  # "wheel <file name>" or "release record ..."
    rows: list[Row]

    def by_architecture(self) -> dict[str, Row]:
        return {row.architecture: row for row in self.rows}


@dataclass
class Comparison:
    """One release against the release before it."""

    current: ReleaseRows
    previous: Optional[ReleaseRows]  # None: the first release the canary can read
    regressions: list[str] = field(default_factory=list)  # one line per regressed row
    changes: list[str] = field(default_factory=list)  # other changes a person should see (layer ids, fixed)

    def to_dict(self) -> dict[str, Any]:
        before = self.previous.by_architecture() if self.previous else {}
        return {"engine": self.current.engine, "release": self.current.release, "source": self.current.source,
                "previous": self.previous.release if self.previous else None,
                "previous_source": self.previous.source if self.previous else None,
                "rows": [{**asdict(row), "interface": row.interface,
                          "previous_verdict": before[row.architecture].verdict if row.architecture in before else None}
                         for row in self.current.rows],
                "regressions": self.regressions, "changes": self.changes, "ok": not self.regressions}


def regressed(before: str, now: str) -> bool:
    """Worse from one release to the next: a crash that was not there, or a pass that is now undecided or gone."""
    return (now == FAIL and before != FAIL) or (before == PASS and now in (UNDECIDED, ABSENT))


def _label(row: Row) -> str:
    return row.model if row.model == row.architecture else f"{row.model} ({row.architecture})"


def compare(current: ReleaseRows, previous: Optional[ReleaseRows]) -> Comparison:
    """The regressions and changes of ``current`` against ``previous`` (every row of either release, by class)."""
    out = Comparison(current, previous)
    if previous is None:
        return out
    now, before = current.by_architecture(), previous.by_architecture()
    where = f"{current.engine} {current.release}"
    relabelled: dict[tuple[str, str], list[str]] = {}  # (was, now) -> the classes whose layer ids changed so
    for arch in [*now, *(a for a in before if a not in now)]:
        new = now.get(arch) or Row(arch, before[arch].model, ABSENT, watched=before[arch].watched)
        old = before.get(arch) or Row(arch, new.model, ABSENT)
        was = f"{old.verdict} in {previous.release}"
        if regressed(old.verdict, new.verdict):
            what = (f"lacks {', '.join(new.missing)}" if new.verdict == FAIL and new.missing else
                    f"raises at {new.first_raise}" if new.first_raise else new.verdict)
            out.regressions.append(f"regressed: {where} {_label(new)}: {new.verdict}, {what} (was {was})")
        elif old.verdict == FAIL and new.verdict == PASS:
            out.changes.append(f"fixed: {where} {_label(new)}: pass (was {was})")
        if ABSENT not in (old.verdict, new.verdict) and old.layer_ids != new.layer_ids:
            relabelled.setdefault((old.layer_ids, new.layer_ids), []).append(_label(new))
    for (was_ids, ids), labels in relabelled.items():  # one line per change, however many classes it touches
        more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
        who = labels[0] if len(labels) == 1 else f"{len(labels)} classes ({', '.join(labels[:3])}{more})"
        out.changes.append(f"layer ids changed: {where} {who}: {ids} (was {was_ids} in {previous.release}); "
                           "check the drafter's training convention")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(comparison: Comparison) -> str:
    """The release's table (wrapper, interface present, layer-id convention, verdict), watched models first."""
    cur, prev = comparison.current, comparison.previous
    before = prev.by_architecture() if prev else {}
    against = f"against {prev.release} ({prev.source})" if prev else "no earlier release to compare with"
    lines = [f"### {cur.engine} {cur.release}: {'regressed' if comparison.regressions else 'no regression'}", "",
             f"Read from {cur.source}, {against}.", "",
             f"| model | class | interface | layer ids | verdict | {prev.release if prev else 'previous'} |",
             "| --- | --- | --- | --- | --- | --- |"]
    ordered = sorted(cur.rows, key=lambda r: (not r.watched, r.verdict != FAIL, r.model.lower()))
    for row in ordered:
        verdict = row.verdict + (f" at {row.first_raise}" if row.first_raise else "")
        old = before[row.architecture].verdict if row.architecture in before else ABSENT
        lines.append(f"| {_cell(row.model)} | `{row.architecture}` | {_cell(row.interface)} | {_cell(row.layer_ids)} | "
                     f"{_cell(verdict)} | {old} |")
    notes = comparison.regressions + comparison.changes
    lines += [""] * bool(notes) + [f"- {_cell(line)}" for line in notes]
    return "\n".join(lines) + "\n"
