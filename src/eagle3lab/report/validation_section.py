"""The cost model's validation as the report shows it: the protocol of ``costmodel.validation.validation_report``.

Why a module of its own: the headline of the model's validation is one number, the MAPE on held-out sources with
published acceptance, evaluated once with constants frozen before, and its verdict against the goal. Fit quality on
development data and the shape-only series (acceptance fitted to the single-stream speedup) must never be read as
that number. This module turns the protocol's evidence (``ModelEvidence.validation_protocol``) into the section's
bound sentences and table rows; every verdict is a rule over evidence keys (``RULES``), re-checked by
``evidence_file.check_report``, and every number is formatted from the evidence, never typed.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from eagle3lab.costmodel.validation import FIT_QUALITY, OUT_OF_SAMPLE, SHAPE_ONLY_ROLE
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


def refit_text(matches: bool) -> str:
    return "gives the same values" if matches else "gives other values: the frozen constants are stale"


def in_display_units(protocol: Mapping[str, Any]) -> dict[str, float]:
    """The frozen constants of each freeze as printed (ms), for the provenance check's evidence."""
    out = {}
    for name in ("frozen", "frozen_2"):
        engines = (protocol.get(name) or {}).get("engines") or {}
        out.update({f"{name}_{engine}_{field}_ms": value * 1e3 for engine, values in engines.items()
                    for field, value in values.items()})
    return out


def set_names(split: str) -> str:
    """How a later held-out set is named in its headline."""
    return {"held_out_2": "second set", "held_out_3": "third set"}.get(split, split.replace("_", " "))


def conditions(hardware: Sequence[str], tp: Sequence[int], batches: Sequence[int]) -> str:
    """Where a held-out set's points were measured: the only conditions its verdict speaks for."""
    return (f"{names(hardware)}, TP {' / '.join(str(t) for t in tp)}, batch size "
            f"{' / '.join(str(n) for n in batches)}")


RULES = {"goal_verdict": goal_verdict, "mape_text": mape_text, "naive_text": naive_text, "names": names,
         "frozen_constants": frozen_constants, "refit_text": refit_text, "set_names": set_names,
         "conditions": conditions}


# ------------------------------------------------------------------------------------------------ context
def group_index(protocol: Mapping[str, Any], role: str) -> Optional[int]:
    """The index of the first group with this role (``costmodel.validation.group_role``), or None."""
    return next((i for i, g in enumerate(protocol.get("groups", [])) if g.get("role") == role), None)


def _steps_right(value: str) -> str:
    return "-- (single-batch series)" if value.endswith("/0") else value


def _naive_cell(value: Optional[Mapping[str, Any]]) -> str:
    return "--" if not value else f"{value['mape_pct']:.1f} ({value['points']})"


def headline(b: provenance.Binder, protocol: Mapping[str, Any]) -> Optional[str]:
    """The out-of-sample MAPE against the goal, with its verdict and the naive baselines on the same points."""
    i = group_index(protocol, OUT_OF_SAMPLE)
    if i is None:
        return None
    g = f"{KEY}.groups.{i}"
    return b.sentence("model.validation.out_of_sample", (
        f"**Out of sample:** on the held-out sources ({b.rule('names', names, f'{KEY}.protocol.held_out')}; "
        f"published acceptance, never fitted; evaluated once with the frozen constants) the model's speedups miss "
        f"by MAPE {b.rule('mape_text', mape_text, f'{KEY}.out_of_sample_mape_pct')} over "
        f"{b.num(f'{KEY}.out_of_sample_points', 'd')} points against the goal of at most "
        f"{b.num(f'{KEY}.target_mape_pct', 'g')}%: **"
        f"{b.rule('goal_verdict', goal_verdict, f'{KEY}.out_of_sample_mape_pct', f'{KEY}.target_mape_pct')}**. "
        f"Naive baselines on the same points: {b.rule('naive_text', naive_text, g)} **[modelled]** vs "
        f"**[reported]**."))


