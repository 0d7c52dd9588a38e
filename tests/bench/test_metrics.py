"""Metrics on per-request records written out by hand; every expected number can be checked on paper."""

from __future__ import annotations

import json

import pytest

from eagle3lab.errors import BenchError
from eagle3lab.bench.metrics import Distribution, PointMetrics, RequestRecord, compute_point_metrics, format_point


def _rec(rid: str, **kw) -> RequestRecord:
    base = dict(request_id=rid, concurrency=2, phase="measure", ok=True, t_scheduled=0.0)
    base.update(kw)
    return RequestRecord(**base)


@pytest.fixture()
def two_plain_requests() -> list[RequestRecord]:
    """Two requests without speculation, one token per chunk.

    r1: sent 0.1 s after scheduling, tokens at 0.5/0.7/0.9/1.1 -> TTFT 0.4, ITL 0.2 x3, E2E 1.0, TPOT 0.2.
    r2: sent at 0.2, tokens at 0.6/1.0/1.4/1.8, ends 2.0 -> TTFT 0.4, ITL 0.4 x3, E2E 1.8, TPOT 1.4/3.
    """
    return [
        _rec("r1", t_sent=0.1, token_times=[0.5, 0.7, 0.9, 1.1], t_end=1.1, completion_tokens=4, prompt_tokens=8),
        _rec("r2", t_sent=0.2, token_times=[0.6, 1.0, 1.4, 1.8], t_end=2.0, completion_tokens=4, prompt_tokens=8),
    ]


def test_rates_use_first_schedule_to_last_end(two_plain_requests):
    m = compute_point_metrics(two_plain_requests)
    assert m.duration_s == pytest.approx(2.0)
    assert m.output_tokens == 8 and m.input_tokens == 16
    assert m.output_tok_per_s == pytest.approx(4.0)
    assert m.requests_per_s == pytest.approx(1.0)
    assert (m.requests, m.completed, m.failed) == (2, 2, 0)


def test_latencies_keep_client_queueing_apart(two_plain_requests):
    m = compute_point_metrics(two_plain_requests)
    assert m.ttft_s.mean == pytest.approx(0.4)  # from t_sent, not from t_scheduled (would be 0.5 and 0.6)
    assert m.queue_s.mean == pytest.approx(0.15)
    assert m.queue_s.max == pytest.approx(0.2)
    assert m.e2e_s.mean == pytest.approx(1.4)
    assert m.itl_s.count == 6
    assert m.itl_s.mean == pytest.approx(0.3)
    assert m.itl_s.p50 == pytest.approx(0.3)
    assert m.tpot_s.mean == pytest.approx((0.2 + 1.4 / 3) / 2)


def test_no_speculation_gives_no_acceptance(two_plain_requests):
    m = compute_point_metrics(two_plain_requests)
    assert m.accept_length is None and m.accept_length_mean is None


def test_acceptance_from_server_counts_not_chunks():
    """12 tokens in 4 verify steps (3.0) and 6 in 3 (2.0): token-weighted 18/7, per-request mean 2.5."""
    recs = [
        _rec("a", t_sent=0.0, token_times=[0.1, 0.2, 0.3, 0.4], t_end=0.4, completion_tokens=12, spec_verify_ct=4),
        _rec("b", t_sent=0.0, token_times=[0.1, 0.2, 0.3], t_end=0.3, completion_tokens=6, spec_verify_ct=3),
    ]
    m = compute_point_metrics(recs)
    assert m.output_tokens == 18  # 7 chunks arrived, but the server counted 18 tokens
    assert m.accept_length == pytest.approx(18 / 7)
    assert m.accept_length_mean == pytest.approx(2.5)
    assert m.tpot_s.mean == pytest.approx((0.3 / 11 + 0.2 / 5) / 2)


def test_client_cpu_per_thousand_tokens(two_plain_requests):
    m = compute_point_metrics(two_plain_requests, client_cpu_s=0.4)
    assert m.client_cpu_s_per_1k_tokens == pytest.approx(50.0)  # 0.4 s for 8 tokens


def test_percentiles_interpolate_linearly():
    d = Distribution.of([float(v) for v in range(1, 11)])
    assert (d.count, d.mean, d.p50, d.max) == (10, 5.5, 5.5, 10.0)
    assert d.p90 == pytest.approx(9.1)
    assert d.p99 == pytest.approx(9.91)
    assert Distribution.of([]).mean is None


def test_failures_and_warmup(two_plain_requests):
    failed = _rec("r3", ok=False, t_scheduled=0.5, t_end=3.0, error="ServerDisconnectedError: gone")
    warm = _rec("w1", phase="warmup", t_scheduled=-10.0, t_sent=-10.0, token_times=[-9.0], t_end=-1.0,
                completion_tokens=100)
    m = compute_point_metrics([*two_plain_requests, failed, warm])
    assert (m.requests, m.completed, m.failed) == (3, 2, 1)
    assert m.output_tokens == 8  # the warm-up request's 100 tokens are not counted
    assert m.duration_s == pytest.approx(3.0)  # the failed request still held the point open
    assert m.errors == ["ServerDisconnectedError: gone"]
    assert m.queue_s.count == 2  # never sent: no queueing time to report


