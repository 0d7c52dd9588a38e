"""The sweep driver and benchmark arms.

One arm = one server configuration (baseline, EAGLE-3) swept over the same concurrency list with the same
prompts. Per point: flush the cache, warm up with at least the concurrency, flush again (so the radix cache and
sglang's lifetime acceptance counters start clean), measure, then snapshot ``/get_server_info``. Every finished
request is already on disk (JSONL) before the next one is counted, so a server that dies mid-sweep costs only
the point it died in: that point is marked failed with the reason, and the sweep stops cleanly.

An arm that cannot run here is recorded as not runnable with its classified reason; it never becomes a row of
zeros. Every arm says what it is (``kind``: baseline, eagle3, or one of the EAGLE-3 experiments).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence, TypeVar


from eagle3lab.bench import cpuload
from eagle3lab.bench.host import COPY_BANDWIDTH_KEY, GPUS_KEY
from eagle3lab.runtime import procwatch
from eagle3lab.errors import BenchError
from eagle3lab.progress import PointProgress
from eagle3lab.bench.loadgen import (DeathWatch, JsonlSink, fetch_json, flush_cache, is_stall, run_phase,
                                     server_lost, watch_for_death, watch_stopped)
from eagle3lab.bench.metrics import PointMetrics, RequestRecord, compute_point_metrics, format_point
from eagle3lab.atomic import write_json_atomic
from eagle3lab.bench.workload import SweepConfig, make_prompts, measure_prompts

T = TypeVar("T")

POINT_OK, POINT_ERRORS, POINT_FAILED = "ok", "errors", "failed"
SERVER_DIED = "server died"  # how a point's reason starts when a server process was seen to die
SERVER_STALLED = "server stalled"  # ... when every server process lives but one is stopped (SIGSTOP, a debugger)
SERVER_HUNG = "server hung"  # ... when every server process lives and runs, yet the server went silent
# Why a failed point (and so its arm) failed, as ``PointResult.failure`` and the arm's ``reason["kind"]``. Both are
# failures alike (the arm measured nothing usable at that point); the words and the remedy differ. A server whose
# processes this host cannot see (a remote one) cannot be told apart, and counts as died, as it always has.
FAILURE_DIED, FAILURE_STALLED = "server_died", "server_stalled"
ARM_MEASURED, ARM_FAILED, ARM_NOT_RUNNABLE = "measured", "failed", "not_runnable"

# What an arm is, as a field (never guessed from its name). ``eagle3`` is the headline speculative arm (the trained
# drafter, served with the aux layer ids it was trained on); the others are experiments around it.
ARM_KIND_BASELINE = "baseline"  # no speculation
ARM_KIND_EAGLE3 = "eagle3"  # EAGLE-3 with the drafter the comparison is about
ARM_KIND_EAGLE3_CONTROL = "eagle3_control"  # EAGLE-3 with an untrained drafter: acceptance near 1, pure overhead
ARM_KIND_EAGLE3_SHIFTED = "eagle3_shifted"  # the trained drafter fed aux states one layer early (the mismatch)
ARM_KINDS = (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, ARM_KIND_EAGLE3_SHIFTED)


def check_kind(kind: str) -> str:
    if kind not in ARM_KINDS:
        raise BenchError(f"arm kind {kind!r} is unknown; use one of {', '.join(ARM_KINDS)}", key="kind", value=kind)
    return kind


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class PointResult:
    """One concurrency of one arm. ``metrics`` is kept even for a failed point (its finished requests)."""

    concurrency: int
    status: str  # ok | errors (server alive, some requests failed) | failed (server died or stalled; sweep stopped)
    reason: str | None
    metrics: PointMetrics | None
    server_info: dict[str, Any] | None
    warmup_requests: int
    warmup_failed: int
    not_sent: int
    flushed: bool
    started_at: str
    # Who used the CPU while the point was measured (shares of all cores' time): the context every number from
    # a shared 2-core box needs. ``other_cpu`` is neither the server nor this client, i.e. disturbance.
    machine_cpu_busy: float | None = None
    server_cpu: float | None = None
    client_cpu: float | None = None
    other_cpu: float | None = None
    load_avg_1m: float | None = None
    # /get_server_info avg_spec_accept_length right after the measurement (its counters were reset by the flush
    # before it; sglang refreshes them every decode_log_interval steps, so the last few steps may be missing).
    server_avg_accept_length: float | None = None
    failure: str | None = None  # a failed point's FAILURE_DIED or FAILURE_STALLED (None for older sidecars)
    # The measured phase on the wall clock (unix seconds, unrounded): what lines the point up with the server's own
    # cycle-timer records (bench.server_time); None for older sidecars.
    measured_from: float | None = None
    measured_to: float | None = None

    @property
    def measured(self) -> bool:
        """Only these points are drawn and reported as numbers."""
        return self.status != POINT_FAILED and self.metrics is not None and self.metrics.completed > 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PointResult":
        values = dict(data)
        if values.get("metrics") is not None:
            values["metrics"] = PointMetrics.from_dict(values["metrics"])
        return cls(**values)


@dataclass
class ArmResult:
    """A whole arm: its points, or why it could not run."""

    name: str
    status: str  # measured | failed | not_runnable
    kind: str  # one of ARM_KINDS
    reason: dict[str, Any] | None = None
    base_url: str | None = None
    sweep: dict[str, Any] | None = None
    points: list[PointResult] = field(default_factory=list)
    requests_file: str | None = None  # JSONL of every request, relative to the arm's output folder
    started_at: str | None = None
    finished_at: str | None = None
    sweep_seconds: float | None = None  # wall time of the whole sweep (warm-ups, flushes and measurements)
    server_ready_seconds: float | None = None  # launch to ready of the server swept, where this run started it

    def __post_init__(self) -> None:
        check_kind(self.kind)

    @property
    def speculative(self) -> bool:
        return self.kind != ARM_KIND_BASELINE

    def measured_points(self) -> list[PointResult]:
        return [p for p in self.points if p.measured]

    def point(self, concurrency: int) -> PointResult:
        for p in self.points:
            if p.concurrency == concurrency:
                return p
        raise BenchError(f"arm '{self.name}' has no point at concurrency {concurrency}; "
                         f"it has {[p.concurrency for p in self.points]}", arm=self.name, concurrency=concurrency)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ArmResult":
        values = dict(data)
        if "kind" not in values:
            raise BenchError(f"arm '{values.get('name')}' has no kind; the sidecar predates arm kinds, rerun notebook 03",
                             arm=values.get('name'), key="kind", problem="missing_key")
        values["points"] = [PointResult.from_dict(p) for p in values.get("points", [])]
        return cls(**values)


CANCEL_WAIT_S = 10.0  # how long an interrupted sweep gets to cancel its open requests


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, also inside Jupyter (whose loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    running: dict[str, Any] = {}

    async def tracked() -> T:
        running["loop"], running["task"] = asyncio.get_running_loop(), asyncio.current_task()
        return await make()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(lambda: asyncio.run(tracked()))
    try:
        return future.result()
    except BaseException:
        # Ctrl-C / the kernel's interrupt (SIGTERM to a run): cancel the sweep in its thread, so the cell ends now
        # instead of after the whole benchmark (which outlasted the run's grace period and got the kernel killed).
        if "task" in running:
            running["loop"].call_soon_threadsafe(running["task"].cancel)
        concurrent.futures.wait([future], timeout=CANCEL_WAIT_S)
        raise
    finally:
        pool.shutdown(wait=False)


def _first_error(records: list[RequestRecord]) -> str:
    return next((r.error for r in records if r.error), "no error text")


def classify_silence(watch: DeathWatch | None, base_url: str, phase: str, detail: str,
                     stall_timeout_s: float, stalled: bool) -> tuple[str, str]:
    """(failure kind, reason) of a point whose server stopped answering: died, stopped, or hung.

    Why: a scheduler stopped with SIGSTOP (or deadlocked) ends the point at the stall timeout just as a dead one
    would, but it is alive, and the remedy differs (resume it, or stop the server; not "it crashed, read its log").
    ``stalled``: the phase's requests ended on the stall timeout (no token for ``stall_timeout_s``)."""
    death = watch() if watch is not None else None
    if death:
        return FAILURE_DIED, f"{SERVER_DIED} during {phase}: {death}"
    stopped = watch_stopped(watch)
    if stopped is False:
        return FAILURE_DIED, f"server at {base_url} stopped answering during {phase}: {detail}"
    if stopped:
        return FAILURE_STALLED, f"{SERVER_STALLED} during {phase}: {stopped}"
    if stalled:
        return FAILURE_STALLED, f"{SERVER_HUNG} during {phase}: alive but no token for {stall_timeout_s:g} s"
    return FAILURE_STALLED, f"{SERVER_HUNG} during {phase}: alive but not answering ({detail})"


