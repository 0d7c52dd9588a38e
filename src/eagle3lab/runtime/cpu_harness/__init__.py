"""CPU-only harness for real sglang 0.5.9: stub CUDA driver, environment, import-time shims.

Used only by the ``cpu`` profile. Nothing here touches the Kimi-K2.5 wrapper: the crash under study stays real.
"""

from eagle3lab.runtime.cpu_harness.environment import cpu_environment
from eagle3lab.runtime.cpu_harness.libcuda_stub import build_libcuda_stub, driver_symbols, sgl_kernel_libraries
from eagle3lab.runtime.cpu_harness.shims import ALL_SHIMS, CONTROL_SHIMS, SHIMS, SPEC_SHIMS, Shim, install

__all__ = [
    "ALL_SHIMS",
    "CONTROL_SHIMS",
    "SHIMS",
    "SPEC_SHIMS",
    "Shim",
    "build_libcuda_stub",
    "cpu_environment",
    "driver_symbols",
    "install",
    "sgl_kernel_libraries",
]
