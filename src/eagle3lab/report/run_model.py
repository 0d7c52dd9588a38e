"""The cost model on a measured run: the deployment a profile's run measured, calibrated on that run's own plain
single-stream step, and the break-even acceptance its diagnostics compare the measured acceptance with.

Benchmark data reaches the cost model here, through the bench's own ``BenchReport``, and nowhere else.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from eagle3lab.bench.host import COPY_BANDWIDTH_HOW, recorded_copy_bandwidth
from eagle3lab.bench.lengths import measured_context
from eagle3lab.bench.sweep import ARM_KIND_EAGLE3, BenchReport
from eagle3lab.costmodel.arch import ModelArch, drafter_from_config, model_from_config
from eagle3lab.costmodel.cycle import Deployment, break_even_accept_length, plain_step
from eagle3lab.costmodel.engine import sglang_engine
from eagle3lab.costmodel.measured_cycle import cpu_engine_entry
from eagle3lab.costmodel.predict import calibrate_baseline
from eagle3lab.costmodel.presets import cpu_hardware, hardware_preset, kimi_k25, kimi_k25_eagle3_drafter
from eagle3lab.errors import PerfModelError
from eagle3lab.report import incident
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.speculative import SpeculativeSpec
from eagle3lab.runtime.tinymodel.configs import draft_config, text_config


def single_stream_step_s(report: BenchReport) -> Optional[float]:
    """The baseline's decode step at concurrency 1 (the bench's ``decode_step_s``, i.e. mean TPOT): what the cost
    model's fixed overhead is calibrated on. None if that point was not measured."""
    for arm in report.arms:
        if arm.speculative:
            continue
        for point in arm.measured_points():
            if point.concurrency == 1 and point.metrics is not None and point.metrics.decode_step_s:
                return float(point.metrics.decode_step_s)
    return None


def run_models(profile: Profile) -> tuple[ModelArch, ModelArch]:
    """The cpu profile's tiny target and drafter as the run served them: the profile's depth and its ``--dtype``
    (the generator's configs say bf16; the server casts to the profile's dtype, fp32 on the cpu profile)."""
    n, dtype = profile.model_num_layers, profile.dtype
    target = model_from_config({**text_config(n), "torch_dtype": dtype},
                               f"tiny Kimi-K2.5 ({n} layers, {dtype})", "eagle3lab.runtime.tinymodel.configs.text_config")
    drafter = drafter_from_config({**draft_config(n), "torch_dtype": dtype},
                                  "eagle3lab.runtime.tinymodel.configs.draft_config")
    return target, drafter


def run_bandwidth(report: Optional[BenchReport], mem_bandwidth: Optional[float] = None) -> tuple[float, str]:
    """This host's copy bandwidth for the cpu deployment, with where it comes from: ``mem_bandwidth`` if given,
    else the one the run measured and kept in its benchmark record. Never probed now: a probe taken when a figure
    is drawn measures another moment of a shared machine than the step it would be calibrated against."""
    if mem_bandwidth is not None:
        return mem_bandwidth, "given"
    recorded = recorded_copy_bandwidth(report.machine) if report is not None else None
    if report is None or recorded is None:
        raise PerfModelError("the cost model cannot be calibrated on this run: its benchmark record holds no copy "
                             "bandwidth of this host (a record from before it was kept); rerun notebook 03 "
                             "(python -m eagle3lab report) to measure it", parameter="copy_bandwidth",
                             problem="no_bandwidth")
    return recorded, f"measured during the run ({COPY_BANDWIDTH_HOW}; {report.profile}, {report.date})"


def _cpu_calibrated(dep: Deployment, step_s: float, where: str) -> Deployment:
    """``calibrate_baseline`` on the CPU harness, where "check the hardware, tp and context" names nothing a user
    can change: a measured step below the model's floor says what was measured against what, and what to do."""
    try:
        return calibrate_baseline(dep, 1.0 / step_s, where)
    except PerfModelError as exc:
        if exc.fields.get("problem") != "below_model_floor":
            raise
        floor = plain_step(replace(dep, engine=dep.engine.with_("no overhead", kernel_overhead_s=0.0)), 1).total_s
        raise PerfModelError(
            f"the cost model cannot be calibrated on this run: its {where} is shorter than the "
            f"{floor * 1e3:.2f} ms the model needs with no "
            f"overhead at this host's copy bandwidth of {dep.hardware.mem_bandwidth / 1e9:.3g} GB/s "
            f"({dep.hardware.sources.get('mem_bandwidth', 'given')}; a slow spell during the probe, or a busy "
            f"machine); the measured results stand without the model; "
            f"rerun the benchmark (python -m eagle3lab report --notebooks 03) when the machine is quieter",
            parameter="single_stream_tok_s", value=1.0 / step_s, problem="below_model_floor") from None


