"""The CPU harness's EAGLE cycle as measured, turned into the cost model's cycle terms.

The cycle benchmark writes ``artifacts/cycle_components.<profile>.json``: one plain decode step and one EAGLE
cycle broken into components (draft forward, verify forward, draft extend, tree build and verify, KV bookkeeping
kernels, sglang's Python orchestration), each per draft step or per cycle, in milliseconds. This module reads
that table (tolerating the two shapes a component table naturally takes: a mapping per scope, or a list of rows)
and gives:

- ``MeasuredCycle``: the components, the measured break-even acceptance (cycle / plain step), and the
  orchestration and bookkeeping that the cost model's passes do not count, as engine terms
  (``spec_cycle_extra_s``, ``spec_step_extra_s``);
- ``cpu_engine_entry``: the CPU engine entry of the cost model, "measured" with those terms and the file and
  date they come from, or "not measured" (with the reason) when the file is absent or unreadable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.errors import PerfModelError
from eagle3lab.paths import repo_dir
from eagle3lab.costmodel.engine import Engine, sglang_engine

SCOPES = ("per_draft_step", "per_cycle")
# component names as a cycle benchmark may spell them -> the cost model's term
FORWARD = {"draft_forward": "draft_forward", "draft": "draft_forward", "verify_forward": "verify_forward",
           "verify": "verify_forward", "target_verify": "verify_forward", "draft_extend": "draft_extend",
           "extend": "draft_extend"}
BOOKKEEPING = ("tree_build", "tree_verify", "build_tree", "verify_tree", "kv_bookkeeping", "kv_index",
               "bookkeeping", "topk", "top_k", "sampling", "kernels", "bookkeeping_kernels", "assign_req_to_token",
               "synchronisation", "sync")
ORCHESTRATION = ("orchestration", "python_orchestration", "scheduler", "worker", "cpu", "overhead", "other")


def cycle_components_path(profile: str) -> Path:
    """``artifacts/cycle_components.<profile>.json``."""
    return repo_dir("artifacts") / f"cycle_components.{profile}.json"


def _ms(value: Any, where: str) -> float:
    ms = value.get("ms") if isinstance(value, Mapping) else value
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or math.isnan(ms) or ms < 0:
        raise PerfModelError(f"{where}: expected a time in ms >= 0, got {ms!r}", parameter=where, value=ms,
                             problem="invalid")
    return float(ms)


def _kind(name: str) -> str:
    key = name.lower().replace("-", "_").replace(" ", "_")
    if key in FORWARD:
        return FORWARD[key]
    if key in BOOKKEEPING or "kernel" in key or "tree" in key or "kv" in key:
        return "bookkeeping"
    if key in ORCHESTRATION or "orchestr" in key or "python" in key or "schedul" in key:
        return "orchestration"
    return "orchestration"  # anything unnamed between the passes is host work around them


@dataclass(frozen=True)
class MeasuredCycle:
    """One plain step and one EAGLE cycle of a profile's run, by component (seconds)."""

    profile: str
    source: str
    date: str
    num_steps: int
    plain_step_s: float
    per_draft_step: Mapping[str, float]
    per_cycle: Mapping[str, float]
    harness_only: Mapping[str, float] = field(default_factory=dict)  # what only this CPU harness adds, if measured
    draft_steps_per_cycle: int = 0  # how many times the per-draft-step components ran per cycle (0: num_steps)
    # the plain step's own time outside its forward (scheduler, model runner): the calibrated per-pass overhead
    # already charges it to the verify pass, so only the cycle's work beyond it is an engine term
    plain_outside_forward_s: float = 0.0
    arm: str = ""  # the EAGLE-3 arm whose cycles were timed, where the table names it
    # the target's verify forward per running request beyond the first, from the same arm's cycles at two batch
    # sizes (``per_request_batch_sizes``); None where the arm ran one batch size only
    verify_per_request_s: Optional[float] = None
    per_request_batch_sizes: tuple[int, int] | None = None

    @property
    def steps_per_cycle(self) -> int:
        return self.draft_steps_per_cycle or self.num_steps

    @property
    def cycle_s(self) -> float:
        return self.steps_per_cycle * sum(self.per_draft_step.values()) + sum(self.per_cycle.values())

    @property
    def break_even_accept_length(self) -> float:
        """Measured: the acceptance at which one cycle emits as many tokens per second as plain decoding."""
        return self.cycle_s / self.plain_step_s

    def _scoped(self, scope: Mapping[str, float], kind: str) -> float:
        return sum(v for k, v in scope.items() if _kind(k) == kind)

    def engine_terms(self) -> dict[str, float]:
        """What the cost model's passes do not count, as engine terms: per cycle, the bookkeeping kernels and the
        orchestration measured once per cycle beyond the plain step's own (``plain_outside_forward_s``, never
        below 0); per draft step, those measured per draft step."""
        per_step = self._scoped(self.per_draft_step, "bookkeeping") + self._scoped(self.per_draft_step,
                                                                                     "orchestration")
        per_cycle = self._scoped(self.per_cycle, "bookkeeping") + self._scoped(self.per_cycle, "orchestration")
        # the cost model multiplies the per-step term by num_steps; scale if the table ran a different count
        return {"spec_cycle_extra_s": max(0.0, per_cycle - self.plain_outside_forward_s),
                "spec_step_extra_s": per_step * self.steps_per_cycle / self.num_steps}

    def table(self) -> list[dict[str, Any]]:
        """Rows for people and the report: component, scope, ms, plain steps, kind."""
        rows = []
        for scope, comps in (("per_draft_step", self.per_draft_step), ("per_cycle", self.per_cycle)):
            for name, sec in comps.items():
                rows.append({"component": name, "scope": scope, "ms": sec * 1e3,
                             "plain_steps": sec / self.plain_step_s, "term": _kind(name), "kind": "measured"})
        return rows


