"""Sentences about the engine constants the incident's verdict rests on: how the break-evens moved when sglang's
orchestration between passes entered the model, and the condition under which its per-TP-rank term holds.

Both are rules of the provenance binder: they make text only from the evidence they are given
(``incident_model.incident_break_even_update``), so a re-render of the evidence re-checks every number in them.
"""

from __future__ import annotations

from typing import Any, Mapping

_KEYS = (("break_even_single_stream", "at one request"), ("break_even_at_spec_max_batch", "at the request cap"),
         ("break_even_at_peak", "for EAGLE-3's peak to reach the baseline's"))


def _tp_range(tps: list[int]) -> str:
    return f"TP {tps[0]}" if len(set(tps)) == 1 else f"TP {min(tps)}-{max(tps)}"


def tp_term_clause(tp_term: Mapping[str, Any]) -> str:
    """Where the per-TP-rank orchestration term was fitted against where the incident uses it."""
    tp, per_ms = tp_term["incident_tp"], tp_term["spec_tp_extra_ms"]
    if not per_ms:
        return "the model has no per-TP-rank orchestration term"
    where = f"{_tp_range(tp_term['fitted_tp'])} on {', '.join(tp_term['fitted_hardware'])}"
    cost = (f"{per_ms:.2f} ms per cycle per TP rank beyond the first, "
            f"{tp_term['per_cycle_at_incident_tp_ms']:.1f} ms per cycle at TP {tp}")
    if tp_term["extrapolated"]:
        return (f"its per-TP-rank term ({cost}) was fitted at {where} and is extrapolated here to TP {tp} on "
                f"{tp_term['incident_hardware']}: it holds only if sglang's host synchronisation across ranks grows "
                f"the same way beyond the TP sizes it was fitted on")
    return f"its per-TP-rank term ({cost}) was fitted at {where}, which covers TP {tp}"


def break_even_moved(update: Mapping[str, Any]) -> str:
    """The break-evens before and after the orchestration entered the model, and by how much each moved."""
    old, new, moved = update["old"], update["new"], update["moved"]
    cap = new["spec_max_batch"]
    parts = [f"{old[k]:.2f} to {new[k]:.2f} {label}{f' ({cap} requests)' if 'spec_max' in k else ''} "
             f"({moved[k]:+.2f})" for k, label in _KEYS]
    cycle_ms, step_ms = new["spec_cycle_extra_ms"], new["spec_step_extra_ms"]
    return (f"Counting sglang's orchestration between passes ({cycle_ms:.2f} ms per cycle and {step_ms:.2f} ms per "
            f"draft step, {new['provenance'].removeprefix('modelled: plus orchestration ')}) moves the break-evens "
            f"from the model without it: {'; '.join(parts)}; {tp_term_clause(update['tp_term'])}")


RULES = {"tp_term": tp_term_clause, "break_even_moved": break_even_moved}
