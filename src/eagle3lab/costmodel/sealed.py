"""The sealed evaluation set (data/held_out_4.yaml): its seal, and its one evaluation once it has been run.

Why a module: the set may be read only after the constants were frozen and committed, and evaluated once; the
result is stored (``data/held_out_4_evaluation.json``) with the constants' commit, and everything that reports it
reads that record instead of evaluating again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3lab.costmodel.seals import DATA, load_seals

SET = "held_out_4"
RESULT = DATA / f"{SET}_evaluation.json"
GOAL_MAPE_PCT = 20.0  # issue 36: at most 20% on the newly sealed set, and below every naive baseline


def sealed_record(path: Path = RESULT) -> dict[str, Any]:
    """The stored evaluation (``evaluated`` True), or the seal alone (``evaluated`` False) before it was run."""
    seal = next(s for s in load_seals().seals if s.set == SET)
    base = {"set": SET, "sources": seal.sources, "sealed_commit": seal.commit_marker, "sealed": seal.sealed,
            "target_mape_pct": GOAL_MAPE_PCT, "evaluated": False}
    if not path.is_file():
        return base
    record = json.loads(path.read_text(encoding="utf-8"))
    return {**base, **record, "evaluated": True}