TIMER_TABLE_SCHEMA = "eagle3lab.cycle_components/"  # bench.cycle's table (sidecars.CycleComponentsRecord)
# bench.cycle's component groups -> this module's component names (their kind by ``_kind``)
TIMER_GROUPS = {"target forward": "verify_forward", "draft forward": "draft_forward",
                "tree and acceptance": "tree_build_and_verify", "KV bookkeeping": "kv_bookkeeping",
                "harness kernels": "harness_kernels", "model runner": "orchestration", "orchestration": "orchestration"}
FORWARD_GROUPS = ("target forward", "draft forward")


def parse_timer_table(data: Mapping[str, Any], where: str) -> MeasuredCycle:
    """A ``MeasuredCycle`` from the cycle timers' own table (``bench.cycle``: one cycle and one plain step at
    ``batch_size``, ms per group): every group per cycle, the harness kernels also as harness-only, and the plain
    step's time outside its forward kept apart so that only the cycle's work beyond it becomes an engine term."""
    groups = data.get("groups")
    if not isinstance(groups, Mapping) or not groups:
        raise PerfModelError(f"{where}: no groups (ms per cycle and per plain step by component group)",
                             parameter="groups", problem="missing")
    unknown = sorted(set(groups) - set(TIMER_GROUPS))
    if unknown:
        raise PerfModelError(f"{where}: unknown component group(s) {unknown}; known: {', '.join(TIMER_GROUPS)}",
                             parameter="groups", value=unknown, problem="unknown")
    per_cycle: dict[str, float] = {}
    plain_outside = 0.0
    for group, ms in groups.items():
        if not isinstance(ms, Mapping):
            raise PerfModelError(f"{where}: groups.{group} needs plain_ms and cycle_ms")
        name = TIMER_GROUPS[group]
        per_cycle[name] = per_cycle.get(name, 0.0) + _ms(ms.get("cycle_ms"), f"{where}: groups.{group}.cycle_ms") / 1e3
        if group not in FORWARD_GROUPS:
            plain_outside += _ms(ms.get("plain_ms"), f"{where}: groups.{group}.plain_ms") / 1e3
    measured = parse_cycle_components(
        {"profile": data.get("profile"), "date": data.get("measured_on"), "plain_step_ms": data.get("plain_step_ms"),
         "num_steps": data.get("speculative_num_steps"), "per_draft_step": {},
         "per_cycle": {k: v * 1e3 for k, v in per_cycle.items()},
         "harness_only": {"harness_kernels": per_cycle.get("harness_kernels", 0.0) * 1e3},
         "plain_outside_forward_ms": plain_outside * 1e3, "arm": data.get("eagle_arm")}, where)
    return replace(measured, **verify_per_request(data.get("by_batch_size") or [], where))