def run_deployment(profile: Profile, report: Optional[BenchReport] = None, mem_bandwidth: Optional[float] = None,
                   step: Optional[tuple[float, str]] = None) -> tuple[Deployment, str]:
    """The deployment a profile's run measured, calibrated on its own measured plain single-stream decode step if
    the bench report has one (else, on a GPU profile, on the incident's reported rate); ``step`` = (seconds, where
    it was measured) calibrates on another measured single-stream step instead (the interleaved launch's). On the
    cpu profile the host's copy bandwidth is ``mem_bandwidth`` or the one the run measured (``run_bandwidth``).
    Returns it with a sentence saying what it was calibrated on."""
    context = measured_context(report) or profile.bench_input_len + profile.bench_output_len / 2  # chat: measured
    on_cpu = profile.device == "cpu"
    if on_cpu:
        target, drafter = run_models(profile)
        # the CPU harness's own engine entry: its measured per-cycle and per-draft-step terms where the cycle
        # benchmark has run (artifacts/cycle_components.<profile>.json), else sglang's engine as stated
        entry = cpu_engine_entry(profile.name)
        engine = entry.engine or sglang_engine()
        measured = entry.measured
        if measured is not None and measured.verify_per_request_s is not None:
            # per running request per layer, the same in every pass of either model on this host
            small, large = measured.per_request_batch_sizes or (1, 0)
            engine = engine.with_(
                f"measured here: the target's verify forward at batch size {large} against {small} in "
                f"notebook 03's cycle timers, arm '{measured.arm}', over its {target.num_layers} layers",
                pass_per_request_layer_s=measured.verify_per_request_s / target.num_layers)
        bandwidth, bandwidth_source = run_bandwidth(report, mem_bandwidth)
        dep = Deployment(target, drafter, cpu_hardware(bandwidth, bandwidth_source), profile.tp_size, engine,
                         context)
    else:
        target = kimi_k25()
        dep = Deployment(target, kimi_k25_eagle3_drafter(), hardware_preset("rtx-pro-6000-blackwell"),
                         profile.tp_size, sglang_engine(), context)
    if step is not None:
        where = f"measured plain single-stream TPOT (1 / decode rate) {step[0] * 1e3:.2f} ms ({step[1]})"
        return (_cpu_calibrated(dep, step[0], where) if on_cpu else calibrate_baseline(dep, 1.0 / step[0], where)), \
            where
    measured_step = single_stream_step_s(report) if report is not None else None
    if report is not None and measured_step:
        where = f"measured plain single-stream TPOT (1 / decode rate) {measured_step * 1e3:.2f} ms ({profile.name}, {report.date})"
        return (_cpu_calibrated(dep, measured_step, where) if on_cpu
                else calibrate_baseline(dep, 1.0 / measured_step, where)), where
    if on_cpu:
        raise PerfModelError(f"profile '{profile.name}': no measured plain single-stream point to calibrate the "
                             "cost model on; include concurrency 1 in bench_concurrency", parameter="bench_concurrency",
                             problem="no_single_stream")
    return calibrate_baseline(dep, incident.SINGLE_STREAM.value, incident.SOURCE), \
        f"the engineer's reported {incident.SINGLE_STREAM.value:g} tok/s (no single-stream point measured here)"


def run_break_even(profile: Profile, report: Optional[BenchReport] = None, batch: Optional[int] = None,
                   mem_bandwidth: Optional[float] = None) -> tuple[float, str]:
    """(break-even acceptance length, where it comes from) for a profile's run: the acceptance EAGLE-3 needs to
    match plain decoding at ``batch`` requests (default: the largest concurrency the EAGLE-3 arm measured, else 1).
    This is what ``diagnostics.rule_acceptance_below_break_even`` compares the measured acceptance with."""

    dep, calibrated = run_deployment(profile, report, mem_bandwidth)
    if batch is None:
        measured = [p.concurrency for arm in (report.arms if report is not None else [])
                    if arm.kind == ARM_KIND_EAGLE3 for p in arm.measured_points()]
        batch = max(measured) if measured else 1
    spec = SpeculativeSpec.from_profile(profile, profile.draft_model)
    value = break_even_accept_length(dep, spec, batch)
    return value, (f"modelled at {batch} request{'s' if batch > 1 else ''}, {dep.target.name} on {dep.tp}x "
                   f"{dep.hardware.name}, context {dep.context:g}; calibrated on {calibrated}")
