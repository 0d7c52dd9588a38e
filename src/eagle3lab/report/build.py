"""One command for the shareable result: run 01 -> 02 -> 03, export HTML, draw the model's figures, write REPORT.md.

REPORT.md is rendered from ``ReportSources`` -- the notebooks' typed sidecars, the cost model's evidence
(``model_evidence``) and the incident's reported facts -- never typed by hand: each number in it is one a run or the
model produced, with its provenance (measured here, reported, modelled, traced), and each conclusion is said with the
condition under which it holds. ``provenance`` checks the rendered text against exactly these sources.
Every input is checked (``report.inputs``) before the first output is written, and every output is written
atomically, so a failed or refused build never replaces a good REPORT.md, HTML page or figure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import jinja2

from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.paths import REPO_ROOT, repo_dir
from eagle3lab.report import engine_condition, model_evidence, provenance, validation_section
from eagle3lab.report.model_evidence import ModelEvidence
from eagle3lab.package.patching import patch_info
from eagle3lab.runtime.envinfo import environment_table
from eagle3lab.sidecars import (SCHEMAS, CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                VariantCost, read_if_present)
from eagle3lab.trace import audit
from eagle3lab.fix.capture_result import CaptureResult
from eagle3lab.report.plots.model import (COMPONENT_LABELS, cpu_profile_figures, incident_figures,
                                          measured_points_from_bench, validation_figure)
from eagle3lab.report import incident
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.runtime.profiles import Profile, load_profile
from pydantic import ValidationError

TEMPLATE = "REPORT.md.jinja"


def _r(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _gib(nbytes: int) -> float:
    return nbytes / 2**30


def _crash_context(s01: CrashReproSidecar | None) -> tuple[dict | None, dict | None]:
    if s01 is None:
        return None, None
    crash, control = s01.crash, s01.control
    return ({"signature": crash.signature, "call_site": crash.call_site, "category": crash.category,
             "seconds": crash.seconds_to_outcome, "rss": round(_gib(crash.peak_rss_bytes), 2),
             "sglang": s01.environment.get("sglang")},
            {"seconds": control.seconds_to_ready, "tokens": control.completion_tokens,
             "generate": round(control.generate_seconds, 3)})


ACCESS_KINDS = (("call", "calls"), ("read", "attribute reads"), ("check", "hasattr checks"), ("write", "writes"))


def _site_counts(contract: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Contract sites by the object they touch and by kind of access (a call, a read and a hasattr check differ)."""
    rows = []
    for role in sorted({site.get("role", "?") for site in contract}):
        on_role = [site for site in contract if site.get("role", "?") == role]
        rows.append({"object": role, **{kind: sum(site.get("access") == kind for site in on_role)
                                        for kind, _ in ACCESS_KINDS}, "total": len(on_role)})
    return rows


def _gap_sentence(missing: Sequence[str], gaps: Sequence[str], inner: str) -> str:
    """Whether each missing member is a delegation gap, said from the verdict's own lists."""
    real = [m for m in missing if m not in gaps]
    if missing and not real:
        return f"each is a *delegation gap*: the inner `{inner}` has it"
    if not gaps:
        return f"none is a delegation gap: the inner `{inner}` lacks them too"
    return (f"delegation gaps (the inner `{inner}` has them): {', '.join(f'`{m}`' for m in gaps)}; "
            f"lacking in the inner model too: {', '.join(f'`{m}`' for m in real)}")


def _raise_row(profile: str, site: Any) -> dict[str, Any]:
    """A first-raise site with its certainty: an uncertain one names the branch that decides it and the fallback."""
    data = site.model_dump()
    branches = data.get("undecided_branches") or []
    other = data.get("otherwise") or {}
    parts = [f"only if `{b['test']}` (`{b['where']}`) is true"
             + (f", decided by {', '.join(f'`{c}`' for c in b['decided_by'])}" if b.get("decided_by") else "")
             for b in branches]
    if other.get("where"):
        parts.append(f"otherwise `{other['where']}` ({other.get('function')}) raises first")
    return {"profile": profile, **data, "certain": bool(data.get("certain", True)), "condition": "; ".join(parts)}


def _trace_context(s02: InterfaceTraceSidecar | None) -> dict | None:
    if s02 is None:
        return None
    verdict, bisect, timings = s02.verdict, s02.bisect, s02.timings
    inner = verdict.class_report.get("inner_class", "inner model")
    newest = s02.conformance.get("newest")
    next_raise = verdict.next_raise_after_one_method.get("cpu")
    layers = [{"profile": table.profile, "depth": table.depth, "aux": table.aux_layer_ids,
               "eager": table.captured("eager"), "graphs": table.captured("graphs"), "conflict": table.conflict,
               "deployment": table.deployment, "fetched": table.status != "not fetched", "fix": table.fix}
              for table in s02.layer_ids]
    return {
        "version": verdict.sglang_version, "sites": len(s02.contract), "site_counts": _site_counts(s02.contract),
        "access_kinds": ACCESS_KINDS,
        "gap_sentence": _gap_sentence(verdict.missing_members, verdict.delegation_gaps, inner),
        "required": ", ".join(f"`{m}`" for m in verdict.required_members),
        "missing": ", ".join(f"`{m}`" for m in verdict.missing_members),
        "inner": inner,
        "first_raise": [_raise_row(name, row) for name, row in verdict.first_raise.items()],
        "one_method_enough": verdict.one_method_enough,
        "next_member": next_raise.member if next_raise else None, "next_where": next_raise.where if next_raise else None,
        "layers": layers,
        "audit_s": timings.audit_seconds_one_release, "bisect_s": timings.bisect_seconds_warm_cache,
        "releases": timings.bisect_releases,
        "appeared": bisect.appeared, "first_fixed": bisect.first_fixed,
        "gained": ", ".join(f"`{m}` in {v}" for m, v in bisect.member_gained.items()),
        "newest": newest.sglang_version if newest else None,
        "still_missing": [row for row in (newest.rows if newest else []) if row.get("missing")],
        "audits": _audit_contexts(s02),
        "fixes": _fixes_context(s02),
        "figures": [Path(f).name for f in s02.figures],
        "capture_order": _capture_order_context(s02),
    }


