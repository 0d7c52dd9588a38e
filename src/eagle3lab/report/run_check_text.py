"""Section 6's check of the cost model against this run, as the report says it: the table's cells, each MAPE
beside its goal and naive baseline, request turnover, and where the cycle's time went.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence
from eagle3lab.report import provenance, validation_section
from eagle3lab.report.plots.model import (COMPONENT_LABELS)
from eagle3lab.report.sentences import fixed


def _goal(mape: float, goal: Optional[float]) -> str:
    """The verdict the published sources get, said of this run too."""
    if goal is None:
        return ""
    return f" (goal of at most {goal:g}%: {'met' if mape <= goal else 'not met'})"


def _mape_line(what: str, mape: float, goal: Optional[float], tail: str = "") -> str:
    """One run-check MAPE as the report says it (the sweep's and the interleaved launch's alike)."""
    return f"{what}: MAPE {fixed(mape)}%{_goal(mape, goal)}{tail} **[modelled]** vs **[measured]**."


def _trend(trend: Optional[Mapping[str, str]]) -> str:
    return (f"; with concurrency it {trend['measured']} as measured and {trend['predicted']} as predicted"
            if trend else "")


def _with_turnover(mape: Optional[float], goal: Optional[float]) -> str:
    return f", {fixed(mape)}%{_goal(mape, goal)} with request turnover" if mape is not None else ""


def run_check_context(check: Optional[Mapping[str, Any]], missing: Optional[str],
                       eagle3_note: Optional[str], goal: Optional[float] = None) -> dict[str, Any]:
    """The model against this run: rows, MAPE and trends, and a sentence for what could not be checked."""
    if not check:
        return {"rows": [], "missing": missing}
    rows = _run_rows(check["rows"])
    lines = []
    if check.get("baseline_mape_pct") is not None:
        lines.append(_mape_line("Plain decode rate", check["baseline_mape_pct"], goal,
                                " over the concurrencies it was not calibrated on"
                                + _trend(check.get("baseline_trend"))))
    if check.get("speedup_mape_pct") is not None:
        lines.append(_mape_line("EAGLE-3 speedup from the measured acceptance", check["speedup_mape_pct"], goal,
                                _trend(check.get("speedup_trend"))))
        lines.extend(_turnover_lines(check, goal))
        lines.extend(_naive_lines(check))
        lines.extend(_cycle_gap_lines(check))
    else:
        lines.append("The EAGLE-3 arm has no measured point on this profile"
                     + (f" ({eagle3_note})" if eagle3_note else "")
                     + ", so the model's speedup prediction is not checked on this run.")
    share = {k: v for k, v in (check.get("single_stream_pct_by_part") or {}).items() if v >= 1.0}
    if share:

        parts = sorted(share.items(), key=lambda kv: -kv[1])
        lines.append("In the calibrated model a single-stream step on this machine is "
                     + ", ".join(f"{fixed(v)}% {COMPONENT_LABELS.get(k, k)}" for k, v in parts)
                     + " (parts of at least 1% shown) **[modelled]**.")
    return {**check, "context": f"{check['context']:g}", "rows": rows, "lines": lines, "missing": None,
            "calibration_clause": _calibration_clause(check),
            "has_speedup": check.get("speedup_mape_pct") is not None,
            "interleaved": _interleaved_context(check.get("interleaved"), goal)}


def _run_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A run check's rows as the report's table cells ("--" where a point has no such value)."""
    def cell(row: Mapping[str, Any], key: str, digits: int = 1) -> Any:
        return fixed(row[key], digits) if key in row else "--"

    return [{"concurrency": row["concurrency"], "measured": fixed(row["measured_baseline_tok_s"]),
             "predicted": fixed(row["predicted_baseline_tok_s"]),
             "error": "calibration" if row["baseline_role"] == "calibration" else fixed(row["baseline_error_pct"]),
             "eagle3": cell(row, "measured_eagle3_tok_s"), "accept": cell(row, "accept_length", 2),
             "measured_speedup": cell(row, "measured_speedup", 2),
             "predicted_speedup": cell(row, "predicted_speedup", 2), "speedup_error": cell(row, "speedup_error_pct"),
             "turnover_speedup": cell(row, "turnover_speedup", 2),
             "turnover_error": cell(row, "turnover_speedup_error_pct")} for row in rows]


