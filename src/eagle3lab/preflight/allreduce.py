"""The all-reduce smoke test (issue 41, item 5): the ``tp_size`` GPUs all-reduce a tensor of the size verify sends,
in a child with hard deadlines, before any server is launched.

Why: on 8 GPUs over PCIe with ACS or the IOMMU redirecting peer-to-peer traffic through the root complex, NCCL's
first collective hangs (or, rarely, returns wrong data), and sglang's launch then sits in its first all-reduce
until the ready timeout, after the checkpoint was read. Here the same hang takes seconds and becomes one line naming
the likely cause and what to do. A clean run reports the bandwidth it measured, as nccl-tests does: algbw is bytes
over time per all-reduce, busbw is algbw x 2(n-1)/n (the bytes each rank moves in a ring), as information.

The message: verify's hidden states, hidden size x draft tokens x batch (``max_running_requests``, or sglang
0.5.9's 48 for a speculative server) in the profile's activation dtype; the hidden size is the target's
config.json ``hidden_size``, or the incident's (Kimi-K2.5: 7168) while the target is not on disk. The backend and
device are parameters, so the tests run the same code with gloo on CPU.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from eagle3lab.childjson import ChildAnswer, ask_child
from eagle3lab.errors import ModelPathError
from eagle3lab.preflight.allreduce_child import INJECTIONS
from eagle3lab.preflight.result import Check, size_text
from eagle3lab.runtime import gpuinfo, modelinfo
from eagle3lab.runtime.profiles import Profile

NAME = "NCCL all-reduce"
CHILD = "eagle3lab.preflight.allreduce_child"
RUN_ENV = "EAGLE3LAB_ALLREDUCE_RUN"  # marks the child and its ranks (tests look for leftovers by it)
INCIDENT_HIDDEN = 7168  # Kimi-K2.5 config.json text_config.hidden_size (costmodel/data/configs/kimi-k2.5.json)
SPECULATIVE_MAX_RUNNING = 48  # sglang 0.5.9 server_args.py:2362-2363, an unset cap of a speculative server
WARMUP, ITERS = 2, 10  # the first all-reduces set NCCL's connections up; each one's sum is checked too
START_TIMEOUT_S = 300.0  # every rank imports torch, takes its GPU and joins the group
ALLREDUCE_TIMEOUT_S = 60.0  # a few MB twelve times take milliseconds; NCCL's connection set-up seconds
CHILD_SLACK_S = 60.0  # the child's own start and the ranks' exit, above both phases: then its process group dies
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
ACS_FIX = ("rerun with NCCL_P2P_DISABLE=1 to confirm (passing then points at P2P); disable ACS in the BIOS "
           "(sudo lspci -vvv | grep ACSCtl should show SrcValid-) or boot with iommu=pt; "
           "NCCL_DEBUG=INFO shows the transport each pair uses")


@dataclass(frozen=True)
class Message:
    """What one verify all-reduce sends."""

    hidden: int
    tokens: int
    dtype: str
    hidden_source: str

    @property
    def numel(self) -> int:
        return self.hidden * self.tokens

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class Deadlines:
    """The two phases' limits (tests shorten the all-reduce one: their injected hang waits it out)."""

    start_s: float = START_TIMEOUT_S
    allreduce_s: float = ALLREDUCE_TIMEOUT_S


def verify_message(profile: Profile, target_dir: str | None) -> Message:
    """Hidden size x draft tokens x batch, in the activation dtype the server runs."""
    hidden, source = INCIDENT_HIDDEN, "Kimi-K2.5's hidden_size: the target's config.json is not on disk"
    if target_dir:
        try:
            value = modelinfo.text_section(modelinfo.read_config(target_dir)).get("hidden_size")
        except ModelPathError:
            value = None
        if isinstance(value, int) and value > 0:
            hidden, source = value, "the target's config.json"
    batch = profile.max_running_requests or SPECULATIVE_MAX_RUNNING
    dtype = profile.dtype if profile.dtype in DTYPE_BYTES else "bfloat16"
    return Message(hidden, batch * profile.speculative_num_draft_tokens, dtype, source)


def bandwidth(nbytes: int, seconds: float, world: int) -> dict[str, float]:
    """nccl-tests' figures for an all-reduce: algbw = bytes / time, busbw = algbw x 2(n-1)/n (GB/s, 1e9)."""
    algbw = nbytes / seconds / 1e9
    return {"seconds": seconds, "algbw_gb_s": algbw, "busbw_gb_s": algbw * 2 * (world - 1) / world}


def run_allreduce(world: int, message: Message, *, backend: str, device: str, deadlines: Deadlines,
                  inject: str | None = None) -> tuple[ChildAnswer, str]:
    """Run the child; its answer and the run's marker (in the environment of the child and its ranks).
    ``inject`` is for tests only."""
    if inject is not None and inject not in INJECTIONS:
        raise ValueError(f"inject must be one of {INJECTIONS}")
    spec = {"world": world, "backend": backend, "device": device, "numel": message.numel, "dtype": message.dtype,
            "warmup": WARMUP, "iters": ITERS, "start_timeout_s": deadlines.start_s,
            "allreduce_timeout_s": deadlines.allreduce_s, "inject": inject}
    marker = uuid.uuid4().hex
    answer = ask_child(CHILD, [json.dumps(spec)], env={**os.environ, RUN_ENV: marker}, python=sys.executable,
                       timeout_s=deadlines.start_s + deadlines.allreduce_s + CHILD_SLACK_S)
    return answer, marker