def _capture_order_context(s02: InterfaceTraceSidecar) -> dict[str, Any] | None:
    """sglang's second EAGLE-3 defect, as notebook 02 traced it: the layers graph replays and eager forwards capture
    for the incident's drafter ids, per release, the call sites that decide it, and the first release that fixed it."""
    order = s02.capture_order
    if order is None:
        return None
    data = order.model_dump() if hasattr(order, "model_dump") else dict(order)
    depth = data.get("depth")
    rows = [row for row in data.get("layers", []) if row.get("depth") == depth]
    defect = next((r for r in data.get("releases", []) if r.get("defect")), None)
    return {"ids": data.get("drafter_ids"), "depth": depth, "ids_source": data.get("ids_source"), "rows": rows,
            "first_fixed": data.get("first_fixed"), "fix_pr": data.get("fix_pr"),
            "sites": [c["where"] for c in (defect or {}).get("calls", []) if not c.get("with_ids")],
            "default": (defect or {}).get("default_expr")}


def _audit_contexts(s02: InterfaceTraceSidecar) -> list[dict[str, Any]]:
    """The conformance audit of the traced and the newest release: counts, lacking wrappers, unresolved ones."""

    out, seen = [], set()
    for key in ("traced", "newest"):
        conf = s02.conformance.get(key)
        if conf is None or conf.sglang_version in seen or conf.counts is None:
            continue
        seen.add(conf.sglang_version)
        counts = conf.counts
        rows = [{"group": kind, "count": counts.of(audit.KIND_KEYS[kind])} for kind in audit.KINDS]
        wrappers = [{"verdict": v, "count": counts.of(audit.verdict_key(v))} for v in audit.VERDICTS]
        out.append({"version": conf.sglang_version, "provenance": conf.provenance, "total": counts.entry_classes,
                    "rows": rows, "wrappers": wrappers, "members": ", ".join(f"`{m}`" for m in conf.members),
                    "left_out": ", ".join(f"`{m}`" for m in conf.every_module_has),
                    "lacking": [{"file": r["file"], "entry": r["entry"], "inner": f"self.{r['inner_attr']}",
                                 "classes": ", ".join((o["class"] or "?").rsplit(".", 1)[-1]
                                                      for o in r.get("inner_options", [])),
                                 "missing": ", ".join(r["missing"])} for r in conf.lacking],
                    "unresolved": conf.unresolved})
    return out


def _fixes_context(s02: InterfaceTraceSidecar) -> dict[str, Any] | None:
    """Generated fixes per release and their verification, as table rows."""
    record = s02.fixes
    if not record.releases:
        return None
    releases = [{"release": r.release, "checked": r.checked, "total": len(r.fixes),
                 "series": r.series.detail if r.series else "", "refused": r.refused,
                 "stale": [f.name for f in r.fixes if f.ok and f.committed != "identical"]}
                for r in record.releases.values()]
    verification = record.verification or {}
    capture = []
    for item in verification.get("capture", []):
        before, after = item["unpatched"] or {}, item["patched"]
        hook = next((h for h in before.get("hooks", []) if not h["ok"]), None)
        capture.append({"entry": item["entry"], "patch": item["patch"], "inner": item["inner"],
                        "unpatched": f"{hook['error_type']} at `{hook['raised_at']}`" if hook
                        else before.get("outcome", "not run"),
                        "patched": after["outcome"], "layers": after.get("layers_to_capture"),
                        "ids": after.get("drafter_layer_ids"),
                        "shapes": ", ".join(f"{f['phase']} {f['shape']}" for f in after.get("forwards", [])),
                        "verified": item["verified"], "reason": item["reason"], "provenance": item["provenance"]})
    imports = [{"release": release, "where": check["where"], "imported": check.get("imported", 0),
                "of": check.get("of", 0), "ok": check["ok"],
                "failures": sorted({row["pristine"] for row in check["modules"].values() if row["pristine"] != "ok"})}
               for release, check in verification.get("imports", {}).items()]
    return {"releases": releases, "ran": verification.get("ran", False), "capture": capture, "imports": imports,
            "date": s02.date}


