"""Request turnover: the other requests' prefills stall a running request's decode, the same seconds per request for
both arms, a larger share of a speculative request's shorter decode."""

from __future__ import annotations

import pytest

from eagle3lab.costmodel.turnover import Turnover, decode_rate, stall_per_token_s
from eagle3lab.errors import PerfModelError


def test_a_lone_request_is_never_stalled_by_another_prefill():
    turnover = Turnover(0.010, 31, "test")
    assert stall_per_token_s(turnover, 1) == 0.0
    assert decode_rate(0.012, 1, 1, turnover) == pytest.approx(1 / 0.012)


def test_each_of_the_other_requests_prefills_once_per_decode():
    """4 clients, 31 decode tokens: 3 prefills of 10 ms spread over 31 tokens, 12 ms passes."""
    turnover = Turnover(0.010, 31, "test")
    assert stall_per_token_s(turnover, 4) == pytest.approx(3 * 0.010 / 31)
    assert decode_rate(0.012, 1, 4, turnover) == pytest.approx(4 / (0.012 + 0.030 / 31))


def test_the_stall_costs_speculation_a_larger_share_than_plain_decoding():
    """A cycle of two plain steps emitting 2.5 tokens: 1.25x alone, less once prefills stall both arms alike."""
    turnover = Turnover(0.010, 31, "test")
    alone = decode_rate(0.024, 2.5, 1, turnover) / decode_rate(0.012, 1, 1, turnover)
    at_four = decode_rate(0.024, 2.5, 4, turnover) / decode_rate(0.012, 1, 4, turnover)
    assert alone == pytest.approx(1.25) and 1.0 < at_four < alone
    longer = Turnover(0.010, 255, "test")  # the same prefills over a longer output: the loss shrinks
    assert at_four < decode_rate(0.024, 2.5, 4, longer) / decode_rate(0.012, 1, 4, longer) < alone


@pytest.mark.parametrize("prefill_s, tokens", [(-0.001, 31), (float("nan"), 31), (0.01, 0)])
def test_a_turnover_that_cannot_be_is_refused(prefill_s, tokens):
    with pytest.raises(PerfModelError):
        Turnover(prefill_s, tokens, "test")


def test_a_pass_without_time_or_tokens_is_refused():
    with pytest.raises(PerfModelError, match="a pass needs"):
        decode_rate(0.0, 1, 1, Turnover(0.01, 31, "test"))
