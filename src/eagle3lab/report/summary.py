"""REPORT.md's first screen: five bullets, each its bottom line first (what broke; the fix and the release that has
every fix; whether EAGLE-3 would pay on the incident's deployment; whether it paid on this run; what to do, in order),
at most ``MAX_WORDS`` words in all. Every number and verdict is bound to its evidence key (``provenance.Binder``).

Why so short: the engineer who hit the crash reads the first screen and decides; the reasoning, the tables and the
conditions are in the sections below and in the appendices, rendered from the same evidence.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from packaging.version import InvalidVersion, Version

from eagle3lab.report import provenance, run_speed
from eagle3lab.sidecars import PatchBenchSidecar

MAX_WORDS = 250
BULLETS = 5


def every_fix_release(*releases: Optional[str]) -> str:
    """The first release that has every fix: the newest of the releases that fixed each defect."""
    known = [r for r in releases if r]
    try:
        return max(known, key=Version)
    except (InvalidVersion, ValueError):
        return "unknown"


def patched_outcome(chain: list[Mapping[str, Any]]) -> str:
    """What the full patch's server did, from the relaunch chain's last step."""
    last = chain[-1] if chain else {}
    probe = last.get("probe") or {}
    if last.get("outcome") == "ready" and probe.get("speculated"):
        return "starts and serves EAGLE-3"
    if last.get("outcome") == "ready":
        return "starts"
    return "still does not start"


def enough_text(value: bool) -> str:
    return "enough" if value else "not enough"


def reach_verdict(pred: Mapping[str, Any]) -> str:
    """Whether EAGLE-3's peak can reach the baseline's under the prediction's request limit."""
    need, top = pred["break_even_at_peak"], pred["max_accept_length"]
    if need > top:
        return f"cannot reach the baseline's peak at any acceptance (needs {need:.2f}, at most {top})"
    return f"reaches the baseline's peak only above acceptance {need:.2f} (at most {top})"


def incident_bottom_line(one_gains: bool, peak_no_gain: bool, pred: Mapping[str, Any]) -> str:
    """The deployment question's answer from the public sweep's two implications and the model at the peak."""
    one = "At one stream yes" if one_gains else "At one stream no"
    model_no = pred["break_even_at_peak"] > pred["max_accept_length"]
    if peak_no_gain and model_no:
        peak = "at its peak no"
    elif not peak_no_gain and not model_no:
        peak = "at its peak only with high acceptance"
    else:
        peak = "at its peak the public sweep and the model disagree"
    return f"{one}, {peak}"


RULES: dict[str, provenance.Rule] = {"every_fix": every_fix_release, "patched_outcome": patched_outcome, "enough_text": enough_text,
         "reach_verdict": reach_verdict, "incident_bottom_line": incident_bottom_line}


def _short_site(call_site: str) -> str:
    """``sglang/srt/model_executor/model_runner.py:622 in initialize`` -> ``model_runner.py:622``."""
    return call_site.split(" in ")[0].rsplit("/", 1)[-1]


def _broke(b: provenance.Binder, crash: Optional[dict], trace: Optional[dict]) -> Optional[str]:
    if not crash and not trace:
        return None
    lacks = (f"`KimiK25ForConditionalGeneration` lacks {trace['missing']}, EAGLE-3 hooks its inner model has "
             f"**[traced]**; " if trace else "")
    crashed = (f"sglang {crash['sglang']}'s start-up calls them and dies with `AttributeError` at "
               f"`{_short_site(crash['call_site'])}`, reproduced here in "
               f"{b.num('crash.crash.seconds_to_outcome', '')} s **[measured]**" if crash else
               "sglang's start-up calls them and dies")
    return b.sentence("summary.crash", f"**What broke:** {lacks}{crashed}.")


def _order_key(trace: Mapping[str, Any]) -> tuple[Optional[str], str]:
    """The evidence key of the release whose capture is right for the incident's drafter, and what it fixes: the
    order fix alone for ids starting at 1, the order fix with sglang PR #25454's rule otherwise."""
    order = trace.get("capture_order") or {}
    if not order.get("right_release"):
        return None, ""
    what = "capture order and ids as given (PR #25454)" if order.get("as_given") else "capture order"
    return f"trace.capture_order.{order['right_key']}", what


def _fix(b: provenance.Binder, trace: Optional[dict], fix: Optional[dict]) -> Optional[str]:
    if not fix and not trace:
        return None
    text = "**The fix:** delegate both to `self.language_model`"
    if fix:
        text += (f" (`patches/{fix['patch']}`): the patched server "
                 f"{b.rule('patched_outcome', patched_outcome, 'patch.chain')} **[measured]**")
    if trace:
        text += (f"; the write-up's one-method patch is "
                 f"{b.rule('enough_text', enough_text, 'trace.verdict.one_method_enough')} **[traced]**")
        delegation = trace.get("first_fixed")
        order_key, what = _order_key(trace)
        keys = ["trace.bisect.first_fixed"] + ([order_key] if order_key else [])
        if delegation:
            text += (f". sglang {b.rule('every_fix', every_fix_release, *keys)} has every fix this drafter needs"
                     f" (delegation {b.num('trace.bisect.first_fixed', 's')}"
                     + (f", {what} {b.num(order_key, 's')}" if order_key else "")
                     + ") **[traced]**")
    return b.sentence("summary.fix", text + ".")


