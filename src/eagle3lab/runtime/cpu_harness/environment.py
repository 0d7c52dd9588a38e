"""The environment variables that let real sglang 0.5.9 start on a CPU-only machine.

Each one answers an obstacle of the package docstring's list: the stub driver library (1), CPU engine, cuDNN check, offline hub and
OpenMP binding (2), and the shims (7-9) through a ``sitecustomize`` that also reaches sglang's subprocesses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from eagle3lab.runtime.cpu_harness.libcuda_stub import build_libcuda_stub
from eagle3lab.runtime.cpu_harness.shims import CONTROL_SHIMS, SHIMS_ENV, check_shim_names
from eagle3lab.runtime.cpu_harness.start_method import FORK_ENV

TRITON_INTERPRET_ENV = "TRITON_INTERPRET"
# sglang compiles a few small functions with torch.compile (the overlap scheduler's future-token resolver on every
# baseline server, MoE top-k), and on CPU inductor first probes which vector ISAs work: for each ISA in
# /proc/cpuinfo it builds a test library and loads it in a fresh Python that imports torch. That probe runs again in
# every server process: measured 11-12 s of CPU per serving launch on a 2-core machine (py-spy, 2026-12-02), more than
# the weights take to load. With this variable inductor takes cpuinfo's ISAs as they are, the same pick wherever the
# compiler builds what the CPU reports (tests/runtime/test_cpu_harness.py checks that on the machine it runs on).
VEC_ISA_TRUST_ENV = "TORCHINDUCTOR_VEC_ISA_OK"
# Past the probe, those torch.compile'd functions still cost every server process a dynamo trace and a load of
# inductor's C++ from its cache, before the first request: on a GPU host that is once per launch among minutes of
# loading; here it was 8-9 s of a 21-22 s baseline launch to ready (2 cores, alternated launches, 2026-12-03). With
# this variable torch.compile returns the same sglang functions uncompiled, so they run eagerly: the same Python code
# and torch ops on both arms of a comparison (a CPU run has no Triton to compile them into), ready in 13-14 s.
EAGER_ENV = "TORCHDYNAMO_DISABLE"
SITE_DIR = Path(__file__).resolve().parent / "site"
# The folder that holds the eagle3lab package, so the sitecustomize can import it even without an install.
PACKAGE_PARENT = Path(__file__).resolve().parents[3]


def _prepend(path: Path | str, existing: str | None) -> str:
    return f"{path}{os.pathsep}{existing}" if existing else str(path)


def cpu_environment(
    shims: Sequence[str] = CONTROL_SHIMS,
    base: Mapping[str, str] | None = None,
    omp_threads_bind: str | None = None,
    speculative: bool = False,
) -> dict[str, str]:
    """Variables to add to ``base`` (default ``os.environ``) for a CPU sglang run; merge with ``{**base, **env}``.

    ``shims=()`` gives the bare harness (stub + variables), which is all the crash reproduction needs.
    ``omp_threads_bind`` defaults to all cores of this machine ("0-N"), because tp 1 on CPU has no NUMA autodetect.
    ``VEC_ISA_TRUST_ENV`` skips inductor's per-process ISA probe and ``EAGER_ENV`` runs sglang's torch.compile'd
    functions eagerly (see their comments), and ``FORK_ENV`` forks sglang's subprocesses instead of spawning them
    (``start_method.py``); a value the caller already set wins. ``speculative`` adds ``TRITON_INTERPRET=1``: the
    EAGLE loop's bookkeeping kernels (spec_utils.py) are Triton
    kernels, and Triton has no CPU driver, so they run in Triton's interpreter. A server without speculation
    never gets it (its forward has no Triton kernels on CPU, and nothing should change its timing).
    """
    base = os.environ if base is None else base
    chosen = check_shim_names(shims)
    stub_dir = build_libcuda_stub()
    cores = os.cpu_count() or 1
    env = {
        "LD_LIBRARY_PATH": _prepend(stub_dir, base.get("LD_LIBRARY_PATH")),
        "SGLANG_USE_CPU_ENGINE": "1",
        "SGLANG_DISABLE_CUDNN_CHECK": "1",
        "HF_HUB_OFFLINE": "1",
        "SGLANG_CPU_OMP_THREADS_BIND": omp_threads_bind or f"0-{cores - 1}",
        SHIMS_ENV: ",".join(chosen),
        "PYTHONPATH": _prepend(SITE_DIR, _prepend(PACKAGE_PARENT, base.get("PYTHONPATH"))),
        VEC_ISA_TRUST_ENV: base.get(VEC_ISA_TRUST_ENV, "1"),
        EAGER_ENV: base.get(EAGER_ENV, "1"),
        FORK_ENV: base.get(FORK_ENV, "1"),
    }
    if speculative:
        env[TRITON_INTERPRET_ENV] = "1"
    return env
