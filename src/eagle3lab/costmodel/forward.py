"""The time of one forward pass on one GPU of a TP group, by component.

A pass runs ``requests`` requests with ``tokens_per_request`` new tokens each over ``context`` cached tokens. Its
kernels fall into classes that each meet their own roofline, then run one after another:

- weight GEMMs: max(weight bytes / bandwidth, GEMM FLOPs / tensor-core rate); the FLOP rate depends on the
  token count T of the pass: a GEMM over T rows costs as much as T + n_1/2 rows (the MMA tile), so efficiency
  T / (T + n_1/2) grows with T. A MoE layer reads only the experts its tokens route to, and each expert's GEMM
  runs over the few tokens routed to it (T * k / distinct experts rows), so small batches waste more compute.
- attention: max(KV bytes / bandwidth, attention FLOPs / tensor-core rate); the KV cache of a request is read once
  per pass whatever the number of query tokens (or once per query token on a backend that runs each as its own
  request, ``Engine.verify_kv_per_query``), and the MMA rows are the query heads sharing a KV head.
- activations: residual stream and MLP intermediates written and read between kernels (linear in T).
- all-reduces: two per layer under TP, timed on the link's measured curves (``collectives``).
- sampling: fp32 logits written, normalised and reduced over the vocabulary, per token that gets logits.
- launches: kernels per layer and per pass times the kernel overhead (the calibrated fixed cost).
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import ModelArch
from eagle3lab.costmodel.collectives import CollectiveTime, allgather, allreduce
from eagle3lab.costmodel.engine import Engine, custom_allreduce_on
from eagle3lab.costmodel.hardware import Hardware

# Activation traffic per layer per token, in vectors of the stated width (written or read once each):
# residual stream: two RMSNorms (read + write), two residual adds (2 reads + write), attention input and output,
# O-projection output, MLP input and output = 12 hidden-wide vectors; q/k/v and attention output written and read
# = 2 per q/kv width; MLP: gate_up output (2I) written and read, SiLU*mul output (I) written and read = 6 I.
ACT_HIDDEN_VECTORS = 12
ACT_QKV_VECTORS = 2
ACT_MLP_VECTORS = 6
LOGIT_PASSES = 3  # fp32 logits: written by the lm_head GEMM, read by softmax/log-softmax, read by argmax/sampling
LOGIT_BYTES = 4.0


@dataclass(frozen=True)
class Pass:
    """What one forward computes: ``requests`` x ``tokens_per_request`` new tokens over ``context`` cached ones."""

    requests: float
    tokens_per_request: float = 1.0
    context: float = 0.0
    logits_per_request: float = 1.0
    fc_tokens_per_request: float = 0.0  # EAGLE-3 drafter: tokens whose fused aux states pass through fc

    def __post_init__(self) -> None:
        if self.requests < 1 or self.tokens_per_request <= 0 or self.context < 0 or self.logits_per_request < 0:
            raise PerfModelError(f"forward pass: need requests >= 1, tokens_per_request > 0, context >= 0; got "
                                 f"{self.requests}, {self.tokens_per_request}, {self.context}")

    @property
    def tokens(self) -> float:
        return self.requests * self.tokens_per_request


COMPONENTS = ("weights", "gemm_compute", "kv_cache", "attention_compute", "activations", "all_reduce", "sampling",
              "launch", "per_request_host")


@dataclass(frozen=True)
class PassCost:
    """Seconds of one pass by component (summing to ``total_s``) and the bytes and FLOPs behind them."""

    tokens: float
    weight_bytes: float
    kv_bytes: float
    gemm_flops: float
    attention_flops: float
    distinct_experts: float
    weights: float  # weight bytes / achieved bandwidth
    gemm_compute: float  # GEMM compute time beyond the weight-read time (0 while memory-bound)
    kv_cache: float
    attention_compute: float  # attention compute beyond the KV-read time
    activations: float
    all_reduce: float
    sampling: float
    launch: float
    per_request_host: float = 0.0  # host work per running request per layer (engine.pass_per_request_layer_s)

    @property
    def total_s(self) -> float:
        return sum(getattr(self, name) for name in COMPONENTS)

    @property
    def gpu_work_s(self) -> float:
        """Everything but the launch overhead: what bandwidth, FLOPs and links alone allow."""
        return self.total_s - self.launch

    def breakdown(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COMPONENTS}


def kernel_count(arch: ModelArch, engine: Engine) -> int:
    """Kernels one pass of ``arch`` launches (layers plus the per-pass head and sampling)."""
    moe_layers = arch.moe.layers if arch.moe else 0
    n = arch.dense_layers * engine.kernels_per_dense_layer + moe_layers * engine.kernels_per_moe_layer
    if arch.mla is not None:
        n += arch.num_layers * engine.extra_kernels_per_mla_layer
    return n + engine.kernels_per_pass


def _gemm(bytes_: float, flops_equiv: float, bw: float, peak: float) -> tuple[float, float]:
    """(memory time, compute time beyond it) of one GEMM class."""
    mem = bytes_ / bw
    return mem, max(0.0, flops_equiv / peak - mem)


def forward_cost(arch: ModelArch, hw: Hardware, tp: int, engine: Engine, p: Pass) -> PassCost:
    """One forward pass of ``arch`` on one GPU of a ``tp``-GPU group."""
    if tp < 1:
        raise PerfModelError(f"forward pass: tp must be >= 1, got {tp}")
    s = arch.storage
    bw = hw.mem_bandwidth * engine.bandwidth_efficiency
    n_half = engine.tile_tokens
    T = p.tokens
    L = arch.num_layers
    gemms: list[tuple[float, float, float]] = []  # (bytes, FLOPs counting tile padding, bytes per param)

    rep, split = arch.attention_params(tp)
    attn = rep + split
    gemms.append((L * attn * s.linear, 2 * L * attn * (T + n_half), s.linear))
    if arch.dense_layers:
        dense = arch.dense_layers * arch.dense_mlp_params(tp)
        gemms.append((dense * s.linear, 2 * dense * (T + n_half), s.linear))
    distinct = 0.0
    if arch.moe:
        m = arch.moe
        always_on = m.layers * (arch.router_params() + arch.shared_expert_params(tp))
        gemms.append((always_on * s.linear, 2 * always_on * (T + n_half), s.linear))
        distinct = m.distinct(T)
        expert = arch.expert_params(tp)
        gemms.append((m.layers * distinct * expert * s.expert,
                      2 * m.layers * expert * (T * m.top_k + distinct * n_half), s.expert))
    logit_tokens = p.requests * p.logits_per_request
    if logit_tokens:
        head = arch.lm_head_params(tp)
        gemms.append((head * s.lm_head, 2 * head * (logit_tokens + n_half), s.lm_head))
    if p.fc_tokens_per_request and arch.fc_input:
        fc = arch.fc_params()
        gemms.append((fc * s.linear, 2 * fc * (p.requests * p.fc_tokens_per_request + n_half), s.linear))

    weights = gemm_compute = weight_bytes = gemm_flops = 0.0
    for bytes_, flops, per in gemms:
        mem, excess = _gemm(bytes_, flops, bw, hw.gemm_peak_flops(per) * engine.flops_efficiency)
        weights += mem
        gemm_compute += excess
        weight_bytes += bytes_
        gemm_flops += flops

    context = arch.effective_context(p.context)  # sliding-window layers read at most their window
    # read each request's cache once (sliding-window layers only their window), write the new tokens' keys/values
    # a backend that runs each query token as its own request (engine.verify_kv_per_query) reads the cache per token
    reads = p.tokens_per_request if engine.verify_kv_per_query else 1.0
    kv_bytes = p.requests * reads * arch.kv_read_bytes(tp, p.context) + T * arch.kv_bytes_per_token(tp)
    pairs = p.requests * p.tokens_per_request * (context + (p.tokens_per_request + 1) / 2)
    attn_flops = pairs * arch.attention_flops_per_pair(tp)
    rows = p.tokens_per_request * arch.queries_per_kv_head(tp)
    kv_cache, attention_compute = _gemm(kv_bytes, attn_flops * (rows + n_half) / rows, bw,
                                        hw.peak_bf16_flops * engine.flops_efficiency)

    per_token_layer = 0.0
    qkv_width = arch.attention_out_width() / tp + 2 * arch.kv_heads_per_gpu(tp) * arch.head_dim
    for kind, count in (("dense", arch.dense_layers), ("moe", arch.moe.layers if arch.moe else 0)):
        if count:
            per_token_layer += count * (ACT_HIDDEN_VECTORS * arch.hidden + ACT_QKV_VECTORS * qkv_width
                                        + ACT_MLP_VECTORS * arch.active_intermediate(tp, kind))
    activations = T * per_token_layer * s.activation / bw

    all_reduce = 0.0
    if tp > 1:  # after attention and after the MLP of every layer, plus the vocab-parallel embedding
        all_reduce = (2 * L + 1) * allreduce_time(hw, engine, tp, T * arch.hidden * s.activation, T).seconds

    logit_bytes = logit_tokens * arch.head_vocab * LOGIT_BYTES
    sampling = LOGIT_PASSES * logit_bytes / bw
    if tp > 1 and logit_tokens:  # vocab-parallel logits gathered to every rank
        sampling += allgather(hw.collectives, hw.interconnect, hw.link_bandwidth, hw.allreduce_latency_s, tp,
                              logit_bytes).seconds

    return PassCost(tokens=T, weight_bytes=weight_bytes, kv_bytes=kv_bytes, gemm_flops=gemm_flops,
                    attention_flops=attn_flops, distinct_experts=distinct, weights=weights, gemm_compute=gemm_compute,
                    kv_cache=kv_cache, attention_compute=attention_compute, activations=activations,
                    all_reduce=all_reduce, sampling=sampling,
                    launch=kernel_count(arch, engine) * engine.kernel_overhead_s,
                    per_request_host=p.requests * L * engine.pass_per_request_layer_s)


def allreduce_time(hw: Hardware, engine: Engine, tp: int, nbytes: float, rows: float) -> CollectiveTime:
    """One all-reduce of ``nbytes`` (``rows`` tokens) on this hardware's link under this engine's selector."""
    return allreduce(hw.collectives, hw.interconnect, hw.link_bandwidth, hw.allreduce_latency_s, tp, nbytes,
                     custom_allreduce_on(engine, hw.interconnect), engine.custom_allreduce_max_bytes,
                     engine.custom_allreduce_any_size_rows, rows)


def gemm_efficiency(tokens: float, engine: Engine) -> float:
    """Fraction of the achievable tensor-core rate a weight GEMM over ``tokens`` rows delivers: T / (T + n_1/2)."""
    if tokens <= 0:
        raise PerfModelError(f"efficiency: tokens must be > 0, got {tokens}")
    return engine.flops_efficiency * tokens / (tokens + engine.tile_tokens)
