"""The measured cycle component table -> the CPU engine's cycle terms; absent or broken -> "not measured"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3lab.costmodel.measured_cycle import cpu_engine_entry, load_measured_cycle, parse_cycle_components
from eagle3lab.errors import PerfModelError

FIXTURE = Path(__file__).parent / "fixtures" / "cycle_components.cpu.json"


def test_components_become_cycle_terms_and_a_measured_break_even():
    m = load_measured_cycle("cpu", FIXTURE)
    assert m.num_steps == 3 and m.plain_step_s == pytest.approx(0.040)
    # 3 draft steps of 11 ms plus 85 ms per cycle = 118 ms, against a 40 ms plain step
    assert m.cycle_s == pytest.approx(0.118)
    assert m.break_even_accept_length == pytest.approx(118 / 40)
    terms = m.engine_terms()  # forwards stay with the passes; kernels and orchestration become engine terms
    assert terms["spec_cycle_extra_s"] == pytest.approx((1 + 2 + 1 + 14) / 1e3)
    assert terms["spec_step_extra_s"] == pytest.approx((0.5 + 1.5) / 1e3)
    rows = {(r["component"], r["scope"]): r for r in m.table()}
    assert rows[("verify_forward", "per_cycle")]["plain_steps"] == pytest.approx(55 / 40)
    assert rows[("draft_forward", "per_draft_step")]["term"] == "draft_forward"
    assert m.harness_only == {"interpreted_triton": pytest.approx(0.006)}


def test_a_list_of_rows_reads_the_same():
    data = json.loads(FIXTURE.read_text())
    rows = [{"component": k, "scope": scope, "ms": v["ms"]} for scope in ("per_draft_step", "per_cycle")
            for k, v in data.pop(scope).items()]
    m = parse_cycle_components({**data, "components": rows}, "rows")
    assert m.cycle_s == pytest.approx(load_measured_cycle("cpu", FIXTURE).cycle_s)


def test_cpu_engine_entry_is_measured_from_the_table(tmp_path):
    entry = cpu_engine_entry("cpu", FIXTURE)
    assert entry.status == "measured" and "measured here" in entry.reason
    assert entry.engine.spec_cycle_extra_s == pytest.approx(0.018)
    assert "notebook 03's cycle timers" in entry.engine.sources["spec_cycle_extra_s"]  # no generated file path
    assert entry.to_dict()["break_even_accept_length"] == pytest.approx(118 / 40)


def test_absent_or_broken_table_says_not_measured(tmp_path):
    absent = cpu_engine_entry("cpu", tmp_path / "missing.json")
    assert absent.status == "not measured" and "absent" in absent.reason and absent.engine is None
    assert absent.to_dict()["terms"] is None
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert cpu_engine_entry("cpu", broken).status == "not measured"


@pytest.mark.parametrize("change, parameter", [({"plain_step_ms": None}, "plain_step_ms"),
                                               ({"num_steps": 0}, "num_steps"),
                                               ({"per_cycle": {"verify_forward": {"ms": -1}}},
                                                "t: per_cycle.verify_forward")])
def test_malformed_table_is_one_clear_error(change, parameter):
    data = {**json.loads(FIXTURE.read_text()), **change}
    if data.get("plain_step_ms") is None:
        data.pop("plain_step_ms")
    with pytest.raises(PerfModelError) as err:
        parse_cycle_components(data, "t")
    assert err.value.parameter == parameter
