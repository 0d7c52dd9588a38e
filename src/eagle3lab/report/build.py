"""REPORT.md and its appendices (``docs/report/*.md``) rendered from ``ReportSources``.

REPORT.md is rendered from ``ReportSources`` -- the notebooks' typed sidecars, the cost model's evidence
(``model_evidence``) and the incident's reported facts -- never typed by hand: each number in it is one a run or the
model produced, with its provenance (measured here, reported, modelled, traced), and each conclusion is said with the
condition under which it holds. ``provenance`` checks the rendered text against exactly these sources.
Every input is checked (``report.inputs``) before the first output is written, and every output is written
atomically, so a failed or refused build never replaces a good REPORT.md, HTML page or figure.
REPORT.md answers one question per section in at most ``MAX_WORDS`` words; the long tables (the public evidence, the
benchmark in full, the diagnostics per rule, the cost model and its validation, the audit of every wrapper) are the
appendices ``APPENDICES``, rendered by the same call from the same evidence with the same binder, so the same checks
cover them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence
import jinja2
from eagle3lab.bench import layer_cells
from eagle3lab.report import layer_section, model_evidence, provenance, run_speed, validation_section, vllm_section
from eagle3lab.report.model_evidence import ModelEvidence
from eagle3lab.runtime.envinfo import environment_table, git_revision
from eagle3lab.sidecars import (SCHEMAS, CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                VllmSameClassSidecar, read_if_present)
from eagle3lab.report import incident
from eagle3lab.report.evidence_table import render_parts as evidence_parts
from eagle3lab.report.sentences import gib, layer_claim, public_rows, shift_sentence
from eagle3lab.report.contexts import (crash_context, eagle3_missing_note, fix_context, incident_context,
                                       model_context, trace_context, premise_context)
from eagle3lab.report.run_check_text import run_check_brief, run_check_summary
from eagle3lab.report.sentences import peak_error_text
from eagle3lab.report.summary import every_fix_release, summary_lines


TEMPLATE = "REPORT.md.jinja"
REPORT_MD = "REPORT.md"
MAX_WORDS = 3000  # REPORT.md, appendices not counted
APPENDIX_DIR = "docs/report"


@dataclass(frozen=True)
class Appendix:
    """One appendix: its file under ``APPENDIX_DIR`` (and template under ``templates/appendix/``), its title."""

    name: str
    title: str

    @property
    def path(self) -> str:
        return f"{APPENDIX_DIR}/{self.name}.md"

    @property
    def template(self) -> str:
        return f"appendix/{self.name}.md.jinja"


APPENDICES = (
    Appendix("public-evidence", "Public measurements on the incident's hardware and drafter"),
    Appendix("benchmark", "This run's benchmark in full"),
    Appendix("diagnostics", "The diagnostics on this run, rule by rule"),
    Appendix("cost-model", "The cost model on the incident's deployment, in full"),
    Appendix("validation", "How the cost model was validated, and how it fares against this run"),
    Appendix("audit", "The audit of every registered wrapper, and the generated fixes"),
    Appendix("vllm", "The same class on vLLM"),
    Appendix("layer-experiment", "Layer-id conventions served on the CPU miniature"),
)


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
    rendered_by: str = ""  # the checkout's git revision when the report was rendered (the run's is in environment)
    vllm: Optional[VllmSameClassSidecar] = None
    layer_experiment: Optional[dict[str, Any]] = None  # bench.layer_cells' shipped record (measured once, not by a notebook)

    def evidence(self) -> "provenance.Evidence":
        return provenance.Evidence.of(self.generated, self.environment, self.crash, self.trace, self.patch,
                                      self.model.to_dict(), self.incident, self.figures, self.in_display_units(),
                                      self.derived(), self.rendered_by, self.vllm, self.layer_experiment)

    def derived(self) -> dict[str, Any]:
        """What the report computes from the sidecars before printing it (the launches on their common prompts)."""
        return {"run_speed": run_speed.derived(self.patch)}

    def in_display_units(self) -> dict[str, float]:
        """The evidence's raw values the renderer converts before printing (bytes shown as GiB, the validation's
        frozen constants in ms), converted alike."""
        units = validation_section.in_display_units(self.model.validation_protocol)
        if self.crash is None:
            return units
        pss = self.crash.crash.peak_pss_bytes  # PSS is printed for the crash launch only
        return {**units, "crash_peak_rss_gib": gib(self.crash.crash.peak_rss_bytes),
                "control_peak_rss_gib": gib(self.crash.control.peak_rss_bytes),
                **({"crash_peak_pss_gib": gib(pss)} if pss else {})}

    def tree(self) -> dict[str, Any]:
        """The evidence as one tree of plain values: what a bound sentence's keys name (``provenance.lookup``)."""
        plain = provenance._plain
        return {"generated": self.generated, "rendered_by": self.rendered_by, "environment": self.environment,
                "crash": plain(self.crash) if self.crash else None, "trace": plain(self.trace) if self.trace else None,
                "patch": plain(self.patch) if self.patch else None, "model": self.model.to_dict(),
                "incident": self.incident, "figures": self.figures, "derived": self.derived(),
                "vllm": plain(self.vllm) if self.vllm else None, "layer_experiment": self.layer_experiment}

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
                         patch=s03, model=model, incident=incident.facts(), figures=[Path(f).name for f in figures],
                         rendered_by=git_revision() or "unknown", vllm=read_if_present(VllmSameClassSidecar, profile),
                         layer_experiment=layer_cells.load_record(profile))


