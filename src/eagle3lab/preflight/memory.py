"""GPU memory before a launch: each arm's KV cache by sglang's own arithmetic, and whether both arms get one pool.

``runtime.kv_budget`` holds the arithmetic (sglang's sizing functions in the parser child, the weights one rank
holds, sglang's ``profile_max_num_token``); here it becomes three rows: the KV pool of each arm (fail below the
smallest pool the sweep needs, naming the ``mem_fraction_static`` that fits) and "GPU memory" (fail when the arms'
pools differ: the comparison would be biased).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from eagle3lab.errors import Eagle3LabError
from eagle3lab.runtime import deployment, gpuinfo
from eagle3lab.runtime.checkpoints import INDEX_FILE
from eagle3lab.runtime.kv_budget import ARMS, MemoryBudget, describe, launches_without_fraction, memory_budget
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.sglang_args import ParsedLaunch, parse_launches
from eagle3lab.runtime.weights import checkpoint_rank_weights
from eagle3lab.preflight.result import Check

MEMORY = "GPU memory"
KV = "KV cache"
Parse = Callable[..., Mapping[str, ParsedLaunch]]


def _skipped(detail: str) -> list[Check]:
    return [Check(f"{KV} ({label})", "skipped", detail) for label in ARMS] + [Check(MEMORY, "skipped", detail)]


def smallest_gpu(inv: gpuinfo.GpuInventory, tp_size: int) -> tuple[float, int]:
    """(total MiB sglang's sizing is given, bytes free before launch) of the smallest of the GPUs a launch takes:
    sglang sizes every rank by the smallest (``get_nvgpu_memory_capacity`` takes the minimum), and a GPU already
    holding memory leaves that much less for ``profile_max_num_token``."""
    used = inv.used_mib or [0] * inv.count
    gpus = inv.gpus[:tp_size]
    total = min(g.memory_bytes for g in gpus)
    free = min(g.memory_bytes - used[g.index] * 2**20 if g.index < len(used) else g.memory_bytes for g in gpus)
    return total / 2**20, int(free)


def check_memory(profile: Profile, inv: gpuinfo.GpuInventory | None, target_dir: str | None,
                 models: deployment.Models, parse: Parse = parse_launches) -> list[Check]:
    """The KV rows and the "GPU memory" row (module docstring); skipped without the GPUs or the target's config."""
    if inv is None or inv.count < profile.tp_size or not inv.gpus:
        return _skipped("needs the GPUs")
    root = Path(target_dir) if target_dir else None
    if root is None or not (root / "config.json").is_file() or not (
            (root / INDEX_FILE).is_file() or list(root.glob("*.safetensors"))):
        return _skipped(f"needs the target's config.json and {INDEX_FILE} on disk "
                        f"({deployment.fetch_command(profile)} --configs-only)")
    total_mib, free = smallest_gpu(inv, profile.tp_size)
    try:
        weights = checkpoint_rank_weights(root, profile.tp_size)
        budget = _budget(profile, models, weights, total_mib, free, parse)
    except (Eagle3LabError, ValueError, KeyError) as exc:
        return [Check(f"{KV} ({label})", "fail", f"could not size the KV cache: {exc}", "see the detail")
                for label in ARMS] + [Check(MEMORY, "skipped", "the KV cache could not be sized")]
    return memory_rows(profile, budget)


def _budget(profile: Profile, models: deployment.Models, weights: Any, total_mib: float, free: int,
            parse: Parse) -> MemoryBudget:
    """One parse of the launches as the profile makes them and, where it sets the fraction, as sglang would."""
    profiles = {"profile": profile}
    if profile.mem_fraction_static is not None:
        profiles["default"] = launches_without_fraction(profile)
    argvs: dict[str, Sequence[str]] = {}
    env: Mapping[str, str] = {}
    for kind, prof in profiles.items():
        for label in ARMS:
            spec = deployment.server_spec(prof, models, speculative=label == "EAGLE-3")
            argvs[f"{kind} {label}"], env = spec.argv(), spec.env
    parsed = parse(argvs, env, check=False, sizing=True, gpu_memory_mib=total_mib)
    failed = [p for p in parsed.values() if not p.validated]
    if failed:
        raise ValueError(f"sglang refused the launch: {failed[0].error}")
    launched = {label: parsed[f"profile {label}"] for label in ARMS}
    defaults = {label: parsed[f"default {label}"] for label in ARMS} if "default" in profiles else launched
    return memory_budget(profile, weights, total_mib, free, launched, defaults)


def memory_rows(profile: Profile, budget: MemoryBudget) -> list[Check]:
    """One row per arm and the pools row, with the fraction that fits named where a pool falls short."""
    lines = describe(budget)
    data = budget.to_dict()
    fit = budget.fitting_fraction
    fits = fit is not None and budget.fitting_tokens is not None and budget.fitting_tokens >= budget.min_tokens
    fix = (f"launch both arms with mem_fraction_static {fit:.3f} ({budget.fitting_tokens:,} KV tokens each): "
           f"--set mem_fraction_static={fit:.3f}" if fits and fit is not None else
           f"no fraction fits: even at {fit} the pool is {budget.fitting_tokens} tokens; raise tp_size, use larger "
           "GPUs, or lower max_running_requests or the bench lengths")
    rows = []
    for arm in budget.arms:
        short = arm.pool_tokens < budget.min_tokens
        rows.append(Check(f"{KV} ({arm.label})", "fail" if short else "ok",
                          ("too small: " if short else "") + lines[arm.label], fix if short else None,
                          {"arm": arm.to_dict(), "min_tokens": budget.min_tokens}))
    notes = f" ({'; '.join(budget.notes)})" if budget.notes else ""
    if budget.same_pool:
        rows.append(Check(MEMORY, "ok", f"{lines['pools']}: {budget.arms[0].pool_tokens:,} KV tokens per rank; "
                                        f"{budget.weights.per_rank_bytes / 2**30:.2f} GiB of weights per rank"
                                        + notes, data=data))
    else:
        rows.append(Check(MEMORY, "fail", lines["pools"] + notes,
                          f"set one mem_fraction_static for both arms (--set mem_fraction_static={fit:.3f})"
                          if fit is not None else "set mem_fraction_static or max_total_tokens in the profile", data))
    return rows