def _fix_context(s03: PatchBenchSidecar | None) -> tuple[dict | None, dict | None]:
    if s03 is None:
        return None, None

    def capture(result: CaptureResult) -> dict[str, Any]:
        shapes = {f.phase: f"{f.shape} (expected {f.expected_shape})" for f in result.forwards}
        return {"patch": result.patch or "none", "outcome": result.outcome, "layers": result.layers_to_capture,
                "prefill": shapes.get("prefill"), "decode": shapes.get("decode")}

    fix = {"patch": s03.patch, "members": ", ".join(f"`{m}`" for m in s03.delegated_members),
           "fixed_upstream": patch_info(s03.patch).fixed_upstream,
           "chain": s03.chain, "story": s03.story,
           "capture": [capture(CaptureResult.from_dict(value)) for value in s03.capture.values()]}
    profile = s03.profile_values
    bench = None
    if s03.arms:
        bench = {"rows": _bench_rows(s03), "cross": s03.cross_check, "speedups": speedup_cells(s03.speedup),
                 "prompt_kind": s03.parameters.get("prompt_kind"), "input_len": profile["bench_input_len"],
                 "output_len": profile["bench_output_len"], "concurrency": profile["bench_concurrency"],
                 "figures": [Path(p).name for p in s03.figures.values()],
                 "spec_arms": s03.spec_arms, "lossless": s03.lossless, "mismatch": s03.layer_mismatch,
                 "variant_costs": [variant_context(c) for c in s03.variant_costs],
                 "speedup": s03.speedup, "sampling": s03.sampling, "spread": s03.launch_spread,
                 "harness": s03.harness}
    return fix, bench


def variant_context(cost: VariantCost) -> dict[str, Any]:
    """A variant's throughput against the headline arm as the report says it, with whether its bootstrap interval
    over the rounds resolves a difference at all (the verdict computed here from the interval's ends)."""
    if cost.ratio_low is None or cost.ratio_high is None:
        verdict = "one round only, so no interval"
    elif cost.ratio_high < 1.0:
        verdict = "the interval lies below 1: these rounds resolve a cost"
    elif cost.ratio_low > 1.0:
        verdict = "the interval lies above 1: these rounds resolve a gain"
    else:
        verdict = "the interval holds 1: these rounds do not resolve a difference"
    return {**cost.model_dump(), "verdict": verdict}


def _headline_arms(s03: PatchBenchSidecar) -> set[str]:
    return {a.name for a in s03.spec_arms if a.kind == "eagle3"} or {"eagle3"}


def _bench_rows(s03: PatchBenchSidecar) -> list[dict[str, Any]]:
    """The benchmark table's rows, each EAGLE-3 headline row with its measured speedup over the baseline at the
    same concurrency (``bench.acceptance.speedup_records``; other arms have none)."""
    speedups = {r["concurrency"]: r["speedup"] for r in s03.speedup}
    headline = _headline_arms(s03)
    rows = []
    for row in s03.arms:
        value = speedups.get(row.get("concurrency")) if row.get("arm") in headline else None
        rows.append({**row, "speedup": f"{value:.2f}x" if value is not None else "--"})
    return rows


