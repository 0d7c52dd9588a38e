"""Notebook 03's orchestration: patches on show, benchmark arms against real servers, diagnostics.

The relaunch chain lives in ``fix.relaunch``, the capture check in ``fix.capture_check``, the load generator in
``loadgen``/``sweep``; this module only wires them to a profile so that every notebook cell is one call. The
headline EAGLE-3 arm is measured on the server the relaunch chain left running (one launch fewer); the control
and layer-mismatch arms get their own patched servers, at fewer concurrencies (see ``eagle3_arm_plans``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench.crosscheck import CrossCheck, cross_check
from eagle3lab.bench.lossless import REQUIRED_CONCURRENCY, LosslessReport, lossless_report
from eagle3lab.bench.sweep import (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL,
                                   ARM_KIND_EAGLE3_SHIFTED, ArmResult, BenchReport, load_requests, not_runnable_arm,
                                   run_arm, save_arm)
from eagle3lab.bench.workload import SweepConfig, model_vocab_size
from eagle3lab.errors import BenchError, ExpectationError
from eagle3lab.package import patching
from eagle3lab.package.diffs import PatchInfo
from eagle3lab.fix.relaunch import StepResult, patched_server, serving_server, stop_serving
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from eagle3lab.runtime import modelinfo
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.profiles import Profile
from eagle3lab.errors import PerfModelError
from eagle3lab.report.run_model import run_break_even
from eagle3lab.bench.diagnostics import diagnose, evidence_from_artifacts, findings_table
from eagle3lab.sidecars import InterfaceTraceSidecar, read_if_present
from eagle3lab.runtime.tinymodel.drafter_training import (shifted_drafter, shifted_ids_valid,
                                                          trained_drafter_for_profile)


def patch_table(names: Sequence[str]) -> list[dict[str, Any]]:
    """Each patch's header and whether it applies cleanly to the installed sglang (a dry run)."""
    rows = []
    for name in names:
        result = patching.check(patching.resolve_patch(name))
        info = result.info or PatchInfo(name=name)
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
                   logs_dir: Path, *, kind: str, speculative: bool, shims: Sequence[str] = (),
                   patch: str | None = None, with_cross_check: bool = False) -> tuple[ArmResult, CrossCheck | None]:
    """Start the arm's server (patched for the launch if asked), sweep it, optionally cross-check with
    bench_serving, stop it."""
    if speculative:
        check_greedy(profile, config)
    spec = server_spec(profile, models, speculative=speculative, shims=shims)
    log = Path(logs_dir) / f"03_{name}.{profile.name}.log"
    check = None
    with patched_server(spec, log, profile.ready_timeout_s, [patch] if patch else ()) as server:
        ready_s = round(server.elapsed(), 2)
        arm = run_arm(name, spec.base_url, config, out_dir, kind=kind)
        arm.server_ready_seconds = ready_s
        save_arm(arm, out_dir)
        measured = arm.measured_points()
        if with_cross_check and measured:
            check = cross_check(measured[-1].metrics, spec.base_url, models.target, config, out_dir)
    return arm, check


def check_greedy(profile: Profile, config: SweepConfig) -> None:
    """Speculative CPU runs verify greedily only (the server refuses sampling, see cpu_harness.spec_shims);
    refuse a sampling workload here, in one line, before a server is started."""
    sampling = config.extra_sampling_params
    temperature = float(sampling.get("temperature", 0.0) or 0.0)
    if profile.device == "cpu" and temperature > 0 and sampling.get("top_k", -1) != 1:
        raise BenchError(f"temperature {temperature:g} with EAGLE-3 on CPU: {GREEDY_ONLY}", key="temperature",
                         value=temperature)