@pytest.mark.parametrize(
    "records, problem",
    [
        ([], "no_measured"),
        ([_rec("x", phase="warmup")], "no_measured"),
        ([_rec("x", t_sent=0, token_times=[1], t_end=1, completion_tokens=1),
          _rec("y", concurrency=4, t_sent=0, token_times=[1], t_end=1, completion_tokens=1)], "mixed_concurrency"),
        ([_rec("x", t_sent=0.0, t_end=1.0, completion_tokens=3)], "incomplete_record"),
    ],
)
def test_bad_records_fail_with_one_line(records, problem):
    with pytest.raises(BenchError) as info:
        compute_point_metrics(records)
    assert info.value.problem == problem
    assert "\n" not in str(info.value)


def test_round_trip_through_json(two_plain_requests):
    m = compute_point_metrics(two_plain_requests, client_cpu_s=0.1)
    again = PointMetrics.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again == m
    line = json.loads(json.dumps(two_plain_requests[0].to_dict()))
    assert RequestRecord.from_dict(line) == two_plain_requests[0]
    with pytest.raises(BenchError) as err:
        RequestRecord.from_dict({**line, "surprise": 1})
    assert (err.value.problem, err.value.key) == ("unknown_keys", "surprise")
    assert "out_tok/s=4.0" in format_point(compute_point_metrics(two_plain_requests))


def test_itl_is_per_token_with_a_multi_token_chunk_spread_over_its_tokens():
    """Chunks at 0.5 (1 token), 0.8 (3 tokens), 0.9 (1 token): per token 0.1 x3 then 0.1; per chunk 0.3, 0.1."""
    rec = _rec("s", t_sent=0.0, token_times=[0.5, 0.8, 0.9], chunk_tokens=[1, 3, 1], t_end=0.9, completion_tokens=5,
               spec_verify_ct=2)
    m = compute_point_metrics([rec])
    assert m.itl_s.count == 4 and m.itl_s.mean == pytest.approx(0.1) and m.itl_s.max == pytest.approx(0.1)
    assert m.itl_chunk_s.count == 2 and m.itl_chunk_s.mean == pytest.approx(0.2)
    assert m.tpot_s.mean == pytest.approx(0.1)  # (0.9 - 0.5) / (5 - 1)


def test_records_without_chunk_counts_count_one_token_per_chunk(two_plain_requests):
    m = compute_point_metrics(two_plain_requests)
    assert m.itl_s == m.itl_chunk_s


def test_damaged_chunk_counts_fail_in_one_line():
    rec = _rec("s", t_sent=0.0, token_times=[0.5, 0.8], chunk_tokens=[1], t_end=0.9, completion_tokens=2)
    with pytest.raises(BenchError) as err:
        compute_point_metrics([rec])
    assert (err.value.problem, err.value.key) == ("length_mismatch", "chunk_tokens")


def test_acceptance_readings_agree_with_the_server_and_the_histogram_sums_verify_steps():
    """r1: 9 tokens in 4 verify steps, histogram [1, 1, 1, 1] (accepted 0, 1, 2, 3 drafts) -> 10 tokens per step
    before the end cut; r2: 4 tokens in 3 steps, [2, 1]. Server ratios: 2.25 and 4/3 (r2 misreported as 1.5)."""
    r1 = _rec("r1", t_sent=0.0, token_times=[0.1, 0.2], t_end=0.2, completion_tokens=9, spec_verify_ct=4,
              spec_accept_length=2.25, spec_accept_histogram=[1, 1, 1, 1])
    r2 = _rec("r2", t_sent=0.0, token_times=[0.1, 0.2], t_end=0.2, completion_tokens=4, spec_verify_ct=3,
              spec_accept_length=1.5, spec_accept_histogram=[2, 1])
    m = compute_point_metrics([r1, r2])
    assert m.accept_length == pytest.approx(13 / 7)
    assert m.server_accept_length_mean == pytest.approx((2.25 + 1.5) / 2)
    assert m.accept_length_disagreements == 1
    assert m.accepted_per_verify_histogram == [3, 2, 1, 1]
    assert m.accept_length_per_step == pytest.approx((3 * 1 + 2 * 2 + 1 * 3 + 1 * 4) / 7)


def test_new_fields_survive_the_json_round_trip():
    rec = _rec("s", t_sent=0.0, token_times=[0.5, 0.8], chunk_tokens=[1, 2], t_end=0.9, completion_tokens=3,
               spec_verify_ct=2, spec_accept_length=1.5, spec_accept_histogram=[1, 1], output_ids=[5, 6, 7],
               prompt_index=3)
    assert RequestRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    m = compute_point_metrics([rec])
    assert PointMetrics.from_dict(json.loads(json.dumps(m.to_dict()))) == m
