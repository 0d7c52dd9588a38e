"""The run's verdicts as one markdown table, for a CI job's summary (``$GITHUB_STEP_SUMMARY``), from what the
notebooks left: their executed copies (a run that succeeded) or failed copies, and their JSON sidecars.

Rows: crash reproduced (01), interface trace (02), patch and relaunch (03), speedup with its interval (03). Whether
the job passes is the notebooks' own business (each asserts its expectations); this table never decides it: a
notebook that failed or never ran leaves rows that say so, and the speedup is shown, never gated on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TypeVar

from eagle3lab import sidecars, staging
from eagle3lab.errors import Eagle3LabError, SidecarError
from eagle3lab.paths import REPO_ROOT
from eagle3lab.runbook import NOTEBOOKS, executed_path, failed_path

S = TypeVar("S", bound=sidecars.Sidecar)


@dataclass(frozen=True)
class VerdictRow:
    check: str
    verdict: str
    evidence: str


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return path.name


def notebook_state(notebook: str, profile: str) -> tuple[str, Optional[Path]]:
    """("passed" | "failed" | "not run", the executed or failed copy): the newer copy wins where both are there."""
    good = executed_path(notebook, profile)
    bad = failed_path(good)
    if bad.is_file() and (not good.is_file() or bad.stat().st_mtime >= good.stat().st_mtime):
        return "failed", bad
    return ("passed", good) if good.is_file() else ("not run", None)


def _read(schema: type[S], profile: str) -> tuple[Optional[S], str]:
    """The sidecar, or None and why not (a missing or unreadable sidecar is a row here, never an error)."""
    try:
        return sidecars.read(schema, profile), ""
    except SidecarError as err:
        path = err.fields.get("path")
        if path is not None and not Path(path).is_file():
            return None, f"no sidecar {_relative(Path(path))}"
        first = str(err).split(";")[0]
        return None, first.replace(str(path), _relative(Path(path))) if path is not None else first


def _not_there(check: str, notebook: str, state: str, copy: Optional[Path], why: str) -> VerdictRow:
    where = f" ({_relative(copy)})" if copy else ""
    return VerdictRow(check, f"notebook {state}" if state != "passed" else "no sidecar", f"{why}{where}")


def crash_row(profile: str) -> VerdictRow:
    notebook = NOTEBOOKS[0]
    state, copy = notebook_state(notebook, profile)
    side, why = _read(sidecars.CrashReproSidecar, profile)
    if state != "passed" or side is None:
        return _not_there("crash reproduced (01)", notebook, state, copy, why or "the notebook did not finish")
    crash, report = side.crash, side.crash.report
    what = (f"{report.exc_type}: {report.object_class} has no {report.missing_attribute}" if report
            else crash.signature or crash.status)
    at = f" at {crash.call_site}" if crash.call_site else ""
    control = (f"; the same model without EAGLE-3 served {side.control.completion_tokens} tokens"
               if side.control.completion_tokens else "")
    return VerdictRow("crash reproduced (01)", "yes" if crash.status != "ready" else "no",
                      f"{what}{at} ({crash.status} after {crash.seconds_to_outcome:.0f} s){control}")


def trace_row(profile: str) -> VerdictRow:
    notebook = NOTEBOOKS[1]
    state, copy = notebook_state(notebook, profile)
    side, why = _read(sidecars.InterfaceTraceSidecar, profile)
    if state != "passed" or side is None:
        return _not_there("interface trace (02)", notebook, state, copy, why or "the notebook did not finish")
    verdict = side.verdict
    missing = verdict.missing_members
    gaps = f"{len(verdict.delegation_gaps)} of them delegation gaps" if missing else ""
    counts = side.conformance.get(verdict.sglang_version)
    others = (f"; {counts.counts.wrappers_lacking} of {counts.counts.wrapper} wrappers of EAGLE-3-capable models in "
              f"sglang {verdict.sglang_version} lack part of it" if counts and counts.counts else "")
    return VerdictRow("interface trace (02)", f"{len(missing)} member(s) missing" if missing else "conforms",
                      f"{verdict.entry_class} in sglang {verdict.sglang_version}: {', '.join(missing) or 'none'}"
                      f"{' (' + gaps + ')' if gaps else ''}{others}")


def patch_rows(profile: str) -> list[VerdictRow]:
    notebook = NOTEBOOKS[2]
    state, copy = notebook_state(notebook, profile)
    side, why = _read(sidecars.PatchBenchSidecar, profile)
    if side is None or state == "not run":
        row = _not_there("patch (03)", notebook, state, copy, why or "the notebook did not finish")
        return [row, VerdictRow("relaunch (03)", row.verdict, row.evidence),
                VerdictRow("speedup (03)", row.verdict, row.evidence)]
    prefix = f"notebook {state}: " if state != "passed" else ""
    patch = VerdictRow("patch (03)", f"{prefix}{'applied' if side.delegated_members else 'delegates nothing'}",
                       f"{Path(side.patch).name} delegates {', '.join(side.delegated_members) or 'nothing'}")
    last = side.chain[-1] if side.chain else None
    if last is None:
        relaunch = VerdictRow("relaunch (03)", f"{prefix}not run", "no relaunch in the sidecar")
    else:
        probe = last.probe
        served = (f"; /generate served {probe.completion_tokens} tokens" + (" speculatively" if probe.speculated else "")
                  if probe and probe.ok else "")
        steps = ", ".join(f"{step.step}: {step.outcome}" for step in side.chain)
        relaunch = VerdictRow("relaunch (03)", f"{prefix}{'serves' if last.outcome == 'ready' else last.outcome}",
                              f"{steps}{served}")
    return [patch, relaunch, speedup_row(side, prefix)]


def speedup_row(side: sidecars.PatchBenchSidecar, prefix: str = "") -> VerdictRow:
    """The interleaved pair's speedup at its lowest concurrency with its bootstrap interval (shown, never gated)."""
    measured = f"measured on this machine, profile {side.profile}, {side.written_at[:10]}"
    samples = sorted(side.interleaved_sweep, key=lambda s: s.concurrency or 0)
    if not samples:
        spread = side.launch_spread
        if spread is None or not spread.launches:
            return VerdictRow("speedup (03)", f"{prefix}not measured", "no benchmark in the sidecar")
        first = spread.launches[0]
        return VerdictRow("speedup (03)", f"{prefix}{first.speedup:.2f}x, no interval",
                          f"one sequential launch at concurrency {spread.concurrency}; {measured}")
    head = samples[0]
    if head.speedup_low is not None and head.speedup_high is not None:
        interval = (f"{head.interval_level_pct or 95:.0f}% interval {head.speedup_low:.2f}-{head.speedup_high:.2f} "
                    f"over {len(head.round_speedups)} rounds")
    else:
        interval = "no interval (one round)"
    accept = f", acceptance length {head.accept_length:.2f}" if head.accept_length is not None else ""
    return VerdictRow("speedup (03)", f"{prefix}{head.speedup:.2f}x, {interval}",
                      f"EAGLE-3 over the baseline, both servers up, concurrency {head.concurrency}{accept}; "
                      f"{measured}; a speed figure is shown, never gated on")


