"""Decode-step and speculative-decoding cost model for a DeepSeek-V3-style MoE model under tensor parallelism.

Why a model: EAGLE-3 cannot run on this CPU-only machine, and the incident only reports two numbers
(63.6 tok/s single stream, 2,370 tok/s peak). A stated, parameterised model explains *why* speculation
did not pay on 8x PCIe GPUs: decode is bound by reading weights, and a MoE verify pass over
``num_draft_tokens`` tokens per request touches several times more distinct experts than one token does, so
verifying is far from free; at high concurrency sglang also caps running requests under speculation.

Every parameter carries a source string (a config file, a datasheet, a sglang source line or an explicit
"assumption"), so a reader can check or replace it. Units: bytes, seconds, FLOP/s.

Per decode forward on one GPU:
    memory time = (weight bytes touched + KV-cache bytes read) / (bandwidth * efficiency)
    compute time = FLOPs / (peak FLOP/s * efficiency)
    step time = max(memory, compute) + all-reduces * (latency + bytes / bus bandwidth) + fixed overhead
The fixed overhead (kernel launches, sampling, scheduling) is calibrated so that the model reproduces a
measured single-stream step time (``calibrate_overhead``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Mapping, Sequence

from eagle3lab.errors import PerfModelError

GIB = 1024**3


def _check_sources(obj: object, skip: tuple[str, ...] = ("name", "sources")) -> None:
    """Refuse a config whose numeric parameters lack a source or are not positive numbers."""
    sources: Mapping[str, str] = getattr(obj, "sources")
    kind = type(obj).__name__
    for f in fields(obj):  # type: ignore[arg-type]
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        if not sources.get(f.name, "").strip():
            raise PerfModelError(f"{kind} '{getattr(obj, 'name', '?')}': parameter '{f.name}' has no source string; "
                                 "add one to sources")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
            raise PerfModelError(f"{kind} '{getattr(obj, 'name', '?')}': parameter '{f.name}' must be a number >= 0, "
                                 f"got {value!r}")


# --------------------------------------------------------------------------------------------- model configs
@dataclass(frozen=True)
class MoEModelConfig:
    """Shape and storage of a DeepSeek-V3-style target (MLA attention, dense first layers, routed + shared experts)."""

    name: str
    num_layers: int
    first_k_dense: int
    hidden: int
    num_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    dense_intermediate: int
    moe_intermediate: int
    n_routed_experts: int
    experts_per_token: int
    n_shared_experts: int
    vocab_size: int
    dense_bytes_per_param: float  # attention, dense MLP, shared experts, router, embeddings, lm_head
    expert_weight_bits: float  # routed experts
    expert_group_size: int  # weights sharing one scale
    expert_scale_bytes: float  # bytes per group scale
    kv_bytes_per_elem: float  # KV-cache dtype
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_sources(self)
        if self.first_k_dense > self.num_layers or self.experts_per_token > self.n_routed_experts:
            raise PerfModelError(f"model '{self.name}': first_k_dense <= num_layers and experts_per_token <= "
                                 "n_routed_experts are required")

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_k_dense

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert (gate, up and down projections)."""
        return 3 * self.hidden * self.moe_intermediate

    @property
    def expert_bytes(self) -> float:
        """Bytes of one routed expert across all TP shards, packed weights plus one scale per group."""
        return self.expert_params * (self.expert_weight_bits / 8 + self.expert_scale_bytes / self.expert_group_size)

    @property
    def kv_bytes_per_token(self) -> float:
        """MLA caches one compressed latent (kv_lora_rank) plus the rope key per token and layer."""
        return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * self.kv_bytes_per_elem


