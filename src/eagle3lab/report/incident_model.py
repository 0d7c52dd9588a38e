"""The incident's analysis: Kimi-K2.5 and its drafter on 8x RTX PRO 6000 as the cost model predicts them.

The cost model (``eagle3lab.costmodel``) knows hardware and models; this module puts the incident's deployment
together from the blackwell-8x profile (TP, workload) and the engineer's reported figures (``incident``), and asks
the questions the report answers: predictions, break-even acceptance, which assumptions flip the verdict.
The profile is read when first needed, never at import.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.costmodel.capacity import DeploymentPrediction, kv_capacity_requests, peak, predict_capacity_limited
from eagle3lab.costmodel.cycle import Deployment, plain_step, spec_cycle
from eagle3lab.costmodel.engine import ORCHESTRATION, Engine, sglang_engine
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.costmodel.measured_cycle import cpu_engine_entry
from eagle3lab.costmodel.predict import calibrate_baseline
from eagle3lab.costmodel.presets import hardware_preset, kimi_k25, kimi_k25_eagle3_drafter
from eagle3lab.costmodel.validation import Dataset, Frozen, frozen_engine, load_dataset
from eagle3lab.errors import PerfModelError
from eagle3lab.report import incident
from eagle3lab.report.incident import INCIDENT_PROFILE
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.speculative import SpeculativeSpec

DEFAULT_ACCEPT_LENGTHS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def profile_speculative_spec(profile_name: str) -> SpeculativeSpec:
    """The speculative flags of a profile, built by the same function that builds its server launch."""
    profile = load_profile(profile_name)
    # flags only: the checkpoints need not be on disk (a GPU profile's are fetched separately, with fetch-models)
    spec = server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=True).speculative
    if spec is None:  # a speculative launch always carries its flags
        raise PerfModelError(f"profile {profile_name}: its speculative launch carries no EAGLE flags",
                             parameter="profile", value=profile_name)
    return spec


@dataclass(frozen=True)
class IncidentSetup:
    """The incident's TP and benchmark workload, read from its profile (params/blackwell-8x.yaml) so the model and
    the launch can never disagree; the memory fraction is the engineer's reported flag (``incident.MEM_FRACTION``)."""

    profile: str
    tp: int
    context_len: float
    context_source: str


@functools.cache
def incident_setup() -> IncidentSetup:
    profile = load_profile(INCIDENT_PROFILE)
    context = profile.bench_input_len + profile.bench_output_len / 2
    source = (f"assumption: mean context during decode of the {profile.name} benchmark (params/{profile.name}.yaml: "
              f"{profile.bench_input_len} prompt tokens + half of {profile.bench_output_len} output tokens); the "
              "engineer did not report the workload")
    return IncidentSetup(profile.name, profile.tp_size, context, source)


def incident_spec() -> SpeculativeSpec:
    """The incident's EAGLE flags, from the blackwell-8x profile through the launch's own builder."""
    return profile_speculative_spec(INCIDENT_PROFILE)


def current_constants(dataset: Dataset) -> Optional[Frozen]:
    """The newest frozen constants of the dataset's validation protocol (``Protocol.current``); None where nothing
    is frozen yet."""
    return dataset.protocol.current if dataset.protocol is not None else None


@functools.cache
def incident_engine() -> Engine:
    """The engine the incident is predicted with: sglang's constants plus the orchestration between passes fitted on
    development sources and frozen (``validation.protocol.current``): the constants the newest held-out set was
    scored with, so the report's verdict rests on the model that was validated, not on the one before it."""
    return frozen_engine("sglang-0.5", current_constants(load_dataset()))


