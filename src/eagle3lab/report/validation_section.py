"""The cost model's validation as the report shows it: the protocol of ``costmodel.validation.current_report``.

Why a module of its own: the headline of the model's validation is one number, the MAPE on the sealed set (its sha256
committed before any evaluation or constant revision), evaluated once with the frozen constants named by their commit,
beside three naive baselines. "Held out" is said only of it: the first three sets' figures are records, shown with
the commits that show why sealing does not cover them. Fit quality on seen data and the shape-only series
(acceptance fitted to the single-stream speedup) must never be read as that number. This module turns the protocol's evidence (``ModelEvidence.validation_protocol``) into the section's
bound sentences and table rows; every verdict is a rule over evidence keys (``RULES``), re-checked by
``evidence_file.check_report``, and every number is formatted from the evidence, never typed.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from eagle3lab.costmodel.baselines import NAMES as BASELINE_NAMES
from eagle3lab.costmodel.validation import SEEN_ROLE, SHAPE_ONLY_ROLE
from eagle3lab.report import provenance

KEY = "model.validation_protocol"
NAIVE = {"naive_flat": "flat", "naive_free_cycle": "free cycle"}  # the protocol's naive baselines, as named here
ORCHESTRATION_LABELS = {"spec_cycle_extra_s": "per EAGLE cycle", "spec_step_extra_s": "per draft step",
                        "spec_tp_extra_s": "per cycle per TP rank beyond the first"}


# ------------------------------------------------------------------------------------------------ rules
def goal_verdict(mape_pct: Optional[float], target_pct: float) -> str:
    """'met' or 'not met': the out-of-sample MAPE against the goal (computed here, never written by hand)."""
    if mape_pct is None:
        return "not evaluated (no held-out point)"
    return "met" if mape_pct <= target_pct else "not met"


def sealed_goal_verdict(mape_pct: Optional[float], target_pct: float, below_every_baseline: Optional[bool]) -> str:
    """The sealed set's goal has two halves (issue 36): MAPE at most the target AND below every naive baseline;
    'met' only when both hold (the sentence around it says which half failed)."""
    verdict = goal_verdict(mape_pct, target_pct)
    return "not met" if verdict == "met" and not below_every_baseline else verdict


def mape_text(mape_pct: Optional[float]) -> str:
    return "n/a" if mape_pct is None else f"{mape_pct:.1f}%"


def naive_text(group: Mapping[str, Any]) -> str:
    """Each naive baseline's MAPE over the group's points where it is defined."""
    parts = [f"'{name}' {group[key]['mape_pct']:.1f}% over {group[key]['points']} points"
             for key, name in NAIVE.items() if group.get(key)]
    return "; ".join(parts) or "no naive baseline is defined on these points"


def names(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


def frozen_constants(engines: Mapping[str, Mapping[str, float]]) -> str:
    """The frozen orchestration constants per engine, in ms."""
    return "; ".join(f"{engine}: " + ", ".join(f"{value * 1e3:.2f} ms {ORCHESTRATION_LABELS.get(field, field)}"
                                               for field, value in values.items())
                     for engine, values in engines.items()) or "none"


def refit_text(matches: Optional[bool]) -> str:
    if matches is None:
        return "is not recomputed (fitted under the model of its day)"
    return "gives the same values" if matches else "gives other values: the frozen constants are stale"


def in_display_units(protocol: Mapping[str, Any]) -> dict[str, float]:
    """The frozen constants of each freeze as printed (ms), for the provenance check's evidence."""
    out = {}
    for name in ("frozen", "frozen_2", "current"):
        engines = (protocol.get(name) or {}).get("engines") or {}
        out.update({f"{name}_{engine}_{field}_ms": value * 1e3 for engine, values in engines.items()
                    for field, value in values.items()})
    return out


def set_names(split: str) -> str:
    """How a later held-out set is named in its headline."""
    return {"held_out": "first set", "held_out_2": "second set", "held_out_3": "third set",
            "held_out_4": "fourth set"}.get(split, split.replace("_", " "))