async def _guarded(coro: Awaitable[T], watch: DeathWatch | None) -> tuple[T | None, str | None]:
    """(result, None), or (None, which server process died) as soon as the watch sees a death."""
    if watch is None:
        return await coro, None
    death = watch()
    task = asyncio.ensure_future(coro)
    if death:
        task.cancel()
        return None, death
    watcher = asyncio.ensure_future(watch_for_death(watch))
    await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        watcher.cancel()
        return task.result(), None
    task.cancel()
    return None, watcher.result()


async def _run_point(base_url: str, config: SweepConfig, concurrency: int, sink: JsonlSink,
                     tick: Callable[[], None], watch: DeathWatch | None = None) -> PointResult:
    point = PointResult(concurrency=concurrency, status=POINT_OK, reason=None, metrics=None, server_info=None,
                        warmup_requests=config.warmup_count(concurrency), warmup_failed=0, not_sent=0,
                        flushed=False, started_at=_now())

    def failed(phase: str, detail: str, records: Sequence[RequestRecord] = ()) -> PointResult:
        point.status = POINT_FAILED
        point.failure, point.reason = classify_silence(watch, base_url, phase, detail, config.stall_timeout_s,
                                                       any(is_stall(r.error) for r in records))
        return point

    def died(phase: str, death: str) -> PointResult:
        point.status, point.failure = POINT_FAILED, FAILURE_DIED
        point.reason = f"{SERVER_DIED} during {phase}: {death}"
        return point

    flushed, death = await _guarded(flush_cache(base_url), watch)
    if death:
        return died("the cache flush before warm-up", death)
    if not flushed and await server_lost(base_url, config, watch):
        return failed("the cache flush before warm-up", "no answer")
    warm = await run_phase(base_url, make_prompts(config, f"warmup-c{concurrency}", point.warmup_requests),
                           concurrency=concurrency, phase="warmup", config=config, sink=sink, on_done=tick,
                           watch=watch)
    point.warmup_failed = sum(not r.ok for r in warm.records)
    if warm.server_lost:
        point.not_sent = warm.not_sent
        return died("warm-up", warm.server_died) if warm.server_died else \
            failed("warm-up", _first_error(warm.records), warm.records)
    flushed, death = await _guarded(flush_cache(base_url), watch)
    if death:
        return died("the cache flush before measuring", death)
    point.flushed = bool(flushed)

    server = cpuload.server_processes(base_url)
    cpu_before = cpuload.snapshot(server)
    point.measured_from = time.time()
    measure = await run_phase(base_url, measure_prompts(config, concurrency),
                              concurrency=concurrency,
                              phase="measure", config=config, sink=sink, on_done=tick, watch=watch)
    point.measured_to = time.time()
    used = cpuload.shares(cpu_before, cpuload.snapshot(server))
    if used is not None:
        point.machine_cpu_busy, point.server_cpu = used.machine_busy, used.server
        point.client_cpu, point.other_cpu = used.client, used.other
    point.load_avg_1m = os.getloadavg()[0]
    point.not_sent = measure.not_sent
    if measure.records:
        point.metrics = compute_point_metrics(measure.records, client_cpu_s=measure.client_cpu_s)
    if measure.server_lost:
        return died("measurement", measure.server_died) if measure.server_died else \
            failed("measurement", _first_error(measure.records), measure.records)
    point.server_info, death = await _guarded(fetch_json(base_url, "/get_server_info"), watch)
    if death:
        return died("the server-info snapshot", death)
    if point.server_info is None and await server_lost(base_url, config, watch):
        return failed("the server-info snapshot", "no answer")
    point.server_avg_accept_length = server_accept_length(point.server_info)
    if point.metrics is None or point.metrics.failed:
        point.status = POINT_ERRORS
        point.reason = f"{point.metrics.failed if point.metrics else 0} requests failed: " \
                       f"{_first_error(measure.records)}"
    return point


