"""REPORT.md's first screen: why it crashed, the fix, whether EAGLE-3 pays here and on the incident's deployment,
and what to do; every number and verdict bound to its evidence key (``provenance.Binder``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence
from eagle3lab.report import engine_condition, provenance, validation_section
from eagle3lab.report.model_evidence import ModelEvidence
from eagle3lab.report.sentences import (direction_verdict, enough_verdict, peak_error_text, sensitivity_range,
                                        speedup_cells)


def _without_tp_term(b: provenance.Binder, rows: Sequence[Mapping[str, Any]]) -> str:
    """The break-evens of the sensitivity row that drops the per-TP-rank term, said beside the condition."""
    i = next((i for i, r in enumerate(rows) if r["changed"] == {"spec_tp_extra_s": 0.0}), None)
    if i is None:
        return ""
    key = f"model.incident.sensitivity.{i}"
    return (f" (without it: {b.num(f'{key}.break_even_at_peak', '.2f')} at peak, "
            f"{b.num(f'{key}.break_even_single_stream', '.2f')} at one request)")


def summary_lines(crash: dict | None, trace: dict | None, fix: dict | None, model: dict[str, Any],
             incident: Mapping[str, Any], evidence: ModelEvidence, premise: Optional[Mapping[str, Any]] = None,
             binder: Optional[provenance.Binder] = None, profile: str = "cpu") -> list[str]:
    """The first screen: why it crashed, the fix, whether EAGLE-3 pays here and on the incident's deployment, and
    what to do. Every number and verdict is rendered through ``binder`` from a named evidence key (the evidence tree
    of ``ReportSources.tree``), so ``provenance.broken_sentences`` can re-check each sentence against its keys."""
    b = binder or provenance.Binder({"model": evidence.to_dict(), "incident": dict(incident)})
    tree = b.tree
    lines = []
    if crash:
        cause = (f": sglang's EAGLE-3 start-up calls {trace['missing']} on the target model and the Kimi-K2.5 "
                 f"wrapper lacks them **[traced]**" if trace else "")
        lines.append(b.sentence("summary.crash", (
            f"**Why it crashed:** `{crash['signature']}`, reproduced on real sglang in "
            f"{b.num('crash.crash.seconds_to_outcome', '')} s **[measured]**{cause}.")))
    if fix:
        text = (f"**The fix:** delegate {fix['members']} to the inner model (`patches/{fix['patch']}`)"
                + (f"; {fix['story'][-1]} **[measured]**" if fix["story"] else ""))
        if trace:
            text += (f". The write-up's one-method fix is "
                     f"{b.rule('enough', enough_verdict, 'trace.verdict.one_method_enough')} **[traced]**")
            if trace.get("first_fixed"):  # a trace that bisected no releases names none
                text += f"; sglang {b.num('trace.bisect.first_fixed', 's')} ships the fix **[traced]**"
        lines.append(b.sentence("summary.fix", text + "."))
    if premise and not premise["holds"]:
        lines.append(b.sentence("summary.premise", (
            f"**What the write-up's 'no gain' rests on:** unknown. {premise['unknown'][0].upper()}"
            f"{premise['unknown'][1:]} (section 1) **[traced]**.")))
    patch = tree.get("patch") if isinstance(tree, dict) else None
    if patch and patch.get("speedup"):
        caveat = (" This is a tiny random model on CPU whose EAGLE loop runs its GPU kernels as torch ports: no "
                  "evidence about GPU speedups." if profile == "cpu" else "")
        lines.append(b.sentence("summary.run_speedup", (
            f"**Does EAGLE-3 pay on this run ({profile} profile)?** "
            f"{b.rule('direction', direction_verdict, 'patch.speedup')}: output throughput "
            f"{b.rule('speedups', speedup_cells, 'patch.speedup')} **[measured]**.{caveat}")))
    rtx = "model.incident.predicted.rtx_pro_6000_x8"
    condition = "" if not premise or premise["holds"] else " (if it ran the flags described, section 1)"
    public = incident.get("public", {}).get("vllm_pr_35966")
    public_text = (f" Public figure for this drafter: "
                   f"{b.num('incident.public.vllm_pr_35966.rate_pct', '.2f')}% acceptance rate with "
                   f"{b.num('incident.public.vllm_pr_35966.num_speculative_tokens', 'd')} speculative tokens on vLLM, "
                   f"gsm8k ([vLLM PR #35966]({public['url']})), about "
                   f"{b.num('incident.public.vllm_pr_35966.accept_length', '.2f')} tokens per verify step "
                   f"**[reported]**; another engine, workload and draft length than the incident's."
                   if public and public.get("accept_length") else "")
    tp_text = (b.rule("tp_term", engine_condition.tp_term_clause, "model.incident.break_even_update.tp_term")
               + _without_tp_term(b, evidence.incident["sensitivity"])
               if evidence.incident.get("break_even_update") else "")
    lines.append(b.sentence("summary.incident_verdict", (
        f"**Does EAGLE-3 pay on the incident's deployment{condition}?** The engineer reported no gain "
        f"**[reported]** but not the acceptance reached. The cost model puts the break-even at acceptance "
        f"{b.num(f'{rtx}.break_even_at_peak', '.2f')} for EAGLE-3's peak to reach the baseline's (context "
        f"{b.num('model.incident.context_len', ',.0f')} tokens assumed, sglang's "
        f"{b.num(f'{rtx}.spec_max_batch', 'd')}-request cap; "
        f"{b.rule('sensitivity_range', sensitivity_range, 'model.incident.sensitivity')} across the sensitivity "
        f"table) and {b.num(f'{rtx}.break_even_single_stream', '.2f')} at one request, counting sglang's "
        f"orchestration between passes; {tp_text} **[modelled]**.{public_text}")))
    todo = ["apply the full delegation patch"
            + (f" or upgrade to sglang {b.num('trace.bisect.first_fixed', 's')}" if trace and trace.get("first_fixed")
               else ""),
            f"measure acceptance on your own traffic and compare it with {b.num(f'{rtx}.break_even_at_peak', '.2f')}"
            f" at peak and {b.num(f'{rtx}.break_even_single_stream', '.2f')} at one request"]
    rows = evidence.incident["sensitivity"]
    uncapped = next((i for i, r in enumerate(rows) if r["changed"] == {"spec_max_running_requests": 0}), None)
    if uncapped is not None and rows[uncapped]["break_even_at_peak"] < \
            evidence.incident["predicted"]["rtx_pro_6000_x8"]["break_even_at_peak"]:
        todo.append(f"set `--max-running-requests` (sglang caps speculation at "
                    f"{b.num(f'{rtx}.spec_max_batch', 'd')} requests; without the cap the break-even at peak is "
                    f"{b.num(f'model.incident.sensitivity.{uncapped}.break_even_at_peak', '.2f')})")
    lines.append(b.sentence("summary.todo", "**What to do:** " + "; ".join(todo) + " **[modelled]**."))
    lines.append(b.sentence("summary.trust", (
        f"How far to trust the model: its baseline peak is "
        f"{b.rule('peak_error', peak_error_text, 'model.incident.side_by_side.peak_tok_s.error_pct')} the reported one "
        f"at the assumed context; "
        f"{validation_section.trust_clause(b, evidence.validation_protocol)} (section 6) **[modelled]** vs "
        f"**[reported]**.")))
    if model["run"].get("has_speedup"):
        lines.append(b.sentence("summary.run_check", _run_check_summary(b, evidence.run_check or {})))
    return lines


def _run_check_summary(b: provenance.Binder, check: Mapping[str, Any]) -> str:
    """The model against this run, for the summary. The interleaved launch leads where it measured speedups: its
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
                f"{sweep} (section 6) **[modelled]** vs **[measured]**.")
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
            f"{sweep}{gap} (section 6) **[modelled]** vs **[measured]**.")