MIN_CYCLES_PER_BATCH_SIZE = 20  # fewer cycles at a batch size than this are a transition, not a steady mean


def verify_per_request(by_batch_size: Sequence[Mapping[str, Any]], where: str) -> dict[str, Any]:
    """The target's verify forward per running request beyond the first: (its mean at the largest batch size with
    at least ``MIN_CYCLES_PER_BATCH_SIZE`` cycles - its mean at batch size 1) / (that size - 1), clipped at 0.
    Why: a host that runs part of each pass once per sequence (sglang's torch_native attention loops over the
    batch in Python) pays it per running request, which a per-pass overhead calibrated at one request does not
    have. Empty (no term) where the arm's cycles ran at one batch size only."""
    steady = {int(row["batch_size"]): _ms(row["cycle_target_forward_ms"], f"{where}: by_batch_size") / 1e3
              for row in by_batch_size if isinstance(row, Mapping) and row.get("cycle_target_forward_ms") is not None
              and int(row.get("cycle_records") or 0) >= MIN_CYCLES_PER_BATCH_SIZE}
    larger = max((bs for bs in steady if bs > 1), default=None)
    if 1 not in steady or larger is None:
        return {}
    return {"verify_per_request_s": max(0.0, (steady[larger] - steady[1]) / (larger - 1)),
            "per_request_batch_sizes": (1, larger)}


def parse_cycle_components(data: Mapping[str, Any], where: str) -> MeasuredCycle:
    """A ``MeasuredCycle`` from a component table: ``{"plain_step_ms", "num_steps", "per_draft_step": {name: ms |
    {"ms": ms}}, "per_cycle": {...}}`` or ``{"plain_step_ms", "num_steps", "components": [{"component", "scope",
    "ms"}]}``. One clear error naming the field for anything else."""
    if not isinstance(data, Mapping):
        raise PerfModelError(f"{where}: a cycle component table must be a JSON object")
    plain = data.get("plain_step_ms", (data.get("plain_step") or {}).get("ms") if isinstance(data.get("plain_step"),
                                                                                               Mapping) else None)
    if plain is None:
        raise PerfModelError(f"{where}: no plain_step_ms (the plain decode step the cycle is measured against)",
                             parameter="plain_step_ms", problem="missing")
    plain_s = _ms(plain, f"{where}: plain_step_ms") / 1e3
    if plain_s <= 0:
        raise PerfModelError(f"{where}: plain_step_ms must be > 0")
    steps = data.get("num_steps") or (data.get("spec") or {}).get("num_steps")
    if not isinstance(steps, int) or steps < 1:
        raise PerfModelError(f"{where}: num_steps must be an integer >= 1, got {steps!r}", parameter="num_steps",
                             value=steps, problem="invalid")
    scoped: dict[str, dict[str, float]] = {scope: {} for scope in SCOPES}
    if "components" in data:
        for i, row in enumerate(data["components"] or []):
            if not isinstance(row, Mapping) or row.get("scope") not in SCOPES or not row.get("component"):
                raise PerfModelError(f"{where}: components[{i}] needs component, scope ({' or '.join(SCOPES)}), ms")
            scoped[row["scope"]][str(row["component"])] = _ms(row, f"{where}: components[{i}]") / 1e3
    else:
        for scope in SCOPES:
            comps = data.get(scope)
            if not isinstance(comps, Mapping):
                raise PerfModelError(f"{where}: no {scope} mapping of component -> ms")
            scoped[scope] = {str(k): _ms(v, f"{where}: {scope}.{k}") / 1e3 for k, v in comps.items()}
    if not scoped["per_cycle"]:
        raise PerfModelError(f"{where}: no per-cycle components")
    harness = {str(k): _ms(v, f"{where}: harness_only.{k}") / 1e3
               for k, v in (data.get("harness_only") or {}).items()} if isinstance(data.get("harness_only"),
                                                                                    Mapping) else {}
    return MeasuredCycle(profile=str(data.get("profile", "?")), source=where, date=str(data.get("date", "?")),
                         num_steps=steps, plain_step_s=plain_s, per_draft_step=scoped["per_draft_step"],
                         per_cycle=scoped["per_cycle"], harness_only=harness,
                         plain_outside_forward_s=_ms(data.get("plain_outside_forward_ms", 0.0),
                                                     f"{where}: plain_outside_forward_ms") / 1e3,
                         arm=str(data.get("arm") or ""),
                         draft_steps_per_cycle=int(data.get("draft_steps_per_cycle") or 0))