def later_headlines(b: provenance.Binder, protocol: Mapping[str, Any]) -> list[str]:
    """One headline per held-out set recorded after a freeze (the second, the third), shown the same way as the
    first: its own out-of-sample MAPE over its own points, the verdict against the goal, the naive baselines on the
    same points, and the constants it was evaluated with. Never merged with another set."""
    lines = []
    for i, s in enumerate(protocol.get("out_of_sample_sets") or []):
        if s["split"] == "held_out" or s["points"] == 0:
            continue
        k = f"{KEY}.out_of_sample_sets.{i}"
        g = group_index(protocol, s["role"])
        if g is None:
            continue
        lines.append(b.sentence(f"model.validation.out_of_sample.{s['split']}", (
            f"**Out of sample, {b.rule('set_names', set_names, f'{k}.split')}:** on held-out sources recorded "
            f"{b.num(f'{k}.split_recorded', 's')}, after the constants they were evaluated with were frozen "
            f"({b.num(f'{k}.constants_frozen', 's')}) ({b.rule('names', names, f'{k}.sources')}; published "
            f"acceptance, never fitted; evaluated once), the model's speedups miss by MAPE "
            f"{b.rule('mape_text', mape_text, f'{k}.mape_pct')} over {b.num(f'{k}.points', 'd')} points against "
            f"the goal of at most {b.num(f'{KEY}.target_mape_pct', 'g')}%: "
            f"**{b.rule('goal_verdict', goal_verdict, f'{k}.mape_pct', f'{KEY}.target_mape_pct')}**, on points "
            f"measured at {b.rule('conditions', conditions, f'{k}.hardware', f'{k}.tp', f'{k}.batches')}. Naive "
            f"baselines on the same points: {b.rule('naive_text', naive_text, f'{KEY}.groups.{g}')} **[modelled]** "
            f"vs **[reported]**.")))
    return lines


def second_freeze_line(b: provenance.Binder, protocol: Mapping[str, Any]) -> Optional[str]:
    """The revised constants: their freeze date, what they were fitted on, which held-out sets they were evaluated
    on, and whether refitting the development data today reproduces them."""
    if not protocol.get("frozen_2"):
        return None
    f = f"{KEY}.frozen_2"
    return b.sentence("model.validation.frozen_2", (
        f"The revised engine model's constants, frozen {b.num(f'{f}.date', 's')} on "
        f"{b.rule('names', names, f'{f}.fitted_on')} (development only): "
        f"{b.rule('frozen_constants', frozen_constants, f'{f}.engines')} of orchestration; evaluated on "
        f"{b.rule('names', names, f'{f}.evaluated_on')}; refitting the development data today "
        f"{b.rule('refit_text', refit_text, f'{f}.refit_matches_frozen')} **[modelled]**."))


def _checks(record: Optional[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**c, "hidden": f"{c['hidden_host_ms_per_cycle']:.2f}",
             "frozen": f"{c['frozen_orchestration_ms_per_cycle']:.2f}",
             "model_hidden": (f"{c['model_hidden_host_ms_per_cycle']:.2f}"
                              if c.get("model_hidden_host_ms_per_cycle") is not None else None)}
            for c in (record or {}).get("public_checks", [])]


def frozen_line(b: provenance.Binder, protocol: Mapping[str, Any]) -> str:
    """The constants, their freeze date, what they were fitted on, and the split."""
    return b.sentence("model.validation.frozen", (
        f"Split recorded {b.num(f'{KEY}.protocol.split_recorded', 's')}, before anything was fitted: development "
        f"{b.rule('names', names, f'{KEY}.protocol.development')}, held out "
        f"{b.rule('names', names, f'{KEY}.protocol.held_out')}. The only fitted constants, frozen "
        f"{b.num(f'{KEY}.frozen.date', 's')} on {b.rule('names', names, f'{KEY}.frozen.fitted_on')}: "
        f"{b.rule('frozen_constants', frozen_constants, f'{KEY}.frozen.engines')} of orchestration; refitting "
        f"the development data today {b.rule('refit_text', refit_text, f'{KEY}.frozen.refit_matches_frozen')} "
        f"**[modelled]**."))


