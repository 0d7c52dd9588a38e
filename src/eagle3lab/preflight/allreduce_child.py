"""The all-reduce smoke test's child (``python -m eagle3lab.preflight.allreduce_child SPEC_JSON``): it starts one
process per rank, each joins a ``torch.distributed`` group (nccl on GPUs, gloo on CPU in the tests) and all-reduces
a tensor of verify's size a few times, and it answers one JSON line (``childjson``) with the ranks' sums and times.

Why a child with two phase deadlines: on PCIe boxes with ACS or the IOMMU redirecting peer-to-peer traffic, NCCL's
first collective can hang for ever. The ranks first report that they joined the group (the start-up deadline covers
torch's import and each GPU's context); the all-reduce deadline then starts, and a rank that has not answered by it
is a hang. Either way this child kills and reaps its ranks and still answers; the caller's hard timeout kills the
whole process group if this child itself stops answering. Not imported by the package: it runs as ``-m`` only.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import tempfile
import time
import traceback
from multiprocessing import get_context
from multiprocessing.process import BaseProcess
from collections.abc import Sequence
from typing import Any

from eagle3lab.childjson import emit

HANG = "hang"  # injected by tests: the last rank joins the group, then never all-reduces
WRONG_SUM = "wrong-sum"  # injected by tests: rank 0 corrupts one element of its result
INJECTIONS = (HANG, WRONG_SUM)
POLL_S = 0.2
EXIT_GRACE_S = 10.0  # after a clean run, how long the ranks get to leave the group before they are killed


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def rank_main(rank: int, spec: dict[str, Any], results: Any) -> None:
    """One rank: join the group, say so, all-reduce ``warmup + iters`` times, check every sum, time the rest."""
    try:
        import torch
        import torch.distributed as dist

        device = torch.device(spec["device"], rank) if spec["device"] == "cuda" else torch.device("cpu")
        if spec["device"] == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(spec["backend"], init_method=spec["init_method"], rank=rank,
                                world_size=spec["world"])
        results.put(("ready", rank, os.getpid()))
        if spec.get("inject") == HANG and rank == spec["world"] - 1:
            time.sleep(10**6)
        world = spec["world"]
        expected = world * (world + 1) / 2  # rank r sends r + 1 everywhere: small integers, exact in bf16
        source = torch.full((spec["numel"],), float(rank + 1), dtype=getattr(torch, spec["dtype"]), device=device)
        bad = 0
        max_error = 0.0

        def once() -> Any:
            tensor = source.clone()
            dist.all_reduce(tensor)
            return tensor

        for _ in range(spec["warmup"]):
            out = once()
            if spec.get("inject") == WRONG_SUM and rank == 0:
                out[0] += 1
            error = (out.float() - expected).abs()
            bad = max(bad, int((error > 0).sum()))
            max_error = max(max_error, float(error.max()))
        sync = torch.cuda.synchronize if spec["device"] == "cuda" else (lambda: None)
        dist.barrier()
        sync()
        started = time.perf_counter()
        for _ in range(spec["iters"]):
            out = once()
        sync()
        seconds = (time.perf_counter() - started) / spec["iters"]
        error = (out.float() - expected).abs()
        bad = max(bad, int((error > 0).sum()))
        max_error = max(max_error, float(error.max()))
        results.put(("result", rank, {"bad_elements": bad, "max_error": max_error, "seconds": seconds}))
        dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - any failure of a rank is the answer, in one line
        results.put(("error", rank, {"error": _first_line(exc), "trace": traceback.format_exc()[-2000:]}))


def _stop(procs: Sequence[BaseProcess], grace_s: float) -> None:
    """Give the ranks ``grace_s`` to leave on their own, then kill and reap the rest: nothing outlives this child."""
    deadline = time.monotonic() + grace_s
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=10)


def _collect(procs: Sequence[BaseProcess], results: Any, kind: str, seen: dict[int, Any], deadline: float,
             errors: dict[int, Any]) -> bool:
    """Read messages until every rank sent ``kind`` (True), one failed, or the deadline passed (False)."""
    while len(seen) < len(procs) and not errors:
        if time.monotonic() > deadline:
            return False
        try:
            what, rank, payload = results.get(timeout=POLL_S)
        except queue.Empty:
            for rank, proc in enumerate(procs):
                if proc.exitcode not in (None, 0) and rank not in seen:
                    errors[rank] = {"error": f"rank {rank} exited with code {proc.exitcode} before it answered"}
            continue
        if what == "error":
            errors[rank] = payload
        elif what == kind:
            seen[rank] = payload
    return not errors


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Start the ranks, wait through both phases, stop them, and say what happened."""
    import torch
    import torch.distributed as dist

    answer: dict[str, Any] = {"spec": spec, "pids": []}
    if spec["device"] == "cuda":
        visible = torch.cuda.device_count()
        answer["visible_gpus"] = visible
        if visible < spec["world"]:
            return {**answer, "status": "no_gpus"}
    if not dist.is_available() or not dist.is_backend_available(spec["backend"]):
        return {**answer, "status": "error", "errors": {"-1": {"error": f"torch has no {spec['backend']} backend"}}}
    ctx = get_context("spawn")
    results = ctx.Queue()
    store = tempfile.TemporaryDirectory(prefix="eagle3lab-allreduce-")
    spec = {**spec, "init_method": f"file://{store.name}/store"}
    procs = [ctx.Process(target=rank_main, args=(rank, spec, results), daemon=True) for rank in range(spec["world"])]
    ready: dict[int, Any] = {}
    done: dict[int, Any] = {}
    errors: dict[int, Any] = {}
    phase = "start"
    try:
        for proc in procs:
            proc.start()
        answer["pids"] = [proc.pid for proc in procs]
        if not _collect(procs, results, "ready", ready, time.monotonic() + spec["start_timeout_s"], errors):
            phase = "start-up"
        elif not _collect(procs, results, "result", done, time.monotonic() + spec["allreduce_timeout_s"], errors):
            phase = "all-reduce"
        else:
            phase = "done"
    finally:
        _stop([proc for proc in procs if proc.pid is not None], EXIT_GRACE_S if phase == "done" else 0.0)
        store.cleanup()
    answer.update(ready=sorted(ready), done={str(r): v for r, v in sorted(done.items())},
                  errors={str(r): v for r, v in sorted(errors.items())}, phase=phase,
                  exitcodes=[proc.exitcode for proc in procs])
    if errors:
        return {**answer, "status": "error"}
    if phase != "done":
        return {**answer, "status": "hang"}
    wrong = any(v["bad_elements"] for v in done.values())
    return {**answer, "status": "wrong" if wrong else "ok"}


def main(argv: list[str]) -> int:
    emit(run(json.loads(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