def tp_term_condition() -> dict[str, Any]:
    """Where the per-TP-rank orchestration term comes from against where the incident uses it: the TP sizes and
    hardware of the development series it was fitted on, and whether the incident's TP lies outside them (an
    extrapolation the report must say)."""
    dataset = load_dataset()
    frozen = current_constants(dataset)
    fitted = [(source, series) for source in dataset.sources if frozen and source.id in frozen.fitted_on
              for series in source.series]
    tps = sorted({series.tp for _, series in fitted})
    hardware = sorted({hardware_preset(source.hardware).name for source, _ in fitted})
    tp, per_rank_ms = incident_setup().tp, incident_engine().spec_tp_extra_s * 1e3
    return {"fitted_tp": tps, "fitted_hardware": hardware, "incident_tp": tp,
            "incident_hardware": hardware_preset("rtx-pro-6000-blackwell").name,
            "extrapolated": bool(tps) and not tps[0] <= tp <= tps[-1],
            "spec_tp_extra_ms": per_rank_ms, "per_cycle_at_incident_tp_ms": per_rank_ms * (tp - 1)}


def incident_deployment(hardware: str = "rtx-pro-6000-blackwell", context_len: Optional[float] = None,
                        engine: Optional[Engine] = None) -> Deployment:
    """Kimi-K2.5 and its drafter on 8 GPUs, overhead calibrated on the engineer's reported 63.6 tok/s.

    On another GPU the same calibration is applied (same software stack); that is an assumption and says so.
    """
    setup = incident_setup()
    context_len = setup.context_len if context_len is None else context_len
    target, drafter = kimi_k25(), kimi_k25_eagle3_drafter()
    pcie = Deployment(target, drafter, hardware_preset("rtx-pro-6000-blackwell"), setup.tp,
                      engine or incident_engine(), context_len)
    pcie = calibrate_baseline(pcie, incident.SINGLE_STREAM.value, incident.SOURCE)
    if hardware == "rtx-pro-6000-blackwell":
        return pcie
    same = ("assumption: the kernel overhead calibrated on the RTX PRO 6000 deployment (same software stack, "
            "CUDA graphs on)")
    return replace(pcie, hardware=hardware_preset(hardware),
                   engine=pcie.engine.with_(same, kernel_overhead_s=pcie.engine.kernel_overhead_s))


def predict_incident(context_len: Optional[float] = None,
                     accept_lengths: Sequence[float] = DEFAULT_ACCEPT_LENGTHS) -> list[DeploymentPrediction]:
    """The model's predictions for the incident's deployment and for the same on 8x H200."""
    spec = incident_spec()
    return [predict_capacity_limited(incident_deployment(hw, context_len), spec, incident.MEM_FRACTION.value,
                                     accept_lengths) for hw in ("rtx-pro-6000-blackwell", "h200")]


# How each changeable assumption is named in a table: label, the factor to its display unit, the unit.
_CHANGE_LABELS: dict[str, tuple[str, float, str]] = {
    "context_len": ("context", 1.0, "tokens"),
    "allreduce_latency_s": ("all-reduce latency", 1e6, "us"),
    "bandwidth_efficiency": ("bandwidth efficiency", 1.0, ""),
    "cpu_forward_prep_s": ("CPU prep per pass", 1e3, "ms"),
    "spec_cycle_extra_s": ("extra time per EAGLE cycle", 1e3, "ms"),
    "spec_step_extra_s": ("extra time per draft step", 1e3, "ms"),
    "spec_tp_extra_s": ("cycle time per TP rank beyond the first", 1e3, "ms"),
    "spec_max_running_requests": ("request cap under speculation", 1.0, "requests"),
}


def describe_change(change: Mapping[str, float]) -> str:
    """A variation's name, made from its own values (so a label can never disagree with what was changed)."""
    if not change:
        return "as stated"
    parts = []
    for key, value in change.items():
        if key == "spec_max_running_requests" and not value:
            parts.append("no request cap under speculation (--max-running-requests set)")
            continue
        label, factor, unit = _CHANGE_LABELS.get(key, (key, 1.0, ""))
        parts.append(f"{label} {value * factor:g}{' ' + unit if unit else ''}")
    return ", ".join(parts)


