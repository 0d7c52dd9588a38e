"""Notebook 03's view of the cost model's validation: the protocol REPORT.md shows, rendered by the same code.

Why a module of its own: the notebook must not tell another story than the report. The headline is the out-of-sample
MAPE on held-out sources with published acceptance, with its verdict against the goal and the naive baselines beside
it; development fit and shape-only series are labelled as fit quality. Everything here comes from
``costmodel.evaluation.protocol_report()`` through ``report.validation_section`` (its sentences, rules and rows);
nothing is formatted or judged twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.costmodel.evaluation import current_frozen, protocol_report
from eagle3lab.costmodel.validation import SHAPE_ONLY_ROLE, context_sensitivity
from eagle3lab.report import provenance, validation_section


@dataclass(frozen=True)
class ValidationView:
    """The protocol as data (``protocol``, JSON-ready: what a sidecar would store) and as the report prints it."""

    protocol: dict[str, Any]  # costmodel.evaluation.protocol_report()
    verdict: str  # validation_section.goal_verdict: the sealed set's MAPE against its goal, computed
    headline: Optional[str]  # the report's out-of-sample sentence; None when no held-out point was evaluated
    later_headlines: list[str]  # the first three sets' recorded figures, each not demonstrably held out
    frozen: str  # the split, the frozen constants and their date, and whether refitting today reproduces them
    what: str  # how the frozen constants were fitted
    public_checks: list[dict[str, Any]]  # public measurements that bound the frozen orchestration, not fitted on
    groups: list[dict[str, Any]]  # one row per protocol group, MAPE beside the naive baselines
    naive: list[dict[str, str]]  # what each naive baseline predicts
    shape_only_note: str
    sweeps: list[dict[str, Any]]  # draft-step sweeps: where the published and the predicted speedup peak
    sources: list[dict[str, Any]]  # the appendix: one row per source
    context: list[dict[str, Any]]  # MAPE per source under other assumed decode contexts
    frozen_2: Optional[str] = None  # the revised engine model's constants, their date and the sets they were run on
    what_2: str = ""
    public_checks_2: list[dict[str, Any]] = field(default_factory=list)  # the public check beside the revised model
    evaluation_note: str = ""  # what the third set's one evaluation recorded

    def markdown(self) -> str:
        """The report's sentences for the section: headline (or its absence), frozen constants, the groups' roles."""
        head = self.headline or "*No sealed set has been evaluated yet: there is no held-out figure.*"
        checks = "".join(f"A public check, not used in the fit: [this measurement]({c['url']}) implies {c['hidden']} ms "
                         f"of host orchestration per cycle (a lower bound), against the frozen {c['frozen']} ms per "
                         f"cycle. {c['what']}\n\n" for c in self.public_checks)
        naive = "\n".join(f'- "{row["name"]}": {row["text"]}.' for row in self.naive)
        later = "".join(f"{line}\n\n" for line in self.later_headlines)
        second = ""
        if self.frozen_2:
            second = f"{self.frozen_2}\n\n"
            second += "".join(f"The same public check against the revised model: [this measurement]({c['url']}) "
                              f"implies {c['hidden']} ms of host time per cycle that spec v2 hides; the model's "
                              f"spec-v2 preset hides {c['model_hidden']} ms there.\n\n"
                              for c in self.public_checks_2 if c.get("model_hidden"))
            if self.evaluation_note:
                second += f"The third set's one evaluation, as recorded: {self.evaluation_note}\n\n"
        return (f"{head}\n\n{later}{self.frozen} How they were fitted: {self.what}\n\n{checks}{second}{naive}\n"
                f"- None of these groups is a validation (every set in them is seen): only the sealed set's figure is "
                f"held out; \"{SHAPE_ONLY_ROLE}\" is the "
                f"group {self.shape_only_note}.")


def evidence_tree(protocol: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol placed at ``validation_section.KEY``, where the section's sentences read it."""
    tree: dict[str, Any] = dict(protocol)
    for part in reversed(validation_section.KEY.split(".")):
        tree = {part: tree}
    return tree


def protocol_view(protocol: Optional[Mapping[str, Any]] = None,
                  context_rows: Optional[Sequence[Mapping[str, Any]]] = None) -> ValidationView:
    """The validation protocol as notebook 03 shows it: ``protocol_report()`` and ``context_sensitivity(frozen=current_frozen())``
    (computed here unless given), rendered by ``report.validation_section`` as REPORT.md renders them."""
    data = dict(protocol) if protocol is not None else protocol_report()
    rows = list(context_rows) if context_rows is not None else context_sensitivity(frozen=current_frozen())
    ctx = validation_section.context(data, rows, provenance.Binder(evidence_tree(data)))
    return ValidationView(
        protocol=data,
        verdict=validation_section.sealed_goal_verdict((data.get("sealed") or {}).get("mape_pct"),
                                                       (data.get("sealed") or {}).get("target_mape_pct", 20.0),
                                                       (data.get("sealed") or {}).get("below_every_baseline")),
        headline=ctx["headline"], later_headlines=ctx["later_headlines"], frozen=ctx["frozen"], what=ctx["what"], public_checks=ctx["public_checks"], groups=ctx["groups"],
        naive=ctx["naive"], shape_only_note=ctx["shape_only_note"], sweeps=ctx["sweeps"], sources=ctx["sources"],
        context=ctx["context"], frozen_2=ctx["frozen_2"], what_2=ctx["what_2"],
        public_checks_2=ctx["public_checks_2"], evaluation_note=ctx["evaluation_note"])
