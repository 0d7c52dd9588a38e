"""What a REPORT.md was rendered from, committed beside it (``reports-evidence/<profile>.json``): the evidence
tree with machine paths scrubbed, every bound sentence, and REPORT.md's sha256; ``check_report`` re-checks a
committed REPORT.md against it without rerunning anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Sequence
from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.paths import REPO_ROOT
from eagle3lab.report import provenance
from eagle3lab.report.sentences import RULES
from eagle3lab.report.build import ReportSources, render_bound


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
