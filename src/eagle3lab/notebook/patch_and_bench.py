"""Notebook 03's orchestration: patches on show, benchmark arms against real servers, diagnostics.

The relaunch chain lives in ``fix.relaunch``, the capture check in ``fix.capture_check``, the load generator in
``loadgen``/``sweep``; this module only wires them to a profile so that every notebook cell is one call. The
headline EAGLE-3 arm is measured on the server the relaunch chain left running (one launch fewer); the control
and layer-mismatch arms get their own patched servers, at fewer concurrencies (see ``eagle3_arm_plans``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from eagle3lab.bench import cycle, interleave, launch_spread as spread
from eagle3lab.bench.crosscheck import CrossCheck, cross_check
from eagle3lab.bench.floor import floor_workload, measure_noise_floor
from eagle3lab.bench.lossless import (NOISE_FLOOR, REQUIRED_CONCURRENCY, LosslessReport, NoiseFloor, lossless_policy,
                                      lossless_report, wants_noise_floor)
from eagle3lab.bench.sweep import (ARM_FAILED, ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL,
                                   ARM_KIND_EAGLE3_SHIFTED, POINT_FAILED, ArmResult, BenchReport, PointResult,
                                   load_requests, arm_summary, not_runnable_arm, point_rows, run_arm, save_arm)
from eagle3lab.bench.workload import SweepConfig, check_prompt_supply, model_vocab_size, special_id_floor
from eagle3lab.errors import BenchError, BenchmarkIncomplete, ExpectationError
from eagle3lab.package import patching
from eagle3lab.progress import PointProgress
from eagle3lab.notebook.arm_capture import ServedCapture, fed as _fed
from eagle3lab.package.diffs import PatchInfo
from eagle3lab.fix.relaunch import StepResult, patched_server, serving_server, stop_serving
from eagle3lab.runtime.cpu_harness.changes import harness_changes
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from eagle3lab.runtime import modelinfo
from eagle3lab.runtime.datasets import has_dataset, resolve_dataset
from eagle3lab.runtime.deployment import Models, ready_timeout_s, server_spec
from eagle3lab.runtime.server import free_port
from eagle3lab.runtime.profiles import Profile
from eagle3lab.errors import PerfModelError
from eagle3lab.report.run_model import run_break_even
from eagle3lab.bench.diagnostics.artifacts import evidence_from_artifacts
from eagle3lab.bench.diagnostics.engine import diagnose, findings_table
from eagle3lab.paths import repo_dir
from eagle3lab.sidecars import (CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar, read_if_present, today,
                                write as write_sidecar)
from eagle3lab.runtime.tinymodel.drafter_training import (shifted_drafter, shifted_ids_valid,
                                                          trained_drafter_for_profile)
from eagle3lab.sidecars import CycleComponentsRecord, LaunchSample, LaunchSpreadRecord, VariantCost
from eagle3lab.bench.diagnostics.evidence import Threshold


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


def prompt_kind_for(profile: Profile, requested: str) -> str:
    """The notebook's ``prompt_kind`` parameter, or the profile's ``bench_prompt_kind`` when it says "profile"."""
    return profile.bench_prompt_kind if requested == "profile" else requested


def sweep_config(profile: Profile, models: Models, prompt_kind: str) -> SweepConfig:
    """The profile's sweep on this model's vocabulary (text prompts need its tokenizer); ``models.target`` is the
    local directory (a hub id is resolved to its snapshot by ``deployment.resolve_models``). Conversation prompts
    read the profile's dataset file from the hub cache, and a sweep that needs more distinct prompts than it has
    is refused here, in one line, before any server starts."""
    if prompt_kind == "conversations" and not has_dataset(profile):
        raise BenchError(f"prompt_kind 'conversations' needs a dataset, and profile {profile.name} names none; set "
                         "bench_dataset and bench_dataset_file", key="bench_dataset", problem="missing")
    config = SweepConfig.from_profile(
        profile, vocab_size=model_vocab_size(models.target), prompt_kind=prompt_kind, tokenizer_dir=models.target,
        trust_remote_code=profile.trust_remote_code, token_id_high=special_id_floor(models.target),
        dataset_path=str(resolve_dataset(profile)) if prompt_kind == "conversations" else None)
    check_prompt_supply(config)
    return config


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
    with patched_server(spec, log, ready_timeout_s(profile, models), [patch] if patch else ()) as server:
        ready_s = round(server.elapsed(), 2)
        arm = run_arm(name, spec.base_url, config, out_dir, kind=kind)
        arm.server_ready_seconds = ready_s
        save_arm(arm, out_dir)
        measured = arm.measured_points()
        if with_cross_check and measured:
            check = _cross_check(measured[-1].concurrency, spec.base_url, models.target, config, out_dir, profile)
    return arm, check


def _cross_check(concurrency: int, base_url: str, tokenizer_dir: str, config: SweepConfig, out_dir: Path,
                 profile: Profile) -> CrossCheck:
    """bench_serving against our harness on the same workload, in the profile's rounds. bench_serving's
    ``random-ids`` dataset is the random-id workload, so a sweep on chat or text prompts is cross-checked on its
    random-id control: both clients measure that."""
    ids = config if config.prompt_kind == "ids" else dataclasses.replace(config, prompt_kind="ids")
    return cross_check(concurrency, base_url, tokenizer_dir, ids, out_dir, rounds=profile.bench_crosscheck_rounds,
                       num_prompts=profile.bench_crosscheck_prompts)


def harness_rows(profile: Profile, models: Models, eagle3_models: Models, shims: Sequence[str],
                 baseline_shims: Sequence[str]) -> list[dict[str, Any]]:
    """What the CPU harness changes on this run's baseline and EAGLE-3 servers, read off the environments their
    launches get (``server_spec``); empty off the harness."""
    if not profile.cpu_harness:
        return []
    baseline = server_spec(profile, models, speculative=False, shims=baseline_shims).env
    eagle3 = server_spec(profile, eagle3_models, speculative=True, shims=shims).env
    return [change.to_dict() for change in harness_changes(baseline, eagle3)]


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


@dataclass(frozen=True)
class Relaunched:
    """The headline pair relaunched: the launch-to-launch spread at concurrency 1, and the interleaved launch's
    pair at every concurrency it measured (each point's both arms in the same spells)."""

    spread: LaunchSpreadRecord | None
    interleaved: list[LaunchSample]
    # variants of the EAGLE-3 arm measured in the same rounds at ``concurrency`` (the layer-mismatch drafter):
    # each against the baseline blocks, and its throughput against the headline arm's
    variants: list[LaunchSample] = dataclasses.field(default_factory=list)
    variant_costs: list[VariantCost] = dataclasses.field(default_factory=list)


def relaunched_spread(plan: SpecArmPlan, profile: Profile, models: Models, config: SweepConfig, out_dir: Path,
                      logs_dir: Path, patch: str, shims: Sequence[str], baseline_shims: Sequence[str],
                      baseline: ArmResult, eagle3: ArmResult, trace: Path | None, concurrency: int = 1,
                      variants: Sequence[SpecArmPlan] = ()) -> Relaunched:
    """The headline pair relaunched ``profile.bench_launch_repeats`` times, beside the benchmark table's own
    launches (pair 1: EAGLE-3 on the chain's server, then the baseline); the spread across pairs at ``concurrency``
    (``bench.launch_spread``). With ``bench_interleave_rounds`` each relaunched pair has both servers up at once and
    measures, in alternating blocks, every concurrency of ``profile.interleave_concurrency`` in each round
    (``bench.interleave``); without, the two arms run one after the other at ``concurrency``, in mirrored order
    from pair to pair, so that a slow spell of a shared machine falls on both arms. A relaunch that measures
    nothing is kept as a skipped pair with its reason; the spread is None when fewer than two pairs measured (or
    no repeats asked). ``variants`` (the layer-mismatch arm's plan) join the interleaved launches as one more
    server each, measured at ``concurrency`` in the same rounds on the same prompts: what each costs in throughput
    against the headline arm, not only in acceptance."""
    if profile.bench_launch_repeats < 1:
        return Relaunched(None, [])
    order = ["eagle3, baseline"]
    pairs = [spread.launch_sample(1, baseline, eagle3, concurrency, trace, profile.name, shims)]
    interleaved: list[LaunchSample] = []
    arms_of = {interleave.BASELINE: _PairArm(False, baseline_shims, None, models, ARM_KIND_BASELINE),
               interleave.EAGLE3: _PairArm(True, shims, patch, plan.models(models), plan.kind)}
    arms_of.update({v.name: _PairArm(True, shims, patch, v.models(models), v.kind) for v in variants
                    if profile.bench_interleave_rounds})
    extra = [v.name for v in variants if profile.bench_interleave_rounds]
    if profile.bench_interleave_rounds and profile.bench_interleave_overlap_control:
        # a baseline without the overlap scheduler (as sglang runs EAGLE-3) beside sglang's default one, at
        # `concurrency`, in the same rounds: what the scheduler gives the baseline on this machine
        arms_of[OVERLAP_CONTROL] = _PairArm(False, baseline_shims, None, models, ARM_KIND_BASELINE, NO_OVERLAP)
        extra.append(OVERLAP_CONTROL)
    variant_samples: list[LaunchSample] = []
    for launch in range(2, profile.bench_launch_repeats + 2):
        if profile.bench_interleave_rounds:
            blocks = {c: interleave.block_configs(dataclasses.replace(config, concurrency=[c]), c,
                                                  profile.bench_interleave_rounds, profile.bench_interleave_prompts)
                      for c in sorted({concurrency, *profile.interleave_concurrency})}
            order.append(interleave.order_label(len(blocks[concurrency])))
            by_point, by_variant = _interleaved_pair(launch, profile, arms_of, blocks, out_dir, logs_dir, trace, shims,
                                                     {concurrency: extra})
            by_point = {c: s if isinstance(s, str) else s.model_copy(update={"baseline_overlap_schedule": True})
                        for c, s in by_point.items()}  # sglang's default, on the launch table's pair as well
            pairs.append(by_point[concurrency])
            interleaved.extend(s for s in by_point.values() if not isinstance(s, str))
            variant_samples.extend(s.model_copy(update={"role": "overlap_control"} if arm == OVERLAP_CONTROL else {})
                                   for (arm, _), s in by_variant.items() if not isinstance(s, str))
            continue
        runs = ["baseline", "eagle3"] if launch % 2 == 0 else ["eagle3", "baseline"]
        order.append(", ".join(runs))
        arms: dict[str, ArmResult] = {}
        for name in runs:
            arm = arms_of[name]
            arms[name], _ = run_server_arm(f"{name}-launch{launch}", profile, arm.models,
                                           dataclasses.replace(config, concurrency=[concurrency]), out_dir,
                                           logs_dir, kind=arm.kind, speculative=arm.speculative,
                                           shims=arm.shims, patch=arm.patch)
        pairs.append(spread.launch_sample(launch, arms["baseline"], arms["eagle3"], concurrency, trace, profile.name,
                                          shims))
    record = spread.spread_record([p for p in pairs if not isinstance(p, str)], concurrency, " | ".join(order),
                                  [p for p in pairs if isinstance(p, str)])
    headline = {(s.launch, s.concurrency): s for s in interleaved}
    costs = [c for v in variant_samples if v.role is None and (h := headline.get((v.launch, v.concurrency)))
             and (c := spread.variant_cost(h, v)) is not None]
    return Relaunched(record, interleaved, variant_samples, costs)


@dataclass(frozen=True)
class _PairArm:
    """One arm of the relaunched headline pair: how its server is launched."""

    speculative: bool
    shims: Sequence[str]
    patch: str | None  # applied for the launch's start-up only
    models: Models
    kind: str  # the arm kind its results are recorded under
    extra_args: tuple[str, ...] = ()  # server flags beyond the profile's


# bench_interleave_overlap_control: sglang runs every EAGLE-3 server without its overlap scheduler (spec v1) and the
# pair's baseline with it (sglang's default); OVERLAP_CONTROL is a baseline launched without it, measured in the same
# rounds at the variants' concurrency, so the asymmetry is measured, not assumed.
NO_OVERLAP = ("--disable-overlap-schedule",)
OVERLAP_CONTROL = "baseline-no-overlap"


def _interleaved_pair(launch: int, profile: Profile, arms_of: dict[str, _PairArm],
                      blocks: Mapping[int, Sequence[SweepConfig]], out_dir: Path, logs_dir: Path, trace: Path | None,
                      shims: Sequence[str], extra: Mapping[int, Sequence[str]] | None = None
                      ) -> tuple[dict[int, LaunchSample | str], dict[tuple[str, int], LaunchSample | str]]:
    """Every server up at once (the speculative ones on free ports), every concurrency's block measured on the pair
    in each round and on the ``extra`` arms at their concurrency (``interleave.schedule``); all stopped on every
    way out. One pair sample per concurrency, and one sample per extra arm and concurrency (that arm against the
    same baseline blocks)."""
    plan_blocks = interleave.schedule(blocks, extra=extra)
    check_greedy(profile, plan_blocks[0].config)
    specs = {name: dataclasses.replace(spec, extra_args=spec.extra_args + arm.extra_args)
             for name, arm in arms_of.items()
             for spec in [server_spec(profile, arm.models, speculative=arm.speculative, shims=arm.shims,
                                      port=None if name == interleave.BASELINE else free_port(profile.host))]}
    measured: dict[tuple[str, int], list[ArmResult]] = {(name, c): [] for name in arms_of for c in blocks}
    with contextlib.ExitStack() as servers:
        for name, spec in specs.items():
            log = Path(logs_dir) / f"03_{name}-launch{launch}.{profile.name}.log"
            patch = arms_of[name].patch
            patches = [patch] if patch else []
            servers.enter_context(patched_server(spec, log, ready_timeout_s(profile, arms_of[name].models), patches))
        with PointProgress(f"interleaved launch {launch}", len(plan_blocks), unit="block", leave=False) as progress:
            for block in plan_blocks:
                arm = run_arm(f"{block.arm}-launch{launch}-c{block.concurrency}-round{block.round}",
                              specs[block.arm].base_url, block.config, out_dir, kind=arms_of[block.arm].kind)
                measured[(block.arm, block.concurrency)].append(arm)
                progress.point(f"{block.arm} c={block.concurrency} round {block.round}", arm_summary(arm))

    def sample(arm: str, c: int) -> LaunchSample | str:  # a plain arm has no cycle: no timers read for it
        return spread.interleaved_sample(launch, measured[(interleave.BASELINE, c)], measured[(arm, c)], c,
                                         trace if arms_of[arm].speculative else None, profile.name, shims)

    return ({c: sample(interleave.EAGLE3, c) for c in sorted(blocks)},
            {(arm, c): sample(arm, c) for c, arms in (extra or {}).items() for arm in arms if measured[(arm, c)]})


BENCH_REPORT, BENCH_REPORT_FAILED = "bench_report.json", "bench_report.failed.json"


def save_complete_report(report: BenchReport, bench_dir: Path) -> Path:
    """Save the benchmark's record as ``bench_report.json`` only if every arm that ran completed its sweep.

    Why: a hung scheduler (SIGSTOP'd, deadlocked) ends its point at the stall timeout and the arm as failed; the run
    went on to report success with no speedup, replaced the last good notebook 03 and overwrote the figures. Now
    the broken record goes to ``bench_report.failed.json`` and the notebook fails here, before any figure is drawn,
    so the runbook keeps the last good executed notebook and the figures stay those of the last good run.
    """
    broken: list[tuple[ArmResult, PointResult | None]] = [
        (arm, point) for arm in report.arms for point in arm.points if point.status == POINT_FAILED]
    broken += [(arm, None) for arm in report.arms if arm.status == ARM_FAILED and not arm.points]
    if not broken:
        return report.save(Path(bench_dir) / BENCH_REPORT)
    kept = report.save(Path(bench_dir) / BENCH_REPORT_FAILED)
    arm, point = broken[0]
    where = f"arm {arm.name} at concurrency {point.concurrency}" if point is not None else f"arm {arm.name}"
    why = (point.reason if point is not None else None) or (str(arm.reason) if arm.reason else "failed")
    more = f" (+{len(broken) - 1} more)" if len(broken) > 1 else ""
    raise BenchmarkIncomplete(f"the benchmark did not complete: {where}: {why}{more}; no speedup is reported and "
                              f"the last good figures and {BENCH_REPORT} are kept (this run's record: {kept})")


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
    ratios = check.round_ratios
    return {"concurrency": check.concurrency, "prompts per run": check.num_prompts, "rounds": check.rounds,
            "eagle3lab output tok/s (pooled)": round(check.ours_output_tok_per_s, 1),
            "bench_serving output tok/s (pooled)": round(check.theirs_output_tok_per_s, 1),
            "ratio (ours / bench_serving)": round(check.ratio, 3),
            "each round's ratio": f"{min(ratios):.3f}-{max(ratios):.3f}" if len(ratios) > 1 else f"{ratios[0]:.3f}"}


def run_break_even_or_none(profile: Profile, report: BenchReport | None) -> tuple[float | None, str]:
    """The cost model's break-even acceptance for this run (``report.run_model.run_break_even``): shown beside the measured
    one, or the acceptance rule's threshold where no control arm measured it; (None, why) when the run gives the
    model nothing to calibrate on."""

    if report is None:
        return None, "no benchmark report"
    try:
        return run_break_even(profile, report)
    except PerfModelError as exc:
        return None, str(exc)


def diagnose_run(profile: Profile, report: BenchReport | None, bench_dir: Path, logs_dir: Path,
                 offline_acceptance: dict[str, Any] | None = None,
                 cycle_components: Any = None, launch_spread: LaunchSpreadRecord | None = None
                 ) -> list[dict[str, Any]]:
    """Every cause of a missing EAGLE-3 speedup, checked on this run's own artifacts by the same rules engine
    ``doctor`` uses: one row per cause tag (yes / no / unknown), the acceptance judged against the break-even
    measured on the headline arm's own cycles (``cycle_components``, the cycle table), else by the control arm
    (the cost model's beside it), the prompts against the drafter's offline acceptance
    (``Drafters.offline_acceptance``)."""

    trace = read_if_present(InterfaceTraceSidecar, profile.name)

    def existing(path: Path) -> Path | None:
        return path if path.is_file() else None

    spec_log = existing(Path(logs_dir) / f"03_eagle3.{profile.name}.log") or \
        existing(Path(logs_dir) / f"03_chain_full_delegation_patch.{profile.name}.log")
    value, where = run_break_even_or_none(profile, report)
    modelled = Threshold(value, "modelled", where) if value is not None else None
    evidence = evidence_from_artifacts(
        bench_report=report, requests_dir=bench_dir if report else None, spec_log=spec_log,
        baseline_log=existing(Path(logs_dir) / f"03_baseline.{profile.name}.log"),
        layer_tables=[table.model_dump() for table in trace.layer_ids] if trace is not None else None,
        layer_profile="cpu" if profile.device == "cpu" else "gpu",
        break_even=modelled, modelled_break_even=modelled, offline_acceptance=offline_acceptance,
        device=profile.device,
        cycle_components=cycle_components.model_dump() if hasattr(cycle_components, "model_dump") else cycle_components,
        launch_spread=launch_spread.model_dump() if launch_spread is not None else None)
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


def eagle3_arm_plans(drafters: Drafters, experiment_concurrency: Sequence[int] = (1,),
                     control_concurrency: Sequence[int] | None = None,
                     served: ServedCapture | None = None) -> list[SpecArmPlan]:
    """The headline arm (trained drafter, the whole sweep) and, where the drafters exist, the control arm
    (untrained drafter) and the layer-mismatch arm (trained drafter, ids shifted one layer early), each at
    ``experiment_concurrency`` only, to keep the run short; an empty list leaves the experiments out. The control
    arm runs at ``control_concurrency`` too (more than one batch size: how its cycle grows per running request,
    for the cost model's CPU entry). With ``served`` (``arm_capture.served_capture``), the trained and shifted
    arms' purposes say what each path feeds the drafter, from the release's trace."""
    levels = tuple(experiment_concurrency)
    control_levels = tuple(sorted(set(levels) | set(control_concurrency or ()))) if levels else levels
    if not levels:
        drafters = Drafters(drafters.trained, drafters.trained_layer_ids)
    plans = [SpecArmPlan("eagle3", ARM_KIND_EAGLE3, drafters.trained, drafters.trained_layer_ids, None,
                         _fed("EAGLE-3 with the trained drafter, served the aux layer ids it was trained on",
                              served, drafters.trained_layer_ids, drafters.trained_layer_ids))]
    if drafters.control is not None:
        plans.append(SpecArmPlan("eagle3-untrained", ARM_KIND_EAGLE3_CONTROL, drafters.control,
                                 drafters.control_layer_ids, control_levels,
                                 "control: an untrained drafter (random weights), so nearly every draft is rejected"))
    if drafters.shifted is not None:
        plans.append(SpecArmPlan("eagle3-shifted", ARM_KIND_EAGLE3_SHIFTED, drafters.shifted,
                                 drafters.shifted_layer_ids, levels,
                                 _fed("the trained drafter with its aux layer ids moved one layer early", served,
                                      drafters.trained_layer_ids, drafters.shifted_layer_ids)))
    return plans


def layer_mismatch_plans(plans: Sequence[SpecArmPlan]) -> list[SpecArmPlan]:
    """The layer-mismatch arm's plan, where there is one: the variant the interleaved launch measures beside the
    headline pair."""
    return [plan for plan in plans if plan.kind == ARM_KIND_EAGLE3_SHIFTED]


def control_floor(profile: Profile, models: Models) -> Callable[[str], NoiseFloor] | None:
    """What notebook 01's control server measures after its ``/generate`` (``crashrepro.control_run``'s
    ``on_ready``): the noise floor on the profile's own workload, where the profile asks for one; None elsewhere."""
    if not wants_noise_floor(profile.dtype, profile.lossless_noise_floor):
        return None
    config = sweep_config(profile, models, profile.bench_prompt_kind)
    out_dir = repo_dir("artifacts") / f"01_noise_floor.{profile.name}"
    return lambda base_url: measure_noise_floor(base_url, config, out_dir, f"notebook 01's control, {profile.name}, "
                                                f"{today()}")


def recorded_noise_floor(profile: Profile, config: SweepConfig) -> NoiseFloor | None:
    """The floor notebook 01 measured, where the profile bounds its lossless check by one (None elsewhere); one
    line, before any server starts, when it is missing or was measured on other prompts."""
    if not wants_noise_floor(profile.dtype, profile.lossless_noise_floor):
        return None
    sidecar = read_if_present(CrashReproSidecar, profile.name)
    record = sidecar.noise_floor if sidecar is not None else None
    if record is None:
        raise ExpectationError(f"profile {profile.name} bounds the lossless check by a measured noise floor "
                               "(lossless_noise_floor) and notebook 01 recorded none; run notebook 01 first (its "
                               "control server measures it)", problem="not_measured")
    floor = NoiseFloor.from_dict(record.model_dump())
    if floor.workload != floor_workload(config):
        raise ExpectationError(f"notebook 01's noise floor was measured on other prompts ({floor.workload}) than "
                               f"this run sends ({floor_workload(config)}); rerun notebook 01 with the same profile",
                               expected=floor_workload(config), found=floor.workload, problem="not_measured")
    return floor


def lossless_check(arms: Sequence[ArmResult], out_dir: Path, profile: Profile | None = None,
                   required_concurrency: int = REQUIRED_CONCURRENCY,
                   noise_floor: NoiseFloor | None = None) -> LosslessReport:
    """Every measured speculative arm's outputs against the baseline's, prompt by prompt (see ``lossless``):
    exact equality where ``profile`` runs fp32; otherwise agreement against the measured ``noise_floor``'s bound
    (``lossless_noise_floor``) or its ``lossless_min_agreement`` (no profile: exact)."""
    mode, threshold = lossless_policy(profile.dtype, profile.lossless_min_agreement, noise_floor,
                                      profile.lossless_noise_floor) if profile else ("exact", None)
    baseline = next((a for a in arms if a.kind == ARM_KIND_BASELINE and a.measured_points()), None)
    if baseline is None:
        raise BenchError("the lossless check needs a measured baseline arm")

    def records(arm: ArmResult) -> list:
        if not arm.requests_file:
            raise BenchError(f"arm '{arm.name}' has no requests file")
        return load_requests(Path(out_dir) / arm.requests_file)

    candidates = [(a.name, records(a)) for a in arms if a.speculative and a.measured_points()]
    return lossless_report((baseline.name, records(baseline)), candidates, required_concurrency, mode=mode,
                           min_agreement=threshold, noise_floor=noise_floor if mode == NOISE_FLOOR else None)


class PartialSidecar:
    """Notebook 03's sidecar, rewritten (atomically) each time an arm finishes, with ``complete`` false.

    A benchmark on 8 GPUs runs for hours; a failure after it (a lossless verdict, a figure, the cost model) must
    not lose the arms already measured. The last cell writes the complete sidecar over it.
    """

    def __init__(self, base: PatchBenchSidecar) -> None:
        self.sidecar = base.model_copy(update={"complete": False})
        self.arms: list[ArmResult] = []

    def add_arm(self, arm: ArmResult, crosscheck: CrossCheck | None = None) -> ArmResult:
        """Record a finished arm (and the cross-check run beside it) and rewrite the sidecar; returns ``arm``."""
        self.arms.append(arm)
        update: dict[str, Any] = {"arms": point_rows(self.arms)}
        if crosscheck is not None:
            update["cross_check"] = crosscheck.to_dict()
        return self._write(update, arm)

    def update(self, **fields: Any) -> None:
        """Any other finished part (for example ``lossless``), so a later failure keeps it."""
        self._write(fields, None)

    def _write(self, update: dict[str, Any], arm: ArmResult | None) -> Any:
        self.sidecar = type(self.sidecar).model_validate({**self.sidecar.model_dump(), **update})
        write_sidecar(self.sidecar)
        return arm


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


def start_cycle_trace(profile: Profile, out_dir: Path, enabled: bool) -> Path | None:
    """On the CPU harness, have every server launched from here on record its decode steps and EAGLE-3 cycles by
    component (``bench.cycle``); None elsewhere (the timers are installed by the harness)."""
    if not (enabled and profile.cpu_harness):
        return None
    return cycle.enable_trace(out_dir)


def cycle_components(profile: Profile, trace: Path | None, baseline: ArmResult, eagle3: ArmResult,
                     shims: Sequence[str], experiments: Sequence[ArmResult] = ()) -> CycleComponentsRecord | None:
    """Stop tracing, then the component table of the headline EAGLE-3 cycle against the baseline's plain step at
    batch size 1, with each point's window split into decode, prefill and the rest (``bench.server_time``; the
    experiment arms' points too); None without a trace or without a measured EAGLE-3 arm.

    The cost model's CPU engine entry (``artifacts/cycle_components.<profile>.json``) is written from the control
    arm's cycles where it ran (the same cycle code, an untrained drafter), so that nothing the model predicts the
    headline arm with comes from the headline arm; from the headline arm's own table otherwise (the table names
    its arm, and the report says which)."""
    cycle.disable_trace()
    if trace is None or not eagle3.measured_points() or not baseline.measured_points():
        return None
    records = cycle.read_records(trace)
    table = cycle.table_from_arms(trace, baseline, eagle3, profile.name, batch_size=1, shims=shims,
                                  others=experiments, records=records)
    cycle.save(_model_table(trace, records, profile, baseline, experiments, shims) or table)
    return table


def _model_table(trace: Path, records: Sequence[Mapping[str, Any]], profile: Profile, baseline: ArmResult,
                 experiments: Sequence[ArmResult], shims: Sequence[str]) -> CycleComponentsRecord | None:
    """The control arm's component table at batch size 1, or None where no control arm has timed cycles."""
    for arm in experiments:
        if arm.kind == ARM_KIND_EAGLE3_CONTROL and arm.measured_points():
            with contextlib.suppress(BenchError):
                return cycle.table_from_arms(trace, baseline, arm, profile.name, batch_size=1, shims=shims,
                                             records=records)
    return None