@dataclass(frozen=True)
class DraftModelConfig:
    """An EAGLE-3 drafter: one Llama decoder layer fed by a fused projection of three target hidden states."""

    name: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    draft_vocab_size: int
    num_aux_layers: int  # target hidden states concatenated into the fc projection
    bytes_per_param: float
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_sources(self)

    @property
    def params_per_forward(self) -> int:
        """Weights one draft forward reads: fc fusion, the decoder layer (input 2*hidden), the draft lm_head."""
        fc = self.num_aux_layers * self.hidden * self.hidden
        qkv = 2 * self.hidden * (self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        o = self.num_heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        head = self.hidden * self.draft_vocab_size
        return fc + self.num_layers * (qkv + o + mlp) + head


@dataclass(frozen=True)
class Hardware:
    """One deployment: GPUs in one TP group, their memory system, interconnect and software overheads."""

    name: str
    tp_size: int
    mem_bandwidth: float  # bytes/s per GPU, datasheet
    bandwidth_efficiency: float  # achievable fraction when streaming weights
    peak_flops: float  # dense bf16 FLOP/s per GPU
    flops_efficiency: float
    allreduce_latency_s: float  # one small all-reduce across the TP group
    allreduce_bus_bw: float  # bytes/s, ring bus bandwidth for the size-dependent part
    gpu_memory_bytes: float
    step_overhead_s: float  # fixed per target forward (launches, sampling, scheduling not hidden)
    draft_forward_overhead_s: float  # fixed per draft forward
    spec_cycle_overhead_s: float  # extra per speculative cycle (tree bookkeeping, CPU work no longer overlapped)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_sources(self)
        efficiencies_ok = 0 < self.bandwidth_efficiency <= 1 and 0 < self.flops_efficiency <= 1
        if self.tp_size < 1 or self.mem_bandwidth <= 0 or not efficiencies_ok:
            raise PerfModelError(f"hardware '{self.name}': tp_size >= 1, bandwidth > 0 and efficiencies in (0, 1] "
                                 "are required")

    def with_overhead(self, step_overhead_s: float, source: str) -> "Hardware":
        """Same hardware, another fixed per-step overhead (and its source)."""
        return replace(self, step_overhead_s=step_overhead_s, sources={**self.sources, "step_overhead_s": source})


@dataclass(frozen=True)
class SpecConfig:
    """sglang EAGLE chain drafting (topk 1): num_steps drafted tokens, verified as num_steps + 1 tokens."""

    num_steps: int = 3
    topk: int = 1

    def __post_init__(self) -> None:
        if self.num_steps < 1 or self.topk != 1:
            raise PerfModelError("speculative config: num_steps >= 1 and topk == 1 are modelled, got "
                                 f"num_steps={self.num_steps}, topk={self.topk}")

    @property
    def num_draft_tokens(self) -> int:
        """Tokens per request in the verify forward; sglang forces num_steps + 1 when topk == 1 (server_args.py)."""
        return self.num_steps + 1

    @property
    def max_accept_length(self) -> int:
        """All drafts accepted plus the target's bonus token."""
        return self.num_steps + 1


# ------------------------------------------------------------------------------------------------ weights
def expected_distinct_experts(tokens: float, n_experts: int, experts_per_token: int) -> float:
    """Expected distinct experts a MoE layer touches for ``tokens`` tokens with uniform, independent routing.

    Each expert is missed by one token with probability 1 - k/E, so by all T tokens with (1 - k/E)^T.
    """
    if tokens < 0 or n_experts <= 0 or not 0 < experts_per_token <= n_experts:
        raise PerfModelError(f"distinct experts: need tokens >= 0 and 0 < k <= E, got T={tokens}, E={n_experts}, "
                             f"k={experts_per_token}")
    return n_experts * (1.0 - (1.0 - experts_per_token / n_experts) ** tokens)


@dataclass(frozen=True)
class WeightBytes:
    """Bytes of weights one GPU reads in one forward, by part (replicated parts are read in full by every GPU)."""

    attention_replicated: float
    attention_split: float
    dense_mlp: float
    router: float
    shared_experts: float
    routed_experts: float
    lm_head: float
    distinct_experts_per_layer: float

    @property
    def total(self) -> float:
        return (self.attention_replicated + self.attention_split + self.dense_mlp + self.router
                + self.shared_experts + self.routed_experts + self.lm_head)


def _attention_params(m: MoEModelConfig) -> tuple[int, int]:
    """(replicated, split) MLA parameters per layer as sglang's DeepseekV2AttentionMLA lays them out under TP.

    fused_qkv_a_proj_with_mqa is a ReplicatedLinear (q_a and kv_a with the rope key); q_b_proj and kv_b_proj are
    ColumnParallel and o_proj RowParallel (sglang 0.5.9 models/deepseek_v2.py).
    """
    replicated = m.hidden * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) + m.q_lora_rank + m.kv_lora_rank
    q_b = m.q_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    kv_b = m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
    o = m.num_heads * m.v_head_dim * m.hidden
    return replicated, q_b + kv_b + o


