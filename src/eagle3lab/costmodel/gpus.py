"""GPUs for the cost model: named presets (datasheet numbers with their URLs) and any GPU given by its datasheet.

Why both: the presets are shortcuts for the GPUs this project's sources ran on; a user with an H20, a GB200 or an
MI355X types the numbers from their own datasheet (``--gpu "hbm=4000,bf16=148,fp8=296,mem=96,link=nvlink:450"``) and
gets the same model. The link kind picks the measured collective curves (``collectives``); a preset names its own
link's curves where they were measured.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Optional

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.collectives import REFERENCE_BY_KIND, link_for
from eagle3lab.costmodel.hardware import GB, INTERCONNECTS, TB, Hardware

_H100 = ("NVIDIA H100 SXM datasheet (https://www.nvidia.com/en-us/data-center/h100/): 80 GB HBM3, 3.35 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_H200 = ("NVIDIA H200 SXM datasheet (https://www.nvidia.com/en-us/data-center/h200/): 141 GB HBM3e, 4.8 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_B200 = ("NVIDIA DGX B200 datasheet (https://www.nvidia.com/en-us/data-center/dgx-b200/): 8 GPUs with 1,440 GB "
         "HBM3e and 64 TB/s in total (180 GB, 8 TB/s each), FP8 72 PFLOPS with sparsity for 8 GPUs (4.5 PFLOPS "
         "dense each; BF16 half of that), NVLink 5 1.8 TB/s per GPU")
_GB200 = ("NVIDIA GB200 NVL72 datasheet (https://www.nvidia.com/en-us/data-center/gb200-nvl72/): 72 Blackwell GPUs "
          "with up to 13.4 TB HBM3e at 576 TB/s (186 GB, 8 TB/s each), FP8 720 PFLOPS and FP16/BF16 360 PFLOPS with "
          "sparsity (5 and 2.5 PFLOPS dense each), NVLink 130 TB/s (1.8 TB/s each)")
_RTX6000 = ("NVIDIA RTX PRO 6000 Blackwell datasheet (https://www.nvidia.com/en-us/products/workstations/"
            "professional-desktop-gpus/rtx-pro-6000/): 96 GB GDDR7, 1,792 GB/s, PCIe Gen5 x16, no NVLink, "
            "FP4 4 PFLOPS with sparsity")
_RTX6000_FLOPS = (f"derived from {_RTX6000}: 4 PFLOPS FP4 sparse = 2 dense, halved per doubling of precision: "
                  "FP8 1 PFLOPS, BF16 0.5 PFLOPS dense")
_A100 = ("NVIDIA A100 datasheet (https://www.nvidia.com/en-us/data-center/a100/): A100 80GB SXM, HBM2e 2,039 GB/s, "
         "BF16 312 TFLOPS dense, NVLink 600 GB/s; no FP8")
_MI300X = ("AMD Instinct MI300X product page (https://www.amd.com/en/products/accelerators/instinct/mi300/"
           "mi300x.html): 192 GB HBM3, 5.3 TB/s, FP16 1,307.4 and FP8 2,614.9 TFLOPS dense, Infinity Fabric 896 GB/s "
           "aggregate bidirectional (448 GB/s per direction)")
_MI325X = ("AMD Instinct MI325X product page (https://www.amd.com/en/products/accelerators/instinct/mi300/"
           "mi325x.html): 256 GB HBM3E, 6 TB/s, FP16 1,307.4 and FP8 2,614.9 TFLOPS dense, Infinity Fabric 896 GB/s "
           "aggregate bidirectional (448 GB/s per direction)")
_MI355X = ("AMD Instinct MI355X product page (https://www.amd.com/en/products/accelerators/instinct/mi350/"
           "mi355x.html): 288 GB HBM3E, 8 TB/s, FP16 2.5 and FP8 5.0 PFLOPS dense, Infinity Fabric 1,075 GB/s "
           "aggregate bidirectional (537.6 GB/s per direction)")
_PCIE5 = "PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes = about 63 GB/s per direction"
_CURVE = "the first point of the link's measured NCCL/RCCL curve, costmodel/data/collectives.yaml ({})"


def _hw(name: str, bw: float, mem: float, bf16: float, fp8: Optional[float], link_kind: str, link: float,
        sheet: str, flops_src: str, link_src: str, collectives: str, curve_key: str) -> Hardware:
    _, spec = link_for(collectives if collectives else None, link_kind)
    latency = spec.curves["nccl"][0].points[0][1] * 1e-6
    return Hardware(name=name, mem_bandwidth=bw, memory_bytes=mem, peak_bf16_flops=bf16, peak_fp8_flops=fp8,
                    interconnect=link_kind, link_bandwidth=link, allreduce_latency_s=latency,
                    sources={"mem_bandwidth": sheet, "memory_bytes": sheet, "peak_bf16_flops": flops_src,
                             "peak_fp8_flops": flops_src, "link_bandwidth": link_src,
                             "allreduce_latency_s": _CURVE.format(curve_key)},
                    collectives=collectives or None)


HARDWARE: dict[str, Callable[[], Hardware]] = {
    "h100-sxm": lambda: _hw("H100 SXM", 3.35 * TB, 80 * GB, 989e12, 1979e12, "nvlink", 450 * GB, _H100, _H100,
                            f"{_H100}: 900 GB/s total = 450 GB/s per direction", "nvlink4-h100", "nvlink4-h100"),
    "h200": lambda: _hw("H200 SXM", 4.8 * TB, 141 * GB, 989e12, 1979e12, "nvlink", 450 * GB, _H200, _H200,
                        f"{_H200}: 900 GB/s total = 450 GB/s per direction", "nvlink4-h100", "nvlink4-h100"),
    "b200": lambda: _hw("B200", 8 * TB, 180 * GB, 2250e12, 4500e12, "nvlink", 900 * GB, _B200, _B200,
                        f"{_B200}: 1.8 TB/s total = 900 GB/s per direction", "", "nvlink4-h100, scaled"),
    "gb200": lambda: _hw("GB200 (one Blackwell GPU)", 8 * TB, 186 * GB, 2500e12, 5000e12, "nvlink", 900 * GB,
                         _GB200, _GB200, f"{_GB200}: 1.8 TB/s = 900 GB/s per direction", "", "nvlink4-h100, scaled"),
    "a100-sxm": lambda: _hw("A100 80GB SXM", 2.039 * TB, 80 * GB, 312e12, None, "nvlink", 300 * GB, _A100, _A100,
                            f"{_A100}: 600 GB/s total = 300 GB/s per direction", "", "nvlink4-h100, scaled"),
    "rtx-pro-6000-blackwell": lambda: _hw("RTX PRO 6000 Blackwell (PCIe)", 1.792 * TB, 96 * GB, 0.5e15, 1.0e15,
                                          "pcie", 63 * GB, _RTX6000, _RTX6000_FLOPS, _PCIE5, "pcie5-rtx-pro-6000",
                                          "pcie5-rtx-pro-6000"),
    "mi300x": lambda: _hw("AMD Instinct MI300X", 5.3 * TB, 192 * GB, 1307.4e12, 2614.9e12, "xgmi", 448 * GB,
                          _MI300X, _MI300X, _MI300X, "xgmi-mi300x", "xgmi-mi300x"),
    "mi325x": lambda: _hw("AMD Instinct MI325X", 6.0 * TB, 256 * GB, 1307.4e12, 2614.9e12, "xgmi", 448 * GB,
                          _MI325X, _MI325X, _MI325X, "", "xgmi-mi300x, same fabric"),
    "mi355x": lambda: _hw("AMD Instinct MI355X", 8.0 * TB, 288 * GB, 2500e12, 5000e12, "xgmi", 537.6 * GB,
                          _MI355X, _MI355X, _MI355X, "", "xgmi-mi300x, scaled"),
}

# A GPU as torch names it (``torch.cuda.get_device_properties(i).name``, what a benchmark record keeps) -> its
# preset. Only names whose card is the preset's datasheet: an H200 NVL, an H100 PCIe or a Max-Q card has other
# clocks, memory or links, and is not modelled as its SXM or full-power sibling.
DEVICE_PRESETS: dict[str, str] = {
    "NVIDIA H200": "h200",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA A100-SXM4-80GB": "a100-sxm",
    "NVIDIA B200": "b200",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx-pro-6000-blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-blackwell",
}


def preset_for_device(name: str) -> Optional[str]:
    """The preset of a GPU as torch names it, or None for a GPU without one."""
    return DEVICE_PRESETS.get(name.strip())


# --gpu "key=value,...": the datasheet numbers a user types, with their units
SPEC_KEYS = {"name": "a label", "hbm": "memory bandwidth, GB/s", "mem": "memory, GB",
             "bf16": "dense BF16 tensor TFLOP/s", "fp8": "dense FP8 tensor TFLOP/s (optional)",
             "link": "link kind and GB/s per direction, e.g. nvlink:900, pcie:63, xgmi:448 (optional for one GPU)",
             "count": "GPUs in the TP group (optional: --tp)"}
_REQUIRED = ("hbm", "mem", "bf16")


def is_spec(text: str) -> bool:
    return "=" in text


def parse_gpu_spec(text: str) -> tuple[Hardware, Optional[int]]:
    """(Hardware, GPU count or None) from "hbm=4800,bf16=989,fp8=1979,mem=141,link=nvlink:450,count=8"."""
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in SPEC_KEYS:
            raise PerfModelError(f"--gpu: '{part}' is not one of {', '.join(f'{k}=<{v}>' for k, v in SPEC_KEYS.items())}",
                                 parameter="gpu", value=text, problem="unknown_key")
        pairs[key] = value.strip()
    missing = [k for k in _REQUIRED if k not in pairs]
    if missing:
        raise PerfModelError(f"--gpu needs {', '.join(f'{k}=<{SPEC_KEYS[k]}>' for k in missing)} (from the GPU's "
                             f"datasheet); got '{text}'", parameter="gpu", value=text, problem="missing")

    def number(key: str) -> float:
        try:
            value = float(pairs[key])
        except ValueError:
            raise PerfModelError(f"--gpu: {key}={pairs[key]!r} is not a number ({SPEC_KEYS[key]})", parameter="gpu",
                                 value=text, problem="not_a_number") from None
        if not value > 0 or not math.isfinite(value):  # float() takes 'nan' and 'inf'
            raise PerfModelError(f"--gpu: {key} must be a finite number > 0 ({SPEC_KEYS[key]}), got "
                                 f"{pairs[key]!r}", parameter="gpu", value=text, problem="not_positive")
        return value

    kind, link_gbs = "none", 0.0
    if "link" in pairs:
        match = re.fullmatch(r"([a-z]+):([0-9.]+)", pairs["link"].lower())
        if not match or match.group(1) not in INTERCONNECTS or match.group(1) == "none":
            raise PerfModelError(f"--gpu: link={pairs['link']!r} must be <kind>:<GB/s per direction> with kind one of "
                                 "nvlink, pcie, xgmi", parameter="gpu", value=text, problem="bad_link")
        kind, link_gbs = match.group(1), float(match.group(2))
    count = int(number("count")) if "count" in pairs else None
    if count is not None and count != number("count"):
        raise PerfModelError(f"--gpu: count={pairs['count']!r} must be a whole number of GPUs", parameter="gpu",
                             value=text, problem="not_an_integer")
    given = f"given by the user (--gpu {text})"
    fp8 = number("fp8") * 1e12 if "fp8" in pairs else None
    latency = 1e-9
    curves = "no link: one GPU"
    if kind != "none":
        _, spec = link_for(None, kind)
        latency = spec.curves["nccl"][0].points[0][1] * 1e-6
        curves = _CURVE.format(f"{REFERENCE_BY_KIND[kind]}, the {kind} reference, scaled to {link_gbs:g} GB/s")
    hw = Hardware(name=pairs.get("name") or "GPU given by datasheet numbers", mem_bandwidth=number("hbm") * GB,
                  memory_bytes=number("mem") * GB, peak_bf16_flops=number("bf16") * 1e12, peak_fp8_flops=fp8,
                  interconnect=kind, link_bandwidth=link_gbs * GB if link_gbs else 1.0, allreduce_latency_s=latency,
                  sources={"mem_bandwidth": given, "memory_bytes": given, "peak_bf16_flops": given,
                           "peak_fp8_flops": given if fp8 else "not given: BF16 GEMMs", "link_bandwidth": given,
                           "allreduce_latency_s": curves})
    return hw, count


def hardware_preset(name: str) -> Hardware:
    """A GPU by its preset name, or by datasheet numbers ("hbm=...,bf16=...,mem=...": ``parse_gpu_spec``)."""
    if is_spec(name):
        return parse_gpu_spec(name)[0]
    try:
        return HARDWARE[name]()
    except KeyError:
        raise PerfModelError(f"unknown hardware '{name}'; known: {', '.join(sorted(HARDWARE))}, or datasheet numbers "
                             f"as {','.join(f'{k}=...' for k in _REQUIRED)}", parameter="hardware", value=name,
                             problem="unknown") from None