def _skip(profile: Profile, inv: gpuinfo.GpuInventory | None, device: str) -> str | None:
    if profile.tp_size == 1:
        return "tp_size 1: no all-reduce between GPUs"
    if device != "cuda":
        return None
    if profile.device != "cuda":
        return f"profile {profile.name} runs on {profile.device}: no GPUs to all-reduce between"
    if inv is None or inv.count < profile.tp_size:
        return f"fewer CUDA GPUs than tp_size {profile.tp_size} (see GPUs)"
    return None


def check_allreduce(profile: Profile, inv: gpuinfo.GpuInventory | None, target_dir: str | None, *,
                    backend: str = "nccl", device: str = "cuda", deadlines: Deadlines = Deadlines(),
                    inject: str | None = None) -> Check:
    """``tp_size`` ranks all-reduce verify's message ``WARMUP + ITERS`` times; one line for a pass (with the
    bandwidth), a hang, a wrong sum, an error, or why it was skipped."""
    skipped = _skip(profile, inv, device)
    if skipped:
        return Check(NAME, "skipped", skipped)
    world = profile.tp_size
    message = verify_message(profile, target_dir)
    child, marker = run_allreduce(world, message, backend=backend, device=device, deadlines=deadlines,
                                        inject=inject)
    what = (f"{world} ranks ({backend} on {device}) all-reduce {size_text(message.nbytes)} ({message.dtype}, "
            f"hidden {message.hidden} x {message.tokens} verify tokens)")
    data: dict[str, Any] = {"message": {**asdict(message), "nbytes": message.nbytes}, "backend": backend,
                            "device": device, "world": world, "deadlines": asdict(deadlines), "run": marker,
                            "answer": child.payload}
    answer = child.payload if isinstance(child.payload, dict) else None
    if answer is None:
        if child.timed_out:
            return Check(NAME, "fail", f"{what}: the test itself stopped answering and was killed after "
                                       f"{deadlines.start_s + deadlines.allreduce_s + CHILD_SLACK_S:.0f} s, "
                                       "likely a peer-to-peer hang (ACS or the IOMMU on a PCIe box)", ACS_FIX, data)
        return Check(NAME, "fail", f"{what}: the test's child failed ({child.failure()})",
                     f"NCCL_DEBUG=INFO python -m eagle3lab preflight --profile {profile.name} shows why", data)
    status = answer.get("status")
    if status == "no_gpus":
        return Check(NAME, "skipped", f"torch sees {answer.get('visible_gpus')} CUDA GPUs here, fewer than tp_size "
                                      f"{world}: not run", data=data)
    if status == "hang":
        done = sorted(int(r) for r in answer.get("done", {}))
        stuck = [r for r in range(world) if r not in done]
        if answer.get("phase") == "start-up":
            return Check(NAME, "fail", f"{what}: ranks {_ranks(r for r in range(world) if r not in answer['ready'])} "
                                       f"did not join the group within {deadlines.start_s:.0f} s",
                         "NCCL_DEBUG=INFO shows where they wait; check that no other process holds the GPUs", data)
        return Check(NAME, "fail", f"{what}: hung, rank{'s' if len(stuck) > 1 else ''} {_ranks(stuck)} did not "
                                   f"finish within {deadlines.allreduce_s:.0f} s (the peer-to-peer hang of PCIe boxes "
                                   "with ACS or the IOMMU on)", ACS_FIX, data)
    if status == "error":
        rank, error = next(iter(answer.get("errors", {}).items()))
        return Check(NAME, "fail", f"{what}: {backend} error on rank {rank}: {error.get('error')}",
                     f"NCCL_DEBUG=INFO python -m eagle3lab preflight --profile {profile.name} shows why", data)
    done = answer.get("done", {})
    if status == "wrong":
        bad = {r: v for r, v in done.items() if v["bad_elements"]}
        worst = max(v["max_error"] for v in bad.values())
        return Check(NAME, "fail", f"{what}: wrong sum on rank{'s' if len(bad) > 1 else ''} {', '.join(bad)} "
                                   f"({max(v['bad_elements'] for v in bad.values())} of {message.numel} elements off "
                                   f"by up to {worst:g}): data is corrupted between GPUs", ACS_FIX, data)
    if status != "ok":
        return Check(NAME, "fail", f"{what}: the test's child answered status {status!r}",
                     f"NCCL_DEBUG=INFO python -m eagle3lab preflight --profile {profile.name}", data)
    data["bandwidth"] = bw = bandwidth(message.nbytes, max(v["seconds"] for v in done.values()), world)
    return Check(NAME, "ok", f"{what} {WARMUP + ITERS} times, every sum right: {bw['seconds'] * 1e6:,.0f} us each, "
                             f"algbw {bw['algbw_gb_s']:.2f} GB/s, busbw {bw['busbw_gb_s']:.2f} GB/s "
                             "(nccl-tests' 2(n-1)/n; slowest rank)", data=data)


def _ranks(ranks: Any) -> str:
    return ", ".join(str(r) for r in ranks)
