"""bench.server_time: a point's measured window split into decode batches, prefill batches and the rest.

Records are written here in the timers' format (``runtime.cpu_harness.cycle_timers``); the real servers' split is
checked on the full report's own trace (tests/report/test_report.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eagle3lab.bench import server_time

T0 = 1_800_000_000.0


def _record(t: float, mode: str, bs: int, ms: float, spec: str | None = "EAGLE3",
            root: str = "scheduler.run_batch") -> dict:
    return {"t": t, "pid": 1, "root": root, "mode": mode, "bs": bs, "spec": spec, "ms": ms,
            "parts": {root: [ms, 1]}}


def _eagle_point(start: float) -> list[dict]:
    """One second of an EAGLE-3 server at concurrency 4: ten cycles (two of them at 3 requests, a request having
    just finished), each with a 2 ms scheduling call, and two prefills of 50 ms."""
    records = []
    for i in range(10):
        bs = 3 if i in (4, 8) else 4
        records.append(_record(start + 0.05 + i * 0.09, "DECODE", bs, 40.0))
        records.append(_record(start + 0.05 + i * 0.09, "DECODE", bs, 2.0, root="scheduler.process_batch_result"))
    records += [_record(start + 0.4, "EXTEND", 1, 50.0), _record(start + 0.8, "EXTEND", 1, 50.0)]
    return records


def test_a_window_splits_into_decode_prefill_and_the_rest_per_cycle():
    records = _eagle_point(T0)
    records += [_record(T0 + 0.5, "DECODE", 4, 30.0, spec=None)]  # another server (no speculation) meanwhile
    records += [_record(T0 + 1.5, "DECODE", 4, 40.0)]  # after the window
    split = server_time.point_time(records, arm="eagle3", speculative=True, concurrency=4,
                                   measured_from=T0, measured_to=T0 + 1.0)
    assert split.decode_batches == 10 and split.prefill_batches == 2
    assert split.mean_batch_size == pytest.approx(3.8) and split.full_batch_share == pytest.approx(0.8)
    assert split.decode_ms == pytest.approx(42.0) and split.prefill_ms == pytest.approx(10.0)
    assert split.wall_ms == pytest.approx(100.0) and split.other_ms == pytest.approx(48.0)
    assert split.decode_ms + split.prefill_ms + split.other_ms == pytest.approx(split.wall_ms)


def test_a_window_without_that_servers_decode_batches_has_no_split():
    records = [_record(T0 + 0.5, "DECODE", 1, 30.0, spec=None), _record(T0 + 0.6, "EXTEND", 1, 50.0)]
    assert server_time.point_time(records, arm="eagle3", speculative=True, concurrency=1,
                                  measured_from=T0, measured_to=T0 + 1.0) is None


def test_arms_are_split_point_by_point_and_points_without_a_window_are_left_out():
    records = _eagle_point(T0) + _eagle_point(T0 + 10) + [_record(T0 + 20.5, "DECODE", 1, 15.0, spec=None)]

    def point(concurrency: int, start: float | None) -> SimpleNamespace:
        return SimpleNamespace(concurrency=concurrency, measured_from=start,
                               measured_to=None if start is None else start + 1.0)

    def arm(name: str, speculative: bool, points: list) -> SimpleNamespace:
        return SimpleNamespace(name=name, speculative=speculative, measured_points=lambda: points)

    splits = server_time.arm_times(records, [arm("baseline", False, [point(1, T0 + 20), point(2, None)]),
                                           arm("eagle3", True, [point(4, T0), point(4, T0 + 10)])])
    assert [(s.arm, s.concurrency, s.decode_batches) for s in splits] == [("baseline", 1, 1), ("eagle3", 4, 10),
                                                                          ("eagle3", 4, 10)]
    rows = server_time.rows(splits)
    assert rows[1]["decode ms"] == 42.0 and rows[1]["full batches %"] == 80.0
