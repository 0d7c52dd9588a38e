"""REPORT.md rendered from ``ReportSources``.

REPORT.md is rendered from ``ReportSources`` -- the notebooks' typed sidecars, the cost model's evidence
(``model_evidence``) and the incident's reported facts -- never typed by hand: each number in it is one a run or the
model produced, with its provenance (measured here, reported, modelled, traced), and each conclusion is said with the
condition under which it holds. ``provenance`` checks the rendered text against exactly these sources.
Every input is checked (``report.inputs``) before the first output is written, and every output is written
atomically, so a failed or refused build never replaces a good REPORT.md, HTML page or figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence
import jinja2
from eagle3lab.report import model_evidence, provenance, validation_section, vllm_section
from eagle3lab.report.model_evidence import ModelEvidence
from eagle3lab.runtime.envinfo import environment_table
from eagle3lab.sidecars import (SCHEMAS, CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                VllmSameClassSidecar, read_if_present)
from eagle3lab.report import incident
from eagle3lab.report.evidence_table import render as evidence_table
from eagle3lab.report.sentences import gib, layer_claim, public_rows, shift_sentence
from eagle3lab.report.contexts import (crash_context, eagle3_missing_note, fix_context, incident_context,
                                       model_context, trace_context, premise_context)
from eagle3lab.report.summary import summary_lines


TEMPLATE = "REPORT.md.jinja"


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
    vllm: Optional[VllmSameClassSidecar] = None

    def evidence(self) -> "provenance.Evidence":
        return provenance.Evidence.of(self.generated, self.environment, self.crash, self.trace, self.patch,
                                      self.model.to_dict(), self.incident, self.figures, self.in_display_units(),
                                      self.vllm)

    def in_display_units(self) -> dict[str, float]:
        """The evidence's raw values the renderer converts before printing (bytes shown as GiB, the validation's
        frozen constants in ms), converted alike."""
        units = validation_section.in_display_units(self.model.validation_protocol)
        if self.crash is None:
            return units
        return {**units, "crash_peak_rss_gib": gib(self.crash.crash.peak_rss_bytes),
                "control_peak_rss_gib": gib(self.crash.control.peak_rss_bytes)}

    def tree(self) -> dict[str, Any]:
        """The evidence as one tree of plain values: what a bound sentence's keys name (``provenance.lookup``)."""
        plain = provenance._plain
        return {"generated": self.generated, "environment": self.environment,
                "crash": plain(self.crash) if self.crash else None, "trace": plain(self.trace) if self.trace else None,
                "patch": plain(self.patch) if self.patch else None, "model": self.model.to_dict(),
                "incident": self.incident, "figures": self.figures,
                "vllm": plain(self.vllm) if self.vllm else None}

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
                         vllm=read_if_present(VllmSameClassSidecar, profile))


def render(sources: ReportSources) -> str:
    """REPORT.md's text from its sources."""
    return render_bound(sources)[0]


def render_bound(sources: ReportSources) -> tuple[str, provenance.Binder]:
    """REPORT.md's text and the binder that holds its bound sentences (each placeholder's evidence key, each
    verdict's rule), for ``provenance.broken_sentences``."""
    s01, s03 = sources.crash, sources.patch
    crash, control = crash_context(s01)
    trace = trace_context(sources.trace)
    fix, bench = fix_context(s03)
    binder = provenance.Binder(sources.tree())
    evidence = evidence_table(binder, sources.incident["evidence"]) if "evidence" in sources.incident else ""
    model = model_context(sources.model, sources.figures, eagle3_missing_note(s03), binder)
    incident = incident_context(sources.incident)
    premise = premise_context(incident, trace, fix)
    public = {"rows": public_rows(incident["public"], model),
              "shift": shift_sentence(incident["public"], bench["mismatch"].model_dump()
                                      if bench and bench.get("mismatch") is not None else None),
              "launch": incident["public"].get("sglang_pr_19689"), "layer_claim": layer_claim(incident),
              "vllm": incident["public"].get("vllm_pr_35966")}
    env = sources.environment
    summary = summary_lines(crash, trace, fix, model, incident, sources.model, premise, binder, sources.profile)
    loader = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates"),
                                undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = loader.get_template(TEMPLATE).render(
        profile=sources.profile, generated=sources.generated,
        where=f"{sources.profile} profile, {env.get('machine')}, accelerators: {env.get('accelerators')}, "
              f"{s01.date if s01 else sources.generated}",
        incident=incident, crash=crash, control=control, trace=trace, fix=fix, bench=bench, model=model,
        diagnostics=s03.diagnostics if s03 else [], premise=premise, public=public,
        summary=summary, evidence=evidence, vllm=vllm_section.context(sources.vllm))
    return text, binder
