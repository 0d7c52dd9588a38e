"""Notebook 03's benchmark arms and what is read off them; ``NoBenchmark`` is the same with nothing measured.

Why: the notebook's ``bench`` parameter turns the benchmark off. Guarding every cell that reads it (``if bench``)
made notebook 03 long; instead the notebook holds one of these two objects and calls the same methods on either:
the disabled one answers each with what the cells showed when the benchmark was off (nothing measured, empty
tables, no figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench import acceptance, host
from eagle3lab.bench.acceptance import LayerMismatch
from eagle3lab.bench.crosscheck import CrossCheck
from eagle3lab.bench.lengths import workload_record
from eagle3lab.bench.lossless import LosslessReport, NoiseFloor
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ArmResult, BenchReport, point_rows
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.fix import relaunch
from eagle3lab.fix.relaunch import StepResult
from eagle3lab.notebook.patch_and_bench import (bench_records, cycle_timers, lossless_check, relaunched_pairs,
                                                server_arms)
from eagle3lab.notebook.patch_and_bench.arm_plans import Drafters, SpecArmPlan, layer_mismatch_plans
from eagle3lab.notebook.patch_and_bench.bench_records import PartialSidecar
from eagle3lab.notebook.patch_and_bench.relaunched_pairs import Relaunched
from eagle3lab.report.plots.bench import draw_bench_figures
from eagle3lab.runtime import gpuinfo
from eagle3lab.runtime.deployment import Models
from eagle3lab.runtime.profiles import Profile
from eagle3lab.sidecars import CycleComponentsRecord


def run_gpus(profile: Profile) -> list[str] | None:
    """The GPUs a cuda run's servers had, by name as torch gives them (asked in a child process, so the kernel holds
    no CUDA context); None on a cpu profile. Empty where torch saw none (a rehearsal on CPU): not modelled then."""
    if profile.device != "cuda":
        return None
    return [gpu.name for gpu in gpuinfo.inventory().gpus]


@dataclass(frozen=True)
class ArmSetting:
    """What every arm of one notebook 03 run is launched with."""

    profile: Profile
    models: Models
    config: SweepConfig
    bench_dir: Path
    logs_dir: Path
    patch: str
    shims: tuple[str, ...]
    control_shims: tuple[str, ...]
    plans: list[SpecArmPlan]
    drafters: Drafters
    noise_floor: NoiseFloor | None = None  # notebook 01's, where the profile bounds the lossless check by it


class NoBenchmark:
    """The benchmark turned off (``bench=False``): nothing measured, every reading empty."""

    enabled = False
    report: BenchReport | None = None
    crosscheck: CrossCheck | None = None

    def measure(self, chain: Sequence[StepResult], partial: PartialSidecar, cross_check: bool) -> None:
        """Nothing to measure."""

    def eagle3_measured(self) -> bool:
        return False

    def relaunched(self, cycle_trace: Path | None, interleave_layer_mismatch: bool) -> Relaunched:
        return Relaunched(None, [])

    def cycle_components(self, cycle_trace: Path | None) -> CycleComponentsRecord | None:
        return None

    def lossless(self) -> LosslessReport | None:
        return None

    def acceptance_records(self) -> list[dict[str, Any]]:
        return []

    def expect_acceptance_consistent(self) -> None:
        """Nothing measured, nothing to check."""

    def offline_vs_served(self) -> list[dict[str, Any]]:
        return []

    def layer_mismatch(self) -> LayerMismatch | None:
        return None

    def speedup(self) -> list[dict[str, Any]]:
        return []

    def figures(self) -> dict[str, Path]:
        return {}

    def report_path(self) -> str | None:
        return None

    def arm_rows(self) -> list[dict[str, Any]]:
        return []


class Benchmark(NoBenchmark):
    """The benchmark arms of one run: the headline EAGLE-3 arm on the relaunch chain's server, the baseline (with
    sglang's ``bench_serving`` cross-check), the experiment arms, and what each later cell reads off them."""

    enabled = True

    def __init__(self, setting: ArmSetting) -> None:
        self.setting = setting
        self.eagle3: ArmResult | None = None
        self.baseline: ArmResult | None = None
        self.experiments: list[ArmResult] = []

    def _report(self) -> BenchReport:
        if self.report is None:
            raise RuntimeError("notebook bug: run the benchmark cell before the cells that read it")
        return self.report

    def measure(self, chain: Sequence[StepResult], partial: PartialSidecar, cross_check: bool) -> None:
        """Every arm, each written to the partial sidecar as it finishes; then the complete record, which fails
        the notebook if an arm stalled or died (``save_complete_report``)."""
        s = self.setting
        eagle3 = partial.add_arm(server_arms.measure_chain_server(chain, s.plans[0], s.config, s.bench_dir,
                                                                  relaunch.not_runnable_reason(chain)))
        baseline, crosscheck = server_arms.run_server_arm(
            "baseline", s.profile, s.models, s.config, s.bench_dir, s.logs_dir, kind=ARM_KIND_BASELINE,
            speculative=False, shims=s.control_shims, with_cross_check=cross_check)
        partial.add_arm(baseline, crosscheck)
        experiments = [partial.add_arm(server_arms.run_experiment_arm(plan, s.profile, s.models, s.config,
                                                                      s.bench_dir, s.logs_dir, s.patch, s.shims))
                       for plan in s.plans[1:]] if eagle3.measured_points() else []
        self.eagle3, self.baseline, self.experiments, self.crosscheck = eagle3, baseline, experiments, crosscheck
        arms = [baseline, eagle3, *experiments]
        self.report = BenchReport.create(s.profile.name, arms, crosscheck.to_dict() if crosscheck else None,
                                         copy_bandwidth=host.copy_bandwidth(),  # the cost model's CPU calibration
                                         workload=workload_record(s.config, arms),
                                         gpus=run_gpus(s.profile))  # the GPU the cost model takes the run for
        bench_records.save_complete_report(self.report, s.bench_dir)

    def eagle3_measured(self) -> bool:
        return self.eagle3 is not None and bool(self.eagle3.measured_points())

    def relaunched(self, cycle_trace: Path | None, interleave_layer_mismatch: bool) -> Relaunched:
        """The headline pair relaunched (``relaunched_pairs.relaunched_spread``), where the EAGLE-3 arm measured."""
        s = self.setting
        if self.baseline is None or self.eagle3 is None or not self.eagle3_measured():
            return Relaunched(None, [])
        return relaunched_pairs.relaunched_spread(
            s.plans[0], s.profile, s.models, s.config, s.bench_dir, s.logs_dir, s.patch, s.shims, s.control_shims,
            self.baseline, self.eagle3, cycle_trace,
            variants=layer_mismatch_plans(s.plans) if interleave_layer_mismatch else ())

    def cycle_components(self, cycle_trace: Path | None) -> CycleComponentsRecord | None:
        if self.baseline is None or self.eagle3 is None:
            raise RuntimeError("notebook bug: run the benchmark cell before the cycle table")
        return cycle_timers.cycle_components(self.setting.profile, cycle_trace, self.baseline, self.eagle3,
                                             self.setting.shims, self.experiments)

    def lossless(self) -> LosslessReport | None:
        if not self.eagle3_measured():
            return None
        return lossless_check.lossless_check(self._report().arms, self.setting.bench_dir, self.setting.profile,
                                             noise_floor=self.setting.noise_floor)

    def acceptance_records(self) -> list[dict[str, Any]]:
        return acceptance.acceptance_records(self._report().arms)

    def expect_acceptance_consistent(self) -> None:
        if self.acceptance_records():
            acceptance.expect_acceptance_consistent(self._report().arms)

    def offline_vs_served(self) -> list[dict[str, Any]]:
        return acceptance.offline_vs_served(self._report().arms, self.setting.drafters.offline_acceptance)

    def layer_mismatch(self) -> LayerMismatch | None:
        return acceptance.layer_mismatch(self._report().arms, self.setting.profile.model_num_layers,
                                         {plan.name: plan.aux_layer_ids for plan in self.setting.plans})

    def speedup(self) -> list[dict[str, Any]]:
        return acceptance.speedup_records(self._report().arms)

    def figures(self) -> dict[str, Path]:
        return draw_bench_figures(self._report())

    def report_path(self) -> str | None:
        return str(self.setting.bench_dir / "bench_report.json")

    def arm_rows(self) -> list[dict[str, Any]]:
        return point_rows(self._report().arms)
