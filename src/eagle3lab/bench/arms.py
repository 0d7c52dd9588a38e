"""Notebook 03's orchestration: patches on show, benchmark arms against real servers, diagnostics.

The relaunch chain lives in ``relaunch``, the capture check in ``capture_check``, the load generator in
``bench``; this module only wires them to a profile so that every notebook cell is one call.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.fix import patching
from eagle3lab.bench.sweep import ArmResult, BenchReport, not_runnable_arm, run_arm
from eagle3lab.bench.crosscheck import CrossCheck, cross_check
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.errors import ExpectationError
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import running_server
from eagle3lab.bench.workload import SweepConfig, model_vocab_size


def patch_table(names: Sequence[str]) -> list[dict[str, Any]]:
    """Each patch's header and whether it applies cleanly to the installed sglang (a dry run)."""
    rows = []
    for name in names:
        result = patching.check(patching.resolve_patch(name))
        info = result.info or patching.PatchInfo(name=name)
        rows.append({"patch": info.name, "what": info.what, "fixed upstream": info.fixed_upstream,
                     "dry run": result.status})
    return rows


def expect_patch_covers_trace(patch_name: str, missing_members: Sequence[str]) -> list[str]:
    """The full patch must delegate exactly the members notebook 02 found missing; fail otherwise."""
    added = sorted(member.name for member in patching.added_members(patch_name))
    if sorted(missing_members) != added:
        raise ExpectationError(f"patch {patch_name} delegates {added} but notebook 02 found {sorted(missing_members)} "
                               f"missing; update the patch or rerun notebook 02")
    return added


def sweep_config(profile: Profile, models: Models, prompt_kind: str) -> SweepConfig:
    """The profile's sweep on this model's vocabulary (text prompts need its tokenizer); ``models.target`` is the
    local directory (a hub id is resolved to its snapshot by ``deployment.resolve_models``)."""
    return SweepConfig.from_profile(profile, vocab_size=model_vocab_size(models.target), prompt_kind=prompt_kind,
                                    tokenizer_dir=models.target, trust_remote_code=profile.trust_remote_code)


def run_server_arm(name: str, profile: Profile, models: Models, config: SweepConfig, out_dir: Path,
                   logs_dir: Path, *, speculative: bool, shims: Sequence[str] = (), patch: str | None = None,
                   with_cross_check: bool = False) -> tuple[ArmResult, CrossCheck | None]:
    """Start the arm's server (patched if asked), sweep it, optionally cross-check with bench_serving, stop it."""
    spec = server_spec(profile, models, speculative=speculative, shims=shims)
    log = Path(logs_dir) / f"03_{name}.{profile.name}.log"
    check = None
    with patching.patched(patching.resolve_patch(patch)) if patch else nullcontext():
        with running_server(spec, log, timeout_s=profile.ready_timeout_s):
            arm = run_arm(name, spec.base_url, config, out_dir)
            measured = arm.measured_points()
            if with_cross_check and measured:
                check = cross_check(measured[-1].metrics, spec.base_url, models.target, config, out_dir)
    return arm, check


def eagle3_arm(profile: Profile, models: Models, config: SweepConfig, out_dir: Path, logs_dir: Path,
               not_runnable: dict[str, Any] | None, patch: str) -> ArmResult:
    """The EAGLE-3 arm: measured where the server comes up, otherwise recorded with its classified reason."""
    if not_runnable is not None:
        return not_runnable_arm("eagle3", not_runnable)
    arm, _ = run_server_arm("eagle3", profile, models, config, out_dir, logs_dir, speculative=True, patch=patch)
    return arm


def capture_rows(captures: dict[str | None, Any]) -> list[dict[str, Any]]:
    """One row per capture-check run: the failing hook, or the captured layers and aux shapes."""
    rows = []
    for key, result in captures.items():
        hook = result.failed_hook
        shapes = {f.phase: f"{f.shape} (expected {f.expected_shape})" for f in result.forwards}
        rows.append({"patch": key or "none", "outcome": result.outcome,
                     "missing hook": f"{hook.error_type}: {hook.error_message}" if hook else None,
                     "drafter layer ids": result.drafter_layer_ids, "layers captured": result.layers_to_capture,
                     "prefill aux shape": shapes.get("prefill"), "decode aux shape": shapes.get("decode"),
                     "seconds": round(sum(result.seconds.values()), 1)})
    return rows


def expect_capture(captures: dict[str | None, Any], first_missing: str) -> None:
    """Unpatched must fail on the first missing hook; patched must capture the drafter's layers exactly."""
    for key, result in captures.items():
        if key is None:
            hook = result.failed_hook
            if hook is None or hook.hook != first_missing:
                raise ExpectationError(f"unpatched capture check should fail on '{first_missing}', got "
                                       f"{result.outcome} ({hook.hook if hook else result.error_message})")
        elif not result.ok:
            raise ExpectationError(f"patched capture check ({key}) did not capture the drafter's layers: "
                                   f"{result.outcome} {result.error_type or ''} {result.error_message or ''}".strip())


def cross_check_row(check: CrossCheck) -> dict[str, Any]:
    return {"concurrency": check.concurrency, "prompts": check.num_prompts,
            "eagle3lab output tok/s": round(check.ours_output_tok_per_s, 1),
            "bench_serving output tok/s": round(check.theirs_output_tok_per_s, 1),
            "ratio (ours / bench_serving)": round(check.ratio, 3)}


def run_break_even_or_none(profile: Profile, report: BenchReport | None) -> tuple[float | None, str]:
    """The cost model's break-even acceptance for this run (``presets.run_break_even``), so the acceptance rule can
    judge the measured acceptance; (None, why) when the run gives the model nothing to calibrate on."""
    from eagle3lab.errors import PerfModelError
    from eagle3lab.report.presets import run_break_even

    if report is None:
        return None, "no benchmark report"
    try:
        return run_break_even(profile, report)
    except PerfModelError as exc:
        return None, str(exc)


def diagnose_run(profile: Profile, report: BenchReport | None, bench_dir: Path,
                 logs_dir: Path) -> list[dict[str, Any]]:
    """Every known cause of a missing EAGLE-3 speedup that this run's evidence shows, with its evidence line."""
    from eagle3lab.report.diagnostics import diagnose, evidence_from_artifacts, findings_table
    from eagle3lab.sidecars import InterfaceTraceSidecar, read_if_present

    trace = read_if_present(InterfaceTraceSidecar, profile.name)

    def existing(path: Path) -> Path | None:
        return path if path.is_file() else None

    spec_log = existing(Path(logs_dir) / f"03_eagle3.{profile.name}.log") or \
        existing(Path(logs_dir) / f"03_chain_full_delegation_patch.{profile.name}.log")
    break_even, break_even_where = run_break_even_or_none(profile, report)
    evidence = evidence_from_artifacts(
        bench_report=report, requests_dir=bench_dir if report else None, spec_log=spec_log,
        baseline_log=existing(Path(logs_dir) / f"03_baseline.{profile.name}.log"),
        layer_tables=[table.model_dump() for table in trace.layer_ids] if trace is not None else None,
        layer_profile="cpu" if profile.device == "cpu" else "gpu",
        break_even=break_even, break_even_where=break_even_where)
    return findings_table(diagnose(evidence))
