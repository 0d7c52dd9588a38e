"""Fork, not spawn, sglang's scheduler and detokenizer on a CPU run: a start-up cost, not a behaviour.

sglang 0.5.9 sets multiprocessing's start method to "spawn" (``_set_envs_and_config`` in
``sglang/srt/entrypoints/engine.py``) because a forked child cannot use a CUDA context its parent created. A
spawned child starts a fresh Python that imports sglang and torch again, though the launcher imported them moments
before: on a 2-core machine that is two more imports of about 20 s of CPU each, beside the launcher's own. A CPU run
has no CUDA context, so the harness forks the same children, running the same functions with the same arguments:
measured on the ``cpu`` profile's baseline, 2026-12-02, 2 cores, a server ready in 24.5-25.7 s instead of
35.3-36.6 s (two launches each, alternating). Only ``cpu_environment`` sets the variable; a GPU launch keeps spawn.
"""

from __future__ import annotations

import functools
import multiprocessing
from types import ModuleType
from typing import Mapping

from eagle3lab.runtime.cpu_harness.hooks import when_imported

FORK_ENV = "EAGLE3LAB_FORK_SUBPROCESSES"
ENGINE_MODULE = "sglang.srt.entrypoints.engine"


def _fork_after_sglang_sets_spawn(engine: ModuleType) -> None:
    original = engine._set_envs_and_config

    @functools.wraps(original)
    def _set_envs_and_config(server_args):  # type: ignore[no-untyped-def]
        result = original(server_args)
        multiprocessing.set_start_method("fork", force=True)
        return result

    engine._set_envs_and_config = _set_envs_and_config  # type: ignore[attr-defined]  # sglang's, untyped


def install_from_environment(environ: Mapping[str, str]) -> bool:
    """Fork sglang's subprocesses in this process when ``FORK_ENV`` is "1"; True if installed."""
    if environ.get(FORK_ENV, "").strip() != "1":
        return False
    when_imported(ENGINE_MODULE, _fork_after_sglang_sets_spawn)
    return True
