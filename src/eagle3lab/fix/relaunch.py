"""Notebook 03's relaunch chain: unpatched -> one-method patch -> full delegation patch, on the real server.

Each step patches the installed sglang package for the launch (restored as soon as the server is up or gone, even
on failure), launches with EAGLE-3, and reads the real outcome from the log. Nothing about the next error is
assumed: the one-method step shows whatever the runtime asks for next. A step that reaches ready is probed with
one greedy ``/generate``, and the last one can be kept serving, so the benchmark measures the very server the
chain brought up. ``expect_chain`` then states what must hold: the notebook fails if a wrapper error survives the
full patch, if the patched server does not answer or does not speculate, or if it stops at anything but a known
limitation of this machine (on CPU: a speculative setting the harness does not run, such as topk > 1).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence, TypeGuard

import requests

from eagle3lab.errors import ExpectationError, ServerDiedError, ServerTimeoutError
from eagle3lab.package.patching import FULL_DELEGATION_PATCH, ONE_METHOD_PATCH, patched, resolve_patch
from eagle3lab.runtime.crashlog import CrashReport, crash_report
from eagle3lab.runtime.deployment import (Models, ready_timeout_s, server_spec, startup_check_load_format,
                                          startup_check_patches)
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import LaunchOutcome, ServerProcess, ServerSpec
from eagle3lab.sidecars import ChainStepRecord, ProbeRecord
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE

CPU_LIMIT_RULE = "eagle_backend_cpu"  # sglang's own refusal: no EAGLE attention backend without a GPU
HARNESS_LIMIT_RULE = "spec_harness_unsupported"  # the CPU harness's refusal: a setting it does not run (topk > 1)


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


PROBE_PROMPT = list(range(16, 48))  # 32 token ids above the tiny tokenizer's special tokens
PROBE_TOKENS = 16


@dataclass
class ServeProbe:
    """One greedy ``/generate`` on a server the chain brought up: does it answer, and does it speculate?"""

    status_code: int | None
    completion_tokens: int | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code == 200 and bool(self.completion_tokens)

    @property
    def speculated(self) -> bool:
        return bool(self.spec_verify_ct)


def probe_generate(base_url: str, timeout_s: float = 120.0) -> ServeProbe:
    """Ask for ``PROBE_TOKENS`` greedy tokens; a refused or failed request is a result, not an exception."""
    body: dict[str, Any] = {"input_ids": PROBE_PROMPT, "sampling_params": {"max_new_tokens": PROBE_TOKENS,
                                                                          "temperature": 0, "ignore_eos": True}}
    try:
        reply = requests.post(f"{base_url}/generate", json=body, timeout=timeout_s)
    except requests.RequestException as exc:
        return ServeProbe(None, error=f"{type(exc).__name__}: {exc}")
    if reply.status_code != 200:
        return ServeProbe(reply.status_code, error=reply.text[:300])
    meta = reply.json().get("meta_info", {})
    return ServeProbe(200, meta.get("completion_tokens"), meta.get("spec_verify_ct"), meta.get("spec_accept_length"))


@dataclass
class StepResult:
    step: ChainStep
    status: str
    seconds: float
    report: CrashReport | None
    log_path: Path
    argv: list[str] = field(default_factory=list)
    probe: ServeProbe | None = None
    server: ServerProcess | None = field(default=None, repr=False, compare=False)  # kept serving, if asked
    load_format: str = "auto"  # sglang's --load-format of the launch: "dummy" for a start-up check on dummy weights

    def record(self) -> ChainStepRecord:
        """The typed record notebook 03's sidecar keeps (and the report reads)."""
        report, probe = self.report, self.probe
        return ChainStepRecord(
            step=self.step.name, outcome=self.status,
            patches=list(startup_check_patches(None if self.load_format == "auto" else self.load_format,
                                               self.step.patches)),  # as applied for the launch
            category=report.category if report else None, error=report.signature if report else None,
            call_site=str(report.call_site) if report and report.call_site else None, seconds=self.seconds,
            load_format=self.load_format,
            probe=None if probe is None else ProbeRecord(**asdict(probe), ok=probe.ok, speculated=probe.speculated))

    def row(self) -> dict[str, Any]:
        """The same, labelled for people."""
        return chain_row(self.record())


