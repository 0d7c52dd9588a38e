"""Named inputs for the cost model: Kimi-K2.5 and its drafter, the tiny cpu-profile model, hardware presets.

Kept apart from the equations (``perfmodel``) so that every number someone may want to challenge sits in one
short file next to where it came from. Values marked "assumption" are not published anywhere; the figures
show how the conclusions move with them.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from eagle3lab.errors import PerfModelError
from eagle3lab.report.perfmodel import (GIB, DeploymentPrediction, DraftModelConfig, Hardware, MoEModelConfig, SpecConfig,
                                 calibrate_overhead, predict_deployment)

_MEGATRON_KIMI = ("NVIDIA Megatron-Bridge KimiK2Provider (https://docs.nvidia.com/nemo/megatron-bridge/latest/"
                  "apidocs/bridge/bridge.models.kimi.kimi_provider.html)")
_DSV3_MLA = ("DeepSeek-V3 config, kept by Kimi-K2 ('DeepSeek-V3-compatible config', NeMo AutoModel KimiK2Config; "
             "DeepseekV3Config defaults "
             "https://docs.vllm.ai/en/v0.11.0/api/vllm/transformers_utils/configs/deepseek_v3.html)")
_K25_ON_K2 = ("Kimi-K2.5 is continual pretraining atop Kimi-K2-Base (sgl-project/sgl-cookbook "
              "docs/autoregressive/Moonshotai/Kimi-K2.5.md)")
_INT4 = ("Kimi-K2.5 ships native INT4 routed experts, compressed-tensors group_size=32 "
         "(ROCm/ATOM recipes/Kimi-K2.5.md); attention, dense layer, shared expert, embeddings and lm_head stay BF16")


def kimi_k25() -> MoEModelConfig:
    """Kimi-K2.5's text backbone (DeepseekV3ForCausalLM inside KimiK25ForConditionalGeneration)."""
    return MoEModelConfig(
        name="Kimi-K2.5 (INT4 experts)",
        num_layers=61, first_k_dense=1, hidden=7168, num_heads=64,
        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        dense_intermediate=18432, moe_intermediate=2048,
        n_routed_experts=384, experts_per_token=8, n_shared_experts=1, vocab_size=163840,
        dense_bytes_per_param=2.0, expert_weight_bits=4.0, expert_group_size=32, expert_scale_bytes=2.0,
        kv_bytes_per_elem=2.0,
        sources={
            "num_layers": f"61 layers: {_MEGATRON_KIMI}; {_K25_ON_K2}",
            "first_k_dense": "first_k_dense_replace 1: Kimi-K2 has 1 dense layer of 61 "
                             "(hyper-accel/tiny-random-kimi-k2 config.json, unsloth Kimi-K2-Instruct card)",
            "hidden": f"hidden 7168: {_MEGATRON_KIMI}",
            "num_heads": f"64 attention heads: {_MEGATRON_KIMI}",
            "q_lora_rank": f"q_lora_rank 1536: {_DSV3_MLA}",
            "kv_lora_rank": f"kv_lora_rank 512: {_DSV3_MLA}",
            "qk_nope_head_dim": f"qk_nope_head_dim 128: {_DSV3_MLA}",
            "qk_rope_head_dim": f"qk_rope_head_dim 64: {_DSV3_MLA}",
            "v_head_dim": f"v_head_dim 128: {_DSV3_MLA}",
            "dense_intermediate": f"ffn_hidden_size 18432: {_MEGATRON_KIMI}",
            "moe_intermediate": f"moe_ffn_hidden_size 2048: {_MEGATRON_KIMI}",
            "n_routed_experts": f"384 routed experts: {_MEGATRON_KIMI}",
            "experts_per_token": f"moe_router_topk 8: {_MEGATRON_KIMI}",
            "n_shared_experts": f"one shared expert of 2048 (moe_shared_expert_intermediate_size): {_MEGATRON_KIMI}",
            "vocab_size": "vocab 163840: Kimi tokenizer (drafter AQ-MedAI/Kimi-K25-eagle3 vocab 163840, "
                          "shared/FINDINGS.md)",
            "dense_bytes_per_param": f"BF16: {_INT4}",
            "expert_weight_bits": f"INT4: {_INT4}",
            "expert_group_size": f"group 32: {_INT4}",
            "expert_scale_bytes": "assumption: compressed-tensors pack-quantized symmetric stores one BF16 "
                                  "weight_scale per group, no zero point",
            "kv_bytes_per_elem": "BF16 KV cache (sglang default kv_cache_dtype auto = model dtype; the incident "
                                 "passed no --kv-cache-dtype)",
        },
    )


