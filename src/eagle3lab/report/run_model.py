"""The cost model on a measured run: the deployment a profile's run measured, calibrated on that run's own plain
single-stream step, and the break-even acceptance its diagnostics compare the measured acceptance with.

What the run is modelled as comes from the profile's ``cost_model`` keys (``modelled_as``): the tiny pair a tiny
profile served on the machine it measured, or a named model and GPU; a run nothing applies to is not modelled.

Benchmark data reaches the cost model here, through the bench's own ``BenchReport``, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from eagle3lab.bench.host import COPY_BANDWIDTH_HOW, recorded_copy_bandwidth, recorded_gpus
from eagle3lab.bench.lengths import measured_context
from eagle3lab.bench.sweep import ARM_KIND_EAGLE3, BenchReport
from eagle3lab.costmodel.arch import ModelArch, drafter_from_config, model_from_config
from eagle3lab.costmodel.cycle import Deployment, break_even_accept_length, plain_step
from eagle3lab.costmodel.engine import sglang_engine
from eagle3lab.costmodel.measured_cycle import cpu_engine_entry
from eagle3lab.costmodel.predict import calibrate_baseline
from eagle3lab.costmodel.gpus import DEVICE_PRESETS, preset_for_device
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.costmodel.presets import MODELS, cpu_hardware, hardware_preset
from eagle3lab.errors import PerfModelError
from eagle3lab.report import incident
from eagle3lab.runtime.profiles import MEASURED, SERVED, Profile, cost_model_problem, load_profile
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
    """A tiny profile's target and drafter as the run served them (``cost_model.model: served``): the profile's
    depth and its ``--dtype`` (the generator's configs say bf16; the server casts to the profile's dtype, fp32 on
    the cpu and gpu-1x profiles)."""
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


@dataclass(frozen=True)
class ModelledAs:
    """What a profile's run is modelled as (its ``cost_model`` keys, resolved): the target and drafter, and the GPU
    (None: the cpu host, built from the copy bandwidth the run measured). ``keys`` are the names it resolved to,
    (model, hardware), so that two runs modelled alike compare equal."""

    target: ModelArch
    drafter: ModelArch
    hardware: Optional[Hardware]
    keys: tuple[str, str]


def not_modelled(profile: Profile, why: str) -> PerfModelError:
    """The one line a run the cost model does not describe gets: the measured results are shown without it."""
    return PerfModelError(f"the cost model does not model this {profile.name} run: {why}; its measured results "
                          "stand without it", parameter="cost_model", problem="not_modelled")


def measured_gpu(profile: Profile, report: Optional[BenchReport]) -> str:
    """The GPU preset of the GPUs a cuda run measured on (its benchmark record's names, the first ``tp_size``), or
    ``not_modelled`` naming why none applies: no GPU recorded, GPUs that differ, or one without a preset."""
    names = recorded_gpus(report.machine if report is not None else None)[:profile.tp_size]
    if not names:
        raise not_modelled(profile, "its benchmark record names no GPU (torch saw none, or a record from before GPUs "
                                    "were kept); rerun notebook 03 on the GPU, or name one as cost_model.hardware")
    if len(set(names)) > 1:
        raise not_modelled(profile, f"its {len(names)} GPUs are not alike ({', '.join(sorted(set(names)))})")
    preset = preset_for_device(names[0])
    if preset is None:
        raise not_modelled(profile, f"its GPU, {names[0]}, has no datasheet preset in costmodel/gpus.py (known: "
                                    f"{', '.join(sorted(DEVICE_PRESETS))}); name a preset as cost_model.hardware")
    return preset


def modelled_as(profile: Profile, report: Optional[BenchReport] = None) -> ModelledAs:
    """What the profile's ``cost_model`` keys say its run is modelled as: 'served' is the tiny pair the run served
    (``run_models``), 'measured' the machine it measured on (a cuda run: the GPU its benchmark record names). Never
    the incident's deployment unless the profile names it; ``not_modelled`` where nothing applies."""
    keys = profile.cost_model
    if keys is None:
        raise not_modelled(profile, "its profile says cost_model: none")
    problem = cost_model_problem(profile)  # profile values read back from a sidecar skip the loader's check
    if problem is not None:
        raise not_modelled(profile, f"{problem[0]}: {problem[1]}")
    target, drafter = run_models(profile) if keys.model == SERVED else MODELS[keys.model]()
    if keys.hardware != MEASURED:
        return ModelledAs(target, drafter, hardware_preset(keys.hardware), (keys.model, keys.hardware))
    if profile.device == "cpu":
        return ModelledAs(target, drafter, None, (keys.model, MEASURED))
    preset = measured_gpu(profile, report)
    return ModelledAs(target, drafter, hardware_preset(preset), (keys.model, preset))


def is_incident(profile: Profile, run: ModelledAs) -> bool:
    """Whether the run is modelled as the incident's deployment (the incident profile's model and GPU at its TP):
    only then do its points belong on the incident's figures, and the engineer's rate may calibrate it."""
    incident_profile = load_profile(incident.INCIDENT_PROFILE)
    keys = incident_profile.cost_model
    return (keys is not None and run.keys == (keys.model, keys.hardware)
            and profile.tp_size == incident_profile.tp_size)


def run_deployment(profile: Profile, report: Optional[BenchReport] = None, mem_bandwidth: Optional[float] = None,
                   step: Optional[tuple[float, str]] = None) -> tuple[Deployment, str]:
    """The deployment a profile's run measured (``modelled_as``), calibrated on its own measured plain
    single-stream decode step if the bench report has one (else, for the incident's deployment only, on the
    incident's reported rate); ``step`` = (seconds, where it was measured) calibrates on another measured
    single-stream step instead (the interleaved launch's). On the cpu profile the host's copy bandwidth is
    ``mem_bandwidth`` or the one the run measured (``run_bandwidth``). Returns it with a sentence saying what it
    was calibrated on."""
    context = measured_context(report) or profile.bench_input_len + profile.bench_output_len / 2  # chat: measured
    run = modelled_as(profile, report)
    target, on_cpu = run.target, run.hardware is None
    if run.hardware is None:
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
        dep = Deployment(target, run.drafter, cpu_hardware(bandwidth, bandwidth_source), profile.tp_size, engine,
                         context)
    else:
        dep = Deployment(target, run.drafter, run.hardware, profile.tp_size, sglang_engine(), context)
    if step is not None:
        where = f"measured plain single-stream TPOT (1 / decode rate) {step[0] * 1e3:.2f} ms ({step[1]})"
        return (_cpu_calibrated(dep, step[0], where) if on_cpu else calibrate_baseline(dep, 1.0 / step[0], where)), \
            where
    measured_step = single_stream_step_s(report) if report is not None else None
    if report is not None and measured_step:
        where = f"measured plain single-stream TPOT (1 / decode rate) {measured_step * 1e3:.2f} ms ({profile.name}, {report.date})"
        return (_cpu_calibrated(dep, measured_step, where) if on_cpu
                else calibrate_baseline(dep, 1.0 / measured_step, where)), where
    if on_cpu or not is_incident(profile, run):
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
