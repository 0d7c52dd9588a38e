"""One command for the shareable result: run 01 -> 02 -> 03, export HTML, draw the model's figures, write REPORT.md.

REPORT.md is rendered from the notebooks' JSON sidecars and the cost model, never typed by hand, so each number
in it is the one a run produced, with its provenance: measured here, reported by the engineer, or modelled.
Every input is checked (``report.inputs``) before the first output is written, and every output is written
atomically, so a failed or refused build never replaces a good REPORT.md, HTML page or figure.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import jinja2

from eagle3lab.atomic import write_text_atomic
from eagle3lab.runtime.envinfo import environment_table
from eagle3lab.paths import REPO_ROOT, repo_dir
from eagle3lab.sidecars import CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar, read_if_present

TEMPLATE = "REPORT.md.jinja"


@dataclass
class ReportOutputs:
    executed: list[Path] = field(default_factory=list)
    html: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    report_md: Path | None = None


def _r(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _crash_context(s01: CrashReproSidecar | None) -> tuple[dict | None, dict | None]:
    if s01 is None:
        return None, None
    crash, control = s01.crash, s01.control
    return ({"signature": crash.signature, "call_site": crash.call_site, "category": crash.category,
             "seconds": crash.seconds_to_outcome, "rss": crash.peak_rss_gib,
             "sglang": s01.environment.get("sglang")},
            {"seconds": control.seconds_to_ready, "tokens": control.completion_tokens,
             "generate": control.generate_seconds})


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
    }


def _audit_contexts(s02: InterfaceTraceSidecar) -> list[dict[str, Any]]:
    """The conformance audit of the traced and the newest release: counts, lacking wrappers, unresolved ones."""
    from eagle3lab.trace import audit

    out, seen = [], set()
    for key in ("traced", "newest"):
        conf = s02.conformance.get(key)
        if conf is None or conf.sglang_version in seen or not conf.counts:
            continue
        seen.add(conf.sglang_version)
        counts = conf.counts
        rows = [{"group": kind, "count": counts.get(kind, 0)} for kind in audit.KINDS]
        rows += [{"group": f"wrappers {v}", "count": counts.get(f"wrappers {v}", 0)} for v in audit.VERDICTS]
        out.append({"version": conf.sglang_version, "provenance": conf.provenance, "total": counts.get("entry_classes"),
                    "rows": rows, "members": ", ".join(f"`{m}`" for m in conf.members),
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
                 "series": r.series.get("detail", ""), "refused": r.refused,
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
    from eagle3lab.fix.capture_check import CaptureResult

    def capture(result: CaptureResult) -> dict[str, Any]:
        shapes = {f.phase: f"{f.shape} (expected {f.expected_shape})" for f in result.forwards}
        return {"patch": result.patch or "none", "outcome": result.outcome, "layers": result.layers_to_capture,
                "prefill": shapes.get("prefill"), "decode": shapes.get("decode")}

    from eagle3lab.fix import patching

    info = patching.check(patching.resolve_patch(s03.patch)).info
    fix = {"patch": s03.patch, "members": ", ".join(f"`{m}`" for m in s03.delegated_members),
           "fixed_upstream": info.fixed_upstream if info else "",
           "chain": s03.chain, "story": s03.story,
           "capture": [capture(CaptureResult.from_dict(value)) for value in s03.capture.values()]}
    profile = s03.profile_values
    bench = None
    if s03.arms:
        bench = {"rows": s03.arms, "cross": s03.cross_check,
                 "prompt_kind": s03.parameters.get("prompt_kind"), "input_len": profile["bench_input_len"],
                 "output_len": profile["bench_output_len"], "concurrency": profile["bench_concurrency"],
                 "figures": [Path(p).name for p in s03.figures.values()],
                 "spec_arms": s03.spec_arms, "lossless": s03.lossless, "mismatch": s03.layer_mismatch,
                 "speedup": s03.speedup, "sampling": s03.sampling}
    return fix, bench


def _model_context(figures: Sequence[Path]) -> dict[str, Any]:
    from eagle3lab.report.presets import incident_report

    data = incident_report()
    rtx = data["predicted"]["rtx_pro_6000_x8"]
    by_accept = dict(zip(rtx["accept_lengths"], rtx["spec_peak_tok_s"]))
    single = dict(zip(rtx["accept_lengths"], rtx["spec_single_stream_tok_s"]))
    reasons = [
        f"Speculative decoding caps sglang at {rtx['spec_max_batch']} running requests, while the baseline "
        f"reaches {rtx['baseline_peak_batch']} before the KV cache fills **[modelled]**; at peak, EAGLE-3 only "
        f"matches the baseline with perfect acceptance (4 of 4 draft tokens).",
        "A verify pass of 4 tokens per request touches many more distinct experts per MoE layer than one token "
        "does, so on PCIe-only GPUs it costs close to several plain steps at high concurrency **[modelled]**.",
        f"At one request EAGLE-3 should pay: {_r(single.get(3.0))} tok/s at acceptance 3 vs "
        f"{rtx['single_stream_tok_s']} baseline **[modelled]**. 'No gain' was a peak-throughput observation.",
    ]
    return {
        "context": data["context_len"], "context_source": data["context_source"],
        "single": _r(rtx["single_stream_tok_s"]), "floor": _r(rtx["floor_single_stream_tok_s"]),
        "peak": _r(rtx["baseline_peak_tok_s"], 0), "peak_batch": rtx["baseline_peak_batch"],
        "spec_peak": " / ".join(_r(by_accept.get(a), 0) for a in (2.0, 3.0, 4.0)),
        "spec_single": _r(single.get(3.0)), "spec_max_batch": rtx["spec_max_batch"],
        "break_even_1": _r(rtx["break_even_single_stream"], 2), "break_even_max": _r(rtx["break_even_at_spec_max_batch"], 2),
        "reasons": reasons, "figures": [Path(f).name for f in figures],
    }


def _summary(crash: dict | None, trace: dict | None, fix: dict | None, bench: dict | None,
             model: dict[str, Any]) -> list[str]:
    lines = []
    if crash:
        lines.append(f"Reproduced on real sglang: `{crash['signature']}` in {crash['seconds']} s **[measured]**.")
    if trace:
        lines.append(f"The runtime needs {trace['missing']} from the wrapper; the one-method fix is "
                     f"{'enough' if trace['one_method_enough'] else 'not enough'}. Fixed upstream in "
                     f"sglang {trace['first_fixed']}.")
    if fix and fix["story"]:
        lines.append(fix["story"][-1][0].upper() + fix["story"][-1][1:] + " **[measured]**.")
    lines.append(f"No EAGLE-3 gain at peak is what the cost model predicts for 8x RTX PRO 6000 over PCIe: "
                 f"break-even acceptance {model['break_even_max']} at {model['spec_max_batch']} requests, and "
                 f"speculative decoding caps the batch at {model['spec_max_batch']} requests where the baseline "
                 f"reaches {model['peak_batch']} **[modelled]**.")
    return lines


def render_report(profile: str = "cpu", model_figures: Sequence[Path] = ()) -> str:
    """REPORT.md's text from the sidecars that exist (missing notebooks are said to be missing)."""
    s01 = read_if_present(CrashReproSidecar, profile)
    s02 = read_if_present(InterfaceTraceSidecar, profile)
    s03 = read_if_present(PatchBenchSidecar, profile)
    s03_diag = s03.diagnostics if s03 else []
    crash, control = _crash_context(s01)
    trace = _trace_context(s02)
    fix, bench = _fix_context(s03)
    model = _model_context(model_figures)
    env = s01.environment if s01 else environment_table()
    from eagle3lab.report.incident import PEAK, SINGLE_STREAM

    env_loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                    undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env_loader.get_template(TEMPLATE).render(
        profile=profile, generated=dt.date.today().isoformat(),
        where=f"{profile} profile, {env.get('machine')}, accelerators: {env.get('accelerators')}, "
              f"{s01.date if s01 else dt.date.today().isoformat()}",
        reported={"single": SINGLE_STREAM.value, "peak": f"{PEAK.value:,.0f}"},
        crash=crash, control=control, trace=trace, fix=fix, bench=bench, model=model,
        diagnostics=s03_diag, summary=_summary(crash, trace, fix, bench, model))