def _interleaved_context(check: Optional[Mapping[str, Any]], goal: Optional[float]) -> dict[str, Any]:
    """The model against the interleaved launch (both arms at every concurrency in the same spells): its table
    and its MAPEs beside the naive baseline; empty without an interleaved launch at concurrency 1."""
    if not check:
        return {"rows": [], "lines": []}
    lines = []
    if check.get("baseline_mape_pct") is not None:
        lines.append(_mape_line("Plain decode rate", check["baseline_mape_pct"], goal,
                                " over the concurrencies it was not calibrated on"
                                + _with_turnover(check.get("turnover_baseline_mape_pct"), None)))
    if check.get("speedup_mape_pct") is not None:
        lines.append(_mape_line("EAGLE-3 speedup from the acceptance pooled at each point", check["speedup_mape_pct"],
                                goal, " counting the decode passes only"
                                + _with_turnover(check.get("turnover_speedup_mape_pct"), goal)))
        lines.extend(_naive_lines(check))
    return {"rows": _run_rows(check["rows"]), "lines": lines, "calibrated_on": check["calibrated_on"],
            "launch": check["launch"]}


def _naive_lines(check: Mapping[str, Any]) -> list[str]:
    """The naive baseline beside the model's speedup error, on the same points."""
    naive = check.get("naive")
    if not naive:
        return []
    at = ", ".join(str(c) for c in naive["concurrencies"])
    turnover = (f", {fixed(naive['turnover_mape_pct'])}% with turnover" if naive.get("turnover_mape_pct") is not None
                else "")
    return [f"Beside it, the naive baseline (the speedup measured at concurrency 1, {fixed(naive['held_speedup'], 2)}x, "
            f"held at every other concurrency) misses the speedups at concurrency {at} by MAPE "
            f"{fixed(naive['naive_mape_pct'])}%, the model by {fixed(naive['model_mape_pct'])}% counting the passes "
            f"only{turnover}, on the same points **[modelled]** vs **[measured]**."]


def _calibration_clause(check: Mapping[str, Any]) -> str:
    """What the model took from this run besides the plain single-stream step: the cycle's measured work outside
    the forwards (and from which arm), or nothing (sglang's engine term, frozen on development sources)."""
    extra = check.get("cycle_extra") or {}
    if not extra.get("measured"):
        return (f" and on nothing else (the cycle's orchestration beyond its passes is sglang's engine term, "
                f"{fixed(extra.get('ms'), 2)} ms per cycle: {extra.get('source') or 'no source'})")
    whose = "the headline EAGLE-3 arm's own cycles" if extra.get("from_headline_arm") else \
        "not the headline EAGLE-3 arm"
    host = check.get("per_request_host")
    per_request = (f"; and the host work inside each pass per running request beyond the first, "
                   f"{fixed(host['target_pass_ms'], 2)} ms per target pass ({fixed(host['ms_per_layer'], 3)} ms per layer, "
                   f"in every pass of either model; {host['source']})" if host else "")
    return (f"; the cycle's work outside the model forwards beyond a plain step's (tree, KV bookkeeping, "
            f"harness kernels, host code), {fixed(extra['ms'], 2)} ms per cycle, timed at batch size 1 ({extra['source']}; "
            f"{whose}){per_request}")


def _turnover_lines(check: Mapping[str, Any], goal: Optional[float]) -> list[str]:
    """The model with request turnover counted (``costmodel.turnover``): its prefill times, where each was
    measured, and its MAPEs beside the passes-only ones; or why it was not counted."""
    t = check.get("turnover") or {}
    if t.get("speedup_mape_pct") is None or t.get("baseline_mape_pct") is None:
        return [f"Request turnover (the other requests' prefills each running request waits for) is not counted on "
                f"this run: {'; '.join(t.get('missing') or ['no prefill timed'])} **[measured]**."] if t else []
    sources = t.get("sources") or {}
    return [f"Counting request turnover as well (`costmodel/turnover.py`: at concurrency c each running request also "
            f"waits for the other c - 1 requests' prefills, spread over its {t['decode_tokens']} decode tokens; "
            f"one prefill {fixed(t['baseline_prefill_ms'], 2)} ms plain ({sources.get('baseline', '?')}) and "
            f"{fixed(t['eagle3_prefill_ms'], 2)} ms with EAGLE-3 ({sources.get('eagle3', '?')}), nothing from the "
            f"headline EAGLE-3 arm): plain decode rate MAPE {fixed(t['baseline_mape_pct'])}% (passes only "
            f"{fixed(check['baseline_mape_pct'])}%), EAGLE-3 speedup MAPE {fixed(t['speedup_mape_pct'])}%"
            f"{_goal(t['speedup_mape_pct'], goal)} (passes only {fixed(check['speedup_mape_pct'])}%); it holds while "
            f"each arriving request gets its own prefill batch and every request decodes the same length "
            f"**[modelled]** vs **[measured]**."]