def weight_bytes_per_gpu(m: MoEModelConfig, tp: int, tokens: float) -> WeightBytes:
    """Weights one GPU reads in one forward over ``tokens`` tokens (all requests, all positions).

    Without expert parallelism every GPU holds a 1/tp slice of *every* expert, so each distinct expert a token
    routes to costs expert_bytes / tp on every GPU. The embedding lookup reads a few rows only and is ignored.
    """
    if tp < 1 or tokens < 1:
        raise PerfModelError(f"weight bytes: need tp >= 1 and tokens >= 1, got tp={tp}, tokens={tokens}")
    b = m.dense_bytes_per_param
    rep, split = _attention_params(m)
    distinct = expected_distinct_experts(tokens, m.n_routed_experts, m.experts_per_token)
    return WeightBytes(
        attention_replicated=m.num_layers * rep * b,
        attention_split=m.num_layers * split * b / tp,
        dense_mlp=m.first_k_dense * 3 * m.hidden * m.dense_intermediate * b / tp,
        router=m.num_moe_layers * m.hidden * m.n_routed_experts * b,
        shared_experts=m.num_moe_layers * m.n_shared_experts * m.expert_params * b / tp,
        routed_experts=m.num_moe_layers * distinct * m.expert_bytes / tp,
        lm_head=m.vocab_size * m.hidden * b / tp,
        distinct_experts_per_layer=distinct,
    )


def resident_weight_bytes_per_gpu(m: MoEModelConfig, tp: int) -> float:
    """Weights stored on one GPU: every expert's slice plus the embedding table's slice."""
    all_experts = weight_bytes_per_gpu(m, tp, 1)
    routed_all = m.num_moe_layers * m.n_routed_experts * m.expert_bytes / tp
    embedding = m.vocab_size * m.hidden * m.dense_bytes_per_param / tp
    return all_experts.total - all_experts.routed_experts + routed_all + embedding


def flops_per_gpu(m: MoEModelConfig, tp: int, tokens: float, context_len: float) -> float:
    """Matmul FLOPs one GPU does: 2 per weight used per token, plus absorbed-MLA attention over the context."""
    rep, split = _attention_params(m)
    per_token_params = (
        m.num_layers * (rep + split / tp)
        + m.first_k_dense * 3 * m.hidden * m.dense_intermediate / tp
        + m.num_moe_layers * (m.hidden * m.n_routed_experts
                              + (m.n_shared_experts + m.experts_per_token) * m.expert_params / tp)
        + m.vocab_size * m.hidden / tp
    )
    heads = m.num_heads / tp
    attention = m.num_layers * heads * context_len * 2 * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return tokens * (2 * per_token_params + attention)


def allreduces_per_forward(num_layers: int) -> int:
    """Collectives in one forward: after attention (o_proj) and after the MLP/MoE of every layer, plus the
    vocab-parallel embedding all-reduce and the lm_head logits gather."""
    return 2 * num_layers + 2


def allreduce_time(hw: Hardware, count: int, tokens: float, hidden: int, elem_bytes: float = 2.0) -> float:
    """``count`` all-reduces of a tokens x hidden activation: latency plus ring traffic 2(n-1)/n * size / bus bw."""
    if hw.tp_size == 1:
        return 0.0
    size = tokens * hidden * elem_bytes
    ring = 2 * (hw.tp_size - 1) / hw.tp_size * size / hw.allreduce_bus_bw
    return count * (hw.allreduce_latency_s + ring)


