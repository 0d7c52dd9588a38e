"""The checks of the host around the GPUs (issue 41, item 5): what a GPU launch needs from the machine besides the
GPUs, each a fact read once (``HostFacts``) and judged by a check that takes the facts, so a test can describe any
box without changing the logic.

- ``/dev/shm``: NCCL moves tensors between the TP ranks of one host through POSIX shared memory; Docker gives a
  container 64 MiB unless told otherwise, and NCCL's own troubleshooting guide asks for ``--shm-size=1g``.
- host RAM against the checkpoint: with less RAM than the checkpoint, the page cache cannot keep it, so every
  launch reads it from disk again (the ready timeout counts that read; preflight's "weight loads" row).
- ``Python.h`` and a C compiler: Triton builds its launcher at first use with ``CC`` (or gcc, or clang) and the
  interpreter's include folder (triton/runtime/build.py); sglang's GPU path runs Triton kernels.
- ``libnuma.so.1``: sgl-kernel 0.3.21's ``common_ops`` libraries link it (``readelf -d``: NEEDED), so
  ``import sgl_kernel`` fails without it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

from eagle3lab.runtime.profiles import Profile
from eagle3lab.preflight.result import Check, size_text

SHM = "/dev/shm"
SHM_MIN_BYTES = 2**30  # NCCL's troubleshooting guide, "Docker": --shm-size=1g
SHM_SOURCE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
HOST_RAM = "host RAM"
TRITON_BUILD = "Triton build"
LIBNUMA = "libnuma"
LIBNUMA_SONAME = "libnuma.so.1"  # NEEDED by sgl_kernel/sm90/common_ops.abi3.so and sm100/ (sgl-kernel 0.3.21)


@dataclass(frozen=True)
class HostFacts:
    """What the host checks read from the machine; ``None`` where it could not be read."""

    shm_bytes: int | None
    ram_bytes: int | None
    python_include: str
    python_h: bool
    compiler: str | None
    libnuma: bool


def python_include() -> str:
    """The include folder Triton's launcher build passes to the compiler (triton/runtime/build.py: the default
    scheme, with Debian's ``posix_local`` read as ``posix_prefix``)."""
    scheme = sysconfig.get_default_scheme()
    return sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]