def conditions(hardware: Sequence[str], tp: Sequence[int], batches: Sequence[int]) -> str:
    """Where a held-out set's points were measured: the only conditions its verdict speaks for."""
    return (f"{names(hardware)}, TP {' / '.join(str(t) for t in tp)}, batch size "
            f"{' / '.join(str(n) for n in batches)}")


def below_text(below: Optional[bool]) -> str:
    return "below every one" if below else "not below every one"


def baselines_text(mapes: Mapping[str, Optional[float]]) -> str:
    """The three naive baselines' MAPEs, named as the protocol names them."""
    return "; ".join(f"{BASELINE_NAMES[k]} {v:.1f}%" for k, v in mapes.items() if v is not None and k in BASELINE_NAMES)


def other_figures(others: Sequence[Mapping[str, Any]]) -> str:
    return "".join(f"; {o['mape_pct']:.1f}% with {o['constants']} ({o['note']})" for o in others)


RULES: dict[str, provenance.Rule] = {"goal_verdict": goal_verdict, "sealed_goal_verdict": sealed_goal_verdict, "mape_text": mape_text, "naive_text": naive_text, "names": names,
         "frozen_constants": frozen_constants, "refit_text": refit_text, "set_names": set_names,
         "conditions": conditions, "below_text": below_text, "baselines_text": baselines_text,
         "other_figures": other_figures}


# ------------------------------------------------------------------------------------------------ context
def group_index(protocol: Mapping[str, Any], role: str) -> Optional[int]:
    """The index of the first group with this role (``costmodel.validation.group_role``), or None."""
    return next((i for i, g in enumerate(protocol.get("groups", [])) if g.get("role") == role), None)


def _steps_right(value: str) -> str:
    return "-- (single-batch series)" if value.endswith("/0") else value


def _naive_cell(value: Optional[Mapping[str, Any]]) -> str:
    return "--" if not value else f"{value['mape_pct']:.1f} ({value['points']})"


def _sealed_verdict(b: provenance.Binder, k: str) -> str:
    return b.rule("sealed_goal_verdict", sealed_goal_verdict, f"{k}.mape_pct", f"{k}.target_mape_pct",
                  f"{k}.below_every_baseline")


def headline(b: provenance.Binder, protocol: Mapping[str, Any]) -> Optional[str]:
    """The sealed set's one evaluation: the only figure the report calls held out (its sha256 was committed before
    any evaluation or constant revision), with the constants' commit and the three naive baselines beside it."""
    sealed = protocol.get("sealed")
    if not sealed or not sealed.get("evaluated"):
        return None
    k = f"{KEY}.sealed"
    return b.sentence("model.validation.sealed", (
        f"**Held out (sealed):** the fourth set ({b.rule('names', names, f'{k}.sources')}; its sha256 committed in "
        f"{b.num(f'{k}.sealed_commit', 's')} before any evaluation or revision of the constants), evaluated once "
        f"with the constants frozen in {b.num(f'{k}.constants_commit', 's')} ({b.num(f'{k}.constants', 's')}): the "
        f"model's speedups miss by MAPE {b.rule('mape_text', mape_text, f'{k}.mape_pct')} over "
        f"{b.num(f'{k}.points', 'd')} points against the goal (at most {b.num(f'{k}.target_mape_pct', 'g')}% and below "
        f"every naive baseline): **{_sealed_verdict(b, k)}**; naive baselines on the "
        f"same points: {b.rule('baselines_text', baselines_text, f'{k}.baselines_mape_pct')}, the model "
        f"{b.rule('below_text', below_text, f'{k}.below_every_baseline')} **[modelled]** vs **[reported]**."))


