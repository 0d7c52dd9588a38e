"""One EAGLE-3 cycle by component against one plain decode step, from the cycle timers' records.

Why: the break-even acceptance is what one cycle costs in plain steps. The timers
(``runtime.cpu_harness.cycle_timers``) wrap sglang's own functions in the servers of notebook 03 and append one
record per scheduler call on a decode batch; this module turns those records into the component table (mean
exclusive milliseconds per plain step and per cycle, and the same in plain steps), separates what only the CPU
harness pays from what sglang's code costs on any host, and writes the table for the cost model
(``artifacts/cycle_components.<profile>.json``, schema ``SCHEMA_ID``, fields in ``sidecars.CycleComponentsRecord``).

Groups (the ``group`` of each component):
- ``target forward``: the target model's forward (``model.target_decode`` in a plain step, ``model.target_verify``
  in a cycle), with its MLA attention, MoE and logits apart (``target.attention``, ``target.moe``,
  ``target.logits``; ``model.target_*`` keeps the rest: embeddings, norms, dense layers, glue).
- ``draft forward``: the drafter's forwards, per draft step (``model.draft_decode``) and the draft extend, with
  ``draft.attention``, ``draft.mlp``, ``draft.logits`` apart.
- ``model runner``: sglang's ``ModelRunner.forward`` around the model (batch preparation) and sampling.
- ``tree and acceptance``: tree building, top-k selection, greedy verification and its bookkeeping.
- ``KV bookkeeping``: cache-slot allocation and index updates before the draft, verify and draft extend.
- ``orchestration``: the scheduler and the workers' own Python between all of the above.
- ``harness kernels``: GPU kernels that this CPU harness runs as torch ports or in Triton's interpreter
  (``kernel.*``, ``triton_interp.*``): on a GPU host each is one kernel launch of microseconds.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import BenchError
from eagle3lab.paths import repo_dir
from eagle3lab.bench.server_time import arm_times
from eagle3lab.runtime.cpu_harness.cycle_timers import CYCLE_TRACE_ENV, DECODE_MODE, RUN_BATCH
from eagle3lab.sidecars import CycleAtBatchSize, CycleComponent, CycleComponentsRecord, today

SCHEMA_ID = "eagle3lab.cycle_components/1"
CYCLE_TRACE_FILE = "cycles.jsonl"
OUTLIER_FACTOR = 3.0
HARNESS_PREFIXES = ("kernel.", "triton_interp.")
TARGET_FORWARD = "target forward"
GROUPS = ("target forward", "draft forward", "model runner", "tree and acceptance", "KV bookkeeping",
          "orchestration", "harness kernels")
_EXACT = {
    "model.target_decode": "target forward", "model.target_verify": "target forward",
    "model.draft_decode": "draft forward", "model.draft_extend": "draft forward",
    "eagle.build_tree": "tree and acceptance", "eagle.organize_draft_results": "tree and acceptance",
    "eagle.select_top_k_tokens": "tree and acceptance", "eagle.verify_accept": "tree and acceptance",
    "eagle.capture_for_decode": "tree and acceptance",
    "eagle.draft_preprocess": "KV bookkeeping", "eagle.verify_prepare": "KV bookkeeping",
    "eagle.draft_extend_prepare": "KV bookkeeping",
}
# The draft loop, per draft step: its forwards, its top-k and its own loop code.
DRAFT_LOOP = ("model.draft_decode", "runner.draft_decode", "eagle.select_top_k_tokens", "eagle.draft_loop")
# Inside the draft steps' forwards, the layer timers cannot tell a draft step from the draft extend: the per-step
# figure charges the layers by the share of draft forwards that are steps (see component_table).
DRAFT_LAYERS = ("draft.attention", "draft.mlp", "draft.logits")


def component_group(name: str) -> str:
    """The group of a timer component (see the module docstring)."""
    if name.startswith(HARNESS_PREFIXES):
        return "harness kernels"
    if name in _EXACT:
        return _EXACT[name]
    if name.startswith("target."):
        return "target forward"
    if name.startswith("draft."):
        return "draft forward"
    if name.startswith("runner."):
        return "model runner"
    return "orchestration"


def trace_path(out_dir: Path) -> Path:
    """Where notebook 03's servers append their records."""
    return Path(out_dir) / CYCLE_TRACE_FILE