def server_accept_length(server_info: dict[str, Any] | None) -> float | None:
    """``avg_spec_accept_length`` of the first scheduler in a ``/get_server_info`` answer (None without one)."""
    states = (server_info or {}).get("internal_states") or []
    value = states[0].get("avg_spec_accept_length") if states and isinstance(states[0], dict) else None
    return float(value) if isinstance(value, (int, float)) else None


async def run_sweep(base_url: str, config: SweepConfig, sink: JsonlSink, label: str = "sweep",
                    on_point: Callable[[PointResult], None] = lambda p: None,
                    watch: DeathWatch | None = None) -> list[PointResult]:
    """Every concurrency of ``config`` in order; stops after the first failed point."""
    total = sum(config.warmup_count(c) + config.prompts_for(c) for c in config.concurrency)
    points: list[PointResult] = []
    with PointProgress(label, len(config.concurrency), total=total, unit="req") as progress:
        for concurrency in config.concurrency:
            point = await _run_point(base_url, config, concurrency, sink, progress.tick, watch)
            points.append(point)
            on_point(point)
            progress.point(f"c={concurrency}", point_summary(point))
            if point.status == POINT_FAILED:
                break
    return points


def point_summary(point: PointResult) -> str:
    """A point's outcome in a few words, for progress lines: status, throughput, requests done, why not ok."""
    words = [point.status]
    if point.metrics is not None:
        words.append(f"{point.metrics.output_tok_per_s:.1f} tok/s, {point.metrics.completed}/"
                     f"{point.metrics.requests} requests")
    if point.reason:
        words.append(point.reason[:120])
    return ", ".join(words)


