"""Which EAGLE-3 arms notebook 03 measures: the drafters they serve, at which concurrencies, and why.

Why a module of its own: the plans are decided before any server starts (and tested without one); the arms
(``server_arms``) and the relaunched pairs (``relaunched_pairs``) only carry them out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench.sweep import ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, ARM_KIND_EAGLE3_SHIFTED
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.notebook.arm_capture import ServedCapture, fed as _fed
from eagle3lab.runtime import modelinfo
from eagle3lab.runtime.deployment import Models
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.tinymodel.drafter_training import (shifted_drafter, shifted_ids_valid,
                                                          trained_drafter_for_profile)


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
