"""The Jinja contexts of REPORT.md's sections, one function per section, built from the typed sidecars, the
model's evidence and the incident's facts (no I/O: ``build.render_bound`` passes them to the template).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence
from eagle3lab.report import engine_condition, provenance, validation_section
from eagle3lab.report.model_evidence import ModelEvidence
from eagle3lab.package.patching import patch_info
from eagle3lab.sidecars import (ContractSite, CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                VariantCost)
from eagle3lab.trace import audit
from eagle3lab.trace.startup import StartupProfile
from eagle3lab.fix.capture_result import CaptureResult
from eagle3lab.report.sentences import (accepts_text, capacity_sentence, cycle_sentence, gib, fixed, rates_text,
                                        flip_sentence, matched_peak_sentence, peak_verdict, sensitivity_rows,
                                        speedup_cells)
from eagle3lab.report.plots.model import run_figure_files
from eagle3lab.report.run_check_text import run_check_context


def crash_context(s01: CrashReproSidecar | None) -> tuple[dict | None, dict | None]:
    if s01 is None:
        return None, None
    crash, control = s01.crash, s01.control
    # PSS counts every page once across the server's processes; summed RSS counts shared pages once per process
    pss = crash.peak_pss_bytes
    return ({"signature": crash.signature, "call_site": crash.call_site, "category": crash.category,
             "seconds": crash.seconds_to_outcome, "rss": f"{gib(crash.peak_rss_bytes):.2f}",
             "pss": f"{gib(pss):.2f}" if pss else None, "sglang": s01.environment.get("sglang"),
             "argv": crash.argv},
            {"seconds": control.seconds_to_ready, "tokens": control.completion_tokens,
             "generate": round(control.generate_seconds, 3)})


# the trace's start-up profiles by name (``trace.audit.verdict``'s defaults): which launch each first-raise row is
STARTUP = {p.name: p for p in (StartupProfile.cpu(), StartupProfile.gpu())}
ACCESS_KINDS = (("call", "calls"), ("read", "attribute reads"), ("check", "hasattr checks"), ("write", "writes"))


def _site_counts(contract: Sequence[ContractSite]) -> list[dict[str, Any]]:
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
    launch = STARTUP.get(profile)
    if not parts and launch is not None:  # what decides a certain row: whether the launch records CUDA graphs
        parts.append("on every start-up launched with `--disable-cuda-graph`" if not launch.cuda_graphs
                     else "on every start-up with CUDA graphs on")
    return {"profile": profile, **data, "certain": bool(data.get("certain", True)), "condition": "; ".join(parts)}


def trace_context(s02: InterfaceTraceSidecar | None) -> dict | None:
    if s02 is None:
        return None
    verdict, bisect, timings = s02.verdict, s02.bisect, s02.timings
    class_report = verdict.class_report
    inner = class_report.get("inner_class", "inner model") if class_report is not None else "inner model"
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
        "releases": timings.bisect_releases, "from_record": len(getattr(bisect, "from_record", None) or []),
        "traced_now": len(getattr(bisect, "traced_now", None) or []),
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
    marks = data.get("milestones") or {}
    ids = data.get("drafter_ids") or []
    # sglang PR #25454's convention: a first id other than 1 is captured as given, which needs the order fix and
    # the PR's rule (marks["both"]); ids starting at 1 need the order fix alone
    as_given = bool(ids) and ids[0] != 1 and bool(marks.get("both"))
    return {"ids": data.get("drafter_ids"), "depth": depth, "ids_source": data.get("ids_source"), "rows": rows,
            "first_fixed": data.get("first_fixed"), "fix_pr": data.get("fix_pr"),
            "as_given": as_given, "both": marks.get("both"), "convention_pr": marks.get("convention_pr"),
            "right_key": "milestones.both" if as_given else "first_fixed",
            "right_release": marks.get("both") if as_given else data.get("first_fixed"),
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
    verification = record.verification
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


def fix_context(s03: PatchBenchSidecar | None) -> tuple[dict | None, dict | None]:
    if s03 is None:
        return None, None

    def capture(result: CaptureResult) -> dict[str, Any]:
        shapes = {f.phase: f"{f.shape} (expected {f.expected_shape})" for f in result.forwards}
        return {"patch": result.patch or "none", "outcome": result.outcome,
                "layers": "--" if result.layers_to_capture is None else result.layers_to_capture,
                "prefill": shapes.get("prefill", "--"), "decode": shapes.get("decode", "--")}

    fix = {"patch": s03.patch, "members": ", ".join(f"`{m}`" for m in s03.delegated_members),
           "fixed_upstream": patch_info(s03.patch).fixed_upstream,
           "chain": s03.chain, "story": s03.story,
           "capture": [capture(CaptureResult.from_dict(value.model_dump())) for value in s03.capture.values()]}
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
    speedups = {r.concurrency: r.speedup for r in s03.speedup}
    headline = _headline_arms(s03)
    rows = []
    for row in s03.arms:
        value = speedups.get(row.concurrency) if row.concurrency is not None and row.arm in headline else None
        rows.append({**row.model_dump(), "speedup": f"{value:.2f}x" if value is not None else "--"})
    return rows


# ------------------------------------------------------------------------------------------------ the incident
def incident_context(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Section 1: the incident as the engineer reported it (every number a reported figure)."""
    reported = facts["reported"]
    return {**facts, "checkpoint_gb": fixed(reported["checkpoint_gb"]["value"], 0),
            "gpus": fixed(reported["gpus"]["value"], 0), "single": fixed(reported["single_stream_tok_s"]["value"]),
            "peak": fixed(reported["peak_tok_s"]["value"], 0),
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


def eagle3_missing_note(s03: Optional[PatchBenchSidecar]) -> Optional[str]:
    """Why the EAGLE-3 arm has no measured point, in the arm's own words (None if it has one or did not run)."""
    for row in (s03.arms if s03 else []):
        if row.get("arm") == "eagle3" and row.get("status") != "measured" and row.get("note"):
            return str(row["note"]).splitlines()[0]
    return None


def model_context(model: ModelEvidence, figures: Sequence[str], eagle3_note: Optional[str] = None,
                   binder: Optional[provenance.Binder] = None, profile: str = "cpu") -> dict[str, Any]:
    """Section 6 from the model's evidence: predictions, why, where the verdict flips, out-of-sample errors. Its
    verdict sentences are bound (``binder``) to the evidence keys and rules they are computed from. ``profile``'s
    own run figures (``run_figures``) are told from the incident's by name."""
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
        cycle_sentence(data["cycle_breakdown"], model.spec),
        capacity_sentence(rtx, rows[uncapped] if uncapped is not None else None),
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
    matching = (b.sentence("model.matching", b.rule("matching", matched_peak_sentence,
                                                    "model.incident.context_matching_reported_peak",
                                                    "model.incident.context_len"))
                if data.get("context_matching_reported_peak") else None)
    return {
        "target": rtx["model"], "hardware": rtx["hardware"], "tp": rtx["tp"], "spec": model.spec,
        "context": fixed(data["context_len"], 0), "context_source": data["context_source"],
        "single": fixed(rtx["single_stream_tok_s"]), "floor": fixed(single["bandwidth_and_allreduce_floor"]),
        "peak": fixed(rtx["baseline_peak_tok_s"], 0), "peak_batch": rtx["baseline_peak_batch"],
        "peak_error": fixed(abs(peak["error_pct"])), "peak_direction": "below" if peak["error_pct"] < 0 else "above",
        "accepts": accepts_text(stated["accept_lengths"]),
        "spec_peak": rates_text(stated["spec_peak_tok_s"], 0), "spec_single": rates_text(stated["spec_single_stream_tok_s"], 1),
        "spec_max_batch": rtx["spec_max_batch"], "spec_peak_batch": rtx["spec_peak_batch"],
        "break_even_1": fixed(rtx["break_even_single_stream"], 2), "break_even_max": fixed(rtx["break_even_at_spec_max_batch"], 2),
        "break_even_peak": fixed(rtx["break_even_at_peak"], 2), "max_accept": rtx["max_accept_length"],
        "why": why, "sensitivity": sensitivity_rows(rows), "flip": flip,
        "matching": matching,
        "protocol": validation_section.context(model.validation_protocol, model.validation_context, b),
        "published_acceptance": [{**row, "low": fixed(row["min"], 2), "high": fixed(row["max"], 2)}
                                 for row in model.published_acceptance],
        "run": run_check_context(model.run_check, model.run_check_missing, eagle3_note,
                                  model.validation_protocol["target_mape_pct"]),
        "figures": list(figures),
        "run_figures": [f for f in figures if f in run_figure_files(profile)],
    }