def enable_trace(out_dir: Path) -> Path:
    """Point the cycle timers of every server launched from now on at a fresh trace file in ``out_dir`` (the
    harness ``sitecustomize`` reads the variable in each server process); returns the file."""
    path = trace_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.environ[CYCLE_TRACE_ENV] = str(path.resolve())
    return path


def disable_trace() -> None:
    """Stop tracing servers launched from now on."""
    os.environ.pop(CYCLE_TRACE_ENV, None)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record of the trace (a line cut by a killed server is skipped, never guessed)."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"no cycle trace at {path}: run the benchmark with the cycle timers on (bench.cycle."
                         f"enable_trace) on the cpu profile")
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "parts" in record:
            records.append(record)
    return records


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp).timestamp()


def records_in_window(records: Iterable[Mapping[str, Any]], started_at: str | None,
                      finished_at: str | None) -> list[Mapping[str, Any]]:
    """The records written while an arm was being swept (its ``started_at``..``finished_at``; both are stamped
    to the whole second, rounded down, so the window runs to the end of the last second)."""
    start, end = _epoch(started_at), _epoch(finished_at)
    if start is None or end is None:
        return []
    return [r for r in records if start <= float(r["t"]) < end + 1.0]


def steady(records: Sequence[Mapping[str, Any]], factor: float = OUTLIER_FACTOR) -> list[Mapping[str, Any]]:
    """Drop the records of one-off stalls: per root, any call longer than ``factor`` times that root's median
    (the first decode of a fresh server takes seconds, a step of this server tens of milliseconds)."""
    by_root: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_root[record["root"]].append(float(record["ms"]))
    limits = {root: factor * statistics.median(values) for root, values in by_root.items()}
    return [r for r in records if float(r["ms"]) <= limits[r["root"]]]


def decode_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records of decode batches (plain steps and EAGLE-3 cycles); the timers also record prefill batches."""
    return [r for r in records if r.get("mode") == DECODE_MODE]


class _Means:
    """Per-cycle means of each component at one batch size: each scheduler call (root) is averaged over its own
    steady records, then the roots are added (one cycle = one call of each)."""

    def __init__(self, records: Sequence[Mapping[str, Any]], batch_size: int):
        self.batch_size = batch_size
        chosen = steady([r for r in decode_records(records) if r.get("bs") == batch_size])
        by_root: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for record in chosen:
            by_root[record["root"]].append(record)
        self.count = len(by_root.get(RUN_BATCH, []))
        self.ms: dict[str, float] = defaultdict(float)
        self.calls: dict[str, float] = defaultdict(float)
        for root_records in by_root.values():
            for record in root_records:
                for name, (ms, calls) in record["parts"].items():
                    self.ms[name] += ms / len(root_records)
                    self.calls[name] += calls / len(root_records)
        runs = by_root.get(RUN_BATCH, [])
        accepted = [r["accepted"] for r in runs if isinstance(r.get("accepted"), int)]
        self.tokens_per_request = (sum(accepted) / len(accepted) / batch_size + 1) if accepted else None
        self.steps = next((r.get("steps") for r in chosen if r.get("steps")), None)
        self.draft_tokens = next((r.get("draft_tokens") for r in chosen if r.get("draft_tokens")), None)

    @property
    def total(self) -> float:
        return sum(self.ms.values())

    def group_ms(self, group: str) -> float:
        """Mean ms per step or cycle of one group's components (``component_group``)."""
        return sum(ms for name, ms in self.ms.items() if component_group(name) == group)


def batch_sizes(records: Iterable[Mapping[str, Any]]) -> list[int]:
    return sorted({int(r["bs"]) for r in decode_records(records) if r.get("root") == RUN_BATCH and r.get("bs")})


