"""Named inputs for the cost model: GPUs (datasheet numbers with their URLs), stored model configs, the incident.

Kept apart from the equations (``costmodel``) so that every number someone may want to challenge sits in one short
file next to where it came from. Derived numbers say how they were derived; assumptions say so.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from eagle3lab.errors import PerfModelError
from eagle3lab.report.costmodel.arch import (ModelArch, drafter_from_config, eagle3_drafter, model_from_config,
                                             with_name)
from eagle3lab.report.costmodel.capacity import DeploymentPrediction, predict_capacity_limited
from eagle3lab.report.costmodel.cycle import Deployment
from eagle3lab.report.costmodel.engine import Engine, sglang_engine
from eagle3lab.report.costmodel.hardware import GB, TB, Hardware
from eagle3lab.report.costmodel.predict import calibrate_baseline

CONFIG_DIR = Path(__file__).resolve().parent / "data" / "configs"

# --------------------------------------------------------------------------------------------------- GPUs
_H100 = ("NVIDIA H100 SXM datasheet (https://www.nvidia.com/en-us/data-center/h100/): 80 GB HBM3, 3.35 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_H200 = ("NVIDIA H200 SXM datasheet (https://www.nvidia.com/en-us/data-center/h200/): 141 GB HBM3e, 4.8 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_B200 = ("NVIDIA DGX B200 datasheet (https://www.nvidia.com/en-us/data-center/dgx-b200/): 8 GPUs with 1,440 GB "
         "HBM3e and 64 TB/s in total (180 GB, 8 TB/s each), FP8 72 PFLOPS with sparsity for 8 GPUs (4.5 PFLOPS "
         "dense each; BF16 half of that), NVLink 5 1.8 TB/s per GPU")
_RTX6000 = ("NVIDIA RTX PRO 6000 Blackwell datasheet (https://www.nvidia.com/en-us/products/workstations/"
            "professional-desktop-gpus/rtx-pro-6000/): 96 GB GDDR7, 1,792 GB/s, PCIe Gen5 x16, no NVLink, "
            "FP4 4 PFLOPS with sparsity")
_RTX6000_FLOPS = (f"derived from {_RTX6000}: 4 PFLOPS FP4 sparse = 2 dense, halved per doubling of precision: "
                  "FP8 1 PFLOPS, BF16 0.5 PFLOPS dense")
_A100 = ("NVIDIA A100 datasheet (https://www.nvidia.com/en-us/data-center/a100/): A100 80GB SXM, HBM2e 2,039 GB/s, "
         "BF16 312 TFLOPS dense, NVLink 600 GB/s; no FP8")
_PCIE5 = "PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes = about 63 GB/s per direction"
_NVLINK_AR = ("assumption: about 8 us per small all-reduce with sglang's custom all-reduce over NVLink "
              "(one-shot, in-kernel barrier)")
_PCIE_AR = ("assumption: about 30 us per small all-reduce over PCIe: sglang disables its custom all-reduce on "
            "more than two PCIe-only GPUs (srt/distributed/device_communicators/custom_all_reduce.py), so NCCL "
            "rings carry every all-reduce")


def _hw(name: str, bw: float, mem: float, bf16: float, fp8: Optional[float], link_kind: str, link: float,
        ar_latency: float, sheet: str, flops_src: str, link_src: str, ar_src: str) -> Hardware:
    return Hardware(name=name, mem_bandwidth=bw, memory_bytes=mem, peak_bf16_flops=bf16, peak_fp8_flops=fp8,
                    interconnect=link_kind, link_bandwidth=link, allreduce_latency_s=ar_latency,
                    sources={"mem_bandwidth": sheet, "memory_bytes": sheet, "peak_bf16_flops": flops_src,
                             "peak_fp8_flops": flops_src, "link_bandwidth": link_src, "allreduce_latency_s": ar_src})


HARDWARE: dict[str, Callable[[], Hardware]] = {
    "h100-sxm": lambda: _hw("H100 SXM", 3.35 * TB, 80 * GB, 989e12, 1979e12, "nvlink", 450 * GB, 8e-6,
                            _H100, _H100, f"{_H100}: 900 GB/s total = 450 GB/s per direction", _NVLINK_AR),
    "h200": lambda: _hw("H200 SXM", 4.8 * TB, 141 * GB, 989e12, 1979e12, "nvlink", 450 * GB, 8e-6,
                        _H200, _H200, f"{_H200}: 900 GB/s total = 450 GB/s per direction", _NVLINK_AR),
    "b200": lambda: _hw("B200", 8 * TB, 180 * GB, 2250e12, 4500e12, "nvlink", 900 * GB, 8e-6,
                        _B200, _B200, f"{_B200}: 1.8 TB/s total = 900 GB/s per direction", _NVLINK_AR),
    "a100-sxm": lambda: _hw("A100 80GB SXM", 2.039 * TB, 80 * GB, 312e12, None, "nvlink", 300 * GB, 8e-6, _A100,
                            _A100, f"{_A100}: 600 GB/s total = 300 GB/s per direction", _NVLINK_AR),
    "rtx-pro-6000-blackwell": lambda: _hw("RTX PRO 6000 Blackwell (PCIe)", 1.792 * TB, 96 * GB, 0.5e15, 1.0e15,
                                          "pcie", 63 * GB, 30e-6, _RTX6000, _RTX6000_FLOPS, _PCIE5, _PCIE_AR),
}


def hardware_preset(name: str) -> Hardware:
    """A GPU by its preset name; an unknown name lists the known ones."""
    try:
        return HARDWARE[name]()
    except KeyError:
        raise PerfModelError(f"unknown hardware '{name}'; known: {', '.join(sorted(HARDWARE))}") from None


# ---------------------------------------------------------------------------------------------- model configs
def load_config(path_or_name: str | Path) -> tuple[dict[str, Any], str]:
    """(config dict, where it came from) for a config.json path, or the name of a stored config (data/configs)."""
    path = Path(path_or_name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        stored = CONFIG_DIR / f"{path_or_name}.json"
        if not stored.is_file():
            known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))
            raise PerfModelError(f"config '{path_or_name}' is neither a config.json (or a folder holding one) nor "
                                 f"a stored config ({known})")
        path = stored
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfModelError(f"cannot read config {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PerfModelError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise PerfModelError(f"{path}: a config.json must be a JSON object")
    return data, str(data.get("_source") or path)


def stored_model(name: str, label: Optional[str] = None) -> ModelArch:
    cfg, source = load_config(name)
    return model_from_config(cfg, label or name, source)


def kimi_k25() -> ModelArch:
    """Kimi-K2.5's text backbone (DeepseekV3ForCausalLM inside KimiK25ForConditionalGeneration), INT4 experts."""
    return stored_model("kimi-k2.5", "Kimi-K2.5 (INT4 experts)")


