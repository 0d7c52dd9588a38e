"""How many KV-cache tokens each arm of a launch gets, by sglang 0.5.9's own arithmetic, before anything loads.

sglang sizes the KV pool after the weights are in: ``profile_max_num_token`` takes the memory free after loading
minus ``(1 - mem_fraction_static)`` of the memory free before it, and divides by the bytes one token's KV takes
(``model_runner_kv_cache_mixin.py:116-149``); a pool of zero or less raises ``Not enough memory``
(``:415-419``). So the tokens one rank gets are ``free x fraction - weights per rank``, over the cell size.

Where the fraction comes from is sglang's too: left unset, ``_handle_gpu_memory_settings`` reserves memory for
activations, CUDA graphs and (with EAGLE) the drafter (``server_args.py:911-1066``), and for a multimodal model
``adjust_mem_fraction_for_vlm`` scales the result down for the vision tower (``:1068-1069``, ``:5483-5519``). Both
run here as sglang runs them, in the parser child (``sglang_args.parse_launches(sizing=True)``), with the memory of
the GPUs the launch gets; the cell size is sglang's ``get_cell_size_per_token`` on its own ``ModelConfig``; the
weights per rank are ``runtime.weights``.

The fraction that fits is the largest one that still leaves every arm the reserve sglang computed for it before the
vision-tower scaling (that scaling is for image inputs, and every request here is text): the smaller of the arms'
unscaled fractions. Both arms launched with it get the same pool, since the drafter loads after the target's pool
is sized. The smallest pool worth launching is the profile's running requests at their longest:
``max_running_requests x (bench_input_len + bench_output_len + speculative_num_draft_tokens)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.sglang_args import ParsedLaunch
from eagle3lab.runtime.weights import RankWeights

ARMS = ("baseline", "EAGLE-3")
SetBy = Literal["profile", "sglang"]


@dataclass
class ArmMemory:
    """One launch's KV pool on one rank."""

    label: str
    fraction: float  # the mem_fraction_static this launch runs with
    set_by: SetBy
    sglang_fraction: float | None  # what sglang chooses when the profile leaves it unset (after the VLM scaling)
    reserve_fraction: float | None  # sglang's fraction before the VLM scaling: what its own reserve leaves
    kv_tokens: int  # what profile_max_num_token would give (negative: the weights alone overflow the fraction)
    pool_tokens: int  # the pool the arm gets: kv_tokens, capped by max_total_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MemoryBudget:
    """Every arm's pool, the smallest pool worth launching, and the fraction that fits."""

    gpu_memory_mib: float  # what sglang's sizing is given (its nvidia-smi reading: the smallest GPU's total)
    free_bytes: int  # memory free on the smallest GPU before launch: profile_max_num_token's total_gpu_memory
    weights: RankWeights
    kv_cell_bytes: int
    min_tokens: int
    max_total_tokens: int | None
    arms: list[ArmMemory]
    fitting_fraction: float | None  # the largest fraction that leaves every arm sglang's own reserve
    fitting_tokens: int | None  # each arm's pool at it
    notes: list[str] = field(default_factory=list)

    def arm(self, label: str) -> ArmMemory:
        return next(a for a in self.arms if a.label == label)

    @property
    def short(self) -> list[ArmMemory]:
        """Arms whose pool is below the smallest worth launching."""
        return [a for a in self.arms if a.pool_tokens < self.min_tokens]

    @property
    def same_pool(self) -> bool:
        return len({a.pool_tokens for a in self.arms}) == 1

    @property
    def ok(self) -> bool:
        return not self.short and self.same_pool

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "same_pool": self.same_pool}


def kv_tokens(free_bytes: int, fraction: float, weights_bytes: int, cell_bytes: int) -> int:
    """sglang's ``profile_max_num_token`` for one rank: ``(free x fraction - weights) // cell``."""
    return math.floor((free_bytes * fraction - weights_bytes) / cell_bytes)


def min_tokens(profile: Profile, max_running_requests: int) -> int:
    """The pool the sweep's running requests fill at their longest (module docstring)."""
    return max_running_requests * (profile.bench_input_len + profile.bench_output_len
                                   + profile.speculative_num_draft_tokens)


