"""The checks of the machine: GPU count, architecture and memory against ``tp_size``, driver, cuDNN, sgl-kernel,
idle GPUs, and the interconnect as evidence.
"""

from __future__ import annotations

import re
from eagle3lab.runtime import envinfo, gpuinfo
from eagle3lab.runtime.launch_env import (CUDNN_CHECK_ENV, CUDNN_CHECK_REASON, CUDNN_CHECK_SITE,
                                          launch_environment)
from eagle3lab.runtime.profiles import Profile
from eagle3lab.preflight.result import Check, plural


def check_gpu_count(profile: Profile, inv: gpuinfo.GpuInventory | None) -> Check:
    if inv is None:
        return Check("GPUs", "skipped", f"profile {profile.name} runs on {profile.device} (device key): GPU "
                                        "checks do not apply")
    data = inv.to_dict()
    if inv.count < profile.tp_size:
        why = f" ({inv.error})" if inv.error else ""
        return Check("GPUs", "fail", f"{profile.name} needs {plural(profile.tp_size, 'CUDA GPU')}; "
                                     f"found {inv.count}{why}",
                     f"run on a machine with {plural(profile.tp_size, 'CUDA GPU')}"
                     + (", or lower tp_size (--set tp_size=N)" if profile.tp_size > 1 else ""), data)
    names = sorted({g.name for g in inv.gpus})
    return Check("GPUs", "ok", f"{inv.count} CUDA GPUs ({', '.join(names)}) for tp_size {profile.tp_size}; "
                               f"driver {inv.driver or 'unknown'}, torch {inv.torch_version} CUDA {inv.torch_cuda}",
                 data=data)


