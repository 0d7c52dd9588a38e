"""The cost model's figures for a user's deployment (hardware preset, GPUs, target config, launch flags), handed
to the rules as ``ModelFigures``: modelled, and labelled so."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import drafter_from_config, eagle3_drafter, model_from_config
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.costmodel.cycle import Deployment, break_even_accept_length, max_accept_length, plain_step, spec_cycle
from eagle3lab.costmodel.freeze import current_engine, load_constants
from eagle3lab.bench.diagnostics.evidence import ModelFigures
from eagle3lab.costmodel.presets import hardware_preset, speculative_flags


def _sum_parts(*weighted: tuple[Mapping[str, float], float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for parts, weight in weighted:
        for key, value in parts.items():
            out[key] = out.get(key, 0.0) + weight * value
    return out


def deployment(hardware: Hardware | str, gpus: int, target_config: Mapping[str, Any],
               drafter_config: Optional[Mapping[str, Any]], context: float) -> Deployment:
    """The user's deployment as the cost model sees it: the target from its config, the drafter from its config
    where it is an EAGLE-3 one (else the layout SpecForge builds for the target), sglang's validated engine."""
    hw = hardware if isinstance(hardware, Hardware) else hardware_preset(hardware)
    target = model_from_config(dict(target_config), "target", "--target-config")
    drafter = eagle3_drafter(target)
    if drafter_config and "LlamaForCausalLMEagle3" in (drafter_config.get("architectures") or []):
        try:
            drafter = drafter_from_config(drafter_config, "--drafter-config")
        except PerfModelError:
            pass  # an incomplete drafter config: the EAGLE-3 layout built for the target stands in
    # the engine predict uses: sglang's constants plus the frozen orchestration (costmodel/data/constants.yaml)
    return Deployment(target, drafter, hw, gpus, current_engine("sglang-0.5"), context)


def model_figures(hardware: Hardware | str, gpus: int, target_config: Mapping[str, Any],
                  drafter_config: Optional[Mapping[str, Any]], steps: int, topk: int, draft_tokens: int, batch: int,
                  context: float, context_where: str) -> tuple[Optional[ModelFigures], str]:
    """(figures, note): the cycle and the plain step at ``batch`` by component; None with the reason when the
    model cannot be built from what was given."""
    try:
        dep = deployment(hardware, gpus, target_config, drafter_config, context)
        hw, frozen = dep.hardware, load_constants().freeze
        spec = speculative_flags(steps, topk, draft_tokens)
        cycle = spec_cycle(dep, spec, batch)
        plain = plain_step(dep, batch)
        chain = speculative_flags(steps, 1, steps + 1)
        cycle_parts = _sum_parts((cycle.draft.breakdown(), cycle.draft_passes), (cycle.verify.breakdown(), 1),
                                 (cycle.extend.breakdown(), 1),
                                 ({"bookkeeping": cycle.bookkeeping_s, "cpu": cycle.cpu_s,
                                   "calibrated_extra": cycle.extra_s}, 1))
        figures = ModelFigures(
            batch=batch, hardware=f"{gpus}x {hw.name}", cycle_parts=cycle_parts,
            plain_parts={**plain.target.breakdown(), "cpu": plain.cpu_s}, verify_parts=cycle.verify.breakdown(),
            break_even=break_even_accept_length(dep, spec, batch),
            chain_break_even=break_even_accept_length(dep, chain, batch) if draft_tokens > steps + 1 else None,
            verify_distinct_experts=cycle.verify.distinct_experts or None,
            plain_distinct_experts=plain.target.distinct_experts or None, max_accept=max_accept_length(spec),
            where=f"cost model, {gpus}x {hw.name}, batch {batch}, context {context:g} ({context_where}), "
                  f"sglang engine constants with the orchestration fitted on seen sources and frozen {frozen.date} "
                  f"({frozen.id})")
        return figures, figures.where
    except (PerfModelError, KeyError, TypeError, ValueError) as exc:
        return None, f"no cost model: {type(exc).__name__}: {exc}"
