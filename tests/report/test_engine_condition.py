"""The sentences on the engine the incident's verdict rests on: made from the evidence alone."""

from __future__ import annotations

from eagle3lab.report.engine_condition import break_even_moved, tp_term_clause

TP_TERM = {"fitted_tp": [2, 4], "fitted_hardware": ["h100-sxm", "h200"], "incident_tp": 8,
           "incident_hardware": "rtx-pro-6000-blackwell", "extrapolated": True, "spec_tp_extra_ms": 1.24,
           "per_cycle_at_incident_tp_ms": 8.68}


def _side(single: float, cap: float, peak: float) -> dict:
    return {"break_even_single_stream": single, "break_even_at_spec_max_batch": cap, "break_even_at_peak": peak,
            "spec_max_batch": 48, "spec_cycle_extra_ms": 0.98, "spec_step_extra_ms": 0.0,
            "provenance": "modelled: plus orchestration fitted on development sources (a, b) and frozen 2026-12-01"}


def test_an_extrapolated_tp_term_is_said_with_its_condition():
    text = tp_term_clause(TP_TERM)
    assert "TP 2-4 on h100-sxm, h200" in text and "extrapolated here to TP 8" in text
    assert "1.24 ms per cycle per TP rank" in text and "8.7 ms per cycle at TP 8" in text


def test_a_tp_term_fitted_over_the_incident_tp_is_not_called_extrapolated():
    text = tp_term_clause({**TP_TERM, "fitted_tp": [1, 8], "extrapolated": False})
    assert "covers TP 8" in text and "extrapolated" not in text
    assert tp_term_clause({**TP_TERM, "spec_tp_extra_ms": 0.0}) == "the model has no per-TP-rank orchestration term"


def test_the_moved_sentence_gives_old_new_and_the_signed_move_for_each_break_even():
    update = {"old": _side(1.36, 1.67, 2.94), "new": _side(1.98, 1.86, 3.27), "tp_term": TP_TERM,
              "moved": {"break_even_single_stream": 0.62, "break_even_at_spec_max_batch": 0.19,
                        "break_even_at_peak": 0.33}}
    text = break_even_moved(update)
    assert "1.36 to 1.98 at one request (+0.62)" in text
    assert "1.67 to 1.86 at the request cap (48 requests) (+0.19)" in text
    assert "2.94 to 3.27 for EAGLE-3's peak to reach the baseline's (+0.33)" in text
    assert "0.98 ms per cycle" in text and "frozen 2026-12-01" in text and "extrapolated" in text