def kimi_k25_eagle3_drafter() -> DraftModelConfig:
    """AQ-MedAI/Kimi-K25-eagle3 (LlamaForCausalLMEagle3)."""
    cfg = ("AQ-MedAI/Kimi-K25-eagle3 config (shared/FINDINGS.md: LlamaForCausalLMEagle3, hidden 7168, 1 layer, "
           "draft_vocab 32000, aux layers [2, 30, 58])")
    return DraftModelConfig(
        name="Kimi-K2.5 EAGLE-3 drafter",
        num_layers=1, hidden=7168, num_heads=64, num_kv_heads=8, head_dim=128, intermediate=18432,
        draft_vocab_size=32000, num_aux_layers=3, bytes_per_param=2.0,
        sources={
            "num_layers": cfg, "hidden": cfg, "draft_vocab_size": cfg, "num_aux_layers": cfg,
            "num_heads": "assumption: 64 query heads of 128 like the target; only moves the draft cost (a few % of a "
                         "target step)",
            "num_kv_heads": "assumption: 8 KV heads (Llama-style GQA drafter)",
            "head_dim": "assumption: 128",
            "intermediate": "assumption: 18432 like the target's dense MLP",
            "bytes_per_param": "BF16 drafter checkpoint",
        },
    )


def incident_spec() -> SpecConfig:
    """--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 (incident flags)."""
    return SpecConfig(num_steps=3, topk=1)


_CUSTOM_AR_OFF = ("sglang disables its custom all-reduce on more than two PCIe-only GPUs "
                  "(srt/distributed/device_communicators/custom_all_reduce.py), so NCCL carries every all-reduce")
_OVERHEAD_PENDING = "placeholder until calibrate_overhead() is given a measured single-stream step time"
_DRAFT_OVERHEAD = "assumption: CUDA-graph replay of the 1-layer drafter plus its top-k sampling, about 0.3 ms"
_SPEC_OVERHEAD = ("assumption: 1 ms per cycle for verify bookkeeping and scheduler CPU time that the overlap "
                  "scheduler hides in plain decoding but sglang 0.5.9 turns off for EAGLE (server_args.py)")


def rtx_pro_6000_x8(step_overhead_s: float = 0.0) -> Hardware:
    """8x RTX PRO 6000 Blackwell (96 GB GDDR7) over PCIe, no NVLink: the incident's machine."""
    sheet = "NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7, 1792 GB/s"
    return Hardware(
        name="8x RTX PRO 6000 Blackwell (PCIe)", tp_size=8,
        mem_bandwidth=1.792e12, bandwidth_efficiency=0.8,
        peak_flops=5.0e14, flops_efficiency=0.5,
        allreduce_latency_s=30e-6, allreduce_bus_bw=20e9,
        gpu_memory_bytes=96 * GIB,
        step_overhead_s=step_overhead_s, draft_forward_overhead_s=0.3e-3, spec_cycle_overhead_s=1.0e-3,
        sources={
            "tp_size": "--tp-size 8 (incident)",
            "mem_bandwidth": sheet,
            "bandwidth_efficiency": "assumption: 80% of datasheet bandwidth when streaming weights",
            "peak_flops": "assumption: ~500 TFLOP/s dense BF16 tensor (datasheet 4 PFLOPS FP4 sparse / 2 dense / 4 "
                          "for BF16)",
            "flops_efficiency": "assumption: 50% of peak for small-M MoE GEMMs",
            "allreduce_latency_s": f"assumption: ~30 us per small NCCL all-reduce across 8 PCIe GPUs; {_CUSTOM_AR_OFF}",
            "allreduce_bus_bw": "assumption: ~20 GB/s NCCL ring bus bandwidth over PCIe Gen5 through host bridges",
            "gpu_memory_bytes": sheet,
            "step_overhead_s": _OVERHEAD_PENDING if step_overhead_s == 0 else "given",
            "draft_forward_overhead_s": _DRAFT_OVERHEAD,
            "spec_cycle_overhead_s": _SPEC_OVERHEAD,
        },
    )