def component_table(plain_records: Sequence[Mapping[str, Any]], cycle_records: Sequence[Mapping[str, Any]], *,
                    profile: str, trace_file: str, baseline_arm: str, eagle_arm: str, batch_size: int = 1,
                    shims: Sequence[str] | None = None) -> CycleComponentsRecord:
    """The component table at ``batch_size``: plain-step records (the baseline server) against cycle records (the
    EAGLE-3 server); every batch size both arms ran is summarised in ``by_batch_size``."""
    plain, cycle = _Means(plain_records, batch_size), _Means(cycle_records, batch_size)
    if not plain.count or not cycle.count:
        raise BenchError(f"no decode records at batch size {batch_size} (plain steps: {plain.count}, cycles: "
                         f"{cycle.count}); the benchmark must run concurrency {batch_size} on both servers")
    if not cycle.steps:
        raise BenchError("the EAGLE-3 records carry no speculative_num_steps: they come from a server without "
                         "speculation")
    names = sorted(set(plain.ms) | set(cycle.ms), key=lambda n: (GROUPS.index(component_group(n)), n))
    components = [CycleComponent(name=n, group=component_group(n), harness_only=n.startswith(HARNESS_PREFIXES),
                                 plain_ms=round(plain.ms.get(n, 0.0), 4), cycle_ms=round(cycle.ms.get(n, 0.0), 4),
                                 cycle_calls=round(cycle.calls.get(n, 0.0), 3)) for n in names]
    groups = {g: {"plain_ms": round(sum(c.plain_ms for c in components if c.group == g), 4),
                  "cycle_ms": round(sum(c.cycle_ms for c in components if c.group == g), 4)} for g in GROUPS}
    plain_ms, cycle_ms = plain.total, cycle.total
    harness = sum(c.cycle_ms for c in components if c.harness_only)
    step_calls, extend_calls = cycle.calls.get("model.draft_decode", 0.0), cycle.calls.get("model.draft_extend", 0.0)
    step_share = step_calls / (step_calls + extend_calls) if step_calls + extend_calls else 0.0
    draft_step = (sum(cycle.ms.get(n, 0.0) for n in DRAFT_LOOP)
                  + step_share * sum(cycle.ms.get(n, 0.0) for n in DRAFT_LAYERS)) / cycle.steps
    sizes = sorted(set(batch_sizes(plain_records)) | set(batch_sizes(cycle_records)))
    return CycleComponentsRecord(
        schema_id=SCHEMA_ID, profile=profile, measured_on=today(), load_average=_load(), trace_file=trace_file,
        baseline_arm=baseline_arm, eagle_arm=eagle_arm, shims=list(shims) if shims is not None else None,
        batch_size=batch_size, speculative_num_steps=int(cycle.steps), draft_tokens=int(cycle.draft_tokens or 0),
        plain_step_ms=round(plain_ms, 4), cycle_ms=round(cycle_ms, 4),
        cycle_in_plain_steps=round(cycle_ms / plain_ms, 4), harness_only_ms=round(harness, 4),
        cycle_without_harness_ms=round(cycle_ms - harness, 4),
        cycle_without_harness_in_plain_steps=round((cycle_ms - harness) / plain_ms, 4),
        draft_step_ms=round(draft_step, 4), draft_step_in_plain_steps=round(draft_step / plain_ms, 4),
        tokens_per_request_per_cycle=_round(cycle.tokens_per_request), components=components, groups=groups,
        by_batch_size=[_at(plain_records, cycle_records, bs) for bs in sizes])


