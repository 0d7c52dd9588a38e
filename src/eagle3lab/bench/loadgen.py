"""The load generator: streaming ``/generate`` requests at a fixed concurrency, one raw record per request.

Kept apart from the sweep driver (as in vLLM's serving benchmark) so the request path stays small and its timing
is easy to audit. The client must never be the bottleneck: the connection pool holds at least as many
connections as the concurrency, the read buffer is large, and the moment a request really leaves the client is
taken from aiohttp's own tracing hooks, so waiting for a connection shows up as queueing, not as TTFT.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any, Callable, Sequence

import aiohttp

from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.bench.workload import PROBE_TIMEOUT_S, Prompt, SweepConfig

def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, so failures group well in the per-point summary."""
    if isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, aiohttp.ServerTimeoutError):
        return "TimeoutError: no answer within the request timeout"
    return _one_line(f"{type(exc).__name__}: {exc}")


def is_stall(error: str | None) -> bool:
    """Did this request end on the stall timeout (no byte for ``stall_timeout_s``: aiohttp's read timeout)?"""
    return error is not None and error.startswith(f"{aiohttp.SocketTimeoutError.__name__}: ")  # describe_error's form


async def _mark_sent(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: Any) -> None:
    # Headers first, then body chunks: the last of these callbacks is when the request has fully left.
    ctx.trace_request_ctx["sent"] = time.perf_counter()


def make_session(concurrency: int, config: SweepConfig) -> aiohttp.ClientSession:
    """A session sized for the point: ``limit >= concurrency`` connections, a large read buffer, tracing on."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_mark_sent)
    trace.on_request_chunk_sent.append(_mark_sent)
    connector = aiohttp.TCPConnector(limit=max(concurrency, 1), limit_per_host=max(concurrency, 1))
    timeout = aiohttp.ClientTimeout(total=config.request_timeout_s, sock_connect=10,
                                    sock_read=config.stall_timeout_s)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, read_bufsize=config.read_bufsize, trace_configs=[trace]
    )


def generate_payload(prompt: Prompt, config: SweepConfig) -> dict[str, Any]:
    """The ``/generate`` body: greedy, exactly ``output_len`` new tokens, streamed."""
    sampling = {"max_new_tokens": config.output_len, "ignore_eos": True, "temperature": 0.0,
                **config.extra_sampling_params}
    key = "text" if isinstance(prompt, str) else "input_ids"
    return {key: prompt, "sampling_params": sampling, "stream": True}


async def generate_once(
    session: aiohttp.ClientSession, base_url: str, prompt: Prompt, record: RequestRecord, config: SweepConfig
) -> RequestRecord:
    """Send one streaming request and fill ``record`` in place; never raises for server-side trouble."""
    ctx: dict[str, float] = {}
    if not isinstance(prompt, str):
        record.prompt_len = len(prompt)
    last_tokens = 0
    output_ids: list[int] | None = None
    final_meta: dict[str, Any] | None = None
    done = False
    try:
        async with session.post(f"{base_url}/generate", json=generate_payload(prompt, config),
                                trace_request_ctx=ctx) as resp:
            record.t_sent = ctx.get("sent", time.perf_counter())
            if resp.status != 200:
                record.error = _one_line(f"HTTP {resp.status}: {await resp.text()}")
                return record
            async for raw in resp.content:
                now = time.perf_counter()
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    record.error = _one_line(f"server error: {chunk['error']}")
                    return record
                meta = chunk.get("meta_info") or {}
                tokens = int(meta.get("completion_tokens", last_tokens))
                if tokens > last_tokens:  # a chunk that carries new tokens (one or, with speculation, several)
                    record.token_times.append(now)
                    record.chunk_tokens.append(tokens - last_tokens)
                    last_tokens = tokens
                output_ids = _merge_output_ids(output_ids, chunk.get("output_ids"), tokens)
                final_meta = meta
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, json.JSONDecodeError) as exc:
        record.error = describe_error(exc)
        return record
    finally:
        record.t_end = time.perf_counter()
    if not done or final_meta is None or not record.token_times:
        record.error = "stream ended before [DONE] or without any token"
        return record
    record.prompt_tokens = final_meta.get("prompt_tokens")
    record.completion_tokens = final_meta.get("completion_tokens")
    record.spec_verify_ct = final_meta.get("spec_verify_ct")  # absent without speculation
    record.spec_accept_length = final_meta.get("spec_accept_length")
    record.spec_accept_histogram = final_meta.get("spec_accept_histogram")
    record.output_ids = output_ids
    finish = final_meta.get("finish_reason")
    record.finish_reason = finish.get("type") if isinstance(finish, dict) else finish
    record.ok = True
    return record


def _merge_output_ids(so_far: list[int] | None, chunk_ids: Any, completion_tokens: int) -> list[int] | None:
    """The generated ids after this chunk. sglang streams the whole list so far (default) or, with
    ``--stream-output``, only the new ids; a list as long as ``completion_tokens`` is the whole list."""
    if not isinstance(chunk_ids, list):
        return so_far
    if len(chunk_ids) == completion_tokens or so_far is None:
        return list(chunk_ids)
    return so_far + list(chunk_ids)


class JsonlSink:
    """Appends each finished request to a JSONL file at once (flushed), so a crash loses nothing finished."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = path.open("a", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        self._fh.write(json.dumps(record.to_dict()) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