def speedup_cells(records: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """The measured speedups with their direction, e.g. '0.64x at concurrency 1 (slower)'; None when not measured."""
    if not records:
        return None
    return ", ".join(f"{r['speedup']:.2f}x at concurrency {r['concurrency']} "
                     f"({'slower' if r['speedup'] < 1 else 'faster'})" for r in records)


# ------------------------------------------------------------------------------------------------ the incident
def _incident_context(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Section 1: the incident as the engineer reported it (every number a reported figure)."""
    reported = facts["reported"]
    return {**facts, "checkpoint_gb": _r(reported["checkpoint_gb"]["value"], 0),
            "gpus": _r(reported["gpus"]["value"], 0), "single": _r(reported["single_stream_tok_s"]["value"]),
            "peak": _r(reported["peak_tok_s"]["value"], 0),
            "not_reported": "; ".join(facts["not_reported"])}


def _plain_record(row: Any) -> dict[str, Any]:
    return row.model_dump() if hasattr(row, "model_dump") else dict(row)


def premise_context(incident: Mapping[str, Any], trace: Optional[Mapping[str, Any]],
                    fix: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """What the write-up says, what the trace (and the relaunch chain) prove about it, and what therefore stays
    unknown; ``holds`` is False when the evidence contradicts the write-up's configuration."""
    claims = incident["claims"]
    said = [f"{claims['one_method_patch']} **[reported]** by the engineer",
            f"{claims['no_gain']} **[reported]** by the engineer"]
    proved: list[str] = []
    holds = True
    if trace and not trace["one_method_enough"]:
        holds = False
        proved.append(f"with only `set_eagle3_layers_to_capture` delegated, sglang {trace['version']}'s start-up "
                      f"next fails on `{trace['next_member']}` at `{trace['next_where']}` **[traced]**")
    elif trace:
        proved.append(f"the trace finds the one-method patch enough for sglang {trace['version']} **[traced]**")
    chain = [_plain_record(row) for row in (fix or {}).get("chain", [])]
    one = next((row for row in chain if row.get("step") == "one-method patch"), None)
    if one is not None:
        proved.append(f"the relaunch chain's one-method patch server {one['outcome']}"
                      + (f" at `{one['call_site']}`" if one.get("call_site") else "") + " **[measured]**")
        holds = holds and one["outcome"] == "ready"
    if holds:
        unknown = "nothing about the configuration: the write-up's patch is one that starts"
        condition = ""
    else:
        unknown = ("which code actually served the engineer's EAGLE-3 measurement (another patch, another build or "
                   "other flags): the one-method patch the write-up describes cannot start, so its 'no gain' was "
                   "not measured with the configuration described")
        condition = ("Every statement below about the incident's speedup is conditional: it holds if the engineer's "
                     f"server ran EAGLE-3 with the flags of `params/{incident['profile']}.yaml` and a patch that "
                     "delegates both members.")
    return {"said": said, "proved": proved, "unknown": unknown, "condition": condition, "holds": holds}


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
def _accepts(values: Sequence[float]) -> str:
    return " / ".join(f"{a:g}" for a in values)


def _rates(values: Sequence[float], digits: int) -> str:
    return " / ".join(_r(v, digits) for v in values)


def peak_verdict(pred: Mapping[str, Any]) -> str:
    """Whether EAGLE-3 can beat plain decoding at peak for one prediction, and the acceptance it takes."""
    need, top = pred["break_even_at_peak"], pred["max_accept_length"]
    if need > top:
        return f"cannot gain at any acceptance (needs {need:.2f}, at most {top} possible)"
    return f"gains only above acceptance {need:.2f} (at most {top} possible)"


def sensitivity_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sensitivity table's rows: each changed assumption and what it does to capacity, break-even and the
    verdict at peak."""
    return [{"variation": r["variation"], "context": _r(r["context_len"], 0),
             "base_peak": _r(r["baseline_peak_tok_s"], 0), "base_batch": r["baseline_peak_batch"],
             "spec_max": r["spec_max_batch"], "be_1": _r(r["break_even_single_stream"], 2),
             "be_max": _r(r["break_even_at_spec_max_batch"], 2), "be_peak": _r(r["break_even_at_peak"], 2),
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
    if not match:
        return None
    capped, uncapped = match["predicted"], match["predicted_without_request_cap"]
    return (f"The model reproduces the reported peak of {_r(match['reported_peak_tok_s'], 0)} tok/s **[reported]** "
            f"at a mean decode context of {_r(match['context_len'], 0)} tokens instead of the assumed "
            f"{_r(assumed_context, 0)} (it predicts {_r(capped['baseline_peak_tok_s'], 0)} tok/s at "
            f"{capped['baseline_peak_batch']} requests there; a one-parameter fit to that one number, so not a test "
            f"of the model). At that context EAGLE-3 under the "
            f"{capped['spec_max_batch']}-request cap {peak_verdict(capped)}; without the cap "
            f"({uncapped['spec_max_batch']} requests fit) it {peak_verdict(uncapped)} **[modelled]**.")


def _cycle_sentence(breakdown: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> str:
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


def _capacity_sentence(rtx: Mapping[str, Any], uncapped: Optional[Mapping[str, Any]]) -> str:
    """How many requests each side runs at peak, and whether sglang's cap or the KV cache is what limits EAGLE-3."""
    base = (f"plain decoding fits the KV cache of {rtx['baseline_max_batch']} requests at the assumed context "
            f"**[modelled]**.")
    if uncapped and uncapped["spec_max_batch"] > rtx["spec_max_batch"]:
        return (f"Under speculation sglang runs at most {rtx['spec_max_batch']} requests unless "
                f"`--max-running-requests` is set (its KV cache, with the drafter's, would hold "
                f"{uncapped['spec_max_batch']}), while {base}")
    return (f"Under speculation the KV cache of target and drafter holds {rtx['spec_max_batch']} requests, while "
            f"{base}")


def _goal(mape: float, goal: Optional[float]) -> str:
    """The verdict the published sources get, said of this run too."""
    if goal is None:
        return ""
    return f" (goal of at most {goal:g}%: {'met' if mape <= goal else 'not met'})"


def _mape_line(what: str, mape: float, goal: Optional[float], tail: str = "") -> str:
    """One run-check MAPE as the report says it (the sweep's and the interleaved launch's alike)."""
    return f"{what}: MAPE {_r(mape)}%{_goal(mape, goal)}{tail} **[modelled]** vs **[measured]**."


def _trend(trend: Optional[Mapping[str, str]]) -> str:
    return (f"; with concurrency it {trend['measured']} as measured and {trend['predicted']} as predicted"
            if trend else "")


def _with_turnover(mape: Optional[float], goal: Optional[float]) -> str:
    return f", {_r(mape)}%{_goal(mape, goal)} with request turnover" if mape is not None else ""


def _run_check_context(check: Optional[Mapping[str, Any]], missing: Optional[str],
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
                     + ", ".join(f"{_r(v)}% {COMPONENT_LABELS.get(k, k)}" for k, v in parts)
                     + " (parts of at least 1% shown) **[modelled]**.")
    return {**check, "context": f"{check['context']:g}", "rows": rows, "lines": lines, "missing": None,
            "calibration_clause": _calibration_clause(check),
            "has_speedup": check.get("speedup_mape_pct") is not None,
            "interleaved": _interleaved_context(check.get("interleaved"), goal)}


def _run_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A run check's rows as the report's table cells ("--" where a point has no such value)."""
    def cell(row: Mapping[str, Any], key: str, digits: int = 1) -> Any:
        return _r(row[key], digits) if key in row else "--"

    return [{"concurrency": row["concurrency"], "measured": _r(row["measured_baseline_tok_s"]),
             "predicted": _r(row["predicted_baseline_tok_s"]),
             "error": "calibration" if row["baseline_role"] == "calibration" else _r(row["baseline_error_pct"]),
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
    turnover = (f", {_r(naive['turnover_mape_pct'])}% with turnover" if naive.get("turnover_mape_pct") is not None
                else "")
    return [f"Beside it, the naive baseline (the speedup measured at concurrency 1, {_r(naive['held_speedup'], 2)}x, "
            f"held at every other concurrency) misses the speedups at concurrency {at} by MAPE "
            f"{_r(naive['naive_mape_pct'])}%, the model by {_r(naive['model_mape_pct'])}% counting the passes "
            f"only{turnover}, on the same points **[modelled]** vs **[measured]**."]


def _calibration_clause(check: Mapping[str, Any]) -> str:
    """What the model took from this run besides the plain single-stream step: the cycle's measured work outside
    the forwards (and from which arm), or nothing (sglang's engine term, frozen on development sources)."""
    extra = check.get("cycle_extra") or {}
    if not extra.get("measured"):
        return (f" and on nothing else (the cycle's orchestration beyond its passes is sglang's engine term, "
                f"{_r(extra.get('ms'), 2)} ms per cycle: {extra.get('source') or 'no source'})")
    whose = "the headline EAGLE-3 arm's own cycles" if extra.get("from_headline_arm") else \
        "not the headline EAGLE-3 arm"
    host = check.get("per_request_host")
    per_request = (f"; and the host work inside each pass per running request beyond the first, "
                   f"{_r(host['target_pass_ms'], 2)} ms per target pass ({_r(host['ms_per_layer'], 3)} ms per layer, "
                   f"in every pass of either model; {host['source']})" if host else "")
    return (f"; the cycle's work outside the model forwards beyond a plain step's (tree, KV bookkeeping, "
            f"harness kernels, host code), {_r(extra['ms'], 2)} ms per cycle, timed at batch size 1 ({extra['source']}; "
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
            f"one prefill {_r(t['baseline_prefill_ms'], 2)} ms plain ({sources.get('baseline', '?')}) and "
            f"{_r(t['eagle3_prefill_ms'], 2)} ms with EAGLE-3 ({sources.get('eagle3', '?')}), nothing from the "
            f"headline EAGLE-3 arm): plain decode rate MAPE {_r(t['baseline_mape_pct'])}% (passes only "
            f"{_r(check['baseline_mape_pct'])}%), EAGLE-3 speedup MAPE {_r(t['speedup_mape_pct'])}%"
            f"{_goal(t['speedup_mape_pct'], goal)} (passes only {_r(check['speedup_mape_pct'])}%); it holds while "
            f"each arriving request gets its own prefill batch and every request decodes the same length "
            f"**[modelled]** vs **[measured]**."]


def _cycle_gap_lines(check: Mapping[str, Any]) -> list[str]:
    """Where the speedup miss sits: one EAGLE-3 cycle's measured time against the modelled one, per concurrency."""
    rows = [r for r in check["rows"] if "unmodelled_cycle_ms" in r]
    if not rows:
        return []
    cells = "; ".join(f"at {r['concurrency']}: {_r(r['measured_cycle_ms'], 2)} ms measured vs "
                      f"{_r(r['predicted_cycle_ms'], 2)} ms modelled ({_r(r['unmodelled_cycle_ms'], 2)} ms not "
                      f"in the model)" for r in rows)
    lines = [f"One EAGLE-3 cycle (draft, verify, draft extend for every running request), from the measured rates "
             f"and acceptance: {cells} **[modelled]** vs **[measured]**."]
    for c in check.get("control_cycles") or []:
        lines.append(f"The control arm `{c['arm']}` (untrained drafter, acceptance {_r(c['accept_length'], 2)}) "
                     f"measures the cycle alone: {_r(c['cycle_ms'], 2)} ms per cycle at concurrency "
                     f"{c['concurrency']}, {_r(c['plain_steps_per_cycle'], 2)} plain steps of "
                     f"{_r(c['plain_step_ms'], 2)} ms **[measured]**.")
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
        f"at {r['concurrency']}: decode batches {_r(r['eagle3_split']['decode_ms'], 2)} ms (model "
        f"{_r(r['predicted_cycle_ms'], 2)}), prefills {_r(r['eagle3_split']['prefill_ms'], 2)} ms, the rest "
        f"{_r(r['eagle3_split']['other_ms'], 2)} ms; {_r(r['eagle3_split']['mean_batch_size'], 2)} requests per cycle"
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
                     f"measured {_r(worst['eagle3_split']['decode_ms'], 2)} ms per cycle against "
                     f"{_r(worst['predicted_cycle_ms'], 2)} ms modelled, prefills and the rest "
                     f"{_r(worst['between_cycles_ms'], 2)} ms per cycle. The decode-only rate (running "
                     f"requests over mean TPOT) pays them and the decode passes alone do not"
                     f"{' (the request turnover above counts the prefills)' if turnover_counted else ''}; they grow with "
                     f"concurrency x acceptance / output length (a request ends after fewer cycles than plain "
                     f"steps), so this holds for short outputs at high concurrency, as in this workload, and "
                     f"shrinks as outputs lengthen **[measured]**.")
    else:
        lines.append(f"So the largest miss ({at}) is in the cycles themselves: the decode batches measured "
                     f"{_r(worst['eagle3_split']['decode_ms'], 2)} ms per cycle against "
                     f"{_r(worst['predicted_cycle_ms'], 2)} ms modelled, prefills and the rest "
                     f"{_r(worst['between_cycles_ms'], 2)} ms per cycle **[measured]**.")
    return lines


def _eagle3_note(s03: Optional[PatchBenchSidecar]) -> Optional[str]:
    """Why the EAGLE-3 arm has no measured point, in the arm's own words (None if it has one or did not run)."""
    for row in (s03.arms if s03 else []):
        if row.get("arm") == "eagle3" and row.get("status") != "measured" and row.get("note"):
            return str(row["note"]).splitlines()[0]
    return None


def _model_context(model: ModelEvidence, figures: Sequence[str], eagle3_note: Optional[str] = None,
                   binder: Optional[provenance.Binder] = None) -> dict[str, Any]:
    """Section 6 from the model's evidence: predictions, why, where the verdict flips, out-of-sample errors. Its
    verdict sentences are bound (``binder``) to the evidence keys and rules they are computed from."""
    b = binder or provenance.Binder({"model": model.to_dict()})
    data = model.incident
    rtx = data["predicted"]["rtx_pro_6000_x8"]
    rows = data["sensitivity"]
    stated = next(r for r in rows if not r["changed"])
    uncapped = next((i for i, r in enumerate(rows) if r["changed"] == {"spec_max_running_requests": 0}), None)
    peak = data["side_by_side"]["peak_tok_s"]
    single = data["side_by_side"]["single_stream_tok_s"]
    key = "model.incident.predicted.rtx_pro_6000_x8"
    why = [
        _cycle_sentence(data["cycle_breakdown"], model.spec),
        _capacity_sentence(rtx, rows[uncapped] if uncapped is not None else None),
        b.sentence("model.why.single", f"At one request EAGLE-3 gains for any acceptance above "
                                       f"{b.num(f'{key}.break_even_single_stream', '.2f')} **[modelled]**."),
        b.sentence("model.why.peak", f"At peak EAGLE-3 {b.rule('peak_verdict', peak_verdict, key)}"
                   + (f"; without the request cap it "
                      f"{b.rule('peak_verdict', peak_verdict, f'model.incident.sensitivity.{uncapped}')}"
                      if uncapped is not None else "") + " **[modelled]**."),
    ]
    if data.get("break_even_update"):
        why.append(b.sentence("model.why.orchestration", b.rule("break_even_moved", engine_condition.break_even_moved,
                                                               "model.incident.break_even_update") + " **[modelled]**."))
    flip = b.sentence("model.flip", b.rule("flip", flip_sentence, "model.incident.sensitivity"))
    matching = (b.sentence("model.matching", b.rule("matching", matching_sentence,
                                                    "model.incident.context_matching_reported_peak",
                                                    "model.incident.context_len"))
                if data.get("context_matching_reported_peak") else None)
    return {
        "target": rtx["model"], "hardware": rtx["hardware"], "tp": rtx["tp"], "spec": model.spec,
        "context": _r(data["context_len"], 0), "context_source": data["context_source"],
        "single": _r(rtx["single_stream_tok_s"]), "floor": _r(single["bandwidth_and_allreduce_floor"]),
        "peak": _r(rtx["baseline_peak_tok_s"], 0), "peak_batch": rtx["baseline_peak_batch"],
        "peak_error": _r(abs(peak["error_pct"])), "peak_direction": "below" if peak["error_pct"] < 0 else "above",
        "accepts": _accepts(stated["accept_lengths"]),
        "spec_peak": _rates(stated["spec_peak_tok_s"], 0), "spec_single": _rates(stated["spec_single_stream_tok_s"], 1),
        "spec_max_batch": rtx["spec_max_batch"], "spec_peak_batch": rtx["spec_peak_batch"],
        "break_even_1": _r(rtx["break_even_single_stream"], 2), "break_even_max": _r(rtx["break_even_at_spec_max_batch"], 2),
        "break_even_peak": _r(rtx["break_even_at_peak"], 2), "max_accept": rtx["max_accept_length"],
        "why": why, "sensitivity": sensitivity_rows(rows), "flip": flip,
        "matching": matching,
        "protocol": validation_section.context(model.validation_protocol, model.validation_context, b),
        "published_acceptance": [{**row, "low": _r(row["min"], 2), "high": _r(row["max"], 2)}
                                 for row in model.published_acceptance],
        "run": _run_check_context(model.run_check, model.run_check_missing, eagle3_note,
                                  model.validation_protocol["target_mape_pct"]),
        "figures": list(figures),
    }


def _direction(records: Sequence[Mapping[str, Any]]) -> str:
    slower = [r for r in records if r["speedup"] < 1]
    if len(slower) == len(records):
        return "no: EAGLE-3 is slower than the baseline at every concurrency measured"
    if not slower:
        return "yes: EAGLE-3 is faster than the baseline at every concurrency measured"
    return "only at some concurrencies"


def _enough(value: bool) -> str:
    return "enough" if value else "not enough"


def _sensitivity_range(rows: Sequence[Mapping[str, Any]]) -> str:
    values = [r["break_even_at_peak"] for r in rows]
    return f"{min(values):.2f} to {max(values):.2f}"


def _without_tp_term(b: provenance.Binder, rows: Sequence[Mapping[str, Any]]) -> str:
    """The break-evens of the sensitivity row that drops the per-TP-rank term, said beside the condition."""
    i = next((i for i, r in enumerate(rows) if r["changed"] == {"spec_tp_extra_s": 0.0}), None)
    if i is None:
        return ""
    key = f"model.incident.sensitivity.{i}"
    return (f" (without it: {b.num(f'{key}.break_even_at_peak', '.2f')} at peak, "
            f"{b.num(f'{key}.break_even_single_stream', '.2f')} at one request)")


def _peak_error(error_pct: float) -> str:
    return f"{abs(error_pct):.1f}% {'below' if error_pct < 0 else 'above'}"


# the rules a bound sentence may name (``provenance.broken_sentences`` re-applies them to the evidence)
RULES = {"enough": _enough, "direction": _direction, "speedups": speedup_cells,
         "sensitivity_range": _sensitivity_range, "peak_error": _peak_error,
         "peak_verdict": peak_verdict, "flip": flip_sentence, "matching": matching_sentence,
         **validation_section.RULES, **engine_condition.RULES}


def _summary(crash: dict | None, trace: dict | None, fix: dict | None, model: dict[str, Any],
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
                     f"{b.rule('enough', _enough, 'trace.verdict.one_method_enough')} **[traced]**")
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
            f"{b.rule('direction', _direction, 'patch.speedup')}: output throughput "
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
        f"{b.rule('sensitivity_range', _sensitivity_range, 'model.incident.sensitivity')} across the sensitivity "
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
        f"{b.rule('peak_error', _peak_error, 'model.incident.side_by_side.peak_tok_s.error_pct')} the reported one "
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


# ------------------------------------------------------------------------------------------------ rendering
@dataclass
class ReportSources:
    """Everything REPORT.md is rendered from, and nothing else: the typed sidecars, the model's evidence, the
    incident's reported facts. Tests check every number of the rendered text against exactly these."""

    profile: str
    generated: str
    environment: dict[str, Any]
    crash: Optional[CrashReproSidecar]
    trace: Optional[InterfaceTraceSidecar]
    patch: Optional[PatchBenchSidecar]
    model: ModelEvidence
    incident: dict[str, Any]
    figures: list[str] = field(default_factory=list)

    def evidence(self) -> "provenance.Evidence":
        return provenance.Evidence.of(self.generated, self.environment, self.crash, self.trace, self.patch,
                                      self.model.to_dict(), self.incident, self.figures, self.in_display_units())

    def in_display_units(self) -> dict[str, float]:
        """The evidence's raw values the renderer converts before printing (bytes shown as GiB, the validation's
        frozen constants in ms), converted alike."""
        units = validation_section.in_display_units(self.model.validation_protocol)
        if self.crash is None:
            return units
        return {**units, "crash_peak_rss_gib": _gib(self.crash.crash.peak_rss_bytes),
                "control_peak_rss_gib": _gib(self.crash.control.peak_rss_bytes)}

    def tree(self) -> dict[str, Any]:
        """The evidence as one tree of plain values: what a bound sentence's keys name (``provenance.lookup``)."""
        plain = provenance._plain
        return {"generated": self.generated, "environment": self.environment,
                "crash": plain(self.crash) if self.crash else None, "trace": plain(self.trace) if self.trace else None,
                "patch": plain(self.patch) if self.patch else None, "model": self.model.to_dict(),
                "incident": self.incident, "figures": self.figures}

    @staticmethod
    def structural() -> set[str]:
        return provenance.structural_numbers(schema.NOTEBOOK for schema in SCHEMAS)


def gather_sources(profile: str = "cpu", figures: Sequence[Path] = (),
                   model: Optional[ModelEvidence] = None) -> ReportSources:
    """Read the sidecars that exist (missing notebooks are said to be missing) and compute the model's evidence
    (or take ``model``, e.g. the evidence file a report was rendered from: ``model_evidence.load``)."""

    s01 = read_if_present(CrashReproSidecar, profile)
    s02 = read_if_present(InterfaceTraceSidecar, profile)
    s03 = read_if_present(PatchBenchSidecar, profile)
    if model is None:
        model = model_evidence.gather(profile, s03.bench_report if s03 else None,
                                      s03.profile_values if s03 else None,
                                      s03.cycle_components.by_point if s03 and s03.cycle_components else None,
                                      s03.interleaved_sweep if s03 else ())
    return ReportSources(profile=profile, generated=model.computed_on,
                         environment=s01.environment if s01 else environment_table(), crash=s01, trace=s02,
                         patch=s03, model=model, incident=incident.facts(), figures=[Path(f).name for f in figures])


def render(sources: ReportSources) -> str:
    """REPORT.md's text from its sources."""
    return render_bound(sources)[0]


def render_bound(sources: ReportSources) -> tuple[str, provenance.Binder]:
    """REPORT.md's text and the binder that holds its bound sentences (each placeholder's evidence key, each
    verdict's rule), for ``provenance.broken_sentences``."""
    s01, s03 = sources.crash, sources.patch
    crash, control = _crash_context(s01)
    trace = _trace_context(sources.trace)
    fix, bench = _fix_context(s03)
    binder = provenance.Binder(sources.tree())
    model = _model_context(sources.model, sources.figures, _eagle3_note(s03), binder)
    incident = _incident_context(sources.incident)
    premise = premise_context(incident, trace, fix)
    public = {"rows": public_rows(incident["public"], model),
              "shift": shift_sentence(incident["public"], bench["mismatch"].model_dump()
                                      if bench and bench.get("mismatch") is not None else None),
              "launch": incident["public"].get("sglang_pr_19689"), "layer_claim": layer_claim(incident),
              "vllm": incident["public"].get("vllm_pr_35966")}
    env = sources.environment
    summary = _summary(crash, trace, fix, model, incident, sources.model, premise, binder, sources.profile)
    loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = loader.get_template(TEMPLATE).render(
        profile=sources.profile, generated=sources.generated,
        where=f"{sources.profile} profile, {env.get('machine')}, accelerators: {env.get('accelerators')}, "
              f"{s01.date if s01 else sources.generated}",
        incident=incident, crash=crash, control=control, trace=trace, fix=fix, bench=bench, model=model,
        diagnostics=s03.diagnostics if s03 else [], premise=premise, public=public,
        summary=summary)
    return text, binder


# ------------------------------------------------------------------------------------------------ evidence file
EVIDENCE_DIR = "reports-evidence"


def _scrub(value: Any, replacements: Sequence[tuple[str, str]]) -> Any:
    """Machine paths out of the committed evidence: the repository root becomes '.', the home directory '~'."""
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, replacements) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v, replacements) for v in value]
    return value


