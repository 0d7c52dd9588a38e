"""How many times a profile's run reads its whole checkpoint: the server launches notebooks 01 and 03 plan, and
which weights each reads.

A launch that serves reads the checkpoint. A launch expected to die at start-up (notebook 01's crash, notebook
03's relaunches before the full patch) reads the profile's ``startup_checks_load_format``: with "dummy", sglang's
random weights. In sglang 0.5.9 the raise comes before any forward and after ``load_model`` has returned
(``ModelRunner.initialize`` on CPU, ``CudaGraphRunner.__init__`` before ``capture()`` on a GPU; the dummy loader
runs no forward), so random weights reach it as the checkpoint's do, and a 595 GB checkpoint is read only by the
servers that answer. Notebook 02 launches no server; its capture checks run tiny models in-process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from eagle3lab.fix.relaunch import DEFAULT_CHAIN
from eagle3lab.preflight.result import Check
from eagle3lab.runtime.checkpoints import Checkpoint
from eagle3lab.runtime import deployment
from eagle3lab.runtime.deployment import startup_check_load_format
from eagle3lab.runtime.profiles import Profile

NAME = "weight loads"
AUTO = "auto"  # sglang's default --load-format: the checkpoint's weights


@dataclass(frozen=True)
class PlannedLaunch:
    """One server launch of a run, as planned from the profile."""

    notebook: str
    launch: str
    speculative: bool
    startup_check: bool  # expected to die at start-up
    load_format: str  # "auto": the checkpoint's weights; "dummy": sglang's random weights

    @property
    def full_weights(self) -> bool:
        return self.load_format == AUTO


def _experiment_arms(profile: Profile) -> tuple[int, int]:
    """(EAGLE-3 experiment arms, of them the layer-mismatch variant) notebook 03 launches at most: the untrained
    and shifted drafters exist only on a tiny-model profile with topk 1
    (``notebook.patch_and_bench.arm_plans.resolve_drafters``); the shifted one may be left out there when the
    target is too shallow, so this is an upper bound."""
    return (2, 1) if profile.uses_tiny_model and profile.speculative_eagle_topk == 1 else (0, 0)


def planned_launches(profile: Profile, *, bench: bool = True) -> list[PlannedLaunch]:
    """Every server launch of notebooks 01 and 03 with their default parameters (``bench``: notebook 03's
    benchmark arms), in order, with the weights each reads."""
    startup = startup_check_load_format(profile) or AUTO
    launches = [PlannedLaunch("01", "EAGLE-3 crash", True, True, startup),
                PlannedLaunch("01", "control (no speculation)", False, False, AUTO)]
    last = len(DEFAULT_CHAIN) - 1
    launches += [PlannedLaunch("03", f"relaunch: {step.name}", True, i < last, startup if i < last else AUTO)
                 for i, step in enumerate(DEFAULT_CHAIN)]  # the last one serves the EAGLE-3 arm
    if not bench:
        return launches
    experiments, variants = _experiment_arms(profile)
    launches.append(PlannedLaunch("03", "baseline arm", False, False, AUTO))
    launches += [PlannedLaunch("03", f"experiment arm {i + 1}", True, False, AUTO) for i in range(experiments)]
    extra = (variants + int(profile.bench_interleave_overlap_control)) if profile.bench_interleave_rounds else 0
    for repeat in range(2, profile.bench_launch_repeats + 2):
        launches += [PlannedLaunch("03", f"launch {repeat}: baseline", False, False, AUTO),
                     PlannedLaunch("03", f"launch {repeat}: EAGLE-3", True, False, AUTO)]
        launches += [PlannedLaunch("03", f"launch {repeat}: extra server {i + 1}", True, False, AUTO)
                     for i in range(extra)]
    return launches


def full_weight_loads(profile: Profile, *, bench: bool = True) -> int:
    """How many planned launches read the whole checkpoint."""
    return sum(launch.full_weights for launch in planned_launches(profile, bench=bench))


def check_loads(profile: Profile, target: Checkpoint | None = None) -> Check:
    """One line: the run's launches, how many read the checkpoint (and how many bytes, when its size is known),
    and the start-up checks that run on dummy weights instead."""
    launches = planned_launches(profile)
    full = [launch for launch in launches if launch.full_weights]
    dummy = [launch.launch for launch in launches if not launch.full_weights]
    size = target.bytes if target is not None and target.bytes else None
    read = f" ({len(full) * size / 1e9:,.0f} GB)" if size else ""
    detail = (f"{len(full)} of {len(launches)} planned launches read the checkpoint{read}; "
              + (f"{len(dummy)} start-up checks run on dummy weights ({', '.join(dummy)})" if dummy else
                 f"the start-up checks read it too (startup_checks_load_format: {profile.startup_checks_load_format})"))
    timeout = deployment.ready_timeout_s(profile, deployment.Models(target.path, "")) if target and target.path \
        else profile.ready_timeout_s
    detail += f"; a launch that reads it may take {timeout:,.0f} s to be ready" + (
        f" (ready_timeout_s + the checkpoint at {profile.checkpoint_read_mb_s:g} MB/s)"
        if profile.checkpoint_read_mb_s is not None and size else "")
    data: dict[str, Any] = {"full_weight_loads": len(full), "launches": [asdict(launch) for launch in launches],
                            "checkpoint_bytes": size, "ready_timeout_s": timeout}
    return Check(NAME, "info", detail, data=data)