def h200_x8(step_overhead_s: float = 0.0) -> Hardware:
    """8x H200 (141 GB HBM3e, 4.8 TB/s) on NVLink: the comparison a reader usually has in mind."""
    sheet = "NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s, 989 TFLOP/s dense BF16"
    return Hardware(
        name="8x H200 (NVLink)", tp_size=8,
        mem_bandwidth=4.8e12, bandwidth_efficiency=0.8,
        peak_flops=9.89e14, flops_efficiency=0.5,
        allreduce_latency_s=8e-6, allreduce_bus_bw=300e9,
        gpu_memory_bytes=141e9,
        step_overhead_s=step_overhead_s, draft_forward_overhead_s=0.3e-3, spec_cycle_overhead_s=1.0e-3,
        sources={
            "tp_size": "TP 8, same deployment shape as the incident",
            "mem_bandwidth": sheet,
            "bandwidth_efficiency": "assumption: 80% of datasheet bandwidth when streaming weights",
            "peak_flops": sheet,
            "flops_efficiency": "assumption: 50% of peak for small-M MoE GEMMs",
            "allreduce_latency_s": "assumption: ~8 us per small all-reduce with sglang's custom all-reduce over full "
                                   "NVLink",
            "allreduce_bus_bw": "assumption: ~300 GB/s achievable NVLink bus bandwidth",
            "gpu_memory_bytes": sheet,
            "step_overhead_s": _OVERHEAD_PENDING if step_overhead_s == 0 else "given",
            "draft_forward_overhead_s": _DRAFT_OVERHEAD,
            "spec_cycle_overhead_s": _SPEC_OVERHEAD,
        },
    )


# ------------------------------------------------------------------------------------------ the cpu profile
_HF_KEYS = {
    "num_layers": "num_hidden_layers", "first_k_dense": "first_k_dense_replace", "hidden": "hidden_size",
    "num_heads": "num_attention_heads", "q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank",
    "qk_nope_head_dim": "qk_nope_head_dim", "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim",
    "dense_intermediate": "intermediate_size", "moe_intermediate": "moe_intermediate_size",
    "n_routed_experts": "n_routed_experts", "experts_per_token": "num_experts_per_tok",
    "n_shared_experts": "n_shared_experts", "vocab_size": "vocab_size",
}


def moe_config_from_hf(cfg: Mapping[str, Any], name: str, source: str, dense_bytes_per_param: float = 2.0,
                       expert_weight_bits: float = 16.0, expert_group_size: int = 1, expert_scale_bytes: float = 0.0,
                       kv_bytes_per_elem: float = 2.0) -> MoEModelConfig:
    """A MoEModelConfig from a DeepSeek-V3 ``config.json`` dict (or a Kimi-K2.5 one, via its ``text_config``).

    Storage (dtype, quantisation) is not in the shape keys, so it is passed in; defaults are all-BF16.
    """
    text = cfg.get("text_config", cfg)
    missing = [hf for hf in _HF_KEYS.values() if hf not in text]
    if missing:
        raise PerfModelError(f"{source}: DeepSeek-V3 config lacks {', '.join(missing)}; pass a deepseek_v3 text config")
    values = {ours: text[hf] for ours, hf in _HF_KEYS.items()}
    storage = {"dense_bytes_per_param": dense_bytes_per_param, "expert_weight_bits": expert_weight_bits,
               "expert_group_size": expert_group_size, "expert_scale_bytes": expert_scale_bytes,
               "kv_bytes_per_elem": kv_bytes_per_elem}
    sources = {ours: f"{hf} in {source}" for ours, hf in _HF_KEYS.items()}
    sources.update({key: f"given with {source}" for key in storage})
    return MoEModelConfig(name=name, **values, **storage, sources=sources)