def later_headlines(b: provenance.Binder, protocol: Mapping[str, Any]) -> list[str]:
    """The first three sets' one evaluation each, as reported then: a record, never recomputed, and never called
    held out (no hash was committed before its evaluation or before the constants it checks were revised)."""
    lines = []
    for i, past in enumerate(protocol.get("past_evaluations") or []):
        k = f"{KEY}.past_evaluations.{i}"
        lines.append(b.sentence(f"model.validation.past.{past['split']}", (
            f"**The {b.rule('set_names', set_names, f'{k}.split')}, {b.num(f'{k}.held_out', 's')}:** "
            f"{b.rule('names', names, f'{k}.sources')}, evaluated once with the constants of "
            f"{b.num(f'{k}.constants_commit', 's')} (recorded in {b.num(f'{k}.recorded_commit', 's')}, evaluated in "
            f"{b.num(f'{k}.evaluated_commit', 's')}): MAPE {b.num(f'{k}.mape_pct', '.1f')}% over "
            f"{b.num(f'{k}.points', 'd')} points as reported then (naive then: {b.num(f'{k}.naive', 's')})"
            f"{b.rule('other_figures', other_figures, f'{k}.other_figures')}; not held out because "
            f"{b.num(f'{k}.why', 's')} **[reported]**.")))
    return lines


def second_freeze_line(b: provenance.Binder, protocol: Mapping[str, Any]) -> Optional[str]:
    """The superseded freezes, as records: their dates and what they were fitted on; not refitted."""
    if not protocol.get("frozen_2"):
        return None
    return b.sentence("model.validation.superseded", (
        f"Superseded constants, kept as records: the first freeze ({b.num(f'{KEY}.frozen.date', 's')}, "
        f"{b.rule('frozen_constants', frozen_constants, f'{KEY}.frozen.engines')}) and the second "
        f"({b.num(f'{KEY}.frozen_2.date', 's')}, "
        f"{b.rule('frozen_constants', frozen_constants, f'{KEY}.frozen_2.engines')}), fitted under the model of "
        f"their day **[modelled]**."))


def _checks(record: Optional[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**c, "hidden": f"{c['hidden_host_ms_per_cycle']:.2f}",
             "frozen": f"{c['frozen_orchestration_ms_per_cycle']:.2f}",
             "model_hidden": (f"{c['model_hidden_host_ms_per_cycle']:.2f}"
                              if c.get("model_hidden_host_ms_per_cycle") is not None else None)}
            for c in (record or {}).get("public_checks", [])]


def frozen_line(b: provenance.Binder, protocol: Mapping[str, Any]) -> str:
    """The constants the model predicts with: their freeze, what they were fitted on, their commit, and whether
    refitting the seen data today reproduces them."""
    k = f"{KEY}.current"
    return b.sentence("model.validation.frozen", (
        f"The only fitted constants, frozen {b.num(f'{k}.date', 's')} ({b.num(f'{k}.id', 's')}, commit "
        f"{b.num(f'{k}.commit', 's')}) on every seen set ({b.rule('names', names, f'{k}.fitted_on')}): "
        f"{b.rule('frozen_constants', frozen_constants, f'{k}.engines')} of orchestration; refitting the seen data "
        f"today {b.rule('refit_text', refit_text, f'{k}.refit_matches_frozen')} **[modelled]**."))


def trust_clause(b: provenance.Binder, protocol: Mapping[str, Any]) -> str:
    """The summary's part: the sealed set's figure (the only one called held out) with its baselines, then the
    earlier sets' recorded figures named as not demonstrably held out, then the seen sets as fit quality."""
    parts = []
    sealed = protocol.get("sealed")
    if sealed and sealed.get("evaluated"):
        k = f"{KEY}.sealed"
        parts.append(f"held out (sealed before any evaluation; constants of {b.num(f'{k}.constants_commit', 's')}), "
                     f"MAPE {b.rule('mape_text', mape_text, f'{k}.mape_pct')} over {b.num(f'{k}.points', 'd')} "
                     f"points against the goal (at most {b.num(f'{k}.target_mape_pct', 'g')}% and below every "
                     f"naive baseline): {_sealed_verdict(b, k)}, "
                     f"{b.rule('below_text', below_text, f'{k}.below_every_baseline')} of the naive baselines "
                     f"({b.rule('baselines_text', baselines_text, f'{k}.baselines_mape_pct')})")
    else:
        parts.append("no sealed set evaluated yet")
    past = protocol.get("past_evaluations") or []
    if past:
        parts.append("the earlier sets, not demonstrably held out, as reported then: " + ", ".join(
            f"{b.rule('set_names', set_names, f'{KEY}.past_evaluations.{i}.split')} "
            f"{b.num(f'{KEY}.past_evaluations.{i}.mape_pct', '.1f')}%" for i, _ in enumerate(past)))
    groups = protocol.get("groups") or []
    seen = [i for i, g in enumerate(groups) if g.get("role") == SEEN_ROLE]
    if seen:
        parts.append("every seen set under the current constants, fit quality and not a validation: " + ", ".join(
            f"{b.num(f'{KEY}.groups.{i}.points', 'd')} points {b.rule('mape_text', mape_text, f'{KEY}.groups.{i}.mape_pct')}"
            for i in seen))
    return "; ".join(parts)