def render(sources: ReportSources) -> str:
    """REPORT.md's text from its sources."""
    return render_documents(sources)[0][REPORT_MD]


def render_bound(sources: ReportSources) -> tuple[str, provenance.Binder]:
    """REPORT.md's text and the binder that holds the bound sentences of every document (each placeholder's
    evidence key, each verdict's rule), for ``provenance.broken_sentences``."""
    documents, binder = render_documents(sources)
    return documents[REPORT_MD], binder


def joined(documents: dict[str, str]) -> str:
    """Every document's text, one after the other: what the bound sentences are checked against."""
    return "\n".join(documents.values())


def render_documents(sources: ReportSources) -> tuple[dict[str, str], provenance.Binder]:
    """REPORT.md and each appendix (path relative to REPORT.md's folder -> text), rendered from one context with
    one binder."""
    s01, s03 = sources.crash, sources.patch
    crash, control = crash_context(s01)
    trace = trace_context(sources.trace)
    fix, bench = fix_context(s03)
    binder = provenance.Binder(sources.tree())
    table, implications = (evidence_parts(binder, sources.incident["evidence"]) if "evidence" in sources.incident
                           else ("", []))
    evidence = {"table": table, "sentences": implications}
    model = model_context(sources.model, sources.figures, eagle3_missing_note(s03), binder, sources.profile)
    model.update(_model_main(binder, sources.model, model))
    incident = incident_context(sources.incident)
    premise = premise_context(incident, trace, fix)
    public = {"rows": public_rows(incident["public"], model),
              "shift": shift_sentence(incident["public"], bench["mismatch"].model_dump()
                                      if bench and bench.get("mismatch") is not None else None),
              "launch": incident["public"].get("sglang_pr_19689"), "layer_claim": layer_claim(incident),
              "vllm": incident["public"].get("vllm_pr_35966")}
    env = sources.environment
    summary = summary_lines(crash, trace, fix, incident, premise, binder, s03, sources.profile,
                            has_matching=bool(sources.model.incident.get("context_matching_reported_peak")))
    speed = run_speed.context(binder, s03, sources.derived()["run_speed"])
    order = (trace or {}).get("capture_order") or {}
    release = every_fix_release((trace or {}).get("first_fixed"), order.get("right_release")) if trace else None
    loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    context = dict(
        profile=sources.profile, generated=sources.generated, rendered_by=sources.rendered_by,
        run_commit=env.get("git revision", "unknown"),
        where=f"{sources.profile} profile, {env.get('machine')}, accelerators: {env.get('accelerators')}"
              f"{threads_clause(s03)}, {s01.date if s01 else sources.generated}",
        incident=incident, crash=crash, control=control, trace=trace, fix=fix, bench=bench, model=model,
        diagnostics=s03.diagnostics if s03 else [], premise=premise, public=public,
        summary=summary, evidence=evidence, speed=speed, appendices=APPENDICES,
        vllm=vllm_section.context(sources.vllm), layers=layer_section.context(sources.layer_experiment),
        overlap=run_speed.overlap_sentence(binder, s03, s03.diagnostics if s03 else []),
        summary_release=release if release and release != "unknown" else None)
    documents = {REPORT_MD: loader.get_template(TEMPLATE).render(**context)}
    for appendix in APPENDICES:
        documents[appendix.path] = loader.get_template(appendix.template).render(**context, appendix=appendix)
    return documents, binder


MAIN_FIGURE = "report_speedup_"  # REPORT.md shows the incident's modelled speedup; the appendices the rest


def threads_clause(s03: Optional[PatchBenchSidecar]) -> str:
    """", N OpenMP thread(s) per server process" when notebook 03's run set ``server_omp_threads`` (a condition of
    every CPU number: torch's default pool, one thread per core, measures differently); empty otherwise."""
    threads = (s03.profile_values or {}).get("server_omp_threads") if s03 else None
    return "" if not threads else f", {threads} OpenMP thread{'' if threads == 1 else 's'} per server process"


def _model_main(b: provenance.Binder, evidence: ModelEvidence, model: dict[str, Any]) -> dict[str, Any]:
    """What REPORT.md's own sections take from the model beyond its section context: the trust paragraph, the run
    check in one paragraph, the figure it shows, and the break-even at peak without sglang's request cap."""
    trust = b.sentence("model.trust", (
        f"The model's baseline peak is "
        f"{b.rule('peak_error', peak_error_text, 'model.incident.side_by_side.peak_tok_s.error_pct')} the reported one "
        f"at the assumed context; {validation_section.trust_clause(b, evidence.validation_protocol)} **[modelled]** "
        f"vs **[reported]**."))
    brief = run_check_brief(b, evidence.run_check or {}) if model["run"].get("has_speedup") else None
    run = b.sentence("model.run_check_summary", brief) if brief else None
    full = (b.sentence("model.run_check", run_check_summary(b, evidence.run_check or {}))
            if model["run"].get("has_speedup") else None)
    rows = evidence.incident["sensitivity"]
    capped = evidence.incident["predicted"]["rtx_pro_6000_x8"]["break_even_at_peak"]
    uncapped = next((r for r in rows if r["changed"] == {"spec_max_running_requests": 0}), None)
    return {"trust": trust, "run_check_summary": run, "run_check_full": full,
            "main_figures": [f for f in model["figures"] if f.startswith(MAIN_FIGURE)],
            "uncapped_peak": (f"{uncapped['break_even_at_peak']:.2f}"
                              if uncapped and uncapped["break_even_at_peak"] < capped else None)}
