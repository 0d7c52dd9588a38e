"""The incident's evidence table: public measurements on its hardware and model family, before any model.

Why: the engineer's question ("why no gain on 8x RTX PRO 6000, and what do I do") is first a question about what
that hardware delivers with EAGLE-3 when the drafter works. Public sweeps answer it without the cost model: the
rtx6kpro Kimi-K2.6 pages (every cell, from ``costmodel/data/rtx6kpro_kimi_sweeps.yaml``) and the rows of
``data/public_evidence.yaml``'s ``incident_table`` (the incident's drafter elsewhere, other Kimi-K2.x drafters,
DeepSeek MTP on Blackwell). ``incident_evidence`` computes the rows and the two implications (one stream, the peak)
as data; ``render`` prints them with every number bound to its key (``provenance.Binder``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from eagle3lab.costmodel.public_sweeps import Sweeps, accept_length, load_sweeps
from eagle3lab.report.provenance import Binder

PUBLIC_EVIDENCE = Path(__file__).resolve().parent / "data" / "public_evidence.yaml"
REFERENCE = ("k26-v4", 1)  # the sweep whose cells the implications read: the canonical v4 page, no context parallelism
NO_GAIN_BAND = 0.05  # a speedup within 5% of 1.0 is "about no gain" (the sweep's cells move that much run to run)
HARDWARE = "8x RTX PRO 6000 Blackwell (PCIe)"


def _sweep_rows(sweeps: Sweeps, page_key: str, dcp: int) -> list[dict[str, Any]]:
    page = sweeps.page(page_key)
    rows = []
    for cell in sweeps.cells(page_key, dcp):
        rows.append({"key": cell.id, "url": cell.url, "what": f"rtx6kpro {page_key}, DCP {dcp}",
                     "engine": "vLLM", "engine_version": page.engine_version.removeprefix("vLLM").lstrip(" ,"),
                     "model": page.model,
                     "drafter": page.drafter.split(" (")[0], "hardware": HARDWARE, "tp": cell.tp, "dcp": cell.dcp,
                     "concurrency": cell.concurrency, "context": cell.context,
                     "acceptance_rate": cell.acceptance_rate,
                     "accept_length": accept_length(cell, page.num_speculative_tokens),
                     "no_spec_tok_s": cell.no_spec_tok_s, "spec_tok_s": cell.spec_tok_s, "speedup": cell.speedup,
                     "speedup_kind": "computed"})
    return rows


def incident_evidence(single_stream_tok_s: float, peak_tok_s: float, path: Optional[Path] = None,
                      sweeps: Optional[Sweeps] = None) -> dict[str, Any]:
    """The table's rows and the two implications for the incident's reported single-stream and peak rates."""
    sweeps = sweeps or load_sweeps()
    table = yaml.safe_load((path or PUBLIC_EVIDENCE).read_text(encoding="utf-8"))["incident_table"]
    rows = [row for spec in table["sweeps"] for row in _sweep_rows(sweeps, spec["page"], spec["dcp"])]
    rows += [dict(row) for row in table["rows"]]
    reference = [r for r in rows if r["key"].startswith(f"{REFERENCE[0]}-dcp{REFERENCE[1]}-")]
    one = next(r for r in reference if r["context"] == "0" and r["concurrency"] == 1)
    peak = max(reference, key=lambda r: r["no_spec_tok_s"])
    return {
        "rows": rows,
        "one_stream": {"cell": one, "incident_tok_s": single_stream_tok_s,
                       "implied_tok_s": single_stream_tok_s * one["speedup"],
                       "gains": one["speedup"] > 1.0 + NO_GAIN_BAND},
        "peak": {"cell": peak, "incident_tok_s": peak_tok_s,
                 "plain_gap_pct": abs(peak["no_spec_tok_s"] / peak_tok_s - 1.0) * 100.0,
                 "about_no_gain": abs(peak["speedup"] - 1.0) <= NO_GAIN_BAND},
    }


def _cell(b: Binder, key: str, value: Any, spec: str) -> str:
    return "--" if value is None else b.num(key, spec)


def _row(b: Binder, prefix: str, i: int, row: dict[str, Any]) -> str:
    k = f"{prefix}.rows.{i}"
    if row.get("acceptance_rate") is not None:
        acceptance = (f"rate {b.num(k + '.acceptance_rate', '.3f')} "
                      f"({b.num(k + '.accept_length', '.2f')} per verify step)")
    else:
        acceptance = row.get("acceptance") or "--"
    if row["speedup_kind"] == "published":
        speedup = f"{row['speedup_text']} (published)"
    else:
        speedup = "--" if row["speedup"] is None else f"{b.num(k + '.speedup', '.2f')}x (computed)"
    text = "| " + " | ".join([
        f"[{row['what']}]({row['url']})", f"{row['engine']} ({row['engine_version']})", str(row["hardware"]),
        _cell(b, k + ".tp", row["tp"], "d"), _cell(b, k + ".dcp", row.get("dcp"), "d"),
        _cell(b, k + ".concurrency", row["concurrency"], "d"), str(row["context"] or "--"), acceptance,
        _cell(b, k + ".no_spec_tok_s", row["no_spec_tok_s"], "g"), _cell(b, k + ".spec_tok_s", row["spec_tok_s"], "g"),
        speedup]) + " |"
    # a row that prints no evidence number (text only) has nothing to bind
    return b.sentence(f"evidence-row-{row['key']}", text) if b.pending else text


def _gains(flag: bool) -> str:
    return "gains" if flag else "does not gain"


def _one_verdict(flag: bool) -> str:
    return ("is not what this hardware gives a working drafter" if flag
            else "is also what this hardware gives a working drafter")


def _agrees(flag: bool) -> str:
    return "agrees with" if flag else "differs from"


# the verdict rules, by the names the bound sentences record (merged into ``sentences.RULES`` for re-checking)
RULES = {"evidence_gains": _gains, "evidence_one_verdict": _one_verdict, "evidence_agrees": _agrees}


def render(b: Binder, evidence: dict[str, Any], prefix: str = "incident.evidence") -> str:
    """The table (every row bound) and the two implication sentences, as markdown."""
    table, sentences = render_parts(b, evidence, prefix)
    return "\n".join([table, "", sentences[0], "", sentences[1], ""])


def render_parts(b: Binder, evidence: dict[str, Any], prefix: str = "incident.evidence") -> tuple[str, list[str]]:
    """The table (every row bound, for the appendix) and the two implication sentences (for REPORT.md's section on
    the incident's deployment), rendered once with one binder."""
    one, peak = f"{prefix}.one_stream", f"{prefix}.peak"
    header = ("| Source [reported] | Engine (version) | GPU | TP | DCP | Concurrency | Context | Acceptance | "
              "No-spec tok/s | EAGLE-3 tok/s | Speedup |\n|---|---|---|---:|---:|---:|---|---|---:|---:|---:|")
    rows = "\n".join(_row(b, prefix, i, row) for i, row in enumerate(evidence["rows"]))
    one_stream = b.sentence("evidence-one-stream", (
        f"**One stream.** On the incident's hardware the public Kimi-K2.6 EAGLE-3 sweep (vLLM, TP 8, no context "
        f"parallelism, context 0) {b.rule('evidence_gains', _gains, one + '.gains')} at one stream: "
        f"{b.num(one + '.cell.speedup', '.2f')}x at acceptance rate {b.num(one + '.cell.acceptance_rate', '.3f')} "
        f"**[reported]**; the same ratio on the engineer's {b.num(one + '.incident_tok_s', '.1f')} tok/s would be "
        f"about {b.num(one + '.implied_tok_s', '.1f')} tok/s **[modelled: the public ratio applied to the reported "
        f"rate]**, so the reported \"no gain\" at one stream {b.rule('evidence_one_verdict', _one_verdict, one + '.gains')} "
        f"(conditions: another engine, Kimi-K2.6 and another drafter)."))
    at_peak = b.sentence("evidence-peak", (
        f"**At the peak.** The same sweep's best plain rate, {b.num(peak + '.cell.no_spec_tok_s', '.1f')} tok/s at "
        f"{b.num(peak + '.cell.concurrency', 'd')} streams, is within {b.num(peak + '.plain_gap_pct', '.1f')}% of "
        f"the engineer's {b.num(peak + '.incident_tok_s', ',.0f')} tok/s, and there EAGLE-3 gives "
        f"{b.num(peak + '.cell.speedup', '.2f')}x ({b.num(peak + '.cell.spec_tok_s', '.1f')} tok/s) **[reported]**: "
        f"the reported \"no gain\" at the peak {b.rule('evidence_agrees', _agrees, peak + '.about_no_gain')} the public "
        f"measurement on this hardware."))
    return "\n".join([header, rows]), [one_stream, at_peak]
