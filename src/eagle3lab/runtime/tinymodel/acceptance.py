"""Offline acceptance of a greedy EAGLE draft chain (topk 1), with the semantics of sglang's verify.

One request, as sglang 0.5.9 serves it with ``--speculative-eagle-topk 1``: the prefill emits the first token; then
each round drafts ``steps`` tokens, the target verifies them in one forward, the longest prefix of drafts that
equal the target's own greedy tokens is accepted and the target's next token is added as a bonus, so a round
emits ``accepted + 1`` tokens. The request stops at ``output_len`` completion tokens (surplus tokens of the last
round are dropped). sglang reports ``spec_accept_length = completion_tokens / spec_verify_ct`` per request.

Because a draft chain only matters while its drafts are right, whether draft ``k`` would be accepted at a round
depends only on the anchor (how many tokens are already out) and on drafts ``1..k`` matching the target: so a
request is fully described by ``hits[i][k]``: at the round that starts with ``i + 1`` tokens out, is draft
``k + 1`` equal to the target's greedy token, given that drafts ``1..k`` were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eagle3lab.errors import TinyModelError


@dataclass(frozen=True)
class RequestAcceptance:
    """What sglang would report for one request, plus the accepted drafts of each round."""

    completion_tokens: int
    verify_ct: int
    accepted_per_verify: tuple[int, ...]  # drafts accepted in each round (0 .. steps), before the end cut

    @property
    def accept_length(self) -> float:
        """sglang's ``spec_accept_length``: completion tokens per verify."""
        return self.completion_tokens / self.verify_ct if self.verify_ct else float("nan")


def accepted_drafts(hit_row: Sequence[bool]) -> int:
    """Length of the leading run of hits: drafts 1..k all equal the target's greedy tokens."""
    count = 0
    for hit in hit_row:
        if not hit:
            break
        count += 1
    return count


def simulate_request(hits: Sequence[Sequence[bool]], output_len: int) -> RequestAcceptance:
    """Replay one request. ``hits[i]`` is the draft chain of the round that starts with ``i + 1`` tokens out.

    ``hits`` needs a row for every anchor the request can reach, i.e. ``output_len - 1`` rows (rows beyond are
    ignored; a missing reachable row is an error, never a silent zero).
    """
    if output_len < 1:
        raise TinyModelError(f"output_len must be at least 1, got {output_len}", parameter="output_len",
                             value=output_len)
    emitted, verifies, accepted = 1, 0, []  # the prefill emits the first completion token
    while emitted < output_len:
        if emitted - 1 >= len(hits):
            raise TinyModelError(f"hits has {len(hits)} rows but the request reaches anchor {emitted - 1}; "
                                 f"give one row per anchor (output_len - 1 = {output_len - 1})", parameter="hits",
                                 value=emitted - 1, problem="too_few_rows")
        count = accepted_drafts(hits[emitted - 1])
        accepted.append(count)
        verifies += 1
        emitted += count + 1
    return RequestAcceptance(completion_tokens=output_len, verify_ct=verifies, accepted_per_verify=tuple(accepted))


@dataclass(frozen=True)
class AcceptanceSummary:
    """Acceptance over many requests: the mean of per-request values (what a per-request record averages to) and
    the pooled ratio (total completion tokens / total verifies, what a server-wide counter shows)."""

    requests: int
    mean_accept_length: float
    pooled_accept_length: float
    accepted_histogram: dict[int, int] = field(default_factory=dict)  # drafts accepted per round -> rounds

    def to_dict(self) -> dict:
        return {"requests": self.requests, "mean_accept_length": round(self.mean_accept_length, 4),
                "pooled_accept_length": round(self.pooled_accept_length, 4),
                "accepted_histogram": {str(k): v for k, v in sorted(self.accepted_histogram.items())}}


def summarise(results: Sequence[RequestAcceptance]) -> AcceptanceSummary:
    if not results:
        raise TinyModelError("no requests to summarise", parameter="results", problem="empty")
    histogram: dict[int, int] = {}
    for result in results:
        for count in result.accepted_per_verify:
            histogram[count] = histogram.get(count, 0) + 1
    tokens = sum(r.completion_tokens for r in results)
    verifies = sum(r.verify_ct for r in results)
    return AcceptanceSummary(requests=len(results),
                             mean_accept_length=sum(r.accept_length for r in results) / len(results),
                             pooled_accept_length=tokens / verifies if verifies else float("nan"),
                             accepted_histogram=histogram)
