"""What a REPORT.md and its appendices were rendered from, committed beside them (``reports-evidence/<profile>.json``):
the evidence tree with machine paths scrubbed, every bound sentence, and each document's sha256; ``check_report``
re-checks the committed REPORT.md and appendices against it without rerunning anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Sequence
from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.paths import REPO_ROOT, staged_as
from eagle3lab.report import provenance
from eagle3lab.report.sentences import RULES
from eagle3lab.report.build import REPORT_MD, ReportSources, joined, render_documents


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


def document_paths(report_md: Path, documents: Iterable[str]) -> dict[str, Path]:
    """Where each rendered document goes: REPORT.md at ``report_md``, each appendix at its path beside it."""
    root = Path(report_md).parent
    return {name: Path(report_md) if name == REPORT_MD else root / name for name in documents}


def write_report(sources: ReportSources, report_md: Path) -> tuple[Path, Path]:
    """Write REPORT.md, its appendices and, beside them, the evidence they were rendered from: the sidecars, the
    model's evidence and the incident's facts as one tree, every bound sentence with its keys and rules, and each
    document's sha256. The documents go first (a full disk keeps the old ones and writes nothing else); should the
    evidence then fail, the hashes no longer match and ``check_report`` says so."""
    documents, binder = render_documents(sources)
    # a staged run's paths as they will be once published, then machine paths out
    replacements = [*staged_as(), (str(REPO_ROOT) + "/", ""), (str(REPO_ROOT), "."), (str(Path.home()), "~")]
    data = {"profile": sources.profile, "generated": sources.generated,
            "report_sha256": _sha256(documents[REPORT_MD]),
            "documents_sha256": {name: _sha256(text) for name, text in documents.items()},
            "tree": _scrub(json.loads(json.dumps(sources.tree(), default=str)), replacements),
            "bound_sentences": [dataclasses.asdict(x) for x in binder.sentences]}
    paths = document_paths(report_md, documents)
    written = write_text_atomic(paths[REPORT_MD], documents[REPORT_MD])
    for name, text in documents.items():
        if name != REPORT_MD:
            write_text_atomic(paths[name], text)
    return written, write_json_atomic(evidence_path(report_md, sources.profile), data)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_report(report_md: Path, evidence: Path) -> list[str]:
    """What a reader can check without rerunning anything: the committed REPORT.md and its appendices against the
    committed evidence. Returns one line per problem (a document changed since rendering or missing; a bound
    sentence its evidence contradicts)."""
    data = json.loads(Path(evidence).read_text(encoding="utf-8"))
    hashes = data.get("documents_sha256") or {REPORT_MD: data["report_sha256"]}
    paths = document_paths(report_md, hashes)
    problems, texts = [], {}
    for name, digest in hashes.items():
        shown = Path(report_md).name if name == REPORT_MD else name
        if not paths[name].is_file():
            problems.append(f"{shown} is missing")
            continue
        texts[name] = paths[name].read_text(encoding="utf-8")
        if _sha256(texts[name]) != digest:
            problems.append(f"{shown} is not the text {Path(evidence).name} was rendered with")
    sentences = [provenance.BoundSentence(x["id"], x["text"], tuple(
        provenance.Binding(tuple(b["keys"]), b["how"], b["text"]) for b in x["bindings"]))
        for x in data["bound_sentences"]]
    problems += [f"sentence {sid} does not follow from its evidence"
                 for sid in provenance.broken_sentences(joined(texts), sentences, data["tree"], RULES)]
    return problems