def check_capability(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    name = "GPU architecture"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU to check")
    used = inv.gpus[:tp_size]
    compiled = set(inv.torch_arch_list)
    ptx = sorted(int(a.split("_")[1]) for a in compiled if a.startswith("compute_"))
    missing = sorted({g.sm for g in used if g.sm not in compiled})
    sms = sorted({g.sm for g in used})
    if not missing:
        return Check(name, "ok", f"{', '.join(sms)}; torch was built for it", data={"arch_list": inv.torch_arch_list})
    jit = [sm for sm in missing if any(p <= int(sm.split("_")[1]) for p in ptx)]
    if len(jit) == len(missing):
        return Check(name, "warn", f"{', '.join(missing)} runs from PTX (compiled at first use, slow start)",
                     "install a torch build that lists this architecture", {"arch_list": inv.torch_arch_list})
    return Check(name, "fail", f"torch {inv.torch_version} was not built for {', '.join(missing)} "
                               f"(it has {', '.join(sorted(compiled)) or 'none'})",
                 "install a torch build for this GPU (see pytorch.org)", {"arch_list": inv.torch_arch_list})


# CUDA toolkit -> the oldest Linux driver that runs it (NVIDIA CUDA Toolkit release notes, table "CUDA Toolkit and
# Corresponding Driver Versions": https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html)
MIN_DRIVER = {"12.4": "550.54.14", "12.6": "560.28.03", "12.8": "570.26", "12.9": "575.51.03"}
SETUP_TORCH_CUDA = "12.8"  # make setup installs requirements.txt's torch==2.9.1 from PyPI, a CUDA 12.8 build


CUDNN_MIN = 91500  # sglang 0.5.9 refuses torch 2.9.1 with cuDNN < 9.15 (server_args.py:5263-5298)


IDLE_MIB = 1024  # a GPU with more than this in use before launch holds someone else's process


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def check_driver(inv: gpuinfo.GpuInventory | None) -> Check:
    """The NVIDIA driver against the CUDA of the torch found here and of the torch ``make setup`` installs: a box
    checked before set-up (another torch, or none) must still run torch 2.9.1's CUDA 12.8, which needs 570.26."""
    name = "NVIDIA driver"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    cuda = ".".join((inv.torch_cuda or "").split(".")[:2])
    needs = {f"CUDA {cuda} (torch {inv.torch_version})": MIN_DRIVER[cuda]} if cuda in MIN_DRIVER else {}
    needs[f"CUDA {SETUP_TORCH_CUDA} (the torch make setup installs)"] = MIN_DRIVER[SETUP_TORCH_CUDA]
    why, need = max(needs.items(), key=lambda item: _version_tuple(item[1]))
    data = {"driver": inv.driver, "torch_cuda": inv.torch_cuda, "min_driver": need, "setup_cuda": SETUP_TORCH_CUDA,
            "source": "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"}
    if not inv.driver:
        return Check(name, "warn", "nvidia-smi did not report the driver version", "install nvidia-smi", data)
    if _version_tuple(inv.driver) < _version_tuple(need):
        return Check(name, "fail", f"driver {inv.driver} is older than {need}, which {why} needs",
                     f"upgrade the NVIDIA driver to {need} or newer", data)
    unknown = "" if not cuda or cuda in MIN_DRIVER else f"; torch CUDA {inv.torch_cuda} is not in the table"
    return Check(name, "ok", f"driver {inv.driver} runs {why} (needs {need} or newer){unknown}", data=data)


def check_cudnn(profile: Profile, inv: gpuinfo.GpuInventory | None) -> Check:
    """torch's cuDNN against sglang's torch 2.9.1 check, and whether the launch environment answers it."""
    name = "cuDNN"
    if inv is None:
        return Check(name, "skipped", f"profile {profile.name} runs on {profile.device}")
    env = launch_environment(profile)
    data = {"cudnn_version": inv.cudnn_version, "torch": inv.torch_version, "launch_env": {
        CUDNN_CHECK_ENV: env.get(CUDNN_CHECK_ENV)}, "site": CUDNN_CHECK_SITE}
    if inv.cudnn_version is None or inv.torch_version is None:
        return Check(name, "skipped", f"torch was not asked ({inv.error or 'no CUDA GPU'}); the launch environment "
                                      f"sets {CUDNN_CHECK_ENV}={env.get(CUDNN_CHECK_ENV)} either way", data=data)
    old = inv.torch_version.startswith("2.9.1") and inv.cudnn_version < CUDNN_MIN
    if not old:
        return Check(name, "ok", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang's check passes",
                     data=data)
    if env.get(CUDNN_CHECK_ENV) == "1":
        return Check(name, "ok", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang would refuse "
                                 f"the multimodal target ({CUDNN_CHECK_SITE}); the launch sets {CUDNN_CHECK_ENV}=1 "
                                 f"on purpose: {CUDNN_CHECK_REASON}", data=data)
    return Check(name, "fail", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang refuses the "
                               f"multimodal target at start-up ({CUDNN_CHECK_SITE})",
                 "pip install nvidia-cudnn-cu12==9.16.0.29, or set SGLANG_DISABLE_CUDNN_CHECK=1", data)


def check_sgl_kernel(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    """Which architecture op libraries the installed sgl-kernel ships, against the GPUs' architecture."""
    name = "sgl-kernel"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    shipped = envinfo.sgl_kernel_arch_dirs()
    sms = sorted({f"sm{g.capability[0]}{g.capability[1]}" for g in inv.gpus[:tp_size]})
    data = {"shipped": shipped, "gpus": sms, "version": envinfo.package_version("sgl-kernel")}
    missing = [sm for sm in sms if sm not in shipped]
    if not missing:
        return Check(name, "ok", f"sgl-kernel {data['version']} ships {', '.join(shipped)} op libraries", data=data)
    return Check(name, "warn", f"sgl-kernel {data['version']} ships op libraries for {', '.join(shipped) or 'none'}, "
                               f"not {', '.join(missing)}: on these GPUs it loads another architecture's build "
                               "(sgl_kernel/load_utils.py), so a kernel without code for them fails at first use",
                 "install an sgl-kernel build for this architecture, or expect a first-use kernel error", data)


def check_idle(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    """Memory in use on the GPUs the launch takes, before it starts (another process would shrink its pool)."""
    name = "GPUs idle"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    if inv.used_mib is None:
        return Check(name, "warn", "nvidia-smi did not report memory in use", "install nvidia-smi")
    busy = {i: mib for i, mib in enumerate(inv.used_mib[:tp_size]) if mib > IDLE_MIB}
    data = {"used_mib": inv.used_mib, "threshold_mib": IDLE_MIB}
    if busy:
        return Check(name, "fail", "GPUs in use before launch: " + ", ".join(f"GPU {i} {m} MiB" for i, m in busy.items()),
                     "stop the other processes (nvidia-smi lists them)", data)
    return Check(name, "ok", f"{min(tp_size, len(inv.used_mib))} GPUs with at most {IDLE_MIB} MiB in use", data=data)


def check_interconnect(inv: gpuinfo.GpuInventory | None) -> Check:
    name = "interconnect"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    if not inv.topology:
        return Check(name, "skipped", "nvidia-smi not found or 'nvidia-smi topo -m' failed")
    tally = gpuinfo.links(inv.topology)
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(tally.items())) or "no GPU pairs"
    nvlink = "NVLink" in tally
    return Check(name, "info", f"GPU pairs by link (nvidia-smi topo -m): {kinds}; "
                               f"{'NVLink present' if nvlink else 'no NVLink: all-reduce goes over PCIe'}",
                 data={"links": tally, "topology": inv.topology})