def load_measured_cycle(profile: str = "cpu", path: Optional[Path] = None) -> Optional[MeasuredCycle]:
    """The profile's measured cycle, or None if the cycle benchmark has not written it yet."""
    path = path or cycle_components_path(profile)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PerfModelError(f"cannot read the cycle component table {path.name}: {exc}; run the cycle benchmark "
                             "again") from None
    if isinstance(data, Mapping) and str(data.get("schema_id", "")).startswith(TIMER_TABLE_SCHEMA):
        return parse_timer_table(data, f"artifacts/{path.name}")
    return parse_cycle_components(data, f"artifacts/{path.name}")


MEASURED_INSTEAD = {"kernels_per_verify": 0, "kernels_per_draft_step": 0, "cpu_step_s": 0.0, "spec_cpu_preps": 0}


@dataclass(frozen=True)
class CpuEngineEntry:
    """The cost model's engine entry for the CPU harness: measured terms, or why there are none."""

    status: str  # "measured" or "not measured"
    reason: str
    engine: Optional[Engine]
    measured: Optional[MeasuredCycle]

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason,
                "terms": self.measured.engine_terms() if self.measured else None,
                "break_even_accept_length": self.measured.break_even_accept_length if self.measured else None,
                "components": self.measured.table() if self.measured else [],
                "source": self.measured.source if self.measured else None,
                "date": self.measured.date if self.measured else None}


def cpu_engine_entry(profile: str = "cpu", path: Optional[Path] = None) -> CpuEngineEntry:
    """sglang's engine with the CPU harness's measured per-cycle and per-draft-step terms, or "not measured"."""
    where = f"artifacts/cycle_components.{profile}.json"
    try:
        measured = load_measured_cycle(profile, path)
    except PerfModelError as exc:
        return CpuEngineEntry("not measured", str(exc), None, None)
    if measured is None:
        return CpuEngineEntry("not measured", f"{where} is absent: the cycle benchmark has not run for this profile",
                              None, None)
    arm = f", arm '{measured.arm}'" if measured.arm else ""
    # named as a reader of the report finds it (notebook 03's timers), not by a generated file outside the repository
    source = f"measured here: notebook 03's cycle timers{arm} ({measured.profile}, {measured.date})"
    # the measured terms hold the cycle's bookkeeping kernels and its host work beyond a plain step's: the model's
    # own guesses at those (kernels per verify and per draft step, CPU work per cycle) would count them twice
    engine = sglang_engine().with_(source, **measured.engine_terms(), **MEASURED_INSTEAD)
    return CpuEngineEntry("measured", source, engine, measured)