def fitting_fraction(reserve_fractions: Sequence[float | None]) -> float | None:
    """The smallest of the arms' unscaled fractions (sglang rounds them to 3 decimals already)."""
    known = [f for f in reserve_fractions if f is not None]
    return min(known) if known else None


Parse = Callable[[Mapping[str, Sequence[str]]], Mapping[str, ParsedLaunch]]


def memory_budget(profile: Profile, weights: RankWeights, gpu_memory_mib: float, free_bytes: int,
                  launched: Mapping[str, ParsedLaunch], defaults: Mapping[str, ParsedLaunch]) -> MemoryBudget:
    """Each arm's pool from sglang's parse of its launch (``launched``: baseline and EAGLE-3 as the profile
    launches them) and of the same launch without ``--mem-fraction-static`` (``defaults``: sglang's own choice;
    the same parse when the profile leaves it unset), both with ``sizing=True``."""
    cells = {int(c) for p in launched.values() if (c := p.sizing.get("kv_cell_bytes")) is not None}
    if len(cells) != 1:
        errors = [p.sizing.get("kv_cell_error") or p.error for p in launched.values()]
        raise ValueError(f"sglang did not size the KV cache of these launches: {errors}")
    cell = cells.pop()
    arms = []
    caps = [p.chosen.get("max_running_requests") for p in launched.values()]
    running = min((c for c in caps if isinstance(c, int)), default=None) or profile.max_running_requests or 1
    for label in ARMS:
        parsed, default = launched[label], defaults[label]
        fraction = float(parsed.chosen["mem_fraction_static"])
        tokens = kv_tokens(free_bytes, fraction, weights.per_rank_bytes, cell)
        pool = min(tokens, profile.max_total_tokens) if profile.max_total_tokens else tokens
        arms.append(ArmMemory(label, fraction, "profile" if profile.mem_fraction_static is not None else "sglang",
                              default.chosen.get("mem_fraction_static"),
                              default.sizing.get("fraction_before_vlm", default.chosen.get("mem_fraction_static")),
                              tokens, pool))
    fit = fitting_fraction([a.reserve_fraction for a in arms])
    fit_tokens = kv_tokens(free_bytes, fit, weights.per_rank_bytes, cell) if fit is not None else None
    if fit_tokens is not None and profile.max_total_tokens:
        fit_tokens = min(fit_tokens, profile.max_total_tokens)
    notes = [f"weights per rank from the {weights.source}"]
    if weights.unknown:
        notes.append(f"{len(weights.unknown)} tensors of unknown shape left out (first: {weights.unknown[0]})")
    if weights.index_total_bytes is not None and weights.index_total_bytes != weights.total_bytes:
        notes.append(f"the tensors add up to {weights.total_bytes} bytes, the index says {weights.index_total_bytes}")
    return MemoryBudget(gpu_memory_mib, free_bytes, weights, cell, min_tokens(profile, running),
                        profile.max_total_tokens, arms, fit, fit_tokens, notes)


def launches_without_fraction(profile: Profile) -> Profile:
    """The profile with ``mem_fraction_static`` left to sglang (to read sglang's own choice beside the profile's)."""
    return profile.model_copy(update={"mem_fraction_static": None})


def describe(budget: MemoryBudget) -> dict[str, str]:
    """One line per arm, and one for the pools, as preflight shows them."""
    gib = 2**30
    lines = {}
    for arm in budget.arms:
        rest = budget.free_bytes * arm.fraction - budget.weights.per_rank_bytes
        origin = "the profile's" if arm.set_by == "profile" else "sglang's"
        lines[arm.label] = (f"{arm.pool_tokens:,} KV tokens per rank at {origin} mem_fraction_static {arm.fraction:.3f}"
                            f" ({budget.free_bytes / gib:.1f} GiB free x {arm.fraction:.3f} - weights "
                            f"{budget.weights.per_rank_bytes / gib:.2f} GiB = {rest / gib:.2f} GiB, "
                            f"{budget.kv_cell_bytes:,} bytes a token); the sweep needs {budget.min_tokens:,}")
    pools = sorted({a.pool_tokens for a in budget.arms})
    lines["pools"] = ("both arms get the same pool" if len(pools) == 1 else
                      f"the arms get different pools ({', '.join(f'{a.label} {a.pool_tokens:,}' for a in budget.arms)})"
                      ": the comparison would be biased")
    return lines