def kimi_k25_eagle3_drafter() -> ModelArch:
    """AQ-MedAI/Kimi-K25-eagle3 (LlamaForCausalLMEagle3: hidden 7168, one layer, draft vocabulary 32000); its head
    layout and MLP width are not published and follow the EAGLE-3 drafter rule (``eagle3_drafter``)."""
    return with_name(eagle3_drafter(kimi_k25(), 32000, "AQ-MedAI/Kimi-K25-eagle3 config (hidden 7168, 1 layer, "
                                                       "draft_vocab_size 32000); head layout assumed"),
                     "Kimi-K2.5 EAGLE-3 drafter")


def tiny_kimi(num_layers: int = 4) -> ModelArch:
    """The cpu profile's tiny Kimi-K2.5-shaped target, read from the tiny model generator's own config."""
    from eagle3lab.runtime.tinymodel.configs import text_config

    cfg = {**text_config(num_layers), "torch_dtype": "bfloat16"}
    return model_from_config(cfg, "tiny Kimi-K2.5 (cpu profile)", "eagle3lab.runtime.tinymodel.configs.text_config")


# -------------------------------------------------------------------------------------------- speculative flags
def speculative_flags(steps: int, topk: int, draft_tokens: int, draft_model_path: str = "(cost model: no launch)"):
    """The EAGLE flags in the object the server launch uses (``runtime.speculative.SpeculativeSpec``)."""
    from eagle3lab.runtime.speculative import SpeculativeSpec

    return SpeculativeSpec(draft_model_path=draft_model_path, algorithm="EAGLE3", num_steps=steps, eagle_topk=topk,
                           num_draft_tokens=draft_tokens)


def profile_speculative_spec(profile_name: str):
    """The speculative flags of a profile, built by the same function that builds its server launch."""
    from eagle3lab.runtime.deployment import Models, server_spec
    from eagle3lab.runtime.profiles import load_profile

    profile = load_profile(profile_name)
    # flags only: the checkpoints need not be on disk (a GPU profile's are fetched separately, with fetch-models)
    return server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=True).speculative


