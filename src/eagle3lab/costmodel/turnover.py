"""Request turnover in a closed-loop benchmark: the other requests' prefills that stall a running request's decode.

Why: a benchmark's decode-only rate is running requests over mean TPOT, and a request's TPOT pays for every batch the
server runs between its first and its last token, including the prefills of the requests that replace finished
ones. With ``c`` clients each sending its next request when the last one ends, every other client's slot turns over
about once while one request decodes, so each request's decode is stalled by about ``c - 1`` prefills. Spread over
its ``L`` decode tokens that is ``(c - 1) x prefill / L`` per token, the same for plain decoding and speculation; but
a speculative pass emits ``acceptance`` tokens, so the stall is a larger share of a speculative request's shorter
decode, and the speedup falls with concurrency even where the cycle itself costs the same. A decode cost model
(``costmodel.cycle``) counts passes only; this adds the stall from a prefill time measured apart.

Limits: one prefill per arriving request (sglang may batch two arrivals into one prefill, which this counts twice),
no chunked or mixed prefill, and every request of the same length (the benchmark's fixed output length).
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.errors import PerfModelError


@dataclass(frozen=True)
class Turnover:
    """One arm's prefill of one new request, as measured, and the decode tokens each request runs."""

    prefill_s: float  # one prefill batch (a new request's prompt; with EAGLE-3 the drafter's extend too)
    decode_tokens: int  # tokens a request decodes after its first one (output length - 1)
    source: str  # where the prefill time was measured

    def __post_init__(self) -> None:
        if not self.prefill_s >= 0:
            raise PerfModelError(f"a prefill time must be >= 0 s, got {self.prefill_s!r}", parameter="prefill_s",
                                 value=self.prefill_s, problem="invalid")
        if self.decode_tokens < 1:
            raise PerfModelError(f"a request must decode at least one token after its first, got "
                                 f"{self.decode_tokens}", parameter="decode_tokens", value=self.decode_tokens,
                                 problem="invalid")


def stall_per_token_s(turnover: Turnover, concurrency: int) -> float:
    """Seconds of the other requests' prefills each decoded token of one request waits for, at ``concurrency``."""
    return max(concurrency - 1, 0) * turnover.prefill_s / turnover.decode_tokens


def decode_rate(pass_s: float, tokens_per_pass: float, concurrency: int, turnover: Turnover) -> float:
    """The decode-only rate (tokens/s over all running requests) when every pass of ``pass_s`` seconds emits
    ``tokens_per_pass`` tokens per request (1 for a plain step, the acceptance length for a cycle) and the other
    requests' prefills stall it."""
    if pass_s <= 0 or tokens_per_pass <= 0:
        raise PerfModelError(f"a pass needs a time > 0 and tokens > 0, got {pass_s!r} s and {tokens_per_pass!r}")
    return concurrency / (pass_s / tokens_per_pass + stall_per_token_s(turnover, concurrency))
