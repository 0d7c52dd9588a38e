"""bench.cycle: from the timers' records to the component table, its JSON for the cost model, and the figure.

The records are written here in the timers' format (``runtime.cpu_harness.cycle_timers``); the expected values are
computed by hand from them.
"""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace

import pytest

from eagle3lab.bench import cycle
from eagle3lab.errors import BenchError
from eagle3lab.report.plots.cycle import draw_cycle_figure, draw_server_time_figure, server_time_figure_path
from eagle3lab.sidecars import CycleComponentsRecord

T0 = 1_800_000_000.0


def _record(t: float, root: str, parts: dict[str, float], bs: int = 1, spec: str | None = None, **extra) -> dict:
    return {"t": t, "pid": 1, "root": root, "mode": "DECODE", "bs": bs, "spec": spec,
            "steps": 3 if spec else None, "draft_tokens": 4 if spec else None,
            "ms": sum(parts.values()), "parts": {k: [v, 1] for k, v in parts.items()}, **extra}


def _plain(t: float, forward: float = 10.0, bs: int = 1) -> list[dict]:
    return [_record(t, "scheduler.run_batch", {"scheduler.run_batch": 0.5, "worker.forward_batch_generation": 0.5,
                                               "model.target_decode": forward}, bs=bs),
            _record(t, "scheduler.process_batch_result", {"scheduler.process_batch_result": 1.0}, bs=bs)]


def _cycle(t: float, accepted: int = 2, bs: int = 1, verify: float = 12.0) -> list[dict]:
    parts = {"scheduler.run_batch": 0.5, "eagle.forward_batch_generation": 1.0, "model.target_verify": verify,
             "model.draft_decode": 4.0, "model.draft_extend": 3.0, "eagle.draft_loop": 2.0,
             "eagle.select_top_k_tokens": 0.0, "kernel.assign_draft_cache_locs": 0.5, "eagle.verify_prepare": 1.0}
    record = _record(t, "scheduler.run_batch", parts, bs=bs, spec="EAGLE3", accepted=accepted)
    record["parts"]["model.draft_decode"] = [4.0, 2]
    return [record, _record(t, "scheduler.process_batch_result", {"scheduler.process_batch_result": 1.0}, bs=bs,
                            spec="EAGLE3")]


def _trace(tmp_path, records):
    path = tmp_path / "cycles.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"t": 1, "cut by a ki')
    return path


def _arm(name: str, start: float, end: float, points: tuple = ()) -> SimpleNamespace:
    """An arm swept from ``start`` to ``end``; ``points``: (concurrency, measured from, measured to) each."""
    iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat()  # noqa: E731
    measured = [SimpleNamespace(concurrency=c, measured_from=a, measured_to=b) for c, a, b in points]
    return SimpleNamespace(name=name, started_at=iso(start), finished_at=iso(end), speculative=name != "baseline",
                           measured_points=lambda: measured)


def test_table_charges_each_component_once_and_separates_the_harness_share(tmp_path):
    records = [r for i in range(5) for r in _plain(T0 + i)]
    records += _plain(T0 + 5, forward=500.0)  # a one-off stall: dropped as an outlier
    # a prefill batch between the steps: recorded by the timers, never part of a plain step or a cycle
    records += [{**r, "mode": "EXTEND"} for r in _plain(T0 + 2, forward=20.0)]
    records += [r for i in range(4) for r in _cycle(T0 + 100 + i, accepted=2 if i % 2 else 0)]
    records += [r for i in range(2) for r in _cycle(T0 + 200 + i, bs=2)]  # a second arm: outside the window
    table = cycle.table_from_arms(_trace(tmp_path, records), _arm("baseline", T0, T0 + 50, ((1, T0, T0 + 6),)),
                                  _arm("EAGLE-3", T0 + 90, T0 + 150, ((1, T0 + 100, T0 + 104),)), "cpu",
                                  shims=["x"])
    assert table.plain_step_ms == pytest.approx(12.0)
    assert table.cycle_ms == pytest.approx(25.0)
    assert table.cycle_in_plain_steps == pytest.approx(25.0 / 12.0, abs=1e-4)
    assert table.harness_only_ms == pytest.approx(0.5)
    assert table.cycle_without_harness_ms == pytest.approx(24.5)
    assert table.draft_step_ms == pytest.approx((4.0 + 2.0) / 3)
    assert table.tokens_per_request_per_cycle == pytest.approx(2.0)
    assert sum(g["cycle_ms"] for g in table.groups.values()) == pytest.approx(table.cycle_ms)
    assert table.groups["target forward"] == {"plain_ms": 10.0, "cycle_ms": 12.0}
    assert table.groups["harness kernels"]["cycle_ms"] == pytest.approx(0.5)
    by_name = {c.name: c for c in table.components}
    assert by_name["model.draft_decode"].cycle_calls == 2 and by_name["kernel.assign_draft_cache_locs"].harness_only
    assert [b.batch_size for b in table.by_batch_size] == [1]
    rows = cycle.table_rows(table)
    assert rows[-3]["component"] == "total" and rows[-3]["cycle ms"] == table.cycle_ms

    saved = cycle.save(table, tmp_path / "cycle_components.cpu.json")
    again = CycleComponentsRecord.model_validate_json(saved.read_text())
    assert again == table and again.schema_id == cycle.SCHEMA_ID
    figure = draw_cycle_figure(table, tmp_path)
    assert figure.exists() and figure.stat().st_size > 0
    # each point's window split from the same records: every decode batch (the stall too) and the prefill
    assert [(p.arm, p.decode_batches, p.prefill_batches) for p in table.by_point] == [("baseline", 6, 1),
                                                                                      ("EAGLE-3", 4, 0)]
    no_split = table.model_copy(update={"by_point": []})
    assert draw_server_time_figure(no_split, tmp_path) is None  # no point windows: no figure, nothing written
    assert not server_time_figure_path("cpu", tmp_path).exists()
    assert draw_server_time_figure(table, tmp_path) == server_time_figure_path("cpu", tmp_path)
    assert server_time_figure_path("cpu", tmp_path).stat().st_size > 0


