"""Every benchmark number, computed in one place from per-request records.

The load generator stores only raw observations per request (timestamps, the server's token counts); this
module turns a list of them into one ``PointMetrics``. Printing, saving and plotting read that dataclass, so a
number can never be computed two different ways. Token counts come from the server's ``meta_info``
(``completion_tokens``), never from counting stream chunks: with speculative decoding one chunk carries
several tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Sequence

import numpy as np

from eagle3lab.errors import BenchError

PERCENTILES: tuple[int, ...] = (50, 90, 99)


@dataclass
class RequestRecord:
    """Raw observations of one request; times are seconds on one monotonic clock (``time.perf_counter``).

    ``t_scheduled``: the driver handed the request to the client (a concurrency slot was free).
    ``t_sent``: the request body left the client. The gap is client queueing and is kept out of TTFT/E2E.
    ``token_times``: arrival time of each stream chunk that raised the server's ``completion_tokens``;
    ``chunk_tokens``: how many new tokens that chunk carried (one without speculation, up to 1 + draft steps with).
    """

    request_id: str
    concurrency: int
    phase: str  # "warmup" or "measure"
    ok: bool
    t_scheduled: float
    t_sent: float | None = None
    token_times: list[float] = field(default_factory=list)
    t_end: float | None = None
    prompt_len: int | None = None  # tokens the client sent (token-id prompts) or None for text
    prompt_tokens: int | None = None  # meta_info.prompt_tokens
    completion_tokens: int | None = None  # meta_info.completion_tokens of the final chunk
    spec_verify_ct: int | None = None  # meta_info.spec_verify_ct; None without speculation
    spec_accept_length: float | None = None  # as the server reported it, kept for cross-checking
    finish_reason: str | None = None
    error: str | None = None
    prompt_index: int | None = None  # position in the phase's prompt list (the same prompt in every arm)
    chunk_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] | None = None  # the generated token ids, for the lossless check
    spec_accept_histogram: list[int] | None = None  # meta_info: verify steps that accepted k draft tokens, k = 0..

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RequestRecord":
        """Rebuild a record from its JSONL line; unknown keys are a sign of a foreign file."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise BenchError(f"request record has unknown keys {sorted(unknown)}; is this an eagle3lab JSONL file?",
                             key=sorted(unknown)[0], problem="unknown_keys")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Distribution:
    """Mean and percentiles of one latency, in seconds; None when there was nothing to measure."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> "Distribution":
        if len(values) == 0:
            return cls(0, None, None, None, None, None)
        arr = np.asarray(values, dtype=float)
        p50, p90, p99 = (float(v) for v in np.percentile(arr, PERCENTILES))
        return cls(len(arr), float(arr.mean()), p50, p90, p99, float(arr.max()))


@dataclass
class PointMetrics:
    """One sweep point (one concurrency) summarised. Rates use the measured wall time of the point."""

    concurrency: int
    requests: int
    completed: int
    failed: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    output_tok_per_s: float
    requests_per_s: float
    ttft_s: Distribution
    itl_s: Distribution
    tpot_s: Distribution
    e2e_s: Distribution
    queue_s: Distribution
    accept_length: float | None  # sum(completion_tokens) / sum(spec_verify_ct); None without speculation
    accept_length_mean: float | None  # per-request mean of the same ratio
    client_cpu_s: float | None
    client_cpu_s_per_1k_tokens: float | None
    errors: list[str]
    # ITL above is per token: a chunk of k tokens spreads its gap over k tokens, as sglang's bench_serving does.
    # This one is per stream chunk (the gap between chunks as the client saw it), kept apart and labelled so.
    itl_chunk_s: Distribution | None = None
    # The server's own per-request figure (meta_info.spec_accept_length), its mean, and how many requests
    # disagree with completion_tokens / spec_verify_ct (should be none: sglang computes exactly that).
    server_accept_length_mean: float | None = None
    accept_length_disagreements: int | None = None
    # Summed meta_info.spec_accept_histogram: entry k = verify steps that accepted k draft tokens.
    accepted_per_verify_histogram: list[int] | None = None
    # Tokens per verify step from that histogram, sum((k + 1) * h_k) / sum(h_k): the quantity sglang's
    # /get_server_info avg_spec_accept_length averages (no prefill token, no max_new_tokens cut).
    accept_length_per_step: float | None = None

    @property
    def decode_step_s(self) -> float | None:
        """Mean time per output token after the first (TPOT): one decode step as each request saw it."""
        mean = self.tpot_s.mean
        return mean if self.tpot_s.count and mean is not None and mean > 0 else None

    @property
    def decode_tok_per_s(self) -> float | None:
        """Decode-only output rate: running requests / mean TPOT (prefill and first-token waits excluded), the rate
        a decode cost model predicts; the client-seen ``output_tok_per_s`` also pays prefill and queueing."""
        step = self.decode_step_s
        return self.concurrency / step if step else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PointMetrics":
        values = dict(data)
        for name in ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_s", "itl_chunk_s"):
            if values.get(name) is not None:
                values[name] = Distribution(**values[name])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _intervals(times: Sequence[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def per_token_itl(times: Sequence[float], chunk_tokens: Sequence[int]) -> list[float]:
    """Inter-token latencies with each chunk's gap spread over the tokens it carried (bench_serving's rule).

    Without ``chunk_tokens`` (old records) every chunk counts as one token, which is exact without speculation.
    """
    if chunk_tokens and len(chunk_tokens) != len(times):
        raise BenchError(f"{len(chunk_tokens)} chunk token counts for {len(times)} chunk times; the record is damaged",
                         key="chunk_tokens", problem="length_mismatch")
    counts = list(chunk_tokens) if chunk_tokens else [1] * len(times)
    itl: list[float] = []
    for gap, count in zip(_intervals(times), counts[1:]):
        itl.extend([gap / count] * count)
    return itl


def _summed_histogram(histograms: Iterable[Sequence[int]]) -> list[int]:
    total: list[int] = []
    for hist in histograms:
        total.extend([0] * (len(hist) - len(total)))
        for k, count in enumerate(hist):
            total[k] += int(count)
    return total


def compute_point_metrics(
    records: Iterable[RequestRecord], *, client_cpu_s: float | None = None
) -> PointMetrics:
    """Summarise the measured requests of one sweep point.

    Warm-up records are ignored. The point's duration runs from the first request scheduled to the last
    request finished (failures included), so requests/s and tok/s are what a user of the server saw.
    """
    measured = [r for r in records if r.phase == "measure"]
    if not measured:
        raise BenchError("no measured requests to summarise; run at least one request in the 'measure' phase",
                         problem="no_measured")
    concurrencies = {r.concurrency for r in measured}
    if len(concurrencies) != 1:
        raise BenchError(f"records mix concurrencies {sorted(concurrencies)}; summarise one sweep point at a time",
                         key="concurrency", problem="mixed_concurrency")

    ok = [r for r in measured if r.ok]
    for r in ok:
        if r.t_sent is None or r.t_end is None or not r.token_times or r.completion_tokens is None:
            raise BenchError(f"request {r.request_id} is marked ok but lacks times or completion_tokens",
                             problem="incomplete_record")

    start = min(r.t_scheduled for r in measured)
    end = max((r.t_end if r.t_end is not None else r.t_scheduled) for r in measured)
    duration = end - start
    output_tokens = sum(r.completion_tokens or 0 for r in ok)
    input_tokens = sum((r.prompt_tokens if r.prompt_tokens is not None else r.prompt_len) or 0 for r in ok)

    ttft = [r.token_times[0] - r.t_sent for r in ok]  # type: ignore[operator]
    itl = [gap for r in ok for gap in per_token_itl(r.token_times, r.chunk_tokens)]
    itl_chunk = [gap for r in ok for gap in _intervals(r.token_times)]
    tpot = [
        (r.t_end - r.token_times[0]) / (r.completion_tokens - 1)  # type: ignore[operator]
        for r in ok
        if (r.completion_tokens or 0) > 1
    ]
    e2e = [r.t_end - r.t_sent for r in ok]  # type: ignore[operator]
    queue = [r.t_sent - r.t_scheduled for r in measured if r.t_sent is not None]

    spec = [r for r in ok if r.spec_verify_ct]
    accept = sum(r.completion_tokens or 0 for r in spec) / sum(r.spec_verify_ct or 0 for r in spec) if spec else None
    accept_mean = (
        float(np.mean([(r.completion_tokens or 0) / (r.spec_verify_ct or 1) for r in spec])) if spec else None
    )
    reported = [(r, r.spec_accept_length) for r in spec if r.spec_accept_length is not None]
    server_mean = float(np.mean([length for _, length in reported])) if reported else None
    disagreements = sum(abs((r.completion_tokens or 0) / (r.spec_verify_ct or 1) - length) > 1e-9
                        for r, length in reported) if reported else None
    histogram = _summed_histogram(r.spec_accept_histogram for r in spec if r.spec_accept_histogram) or None
    per_step = (sum((k + 1) * h for k, h in enumerate(histogram)) / sum(histogram)
                if histogram and sum(histogram) else None)

    cpu_per_1k = client_cpu_s / output_tokens * 1000 if client_cpu_s is not None and output_tokens else None
    return PointMetrics(
        concurrency=concurrencies.pop(),
        requests=len(measured),
        completed=len(ok),
        failed=len(measured) - len(ok),
        duration_s=duration,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        output_tok_per_s=output_tokens / duration if duration > 0 else 0.0,
        requests_per_s=len(ok) / duration if duration > 0 else 0.0,
        ttft_s=Distribution.of(ttft),
        itl_s=Distribution.of(itl),
        tpot_s=Distribution.of(tpot),
        e2e_s=Distribution.of(e2e),
        queue_s=Distribution.of(queue),
        accept_length=accept,
        accept_length_mean=accept_mean,
        client_cpu_s=client_cpu_s,
        client_cpu_s_per_1k_tokens=cpu_per_1k,
        errors=sorted({r.error for r in measured if r.error}),
        itl_chunk_s=Distribution.of(itl_chunk),
        server_accept_length_mean=server_mean,
        accept_length_disagreements=disagreements,
        accepted_per_verify_histogram=histogram,
        accept_length_per_step=per_step,
    )


def format_point(m: PointMetrics) -> str:
    """One human-readable line per point, read from the dataclass (no arithmetic beyond unit changes)."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.1f}"

    acc = "-" if m.accept_length is None else f"{m.accept_length:.2f}"
    cpu = "-" if m.client_cpu_s_per_1k_tokens is None else f"{m.client_cpu_s_per_1k_tokens:.3f}"
    return (
        f"c={m.concurrency:<4} ok={m.completed}/{m.requests} out_tok/s={m.output_tok_per_s:.1f} "
        f"req/s={m.requests_per_s:.2f} ttft_ms p50={ms(m.ttft_s.p50)} p99={ms(m.ttft_s.p99)} "
        f"itl_ms/token p50={ms(m.itl_s.p50)} p99={ms(m.itl_s.p99)} e2e_ms p50={ms(m.e2e_s.p50)} "
        f"accept_len={acc} client_cpu_s/1k_tok={cpu}"
    )