def _incident(b: provenance.Binder, incident: Mapping[str, Any], premise: Optional[Mapping[str, Any]],
              has_matching: bool) -> str:
    """The public sweep's two implications and the model at the context that reproduces the reported peak (at the
    assumed context where no context does)."""
    one, peak = "incident.evidence.one_stream", "incident.evidence.peak"
    match = "model.incident.context_matching_reported_peak"
    pred = f"{match}.predicted" if has_matching else "model.incident.predicted.rtx_pro_6000_x8"
    condition = "" if not premise or premise["holds"] else " (if it ran with both hooks delegated)"
    lead = f"**Would EAGLE-3 pay on the incident's deployment{condition}?** "
    if has_matching:
        model = (f"at the {b.num(f'{match}.context_len', ',.0f')}-token context that reproduces the engineer's "
                 f"{b.num(f'{match}.reported_peak_tok_s', ',.0f')} tok/s peak, EAGLE-3 under sglang's "
                 f"{b.num(f'{pred}.spec_max_batch', 'd')}-request cap "
                 f"{b.rule('reach_verdict', reach_verdict, pred)} **[modelled]**")
    else:
        model = (f"at the assumed {b.num('model.incident.context_len', ',.0f')}-token context, EAGLE-3 under "
                 f"sglang's {b.num(f'{pred}.spec_max_batch', 'd')}-request cap "
                 f"{b.rule('reach_verdict', reach_verdict, pred)} **[modelled]**")
    if not incident.get("evidence"):
        return b.sentence("summary.incident_verdict", f"{lead}{model[0].upper()}{model[1:]}.")
    bottom = b.rule("incident_bottom_line", incident_bottom_line, f"{one}.gains", f"{peak}.about_no_gain", pred)
    return b.sentence("summary.incident_verdict", (
        f"{lead}{bottom}: a public Kimi-K2.6 EAGLE-3 sweep on the same GPUs gains "
        f"{b.num(f'{one}.cell.speedup', '.2f')}x at one stream and {b.num(f'{peak}.cell.speedup', '.2f')}x at its "
        f"{b.num(f'{peak}.cell.no_spec_tok_s', ',.0f')} tok/s peak **[reported]**; {model}."))


def _run(b: provenance.Binder, s03: Optional[PatchBenchSidecar], profile: str) -> Optional[str]:
    if s03 is None or not s03.speedup:
        return None
    caveat = " Tiny random model on CPU: no evidence about GPUs." if profile == "cpu" else ""
    clause = run_speed.summary_clause(b, s03)
    if clause is None:
        return b.sentence("summary.run_speedup", (
            f"**Did it pay on this run ({profile} profile)?** Not resolved: no interleaved launch measured an "
            f"interval, and the sweep's single draws are no verdict.{caveat}"))
    return b.sentence("summary.run_speedup", (
        f"**Did it pay on this run ({profile} profile)?** {clause} **[measured]**.{caveat}"))


def _todo(b: provenance.Binder, trace: Optional[dict]) -> str:
    release = ""
    if trace and trace.get("first_fixed"):
        order_key, _ = _order_key(trace)
        keys = ["trace.bisect.first_fixed"] + ([order_key] if order_key else [])
        release = f"sglang {b.rule('every_fix', every_fix_release, *keys)} or later, or this project's patches"
    upgrade = f"run {release} **[traced]**" if release else "apply this project's patches"
    return b.sentence("summary.todo", (
        f"**What to do, in order:** check your model and release with `eagle3lab preflight-model`; {upgrade}; "
        f"measure with `eagle3lab bench`; ask `eagle3lab doctor` why it does not pay; get your break-even acceptance "
        f"from `eagle3lab predict`."))


def summary_lines(crash: Optional[dict], trace: Optional[dict], fix: Optional[dict], incident: Mapping[str, Any],
                  premise: Optional[Mapping[str, Any]], binder: provenance.Binder, s03: Optional[PatchBenchSidecar],
                  profile: str = "cpu", has_matching: bool = False) -> list[str]:
    """The five bullets, bound through ``binder`` (the evidence tree of ``ReportSources.tree``)."""
    lines = [_broke(binder, crash, trace), _fix(binder, trace, fix),
             _incident(binder, incident, premise, has_matching), _run(binder, s03, profile), _todo(binder, trace)]
    return [line for line in lines if line]


def words(text: str) -> int:
    """Words as a reader counts them: whitespace-separated, markup included (a conservative count)."""
    return len(text.split())
