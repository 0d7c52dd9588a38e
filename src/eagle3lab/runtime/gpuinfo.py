"""The CUDA GPUs this machine offers, as torch and nvidia-smi see them, read without keeping a CUDA context.

torch is asked in a child process (``python -m eagle3lab.runtime.gpuinfo``): querying device properties creates a
CUDA context, and a notebook kernel that kept one would hold memory on GPU 0 for the whole run, which sglang then
cannot use. nvidia-smi, where present, adds the driver version and the interconnect matrix (``topo -m``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eagle3lab.childjson import ask_child, emit

LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")


@dataclass
class Gpu:
    index: int
    name: str
    capability: tuple[int, int]
    memory_bytes: int

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def memory_gib(self) -> float:
        return round(self.memory_bytes / 2**30, 1)


@dataclass
class GpuInventory:
    """What torch (the library sglang uses) and nvidia-smi report; ``error`` when torch could not be asked."""

    count: int
    gpus: list[Gpu] = field(default_factory=list)
    torch_arch_list: list[str] = field(default_factory=list)  # the architectures torch was compiled for
    torch_version: str | None = None
    torch_cuda: str | None = None
    driver: str | None = None
    topology: str | None = None  # ``nvidia-smi topo -m`` verbatim
    error: str | None = None
    cudnn_version: int | None = None  # torch.backends.cudnn.version(), e.g. 91002 for 9.10.2
    used_mib: list[int] | None = None  # memory in use per GPU (nvidia-smi), before anything of ours runs

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [{**asdict(g), "sm": g.sm, "memory_gib": g.memory_gib} for g in self.gpus]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GpuInventory":
        gpus = [Gpu(g["index"], g["name"], tuple(g["capability"]), g["memory_bytes"])  # type: ignore[arg-type]
                for g in data.get("gpus", [])]
        return cls(**{**{k: v for k, v in data.items() if k != "gpus"}, "gpus": gpus})


def _nvidia_smi(*args: str, timeout_s: float = 20.0) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def links(topology: str | None) -> dict[str, int]:
    """How many GPU pairs are joined by each kind of link in a ``topo -m`` matrix (NV# = NVLink)."""
    if not topology:
        return {}
    rows = [line.split() for line in topology.splitlines() if re.match(r"^GPU\d+\s", line)]
    count = len(rows)
    tally: dict[str, int] = {}
    for i, row in enumerate(rows):
        for j, cell in enumerate(row[1:count + 1]):
            if j > i and LINK.match(cell):
                kind = "NVLink" if cell.startswith("NV") else cell
                tally[kind] = tally.get(kind, 0) + 1
    return tally


def no_driver() -> bool:
    """No NVIDIA kernel driver: no control device and no nvidia-smi. CUDA cannot see a GPU then, so torch
    need not be asked (its import alone takes seconds)."""
    return not Path("/dev/nvidiactl").exists() and shutil.which("nvidia-smi") is None


def inventory(python: str = sys.executable, timeout_s: float = 120.0) -> GpuInventory:
    """Ask torch in a child process, and nvidia-smi if it is installed."""
    if no_driver():
        return GpuInventory(0, error="no NVIDIA driver: neither /dev/nvidiactl nor nvidia-smi")
    answer = ask_child("eagle3lab.runtime.gpuinfo", timeout_s=timeout_s, python=python)
    if answer.ok:
        found = GpuInventory.from_dict(answer.payload)
    elif answer.timed_out:
        found = GpuInventory(0, error=f"torch did not answer within {timeout_s:.0f} s")
    else:
        found = GpuInventory(0, error=f"torch could not be asked: {answer.failure()}")
    found.driver = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    if found.driver:
        found.driver = found.driver.splitlines()[0].strip()
    found.topology = _nvidia_smi("topo", "-m")
    used = _nvidia_smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
    if used:
        try:
            found.used_mib = [int(float(line.strip())) for line in used.splitlines() if line.strip()]
        except ValueError:
            found.used_mib = None
    return found


def _torch_inventory() -> GpuInventory:
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA initialization: ..." when there is no driver: count 0 says it
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpus = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        gpus.append(Gpu(index, props.name, (props.major, props.minor), int(props.total_memory)))
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 -- no cuDNN library: the check reports None
        cudnn = None
    return GpuInventory(count, gpus, list(torch.cuda.get_arch_list()) if count else [], torch.__version__,
                        torch.version.cuda, cudnn_version=cudnn)


if __name__ == "__main__":
    emit(_torch_inventory().to_dict())
