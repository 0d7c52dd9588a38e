"""The sealed set's one evaluation (issue 36, item 5): refuse unless it may run, predict every admitted point with the
frozen constants, and write the rows and the summary once, atomically.

Why refusals first: a sealed figure means something only if it is the first and only run on that set, with the
constants the freeze recorded, on the bytes that were sealed. So the evaluation refuses (one line each) when its
result file exists, when ``data/constants.yaml`` is not byte-identical to the commit ``data/constants_commit.yaml``
names (compared through git), or when the set's sha256 is not its seal. The points are predicted by the same path as
every seen series (``validation.validate``) under the current freeze, calibrated only as the freeze's
``sealed_evaluation_rules`` allow (the plain rate at the smallest batch, nothing from the EAGLE arm).
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from eagle3lab.atomic import write_json_atomic
from eagle3lab.costmodel.baselines import NAMES
from eagle3lab.costmodel.evaluation import EvalPoint, current_frozen, development_baselines, summarize
from eagle3lab.costmodel.freeze import COMMIT, CONSTANTS, CommitRecord, load_constants
from eagle3lab.costmodel.gpus import HARDWARE
from eagle3lab.costmodel.presets import stored_model
from eagle3lab.costmodel.sealed import GOAL_MAPE_PCT, RESULT, SET, result_path
from eagle3lab.costmodel.seals import DATA, SEALS, check_seal, load_seals
from eagle3lab.costmodel.validation import Dataset, Source, load_dataset, validate
from eagle3lab.errors import PerfModelError
from eagle3lab.paths import REPO_ROOT

# calibrations the freeze's sealed_evaluation_rules allow: the plain rate at the smallest published batch, or none
ALLOWED_CALIBRATIONS = ("baseline_single_stream", "baseline_at_first_batch", "none")
ROLE = "sealed held-out set, evaluated once after the freeze"


@dataclass(frozen=True)
class Paths:
    """Every file the evaluation reads or writes (tests point them at copies in a temporary folder)."""

    set_name: str = SET
    result: Path = RESULT
    constants: Path = CONSTANTS
    commit_record: Path = COMMIT
    seals: Path = SEALS
    data_dir: Path = DATA
    repo: Path = REPO_ROOT

    @classmethod
    def for_set(cls, name: str) -> "Paths":
        """The real files for sealed set ``name`` (its result beside it: ``data/<name>_evaluation.json``); one line
        if no seal is recorded for it."""
        known = [s.set for s in load_seals().seals]
        if name not in known:
            raise PerfModelError(f"no seal recorded for evaluation set '{name}' in {SEALS.name}; sealed sets: "
                                 f"{', '.join(known)}", parameter="set", value=name, problem="unknown")
        return cls(set_name=name, result=result_path(name))


def git_blob_sha1(data: bytes) -> str:
    """The id git gives these bytes as a blob (what ``git rev-parse <commit>:<path>`` prints for that file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def frozen_commit(record: Path) -> str:
    """The constants' commit recorded in ``data/constants_commit.yaml``; one line if missing or malformed."""
    try:
        return CommitRecord.model_validate(yaml.safe_load(record.read_text(encoding="utf-8"))).commit
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise PerfModelError(f"refusing to evaluate: the constants' commit record {record} is missing or malformed "
                             f"({type(exc).__name__}); record the freeze's commit first", path=record,
                             problem="no_constants_commit") from None


def check_constants(paths: Paths) -> str:
    """The frozen commit, if ``constants.yaml`` is byte-identical to that commit's; else one clear refusal."""
    commit = frozen_commit(paths.commit_record)
    rel = CONSTANTS.relative_to(REPO_ROOT).as_posix()
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}:{rel}"], cwd=paths.repo,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PerfModelError(f"refusing to evaluate: git cannot show {rel} at the frozen commit {commit[:12]} in "
                             f"{paths.repo}; run from a clone that holds that commit", path=paths.repo,
                             problem="frozen_commit_unreadable")
    if git_blob_sha1(paths.constants.read_bytes()) != done.stdout.strip():
        raise PerfModelError(f"refusing to evaluate: {paths.constants.name} differs from the frozen commit "
                             f"{commit[:12]} recorded in {paths.commit_record.name}; a sealed set is evaluated with "
                             "the frozen constants only (restore them, or freeze anew and seal a new set)",
                             path=paths.constants, problem="constants_changed")
    return commit


def refuse_if_evaluated(paths: Paths) -> None:
    if paths.result.exists():
        raise PerfModelError(f"refusing to evaluate: {paths.set_name} was already evaluated ({paths.result} exists); "
                             "a sealed set is evaluated once: report that result, or seal a new set",
                             path=paths.result, problem="already_evaluated")