def tiny_kimi(num_layers: int = 4) -> MoEModelConfig:
    """The cpu profile's tiny Kimi-K2.5-shaped target, all BF16, read from the tiny model generator's config."""
    from eagle3lab.runtime.tinymodel.configs import text_config

    return moe_config_from_hf(text_config(num_layers), "tiny Kimi-K2.5 (cpu profile)",
                              "eagle3lab.runtime.tinymodel.configs.text_config")


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


def cpu_preset(measured_step_s: float, context_len: float, model: MoEModelConfig | None = None,
               mem_bandwidth: float | None = None, measured_where: str = "cpu profile baseline") -> Hardware:
    """This machine (TP 1, no GPU) with its fixed overhead calibrated from the cpu profile's measured step time.

    The tiny model's weights are a few hundred kB, so nearly all of a CPU decode step is fixed overhead
    (Python scheduling, torch dispatch); the calibration makes that explicit instead of hiding it.
    """
    model = model or tiny_kimi()
    bw = mem_bandwidth if mem_bandwidth is not None else measure_copy_bandwidth()
    base = Hardware(
        name="this machine (cpu, 2 cores)", tp_size=1,
        mem_bandwidth=bw, bandwidth_efficiency=1.0, peak_flops=5.0e10, flops_efficiency=0.5,
        allreduce_latency_s=0.0, allreduce_bus_bw=1.0, gpu_memory_bytes=24 * GIB,
        step_overhead_s=0.0, draft_forward_overhead_s=0.0, spec_cycle_overhead_s=0.0,
        sources={
            "tp_size": "cpu profile: --tp-size 1",
            "mem_bandwidth": "measured: numpy copy bandwidth on this machine "
                             "(measure_copy_bandwidth)" if mem_bandwidth is None else "given",
            "bandwidth_efficiency": "measured bandwidth is already achievable bandwidth",
            "peak_flops": "assumption: ~50 GFLOP/s BF16 on 2 cores",
            "flops_efficiency": "assumption: 50%",
            "allreduce_latency_s": "TP 1: no all-reduce",
            "allreduce_bus_bw": "TP 1: unused",
            "gpu_memory_bytes": "24 GiB RAM of this machine",
            "step_overhead_s": _OVERHEAD_PENDING,
            "draft_forward_overhead_s": "EAGLE-3 cannot run on CPU in sglang 0.5.9 (shared/FINDINGS.md): no draft cost",
            "spec_cycle_overhead_s": "EAGLE-3 cannot run on CPU in sglang 0.5.9: no cycle cost",
        },
    )
    return calibrate_overhead(model, base, measured_step_s, context_len,
                              f"calibrated: measured single-stream step {measured_step_s * 1e3:.3f} ms "
                              f"({measured_where})")


# ------------------------------------------------------------------------------------------- the incident
INCIDENT_CONTEXT_LEN = 1024 + 128
INCIDENT_CONTEXT_SOURCE = ("assumption: mean context during decode of the blackwell-8x benchmark "
                           "(params/blackwell-8x.yaml: 1024 prompt tokens + half of 256 output tokens); "
                           "the engineer did not report the workload")
INCIDENT_MEM_FRACTION = 0.9  # --mem-fraction-static 0.9 (incident flags)
DEFAULT_ACCEPT_LENGTHS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def incident_hardware(context_len: float = INCIDENT_CONTEXT_LEN) -> tuple[Hardware, Hardware]:
    """(RTX PRO 6000 x8 calibrated on the reported 63.6 tok/s, H200 x8 with the same fixed overhead)."""
    from eagle3lab.report import incident

    m = kimi_k25()
    pcie = calibrate_overhead(m, rtx_pro_6000_x8(), incident.single_stream_step_s(), context_len,
                              f"calibrated: 1/{incident.SINGLE_STREAM.value} tok/s single stream, {incident.SOURCE}")
    same = ("assumption: same fixed overhead as the calibrated RTX PRO 6000 deployment "
            "(same software stack, CUDA graphs on)")
    nvlink = h200_x8().with_overhead(pcie.step_overhead_s, same)
    return pcie, nvlink


