"""A sealed evaluation set (data/<set>.yaml; the report's is held_out_4): its seal, and its one evaluation once run.

Why a module: a set may be read only after the constants were frozen and committed, and evaluated once; the result
is stored (``data/<set>_evaluation.json``) with the constants' commit, and everything that reports it reads that
record instead of evaluating again. ``SET`` is the set the report shows; later sets are named explicitly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from eagle3lab.costmodel.seals import DATA, SEALS, load_seals
from eagle3lab.errors import PerfModelError

SET = "held_out_4"
RESULT = DATA / f"{SET}_evaluation.json"  # the report's set (result_path(SET))
GOAL_MAPE_PCT = 20.0  # issue 36: at most 20% on the newly sealed set, and below every naive baseline


def result_path(name: str) -> Path:
    """Where set ``name``'s one evaluation is stored: ``data/<name>_evaluation.json``."""
    return DATA / f"{name}_evaluation.json"


def sealed_record(path: Optional[Path] = None, name: str = SET) -> dict[str, Any]:
    """Set ``name``'s stored evaluation (``evaluated`` True), or its seal alone (``evaluated`` False) before it was
    run; one clear error if no seal is recorded for it. ``path`` defaults to the set's own result file."""
    seal = next((s for s in load_seals().seals if s.set == name), None)
    if seal is None:
        raise PerfModelError(f"no seal recorded for evaluation set '{name}' in {SEALS.name}; seal the set before "
                             "reporting it", parameter="set", value=name, problem="unknown")
    path = result_path(name) if path is None else path
    base = {"set": name, "sources": seal.sources, "sealed_commit": seal.commit_marker, "sealed": seal.sealed,
            "target_mape_pct": GOAL_MAPE_PCT, "evaluated": False}
    if not path.is_file():
        return base
    record = json.loads(path.read_text(encoding="utf-8"))
    return {**base, **record, "evaluated": True}