@dataclass(frozen=True)
class SpecArmPlan:
    """One EAGLE-3 arm to measure: which drafter it serves, at which concurrencies, and why it is there."""

    name: str
    kind: str
    draft: str  # the drafter's model directory (or hub id)
    aux_layer_ids: tuple[int, ...] | None
    concurrency: tuple[int, ...] | None  # None: the profile's whole sweep
    purpose: str

    def models(self, models: Models) -> Models:
        return dataclasses.replace(models, draft=self.draft, aux_layer_ids=self.aux_layer_ids)

    def config(self, config: SweepConfig) -> SweepConfig:
        return config if self.concurrency is None else dataclasses.replace(config, concurrency=list(self.concurrency))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def measure_chain_server(chain: Sequence[StepResult], plan: SpecArmPlan, config: SweepConfig,
                         out_dir: Path, not_runnable: dict[str, Any] | None) -> ArmResult:
    """The headline EAGLE-3 arm, swept on the very server the relaunch chain brought up (then stopped); an arm
    that could not come up is recorded with its classified reason instead."""
    server = serving_server(chain)
    try:
        if server is None:
            reason = not_runnable or {"message": "the full-patch server did not stay up (see the chain table)"}
            return not_runnable_arm(plan.name, reason, kind=plan.kind)
        if plan.draft != server.spec.speculative.draft_model_path:  # type: ignore[union-attr]
            raise BenchError(f"arm '{plan.name}' is planned with drafter {plan.draft} but the chain's server serves "
                             f"{server.spec.speculative.draft_model_path}; launch the chain with the arm's models")  # type: ignore[union-attr]
        arm = run_arm(plan.name, server.spec.base_url, plan.config(config), out_dir, kind=plan.kind)
        arm.server_ready_seconds = chain[-1].seconds  # the chain's last launch is this arm's server
        save_arm(arm, out_dir)
        return arm
    finally:
        stop_serving(chain)


def run_experiment_arm(plan: SpecArmPlan, profile: Profile, models: Models, config: SweepConfig, out_dir: Path,
                       logs_dir: Path, patch: str, shims: Sequence[str]) -> ArmResult:
    """An EAGLE-3 experiment arm (control drafter, shifted layer ids) on its own patched server."""
    arm, _ = run_server_arm(plan.name, profile, plan.models(models), plan.config(config), out_dir, logs_dir,
                            kind=plan.kind, speculative=True, shims=shims, patch=patch)
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
    """The cost model's break-even acceptance for this run (``report.run_model.run_break_even``), so the acceptance rule can
    judge the measured acceptance; (None, why) when the run gives the model nothing to calibrate on."""

    if report is None:
        return None, "no benchmark report"
    try:
        return run_break_even(profile, report)
    except PerfModelError as exc:
        return None, str(exc)


def diagnose_run(profile: Profile, report: BenchReport | None, bench_dir: Path,
                 logs_dir: Path) -> list[dict[str, Any]]:
    """Every known cause of a missing EAGLE-3 speedup that this run's evidence shows, with its evidence line."""

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


# --- the EAGLE-3 arms of the cpu profile: headline, control and layer-mismatch ----------------------------------

SHIFT_ONE_LAYER_EARLY = -1  # sglang 0.5.9's CUDA-graph capture hands the drafter the output of layer i - 1


@dataclass(frozen=True)
class Drafters:
    """The drafters the EAGLE-3 arms serve. ``control`` and ``shifted`` are optional experiments."""

    trained: str
    trained_layer_ids: tuple[int, ...] | None
    control: str | None = None
    control_layer_ids: tuple[int, ...] | None = None
    shifted: str | None = None
    shifted_layer_ids: tuple[int, ...] | None = None
    # The drafter's offline simulation of sglang's verify on the benchmark prompts, per served variant
    # ('aligned', 'shifted', 'untrained' -> acceptance summary), where its training recorded one.
    offline_acceptance: dict[str, Any] | None = None


def drafter_layer_ids(draft_dir: str | Path) -> tuple[int, ...] | None:
    """The drafter's aux layer ids from its config.json (``runtime.modelinfo``, as sglang reads them)."""
    ids = modelinfo.drafter_aux_layer_ids(modelinfo.read_config(draft_dir))
    return tuple(ids) if ids is not None else None