INCIDENT_CHANGES: tuple[dict[str, float], ...] = (
    {}, {"context_len": 512}, {"context_len": 2048}, {"spec_max_running_requests": 0},
    {"context_len": 512, "spec_max_running_requests": 0}, {"context_len": 2048, "spec_max_running_requests": 0},
    {"allreduce_latency_s": 15e-6}, {"allreduce_latency_s": 60e-6},
    {"bandwidth_efficiency": 0.6}, {"bandwidth_efficiency": 0.95},
    {"cpu_forward_prep_s": 1e-3}, {"spec_cycle_extra_s": 3e-3},
    {"spec_tp_extra_s": 0.0},  # the fitted per-TP-rank term does not carry to TP 8 (tp_term_condition)
    {"spec_cycle_extra_s": 0.0, "spec_step_extra_s": 0.0, "spec_tp_extra_s": 0.0},  # no orchestration: the old model
)
INCIDENT_VARIATIONS: dict[str, dict[str, float]] = {describe_change(c): c for c in INCIDENT_CHANGES}


def incident_sensitivity(variations: Mapping[str, Mapping[str, float]] = INCIDENT_VARIATIONS,
                         accept_lengths: Sequence[float] = (2.0, 3.0, 4.0)) -> list[dict[str, Any]]:
    """The incident prediction again with one assumption changed at a time (re-calibrated on 63.6 tok/s each
    time), so a reader sees which conclusions survive the assumptions and where they flip."""
    setup = incident_setup()
    hw_fields = set(Hardware.__dataclass_fields__)
    engine_fields = set(Engine.__dataclass_fields__)
    spec = incident_spec()
    rows = []
    for name, change in variations.items():
        change = dict(change)
        context = change.pop("context_len", setup.context_len)
        unknown = set(change) - hw_fields - engine_fields
        if unknown:
            raise PerfModelError(f"sensitivity '{name}': unknown parameter(s) {sorted(unknown)}",
                                 parameter=sorted(unknown)[0], problem="unknown_parameter")
        hw = hardware_preset("rtx-pro-6000-blackwell")
        hw_change = {k: v for k, v in change.items() if k in hw_fields}
        engine_change = {k: v for k, v in change.items() if k in engine_fields}
        if hw_change:
            hw = hw.with_(f"sensitivity: {name}", **hw_change)
        engine = incident_engine()
        if engine_change:
            engine = engine.with_(f"sensitivity: {name}", **engine_change)
        dep = Deployment(kimi_k25(), kimi_k25_eagle3_drafter(), hw, setup.tp, engine, context)
        dep = calibrate_baseline(dep, incident.SINGLE_STREAM.value, f"{incident.SOURCE}; {name}")
        p = predict_capacity_limited(dep, spec, incident.MEM_FRACTION.value, accept_lengths)
        rows.append({"variation": name, "changed": dict(variations[name]), **p.to_dict()})
    return rows


def _baseline_peak_at(context_len: float) -> tuple[float, int]:
    dep = incident_deployment("rtx-pro-6000-blackwell", context_len)
    limit = kv_capacity_requests(dep, incident.MEM_FRACTION.value)
    return peak(lambda b: b / plain_step(dep, b).total_s, max(1, limit))


def context_matching_reported_peak(low: float = 128, high: float = 16384) -> Optional[dict[str, Any]]:
    """The mean decode context at which the model's baseline peak equals the engineer's reported peak, and the
    whole incident prediction there. The reported peak is the one incident number the calibration did not use;
    the context is the assumption it depends on most (more context, fewer requests fit). None if no context in
    [low, high] gives the reported peak."""
    target = incident.PEAK.value
    if not _baseline_peak_at(low)[0] >= target >= _baseline_peak_at(high)[0]:
        return None
    lo, hi = int(math.ceil(low)), int(math.floor(high))
    while hi - lo > 1:  # the peak falls as the context grows: bisect over whole tokens
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _baseline_peak_at(mid)[0] >= target else (lo, mid)
    context = float(lo)
    dep, spec = incident_deployment("rtx-pro-6000-blackwell", context), incident_spec()
    capped = predict_capacity_limited(dep, spec, incident.MEM_FRACTION.value, (2.0, 3.0, 4.0))
    uncapped = predict_capacity_limited(dep, spec, incident.MEM_FRACTION.value, (2.0, 3.0, 4.0),
                                        spec_max_running_requests=0)
    return {"context_len": context, "reported_peak_tok_s": target,
            "note": "the context at which the modelled baseline peak reaches the reported peak",
            "predicted": capped.to_dict(), "predicted_without_request_cap": uncapped.to_dict()}