def model_figures(profile: str, overrides: dict[str, Any] | None = None) -> list[Path]:
    """The cost model's figures, with this profile's measured points wherever its run produced them.

    A gpu-profile run is the incident's deployment, so its points go on the incident's figures; a cpu-profile
    run is drawn against the model calibrated on this machine's own baseline (never on the incident's axes).
    """
    from eagle3lab.bench.sweep import BenchReport
    from eagle3lab.report.plots.model import cpu_profile_figures, incident_figures, measured_points_from_bench
    from eagle3lab.runtime.profiles import load_profile

    loaded = load_profile(profile, overrides=overrides)
    bench_path = repo_dir("artifacts") / f"03_bench.{loaded.name}" / "bench_report.json"
    bench = BenchReport.load(bench_path) if bench_path.is_file() else None
    on_cpu = loaded.device == "cpu"  # a GPU profile rehearsed on CPU too
    measured = measured_points_from_bench(bench) if bench is not None and not on_cpu else ()
    figures = dict(incident_figures(measured=measured))
    if bench is not None and on_cpu:
        figures.update({f"cpu_{kind}": path for kind, path in cpu_profile_figures(bench).items()})
    return list(figures.values())


def report_path() -> Path:
    """``REPORT.md`` at the top of the repository (``EAGLE3LAB_REPORT_MD`` moves it, for tests)."""
    return Path(os.environ.get("EAGLE3LAB_REPORT_MD", REPO_ROOT / "REPORT.md"))


def build_report(profile: str = "cpu", run: bool = True, hide_code: bool = False,
                 notebooks: Sequence[str] | None = None, parameters: dict[str, Any] | None = None) -> ReportOutputs:
    """Run the notebooks (unless ``run=False``), export HTML, draw the model's figures, write REPORT.md.

    ``profile`` is a name or a YAML path; outputs are labelled with the profile's own name. With ``run=False``
    nothing is written unless every executed notebook and sidecar is there, readable and from the same run.
    """
    from eagle3lab.report.inputs import check_inputs, check_sidecar, sidecars_of
    from eagle3lab.runbook import (available_notebooks, executed_path, notebook_path, profile_name, profile_overrides,
                                   run_all)

    out = ReportOutputs()
    label = profile_name(profile)
    names = [notebook_path(n).stem for n in (notebooks or available_notebooks())]
    executed = run_all(profile, names, parameters) if run else [executed_path(n, label) for n in names]
    check_inputs(label, names, executed)
    for other in set(available_notebooks()) - set(names):  # the report reads their sidecars too
        for path in sidecars_of(other, label):
            if path.exists():
                check_sidecar(other, label, path, f"rerun it: python -m eagle3lab report --profile {profile}")
    out.executed = executed
    from eagle3lab.report.html import export_html  # nbconvert takes seconds to import: only once inputs are good

    for path in out.executed:
        out.html.append(export_html(path))
        if hide_code:
            out.html.append(export_html(path, hide_code=True))
    out.figures = model_figures(profile, profile_overrides(parameters))
    out.report_md = report_path()
    write_text_atomic(out.report_md, render_report(label, out.figures))
    return out