def resolve_drafters(profile: Profile, models: Models) -> Drafters:
    """The drafters of the EAGLE-3 arms. On the tiny-model profile: the drafter trained on the tiny target (built
    once, cached by key), the generated untrained one as the control, and a copy of the trained one whose aux layer
    ids are shifted one layer early (when the target is deep enough for both id sets to be captured). Elsewhere,
    or for settings the tiny drafter is not trained for (topk > 1): the profile's own drafter, no experiments."""
    if not profile.uses_tiny_model or profile.speculative_eagle_topk != 1:
        return Drafters(models.draft, models.aux_layer_ids)

    trained = trained_drafter_for_profile(profile)
    ids = tuple(trained.aux_layer_ids)
    shifted = shifted_drafter(trained.path, SHIFT_ONE_LAYER_EARLY) \
        if shifted_ids_valid(ids, profile.model_num_layers, SHIFT_ONE_LAYER_EARLY) else None
    benchmark = ((getattr(trained, "history", None) or {}).get("final") or {}).get("benchmark") or {}
    offline = {arm: scores["acceptance"] for arm, scores in benchmark.items()
               if isinstance(scores, dict) and isinstance(scores.get("acceptance"), dict)}
    return Drafters(str(trained.path), ids, control=str(trained.control_dir), control_layer_ids=ids,
                    shifted=str(shifted) if shifted else None,
                    shifted_layer_ids=drafter_layer_ids(shifted) if shifted else None,
                    offline_acceptance=offline or None)


def eagle3_arm_plans(drafters: Drafters, experiment_concurrency: Sequence[int] = (1,)) -> list[SpecArmPlan]:
    """The headline arm (trained drafter, the whole sweep) and, where the drafters exist, the control arm
    (untrained drafter) and the layer-mismatch arm (trained drafter, ids shifted one layer early), each at
    ``experiment_concurrency`` only, to keep the run short; an empty list leaves the experiments out."""
    levels = tuple(experiment_concurrency)
    if not levels:
        drafters = Drafters(drafters.trained, drafters.trained_layer_ids)
    plans = [SpecArmPlan("eagle3", ARM_KIND_EAGLE3, drafters.trained, drafters.trained_layer_ids, None,
                         "EAGLE-3 with the trained drafter, served the aux layer ids it was trained on")]
    if drafters.control is not None:
        plans.append(SpecArmPlan("eagle3-untrained", ARM_KIND_EAGLE3_CONTROL, drafters.control,
                                 drafters.control_layer_ids, levels,
                                 "control: an untrained drafter (random weights), so nearly every draft is rejected"))
    if drafters.shifted is not None:
        plans.append(SpecArmPlan("eagle3-shifted", ARM_KIND_EAGLE3_SHIFTED, drafters.shifted,
                                 drafters.shifted_layer_ids, levels,
                                 "the trained drafter fed each aux hidden state one layer early (what sglang 0.5.9's "
                                 "CUDA-graph capture hands it)"))
    return plans


def lossless_check(arms: Sequence[ArmResult], out_dir: Path,
                   required_concurrency: int = REQUIRED_CONCURRENCY) -> LosslessReport:
    """Every measured speculative arm's outputs against the baseline's, prompt by prompt (see ``lossless``)."""
    baseline = next((a for a in arms if a.kind == ARM_KIND_BASELINE and a.measured_points()), None)
    if baseline is None:
        raise BenchError("the lossless check needs a measured baseline arm")

    def records(arm: ArmResult) -> list:
        if not arm.requests_file:
            raise BenchError(f"arm '{arm.name}' has no requests file")
        return load_requests(Path(out_dir) / arm.requests_file)

    candidates = [(a.name, records(a)) for a in arms if a.speculative and a.measured_points()]
    return lossless_report((baseline.name, records(baseline)), candidates, required_concurrency)


def timings(chain: Sequence[StepResult], captures: dict[Any, Any], report: BenchReport | None) -> dict[str, float]:
    """Seconds per part of notebook 03, as measured in this run (for the sidecar and the run's cost table)."""
    out: dict[str, float] = {f"chain: {step.step.name}": step.seconds for step in chain}
    for key, result in captures.items():
        out[f"capture check: {key or 'unpatched'}"] = round(sum(result.seconds.values()), 2)
    for arm in report.arms if report else []:
        if arm.server_ready_seconds is not None:
            out[f"{arm.name}: server start-up"] = arm.server_ready_seconds
        if arm.sweep_seconds is not None:
            out[f"{arm.name}: sweep"] = arm.sweep_seconds
    if report and report.cross_check and report.cross_check.get("seconds") is not None:
        out["baseline: bench_serving cross-check"] = float(report.cross_check["seconds"])
    return out