# ------------------------------------------------------------------------------------------- the cpu profile
def measure_copy_bandwidth(nbytes: int = 256 * 1024**2, repeats: int = 3) -> float:
    """Bytes/s of a large numpy copy on this machine (read + write counted), best of ``repeats``."""
    if nbytes < 1024 or repeats < 1:
        raise PerfModelError(f"bandwidth probe: need nbytes >= 1024 and repeats >= 1, got {nbytes}, {repeats}")
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / max(best, 1e-9)


def cpu_hardware(mem_bandwidth: Optional[float] = None) -> Hardware:
    """This machine as the cost model sees it: measured copy bandwidth, no tensor cores, no interconnect."""
    bw = mem_bandwidth if mem_bandwidth is not None else measure_copy_bandwidth()
    measured = ("measured: numpy copy bandwidth on this machine (presets.measure_copy_bandwidth)"
                if mem_bandwidth is None else "given")
    return Hardware(name="this machine (cpu)", mem_bandwidth=bw, memory_bytes=24 * 1024**3, peak_bf16_flops=5e10,
                    peak_fp8_flops=None, interconnect="none", link_bandwidth=1.0, allreduce_latency_s=1e-9,
                    sources={"mem_bandwidth": measured, "memory_bytes": "24 GiB RAM of this machine",
                             "peak_bf16_flops": "assumption: about 50 GFLOP/s BF16 on two cores",
                             "peak_fp8_flops": "no FP8 units", "link_bandwidth": "TP 1: unused",
                             "allreduce_latency_s": "TP 1: unused"})


# -------------------------------------------------------------------------------------------- the incident
INCIDENT_PROFILE = "blackwell-8x"


def _reported_mem_fraction() -> float:
    from eagle3lab.report import incident

    return incident.MEM_FRACTION.value


def _incident_profile():
    from eagle3lab.runtime.profiles import load_profile

    return load_profile(INCIDENT_PROFILE)


# The incident's TP and benchmark workload, read from its profile (params/blackwell-8x.yaml) so the model and the
# launch can never disagree; the memory fraction is the engineer's reported flag (incident.MEM_FRACTION).
_INCIDENT = _incident_profile()
INCIDENT_TP = _INCIDENT.tp_size
INCIDENT_MEM_FRACTION = _reported_mem_fraction()
INCIDENT_CONTEXT_LEN = _INCIDENT.bench_input_len + _INCIDENT.bench_output_len / 2
INCIDENT_CONTEXT_SOURCE = (f"assumption: mean context during decode of the {_INCIDENT.name} benchmark "
                           f"(params/{_INCIDENT.name}.yaml: {_INCIDENT.bench_input_len} prompt tokens + half of "
                           f"{_INCIDENT.bench_output_len} output tokens); the engineer did not report the workload")
DEFAULT_ACCEPT_LENGTHS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def incident_spec():
    """The incident's EAGLE flags, from the blackwell-8x profile through the launch's own builder."""
    return profile_speculative_spec(INCIDENT_PROFILE)


def incident_deployment(hardware: str = "rtx-pro-6000-blackwell", context_len: float = INCIDENT_CONTEXT_LEN,
                        engine: Optional[Engine] = None) -> Deployment:
    """Kimi-K2.5 and its drafter on 8 GPUs, overhead calibrated on the engineer's reported 63.6 tok/s.

    On another GPU the same calibration is applied (same software stack); that is an assumption and says so.
    """
    from eagle3lab.report import incident

    target, drafter = kimi_k25(), kimi_k25_eagle3_drafter()
    pcie = Deployment(target, drafter, hardware_preset("rtx-pro-6000-blackwell"), INCIDENT_TP,
                      engine or sglang_engine(), context_len)
    pcie = calibrate_baseline(pcie, incident.SINGLE_STREAM.value, incident.SOURCE)
    if hardware == "rtx-pro-6000-blackwell":
        return pcie
    same = ("assumption: the kernel overhead calibrated on the RTX PRO 6000 deployment (same software stack, "
            "CUDA graphs on)")
    return replace(pcie, hardware=hardware_preset(hardware),
                   engine=pcie.engine.with_(same, kernel_overhead_s=pcie.engine.kernel_overhead_s))


def predict_incident(context_len: float = INCIDENT_CONTEXT_LEN,
                     accept_lengths: Sequence[float] = DEFAULT_ACCEPT_LENGTHS) -> list[DeploymentPrediction]:
    """The model's predictions for the incident's deployment and for the same on 8x H200."""
    spec = incident_spec()
    return [predict_capacity_limited(incident_deployment(hw, context_len), spec, INCIDENT_MEM_FRACTION,
                                     accept_lengths) for hw in ("rtx-pro-6000-blackwell", "h200")]


