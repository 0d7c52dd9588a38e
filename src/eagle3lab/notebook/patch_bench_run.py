"""Notebook 03 as one object, so that each cell is one call: ``start`` resolves the run, each method is a cell.

Why: the notebook held 30 names from 19 modules and assembled its sidecar twice; here the run keeps what each step
produced, the benchmark is a ``benchmark.Benchmark`` or, turned off, a ``benchmark.NoBenchmark`` (no guards), and
``sidecar`` builds the one record both the partial and the final write use. The steps themselves live where they
did (``patch_and_bench``, ``fix.relaunch``, ``fix.capture_check``, ``bench.*``, ``report.*``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, MutableMapping

from eagle3lab import sidecars
from eagle3lab.bench import acceptance, cycle, launch_spread, lossless, server_time
from eagle3lab.bench.acceptance import LayerMismatch
from eagle3lab.bench.lossless import LosslessReport
from eagle3lab.costmodel import perfmodel
from eagle3lab.fix import capture_check, capture_trace, relaunch
from eagle3lab.fix.capture_result import CaptureResult
from eagle3lab.fix.relaunch import StepResult
from eagle3lab.notebook import arm_capture, show
from eagle3lab.notebook import params as nbparams
from eagle3lab.notebook.patch_and_bench import (arm_plans, bench_records, cycle_timers, diagnosis, lossless_check,
                                                patch_checks, server_arms)
from eagle3lab.notebook.benchmark import ArmSetting, Benchmark, NoBenchmark
from eagle3lab.notebook.model_validation import ValidationView
from eagle3lab.notebook.patch_and_bench.bench_records import PartialSidecar
from eagle3lab.notebook.patch_and_bench.relaunched_pairs import Relaunched
from eagle3lab.paths import published_path, repo_dir
from eagle3lab.report.figures import model_figures
from eagle3lab.report.incident_model import incident_report
from eagle3lab.report.plots import model as model_plots
from eagle3lab.report.plots.cycle import draw_cycle_figure, draw_server_time_figure
from eagle3lab.runtime import deployment, envinfo
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from eagle3lab.sidecars import (AgreementRecord, CaptureRecord, CycleComponentsRecord, HarnessChangeRecord, ModelsRecord,
                                PatchBenchSidecar, SamplingRecord, SpecArmRecord)
from eagle3lab.trace import silent_noop
from eagle3lab.trace.silent_noop import DispatchGap
from eagle3lab.trace.sources import open_source

Shown = Any  # what a cell shows: a table (pandas DataFrame), or the line that says why there is none


class PatchBenchRun:
    """One run of notebook 03: its parameters, its arms' setting, and what each step has produced so far."""

    def __init__(self, params: nbparams.NotebookParameters) -> None:
        values = params.values
        self.params = params
        self.profile = P = params.profile
        self.patch: str = values["patch"]
        self.capture_enabled: bool = values["capture"]
        self.cross_check_enabled: bool = values["cross_check_with_bench_serving"]
        self.interleave_layer_mismatch: bool = values["interleave_layer_mismatch"]
        self.prompt_kind = server_arms.prompt_kind_for(P, values["prompt_kind"])
        self.logs_dir = repo_dir("artifacts") / "logs"
        self.bench_dir = repo_dir("artifacts") / f"03_bench.{P.name}"
        self.models = deployment.resolve_models(P)
        self.shims = tuple(SPEC_SHIMS) if P.cpu_harness else ()
        self.drafters = arm_plans.resolve_drafters(P, self.models)
        self.plans = arm_plans.eagle3_arm_plans(  # labels from the release's trace
            self.drafters, values["experiment_concurrency"], values["control_concurrency"],
            served=arm_capture.served_capture(P))
        self.eagle3_models = self.plans[0].models(self.models)  # the relaunch chain serves the headline drafter
        self.config = server_arms.sweep_config(P, self.models, self.prompt_kind)
        # notebook 01's noise floor, checked here so that a missing one stops the run before any server starts
        floor = lossless_check.recorded_noise_floor(P, self.config) if values["bench"] else None
        setting = ArmSetting(P, self.models, self.config, self.bench_dir, self.logs_dir, self.patch, self.shims,
                             tuple(CONTROL_SHIMS) if P.cpu_harness else (), self.plans, self.drafters, floor)
        self.bench: NoBenchmark = Benchmark(setting) if values["bench"] else NoBenchmark()
        self.trace: sidecars.InterfaceTraceSidecar | None = None
        self.delegated: list[str] = []
        self.captures: dict[str | None, CaptureResult] = {}
        self.agreement: list[Any] = []
        self.cycle_trace: Path | None = None
        self.chain: list[StepResult] = []
        self.story: list[str] = []
        self.harness: list[dict[str, Any]] = []
        self.partial: PartialSidecar | None = None
        self.relaunched = Relaunched(None, [])
        self.cycle_table: CycleComponentsRecord | None = None
        self.cycle_figure: Path | None = None
        self.server_time_figure: Path | None = None
        self.lossless: LosslessReport | None = None
        self.acceptance: list[dict[str, Any]] = []
        self.offline: list[dict[str, Any]] = []
        self.mismatch: LayerMismatch | None = None
        self.speedup: list[dict[str, Any]] = []
        self.sampling: SamplingRecord | None = None
        self.dispatch_gap: DispatchGap | None = None
        self.figures: dict[str, Path] = {}
        self.findings: list[dict[str, Any]] = []

    # --- set-up, trace and patches ------------------------------------------------------------------------------

    def summary(self) -> Shown:
        return show.table({"profile": self.profile.name, "target": self.models.target,
                           "draft": self.eagle3_models.draft, "patch": self.patch,
                           "CPU harness shims": ", ".join(self.shims) or "none"})

    def plans_table(self) -> Shown:
        return show.table([plan.to_dict() for plan in self.plans])

    def load_trace(self) -> Shown:
        """Notebook 02's sidecar: what the patch must delegate."""
        self.trace = capture_trace.load_trace(self.profile.name)
        verdict = self.trace.verdict
        return show.table({"missing members": ", ".join(verdict.missing_members),
                           "delegation gaps": ", ".join(verdict.delegation_gaps),
                           "one method enough?": verdict.one_method_enough})

    def _trace(self) -> sidecars.InterfaceTraceSidecar:
        if self.trace is None:
            raise RuntimeError("notebook bug: run the cell that loads notebook 02's trace first")
        return self.trace

    def patch_table(self) -> Shown:
        return show.table(patch_checks.patch_table([relaunch.ONE_METHOD_PATCH, self.patch]))

    def expect_patch_covers_trace(self) -> None:
        self.delegated = patch_checks.expect_patch_covers_trace(self.patch, self._trace().verdict.missing_members)
        print("the full patch delegates:", ", ".join(self.delegated))

    # --- capture check ------------------------------------------------------------------------------------------

    def capture_check(self) -> Shown:
        """sglang's own ModelRunner unpatched, then patched (cpu profile, ``capture`` on)."""
        P = self.profile
        if self.capture_enabled and P.device == "cpu":
            self.captures = {
                None: capture_check.run_cpu_capture_check(None, num_layers=P.model_num_layers),
                self.patch.removesuffix(".patch"): capture_check.run_cpu_capture_check(
                    self.patch, num_layers=P.model_num_layers)}
        return show.table(patch_checks.capture_rows(self.captures)) if self.captures else "capture check skipped"

    def expect_capture(self) -> None:
        if self.captures:
            patch_checks.expect_capture(self.captures, str(self._trace().verdict.first_raise["cpu"].member))

    def agreement_table(self) -> Shown:
        if self.captures:
            self.agreement = capture_trace.compare_with_trace(
                self._trace(), self.captures, profile="cpu" if self.profile.device == "cpu" else "gpu",
                full_patch=self.patch)
        return show.table([row.to_dict() for row in self.agreement]) if self.agreement else \
            "no capture results to compare"

    # --- relaunch chain -----------------------------------------------------------------------------------------

    def start_cycle_trace(self) -> None:
        self.cycle_trace = cycle_timers.start_cycle_trace(self.profile, self.bench_dir, self.bench.enabled)
        print("cycle trace:", self.cycle_trace)

    def relaunch_chain(self) -> Shown:
        """unpatched -> one-method patch -> full patch; the last server stays up for the benchmark."""
        self.chain = relaunch.run_chain(
            self.profile, self.eagle3_models, self.logs_dir, self.shims,
            steps=[relaunch.ChainStep("unpatched"),
                   relaunch.ChainStep("one-method patch", (relaunch.ONE_METHOD_PATCH,)),
                   relaunch.ChainStep("full delegation patch", (self.patch,))], progress=print,
            keep_last_serving=self.bench.enabled)
        return show.table([step.row() for step in self.chain])

    def expect_chain(self) -> None:
        """Fails the notebook on a wrapper error that survives the full patch (stopping the server it left up)."""
        try:
            self.story = relaunch.expect_chain(self.chain, self.profile, self._trace().verdict.missing_members)
        except BaseException:
            relaunch.stop_serving(self.chain)
            raise
        print("\n".join(self.story))

    # --- benchmark ----------------------------------------------------------------------------------------------

    def config_table(self) -> Shown:
        return show.table(self.config.to_dict())

    def harness_table(self) -> Shown:
        self.harness = server_arms.harness_rows(self.profile, self.models, self.eagle3_models, self.shims,
                                                CONTROL_SHIMS if self.profile.cpu_harness else ())
        return show.table(self.harness) if self.harness else "not the CPU harness: nothing changed"

    def sidecar(self, **measured: Any) -> PatchBenchSidecar:
        """The run's sidecar: what every run has, and the ``measured`` fields given."""
        return PatchBenchSidecar(
            profile=self.profile.name, parameters={**self.params.values, "prompt_kind": self.prompt_kind},
            profile_values=self.profile.model_dump(), models=ModelsRecord.model_validate(vars(self.eagle3_models)),
            environment=envinfo.environment_table(), patch=self.patch, delegated_members=self.delegated,
            chain=[step.record() for step in self.chain], story=self.story,
            spec_arms=[SpecArmRecord.model_validate(plan.to_dict()) for plan in self.plans],
            capture={str(key): CaptureRecord.model_validate(result.to_dict()) for key, result in self.captures.items()},
            agreement=[AgreementRecord.model_validate(row.to_dict()) for row in self.agreement],
            harness=[HarnessChangeRecord.model_validate(row) for row in self.harness], **measured)

    def open_partial_sidecar(self) -> None:
        """Written after each arm (``complete`` false until the last cell)."""
        self.partial = PartialSidecar(self.sidecar())

    def _partial(self) -> PartialSidecar:
        if self.partial is None:
            raise RuntimeError("notebook bug: open the partial sidecar before the benchmark")
        return self.partial

    def measure(self) -> None:
        self.bench.measure(self.chain, self._partial(), self.cross_check_enabled)

    def relaunch_pair(self) -> Shown:
        relaunched = self.relaunched = self.bench.relaunched(self.cycle_trace, self.interleave_layer_mismatch)
        spread = relaunched.spread
        self._partial().update(launch_spread=spread.model_dump() if spread else None,
                               interleaved_sweep=[s.model_dump() for s in relaunched.interleaved],
                               interleaved_variants=[s.model_dump() for s in relaunched.variants],
                               variant_costs=[c.model_dump() for c in relaunched.variant_costs])
        return show.table(launch_spread.rows(spread)) if spread else \
            "not relaunched (bench_launch_repeats is 0, or no EAGLE-3 point)"

    def spread_verdict(self) -> None:
        if self.relaunched.spread:
            print(launch_spread.verdict(self.relaunched.spread))

    def interleaved_table(self) -> Shown:
        return show.table(launch_spread.point_rows(self.relaunched.interleaved)) if self.relaunched.interleaved \
            else "no interleaved launch"

    def cycle_components(self) -> Shown:
        self.cycle_table = self.bench.cycle_components(self.cycle_trace) if self.bench.enabled else None
        return show.table(cycle.table_rows(self.cycle_table)) if self.cycle_table else \
            "no cycle trace (not the CPU harness, or no arm measured)"

    def cycle_figure_shown(self) -> Shown:
        self.cycle_figure = draw_cycle_figure(self.cycle_table) if self.cycle_table else None
        return show.images([self.cycle_figure]) if self.cycle_figure else "no cycle figure"

    def server_time_table(self) -> Shown:
        table = self.cycle_table
        return show.table(server_time.rows(table.by_point)) if table and table.by_point else \
            "no point windows in the trace"

    def server_time_figure_shown(self) -> Shown:
        self.server_time_figure = draw_server_time_figure(self.cycle_table) if self.cycle_table else None
        return show.images([self.server_time_figure]) if self.server_time_figure else "no server-time figure"

    def lossless_table(self) -> Shown:
        self.lossless = self.bench.lossless()
        if self.lossless:
            self._partial().update(lossless=self.lossless.to_dict())
        return show.table(self.lossless.rows()) if self.lossless else "no speculative arm measured"

    def expect_lossless(self) -> None:
        if self.lossless:
            lossless.expect_lossless(self.lossless)
        print("lossless:", self.lossless.lossless if self.lossless else None,
              "| passed:", self.lossless.passed if self.lossless else None)

    def acceptance_table(self) -> Shown:
        self.acceptance = self.bench.acceptance_records()
        return show.table(acceptance.acceptance_table(self.acceptance)) if self.acceptance else "no speculative arm measured"

    def expect_acceptance_consistent(self) -> None:
        self.bench.expect_acceptance_consistent()

    def offline_table(self) -> Shown:
        self.offline = self.bench.offline_vs_served()
        return show.table(self.offline) if self.offline else "the drafter records no offline simulation"

    def mismatch_table(self) -> Shown:
        self.mismatch = self.bench.layer_mismatch()
        return show.table(self.mismatch.rows()) if self.mismatch else "the layer-mismatch arm was not measured"

    def variant_table(self) -> Shown:
        costs = self.relaunched.variant_costs
        return show.table(launch_spread.variant_rows(costs)) if costs else \
            "the layer-mismatch arm did not join an interleaved launch"

    def speedup_table(self) -> Shown:
        self.speedup = self.bench.speedup()
        return show.table(self.speedup) if self.speedup else "no EAGLE-3 point to compare"

    def sampling_table(self) -> Shown:
        self.sampling = SamplingRecord(policy="refused", reason=GREEDY_ONLY) \
            if self.profile.cpu_harness else None
        return show.table(self.sampling.model_dump()) if self.sampling else "not a CPU run"

    def dispatch_gap_evidence(self) -> None:
        self.dispatch_gap = silent_noop.find_dispatch_gap(open_source())
        print("\n".join(self.dispatch_gap.evidence()))

    def cross_check_table(self) -> Shown:
        check = self.bench.crosscheck
        return show.table(server_arms.cross_check_row(check)) if check else "cross-check not run"

    def bench_figures(self) -> None:
        self.figures = self.bench.figures()
        show.images(self.figures.values())

    def diagnose(self) -> Shown:
        self.findings = diagnosis.diagnose_run(self.profile, self.bench.report, self.bench_dir, self.logs_dir,
                                               self.drafters.offline_acceptance, self.cycle_table,
                                               self.relaunched.spread)
        return show.table(self.findings)

    # --- the cost model -----------------------------------------------------------------------------------------

    def model_figures(self) -> None:
        show.images(model_figures(self.profile.name, self.params.profile_overrides))

    # --- the complete sidecar -----------------------------------------------------------------------------------

    def write_sidecar(self) -> Path:
        """The complete sidecar, over the partial one."""
        return sidecars.write(self.sidecar(
            bench_report=self.bench.report_path(), arms=self.bench.arm_rows(),
            workload=self.bench.report.workload if self.bench.report else None,
            cross_check=self.bench.crosscheck.to_dict() if self.bench.crosscheck else None,
            figures={kind: str(published_path(path)) for kind, path in {
                **self.figures, **({"cycle_components": self.cycle_figure} if self.cycle_figure else {}),
                **({"server_time": self.server_time_figure} if self.server_time_figure else {})}.items()},
            diagnostics=self.findings,
            lossless=self.lossless.to_dict() if self.lossless else None,
            acceptance=self.acceptance, offline_vs_served=self.offline,
            layer_mismatch=self.mismatch.to_dict() if self.mismatch else None,
            speedup=self.speedup, sampling=self.sampling,
            verify_dispatch_gap=self.dispatch_gap.to_dict() if self.dispatch_gap else None,
            timings=bench_records.timings(self.chain, self.captures, self.bench.report),
            cycle_components=self.cycle_table, launch_spread=self.relaunched.spread,
            interleaved_sweep=self.relaunched.interleaved, interleaved_variants=self.relaunched.variants,
            variant_costs=self.relaunched.variant_costs))


