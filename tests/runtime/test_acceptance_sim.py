"""The offline acceptance simulator against cases derived by hand from sglang's verify rules (topk 1, 3 steps).

Rules (sglang 0.5.9, eagle_info.py verify and tokenizer_manager.py meta_info): the prefill emits the first token;
each verify accepts the leading run of drafts equal to the target's greedy tokens plus one bonus token; a request
stops at max_new_tokens (extra tokens of the last round dropped, the round still counted);
spec_accept_length = completion_tokens / spec_verify_ct.
"""

from __future__ import annotations

import pytest

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel.acceptance import accepted_drafts, simulate_request, summarise

ALL = (True, True, True)
NONE = (False, False, False)


def test_leading_run_only_counts_until_the_first_miss():
    assert accepted_drafts(ALL) == 3
    assert accepted_drafts(NONE) == 0
    assert accepted_drafts((True, False, True)) == 1  # draft 3 matching after a miss is never accepted
    assert accepted_drafts((False, True, True)) == 0


def test_perfect_drafter_on_32_tokens():
    # 1 prefill token, then 4 per verify: 1 + 4 * 8 = 33 >= 32 -> 8 verifies, the last one cut by one token
    result = simulate_request([ALL] * 31, 32)
    assert result.verify_ct == 8 and result.completion_tokens == 32
    assert result.accept_length == 4.0
    assert result.accepted_per_verify == (3,) * 8


def test_useless_drafter_on_32_tokens():
    # every verify yields only the bonus token: 31 verifies for the 31 tokens after the prefill
    result = simulate_request([NONE] * 31, 32)
    assert result.verify_ct == 31 and result.accept_length == pytest.approx(32 / 31)


def test_rounds_read_the_row_of_their_anchor():
    # output 8. Round 1 starts with 1 token out -> row 0: accepts 2 (emits 3, total 4).
    # Round 2 starts with 4 out -> row 3: accepts 0 (total 5). Round 3 -> row 4: accepts 3 (total 9 > 8, cut).
    rows = [(True, True, False), ALL, ALL, NONE, ALL, NONE, NONE]
    result = simulate_request(rows, 8)
    assert result.accepted_per_verify == (2, 0, 3)
    assert result.verify_ct == 3 and result.accept_length == pytest.approx(8 / 3)


def test_rows_skipped_by_an_accepted_round_do_not_matter():
    base = [ALL, NONE, NONE, NONE, ALL, ALL, ALL]
    # round 1 accepts 3 and jumps from anchor 0 to anchor 4, so rows 1..3 are never read
    changed = [ALL, ALL, ALL, ALL, ALL, ALL, ALL]
    assert simulate_request(base, 8) == simulate_request(changed, 8)


def test_single_token_request_has_no_verify():
    result = simulate_request([], 1)
    assert result.verify_ct == 0 and result.accepted_per_verify == ()


def test_missing_reachable_row_is_an_error_not_a_zero():
    with pytest.raises(TinyModelError) as err:
        simulate_request([NONE, NONE], 8)
    assert (err.value.problem, err.value.parameter, err.value.value) == ("too_few_rows", "hits", 2)


def test_summary_separates_mean_of_requests_from_pooled_ratio():
    fast = simulate_request([ALL] * 31, 32)  # 32 / 8
    slow = simulate_request([NONE] * 31, 32)  # 32 / 31
    summary = summarise([fast, slow])
    assert summary.mean_accept_length == pytest.approx((4.0 + 32 / 31) / 2)
    assert summary.pooled_accept_length == pytest.approx(64 / 39)
    assert summary.accepted_histogram == {3: 8, 0: 31}
    assert summary.to_dict()["accepted_histogram"] == {"0": 31, "3": 8}
