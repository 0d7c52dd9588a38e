"""Notebook 03's benchmark arms on real servers: the sweep's workload, one arm per server, the chain's server.

Why here: the load generator (``bench.sweep``) and the relaunch chain (``fix.relaunch``) know nothing of a
profile; this module wires them to one, so that each arm is one call, refused in one line before a server starts
where the profile cannot serve it (no dataset, sampling with EAGLE-3 on CPU, too few prompts).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench.crosscheck import CrossCheck, cross_check
from eagle3lab.bench.sweep import ArmResult, not_runnable_arm, run_arm, save_arm
from eagle3lab.bench.workload import SweepConfig, check_prompt_supply, model_vocab_size, special_id_floor
from eagle3lab.errors import BenchError
from eagle3lab.fix.relaunch import StepResult, patched_server, serving_server, stop_serving
from eagle3lab.notebook.patch_and_bench.arm_plans import SpecArmPlan
from eagle3lab.runtime.cpu_harness.changes import harness_changes
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from eagle3lab.runtime.datasets import has_dataset, resolve_dataset
from eagle3lab.runtime.deployment import Models, ready_timeout_s, server_spec
from eagle3lab.runtime.profiles import Profile


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


def cross_check_row(check: CrossCheck) -> dict[str, Any]:
    ratios = check.round_ratios
    return {"concurrency": check.concurrency, "prompts per run": check.num_prompts, "rounds": check.rounds,
            "eagle3lab output tok/s (pooled)": round(check.ours_output_tok_per_s, 1),
            "bench_serving output tok/s (pooled)": round(check.theirs_output_tok_per_s, 1),
            "ratio (ours / bench_serving)": round(check.ratio, 3),
            "each round's ratio": f"{min(ratios):.3f}-{max(ratios):.3f}" if len(ratios) > 1 else f"{ratios[0]:.3f}"}