# ------------------------------------------------------------------------------------------------ step cost
@dataclass(frozen=True)
class StepCost:
    """Time of one forward on one GPU, by component, with the bytes behind it."""

    tokens: float
    weight_bytes: float
    kv_bytes: float
    weights_s: float
    kv_s: float
    compute_s: float
    allreduce_s: float
    overhead_s: float

    @property
    def memory_s(self) -> float:
        return self.weights_s + self.kv_s

    @property
    def compute_excess_s(self) -> float:
        """Compute time beyond the memory time (roofline: the slower of the two bounds the kernels)."""
        return max(0.0, self.compute_s - self.memory_s)

    @property
    def total_s(self) -> float:
        return max(self.memory_s, self.compute_s) + self.allreduce_s + self.overhead_s

    def breakdown(self) -> dict[str, float]:
        """Seconds per component, summing to total_s (for stacked bars)."""
        return {"weights": self.weights_s, "kv_cache": self.kv_s, "compute_excess": self.compute_excess_s,
                "all_reduce": self.allreduce_s, "overhead": self.overhead_s}


def target_forward(m: MoEModelConfig, hw: Hardware, batch: int, context_len: float,
                   tokens_per_request: int = 1, include_overhead: bool = True) -> StepCost:
    """One target forward for ``batch`` requests of ``tokens_per_request`` new tokens each.

    Every GPU reads the full MLA latent cache of every request once (MLA has one latent head, so under plain
    TP the cache is replicated, not split).
    """
    if batch < 1 or tokens_per_request < 1 or context_len < 0:
        raise PerfModelError(f"forward: need batch >= 1, tokens_per_request >= 1, context_len >= 0; got {batch}, "
                             f"{tokens_per_request}, {context_len}")
    tokens = batch * tokens_per_request
    bw = hw.mem_bandwidth * hw.bandwidth_efficiency
    weights = weight_bytes_per_gpu(m, hw.tp_size, tokens).total
    kv = batch * context_len * m.kv_bytes_per_token
    return StepCost(
        tokens=tokens,
        weight_bytes=weights,
        kv_bytes=kv,
        weights_s=weights / bw,
        kv_s=kv / bw,
        compute_s=flops_per_gpu(m, hw.tp_size, tokens, context_len) / (hw.peak_flops * hw.flops_efficiency),
        allreduce_s=allreduce_time(hw, allreduces_per_forward(m.num_layers), tokens, m.hidden),
        overhead_s=hw.step_overhead_s if include_overhead else 0.0,
    )


def draft_forward(d: DraftModelConfig, hw: Hardware, batch: int, tokens_per_request: int = 1) -> StepCost:
    """One drafter forward (the drafter runs with the target's TP degree, weights split across the group)."""
    tokens = batch * tokens_per_request
    bw = hw.mem_bandwidth * hw.bandwidth_efficiency
    weights = d.params_per_forward * d.bytes_per_param / hw.tp_size
    return StepCost(
        tokens=tokens, weight_bytes=weights, kv_bytes=0.0, weights_s=weights / bw, kv_s=0.0,
        compute_s=2 * d.params_per_forward / hw.tp_size * tokens / (hw.peak_flops * hw.flops_efficiency),
        allreduce_s=allreduce_time(hw, allreduces_per_forward(d.num_layers), tokens, d.hidden),
        overhead_s=hw.draft_forward_overhead_s,
    )


def calibrate_overhead(m: MoEModelConfig, hw: Hardware, measured_step_s: float, context_len: float,
                       source: str) -> Hardware:
    """Hardware whose fixed per-step overhead makes the model hit a measured single-stream step time exactly."""
    if not measured_step_s > 0:
        raise PerfModelError(f"calibration: measured step time must be > 0 s, got {measured_step_s!r}")
    floor = target_forward(m, hw, 1, context_len, include_overhead=False).total_s
    if measured_step_s < floor:
        raise PerfModelError(
            f"calibration: measured step {measured_step_s * 1e3:.3f} ms is below the model's floor "
            f"{floor * 1e3:.3f} ms "
            f"for '{hw.name}'; check its bandwidth, efficiency and all-reduce parameters")
    return hw.with_overhead(measured_step_s - floor, source)


