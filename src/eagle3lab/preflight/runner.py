"""Every check of a profile in order, the result saved, and the one-line refusal a run starts with."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable
from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import PreflightFailed
from eagle3lab.paths import repo_dir
from eagle3lab.runtime import deployment, gpuinfo
from eagle3lab.runtime.profiles import Profile
from eagle3lab.preflight.result import Check, Preflight, SLOW, passed_over
from eagle3lab.preflight.hardware import (check_capability, check_cudnn, check_driver, check_gpu_count,
                                          check_idle, check_interconnect, check_sgl_kernel)
from eagle3lab.preflight.install import check_checkpoint, check_disk, check_sglang
from eagle3lab.preflight.flags import FULL_CHECK, check_full_server_args, check_server_flags
from eagle3lab.preflight.layers import check_capture_order, check_first_raise, check_layers
from eagle3lab.preflight.memory import KV, MEMORY, check_memory
from eagle3lab.preflight.loads import check_loads
from eagle3lab.preflight.host import HostFacts, check_host, read_host_facts
from eagle3lab.preflight.allreduce import NAME as ALLREDUCE, check_allreduce


def _not_run(name: str, profile: Profile) -> Check:
    """The row of a slow check a quick run leaves out once something failed."""
    return Check(name, "skipped", "not run: an earlier check failed",
                 f"python -m eagle3lab preflight --profile {profile.name} runs every check")


def run_preflight(profile: Profile, *, quick: bool = False,
                  inventory: Callable[[], gpuinfo.GpuInventory] = gpuinfo.inventory,
                  host: Callable[[], HostFacts] | None = None) -> Preflight:
    """Every check for ``profile``. ``quick`` skips sglang's parser (seconds of import) and the all-reduce test
    (seconds of starting ``tp_size`` ranks) once a check has failed:
    the run stops anyway, and ``python -m eagle3lab preflight`` runs everything. ``inventory`` and ``host`` read
    the GPUs and the host (``read_host_facts`` when None; tests describe a box through them)."""
    started = time.monotonic()
    result = Preflight(profile.name, quick=quick)
    reason = passed_over(profile)
    if reason:
        result.passed_over = reason
        return result
    inv = inventory() if profile.device == "cuda" else None
    result.checks += [check_gpu_count(profile, inv), check_capability(inv, profile.tp_size), check_sglang(profile)]
    target, draft, _ = deployment.locate_models(profile)
    result.checks += [check_checkpoint(profile, target), check_checkpoint(profile, draft)]
    memory_at = len(result.checks)
    facts = (host or read_host_facts)()
    result.checks += [check_disk([target, draft]), *check_host(profile, facts, target.bytes if target.present else 0),
                      check_loads(profile, target)]
    models = deployment.Models(target.path or target.source, draft.path or draft.source,
                               trust_remote_code=profile.trust_remote_code)
    skip_slow = quick and bool(result.failures)
    if skip_slow:
        result.checks += [_not_run(f"{name} ({label})", profile) for name in (SLOW, FULL_CHECK)
                          for label in ("baseline", "EAGLE-3")]
    else:
        result.checks += check_server_flags(profile, models, validate=target.present and draft.present,
                                            gpus=inv.count if inv else 0)
        result.checks += check_full_server_args(profile, models, target.present and draft.present)
    memory = ([Check(name, "skipped", "not run: an earlier check failed") for name in
               (f"{KV} (baseline)", f"{KV} (EAGLE-3)", MEMORY)] if skip_slow else
              check_memory(profile, inv, target.path, models))
    result.checks[memory_at:memory_at] = memory
    result.checks += [check_layers(profile), check_first_raise(profile, result, inv), check_capture_order(profile),
                      check_driver(inv),
                      check_cudnn(profile, inv), check_sgl_kernel(inv, profile.tp_size),
                      check_idle(inv, profile.tp_size), check_interconnect(inv)]
    result.checks.append(_not_run(ALLREDUCE, profile) if quick and result.failures else
                         check_allreduce(profile, inv, target.path))
    result.seconds = round(time.monotonic() - started, 2)
    return result


def save(result: Preflight) -> Path:
    """``artifacts/preflight.<profile>.json``."""
    return write_json_atomic(repo_dir("artifacts") / f"preflight.{result.profile}.json", result.to_dict())


def require(profile: Profile, *, quick: bool = True, echo: Callable[[str], None] | None = print) -> Preflight:
    """Run the checks, save them, show them, and stop with one line naming the first problem and its fix."""
    result = run_preflight(profile, quick=quick)
    if result.passed_over is None:
        save(result)
    if echo is not None:
        echo(result.text())
    if not result.ok:
        raise PreflightFailed(result.problem_line(), check=result.failures[0].name, profile=result.profile,
                              failed=tuple(c.name for c in result.failures))
    return result


def as_json(result: Preflight) -> str:
    return json.dumps(result.to_dict(), indent=1, default=str)
