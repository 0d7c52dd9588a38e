"""The layer-convention experiment's cells, their served acceptance and its interval, and the shipped record
(issue 37, item 3).

Why: a drafter's aux layer id ``i`` means either the output of layer ``i`` (SpecForge's recipe, what sglang
0.5.9's +1 assumes) or the input of layer ``i`` (sglang PR #25454's reading of a first id other than 1); a release
captures either at the input of layer ``i + 1`` (the +1) or at the input of layer ``i`` (as given). Which pairing
costs what is measured here, not argued: tiny drafters trained under each convention, each served with each
capture, acceptance per verify step read from the server's own per-request counts.

Layers are counted by output: ``s_k`` is the residual stream after layer ``k`` (the input of layer ``k + 1``,
``runtime.tinymodel.target_states``). For the drafter's published ids ``D``:
- trained on: ``D`` under "output", ``D - 1`` under "input";
- fed: ``D`` under the +1 capture, ``D - 1`` as given.
sglang 0.5.9 on CPU runs every forward eagerly and always adds 1, so a cell is served by handing the server a
drafter whose config ids are the fed layers: the same weights, ids moved (``drafter_training.shifted_drafter``).
0.5.9's mixed case (CUDA-graph replays as given, eager forwards +1) needs CUDA graphs: ``MIXED_ON_CPU`` says why
the CPU cannot show it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from eagle3lab.bench.interleave import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from eagle3lab.errors import BenchError
from eagle3lab.resultcache import PACKAGE_ROOT

SCHEMA_VERSION = 1
RECORD_KIND = "layer-convention experiment"
RECORD_DIR = PACKAGE_ROOT / "bench" / "data"
RECORD_COMMAND = "python -m eagle3lab layer-experiment --profile cpu --record"

OUTPUT, INPUT = "output", "input"
PLUS_ONE, AS_GIVEN = "plus_one", "as_given"
CONVENTIONS = {OUTPUT: "id i = output of layer i (SpecForge)", INPUT: "id i = input of layer i (sglang PR #25454)"}
CAPTURES = {PLUS_ONE: "+1 (input of layer i + 1: 0.5.9 eager, 0.5.11)",
            AS_GIVEN: "as given (input of layer i: 0.5.23 for a first id other than 1)"}
MIXED_ON_CPU = ("not served on CPU: sglang 0.5.9 captures CUDA graphs with the hook's default ids, as given, and "
                "eager forwards with the drafter's ids + 1, and the CPU profile has no CUDA graphs, so every forward "
                "there is eager and 0.5.9 on CPU is the +1 column. Where the drafter's ids equal the default (the "
                "incident's [2, 30, 58]), the mixed case feeds the as-given layers to every graph-replayed verify and "
                "the +1 layers to eager prefill, which supplies only each request's first draft")


@dataclass(frozen=True)
class Cell:
    """One convention x capture pair: the layers the drafter was trained on and the layers a server feeds it."""

    convention: str
    capture: str
    trained_outputs: tuple[int, ...]
    fed_outputs: tuple[int, ...]  # also the config ids sglang 0.5.9 on CPU is given (it adds 1 to each)

    @property
    def offset(self) -> int:
        """Layers fed minus layers trained on: 0 matched, -1 one layer early, +1 one layer late."""
        return self.fed_outputs[0] - self.trained_outputs[0]

    @property
    def name(self) -> str:
        return f"{self.convention}-{self.capture}"


def cells(drafter_ids: Sequence[int], num_layers: int) -> list[Cell]:
    """The four cells for a drafter whose config names ``drafter_ids`` on a ``num_layers``-deep target; refused in
    one line when a cell would need a layer sglang cannot capture (every fed id in ``1 .. num_layers - 2``, so
    both conventions' layers exist)."""
    ids = tuple(int(i) for i in drafter_ids)
    if not ids or list(ids) != sorted(set(ids)) or ids[0] < 1 or ids[-1] > num_layers - 2:
        raise BenchError(f"drafter ids {list(ids)} must be distinct, ascending and within 1..{num_layers - 2} on a "
                         f"{num_layers}-layer target, so that the layers one below them can be captured too",
                         key="aux_layer_ids", value=list(ids))
    below = tuple(i - 1 for i in ids)
    trained = {OUTPUT: ids, INPUT: below}
    fed = {PLUS_ONE: ids, AS_GIVEN: below}
    return [Cell(conv, cap, trained[conv], fed[cap]) for conv in (OUTPUT, INPUT) for cap in (PLUS_ONE, AS_GIVEN)]


@dataclass(frozen=True)
class Acceptance:
    """Served acceptance of one cell: completion tokens over verify steps pooled over requests, with the
    percentile bootstrap interval resampling whole requests."""

    accept_length: float
    low: float | None
    high: float | None
    requests: int
    tokens: int
    verify_steps: int


def served_acceptance(per_request: Sequence[Sequence[int]], resamples: int = BOOTSTRAP_RESAMPLES,
                      level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED) -> Acceptance:
    """``per_request``: each finished request's [completion tokens, verify steps] (sglang's ``meta_info``).

    Pooled, as sglang's own counter pools; requests are resampled because acceptance varies from prompt to prompt
    far more than from step to step within one. Fewer than two requests give no interval."""
    data = np.asarray(per_request, dtype=float)
    if data.ndim != 2 or data.shape[1] != 2 or len(data) == 0:
        raise BenchError("served acceptance needs each request as [completion tokens, verify steps]")
    if np.any(data[:, 1] <= 0) or np.any(data[:, 0] <= 0):
        raise BenchError("a request with no tokens or no verify step has no acceptance (was speculation on?)")
    tokens, steps = int(data[:, 0].sum()), int(data[:, 1].sum())
    low = high = None
    if len(data) >= 2:
        picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
        sums = data[picks].sum(axis=1)
        lo, hi = np.quantile(sums[:, 0] / sums[:, 1], [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
        low, high = float(lo), float(hi)
    return Acceptance(tokens / steps, low, high, len(data), tokens, steps)


def request_counts(records: Sequence[Any]) -> list[list[int]]:
    """[completion tokens, verify steps] of each finished measured request (``bench.metrics.RequestRecord``), in
    prompt order, so that two cells' lists pair prompt by prompt."""
    done = [r for r in records if r.phase == "measure" and r.ok and r.completion_tokens and r.spec_verify_ct]
    done.sort(key=lambda r: (r.prompt_index is None, r.prompt_index or 0))
    return [[int(r.completion_tokens), int(r.spec_verify_ct)] for r in done]


def paired_drop_interval(matched: Sequence[Sequence[int]], other: Sequence[Sequence[int]],
                         resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                         seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval of (matched pooled acceptance - other pooled acceptance), resampling prompts
    with both cells' requests on a prompt kept together: both cells served the same prompts, and acceptance varies
    far more from prompt to prompt than between the cells, so unpaired intervals overlap where the paired one
    does not. None when the cells did not measure the same number of prompts (no pairing) or fewer than two."""
    a, b = np.asarray(matched, dtype=float), np.asarray(other, dtype=float)
    if a.shape != b.shape or a.ndim != 2 or len(a) < 2:
        return None
    picks = np.random.default_rng(seed).integers(0, len(a), size=(resamples, len(a)))
    sa, sb = a[picks].sum(axis=1), b[picks].sum(axis=1)
    drops = sa[:, 0] / sa[:, 1] - sb[:, 0] / sb[:, 1]
    low, high = np.quantile(drops, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


def record_path(profile: str, root: Path | None = None) -> Path:
    return (root or RECORD_DIR) / f"layer_experiment.{profile}.json"


def load_record(profile: str, root: Path | None = None) -> dict[str, Any] | None:
    """The shipped record for ``profile`` (None when there is none); one line when it is unreadable or another
    schema."""
    path = record_path(profile, root)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path.name} is not readable JSON ({type(exc).__name__}); rerun {RECORD_COMMAND}") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or data.get("kind") != RECORD_KIND:
        raise BenchError(f"{path.name} is not a version-{SCHEMA_VERSION} {RECORD_KIND} record; rerun {RECORD_COMMAND}")
    return data


def table_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per convention: each capture's served acceptance with its interval, as the report prints them
    (``None`` where a cell did not measure)."""
    by = {(c["convention"], c["capture"]): c for c in record.get("cells", [])}
    rows = []
    for conv in CONVENTIONS:
        row: dict[str, Any] = {"convention": conv, "label": CONVENTIONS[conv]}
        for cap in CAPTURES:
            cell = by.get((conv, cap))
            row[cap] = cell if cell and cell.get("accept_length") is not None else None
        rows.append(row)
    return rows


def mismatch_costs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """For each convention, what the mismatched capture costs against the matched one (tokens per verify step),
    with the paired interval of that cost where both cells kept their per-prompt counts."""
    costs = []
    for row in table_rows(record):
        matched_cap = PLUS_ONE if row["convention"] == OUTPUT else AS_GIVEN
        other_cap = AS_GIVEN if matched_cap == PLUS_ONE else PLUS_ONE
        matched, other = row[matched_cap], row[other_cap]
        if matched and other:
            paired = paired_drop_interval(matched.get("per_request") or [], other.get("per_request") or [])
            costs.append({"convention": row["convention"], "matched_capture": matched_cap, "mismatched_capture": other_cap,
                          "matched": matched["accept_length"], "mismatched": other["accept_length"],
                          "drop": matched["accept_length"] - other["accept_length"],
                          "drop_low": paired[0] if paired else None, "drop_high": paired[1] if paired else None})
    return costs
