"""The layer-convention experiment's cells, served acceptance and interval, and its record (issue 37, item 3)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from eagle3lab.bench import layer_cells
from eagle3lab.bench.layer_cells import AS_GIVEN, INPUT, OUTPUT, PLUS_ONE
from eagle3lab.errors import BenchError


def test_cells_pair_each_convention_with_each_capture():
    found = {(c.convention, c.capture): c for c in layer_cells.cells([1, 6, 10], 12)}
    assert set(found) == {(OUTPUT, PLUS_ONE), (OUTPUT, AS_GIVEN), (INPUT, PLUS_ONE), (INPUT, AS_GIVEN)}
    # "output": trained on the outputs of the ids; "input": on the outputs of the layers below them
    assert found[OUTPUT, PLUS_ONE].trained_outputs == (1, 6, 10) and found[INPUT, AS_GIVEN].trained_outputs == (0, 5, 9)
    # +1 feeds the outputs of the ids (the input of layer i + 1), as given the layers below
    assert found[OUTPUT, AS_GIVEN].fed_outputs == (0, 5, 9) and found[INPUT, PLUS_ONE].fed_outputs == (1, 6, 10)
    assert {k: c.offset for k, c in found.items()} == {(OUTPUT, PLUS_ONE): 0, (OUTPUT, AS_GIVEN): -1,
                                                      (INPUT, PLUS_ONE): 1, (INPUT, AS_GIVEN): 0}


@pytest.mark.parametrize("ids", [[0, 5, 9], [1, 6, 11], [6, 1, 10], [], [1, 1, 10]])
def test_cells_refuse_ids_whose_layer_below_or_above_cannot_be_captured(ids):
    with pytest.raises(BenchError, match="must be distinct, ascending and within 1..10"):
        layer_cells.cells(ids, 12)


def test_served_acceptance_pools_requests_and_brackets_the_pooled_value():
    counts = [[32, 14], [32, 16], [32, 12], [32, 15], [32, 13]]
    acc = layer_cells.served_acceptance(counts)
    assert acc.accept_length == pytest.approx(160 / 70) and (acc.requests, acc.tokens, acc.verify_steps) == (5, 160, 70)
    assert acc.low is not None and acc.high is not None
    assert 32 / 16 <= acc.low < acc.accept_length < acc.high <= 32 / 12
    assert layer_cells.served_acceptance(counts) == acc  # seeded: the same requests give the same interval
    one = layer_cells.served_acceptance([[32, 16]])
    assert one.accept_length == 2.0 and one.low is None and one.high is None


@pytest.mark.parametrize("bad", [[], [[32, 0]], [[0, 3]], [[1, 2, 3]]])
def test_served_acceptance_refuses_requests_without_speculation(bad):
    with pytest.raises(BenchError):
        layer_cells.served_acceptance(bad)


def test_request_counts_keep_finished_measured_requests_only():
    def rec(phase, ok, tokens, steps):
        return SimpleNamespace(phase=phase, ok=ok, completion_tokens=tokens, spec_verify_ct=steps, prompt_index=0)

    records = [rec("warmup", True, 32, 10), rec("measure", True, 32, 14), rec("measure", False, 5, 2),
               rec("measure", True, 32, None)]
    assert layer_cells.request_counts(records) == [[32, 14]]


def record_with(values: dict) -> dict:
    cells = [{"convention": c.convention, "capture": c.capture, "trained_outputs": list(c.trained_outputs),
              "fed_outputs": list(c.fed_outputs), "offset": c.offset, "status": "measured",
              "accept_length": values[c.convention, c.capture], "low": values[c.convention, c.capture] - 0.1,
              "high": values[c.convention, c.capture] + 0.1} for c in layer_cells.cells([1, 6, 10], 12)]
    return {"schema_version": layer_cells.SCHEMA_VERSION, "kind": layer_cells.RECORD_KIND, "cells": cells}


def test_mismatch_costs_compare_each_convention_with_its_own_matched_capture():
    record = record_with({(OUTPUT, PLUS_ONE): 2.5, (OUTPUT, AS_GIVEN): 2.0, (INPUT, PLUS_ONE): 1.75,
                          (INPUT, AS_GIVEN): 2.25})
    costs = {c["convention"]: c for c in layer_cells.mismatch_costs(record)}
    assert costs[OUTPUT]["matched_capture"] == PLUS_ONE and costs[OUTPUT]["drop"] == pytest.approx(0.5)
    assert costs[INPUT]["matched_capture"] == AS_GIVEN and costs[INPUT]["drop"] == pytest.approx(0.5)
    record["cells"][1]["accept_length"] = None  # a cell that did not measure: no cost for its convention
    assert [c["convention"] for c in layer_cells.mismatch_costs(record)] == [INPUT]


def test_load_record_refuses_another_schema_in_one_line(tmp_path):
    assert layer_cells.load_record("cpu", tmp_path) is None
    layer_cells.record_path("cpu", tmp_path).write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(BenchError, match="not a version-1 layer-convention experiment record; rerun"):
        layer_cells.load_record("cpu", tmp_path)
    layer_cells.record_path("cpu", tmp_path).write_text("{")
    with pytest.raises(BenchError, match="is not readable JSON"):
        layer_cells.load_record("cpu", tmp_path)


def test_the_paired_interval_resolves_a_cost_the_unpaired_intervals_overlap_on():
    # prompts whose acceptance spreads widely, the mismatched cell one verify step worse on every prompt
    matched = [[32, steps] for steps in (10, 12, 14, 16, 18, 20, 11, 13, 15, 17)]
    other = [[32, steps + 1] for _, steps in matched]
    a, b = layer_cells.served_acceptance(matched), layer_cells.served_acceptance(other)
    assert b.high > a.low  # unpaired: the intervals overlap
    low, high = layer_cells.paired_drop_interval(matched, other)
    assert 0 < low < a.accept_length - b.accept_length < high
    assert layer_cells.paired_drop_interval(matched, other[:-1]) is None  # different prompts: no pairing
    assert layer_cells.paired_drop_interval(matched[:1], other[:1]) is None


def test_request_counts_follow_prompt_order():
    records = [SimpleNamespace(phase="measure", ok=True, completion_tokens=32, spec_verify_ct=s, prompt_index=i)
               for i, s in ((2, 12), (0, 10), (1, 11))]
    assert layer_cells.request_counts(records) == [[32, 10], [32, 11], [32, 12]]