def _cycle_gap_lines(check: Mapping[str, Any]) -> list[str]:
    """Where the speedup miss sits: one EAGLE-3 cycle's measured time against the modelled one, per concurrency."""
    rows = [r for r in check["rows"] if "unmodelled_cycle_ms" in r]
    if not rows:
        return []
    cells = "; ".join(f"at {r['concurrency']}: {fixed(r['measured_cycle_ms'], 2)} ms measured vs "
                      f"{fixed(r['predicted_cycle_ms'], 2)} ms modelled ({fixed(r['unmodelled_cycle_ms'], 2)} ms not "
                      f"in the model)" for r in rows)
    lines = [f"One EAGLE-3 cycle (draft, verify, draft extend for every running request), from the measured rates "
             f"and acceptance: {cells} **[modelled]** vs **[measured]**."]
    for c in check.get("control_cycles") or []:
        lines.append(f"The control arm `{c['arm']}` (untrained drafter, acceptance {fixed(c['accept_length'], 2)}) "
                     f"measures the cycle alone: {fixed(c['cycle_ms'], 2)} ms per cycle at concurrency "
                     f"{c['concurrency']}, {fixed(c['plain_steps_per_cycle'], 2)} plain steps of "
                     f"{fixed(c['plain_step_ms'], 2)} ms **[measured]**.")
    counted = (check.get("turnover") or {}).get("speedup_mape_pct") is not None
    lines.extend(_between_cycles_lines(rows, turnover_counted=counted))
    measured_extra = (check.get("cycle_extra") or {}).get("measured")
    if check.get("cpu_harness") and not measured_extra and \
            any(r.get("decode_minus_model_ms", r["unmodelled_cycle_ms"]) > 0 for r in rows):
        lines.append("The model has no term for what this profile's CPU harness adds to each speculative cycle: "
                     "the EAGLE loop's GPU kernels run as torch ports (`runtime/cpu_harness`), a share the cycle "
                     "table measures apart. It does not exist on a GPU: this miss is no evidence about "
                     "the GPU cycle the incident's model describes.")
    return lines


def _between_cycles_lines(rows: Sequence[Mapping[str, Any]], turnover_counted: bool = False) -> list[str]:
    """The EAGLE-3 server's measured windows split by the cycle timers: the decode batches (what the model's cycle
    describes) against the prefills and the rest between them, and which of the two the largest miss sits in
    (``turnover_counted``: the model's turnover line counts the prefills, and the sentence says so)."""
    split = [r for r in rows if "eagle3_split" in r]
    if not split:
        return []
    cells = "; ".join(
        f"at {r['concurrency']}: decode batches {fixed(r['eagle3_split']['decode_ms'], 2)} ms (model "
        f"{fixed(r['predicted_cycle_ms'], 2)}), prefills {fixed(r['eagle3_split']['prefill_ms'], 2)} ms, the rest "
        f"{fixed(r['eagle3_split']['other_ms'], 2)} ms; {fixed(r['eagle3_split']['mean_batch_size'], 2)} requests per cycle"
        for r in split)
    lines = [f"Where each cycle's time went in the EAGLE-3 server's measured windows (the cycle timers lined up with "
             f"each point's window, per cycle; the decode batches are what the model's cycle describes, prefills "
             f"and the rest run between them and slow every running request's TPOT): {cells} **[measured]** vs "
             f"**[modelled]**."]
    worst = max(split, key=lambda r: r["unmodelled_cycle_ms"])
    if worst["unmodelled_cycle_ms"] <= 0:
        return lines
    at = f"at {worst['concurrency']}"
    if worst["between_cycles_ms"] > abs(worst["decode_minus_model_ms"]):
        lines.append(f"So the largest miss ({at}) is mostly between the cycles, not in them: the decode batches "
                     f"measured {fixed(worst['eagle3_split']['decode_ms'], 2)} ms per cycle against "
                     f"{fixed(worst['predicted_cycle_ms'], 2)} ms modelled, prefills and the rest "
                     f"{fixed(worst['between_cycles_ms'], 2)} ms per cycle. The decode-only rate (running "
                     f"requests over mean TPOT) pays them and the decode passes alone do not"
                     f"{' (the request turnover above counts the prefills)' if turnover_counted else ''}; they grow with "
                     f"concurrency x acceptance / output length (a request ends after fewer cycles than plain "
                     f"steps), so this holds for short outputs at high concurrency, as in this workload, and "
                     f"shrinks as outputs lengthen **[measured]**.")
    else:
        lines.append(f"So the largest miss ({at}) is in the cycles themselves: the decode batches measured "
                     f"{fixed(worst['eagle3_split']['decode_ms'], 2)} ms per cycle against "
                     f"{fixed(worst['predicted_cycle_ms'], 2)} ms modelled, prefills and the rest "
                     f"{fixed(worst['between_cycles_ms'], 2)} ms per cycle **[measured]**.")
    return lines