def incident_cycle_breakdown(context_len: Optional[float] = None,
                             batches: Sequence[int] = (1, 8, 48)) -> list[dict[str, Any]]:
    """Per batch size on the incident's deployment: the plain step and the EAGLE cycle by part (ms), how many plain
    steps one verify pass costs, and the distinct experts each touches per MoE layer. Plain data for the report's
    sentences about why verifying is not free (modelled)."""
    context_len = incident_setup().context_len if context_len is None else context_len
    dep, spec = incident_deployment("rtx-pro-6000-blackwell", context_len), incident_spec()
    rows = []
    for batch in batches:
        step, cycle = plain_step(dep, batch), spec_cycle(dep, spec, batch)
        rows.append({"batch": batch, "plain_step_ms": step.total_s * 1e3, "cycle_ms": cycle.total_s * 1e3,
                     **{f"cycle_{k}_ms": v * 1e3 for k, v in cycle.parts().items()},
                     "verify_over_plain_step": cycle.verify.total_s / step.total_s,
                     "cycle_over_plain_step": cycle.total_s / step.total_s,
                     "plain_distinct_experts_per_layer": step.target.distinct_experts,
                     "verify_distinct_experts_per_layer": cycle.verify.distinct_experts,
                     "kind": "modelled"})
    return rows


def _verdict(p: DeploymentPrediction) -> dict[str, str]:
    """The verdict sentences, made from the prediction's own numbers (never typed)."""
    top = p.max_accept_length
    single = (f"EAGLE-3 beats plain decoding at one request only above acceptance {p.break_even_single_stream:.2f} "
              f"(at most {top})")
    at_peak = (f"no acceptance can make EAGLE-3 reach plain decoding's peak (break-even {p.break_even_at_peak:.2f} > "
               f"{top})" if p.break_even_at_peak > top else
               f"EAGLE-3 reaches plain decoding's peak only above acceptance {p.break_even_at_peak:.2f} "
               f"(at most {top})")
    return {"single_stream": single, "at_peak": at_peak}


