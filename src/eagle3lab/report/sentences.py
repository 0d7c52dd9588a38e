"""The report's sentences computed from evidence values: each verdict a rule (``RULES``) that ``provenance`` can
re-apply to the evidence a bound sentence names, each number formatted once (``fixed``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence
from eagle3lab.report import engine_condition, evidence_table, run_speed, summary, validation_section
from eagle3lab.report.provenance import Rule


class Keyed(Protocol):
    """A row read by key: a JSON object from the evidence, or a sidecar record (``Record.__getitem__``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def fixed(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def gib(nbytes: int) -> float:
    return nbytes / 2**30


def speedup_cells(records: Sequence[Keyed]) -> Optional[str]:
    """The measured speedups with their direction, e.g. '0.64x at concurrency 1 (slower)'; None when not measured."""
    if not records:
        return None
    return ", ".join(f"{r['speedup']:.2f}x at concurrency {r['concurrency']} "
                     f"({'slower' if r['speedup'] < 1 else 'faster'})" for r in records)


def layer_claim(incident: Mapping[str, Any]) -> str:
    """The one-layer-early claim with its condition: CUDA-graph replays capture sglang's default layers, eager
    forwards the drafter's ids + 1, so the two differ by one layer only when the drafter's ids equal the default."""
    ids, default = incident["writeup_aux_ids"], incident["sglang_default_aux_ids"]
    same = list(ids) == list(default)
    return (f"The write-up quotes the drafter's aux layer ids as {ids} **[reported]**; sglang's default for a "
            f"{incident['target_layers']}-layer target is {default} **[traced]**. "
            + ("They are equal, so " if same else "They differ, so the one-layer-early claim does not apply; ")
            + ("CUDA-graph decode would capture each aux hidden state one layer before eager prefill does. This "
               "holds only while the drafter's ids equal sglang's default." if same else
               "what graph replays capture must be traced for these ids."))


def public_rows(public: Mapping[str, Mapping[str, Any]], model: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Public acceptance figures for this drafter, each placed against the modelled break-evens (single request,
    EAGLE-3's request limit, EAGLE-3's peak reaching the baseline's)."""
    thresholds = [("one request", model["break_even_1"]), (f"{model['spec_max_batch']} requests",
                                                            model["break_even_max"]),
                  ("EAGLE-3's peak vs the baseline's", model["break_even_peak"])]
    rows = []
    for key, row in public.items():
        if key == "sglang_pr_25454":
            continue
        accept = row.get("accept_length", row.get("value") if "length" in row.get("metric", "") else None)
        per_benchmark = row.get("values") or {}
        if per_benchmark:  # one acceptance length per published benchmark: the range against each threshold
            low, high = min(per_benchmark.values()), max(per_benchmark.values())
            published = ", ".join(f"{name} {value}" for name, value in per_benchmark.items())
            against = "; ".join(f"{name} {need}: " + ("every benchmark above" if low > float(need) else
                                                      "no benchmark above" if high <= float(need) else
                                                      "some benchmarks above")
                                for name, need in thresholds)
        elif row.get("value") is None:
            published, against = "--", f"not transcribed yet ({row['note']})"
        else:
            published = (f"{row['rate_pct']:.2f}% acceptance rate, {row['num_speculative_tokens']} speculative "
                         f"tokens" if key == "vllm_pr_35966" else f"{row['value']}")
            above = [name for name, need in thresholds if accept is not None and accept > float(need)]
            below = [name for name, need in thresholds if accept is not None and accept <= float(need)]
            against = (f"{accept:.2f} tokens per verify step (1 + {row['num_speculative_tokens']} x rate): above the "
                       f"break-even at {', '.join(above) or 'none'}" + (f"; not above it at {', '.join(below)}"
                                                                       if below else ""))
        rows.append({"url": row["url"], "key": key, "drafter": row["drafter"], "engine": row["engine"],
                     "hardware": row["hardware"], "workload": row.get("workload", "not named"),
                     "published": published, "against": against})
    return rows


def shift_sentence(public: Mapping[str, Mapping[str, Any]], mismatch: Optional[Mapping[str, Any]]) -> Optional[str]:
    """sglang PR #25454's one-layer cost beside this run's CPU mismatch experiment."""
    row = public.get("sglang_pr_25454")
    if not row:
        return None
    text = (f"Public measurement of a one-layer shift: [sglang PR #25454]({row['url']}) reports that "
            f"`{row['drafter']}` lost about {row['value']:.2f} acceptance length on Kimi-K2.5 when its aux layers "
            f"were captured one layer off **[reported]** (another Kimi-K2.5 drafter than the incident's)")
    if mismatch and mismatch.get("drop"):
        text += (f"; this run's {mismatch['target_layers']}-layer tiny target loses {mismatch['drop'][0]:.3f} at "
                 f"concurrency {mismatch['concurrency'][0]} **[measured]**, on a random model whose size does not "
                 f"transfer")
    return text + "."


# ------------------------------------------------------------------------------------------------ the model
def accepts_text(values: Sequence[float]) -> str:
    return " / ".join(f"{a:g}" for a in values)


def rates_text(values: Sequence[float], digits: int) -> str:
    return " / ".join(fixed(v, digits) for v in values)


def peak_verdict(pred: Mapping[str, Any]) -> str:
    """Whether EAGLE-3 can beat plain decoding at peak for one prediction, and the acceptance it takes."""
    need, top = pred["break_even_at_peak"], pred["max_accept_length"]
    if need > top:
        return f"cannot gain at any acceptance (needs {need:.2f}, at most {top} possible)"
    return f"gains only above acceptance {need:.2f} (at most {top} possible)"


def sensitivity_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sensitivity table's rows: each changed assumption and what it does to capacity, break-even and the
    verdict at peak."""
    return [{"variation": r["variation"], "context": fixed(r["context_len"], 0),
             "base_peak": fixed(r["baseline_peak_tok_s"], 0), "base_batch": r["baseline_peak_batch"],
             "spec_max": r["spec_max_batch"], "be_1": fixed(r["break_even_single_stream"], 2),
             "be_max": fixed(r["break_even_at_spec_max_batch"], 2), "be_peak": fixed(r["break_even_at_peak"], 2),
             "verdict": peak_verdict(r)} for r in rows]


def flip_sentence(rows: Sequence[Mapping[str, Any]]) -> str:
    """Where the verdict at peak moves across the sensitivity table, said from the rows themselves."""
    low = min(rows, key=lambda r: r["break_even_at_peak"])
    high = max(rows, key=lambda r: r["break_even_at_peak"])
    text = (f"Across these assumptions the acceptance EAGLE-3 needs to reach the baseline's peak runs from "
            f"{low['break_even_at_peak']:.2f} ({low['variation']}) to {high['break_even_at_peak']:.2f} "
            f"({high['variation']})")
    impossible = [r for r in rows if r["break_even_at_peak"] > r["max_accept_length"]]
    if impossible:
        text += (f"; in {len(impossible)} of {len(rows)} no acceptance can reach it "
                 f"({', '.join(r['variation'] for r in impossible)})")
    else:
        text += f"; in all {len(rows)} some acceptance up to the maximum reaches it"
    return text + " **[modelled]**."


def matching_sentence(match: Optional[Mapping[str, Any]], assumed_context: float) -> Optional[str]:
    """What the model says at the context where it reproduces the reported peak (None if no context does)."""
    return matched_peak_sentence(match, assumed_context) if match else None


def matched_peak_sentence(match: Mapping[str, Any], assumed_context: float) -> str:
    """``matching_sentence`` where a context reproduces the reported peak: the rule a sentence is bound to, which
    has always something to say (the report binds it only where the evidence holds a match)."""
    capped, uncapped = match["predicted"], match["predicted_without_request_cap"]
    return (f"The model reproduces the reported peak of {fixed(match['reported_peak_tok_s'], 0)} tok/s **[reported]** "
            f"at a mean decode context of {fixed(match['context_len'], 0)} tokens instead of the assumed "
            f"{fixed(assumed_context, 0)} (it predicts {fixed(capped['baseline_peak_tok_s'], 0)} tok/s at "
            f"{capped['baseline_peak_batch']} requests there; a one-parameter fit to that one number, so not a test "
            f"of the model). At that context EAGLE-3 under the "
            f"{capped['spec_max_batch']}-request cap {peak_verdict(capped)}; without the cap "
            f"({uncapped['spec_max_batch']} requests fit) it {peak_verdict(uncapped)} **[modelled]**.")


def cycle_sentence(breakdown: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> str:
    costs = ", ".join(f"{row['cycle_over_plain_step']:.2f} at {row['batch']} request{'s' if row['batch'] > 1 else ''}"
                      for row in breakdown)
    experts = "; ".join(f"{row['verify_distinct_experts_per_layer']:.1f} vs {row['plain_distinct_experts_per_layer']:.1f}"
                        f" at {row['batch']}" for row in breakdown)
    return (f"One EAGLE-3 cycle (draft passes, one verify pass over {spec['verify_tokens']} tokens per request, a "
            f"draft extend, CPU work the overlap scheduler no longer hides) costs as much as this many plain decode "
            f"steps: {costs} **[modelled]**. A cycle pays only if it emits more tokens per request than that. The "
            f"verify pass reads more expert weights than a plain step: distinct experts touched per MoE layer, "
            f"verify vs plain, {experts}, assuming uniform routing (an upper bound: real routing repeats experts) "
            f"**[modelled]**.")


def capacity_sentence(rtx: Mapping[str, Any], uncapped: Optional[Mapping[str, Any]]) -> str:
    """How many requests each side runs at peak, and whether sglang's cap or the KV cache is what limits EAGLE-3."""
    base = (f"plain decoding fits the KV cache of {rtx['baseline_max_batch']} requests at the assumed context "
            f"**[modelled]**.")
    if uncapped and uncapped["spec_max_batch"] > rtx["spec_max_batch"]:
        return (f"Under speculation sglang runs at most {rtx['spec_max_batch']} requests unless "
                f"`--max-running-requests` is set (its KV cache, with the drafter's, would hold "
                f"{uncapped['spec_max_batch']}), while {base}")
    return (f"Under speculation the KV cache of target and drafter holds {rtx['spec_max_batch']} requests, while "
            f"{base}")


def direction_verdict(records: Sequence[Mapping[str, Any]]) -> str:
    slower = [r for r in records if r["speedup"] < 1]
    if len(slower) == len(records):
        return "no: EAGLE-3 is slower than the baseline at every concurrency measured"
    if not slower:
        return "yes: EAGLE-3 is faster than the baseline at every concurrency measured"
    return "only at some concurrencies"


def enough_verdict(value: bool) -> str:
    return "enough" if value else "not enough"


def sensitivity_range(rows: Sequence[Mapping[str, Any]]) -> str:
    values = [r["break_even_at_peak"] for r in rows]
    return f"{min(values):.2f} to {max(values):.2f}"


def peak_error_text(error_pct: float) -> str:
    return f"{abs(error_pct):.1f}% {'below' if error_pct < 0 else 'above'}"


# the rules a bound sentence may name (``provenance.broken_sentences`` re-applies them to the evidence)
RULES: dict[str, Rule] = {"enough": enough_verdict, "direction": direction_verdict, "speedups": speedup_cells,
         "sensitivity_range": sensitivity_range, "peak_error": peak_error_text,
         "peak_verdict": peak_verdict, "flip": flip_sentence, "matching": matching_sentence,
         **validation_section.RULES, **engine_condition.RULES, **evidence_table.RULES, **summary.RULES,
         **run_speed.RULES}