def run_check_summary(b: provenance.Binder, check: Mapping[str, Any]) -> str:
    """The model against this run, in one paragraph (section 6). The interleaved launch leads where it measured speedups: its
    two arms ran every concurrency in the same spells of the machine, so its check is the one that can fail on the
    model rather than on the machine; the sequential sweep's check follows, with how far the two measured the same
    point apart (the resolution the sweep's check has here)."""
    run = "model.run_check"
    turnover = check.get("turnover") or {}
    sweep_turnover = (f", {b.num(f'{run}.turnover.speedup_mape_pct', ',.1f')}% counting the other requests' "
                      f"prefills each request waits for" if turnover.get("speedup_mape_pct") is not None else "")
    sweep_naive = (f"; holding the speedup measured at concurrency 1 misses the others by "
                   f"{b.num(f'{run}.naive.naive_mape_pct', ',.1f')}%, the model by "
                   f"{b.num(f'{run}.naive.model_mape_pct', ',.1f')}%" if check.get("naive") else "")
    sweep = (f"MAPE {b.num(f'{run}.speedup_mape_pct', ',.1f')}% counting the decode passes only{sweep_turnover}"
             f"{sweep_naive}")
    inter = check.get("interleaved") or {}
    if inter.get("speedup_mape_pct") is None:
        return (f"On this run the model's speedups, predicted from the measured acceptance, miss the measured ones by "
                f"{sweep} **[modelled]** vs **[measured]**.")
    i = f"{run}.interleaved"
    goal = f"{validation_section.KEY}.target_mape_pct"
    with_turnover = (f", {b.num(f'{i}.turnover_speedup_mape_pct', ',.1f')}% with request turnover"
                     if inter.get("turnover_speedup_mape_pct") is not None else "")
    plain = (f"; its plain decode rates by {b.num(f'{i}.baseline_mape_pct', ',.1f')}%"
             if inter.get("baseline_mape_pct") is not None else "")
    naive = (f"; holding the concurrency-1 speedup misses the others by "
             f"{b.num(f'{i}.naive.naive_mape_pct', ',.1f')}%, the model by {b.num(f'{i}.naive.model_mape_pct', ',.1f')}%"
             if inter.get("naive") else "")
    gap = (f"; the two measured the same point's speedup up to {b.num(f'{i}.sweep_gap.gap_pct', ',.1f')}% apart "
           f"(concurrency {b.num(f'{i}.sweep_gap.concurrency', 'd')}: {b.num(f'{i}.sweep_gap.sweep_speedup', '.2f')}x "
           f"in the sweep, {b.num(f'{i}.sweep_gap.interleaved_speedup', '.2f')}x interleaved), the resolution the "
           f"sweep's check has on this machine" if inter.get("sweep_gap") else "")
    return (f"On this run, against the interleaved launch (both arms at every concurrency in the same spells of the "
            f"machine), the model's speedups, predicted from the acceptance measured there, miss by MAPE "
            f"{b.num(f'{i}.speedup_mape_pct', ',.1f')}% counting the decode passes only{with_turnover} (goal of at "
            f"most {b.num(goal, 'g')}%: "
            f"{b.rule('goal_verdict', validation_section.goal_verdict, f'{i}.speedup_mape_pct', goal)}){plain}"
            f"{naive}. Against the sequential sweep (each arm's points minutes apart) the same model misses by "
            f"{sweep}{gap} **[modelled]** vs **[measured]**.")


def run_check_brief(b: provenance.Binder, check: Mapping[str, Any]) -> Optional[str]:
    """The model against this run in one sentence for REPORT.md: the interleaved launch where it measured speedups
    (both arms in the same spells of the machine), else the sequential sweep; the full check is the validation
    appendix's."""
    run, goal = "model.run_check", f"{validation_section.KEY}.target_mape_pct"
    inter = check.get("interleaved") or {}
    key, where = ((f"{run}.interleaved", "interleaved launch") if inter.get("speedup_mape_pct") is not None
                  else (run, "sequential sweep"))
    data = inter if key != run else check
    if data.get("speedup_mape_pct") is None:
        return None
    plain = (f", its plain decode rates by {b.num(f'{key}.baseline_mape_pct', ',.1f')}%"
             if data.get("baseline_mape_pct") is not None else "")
    naive = (f"; holding the concurrency-1 speedup misses by {b.num(f'{key}.naive.naive_mape_pct', ',.1f')}%, the "
             f"model by {b.num(f'{key}.naive.model_mape_pct', ',.1f')}%" if data.get("naive") else "")
    return (f"Against this run's {where}, the model's speedups predicted from the measured acceptance miss by MAPE "
            f"{b.num(f'{key}.speedup_mape_pct', ',.1f')}% (goal of at most {b.num(goal, 'g')}%: "
            f"{b.rule('goal_verdict', validation_section.goal_verdict, f'{key}.speedup_mape_pct', goal)}){plain}"
            f"{naive} **[modelled]** vs **[measured]**.")