def arm_summary(arm: ArmResult) -> str:
    """An arm's outcome for progress lines: each point's summary, or why the arm has none."""
    if not arm.points:
        return f"{arm.status}: {arm.reason}" if arm.reason else arm.status
    return "; ".join(point_summary(p) for p in arm.points)


def _arm_paths(name: str, out_dir: Path) -> tuple[Path, Path]:
    if not name or any(ch in name for ch in "/\\ "):
        raise BenchError(f"arm name {name!r} must be a non-empty word (it becomes a file name)", key="name", value=name)
    return out_dir / f"{name}.requests.jsonl", out_dir / f"{name}.arm.json"


def save_arm(arm: ArmResult, out_dir: Path) -> Path:
    return write_json_atomic(_arm_paths(arm.name, out_dir)[1], arm.to_dict())


def run_arm(name: str, base_url: str, sweep_config: SweepConfig, out_dir: Path, *, kind: str,
            log: Callable[[str], None] = print, watch: DeathWatch | None = None) -> ArmResult:
    """Sweep one running server; writes ``<name>.requests.jsonl`` (live) and ``<name>.arm.json`` (at the end).

    The server's process tree is watched (``watch``, by default found from the port of a local ``base_url``),
    so a dead scheduler ends the point within seconds, recorded as "server died" with its exit status; a server
    that goes silent with every process alive ends the point at the stall timeout, recorded as stalled (a stopped
    process, named) or hung.
    """
    check_kind(kind)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl, _ = _arm_paths(name, out_dir)
    jsonl.unlink(missing_ok=True)  # the file holds this run only; it is appended to request by request
    base_url = base_url.rstrip("/")
    arm = ArmResult(name=name, status=ARM_MEASURED, kind=kind, base_url=base_url, sweep=sweep_config.to_dict(),
                    requests_file=jsonl.name, started_at=_now())

    def report(point: PointResult) -> None:
        line = format_point(point.metrics) if point.metrics else "no finished requests"
        busy = "" if point.other_cpu is None else f" other_cpu={point.other_cpu:.0%}"
        log(f"[{name}] {point.status:<6} {line}{busy}" + (f" | {point.reason}" if point.reason else ""))

    sink = JsonlSink(jsonl)
    started = time.perf_counter()
    try:
        watch = watch or procwatch.death_watch_for_url(base_url)
        arm.points = run_async(lambda: run_sweep(base_url, sweep_config, sink, label=name, on_point=report,
                                                 watch=watch))
    finally:
        sink.close()
    arm.sweep_seconds = round(time.perf_counter() - started, 2)
    failed = [p for p in arm.points if p.status == POINT_FAILED]
    if failed:
        arm.status = ARM_FAILED
        arm.reason = {"kind": failed[0].failure or FAILURE_DIED, "concurrency": failed[0].concurrency,
                      "message": failed[0].reason}
    arm.finished_at = _now()
    save_arm(arm, out_dir)
    return arm


def not_runnable_arm(name: str, reason: dict[str, Any], *, kind: str) -> ArmResult:
    """An arm that cannot run on this machine, with the classified reason (for example the crash report of
    EAGLE-3 on CPU). It has no points, so nothing downstream can mistake it for a measured zero."""
    if not isinstance(reason, dict) or not reason:
        raise BenchError("a not-runnable arm needs its classified reason as a non-empty dict (e.g. a crash report)", arm=name,
                         key="reason", value=reason)
    _arm_paths(name, Path("."))
    return ArmResult(name=name, status=ARM_NOT_RUNNABLE, kind=check_kind(kind), reason=reason, started_at=_now(),
                     finished_at=_now())


