"""Are the speculative arms' outputs the baseline's? The check, and the noise floor that bounds it off fp32.

Why: notebook 01's control server measures the floor (``control_floor``) and notebook 03 reads it back
(``recorded_noise_floor``), refusing one measured on other prompts before any server starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from eagle3lab.bench.floor import floor_workload, measure_noise_floor
from eagle3lab.bench.lossless import (NOISE_FLOOR, REQUIRED_CONCURRENCY, LosslessReport, NoiseFloor, lossless_policy,
                                      lossless_report, wants_noise_floor)
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ArmResult, load_requests
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError, ExpectationError
from eagle3lab.notebook.patch_and_bench.server_arms import sweep_config
from eagle3lab.paths import repo_dir
from eagle3lab.runtime.deployment import Models
from eagle3lab.runtime.profiles import Profile
from eagle3lab.sidecars import CrashReproSidecar, read_if_present, today


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