def predict_incident(context_len: float = INCIDENT_CONTEXT_LEN,
                     accept_lengths: Sequence[float] = DEFAULT_ACCEPT_LENGTHS) -> list[DeploymentPrediction]:
    """The model's predictions for the incident's deployment and for the same on 8x H200."""
    m, d, spec = kimi_k25(), kimi_k25_eagle3_drafter(), incident_spec()
    return [predict_deployment(m, d, hw, spec, context_len, INCIDENT_MEM_FRACTION, accept_lengths)
            for hw in incident_hardware(context_len)]


# ------------------------------------------------------------------------------------------- sensitivity
INCIDENT_VARIATIONS: dict[str, dict[str, float]] = {
    "as stated": {},
    "context 512": {"context_len": 512},
    "context 2048": {"context_len": 2048},
    "all-reduce bus 40 GB/s": {"allreduce_bus_bw": 40e9},
    "all-reduce latency 15 us": {"allreduce_latency_s": 15e-6},
    "all-reduce latency 60 us": {"allreduce_latency_s": 60e-6},
    "bandwidth efficiency 0.6": {"bandwidth_efficiency": 0.6},
    "bandwidth efficiency 0.95": {"bandwidth_efficiency": 0.95},
    "spec cycle overhead 3 ms": {"spec_cycle_overhead_s": 3e-3},
}


def incident_sensitivity(variations: Mapping[str, Mapping[str, float]] = INCIDENT_VARIATIONS,
                         accept_lengths: Sequence[float] = (2.0, 3.0, 4.0)) -> list[dict[str, Any]]:
    """The incident prediction again with one assumption changed at a time (re-calibrated on 63.6 tok/s each
    time), so a reader sees which conclusions survive the assumptions."""
    from dataclasses import replace

    from eagle3lab.report import incident

    m, d, spec = kimi_k25(), kimi_k25_eagle3_drafter(), incident_spec()
    rows = []
    for name, change in variations.items():
        change = dict(change)
        context = change.pop("context_len", INCIDENT_CONTEXT_LEN)
        unknown = set(change) - set(Hardware.__dataclass_fields__)
        if unknown:
            raise PerfModelError(f"sensitivity '{name}': unknown hardware parameter(s) {sorted(unknown)}")
        base = replace(rtx_pro_6000_x8(), **change)
        hw = calibrate_overhead(m, base, incident.single_stream_step_s(), context, f"calibrated ({name})")
        p = predict_deployment(m, d, hw, spec, context, INCIDENT_MEM_FRACTION, accept_lengths)
        rows.append({"variation": name, **p.to_dict()})
    return rows


def incident_report(context_len: float = INCIDENT_CONTEXT_LEN) -> dict[str, Any]:
    """JSON-ready: reported figures next to the model's predictions, break-even, sensitivity, sources."""
    from eagle3lab.report import incident

    pcie, nvlink = predict_incident(context_len)
    return {
        "reported": [vars(r) for r in incident.REPORTED],
        "context_len": context_len, "context_source": INCIDENT_CONTEXT_SOURCE,
        "predicted": {"rtx_pro_6000_x8": pcie.to_dict(), "h200_x8": nvlink.to_dict()},
        "side_by_side": {
            "single_stream_tok_s": {"reported": incident.SINGLE_STREAM.value,
                                    "predicted": pcie.single_stream_tok_s,
                                    "note": "calibration target: the fixed overhead is fitted to it",
                                    "bandwidth_and_allreduce_floor": pcie.floor_single_stream_tok_s},
            "peak_tok_s": {"reported": incident.PEAK.value, "predicted": pcie.baseline_peak_tok_s,
                           "predicted_at_requests": pcie.baseline_peak_batch,
                           "note": "out of sample: KV-limited batch at the assumed context"},
        },
        "break_even_accept_length": {"single_stream": pcie.break_even_single_stream,
                                     f"at_{pcie.spec_max_batch}_requests": pcie.break_even_at_spec_max_batch},
        "sensitivity": incident_sensitivity(),
        "sources": {"model": dict(kimi_k25().sources), "drafter": dict(kimi_k25_eagle3_drafter().sources),
                    "rtx_pro_6000_x8": dict(incident_hardware(context_len)[0].sources),
                    "h200_x8": dict(incident_hardware(context_len)[1].sources)},
    }
