"""The host's memory copy bandwidth, measured once during a run and kept with that run's benchmark record, and the
GPUs the run measured on, by name.

Why: the cost model's CPU deployment needs this machine's memory bandwidth. It used to be probed when a figure was
drawn, minutes after the servers measured the plain step it is calibrated against; on a busy machine the probe came
out so low that the model's floor rose above the measured step and the figure failed the whole run. A probe taken
during the benchmark and stored in ``bench_report.json`` is read back by every later figure and sentence instead.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Optional

import numpy as np

from eagle3lab.errors import BenchError

COPY_BANDWIDTH_KEY = "copy_bandwidth_bytes_per_s"  # in ``BenchReport.machine``
COPY_BANDWIDTH_HOW = "numpy copy of 256 MiB, read + write counted, best of 3"
GPUS_KEY = "gpus"  # in ``BenchReport.machine``: the GPUs torch saw, by name, in device order (cuda profiles)


def copy_bandwidth(nbytes: int = 256 * 1024**2, repeats: int = 3) -> float:
    """Bytes/s of a large numpy copy on this machine (read + write counted), best of ``repeats``."""
    if nbytes < 1024 or repeats < 1:
        raise BenchError(f"bandwidth probe: need nbytes >= 1024 and repeats >= 1, got {nbytes}, {repeats}")
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / max(best, 1e-9)


def recorded_copy_bandwidth(machine: Mapping[str, Any] | None) -> Optional[float]:
    """The bandwidth a benchmark record's ``machine`` holds, or None (a record from before it was kept, or a value
    that is not a positive finite number)."""
    value = (machine or {}).get(COPY_BANDWIDTH_KEY)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def recorded_gpus(machine: Mapping[str, Any] | None) -> list[str]:
    """The GPU names a benchmark record's ``machine`` holds, in device order; empty for a cpu run, a run where torch
    saw none, or a record from before they were kept. The cost model reads the GPU the run measured from these."""
    value = (machine or {}).get(GPUS_KEY)
    if not isinstance(value, list):
        return []
    return [name for name in value if isinstance(name, str)]