@dataclass
class PhaseOutcome:
    """What one batch of requests at one concurrency produced."""

    records: list[RequestRecord]
    not_sent: int  # requests skipped after the server became unreachable
    client_cpu_s: float
    server_lost: bool  # a failed request was followed by a failed liveness probe, or the server died
    server_died: str | None = None  # which server process died, with its exit status (from the tree watch)


DeathWatch = Callable[[], "str | None"]  # None while every server process lives, else which one died and how
WATCH_POLL_S = 0.5


def watch_stopped(watch: DeathWatch | None) -> str | None | bool:
    """A stopped member of the watched tree (its words), None if none is, False if the watch cannot tell: a plain
    callable (a remote server's, a test's) sees deaths only; ``ServerWatch`` also answers ``stopped()``."""
    stopped = getattr(watch, "stopped", None)
    return stopped() if callable(stopped) else False


def watch_sees_trouble(watch: DeathWatch | None) -> bool:
    """Does the server's process-tree watch already see a member dead or stopped?

    Why: then a liveness probe cannot change the verdict (a dead or stopped scheduler cannot answer it), and on a
    stopped or half-dead server it would only wait out its whole timeout."""
    return watch is not None and bool(watch() or watch_stopped(watch))


async def server_lost(base_url: str, config: SweepConfig, watch: DeathWatch | None) -> bool:
    """After a failed request or call: is the server gone for this point? The watch's word when it already
    knows, else the liveness probe, which waits ``config.probe_wait_s`` at most."""
    if watch_sees_trouble(watch):
        return True
    return not await server_alive(base_url, config.probe_wait_s)


async def watch_for_death(watch: DeathWatch, poll_s: float = WATCH_POLL_S) -> str:
    """Return as soon as ``watch()`` reports a dead server process (polled; psutil calls take microseconds)."""
    while True:
        death = watch()
        if death:
            return death
        await asyncio.sleep(poll_s)