# ------------------------------------------------------------------------------------------- sensitivity
# How each changeable assumption is named in a table: label, the factor to its display unit, the unit.
_CHANGE_LABELS: dict[str, tuple[str, float, str]] = {
    "context_len": ("context", 1.0, "tokens"),
    "allreduce_latency_s": ("all-reduce latency", 1e6, "us"),
    "bandwidth_efficiency": ("bandwidth efficiency", 1.0, ""),
    "cpu_forward_prep_s": ("CPU prep per pass", 1e3, "ms"),
    "spec_cycle_extra_s": ("extra time per EAGLE cycle", 1e3, "ms"),
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
)
INCIDENT_VARIATIONS: dict[str, dict[str, float]] = {describe_change(c): c for c in INCIDENT_CHANGES}


def incident_sensitivity(variations: Mapping[str, Mapping[str, float]] = INCIDENT_VARIATIONS,
                         accept_lengths: Sequence[float] = (2.0, 3.0, 4.0)) -> list[dict[str, Any]]:
    """The incident prediction again with one assumption changed at a time (re-calibrated on 63.6 tok/s each
    time), so a reader sees which conclusions survive the assumptions and where they flip."""
    from eagle3lab.report import incident

    hw_fields = set(Hardware.__dataclass_fields__)
    engine_fields = set(Engine.__dataclass_fields__)
    spec = incident_spec()
    rows = []
    for name, change in variations.items():
        change = dict(change)
        context = change.pop("context_len", INCIDENT_CONTEXT_LEN)
        unknown = set(change) - hw_fields - engine_fields
        if unknown:
            raise PerfModelError(f"sensitivity '{name}': unknown parameter(s) {sorted(unknown)}")
        hw = hardware_preset("rtx-pro-6000-blackwell")
        hw_change = {k: v for k, v in change.items() if k in hw_fields}
        engine_change = {k: v for k, v in change.items() if k in engine_fields}
        if hw_change:
            hw = hw.with_(f"sensitivity: {name}", **hw_change)
        engine = sglang_engine()
        if engine_change:
            engine = engine.with_(f"sensitivity: {name}", **engine_change)
        dep = Deployment(kimi_k25(), kimi_k25_eagle3_drafter(), hw, INCIDENT_TP, engine, context)
        dep = calibrate_baseline(dep, incident.SINGLE_STREAM.value, f"{incident.SOURCE}; {name}")
        p = predict_capacity_limited(dep, spec, INCIDENT_MEM_FRACTION, accept_lengths)
        rows.append({"variation": name, "changed": dict(variations[name]), **p.to_dict()})
    return rows


def _baseline_peak_at(context_len: float) -> tuple[float, int]:
    from eagle3lab.report.costmodel.capacity import kv_capacity_requests, peak
    from eagle3lab.report.costmodel.cycle import plain_step

    dep = incident_deployment("rtx-pro-6000-blackwell", context_len)
    limit = kv_capacity_requests(dep, INCIDENT_MEM_FRACTION)
    return peak(lambda b: b / plain_step(dep, b).total_s, max(1, limit))


def context_matching_reported_peak(low: float = 128, high: float = 16384) -> Optional[dict[str, Any]]:
    """The mean decode context at which the model's baseline peak equals the engineer's reported peak, and the
    whole incident prediction there. The reported peak is the one incident number the calibration did not use;
    the context is the assumption it depends on most (more context, fewer requests fit). None if no context in
    [low, high] gives the reported peak."""
    from eagle3lab.report import incident

    target = incident.PEAK.value
    if not _baseline_peak_at(low)[0] >= target >= _baseline_peak_at(high)[0]:
        return None
    for _ in range(40):  # the peak falls as the context grows: bisect to one token
        if high - low <= 1:
            break
        mid = (low + high) / 2
        low, high = (mid, high) if _baseline_peak_at(mid)[0] >= target else (low, mid)
    context = float(math.floor(low))
    dep, spec = incident_deployment("rtx-pro-6000-blackwell", context), incident_spec()
    capped = predict_capacity_limited(dep, spec, INCIDENT_MEM_FRACTION, (2.0, 3.0, 4.0))
    uncapped = predict_capacity_limited(dep, spec, INCIDENT_MEM_FRACTION, (2.0, 3.0, 4.0), spec_max_running_requests=0)
    return {"context_len": context, "reported_peak_tok_s": target,
            "note": "the context at which the modelled baseline peak reaches the reported peak",
            "predicted": capped.to_dict(), "predicted_without_request_cap": uncapped.to_dict()}


