"""What the serving software adds to the hardware's physics, and how it runs a speculative cycle.

Two kinds of number live here, and each says which it is:
- achieved fractions of datasheet rates (bandwidth, tensor-core FLOP/s) and the GEMM tile that sets how FLOP
  efficiency grows with the token count of a pass: one set for every GPU and engine;
- the engine's own costs: GPU kernel launches per layer and per pass (the fixed per-step overhead that
  ``calibrate_baseline`` fits to a measured single-stream rate), CPU scheduling per step and per request, and the
  structure of an EAGLE cycle (which passes run, over how many tokens, whether the CPU overlaps the GPU).

Engine structure is read from the engines' source: sglang 0.5.9 ``srt/server_args.py`` disables the overlap
scheduler for EAGLE/EAGLE3 unless SGLANG_ENABLE_SPEC_V2 is set; ``srt/speculative/eagle_worker.py`` runs
``num_steps - 1`` draft forwards (``draft_forward``), one target verify over ``num_draft_tokens`` per request, and a
draft extend padded to ``num_steps + 1`` tokens per request (``forward_draft_extend_after_decode``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from eagle3lab.errors import PerfModelError

_SGLANG_SRC = "sglang 0.5.9 python/sglang/srt"
_VLLM_CUSTOM_AR = ("vLLM vllm/distributed/device_communicators/custom_all_reduce.py: custom all-reduce on NVLink, "
                   "disabled on more than two PCIe-only GPUs ('not supported on more than two PCIe-only GPUs')")
# the engine's orchestration between the counted passes: fitted on development sources and frozen by the
# validation protocol, or measured (0 until then, so they need no source of their own)
ORCHESTRATION = ("spec_cycle_extra_s", "spec_step_extra_s", "spec_tp_extra_s")
# terms that are 0 unless measured on the run's own host (they need a source only when set)
MEASURED_ONLY = ("pass_per_request_layer_s",)
CUSTOM_ALLREDUCE_LINKS = ("none", "nvlink", "nvlink+pcie")


def custom_allreduce_on(engine: "Engine", interconnect: str) -> bool:
    """Whether the engine runs its one-shot custom all-reduce on this link kind (AMD's Infinity Fabric curves are the
    library path's, which on ROCm already carries the one-shot kernels: costmodel/data/collectives.yaml)."""
    return interconnect in engine.custom_allreduce.split("+")


@dataclass(frozen=True)
class Engine:
    """A serving engine's costs and its speculative-cycle structure."""

    name: str
    # achieved fractions and the GEMM tile (same for every GPU)
    bandwidth_efficiency: float
    flops_efficiency: float
    tile_tokens: float  # Hockney n_1/2: a GEMM over T rows costs as much compute as T + tile_tokens full rows
    link_efficiency: float
    # GPU launch overhead: kernels per pass times the time one kernel adds beyond its own work
    kernel_overhead_s: float
    kernels_per_dense_layer: int
    kernels_per_moe_layer: int
    extra_kernels_per_mla_layer: int
    kernels_per_pass: int
    kernels_per_draft_step: int  # softmax, top-k and tree selection after every draft forward
    kernels_per_verify: int  # tree build, greedy verify, KV-slot bookkeeping of one cycle
    # CPU work between GPU passes
    cpu_step_s: float  # scheduler work per step that does not grow with the batch
    cpu_per_request_s: float  # per running request per step: output processing, stop checks, batch bookkeeping
    cpu_forward_prep_s: float  # building one pass's inputs and attention metadata
    overlap_baseline: bool  # plain decoding overlaps CPU work with the GPU (sglang's overlap scheduler)
    overlap_spec: bool
    spec_cpu_preps: int  # passes of a speculative cycle whose inputs are prepared after a GPU sync
    extend_tokens: str  # "steps+1": the draft extend is padded to num_steps + 1 tokens per request
    spec_max_running_requests: int  # request cap the engine imposes under speculation (0: none)
    spec_cycle_extra_s: float = 0.0  # orchestration per cycle beyond the counted passes (fitted or measured; 0: none)
    spec_step_extra_s: float = 0.0  # orchestration per draft step beyond the counted passes (fitted or measured)
    spec_tp_extra_s: float = 0.0  # orchestration per cycle per TP rank beyond the first (host syncs across ranks)
    # host work inside a forward pass per running request per layer (a backend that loops over the batch's sequences
    # in Python, such as sglang's torch_native attention); 0 for batched GPU kernels; measured, never fitted
    pass_per_request_layer_s: float = 0.0
    # collectives (costmodel.collectives): the link kinds the engine's one-shot custom all-reduce runs on ("none",
    # "nvlink", "nvlink+pcie"), its size cut-off, and a row count at or under which it runs whatever the size
    custom_allreduce: str = "nvlink"
    custom_allreduce_max_bytes: float = 8 * 1024**2
    custom_allreduce_any_size_rows: int = 0
    # attention backend: the verify pass reads a request's KV cache once per query token (a decode kernel that
    # treats each query token as its own request, vLLM's TRITON_MLA) rather than once per request
    verify_kv_per_query: bool = False
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("name", "sources", "extend_tokens", "custom_allreduce") or f.type in ("bool", bool):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise PerfModelError(f"engine '{self.name}': {f.name} must be a number >= 0, got {value!r}")
            if not str(self.sources.get(f.name, "")).strip() and f.name not in ORCHESTRATION and \
                    not (f.name in MEASURED_ONLY and value == 0):
                raise PerfModelError(f"engine '{self.name}': {f.name} has no source; add one to sources")
        if self.custom_allreduce not in CUSTOM_ALLREDUCE_LINKS:
            raise PerfModelError(f"engine '{self.name}': custom_allreduce must be one of "
                                 f"{', '.join(CUSTOM_ALLREDUCE_LINKS)}, got {self.custom_allreduce!r}")
        if not 0 < self.bandwidth_efficiency <= 1 or not 0 < self.flops_efficiency <= 1:
            raise PerfModelError(f"engine '{self.name}': efficiencies must be in (0, 1]",
                                 parameter="bandwidth_efficiency" if not 0 < self.bandwidth_efficiency <= 1
                                 else "flops_efficiency", problem="out_of_range")

    def with_(self, source: str, **changes: Any) -> "Engine":
        """The same engine with some numbers replaced; ``source`` says where the new numbers come from."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise PerfModelError(f"engine '{self.name}': unknown parameter(s) {sorted(unknown)}",
                                 parameter=sorted(unknown)[0], problem="unknown_parameter")
        return replace(self, **changes, sources={**self.sources, **{k: source for k in changes}})


# ------------------------------------------------------------------------------------------------ constants
# One value each, for every GPU and engine; the justification travels with the number.
COMMON_SOURCES = {
    "bandwidth_efficiency": "physical: memory-bound decode kernels (GEMV, paged attention) sustain about 85% of "
                            "datasheet DRAM bandwidth; the remainder is refresh, page and protocol overhead",
    "flops_efficiency": "physical: large BF16/FP8 tensor-core GEMMs reach about 70% of the dense datasheet peak "
                        "(clock throttling under load, epilogues, wave quantisation)",
    "tile_tokens": "physical: the smallest tensor-core MMA tile is 64 rows (Hopper wgmma m64nNk16; Blackwell "
                   "tcgen05 M=64/128), so a GEMM over T tokens computes about T + 64 rows (Hockney n_1/2 = 64)",
    "link_efficiency": "physical: NCCL/custom all-reduce reach about 80% of the per-direction link bandwidth",
    "kernel_overhead_s": "physical: a kernel node of a replayed CUDA graph adds a few microseconds (launch "
                         "latency, ramp-up, tail) beyond its own memory or compute time; 3 us before calibration",
    "kernels_per_dense_layer": "count: RMSNorm, QKV GEMM, rotary, KV write, attention, O GEMM, all-reduce, fused "
                               "add+RMSNorm, gate_up GEMM, SiLU*mul, down GEMM, all-reduce = 12",
    "kernels_per_moe_layer": "count: the dense layer's 12 minus the dense MLP, plus router GEMM, top-k, token "
                             "sort/align, two grouped expert GEMMs, activation, combine, shared-expert GEMMs = 17",
    "extra_kernels_per_mla_layer": "count: MLA adds q_a/kv_a GEMMs, two latent norms and the absorbed k_b/v_b "
                                   "batched GEMMs = 5",
    "kernels_per_pass": "count: embedding, final norm, lm_head, logits gather, sampling/argmax, output copies = 8",
    "kernels_per_draft_step": "count: softmax, top-k, score accumulation, tree selection, input update = 5",
    "kernels_per_verify": "count (eagle_utils.py): build_tree_kernel_efficient, verify_tree_greedy, accept "
                          "bookkeeping, KV-slot assignment and copies, extend preparation = 14",
    "cpu_step_s": "physical: one Python scheduler iteration (batch bookkeeping, memory pool checks) about 0.2 ms",
    "cpu_per_request_s": "physical: per request per step the Python scheduler appends tokens, checks stop "
                         "conditions and streams output, about 10 us",
    "cpu_forward_prep_s": "physical: building one forward batch and its attention metadata in Python, about 0.3 ms",
    "custom_allreduce_max_bytes": "sglang 0.5.9 srt/distributed/device_communicators/custom_all_reduce.py and vLLM's "
                                  "CustomAllreduce: max_size 8 MiB; larger messages take NCCL",
    "custom_allreduce_any_size_rows": "none: both engines choose by message size only",
}

COMMON: dict[str, Any] = dict(bandwidth_efficiency=0.85, flops_efficiency=0.70, tile_tokens=64.0, link_efficiency=0.80,
              kernel_overhead_s=3e-6, kernels_per_dense_layer=12, kernels_per_moe_layer=17,
              extra_kernels_per_mla_layer=5, kernels_per_pass=8, kernels_per_draft_step=5, kernels_per_verify=14,
              cpu_step_s=0.2e-3, cpu_per_request_s=10e-6, cpu_forward_prep_s=0.3e-3)


def sglang_engine() -> Engine:
    """sglang 0.5.9 with CUDA graphs, EAGLE v1 worker (SGLANG_ENABLE_SPEC_V2 unset), the incident's engine."""
    return Engine(
        name="sglang-0.5", **COMMON, overlap_baseline=True, overlap_spec=False, spec_cpu_preps=3,
        extend_tokens="steps+1", spec_max_running_requests=48,
        sources={**COMMON_SOURCES,
                 "overlap_baseline": f"{_SGLANG_SRC}/server_args.py: disable_overlap_schedule defaults to False",
                 "overlap_spec": f"{_SGLANG_SRC}/server_args.py: 'Overlap scheduler is disabled when spec v2 is "
                                 "off' for EAGLE/EAGLE3",
                 "spec_cpu_preps": f"{_SGLANG_SRC}/speculative/eagle_worker.py: draft, verify and draft-extend "
                                   "batches are each built on the CPU after the previous pass's results are read",
                 "extend_tokens": f"{_SGLANG_SRC}/speculative/eagle_worker.py forward_draft_extend_after_decode: "
                                  "num_tokens_per_req = speculative_num_steps + 1",
                 "spec_max_running_requests": f"{_SGLANG_SRC}/server_args.py: EAGLE/EAGLE3 without "
                                              "--max-running-requests resets it to 48",
                 "custom_allreduce": f"{_SGLANG_SRC}/distributed/device_communicators/custom_all_reduce.py: custom "
                                     "all-reduce on NVLink; disabled on more than two PCIe-only GPUs (NCCL)",
                 "verify_kv_per_query": "sglang 0.5.9 FlashInfer/FA3/FlashMLA/triton backends run the verify's "
                                        "query tokens of a request against its KV cache in one kernel: read once"})


def vllm_engine() -> Engine:
    """vLLM V1 (0.10) with CUDA graphs, EAGLE/EAGLE-3 proposer, async scheduling off (its default then)."""
    return Engine(
        name="vllm-0.10", **COMMON, overlap_baseline=False, overlap_spec=False, spec_cpu_preps=2,
        extend_tokens="steps+1", spec_max_running_requests=0,
        sources={**COMMON_SOURCES,
                 "overlap_baseline": "vLLM 0.10: async scheduling (--async-scheduling) is opt-in, so CPU scheduling "
                                     "runs between GPU steps in both arms",
                 "overlap_spec": "vLLM 0.10: async scheduling is opt-in and not used with speculative decoding",
                 "spec_cpu_preps": "vLLM V1 EagleProposer: target inputs and drafter inputs are prepared per step",
                 "extend_tokens": "vLLM V1 EagleProposer: the first draft pass runs over the verified tokens "
                                  "(up to k + 1 per request), then k - 1 one-token passes",
                 "spec_max_running_requests": "vLLM: no request cap specific to speculative decoding",
                 "custom_allreduce": _VLLM_CUSTOM_AR,
                 "verify_kv_per_query": "vLLM FLASH_ATTN/FlashInfer/FlashMLA: a request's query tokens read its KV "
                                        "cache once (TRITON_MLA reads it per query: deployment option)"})


def vllm_async_engine() -> Engine:
    """vLLM from 0.19: async scheduling on by default and zero-bubble with EAGLE speculation, so the scheduler's CPU
    work hides under the GPU passes in both arms (the rtx6kpro Kimi-K2.6 sweeps ran a May-2026 build of it)."""
    base = vllm_engine()
    return replace(base, name="vllm-0.19", overlap_baseline=True, overlap_spec=True, sources={
        **base.sources,
        "overlap_baseline": "vLLM async scheduling, on by default for EAGLE/EAGLE3 once its post-init auto-enable "
                            "ran (https://github.com/vllm-project/vllm/pull/39206, 2026-04)",
        "overlap_spec": "vLLM zero-bubble async scheduling + spec decoding, first in v0.19 "
                        "(https://github.com/vllm-project/vllm/pull/32951): the CPU prepares the next step while "
                        "the GPU runs, optimistically assuming every draft token accepted"})


def sglang_spec_v2_engine() -> Engine:
    """sglang 0.5.9 with SGLANG_ENABLE_SPEC_V2=1: the EAGLE worker v2 runs under the overlap scheduler, so the
    scheduler's CPU work of a cycle (per step, per request, per pass prepared) hides under the GPU passes, as for
    plain decoding. The orchestration constants between passes are the v1 worker's (``Frozen.shared_with``): no
    development source with published acceptance ran spec v2, so nothing says how much of them v2 hides."""
    base = sglang_engine()
    return replace(base, name="sglang-0.5-spec-v2", overlap_spec=True, sources={
        **base.sources,
        "overlap_spec": f"{_SGLANG_SRC}/server_args.py: with SGLANG_ENABLE_SPEC_V2 set the overlap scheduler stays "
                        "on for EAGLE/EAGLE3 (the v2 worker, speculative/eagle_worker_v2.py); checked against "
                        "https://github.com/sgl-project/sglang/pull/11398 (host time per cycle that spec v2 hides)"})


ENGINES = {"sglang-0.5": sglang_engine, "sglang-0.5-spec-v2": sglang_spec_v2_engine, "vllm-0.10": vllm_engine,
           "vllm-0.19": vllm_async_engine}


def engine_preset(name: str) -> Engine:
    try:
        return ENGINES[name]()
    except KeyError:
        raise PerfModelError(f"unknown engine '{name}'; known: {', '.join(sorted(ENGINES))}") from None
