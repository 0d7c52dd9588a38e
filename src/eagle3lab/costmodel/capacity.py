"""Peak throughput of a deployment: how many requests fit (KV cache, request caps) and the best rate within that.

Plain decoding is limited by the requests whose KV cache fits next to the weights; speculation additionally by the
engine's running-request cap (sglang: 48 unless --max-running-requests is set) and by the drafter's weights and KV.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Optional, Sequence

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import kv_capacity_tokens
from eagle3lab.costmodel.cycle import (Deployment, SpeculativeFlags, break_even_accept_length, max_accept_length,
                                       plain_step, spec_tok_s)


def kv_capacity_requests(dep: Deployment, mem_fraction_static: float, with_drafter: bool = False) -> int:
    """Requests of ``dep.context`` tokens whose KV cache (and the drafter's, if speculating) fits on one GPU."""
    if dep.context <= 0:
        raise PerfModelError("capacity: the deployment's context must be > 0 tokens")
    extra = dep.drafter.resident_weight_bytes(dep.tp) if with_drafter else 0.0
    tokens = kv_capacity_tokens(dep.target, dep.tp, dep.hardware.memory_bytes, mem_fraction_static, extra)
    if with_drafter:  # the drafter's one-layer cache shares the pool, in proportion to its bytes per token
        share = dep.target.kv_bytes_per_token(dep.tp)
        tokens = int(tokens * share / (share + dep.drafter.kv_bytes_per_token(dep.tp)))
    return max(0, int(tokens // dep.context))


def peak(rate_at_batch: Callable[[int], float], max_batch: int) -> tuple[float, int]:
    """(best rate, the batch giving it) over batch sizes 1..max_batch."""
    if max_batch < 1:
        raise PerfModelError(f"peak: max_batch must be >= 1, got {max_batch}")
    best = max(range(1, max_batch + 1), key=rate_at_batch)
    return rate_at_batch(best), best


@dataclass(frozen=True)
class DeploymentPrediction:
    """Single-stream and peak throughput with and without speculation, per acceptance length, and break-even."""

    model: str
    hardware: str
    tp: int
    context_len: float
    kernel_overhead_s: float
    floor_single_stream_tok_s: float  # without launch and CPU overheads: what bandwidth, FLOPs and links allow
    single_stream_tok_s: float
    baseline_max_batch: int
    baseline_peak_tok_s: float
    baseline_peak_batch: int
    spec_max_batch: int
    spec_peak_batch: int  # the running requests giving EAGLE-3's best rate (the same for every acceptance)
    max_accept_length: int  # every drafted token accepted plus the bonus token
    accept_lengths: tuple[float, ...]
    spec_single_stream_tok_s: tuple[float, ...]
    spec_peak_tok_s: tuple[float, ...]
    break_even_single_stream: float
    break_even_at_spec_max_batch: float
    # acceptance at which EAGLE-3's best rate (within its request limit) equals plain decoding's best rate (within
    # its KV limit); above max_accept_length no drafter can make speculation pay at peak
    break_even_at_peak: float

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def predict_capacity_limited(dep: Deployment, spec: SpeculativeFlags, mem_fraction_static: float,
                             accept_lengths: Sequence[float], spec_max_running_requests: Optional[int] = None,
                             baseline_max_running_requests: Optional[int] = None) -> DeploymentPrediction:
    """Single-stream and peak tokens/s with and without speculation for a whole deployment."""
    base_cap = kv_capacity_requests(dep, mem_fraction_static)
    spec_fit = kv_capacity_requests(dep, mem_fraction_static, with_drafter=True)
    cap = dep.engine.spec_max_running_requests if spec_max_running_requests is None else spec_max_running_requests
    base_max = max(1, min(base_cap, baseline_max_running_requests or base_cap))
    spec_max = max(1, min(spec_fit, cap) if cap else spec_fit)
    base_peak, base_batch = peak(lambda b: b / plain_step(dep, b).total_s, base_max)
    # spec tok/s = batch * acceptance / cycle time: linear in acceptance, so one search finds the best batch
    per_accept, spec_batch = peak(lambda b: spec_tok_s(dep, spec, b, 1.0), spec_max)
    accepts = tuple(float(a) for a in accept_lengths)
    one = plain_step(dep, 1)
    return DeploymentPrediction(
        model=dep.target.name, hardware=dep.hardware.name, tp=dep.tp, context_len=dep.context,
        kernel_overhead_s=dep.engine.kernel_overhead_s, floor_single_stream_tok_s=1.0 / one.target.gpu_work_s,
        single_stream_tok_s=one.tok_s, baseline_max_batch=base_max, baseline_peak_tok_s=base_peak,
        baseline_peak_batch=base_batch, spec_max_batch=spec_max, spec_peak_batch=spec_batch,
        max_accept_length=max_accept_length(spec), accept_lengths=accepts,
        spec_single_stream_tok_s=tuple(spec_tok_s(dep, spec, 1, a) for a in accepts),
        spec_peak_tok_s=tuple(a * spec_tok_s(dep, spec, spec_batch, 1.0) for a in accepts),
        break_even_single_stream=break_even_accept_length(dep, spec, 1),
        break_even_at_spec_max_batch=break_even_accept_length(dep, spec, spec_max),
        break_even_at_peak=base_peak / per_accept)