def group_rows(protocol: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"group": g["group"], "role": g["role"], "points": g["points"],
             "mape": "n/a" if g["mape_pct"] is None else f"{g['mape_pct']:.1f}",
             "flat": _naive_cell(g.get("naive_flat")), "free": _naive_cell(g.get("naive_free_cycle")),
             "steps": _steps_right(g["trend_steps_right"])} for g in protocol.get("groups", [])]


def sweep_rows(protocol: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Draft-step sweeps: the published and predicted speedup at each number of steps, and where each peaks."""
    rows = []
    for s in protocol.get("step_sweeps", []):
        right = sum(t["right"] for t in s["steps"])
        rows.append({"source": s["source"], "series": s["series"], "batch": s["batch"],
                     "steps": " / ".join(str(n) for n in s["num_steps"]),
                     "published": " / ".join(f"{v:.2f}" for v in s["published_speedup"]),
                     "predicted": " / ".join(f"{v:.2f}" for v in s["predicted_speedup"]),
                     "published_best": s["published_best_steps"], "predicted_best": s["predicted_best_steps"],
                     "right": f"{right}/{len(s['steps'])}"})
    return rows


def source_rows(protocol: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The appendix: each source's split, MAPE beside the naive baselines, and whether it capped running
    requests."""
    return [{"source": r["source"], "url": r["url"], "split": r["split"].replace("_", " "), "series": r["series"],
             "shape_only": r["shape_only_series"], "points": r["predicted_points"], "mape": f"{r['mape_pct']:.1f}",
             "flat": _naive_cell(r.get("naive_flat")), "free": _naive_cell(r.get("naive_free_cycle")),
             "worst": f"{r['max_abs_error_pct']:.1f}", "steps": _steps_right(r["trend_steps_right"]),
             "capped": (r.get("capped_running_requests") or "not stated").replace("|", "/")}
            for r in protocol.get("sources", [])]


def context(protocol: Mapping[str, Any], context_rows: Sequence[Mapping[str, Any]],
            b: provenance.Binder) -> dict[str, Any]:
    """Everything the template's validation section and its appendix print."""
    split = {r["source"]: r["split"].replace("_", " ") for r in protocol.get("sources", [])}
    third = (protocol.get("protocol") or {}).get("held_out_3") or {}
    current = protocol.get("current") or {}
    return {"headline": headline(b, protocol), "later_headlines": later_headlines(b, protocol),
            "frozen": frozen_line(b, protocol), "what": current.get("what", ""),
            "public_checks": _checks(current),
            "frozen_2": second_freeze_line(b, protocol), "what_2": "",
            "public_checks_2": [], "evaluation_note": third.get("evaluation_note") or "",
            "groups": group_rows(protocol),
            "naive": [{"name": NAIVE[k], "text": v} for k, v in protocol.get("naive_baselines", {}).items()
                      if k in NAIVE],
            "shape_only_role": SHAPE_ONLY_ROLE, "shape_only_note": protocol.get("shape_only_note", ""),
            "sweeps": sweep_rows(protocol),
            "sources": source_rows(protocol),
            "context": [{"ctx": f"{r['context']:,.0f}", "source": r["source"], "split": split.get(r["source"], "?"),
                         "mape": f"{r['mape_pct']:.1f}"} for r in context_rows]}