def test_table_refuses_when_an_arm_left_no_decode_records(tmp_path):
    trace = _trace(tmp_path, _plain(T0))
    with pytest.raises(BenchError, match="no decode records at batch size 1"):
        cycle.table_from_arms(trace, _arm("baseline", T0 - 1, T0 + 1), _arm("EAGLE-3", T0 + 5, T0 + 9), "cpu")
    with pytest.raises(BenchError, match="no cycle trace"):
        cycle.read_records(tmp_path / "missing.jsonl")


def test_component_groups():
    assert cycle.component_group("triton_interp.assign_req_to_token_pool") == "harness kernels"
    assert cycle.component_group("model.draft_extend") == "draft forward"
    assert cycle.component_group("runner.target_verify") == "model runner"
    assert cycle.component_group("eagle.verify") == "orchestration"


def test_the_table_written_here_is_what_the_cost_models_cpu_engine_entry_reads(tmp_path):
    """The writer and the reader of artifacts/cycle_components.<profile>.json meet: the engine term is the cycle's
    time outside the model forwards beyond the plain step's (6 - 2 ms), measured instead of the model's own
    bookkeeping kernels and CPU preps, and the entry names the arm whose cycles were timed."""
    from eagle3lab.costmodel.measured_cycle import cpu_engine_entry

    records = [r for i in range(5) for r in _plain(T0 + i)] + [r for i in range(4) for r in _cycle(T0 + 100 + i)]
    table = cycle.table_from_arms(_trace(tmp_path, records), _arm("baseline", T0, T0 + 50),
                                  _arm("eagle3-untrained", T0 + 90, T0 + 150), "cpu")
    entry = cpu_engine_entry("cpu", cycle.save(table, tmp_path / "cycle_components.cpu.json"))
    assert entry.status == "measured" and "arm 'eagle3-untrained'" in entry.reason
    assert entry.engine.spec_cycle_extra_s == pytest.approx((25.0 - 12.0 - 7.0 - 2.0) / 1e3)
    assert entry.engine.spec_step_extra_s == 0.0
    assert (entry.engine.kernels_per_verify, entry.engine.kernels_per_draft_step, entry.engine.spec_cpu_preps) == \
        (0, 0, 0)
    assert entry.measured.break_even_accept_length == pytest.approx(25.0 / 12.0, abs=1e-4)
    assert entry.measured.harness_only == {"harness_kernels": pytest.approx(0.5e-3)}


def test_the_control_arms_verify_at_two_batch_sizes_gives_the_models_host_work_per_running_request(tmp_path,
                                                                                                    monkeypatch):
    """The control arm's verify forward: 12 ms with one request, 18 ms with four: 2 ms per request beyond the first,
    spread over the target's layers in every pass of the model's CPU deployment. A batch size seen in fewer
    cycles than the steady minimum (a transition) gives no term."""
    from eagle3lab.costmodel.measured_cycle import MIN_CYCLES_PER_BATCH_SIZE, cpu_engine_entry
    from eagle3lab.report import run_model
    from eagle3lab.report.run_model import run_deployment
    from eagle3lab.runtime.profiles import load_profile

    n = 2 * MIN_CYCLES_PER_BATCH_SIZE
    records = [r for i in range(5) for r in _plain(T0 + i)] + \
        [r for i in range(n) for r in _cycle(T0 + 100 + i * 0.01)] + \
        [r for i in range(n) for r in _cycle(T0 + 120 + i * 0.01, bs=4, verify=18.0)] + \
        [r for i in range(3) for r in _cycle(T0 + 130 + i * 0.01, bs=3, verify=40.0)]  # a transition: ignored
    table = cycle.table_from_arms(_trace(tmp_path, records), _arm("baseline", T0, T0 + 50),
                                  _arm("eagle3-untrained", T0 + 90, T0 + 150), "cpu")
    four = next(b for b in table.by_batch_size if b.batch_size == 4)
    assert four.cycle_target_forward_ms == pytest.approx(18.0) and four.plain_target_forward_ms is None
    path = cycle.save(table, tmp_path / "cycle_components.cpu.json")
    entry = cpu_engine_entry("cpu", path)
    assert entry.measured.verify_per_request_s == pytest.approx(2e-3)
    assert entry.measured.per_request_batch_sizes == (1, 4)
    monkeypatch.setattr(run_model, "cpu_engine_entry", lambda name: cpu_engine_entry(name, path))
    dep, _ = run_deployment(load_profile("cpu"), None, 5e9, step=(0.02, "here"))
    assert dep.engine.pass_per_request_layer_s == pytest.approx(2e-3 / dep.target.num_layers)
    assert "batch size 4 against 1" in dep.engine.sources["pass_per_request_layer_s"]
    few = [r for i in range(5) for r in _plain(T0 + i)] + [r for i in range(n) for r in _cycle(T0 + 100 + i * 0.01)] \
        + [r for i in range(5) for r in _cycle(T0 + 120 + i, bs=4, verify=18.0)]
    table = cycle.table_from_arms(_trace(tmp_path, few), _arm("baseline", T0, T0 + 50),
                                  _arm("eagle3-untrained", T0 + 90, T0 + 150), "cpu")
    sparse = cpu_engine_entry("cpu", cycle.save(table, tmp_path / "cycle_components.cpu.json"))
    assert sparse.status == "measured" and sparse.measured.verify_per_request_s is None
