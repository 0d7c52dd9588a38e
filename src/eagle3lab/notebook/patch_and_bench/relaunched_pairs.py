"""The headline pair relaunched: the launch-to-launch spread, and the interleaved launches that measure both arms
(and the variants) in alternating blocks of the same rounds.

Why: one launch pair cannot tell a speedup from a slow spell of a shared machine; relaunching the pair, in
mirrored order or interleaved, measures how much one launch differs from the next.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from eagle3lab.bench import interleave, launch_spread as spread
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ArmResult, arm_summary, run_arm
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.fix.relaunch import patched_server
from eagle3lab.notebook.patch_and_bench.arm_plans import SpecArmPlan
from eagle3lab.notebook.patch_and_bench.server_arms import check_greedy, run_server_arm
from eagle3lab.progress import PointProgress
from eagle3lab.runtime.deployment import Models, ready_timeout_s, server_spec
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import ServerSpec, free_port
from eagle3lab.sidecars import LaunchSample, LaunchSpreadRecord, VariantCost


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
    same baseline blocks).

    Each free port is taken just before its own launch, not all up front: a server already up picks free ports of
    its own (sglang's scheduler listens on one), and one of them took the port chosen for a later launch, which then
    failed the run with "port in use" (seen in the full-report test)."""
    plan_blocks = interleave.schedule(blocks, extra=extra)
    check_greedy(profile, plan_blocks[0].config)
    specs: dict[str, ServerSpec] = {}
    measured: dict[tuple[str, int], list[ArmResult]] = {(name, c): [] for name in arms_of for c in blocks}
    with contextlib.ExitStack() as servers:
        for name, pair_arm in arms_of.items():
            spec = server_spec(profile, pair_arm.models, speculative=pair_arm.speculative, shims=pair_arm.shims,
                               port=None if name == interleave.BASELINE else free_port(profile.host))
            spec = specs[name] = dataclasses.replace(spec, extra_args=spec.extra_args + pair_arm.extra_args)
            log = Path(logs_dir) / f"03_{name}-launch{launch}.{profile.name}.log"
            patches = [pair_arm.patch] if pair_arm.patch else []
            servers.enter_context(patched_server(spec, log, ready_timeout_s(profile, pair_arm.models), patches))
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