def _set_clause(b: provenance.Binder, protocol: Mapping[str, Any], j: int, s: Mapping[str, Any]) -> str:
    """One held-out set in the summary: its name, the freeze it was evaluated with, MAPE, verdict, naive baselines.
    The first set reads its numbers from the protocol's top-level keys (the ones its section headline binds)."""
    k = f"{KEY}.out_of_sample_sets.{j}"
    first = s["split"] == "held_out"
    mape_key = f"{KEY}.out_of_sample_mape_pct" if first else f"{k}.mape_pct"
    points_key = f"{KEY}.out_of_sample_points" if first else f"{k}.points"
    frozen_key = f"{KEY}.frozen.date" if first else f"{k}.constants_frozen"
    name = "the first set" if first else "the " + b.rule("set_names", set_names, f"{k}.split")
    g = group_index(protocol, s["role"])
    naive = f" (naive baselines: {b.rule('naive_text', naive_text, f'{KEY}.groups.{g}')})" if g is not None else ""
    return (f"on {name} of held-out sources (constants frozen {b.num(frozen_key, 's')}) MAPE "
            f"{b.rule('mape_text', mape_text, mape_key)} over {b.num(points_key, 'd')} points: "
            f"{b.rule('goal_verdict', goal_verdict, mape_key, f'{KEY}.target_mape_pct')}{naive}")


def trust_clause(b: provenance.Binder, protocol: Mapping[str, Any]) -> str:
    """The summary's part: first the held-out set evaluated with the constants the model predicts with now, its
    verdict against the goal and the conditions its points were measured at; then the sets evaluated with earlier
    constants, since superseded, each its own MAPE and verdict (never pooled); the development fit named as such."""
    if group_index(protocol, OUT_OF_SAMPLE) is None:
        return "no held-out source was evaluated"
    sets = [(j, s) for j, s in enumerate(protocol.get("out_of_sample_sets") or []) if s["points"]]
    current = [(j, s) for j, s in sets if s.get("current")]
    earlier = [(j, s) for j, s in sets if not s.get("current")]
    parts = []
    for j, s in current:
        k = f"{KEY}.out_of_sample_sets.{j}"
        parts.append(f"out of sample, with the constants it predicts with now (goal: at most "
                     f"{b.num(f'{KEY}.target_mape_pct', 'g')}%), {_set_clause(b, protocol, j, s)}; this holds for "
                     f"{b.rule('conditions', conditions, f'{k}.hardware', f'{k}.tp', f'{k}.batches')}, the "
                     f"conditions its points were measured at")
    if earlier:
        lead = "with constants since superseded: " if current else \
            f"out of sample (goal: at most {b.num(f'{KEY}.target_mape_pct', 'g')}%): "
        parts.append(lead + "; ".join(_set_clause(b, protocol, j, s) for j, s in earlier))
    text = "; ".join(parts)
    dev = group_index(protocol, FIT_QUALITY)
    if dev is not None:
        text += (f"; on development data, fit quality and not a validation, MAPE "
                 f"{b.rule('mape_text', mape_text, f'{KEY}.groups.{dev}.mape_pct')}")
    return text


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
    second = protocol.get("frozen_2") or {}
    third = (protocol.get("protocol") or {}).get("held_out_3") or {}
    return {"headline": headline(b, protocol), "later_headlines": later_headlines(b, protocol),
            "frozen": frozen_line(b, protocol), "what": protocol["frozen"]["what"],
            "public_checks": _checks(protocol.get("frozen")),
            "frozen_2": second_freeze_line(b, protocol), "what_2": second.get("what", ""),
            "public_checks_2": _checks(second), "evaluation_note": third.get("evaluation_note") or "",
            "groups": group_rows(protocol),
            "naive": [{"name": NAIVE[k], "text": v} for k, v in protocol.get("naive_baselines", {}).items()
                      if k in NAIVE],
            "shape_only_role": SHAPE_ONLY_ROLE, "shape_only_note": protocol.get("shape_only_note", ""),
            "sweeps": sweep_rows(protocol),
            "sources": source_rows(protocol),
            "context": [{"ctx": f"{r['context']:,.0f}", "source": r["source"], "split": split.get(r["source"], "?"),
                         "mape": f"{r['mape_pct']:.1f}"} for r in context_rows]}