def load_set(path: Path, name: str, default_context: float) -> Dataset:
    """The sealed file's admitted sources as a validation dataset (their split is the set's own name)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if raw.get("set") != name:
            raise ValueError(f"its set is {raw.get('set')!r}, not {name!r}")
        sources = []
        for src in raw["sources"]:
            src = dict(src)
            if src.pop("split", name) != name:
                raise ValueError(f"source {src.get('id')} is not in split {name}")
            sources.append(Source.model_validate(src))
    except (OSError, yaml.YAMLError, ValidationError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PerfModelError(f"sealed set {path} is not in the held-out format: {exc}", path=path) from None
    for src in sources:
        for s in src.series:
            if s.calibrate not in ALLOWED_CALIBRATIONS or s.accept_length is None:
                raise PerfModelError(f"sealed set {path}: {src.id}/{s.id} needs a published acceptance and a "
                                     f"calibration in {ALLOWED_CALIBRATIONS} (the freeze's sealed_evaluation_rules)",
                                     path=path, parameter=s.id)
    return Dataset(default_context=default_context, default_context_source="spec_validation.yaml's default_context "
                   "(the freeze's sealed_evaluation_rules: context unstated -> the dataset default)", sources=sources)


def predict_set(data: Dataset, name: str) -> tuple[list[EvalPoint], list[dict[str, Any]]]:
    """Every admitted point predicted with the frozen constants: the points for ``summarize`` and one row each."""
    frozen = current_frozen()
    by_id = {(src.id, s.id): (src, s) for src in data.sources for s in src.series}
    points, rows = [], []
    for result in validate(data, splits=("development",), frozen=frozen):
        for sr in result.series:
            src, series = by_id[(result.source, sr.series)]
            link = HARDWARE[src.hardware]().interconnect if src.hardware in HARDWARE else "given"
            for p in sr.points:
                points.append(EvalPoint(name, src.id, series.id, stored_model(series.model).family, series.tp, link,
                                        src.hardware, series.engine, p.batch, p.published_speedup,
                                        p.predicted_speedup, p.accept_length))
                rows.append({
                    "source_url": series.url or src.url, "source": src.id, "series": series.id,
                    "conditions": {"model": series.model, "hardware": src.hardware, "tp": series.tp, "link": link,
                                   "engine": series.engine, "batch": p.batch,
                                   "flags": series.flags.model_dump(), "context": series.context or data.default_context,
                                   "accept_length": p.accept_length, "calibration": sr.calibration},
                    "role": p.role, "published_speedup": round(p.published_speedup, 4),
                    "predicted_speedup": round(p.predicted_speedup, 4), "signed_error_pct": round(p.error_pct, 2),
                    "published_baseline_tok_s": p.published_baseline_tok_s,
                    "predicted_baseline_tok_s": (None if p.predicted_baseline_tok_s is None
                                                 else round(p.predicted_baseline_tok_s, 2))})
    if any(r["role"] != "predicted" for r in rows):
        raise PerfModelError(f"sealed set {name}: a point was fitted instead of predicted; nothing written")
    return points, rows


def evaluate(paths: Paths = Paths(), now: Optional[datetime] = None) -> dict[str, Any]:
    """Refuse (one line) unless the set may be evaluated; else predict it, write the record atomically, return it."""
    refuse_if_evaluated(paths)
    commit = check_constants(paths)
    seal = check_seal(paths.set_name, paths.seals, paths.data_dir)
    data = load_set(seal.path, paths.set_name, load_dataset().default_context)
    points, rows = predict_set(data, paths.set_name)
    summary = summarize(points, development_baselines(), ROLE)
    summary.pop("points_detail")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.repo, capture_output=True, text=True, check=False)
    record = {"set": paths.set_name, "file": seal.path.name, "sha256": seal.current_sha256, "seal_intact": True,
              "evaluated_at": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "code_commit": head.stdout.strip() if head.returncode == 0 else None,
              "constants_commit_checked": commit, **summary,
              "target_met": summary["mape_pct"] <= GOAL_MAPE_PCT and summary["below_every_baseline"],
              "context_rule": data.default_context_source, "rows": rows}
    if record["constants"] != load_constants().freeze.id or summary["constants_commit"] != commit:
        raise PerfModelError("refusing to write: the constants in use are not the recorded freeze; nothing written")
    refuse_if_evaluated(paths)  # another run may have finished meanwhile
    write_json_atomic(paths.result, record)
    return record


def summary_lines(record: dict[str, Any]) -> list[str]:
    """The figure with its baselines, for the command's output."""
    b = record["baselines_mape_pct"]
    return [f"{record['set']}: MAPE {record['mape_pct']:.2f}% over {record['points']} points (constants "
            f"{record['constants']}, commit {str(record['constants_commit'])[:12]}; goal <= {GOAL_MAPE_PCT:g}% and "
            f"below every baseline: {'met' if record['target_met'] else 'not met'})",
            *(f"  {NAMES[k]}: {'n/a' if v is None else f'{v:.2f}%'}" for k, v in b.items()),
            *(f"  {r['source']}/{r['series']} batch {r['conditions']['batch']}: predicted {r['predicted_speedup']:.3f}, "
              f"published {r['published_speedup']:.3f} ({r['signed_error_pct']:+.1f}%)" for r in record["rows"])]