def evidence_path(report_md: Path, profile: str) -> Path:
    """``reports-evidence/<profile>.json`` beside REPORT.md: what that REPORT.md was rendered from."""
    return Path(report_md).parent / EVIDENCE_DIR / f"{profile}.json"


def write_report(sources: ReportSources, report_md: Path) -> tuple[Path, Path]:
    """Write REPORT.md and, beside it, the evidence it was rendered from: the sidecars, the model's evidence and
    the incident's facts as one tree, every bound sentence with its keys and rules, and REPORT.md's sha256.
    REPORT.md goes first (a full disk keeps the old one and writes nothing else); should the evidence then fail,
    its hash no longer matches and ``check_report`` says so."""
    text, binder = render_bound(sources)
    replacements = [(str(REPO_ROOT) + "/", ""), (str(REPO_ROOT), "."), (str(Path.home()), "~")]
    data = {"profile": sources.profile, "generated": sources.generated,
            "report_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "tree": _scrub(json.loads(json.dumps(sources.tree(), default=str)), replacements),
            "bound_sentences": [dataclasses.asdict(x) for x in binder.sentences]}
    written = write_text_atomic(report_md, text)
    return written, write_json_atomic(evidence_path(report_md, sources.profile), data)


def check_report(report_md: Path, evidence: Path) -> list[str]:
    """What a reader can check without rerunning anything: the committed REPORT.md against the committed evidence.
    Returns one line per problem (the report changed since rendering; a bound sentence its evidence contradicts)."""
    data = json.loads(Path(evidence).read_text(encoding="utf-8"))
    text = Path(report_md).read_text(encoding="utf-8")
    problems = []
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != data["report_sha256"]:
        problems.append(f"{Path(report_md).name} is not the text {Path(evidence).name} was rendered with")
    sentences = [provenance.BoundSentence(x["id"], x["text"], tuple(
        provenance.Binding(tuple(b["keys"]), b["how"], b["text"]) for b in x["bindings"]))
        for x in data["bound_sentences"]]
    problems += [f"sentence {sid} does not follow from its evidence"
                 for sid in provenance.broken_sentences(text, sentences, data["tree"], RULES)]
    return problems


