"""Notebook 01's logic: launch with EAGLE-3 and capture the crash; launch without it and prove the model serves.

The EAGLE-3 launch is expected to die. ``expect_signature`` turns that expectation into an assertion, so the
notebook fails loudly the day the crash stops happening (or happens differently) instead of reporting a stale
story.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import requests

from eagle3lab.runtime.crashlog import CrashReport, crash_report
from eagle3lab.runtime.deployment import Models, ready_timeout_s, server_spec, startup_check_load_format
from eagle3lab.errors import ExpectationError, ServerDiedError
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import LaunchOutcome, launch, running_server
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE
from eagle3lab.package.location import installed_root
from eagle3lab.package import backups
from eagle3lab.package.restore import require_release


@dataclass(frozen=True)
class ExpectedCrash:
    """The signature the notebook asserts."""

    exc_type: str = "AttributeError"
    object_class: str = "KimiK25ForConditionalGeneration"
    missing_attribute: str = SET_LAYERS_TO_CAPTURE

    def describe(self) -> str:
        return f"{self.exc_type}: '{self.object_class}' object has no attribute '{self.missing_attribute}'"


@dataclass
class CrashRun:
    """One launch that was expected to crash: how it ended and what the log says."""

    argv: list[str]
    outcome: LaunchOutcome
    report: CrashReport | None

    def summary(self) -> dict[str, Any]:
        """Raw values (the sidecar's ``CrashRecord``); ``table`` formats them for people."""
        return {"status": self.outcome.status, "seconds_to_outcome": self.outcome.seconds,
                "returncode": self.outcome.returncode,
                "peak_rss_bytes": self.outcome.peak_rss_bytes,
                "peak_pss_bytes": self.outcome.peak_pss_bytes,
                "category": self.report.category if self.report else None,
                "signature": self.report.signature if self.report else None,
                "call_site": str(self.report.call_site) if self.report and self.report.call_site else None,
                "log": str(self.outcome.log_path)}

    def table(self) -> dict[str, Any]:
        """``summary`` for the notebook's table: memory in GiB."""
        return _gib(self.summary())


@dataclass
class ControlRun:
    """The same model without speculative decoding: it must start and answer."""

    argv: list[str]
    seconds_to_ready: float
    peak_rss_bytes: int
    prompt: str
    completion: str
    completion_tokens: int
    generate_seconds: float
    log_path: Path
    meta_info: dict = field(default_factory=dict)
    served: Any = None  # what ``on_ready`` measured on the server (notebook 01: the noise floor), if given

    def summary(self) -> dict[str, Any]:
        """Raw values (the sidecar's ``ControlRecord``); ``table`` formats them for people."""
        return {"seconds_to_ready": self.seconds_to_ready, "peak_rss_bytes": self.peak_rss_bytes,
                "generate_seconds": self.generate_seconds,
                "completion_tokens": self.completion_tokens, "completion": self.completion,
                "log": str(self.log_path)}

    def table(self) -> dict[str, Any]:
        """``summary`` for the notebook's table: memory in GiB, the request time in ms resolution."""
        return {**_gib(self.summary()), "generate_seconds": round(self.generate_seconds, 3)}


def _gib(summary: dict[str, Any]) -> dict[str, Any]:
    """The same row with every ``*_bytes`` figure shown as ``*_gib`` (two decimals)."""
    return {(k.removesuffix("_bytes") + "_gib" if k.endswith("_bytes") else k):
            (round(v / 2**30, 2) if k.endswith("_bytes") and isinstance(v, (int, float)) else v)
            for k, v in summary.items()}


def log_path(logs_dir: Path, run: str, profile: Profile) -> Path:
    return Path(logs_dir) / f"{run}.{profile.name}.log"


def reproduce_crash(profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str] = (),
                    run: str = "01_eagle3_launch", port: int | None = None) -> CrashRun:
    """Launch the real server with EAGLE-3 and read the crash out of its log (on the unpatched release only). The
    launch reads the profile's ``startup_checks_load_format`` weights: the raise comes at start-up before any
    forward (``preflight.loads``), so dummy weights reach it as the checkpoint's do."""

    root = installed_root()
    spec = server_spec(profile, models, speculative=True, shims=shims, port=port,
                       load_format=startup_check_load_format(profile))
    # The patch lock from the check to the crash: no other run can patch sglang between "unpatched" and the
    # server importing it (two runs in one environment once crashed a patched package here).
    with backups.package_lock(root):
        require_release(root, "reproducing the crash")  # a leftover patch would change the crash
        outcome = launch(spec, log_path(logs_dir, run, profile),
                         timeout_s=ready_timeout_s(profile, models, spec.load_format))
    return CrashRun(spec.argv(), outcome, crash_report(outcome.log_text(), profile.name))


