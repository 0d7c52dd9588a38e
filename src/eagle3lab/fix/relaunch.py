"""Notebook 03's relaunch chain: unpatched -> one-method patch -> full delegation patch, on the real server.

Each step patches the installed sglang package for the duration of one launch (restored afterwards, even on
failure), launches with EAGLE-3, and reads the real outcome from the log. Nothing about the next error is
assumed: the one-method step shows whatever the runtime asks for next. ``expect_chain`` then states what must
hold, so the notebook fails if a wrapper error survives the full patch, or if the CPU limitation that ends the
chain on the ``cpu`` profile ever goes away (that would mean EAGLE-3 can be measured on CPU now).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.runtime.crashlog import CrashReport, crash_report
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.errors import ExpectationError
from eagle3lab.fix.patching import FULL_DELEGATION_PATCH, ONE_METHOD_PATCH, patched, resolve_patch
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import launch
from eagle3lab.sidecars import ChainStepRecord
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE

CPU_LIMIT_RULE = "eagle_backend_cpu"


@dataclass(frozen=True)
class ChainStep:
    """One relaunch: which patches are in, and a short name for the table."""

    name: str
    patches: tuple[str, ...] = ()


DEFAULT_CHAIN = (
    ChainStep("unpatched"),
    ChainStep("one-method patch", (ONE_METHOD_PATCH,)),
    ChainStep("full delegation patch", (FULL_DELEGATION_PATCH,)),
)


@dataclass
class StepResult:
    step: ChainStep
    status: str
    seconds: float
    report: CrashReport | None
    log_path: Path
    argv: list[str] = field(default_factory=list)

    def record(self) -> ChainStepRecord:
        """The typed record notebook 03's sidecar keeps (and the report reads)."""
        report = self.report
        return ChainStepRecord(
            step=self.step.name, patches=list(self.step.patches), outcome=self.status,
            category=report.category if report else None, error=report.signature if report else None,
            call_site=str(report.call_site) if report and report.call_site else None, seconds=self.seconds)

    def row(self) -> dict[str, Any]:
        """The same, labelled for people."""
        return chain_row(self.record())


def chain_row(record: ChainStepRecord) -> dict[str, Any]:
    """One relaunch as a display row (labels live here only, never in the sidecar)."""
    return {"step": record.step, "patch": ", ".join(record.patches) or "none", "outcome": record.outcome,
            "classified error": record.category, "error": record.error, "runtime call site": record.call_site,
            "seconds to outcome": record.seconds}


def run_step(step: ChainStep, profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str],
             port: int | None = None) -> StepResult:
    """Apply the step's patches to the installed sglang, launch with EAGLE-3, restore, read the outcome."""
    spec = server_spec(profile, models, speculative=True, shims=shims, port=port)
    log = Path(logs_dir) / f"03_chain_{step.name.replace(' ', '_')}.{profile.name}.log"
    with ExitStack() as stack:
        for patch in step.patches:
            stack.enter_context(patched(resolve_patch(patch)))
        outcome = launch(spec, log, timeout_s=profile.ready_timeout_s)
    report = crash_report(outcome.log_text(), profile.name) if outcome.status != "ready" else None
    return StepResult(step, outcome.status, outcome.seconds, report, log, spec.argv())


def run_chain(profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str],
              steps: Sequence[ChainStep] = DEFAULT_CHAIN, port: int | None = None,
              progress: Any = None) -> list[StepResult]:
    """Every step in order; a step's failure to launch is a result, not an exception."""
    results = []
    for step in steps:
        if progress:
            progress(f"relaunch: {step.name}")
        results.append(run_step(step, profile, models, logs_dir, shims, port))
    return results


def _is_wrapper_gap(report: CrashReport | None, wrapper: str) -> bool:
    return bool(report and report.category == "interface_gap" and report.object_class == wrapper)


def expect_chain(results: Sequence[StepResult], profile: Profile, contract_members: Sequence[str],
                 wrapper: str = "KimiK25ForConditionalGeneration") -> list[str]:
    """Assert the chain's story; returns one plain sentence per step for the notebook."""
    by_name = {r.step.name: r for r in results}
    story = []
    first = by_name.get("unpatched")
    if first is not None:
        if not _is_wrapper_gap(first.report, wrapper):
            raise ExpectationError(f"unpatched launch did not die on a wrapper gap: {first.status}, "
                                   f"{first.report.signature if first.report else 'no traceback'}")
        story.append(f"unpatched: dies asking the wrapper for '{first.report.missing_attribute}'")
    middle = by_name.get("one-method patch")
    if middle is not None:
        if middle.status == "ready":
            story.append("one-method patch: the server came up (the one method was enough here)")
        elif _is_wrapper_gap(middle.report, wrapper):
            member = middle.report.missing_attribute
            if member == SET_LAYERS_TO_CAPTURE:
                raise ExpectationError("the one-method patch did not take effect: the same member is still missing")
            if member not in contract_members:
                raise ExpectationError(f"the one-method patch stops at '{member}', which the traced contract does "
                                       f"not list: the trace (notebook 02) misses a member")
            story.append(f"one-method patch: passes the first hook, then dies asking the wrapper for '{member}' "
                         f"at {middle.report.call_site}")
        else:
            story.append(f"one-method patch: stops at {middle.report.signature if middle.report else middle.status}")
    last = by_name.get("full delegation patch")
    if last is not None:
        if _is_wrapper_gap(last.report, wrapper) or (last.report and last.report.category == "interface_gap"):
            raise ExpectationError(f"the full patch still hits an interface gap: {last.report.signature}")
        if profile.device == "cpu":
            if last.status == "ready":
                raise ExpectationError("EAGLE-3 came up on CPU: the CPU limitation is gone, so the EAGLE-3 arm "
                                       "can be measured now; update notebook 03")
            if not (last.report and last.report.rule == CPU_LIMIT_RULE):
                raise ExpectationError(f"the full patch stopped at something other than the known CPU limitation: "
                                       f"{last.report.signature if last.report else last.status}")
            story.append(f"full delegation patch: every wrapper hook passes; the server stops at a CPU limitation "
                         f"of speculative decoding ({last.report.signature}) at {last.report.call_site}")
        else:
            if last.status != "ready":
                raise ExpectationError(f"the full patch did not bring the server up: "
                                       f"{last.report.signature if last.report else last.status}")
            story.append("full delegation patch: the server comes up with EAGLE-3")
    return story


def not_runnable_reason(results: Sequence[StepResult]) -> dict[str, Any] | None:
    """Why the EAGLE-3 arm cannot be measured on this profile (from the last step), or None if it can."""
    last = results[-1]
    if last.status == "ready" or last.report is None:
        return None
    return {"category": last.report.category, "rule": last.report.rule, "signature": last.report.signature,
            "call_site": str(last.report.call_site), "explanation": last.report.explanation,
            "step": last.step.name}