# ---------------------------------------------------------------------------------------- speculative decoding
@dataclass(frozen=True)
class SpecCycle:
    """One speculative cycle for a batch: num_steps draft forwards (num_steps - 1 chained draft steps plus the
    draft-extend over accepted tokens that also proposes the next first token) and one verify forward."""

    verify: StepCost
    draft: StepCost
    num_draft_forwards: int
    extra_s: float

    @property
    def total_s(self) -> float:
        return self.verify.total_s + self.num_draft_forwards * self.draft.total_s + self.extra_s


def spec_cycle(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, batch: int,
               context_len: float) -> SpecCycle:
    return SpecCycle(
        verify=target_forward(m, hw, batch, context_len, tokens_per_request=spec.num_draft_tokens),
        draft=draft_forward(d, hw, batch),
        num_draft_forwards=spec.num_steps,
        extra_s=hw.spec_cycle_overhead_s,
    )


def baseline_tok_s(m: MoEModelConfig, hw: Hardware, batch: int, context_len: float) -> float:
    """Output tokens/s of plain decoding: one token per request per forward."""
    return batch / target_forward(m, hw, batch, context_len).total_s


def _check_accept(accept_length: float, spec: SpecConfig) -> None:
    if not 1.0 <= accept_length <= spec.max_accept_length:
        raise PerfModelError(f"acceptance length must be in [1, {spec.max_accept_length}] for "
                             f"num_steps={spec.num_steps}, got {accept_length}")


def spec_tok_s(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, batch: int,
               context_len: float, accept_length: float) -> float:
    """Output tokens/s with speculation; accept_length is tokens emitted per verify (sglang's spec_accept_length)."""
    _check_accept(accept_length, spec)
    return batch * accept_length / spec_cycle(m, d, hw, spec, batch, context_len).total_s


def speedup(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, batch: int,
            context_len: float, accept_length: float) -> float:
    """Speculative over plain tokens/s at the same batch size."""
    return spec_tok_s(m, d, hw, spec, batch, context_len, accept_length) / baseline_tok_s(m, hw, batch, context_len)


def break_even_accept_length(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, batch: int,
                             context_len: float) -> float:
    """Acceptance length at which speculation only matches plain decoding: cycle time / plain step time.

    Above spec.max_accept_length speculation cannot pay at this batch size whatever the drafter does.
    """
    return spec_cycle(m, d, hw, spec, batch, context_len).total_s / target_forward(m, hw, batch, context_len).total_s


def speedup_grid(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, batches: Sequence[int],
                 accept_lengths: Sequence[float], context_len: float) -> list[list[float]]:
    """speedup[i][j] for batches[i] and accept_lengths[j]."""
    return [[speedup(m, d, hw, spec, b, context_len, a) for a in accept_lengths] for b in batches]