def start(namespace: MutableMapping[str, Any]) -> PatchBenchRun:
    """The run of the notebook whose globals are ``namespace``, right after its parameters cell
    (``params.resolve`` checks them)."""
    return PatchBenchRun(nbparams.resolve(namespace))


# --- the cost model's cells: each one call, the notebook imports only eagle3lab.notebook ---------------------------

def incident_prediction() -> dict[str, Any]:
    """The decode cost model for the incident's deployment (``report.incident_model``)."""
    return incident_report()


def side_by_side(prediction: dict[str, Any]) -> Shown:
    return show.table([{"quantity": key, **values} for key, values in prediction["side_by_side"].items()])


def break_even(prediction: dict[str, Any]) -> Shown:
    return show.table(prediction["break_even_accept_length"], ["break-even acceptance length"])


def validation_figure() -> None:
    show.images([model_plots.validation_figure()])


def validate() -> Any:
    """Every published series predicted (``costmodel.perfmodel.validate``)."""
    return perfmodel.validate()


def trend_table(validation: Any) -> Shown:
    return show.table(perfmodel.trend_table(validation))


def validation_points(validation: Any) -> Shown:
    return show.table(perfmodel.validation_points(validation))


def sweeps_table(view: ValidationView) -> Shown:
    """Sweeps of draft steps: where the measured speedup peaks against where the model's does."""
    return show.table(view.sweeps) if view.sweeps else "no draft-step sweep in the validation data"