def incident_cycle_breakdown(context_len: float = INCIDENT_CONTEXT_LEN,
                             batches: Sequence[int] = (1, 8, 48)) -> list[dict[str, Any]]:
    """Per batch size on the incident's deployment: the plain step and the EAGLE cycle by part (ms), how many plain
    steps one verify pass costs, and the distinct experts each touches per MoE layer. Plain data for the report's
    sentences about why verifying is not free (modelled)."""
    from eagle3lab.report.costmodel.cycle import plain_step, spec_cycle

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


def incident_report(context_len: float = INCIDENT_CONTEXT_LEN) -> dict[str, Any]:
    """JSON-ready: reported figures next to the model's predictions, break-even, sensitivity, sources."""
    from eagle3lab.report import incident

    pcie, nvlink = predict_incident(context_len)
    dep = incident_deployment("rtx-pro-6000-blackwell", context_len)
    return {
        "reported": [vars(r) for r in incident.REPORTED],
        "context_len": context_len, "context_source": INCIDENT_CONTEXT_SOURCE,
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
        "context_matching_reported_peak": context_matching_reported_peak(),
        "sources": {"model": dep.target.source, "drafter": dep.drafter.source,
                    "rtx_pro_6000_x8": dict(dep.hardware.sources), "engine": dict(dep.engine.sources),
                    "h200_x8": dict(hardware_preset("h200").sources)},
    }


# ------------------------------------------------------------------------------------------- a measured run
def run_deployment(profile, report=None, mem_bandwidth: Optional[float] = None) -> tuple[Deployment, str]:
    """The deployment a profile's run measured, calibrated on its own measured plain single-stream decode step if
    the bench report has one (else, on a GPU profile, on the incident's reported rate). Returns it with a sentence
    saying what it was calibrated on."""
    from eagle3lab.report import incident
    from eagle3lab.report.plots.model import single_stream_step_s

    context = profile.bench_input_len + profile.bench_output_len / 2
    if profile.device == "cpu":
        from eagle3lab.runtime.tinymodel.configs import draft_config

        target = tiny_kimi(profile.model_num_layers)
        drafter = drafter_from_config(draft_config(profile.model_num_layers),
                                      "eagle3lab.runtime.tinymodel.configs.draft_config")
        dep = Deployment(target, drafter, cpu_hardware(mem_bandwidth), profile.tp_size, sglang_engine(), context)
    else:
        target = kimi_k25()
        dep = Deployment(target, kimi_k25_eagle3_drafter(), hardware_preset("rtx-pro-6000-blackwell"),
                         profile.tp_size, sglang_engine(), context)
    step = single_stream_step_s(report) if report is not None else None
    if step:
        where = f"measured plain single-stream step {step * 1e3:.2f} ms ({profile.name}, {report.date})"
        return calibrate_baseline(dep, 1.0 / step, where), where
    if profile.device == "cpu":
        raise PerfModelError(f"profile '{profile.name}': no measured plain single-stream point to calibrate the "
                             "cost model on; include concurrency 1 in bench_concurrency")
    return calibrate_baseline(dep, incident.SINGLE_STREAM.value, incident.SOURCE), \
        f"the engineer's reported {incident.SINGLE_STREAM.value:g} tok/s (no single-stream point measured here)"


def run_break_even(profile, report=None, batch: Optional[int] = None,
                   mem_bandwidth: Optional[float] = None) -> tuple[float, str]:
    """(break-even acceptance length, where it comes from) for a profile's run: the acceptance EAGLE-3 needs to
    match plain decoding at ``batch`` requests (default: the largest concurrency the EAGLE-3 arm measured, else 1).
    This is what ``diagnostics.rule_acceptance_below_break_even`` compares the measured acceptance with."""
    from eagle3lab.report.costmodel.cycle import break_even_accept_length
    from eagle3lab.runtime.speculative import SpeculativeSpec

    dep, calibrated = run_deployment(profile, report, mem_bandwidth)
    if batch is None:
        from eagle3lab.bench.sweep import ARM_KIND_EAGLE3

        measured = [p.concurrency for arm in (report.arms if report is not None else [])
                    if arm.kind == ARM_KIND_EAGLE3 for p in arm.measured_points()]
        batch = max(measured) if measured else 1
    spec = SpeculativeSpec.from_profile(profile, profile.draft_model)
    value = break_even_accept_length(dep, spec, batch)
    return value, (f"modelled at {batch} request{'s' if batch > 1 else ''}, {dep.target.name} on {dep.tp}x "
                   f"{dep.hardware.name}, context {dep.context:g}; calibrated on {calibrated}")
