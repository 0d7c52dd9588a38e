"""One command for the shareable result: run 01 -> 02 -> 03, export HTML, draw the model's figures, write REPORT.md.

REPORT.md is rendered from the notebooks' JSON sidecars and the cost model, never typed by hand, so each number
in it is the one a run produced, with its provenance: measured here, reported by the engineer, or modelled.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import jinja2

from eagle3lab.runtime.envinfo import environment_table
from eagle3lab.paths import REPO_ROOT, repo_dir
from eagle3lab.sidecar import sidecar_path

TEMPLATE = "REPORT.md.jinja"


@dataclass
class ReportOutputs:
    executed: list[Path] = field(default_factory=list)
    html: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    report_md: Path | None = None


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _r(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _crash_context(s01: dict[str, Any] | None) -> tuple[dict | None, dict | None]:
    if not s01:
        return None, None
    crash, control = s01["crash"], s01["control"]
    return ({"signature": crash["report"]["signature"], "call_site": crash["call_site"],
             "category": crash["category"], "seconds": crash["seconds_to_outcome"], "rss": crash["peak_rss_gib"],
             "sglang": s01["environment"].get("sglang")},
            {"seconds": control["seconds_to_ready"], "tokens": control["completion_tokens"],
             "generate": control["generate_seconds"]})


def _trace_context(s02: dict[str, Any] | None) -> dict | None:
    if not s02:
        return None
    verdict, bisect = s02["verdict"], s02.get("bisect") or {}
    report = verdict.get("class_report", {})
    newest = (s02.get("conformance") or {}).get("newest") or {}
    next_raise = (verdict.get("next_raise_after_one_method") or {}).get("cpu") or {}
    layers = []
    for table in s02.get("layer_ids", []):
        eager = (table.get("eager_forwards_capture") or {}).get("self.model.layers_to_capture")
        graphs = (table.get("cuda_graph_forwards_capture") or {}).get("self.model.layers_to_capture")
        layers.append({"profile": table["profile"], "depth": table["depth"], "aux": table["aux_layer_ids"],
                       "eager": eager, "graphs": graphs, "conflict": bool(table.get("conflict")),
                       "deployment": table.get("deployment"), "fetched": table.get("status") != "not fetched",
                       "fix": table.get("fix")})
    return {
        "version": verdict["sglang_version"], "sites": len(s02.get("contract", [])),
        "required": ", ".join(f"`{m}`" for m in verdict["required_members"]),
        "missing": ", ".join(f"`{m}`" for m in verdict["missing_members"]),
        "inner": report.get("inner_class", "inner model"),
        "first_raise": [{"profile": name, **row} for name, row in verdict["first_raise"].items()],
        "one_method_enough": verdict["one_method_enough"],
        "next_member": next_raise.get("member"), "next_where": next_raise.get("where"),
        "layers": layers,
        "audit_s": (s02.get("timings") or {}).get("audit_seconds_one_release"),
        "bisect_s": (s02.get("timings") or {}).get("bisect_seconds_warm_cache"),
        "releases": (s02.get("timings") or {}).get("bisect_releases"),
        "appeared": bisect.get("appeared"), "first_fixed": bisect.get("first_fixed"),
        "gained": ", ".join(f"`{m}` in {v}" for m, v in (bisect.get("member_gained") or {}).items()),
        "newest": newest.get("sglang_version"),
        "still_missing": [row for row in newest.get("rows", []) if row.get("missing")],
        "figures": [Path(f).name for f in s02.get("figures", [])],
    }


def _fix_context(s03: dict[str, Any] | None) -> tuple[dict | None, dict | None]:
    if not s03:
        return None, None
    from eagle3lab.bench.arms import capture_rows
    from eagle3lab.fix.capture_check import CaptureResult

    captures = {None if key == "None" else key: CaptureResult.from_dict(value)
                for key, value in (s03.get("capture") or {}).items()}
    fix = {"patch": s03["parameters"].get("patch"), "members": ", ".join(f"`{m}`" for m in s03["delegated_members"]),
           "chain": s03["chain"], "story": s03["story"], "capture": capture_rows(captures) if captures else []}
    profile = s03["profile_values"]
    bench = None
    if s03.get("arms"):
        bench = {"rows": s03["arms"], "cross": s03.get("cross_check"),
                 "prompt_kind": s03["parameters"].get("prompt_kind"), "input_len": profile["bench_input_len"],
                 "output_len": profile["bench_output_len"], "concurrency": profile["bench_concurrency"],
                 "figures": [Path(p).name for p in (s03.get("figures") or {}).values()]}
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
    s01 = _load(sidecar_path("01_crash_repro", profile))
    s02 = _load(repo_dir("artifacts") / "02_interface_trace.json")
    s03 = _load(sidecar_path("03_patch_and_bench", profile))
    s03_diag = (s03 or {}).get("diagnostics") or []
    crash, control = _crash_context(s01)
    trace = _trace_context(s02)
    fix, bench = _fix_context(s03)
    model = _model_context(model_figures)
    env = (s01 or {}).get("environment") or environment_table()
    from eagle3lab.report.incident import PEAK, SINGLE_STREAM

    env_loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                    undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env_loader.get_template(TEMPLATE).render(
        profile=profile, generated=dt.date.today().isoformat(),
        where=f"{profile} profile, {env.get('machine')}, accelerators: {env.get('accelerators')}, "
              f"{(s01 or {}).get('written_at', dt.date.today().isoformat())[:10]}",
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

    bench_path = repo_dir("artifacts") / f"03_bench.{profile}" / "bench_report.json"
    bench = BenchReport.load(bench_path) if bench_path.is_file() else None
    on_cpu = load_profile(profile, overrides=overrides).device == "cpu"  # a GPU profile rehearsed on CPU too
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
    """Run the notebooks (unless ``run=False``), export HTML, draw the model's figures, write REPORT.md."""
    from eagle3lab.runbook import available_notebooks, executed_path, profile_overrides, run_all

    out = ReportOutputs()
    names = list(notebooks or available_notebooks())
    out.executed = run_all(profile, names, parameters) if run else \
        [executed_path(n, profile) for n in names if executed_path(n, profile).is_file()]
    from eagle3lab.report.html import export_html  # nbconvert costs seconds: after the preflight has passed
    for path in out.executed:
        out.html.append(export_html(path))
        if hide_code:
            out.html.append(export_html(path, hide_code=True))
    out.figures = model_figures(profile, profile_overrides(parameters))
    out.report_md = report_path()
    out.report_md.write_text(render_report(profile, out.figures), encoding="utf-8")
    return out