async def run_phase(
    base_url: str,
    prompts: Sequence[Prompt],
    *,
    concurrency: int,
    phase: str,
    config: SweepConfig,
    sink: JsonlSink,
    on_done: Callable[[], None] = lambda: None,
    watch: DeathWatch | None = None,
) -> PhaseOutcome:
    """Closed loop: ``concurrency`` workers each take the next prompt as soon as their last one finished.

    ``t_scheduled`` is when a worker takes a prompt. When a request fails, the server is probed (``server_lost``:
    not when the watch already sees a member dead or stopped); once it is unreachable (or hangs: sglang 0.5.9's
    HTTP front outlives a killed scheduler), workers stop taking prompts,
    so a dead server ends the phase at once instead of after every remaining request has timed out. With
    ``watch`` (the server's process tree), a dead scheduler ends the phase within a poll interval: requests in
    flight are cancelled and recorded as failed with the dead process and its exit status.
    """
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for item in enumerate(prompts):
        queue.put_nowait(item)
    arrivals = arrival_times(len(prompts), config.request_rate, f"{config.seed}:{phase}:{concurrency}")
    started = time.perf_counter()
    records: list[RequestRecord] = []
    unreachable = asyncio.Event()
    died: list[str] = []

    async def worker(session: aiohttp.ClientSession) -> None:
        while not unreachable.is_set():
            try:
                index, prompt = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if arrivals is not None:  # open loop: wait for this request's arrival
                await asyncio.sleep(max(0.0, started + arrivals[index] - time.perf_counter()))
            record = RequestRecord(request_id=f"c{concurrency}-{phase}-{index:05d}", concurrency=concurrency,
                                   phase=phase, ok=False, t_scheduled=time.perf_counter(), prompt_index=index)
            try:
                await generate_once(session, base_url, prompt, record, config)
            except asyncio.CancelledError:  # the watch saw the server die: this request will never finish
                record.t_end = time.perf_counter()
                record.error = f"server died: {died[0] if died else 'cancelled'}"
                records.append(record)
                sink.write(record)
                return
            records.append(record)
            sink.write(record)
            on_done()
            if not record.ok and (record.t_sent is None or await server_lost(base_url, config, watch)):
                unreachable.set()

    cpu0 = time.process_time()
    async with make_session(concurrency, config) as session:
        workers = [asyncio.ensure_future(worker(session)) for _ in range(min(concurrency, len(prompts)))]
        watcher = asyncio.ensure_future(watch_for_death(watch)) if watch else None
        if watcher is not None:
            watcher.add_done_callback(lambda done: _on_death(done, died, unreachable, workers))
        try:
            outcomes = await asyncio.gather(*workers, return_exceptions=True)  # cancelled workers included
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    raise outcome
        finally:
            if watcher is not None and not watcher.done():
                watcher.cancel()
    return PhaseOutcome(records=records, not_sent=queue.qsize(), client_cpu_s=time.process_time() - cpu0,
                        server_lost=unreachable.is_set(), server_died=died[0] if died else None)


def arrival_times(count: int, rate: float | None, seed: str) -> list[float] | None:
    """Seconds after the phase starts at which each request arrives: a Poisson process at ``rate`` requests/s
    (exponential gaps from a seeded generator, so every arm gets the same arrivals); None for a closed loop."""
    if rate is None:
        return None
    rng = random.Random(f"eagle3lab:arrivals:{seed}")
    out, now = [], 0.0
    for _ in range(count):
        out.append(now)
        now += rng.expovariate(rate)
    return out


def _on_death(done: "asyncio.Future[str]", died: list[str], unreachable: asyncio.Event,
              workers: Sequence["asyncio.Future[None]"]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    died.append(done.result())
    unreachable.set()
    for task in workers:
        task.cancel()


async def fetch_json(base_url: str, path: str, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """GET a JSON endpoint; None when the server does not answer (that is the liveness probe too)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(f"{base_url}{path}") as resp:
                if resp.status != 200:
                    return None
                return await resp.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, ValueError):
        return None


async def flush_cache(base_url: str, attempts: int = 10, wait_s: float = 0.5) -> bool:
    """POST /flush_cache; sglang refuses (400) while requests are still running, so retry briefly."""
    for _ in range(attempts):
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
                async with session.post(f"{base_url}/flush_cache") as resp:
                    if resp.status == 200:
                        return True
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            return False
        await asyncio.sleep(wait_s)
    return False


async def server_alive(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Does the whole server still answer? ``/get_server_info`` goes through the scheduler, so a server whose
    HTTP front is up but whose scheduler died counts as dead (it cannot answer within the timeout). The sweep
    passes its ``probe_wait_s`` (see ``server_lost``)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(f"{base_url}/get_server_info") as resp:
                await resp.read()
                return True
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
        return False