def c_compiler() -> str | None:
    """The compiler Triton would run: ``CC`` when set, else gcc, else clang (triton/runtime/build.py)."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    return shutil.which("gcc") or shutil.which("clang")


def _loads(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def read_host_facts() -> HostFacts:
    """The facts of this machine."""
    try:
        vfs = os.statvfs(SHM)
        shm: int | None = vfs.f_blocks * vfs.f_frsize
    except OSError:
        shm = None
    try:
        ram: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        ram = None
    include = python_include()
    return HostFacts(shm, ram, include, (Path(include) / "Python.h").is_file(), c_compiler(), _loads(LIBNUMA_SONAME))


def _not_gpu(profile: Profile, name: str) -> Check | None:
    if profile.device != "cuda":
        return Check(name, "skipped", f"profile {profile.name} runs on {profile.device}: the GPU path's host needs "
                                      "do not apply")
    return None


def check_shm(profile: Profile, facts: HostFacts) -> Check:
    """Shared memory for NCCL between the ranks of one host."""
    skipped = _not_gpu(profile, SHM)
    if skipped:
        return skipped
    data = {**asdict(facts), "min_bytes": SHM_MIN_BYTES, "source": SHM_SOURCE}
    if facts.shm_bytes is None:
        return Check(SHM, "fail" if profile.tp_size > 1 else "warn", f"{SHM} is not mounted: NCCL's shared-memory "
                     "transport between ranks has nowhere to go", "mount a tmpfs at /dev/shm (in Docker: "
                     "--shm-size=1g or --ipc=host)", data)
    size = f"{SHM} is {size_text(facts.shm_bytes)}"
    if profile.tp_size == 1:
        return Check(SHM, "info", f"{size}; tp_size 1 runs no NCCL between ranks", data=data)
    if facts.shm_bytes < SHM_MIN_BYTES:
        return Check(SHM, "fail", f"{size}, below the 1 GiB NCCL asks for to move tensors between "
                                  f"{profile.tp_size} ranks (Docker's default is 64 MiB)",
                     "run the container with --shm-size=1g or more, or --ipc=host", data)
    return Check(SHM, "ok", f"{size} for NCCL between {profile.tp_size} ranks (NCCL asks for 1 GiB)", data=data)


def check_host_ram(profile: Profile, facts: HostFacts, checkpoint_bytes: int) -> Check:
    """Host RAM against the target checkpoint: below it, every launch reads the checkpoint from disk again."""
    skipped = _not_gpu(profile, HOST_RAM)
    if skipped:
        return skipped
    data = {"ram_bytes": facts.ram_bytes, "checkpoint_bytes": checkpoint_bytes}
    if facts.ram_bytes is None:
        return Check(HOST_RAM, "warn", "the host's memory could not be read", data=data)
    ram = f"{size_text(facts.ram_bytes)} of host RAM"
    if not checkpoint_bytes:
        return Check(HOST_RAM, "info", f"{ram}; the target checkpoint's size is not known yet (not on disk)",
                     data=data)
    if facts.ram_bytes < checkpoint_bytes:
        return Check(HOST_RAM, "warn", f"{ram}, less than the target checkpoint's {size_text(checkpoint_bytes)}: "
                                       "the page cache cannot keep it, so every launch reads it from disk again",
                     "expect each full-weight load at disk speed (set checkpoint_read_mb_s to the disk's measured "
                     "read speed), or use a host with more RAM", data)
    return Check(HOST_RAM, "ok", f"{ram} holds the target checkpoint's {size_text(checkpoint_bytes)} in the page "
                                 "cache after the first load", data=data)


def check_triton_build(profile: Profile, facts: HostFacts) -> Check:
    """``Python.h`` and a C compiler, which Triton needs to build its launcher at first use."""
    skipped = _not_gpu(profile, TRITON_BUILD)
    if skipped:
        return skipped
    data = {"python_include": facts.python_include, "python_h": facts.python_h, "compiler": facts.compiler}
    missing = ([f"Python.h (not in {facts.python_include})"] if not facts.python_h else []) + (
        ["a C compiler (CC, gcc or clang)"] if facts.compiler is None else [])
    if missing:
        return Check(TRITON_BUILD, "fail", f"Triton cannot build its launcher at first use: no {' and no '.join(missing)}",
                     "install the Python headers and a compiler (Debian/Ubuntu: apt-get install python3-dev gcc; "
                     "for a non-system Python, its own -dev package), or set CC", data)
    return Check(TRITON_BUILD, "ok", f"Python.h in {facts.python_include} and {facts.compiler} for Triton's launcher",
                 data=data)


def check_libnuma(profile: Profile, facts: HostFacts) -> Check:
    """``libnuma.so.1``, which sgl-kernel's op libraries link."""
    skipped = _not_gpu(profile, LIBNUMA)
    if skipped:
        return skipped
    if not facts.libnuma:
        return Check(LIBNUMA, "fail", f"{LIBNUMA_SONAME} does not load: import sgl_kernel fails (its common_ops "
                                      "libraries link it)", "apt-get install libnuma1 (or numactl-libs)",
                     {"libnuma": False})
    return Check(LIBNUMA, "ok", f"{LIBNUMA_SONAME} loads (sgl-kernel's common_ops link it)", data={"libnuma": True})


def check_host(profile: Profile, facts: HostFacts, checkpoint_bytes: int) -> list[Check]:
    """The host rows in order."""
    return [check_shm(profile, facts), check_host_ram(profile, facts, checkpoint_bytes),
            check_triton_build(profile, facts), check_libnuma(profile, facts)]