def chain_row(record: ChainStepRecord) -> dict[str, Any]:
    """One relaunch as a display row (labels live here only, never in the sidecar)."""
    probe = record.probe
    return {"step": record.step, "patch": ", ".join(record.patches) or "none", "outcome": record.outcome,
            "classified error": record.category, "error": record.error, "runtime call site": record.call_site,
            "weights": record.load_format, "seconds to outcome": record.seconds,
            "/generate": None if probe is None else ("ok" if probe.ok else f"failed: {probe.error}"),
            "verify steps (probe)": probe.spec_verify_ct if probe else None,
            "accept length (probe)": probe.spec_accept_length if probe else None}


def launch_patched(spec: ServerSpec, log: Path, timeout_s: float,
                   patches: Sequence[str] = ()) -> tuple[ServerProcess, LaunchOutcome]:
    """Start a server with ``patches`` applied to the installed sglang for its start-up only: the files are
    restored as soon as it is ready, dead or timed out (a running server has already loaded the patched code).
    The server is returned running if it became ready (the caller stops it), stopped otherwise."""
    server = ServerProcess(spec, log)
    try:
        with ExitStack() as stack:
            for patch in patches:
                stack.enter_context(patched(resolve_patch(patch)))
            server.start()
            outcome = server.wait(timeout_s)
    except BaseException:
        server.stop()
        raise
    if outcome.status != "ready":
        server.stop()
    return server, outcome


@contextmanager
def patched_server(spec: ServerSpec, log: Path, timeout_s: float, patches: Sequence[str] = ()) -> Iterator[ServerProcess]:
    """A ready server launched with ``patches`` (see ``launch_patched``) for the body of the ``with``; one clear
    error if it dies or hangs instead; stopped on every way out."""
    server, outcome = launch_patched(spec, log, timeout_s, patches)
    try:
        if outcome.status == "died":
            raise ServerDiedError(f"the server exited with code {outcome.returncode} after {outcome.seconds} s "
                                  f"before becoming ready; see {log}", returncode=outcome.returncode, log=log)
        if outcome.status != "ready":
            raise ServerTimeoutError(f"the server was not ready after {timeout_s:g} s; see {log} "
                                     f"(raise 'ready_timeout_s' if it is just slow)", timeout_s=timeout_s, log=log)
        yield server
    finally:
        server.stop()


def run_step(step: ChainStep, profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str],
             port: int | None = None, keep_serving: bool = False, startup_check: bool = False) -> StepResult:
    """Apply the step's patches, launch with EAGLE-3, restore the package once the server is up or gone, probe a
    ready server with one ``/generate``; with ``keep_serving`` a server that answered stays up (``result.server``,
    stopped by the caller, by ``stop_serving`` or at exit at the latest). A ``startup_check`` (a step expected to
    die at start-up) reads the profile's ``startup_checks_load_format`` weights, with the patch dummy weights need
    (``deployment.startup_check_patches``)."""
    load_format = startup_check_load_format(profile) if startup_check else None
    spec = server_spec(profile, models, speculative=True, shims=shims, port=port, load_format=load_format)
    log = Path(logs_dir) / f"03_chain_{step.name.replace(' ', '_')}.{profile.name}.log"
    server, outcome = launch_patched(spec, log, ready_timeout_s(profile, models, load_format),
                                     startup_check_patches(load_format, step.patches))
    try:
        probe = probe_generate(spec.base_url) if outcome.status == "ready" else None
    except BaseException:
        server.stop()
        raise
    report = crash_report(outcome.log_text(), profile.name) if outcome.status != "ready" else None
    kept = server if keep_serving and probe is not None and probe.ok else None
    if kept is None:
        server.stop()
    return StepResult(step, outcome.status, outcome.seconds, report, log, spec.argv(), probe, kept,
                      spec.load_format or "auto")


def run_chain(profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str],
              steps: Sequence[ChainStep] = DEFAULT_CHAIN, port: int | None = None,
              progress: Any = None, keep_last_serving: bool = False) -> list[StepResult]:
    """Every step in order; a step's failure to launch is a result, not an exception. With ``keep_last_serving``
    the last step's server stays up if it answered (see ``serving_server``). Every step but the last is a start-up
    check (``run_step``): the chain's story is that they die at start-up and the last one serves."""
    results: list[StepResult] = []
    try:
        for index, step in enumerate(steps):
            if progress:
                progress(f"relaunch: {step.name}")
            last = index == len(steps) - 1
            results.append(run_step(step, profile, models, logs_dir, shims, port, keep_serving=keep_last_serving
                                    and last, startup_check=not last))
    except BaseException:
        stop_serving(results)
        raise
    return results