def _run_profile(loaded: Profile) -> Profile:
    """The profile exactly as notebook 03 ran it (its sidecar's ``profile_values``), else the loaded one."""
    s03 = read_if_present(PatchBenchSidecar, loaded.name)
    if s03 is not None and s03.profile_values:
        try:
            return Profile.model_validate(s03.profile_values)
        except ValidationError:
            pass  # an older sidecar: the run check says so; the figures use the profile as loaded
    return loaded


def model_figures(profile: str, overrides: dict[str, Any] | None = None) -> list[Path]:
    """The cost model's figures, with this profile's measured points wherever its run produced them, and the
    validation figure.

    A gpu-profile run is the incident's deployment, so its points go on the incident's figures; a cpu-profile
    run is drawn against the model calibrated on this machine's own baseline (never on the incident's axes).
    """

    loaded = load_profile(profile, overrides=overrides)
    bench_path = repo_dir("artifacts") / f"03_bench.{loaded.name}" / "bench_report.json"
    bench = BenchReport.load(bench_path) if bench_path.is_file() else None
    on_cpu = loaded.device == "cpu"  # a GPU profile rehearsed on CPU too
    measured = measured_points_from_bench(bench) if bench is not None and not on_cpu else ()
    figures = dict(incident_figures(measured=measured))
    figures["validation"] = validation_figure()
    if bench is not None and on_cpu:
        figures.update({f"cpu_{kind}": path for kind, path in cpu_profile_figures(bench, _run_profile(loaded)).items()})
    return list(figures.values())