def verdict_rows(profile: str = "cpu") -> list[VerdictRow]:
    return [crash_row(profile), trace_row(profile), *patch_rows(profile)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(profile: str = "cpu") -> str:
    """The verdict table, with each notebook's state above it; of a failed run that published nothing (``staging``),
    from that run's staged copies."""
    failed = staging.unpublished(profile)
    if failed is None:
        return _markdown(profile)
    with staging.viewing(failed):
        return _markdown(profile, f"A run that published nothing; from its copies in {_relative(failed)}.")


def _markdown(profile: str, note: str = "") -> str:
    states = []
    for notebook in NOTEBOOKS:
        try:
            state, copy = notebook_state(notebook, profile)
        except Eagle3LabError:  # a notebook this checkout does not have
            state, copy = "not in this checkout", None
        states.append(f"{notebook} {state}" + (f" ({_relative(copy)})" if copy else ""))
    lines = [f"## eagle3lab notebooks, profile {profile}", "", *([note, ""] if note else []),
             "; ".join(states) + ".", "",
             "| check | verdict | evidence |", "| --- | --- | --- |"]
    lines += [f"| {row.check} | {_cell(row.verdict)} | {_cell(row.evidence)} |" for row in verdict_rows(profile)]
    return "\n".join(lines) + "\n"