def serving_server(results: Sequence[StepResult]) -> ServerProcess | None:
    """The server the chain left running (its last step, if it answered), or None."""
    return results[-1].server if results else None


def stop_serving(results: Sequence[StepResult]) -> None:
    """Stop any server the chain left running (idempotent)."""
    for result in results:
        if result.server is not None:
            result.server.stop()
            result.server = None


def _is_wrapper_gap(report: CrashReport | None, wrapper: str) -> TypeGuard[CrashReport]:
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
                                   f"{first.report.signature if first.report else 'no traceback'}",
                                   problem="unpatched_not_a_gap", found=first.status)
        story.append(f"unpatched: dies asking the wrapper for '{first.report.missing_attribute}'")
    middle = by_name.get("one-method patch")
    if middle is not None:
        if middle.status == "ready":
            story.append("one-method patch: the server came up (the one method was enough here)")
        elif _is_wrapper_gap(middle.report, wrapper):
            member = middle.report.missing_attribute
            if member == SET_LAYERS_TO_CAPTURE:
                raise ExpectationError("the one-method patch did not take effect: the same member is still missing",
                                       problem="patch_without_effect", found=member)
            if member not in contract_members:
                raise ExpectationError(f"the one-method patch stops at '{member}', which the traced contract does "
                                       f"not list: the trace (notebook 02) misses a member",
                                       problem="member_not_in_contract", found=member)
            story.append(f"one-method patch: passes the first hook, then dies asking the wrapper for '{member}' "
                         f"at {middle.report.call_site}")
        else:
            story.append(f"one-method patch: stops at {middle.report.signature if middle.report else middle.status}")
    last = by_name.get("full delegation patch")
    if last is not None:
        story.append(_expect_full_patch(last, profile))
    return story


def _expect_full_patch(last: StepResult, profile: Profile) -> str:
    report = last.report
    if report and report.category == "interface_gap":
        raise ExpectationError(f"the full patch still hits an interface gap: {report.signature}",
                               problem="interface_gap", found=report.signature)
    if last.status == "ready":
        probe = last.probe
        if probe is None or not probe.ok:
            raise ExpectationError(f"the full patch brought the server up but /generate failed: "
                                   f"{probe.error if probe else 'not probed'}", problem="generate_failed",
                                   found=probe.error if probe else None)
        if not probe.speculated:
            raise ExpectationError("the full patch brought the server up but its /generate reports no verify step "
                                   "(spec_verify_ct): the server answered without speculative decoding",
                                   problem="no_speculation")
        return (f"full delegation patch: every wrapper hook passes; the server comes up with EAGLE-3 and answers "
                f"/generate ({probe.completion_tokens} tokens in {probe.spec_verify_ct} verify steps)")
    if profile.device == "cpu" and report and report.rule == HARNESS_LIMIT_RULE:
        return (f"full delegation patch: every wrapper hook passes; the server stops at what is still GPU-only "
                f"with these settings ({report.signature}) at {report.call_site}")
    if report and report.rule == CPU_LIMIT_RULE:
        raise ExpectationError(f"the full patch stopped at sglang's missing CPU attention backend for EAGLE "
                               f"({report.signature}); the speculative CPU shims did not reach the server "
                               f"(pass cpu_harness.SPEC_SHIMS)", problem="cpu_backend_missing",
                               found=report.signature)
    raise ExpectationError(f"the full patch did not bring the server up: "
                           f"{report.signature if report else last.status}", problem="not_up",
                           found=report.signature if report else last.status)


def not_runnable_reason(results: Sequence[StepResult]) -> dict[str, Any] | None:
    """Why the EAGLE-3 arm cannot be measured on this profile (from the last step), or None if it can."""
    last = results[-1]
    if last.status == "ready" or last.report is None:
        return None
    return {"category": last.report.category, "rule": last.report.rule, "signature": last.report.signature,
            "call_site": str(last.report.call_site), "explanation": last.report.explanation,
            "step": last.step.name}