def incident_break_even_update(context_len: Optional[float] = None) -> dict[str, Any]:
    """How the incident's break-even acceptances and verdict moved (issue 18, item 6): the model as it stood
    (sglang's CPU work counted, no orchestration between passes) against the model with the orchestration per
    cycle and per draft step fitted on development sources and frozen (``validation.protocol.frozen``), each with
    its provenance; plus the CPU harness's measured cycle in plain steps where the cycle benchmark has run.
    JSON-ready: ``old``, ``new`` (break-evens, the request cap, verdict sentences, engine sources), ``moved``
    (new - old per break-even) and ``measured_cpu_cycle``."""
    context_len = incident_setup().context_len if context_len is None else context_len
    frozen = current_constants(load_dataset())  # the newest frozen constants (the second freeze once recorded)
    if frozen is None:
        raise PerfModelError("the cost model's validation data (data/spec_validation.yaml) records no frozen "
                             "constants, and the break-even update compares the model against them; restore its "
                             "protocol's freeze", parameter="protocol", problem="missing")
    spec = incident_spec()
    engines = {"old": (sglang_engine(), "modelled: sglang engine constants as stated (CPU work per pass counted; "
                                        "no orchestration between passes)"),
               "new": (incident_engine(),
                       f"modelled: plus orchestration fitted on development sources ({', '.join(frozen.fitted_on)}) "
                       f"and frozen {frozen.date}")}
    out: dict[str, Any] = {}
    for label, (engine, provenance) in engines.items():
        dep = incident_deployment("rtx-pro-6000-blackwell", context_len, engine=engine)
        p = predict_capacity_limited(dep, spec, incident.MEM_FRACTION.value, DEFAULT_ACCEPT_LENGTHS)
        out[label] = {"break_even_single_stream": p.break_even_single_stream,
                      "break_even_at_spec_max_batch": p.break_even_at_spec_max_batch,
                      "spec_max_batch": p.spec_max_batch, "break_even_at_peak": p.break_even_at_peak,
                      "max_accept_length": p.max_accept_length,
                      "spec_cycle_extra_s": dep.engine.spec_cycle_extra_s,
                      "spec_step_extra_s": dep.engine.spec_step_extra_s,
                      "spec_tp_extra_s": dep.engine.spec_tp_extra_s,
                      **{f"{k.removesuffix('_s')}_ms": getattr(dep.engine, k) * 1e3 for k in ORCHESTRATION},
                      "verdict": _verdict(p),
                      "provenance": provenance,
                      "engine_sources": {k: dep.engine.sources.get(k, "") for k in ("spec_cycle_extra_s",
                                                                                      "spec_step_extra_s",
                                                                                      "kernel_overhead_s")},
                      "kind": "modelled"}
    out["moved"] = {k: out["new"][k] - out["old"][k] for k in ("break_even_single_stream",
                                                               "break_even_at_spec_max_batch", "break_even_at_peak")}
    out["measured_cpu_cycle"] = cpu_engine_entry("cpu").to_dict()
    out["tp_term"] = tp_term_condition()
    out["context_len"], out["context_source"] = context_len, incident_setup().context_source
    return out


def incident_report(context_len: Optional[float] = None) -> dict[str, Any]:
    """JSON-ready: reported figures next to the model's predictions, break-even, sensitivity, sources."""
    context_len = incident_setup().context_len if context_len is None else context_len
    pcie, nvlink = predict_incident(context_len)
    dep = incident_deployment("rtx-pro-6000-blackwell", context_len)
    return {
        "reported": [vars(r) for r in incident.REPORTED],
        "context_len": context_len, "context_source": incident_setup().context_source,
        "predicted": {"rtx_pro_6000_x8": pcie.to_dict(), "h200_x8": nvlink.to_dict()},
        "side_by_side": {
            "single_stream_tok_s": {"reported": incident.SINGLE_STREAM.value,
                                    "predicted": pcie.single_stream_tok_s,
                                    "note": "calibration target: the kernel overhead is fitted to it",
                                    "bandwidth_and_allreduce_floor": pcie.floor_single_stream_tok_s},
            "peak_tok_s": {"reported": incident.PEAK.value, "predicted": pcie.baseline_peak_tok_s,
                           "predicted_at_requests": pcie.baseline_peak_batch,
                           "error_pct": (pcie.baseline_peak_tok_s - incident.PEAK.value) / incident.PEAK.value * 100,
                           "note": "out of sample: KV-limited batch at the assumed context"},
        },
        "break_even_accept_length": {"single_stream": pcie.break_even_single_stream,
                                     f"at_{pcie.spec_max_batch}_requests": pcie.break_even_at_spec_max_batch,
                                     "at_peak": pcie.break_even_at_peak},
        "cycle_breakdown": incident_cycle_breakdown(context_len),
        "sensitivity": incident_sensitivity(),
        "break_even_update": incident_break_even_update(context_len),
        "context_matching_reported_peak": context_matching_reported_peak(),
        "sources": {"model": dep.target.source, "drafter": dep.drafter.source,
                    "rtx_pro_6000_x8": dict(dep.hardware.sources), "engine": dict(dep.engine.sources),
                    "h200_x8": dict(hardware_preset("h200").sources)},
    }