# ------------------------------------------------------------------------------------------------ capacity
def kv_capacity_requests(m: MoEModelConfig, hw: Hardware, context_len: float, mem_fraction_static: float,
                         extra_resident_bytes: float = 0.0) -> int:
    """Requests of ``context_len`` tokens whose KV cache fits next to the weights in sglang's static pool."""
    if not 0 < mem_fraction_static <= 1 or context_len <= 0:
        raise PerfModelError("capacity: need 0 < mem_fraction_static <= 1 and context_len > 0, got "
                             f"{mem_fraction_static}, {context_len}")
    resident = resident_weight_bytes_per_gpu(m, hw.tp_size) + extra_resident_bytes
    pool = hw.gpu_memory_bytes * mem_fraction_static - resident
    if pool <= 0:
        raise PerfModelError(f"capacity: '{m.name}' weights do not fit in {mem_fraction_static:.2f} of one "
                             f"'{hw.name}' GPU at tp={hw.tp_size}")
    return int(pool // (context_len * m.kv_bytes_per_token))


def peak_tok_s(rate_at_batch: Callable[[int], float], max_batch: int) -> tuple[float, int]:
    """(best tokens/s, batch size giving it) for batch sizes 1..max_batch of a rate function."""
    if max_batch < 1:
        raise PerfModelError(f"peak: max_batch must be >= 1, got {max_batch}")
    best = max(range(1, max_batch + 1), key=rate_at_batch)
    return rate_at_batch(best), best


# ------------------------------------------------------------------------------------------ whole deployment
SPEC_MAX_RUNNING_REQUESTS = 48
SPEC_MAX_RUNNING_REQUESTS_SOURCE = ("sglang 0.5.9 srt/server_args.py _handle_speculative_decoding: EAGLE/EAGLE3 "
                                    "without --max-running-requests resets it to 48")


@dataclass(frozen=True)
class DeploymentPrediction:
    """What the model predicts for one deployment: plain decoding, speculation per acceptance length, break-even."""

    model: str
    hardware: str
    context_len: float
    step_overhead_s: float
    floor_single_stream_tok_s: float  # without the fixed overhead: what bandwidth and all-reduces alone allow
    single_stream_tok_s: float
    baseline_max_batch: int
    baseline_peak_tok_s: float
    baseline_peak_batch: int
    spec_max_batch: int
    accept_lengths: tuple[float, ...]
    spec_single_stream_tok_s: tuple[float, ...]
    spec_peak_tok_s: tuple[float, ...]
    break_even_single_stream: float
    break_even_at_spec_max_batch: float

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def predict_deployment(m: MoEModelConfig, d: DraftModelConfig, hw: Hardware, spec: SpecConfig, context_len: float,
                       mem_fraction_static: float, accept_lengths: Sequence[float],
                       spec_max_running_requests: int = SPEC_MAX_RUNNING_REQUESTS,
                       baseline_max_running_requests: int | None = None) -> DeploymentPrediction:
    """Single-stream and peak tokens/s with and without speculation.

    Peak batch: plain decoding is limited by how many requests' KV fits (sglang's default request limit is in
    the thousands); speculation additionally by its running-request limit (48 unless set).
    """
    draft_resident = d.params_per_forward * d.bytes_per_param / hw.tp_size
    base_cap = kv_capacity_requests(m, hw, context_len, mem_fraction_static)
    spec_cap = kv_capacity_requests(m, hw, context_len, mem_fraction_static, draft_resident)
    base_max = min(base_cap, baseline_max_running_requests or base_cap)
    spec_max = max(1, min(spec_cap, spec_max_running_requests))
    base_peak, base_batch = peak_tok_s(lambda b: baseline_tok_s(m, hw, b, context_len), max(1, base_max))
    accepts = tuple(float(a) for a in accept_lengths)
    return DeploymentPrediction(
        model=m.name, hardware=hw.name, context_len=context_len, step_overhead_s=hw.step_overhead_s,
        floor_single_stream_tok_s=1.0 / target_forward(m, hw, 1, context_len, include_overhead=False).total_s,
        single_stream_tok_s=baseline_tok_s(m, hw, 1, context_len),
        baseline_max_batch=base_max, baseline_peak_tok_s=base_peak, baseline_peak_batch=base_batch,
        spec_max_batch=spec_max, accept_lengths=accepts,
        spec_single_stream_tok_s=tuple(spec_tok_s(m, d, hw, spec, 1, context_len, a) for a in accepts),
        spec_peak_tok_s=tuple(peak_tok_s(lambda b: spec_tok_s(m, d, hw, spec, b, context_len, a), spec_max)[0]
                              for a in accepts),
        break_even_single_stream=break_even_accept_length(m, d, hw, spec, 1, context_len),
        break_even_at_spec_max_batch=break_even_accept_length(m, d, hw, spec, spec_max, context_len),
    )