def _at(plain_records: Sequence[Mapping[str, Any]], cycle_records: Sequence[Mapping[str, Any]],
        bs: int) -> CycleAtBatchSize:
    plain, cycle = _Means(plain_records, bs), _Means(cycle_records, bs)
    plain_ms = plain.total if plain.count else None
    cycle_ms = cycle.total if cycle.count else None
    return CycleAtBatchSize(batch_size=bs, plain_ms=_round(plain_ms), cycle_ms=_round(cycle_ms),
                            cycle_in_plain_steps=_round(cycle_ms / plain_ms) if plain_ms and cycle_ms else None,
                            tokens_per_request_per_cycle=_round(cycle.tokens_per_request),
                            plain_records=plain.count, cycle_records=cycle.count,
                            plain_target_forward_ms=_round(plain.group_ms(TARGET_FORWARD)) if plain.count else None,
                            cycle_target_forward_ms=_round(cycle.group_ms(TARGET_FORWARD)) if cycle.count else None)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def table_from_arms(trace_file: Path, baseline: Any, eagle: Any, profile: str, batch_size: int = 1,
                    shims: Sequence[str] | None = None, others: Sequence[Any] = (),
                    records: Sequence[Mapping[str, Any]] | None = None) -> CycleComponentsRecord:
    """The table from notebook 03's trace and its two arms (``bench.sweep.ArmResult``): each arm's records are
    those written while it was swept; each measured point's window is split too (``by_point``,
    ``bench.server_time``), the ``others`` arms' as well (the EAGLE-3 experiments: the control arm's prefill is
    what the cost model's request turnover reads). ``records``: the trace already read (one read serves several
    tables of the same trace)."""
    records = read_records(trace_file) if records is None else records
    table = component_table(records_in_window(records, baseline.started_at, baseline.finished_at),
                            records_in_window(records, eagle.started_at, eagle.finished_at), profile=profile,
                            trace_file=Path(trace_file).name, baseline_arm=baseline.name, eagle_arm=eagle.name,
                            batch_size=batch_size, shims=shims)
    table.by_point = arm_times(records, [baseline, eagle, *others])
    return table


def table_from_shared_window(trace_file: Path, windows: Sequence[tuple[str | None, str | None]], profile: str,
                             baseline_arm: str, eagle_arm: str, batch_size: int = 1,
                             shims: Sequence[str] | None = None) -> CycleComponentsRecord:
    """The table from servers that were up at the same time (``bench.interleave``), each measured in its own
    blocks: the records written in the pair's block ``windows`` (another server up beside them, idle then, writes
    none), split by the server that wrote them (each record carries its server's ``spec``, None without
    speculation)."""
    records = read_records(trace_file)
    inside = list({id(r): r for start, end in windows for r in records_in_window(records, start, end)}.values())
    return component_table([r for r in inside if not r.get("spec")], [r for r in inside if r.get("spec")],
                           profile=profile, trace_file=Path(trace_file).name, baseline_arm=baseline_arm,
                           eagle_arm=eagle_arm, batch_size=batch_size, shims=shims)


def table_rows(table: CycleComponentsRecord) -> list[dict[str, Any]]:
    """For people: one row per component, in ms and in plain steps, then the totals."""
    plain = table.plain_step_ms
    rows = [{"component": c.name, "group": c.group, "harness only": c.harness_only,
             "plain step ms": c.plain_ms, "cycle ms": c.cycle_ms, "cycle (plain steps)": round(c.cycle_ms / plain, 3),
             "calls per cycle": c.cycle_calls} for c in table.components if c.plain_ms or c.cycle_ms]
    rows.append({"component": "total", "group": "", "harness only": False, "plain step ms": table.plain_step_ms,
                 "cycle ms": table.cycle_ms, "cycle (plain steps)": table.cycle_in_plain_steps, "calls per cycle": 1})
    rows.append({"component": "total without harness kernels", "group": "", "harness only": False,
                 "plain step ms": table.plain_step_ms, "cycle ms": table.cycle_without_harness_ms,
                 "cycle (plain steps)": table.cycle_without_harness_in_plain_steps, "calls per cycle": 1})
    rows.append({"component": "per draft step (draft loop / steps)", "group": "draft forward", "harness only": False,
                 "plain step ms": table.plain_step_ms, "cycle ms": table.draft_step_ms,
                 "cycle (plain steps)": table.draft_step_in_plain_steps, "calls per cycle": table.speculative_num_steps})
    return rows


def artifact_path(profile: str) -> Path:
    return repo_dir("artifacts") / f"cycle_components.{profile}.json"


def save(table: CycleComponentsRecord, path: Path | None = None) -> Path:
    """Write the table alone (for the cost model) atomically; returns the path."""
    target = Path(path) if path is not None else artifact_path(table.profile)
    write_json_atomic(target, table.model_dump(mode="json"))
    return target