def expect_signature(run: CrashRun, expected: ExpectedCrash) -> CrashReport:
    """Fail unless the server died with exactly the expected error on the model object."""
    if run.outcome.status == "ready":
        raise ExpectationError(f"the server came up: the expected crash ({expected.describe()}) did not happen; "
                               f"sglang or the wrapper changed -- see {run.outcome.log_path}",
                               expected=expected.describe(), found="ready", log=run.outcome.log_path)
    if run.outcome.status == "timeout":
        raise ExpectationError(f"the server neither crashed nor became ready within the timeout; "
                               f"see {run.outcome.log_path}", expected=expected.describe(), found="timeout",
                               log=run.outcome.log_path)
    report = run.report
    if report is None:
        raise ExpectationError(f"the server died (exit {run.outcome.returncode}) but its log holds no Python "
                               f"traceback; see {run.outcome.log_path}",
                               expected=expected.describe(), found="no_traceback", log=run.outcome.log_path)
    found = (report.exc_type.rsplit(".", 1)[-1], report.object_class, report.missing_attribute)
    wanted = (expected.exc_type, expected.object_class, expected.missing_attribute)
    if found != wanted or report.category != "interface_gap":
        raise ExpectationError(f"the server died differently than expected: got '{report.signature}' "
                               f"({report.category}), expected '{expected.describe()}'", expected=expected.describe(),
                               found=report.signature)
    return report


def generate(base_url: str, prompt: str, max_new_tokens: int, timeout_s: float = 120) -> tuple[dict, float]:
    """One greedy ``/generate`` through sglang's native HTTP API."""
    started = time.perf_counter()
    response = requests.post(f"{base_url}/generate", timeout=timeout_s, json={
        "text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0}})
    response.raise_for_status()
    return response.json(), time.perf_counter() - started


def control_run(profile: Profile, models: Models, logs_dir: Path, shims: Sequence[str], prompt: str,
                max_new_tokens: int, port: int | None = None,
                on_ready: Callable[[str], Any] | None = None) -> ControlRun:
    """Start the same model without speculative decoding, send one request, stop the server. ``on_ready`` (given
    the server's base URL) measures more on it before it stops: the first full-weight baseline of a run, so the
    noise floor comes from it instead of one more load."""
    spec = server_spec(profile, models, speculative=False, shims=shims, port=port)
    path = log_path(logs_dir, "01_control", profile)
    try:
        with running_server(spec, path, timeout_s=ready_timeout_s(profile, models)) as server:
            ready_s = server.elapsed()
            body, seconds = generate(spec.base_url, prompt, max_new_tokens)
            served = on_ready(spec.base_url) if on_ready is not None else None
            peak = max(server.peak_rss_bytes, server.tree_rss_bytes())
    except ServerDiedError as exc:
        report = crash_report(path.read_text(encoding="utf-8", errors="replace"), profile.name)
        detail = f": {report.signature}" + (f" (fix: {report.fix})" if report.fix else "") if report else ""
        raise ServerDiedError(f"{exc}{detail}", **exc.fields) from None
    meta = body.get("meta_info", {})
    return ControlRun(spec.argv(), round(ready_s, 2), peak, prompt, body.get("text", ""),
                      int(meta.get("completion_tokens", 0)), seconds, path, meta, served)


def crash_table(report: CrashReport) -> dict[str, Any]:
    """The crash report as rows for display."""
    return {"exception": report.exc_type, "message": report.message, "category": report.category,
            "explanation": report.explanation, "fix": report.fix, "object class": report.object_class,
            "missing attribute": report.missing_attribute, "runtime call site": str(report.call_site),
            "frames": len(report.frames), "tracebacks in log": report.tracebacks_found,
            "chain": " <- ".join(entry["exc_type"] for entry in reversed(report.chain)) if len(report.chain) > 1
            else None}


def timings_table(crash: CrashRun, control: ControlRun) -> list[dict[str, Any]]:
    return [
        {"launch": "EAGLE-3", "outcome": crash.outcome.status, "seconds": crash.outcome.seconds,
         "peak RSS (GiB)": round(crash.outcome.peak_rss_bytes / 2**30, 2)},
        {"launch": "control (no speculation)", "outcome": "ready", "seconds": control.seconds_to_ready,
         "peak RSS (GiB)": round(control.peak_rss_bytes / 2**30, 2)},
    ]