def load_requests(path: Path) -> list[RequestRecord]:
    """Read a requests JSONL back (for example after a crash, or to recompute metrics offline)."""
    records = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(RequestRecord.from_dict(json.loads(line)))
        except json.JSONDecodeError:
            raise BenchError(f"{path}:{number} is not JSON; the file is damaged (was it cut off mid-line?)", path=Path(path),
                                 line=number) from None
    return records


@dataclass
class BenchReport:
    """Everything the figures and the write-up need, so both can be redrawn without a server."""

    profile: str
    date: str
    machine: dict[str, Any]
    arms: list[ArmResult]
    cross_check: dict[str, Any] | None = None
    # the prompts' kind and source and their measured mean prompt and output tokens (bench.lengths.workload_record)
    workload: dict[str, Any] | None = None

    @classmethod
    def create(cls, profile: str, arms: list[ArmResult], cross_check: dict[str, Any] | None = None,
               copy_bandwidth: float | None = None, workload: dict[str, Any] | None = None,
               gpus: list[str] | None = None) -> "BenchReport":
        """``copy_bandwidth``: this host's memory copy bandwidth measured during the run (``bench.host``), kept so
        that the cost model is calibrated with the run's own numbers, never with a probe taken later; ``workload``:
        the measured lengths (``bench.lengths``); ``gpus``: the names of the GPUs the run's servers had (a cuda
        run), so that it is modelled on the GPU it measured."""
        machine: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                                   "cpus": os.cpu_count()}
        if copy_bandwidth is not None:
            machine[COPY_BANDWIDTH_KEY] = copy_bandwidth
        if gpus is not None:
            machine[GPUS_KEY] = list(gpus)
        return cls(profile, datetime.now(timezone.utc).date().isoformat(), machine, arms, cross_check, workload)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchReport":
        values = dict(data)
        values["arms"] = [ArmResult.from_dict(a) for a in values.get("arms", [])]
        return cls(**values)

    def save(self, path: Path) -> Path:
        return write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: Path) -> "BenchReport":
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise BenchError(f"benchmark sidecar {path} not found; run the benchmark first", path=Path(path),
                             problem="missing") from None
        except (json.JSONDecodeError, TypeError, KeyError) as exc:
            raise BenchError(f"benchmark sidecar {path} is unreadable ({type(exc).__name__}: {exc})", path=Path(path),
                             problem="unreadable") from None


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


def point_rows(arms: list[ArmResult]) -> list[dict[str, Any]]:
    """One display row per point (and one per arm without points), read straight from the dataclasses."""
    rows: list[dict[str, Any]] = []
    for arm in arms:
        if not arm.points:
            reason = arm.reason or {}
            rows.append({"arm": arm.name, "kind": arm.kind, "status": arm.status,
                         "note": str(reason.get("message") or reason.get("signature") or reason.get("summary")
                                     or arm.reason)})
        for p in arm.points:
            m = p.metrics
            rows.append({
                "arm": arm.name, "kind": arm.kind, "concurrency": p.concurrency, "status": p.status,
                "ok": f"{m.completed}/{m.requests}" if m else "0/0",
                "out_tok_s": round(m.output_tok_per_s, 1) if m else None,
                "req_s": round(m.requests_per_s, 2) if m else None,
                "ttft_p50_ms": _ms(m.ttft_s.p50) if m else None, "ttft_p99_ms": _ms(m.ttft_s.p99) if m else None,
                "itl_per_token_p50_ms": _ms(m.itl_s.p50) if m else None,
                "itl_per_token_p99_ms": _ms(m.itl_s.p99) if m else None,
                "itl_per_chunk_p50_ms": _ms(m.itl_chunk_s.p50) if m and m.itl_chunk_s else None,
                "e2e_p50_ms": _ms(m.e2e_s.p50) if m else None, "e2e_p99_ms": _ms(m.e2e_s.p99) if m else None,
                # sglang's per-request spec_accept_length (completion tokens / verify steps), averaged over the
                # point's requests; and the pooled ratio (all tokens / all verify steps), which weighs slow requests
                "accept_len": None if m is None or m.accept_length_mean is None else round(m.accept_length_mean, 3),
                "accept_len_pooled": None if m is None or m.accept_length is None else round(m.accept_length, 3),
                "server_avg_accept_len": None if p.server_avg_accept_length is None
                else round(p.server_avg_accept_length, 3),
                "client_cpu_s_per_1k_tok": None if m is None or m.client_cpu_s_per_1k_tokens is None
                else round(m.client_cpu_s_per_1k_tokens, 4),
                "server_cpu": p.server_cpu, "other_cpu": p.other_cpu, "note": p.reason,
            })
    return rows
