"""Named inputs for the cost model: GPUs (datasheet numbers with their URLs), stored model configs, the incident.

Kept apart from the equations (``costmodel``) so that every number someone may want to challenge sits in one short
file next to where it came from. Derived numbers say how they were derived; assumptions say so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import ModelArch, eagle3_drafter, model_from_config, with_name
from eagle3lab.costmodel.hardware import GB, TB, Hardware
from eagle3lab.runtime.tinymodel.configs import text_config
from eagle3lab.runtime.speculative import SpeculativeSpec

CONFIG_DIR = Path(__file__).resolve().parent / "data" / "configs"

# --------------------------------------------------------------------------------------------------- GPUs
_H100 = ("NVIDIA H100 SXM datasheet (https://www.nvidia.com/en-us/data-center/h100/): 80 GB HBM3, 3.35 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_H200 = ("NVIDIA H200 SXM datasheet (https://www.nvidia.com/en-us/data-center/h200/): 141 GB HBM3e, 4.8 TB/s, "
         "BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (dense = half), NVLink 900 GB/s")
_B200 = ("NVIDIA DGX B200 datasheet (https://www.nvidia.com/en-us/data-center/dgx-b200/): 8 GPUs with 1,440 GB "
         "HBM3e and 64 TB/s in total (180 GB, 8 TB/s each), FP8 72 PFLOPS with sparsity for 8 GPUs (4.5 PFLOPS "
         "dense each; BF16 half of that), NVLink 5 1.8 TB/s per GPU")
_RTX6000 = ("NVIDIA RTX PRO 6000 Blackwell datasheet (https://www.nvidia.com/en-us/products/workstations/"
            "professional-desktop-gpus/rtx-pro-6000/): 96 GB GDDR7, 1,792 GB/s, PCIe Gen5 x16, no NVLink, "
            "FP4 4 PFLOPS with sparsity")
_RTX6000_FLOPS = (f"derived from {_RTX6000}: 4 PFLOPS FP4 sparse = 2 dense, halved per doubling of precision: "
                  "FP8 1 PFLOPS, BF16 0.5 PFLOPS dense")
_A100 = ("NVIDIA A100 datasheet (https://www.nvidia.com/en-us/data-center/a100/): A100 80GB SXM, HBM2e 2,039 GB/s, "
         "BF16 312 TFLOPS dense, NVLink 600 GB/s; no FP8")
_PCIE5 = "PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes = about 63 GB/s per direction"
_NVLINK_AR = ("assumption: about 8 us per small all-reduce with sglang's custom all-reduce over NVLink "
              "(one-shot, in-kernel barrier)")
_PCIE_AR = ("assumption: about 30 us per small all-reduce over PCIe: sglang disables its custom all-reduce on "
            "more than two PCIe-only GPUs (srt/distributed/device_communicators/custom_all_reduce.py), so NCCL "
            "rings carry every all-reduce")


def _hw(name: str, bw: float, mem: float, bf16: float, fp8: Optional[float], link_kind: str, link: float,
        ar_latency: float, sheet: str, flops_src: str, link_src: str, ar_src: str) -> Hardware:
    return Hardware(name=name, mem_bandwidth=bw, memory_bytes=mem, peak_bf16_flops=bf16, peak_fp8_flops=fp8,
                    interconnect=link_kind, link_bandwidth=link, allreduce_latency_s=ar_latency,
                    sources={"mem_bandwidth": sheet, "memory_bytes": sheet, "peak_bf16_flops": flops_src,
                             "peak_fp8_flops": flops_src, "link_bandwidth": link_src, "allreduce_latency_s": ar_src})


HARDWARE: dict[str, Callable[[], Hardware]] = {
    "h100-sxm": lambda: _hw("H100 SXM", 3.35 * TB, 80 * GB, 989e12, 1979e12, "nvlink", 450 * GB, 8e-6,
                            _H100, _H100, f"{_H100}: 900 GB/s total = 450 GB/s per direction", _NVLINK_AR),
    "h200": lambda: _hw("H200 SXM", 4.8 * TB, 141 * GB, 989e12, 1979e12, "nvlink", 450 * GB, 8e-6,
                        _H200, _H200, f"{_H200}: 900 GB/s total = 450 GB/s per direction", _NVLINK_AR),
    "b200": lambda: _hw("B200", 8 * TB, 180 * GB, 2250e12, 4500e12, "nvlink", 900 * GB, 8e-6,
                        _B200, _B200, f"{_B200}: 1.8 TB/s total = 900 GB/s per direction", _NVLINK_AR),
    "a100-sxm": lambda: _hw("A100 80GB SXM", 2.039 * TB, 80 * GB, 312e12, None, "nvlink", 300 * GB, 8e-6, _A100,
                            _A100, f"{_A100}: 600 GB/s total = 300 GB/s per direction", _NVLINK_AR),
    "rtx-pro-6000-blackwell": lambda: _hw("RTX PRO 6000 Blackwell (PCIe)", 1.792 * TB, 96 * GB, 0.5e15, 1.0e15,
                                          "pcie", 63 * GB, 30e-6, _RTX6000, _RTX6000_FLOPS, _PCIE5, _PCIE_AR),
}


def hardware_preset(name: str) -> Hardware:
    """A GPU by its preset name; an unknown name lists the known ones."""
    try:
        return HARDWARE[name]()
    except KeyError:
        raise PerfModelError(f"unknown hardware '{name}'; known: {', '.join(sorted(HARDWARE))}", parameter="hardware",
                             value=name, problem="unknown") from None


# ---------------------------------------------------------------------------------------------- model configs
def load_config(path_or_name: str | Path) -> tuple[dict[str, Any], str]:
    """(config dict, where it came from) for a config.json path, or the name of a stored config (data/configs)."""
    path = Path(path_or_name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        stored = CONFIG_DIR / f"{path_or_name}.json"
        if not stored.is_file():
            known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))
            raise PerfModelError(f"config '{path_or_name}' is neither a config.json (or a folder holding one) nor "
                                 f"a stored config ({known})", path=path, value=str(path_or_name), problem="not_found")
        path = stored
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfModelError(f"cannot read config {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PerfModelError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})", path=path,
                             problem="unreadable") from None
    if not isinstance(data, dict):
        raise PerfModelError(f"{path}: a config.json must be a JSON object")
    return data, str(data.get("_source") or path)


def stored_model(name: str, label: Optional[str] = None) -> ModelArch:
    cfg, source = load_config(name)
    return model_from_config(cfg, label or name, source)


def kimi_k25() -> ModelArch:
    """Kimi-K2.5's text backbone (DeepseekV3ForCausalLM inside KimiK25ForConditionalGeneration), INT4 experts."""
    return stored_model("kimi-k2.5", "Kimi-K2.5 (INT4 experts)")


def kimi_k25_eagle3_drafter() -> ModelArch:
    """AQ-MedAI/Kimi-K25-eagle3 (LlamaForCausalLMEagle3: hidden 7168, one layer, draft vocabulary 32000); its head
    layout and MLP width are not published and follow the EAGLE-3 drafter rule (``eagle3_drafter``)."""
    return with_name(eagle3_drafter(kimi_k25(), 32000, "AQ-MedAI/Kimi-K25-eagle3 config (hidden 7168, 1 layer, "
                                                       "draft_vocab_size 32000); head layout assumed"),
                     "Kimi-K2.5 EAGLE-3 drafter")


def tiny_kimi(num_layers: int = 4) -> ModelArch:
    """The cpu profile's tiny Kimi-K2.5-shaped target, read from the tiny model generator's own config."""

    cfg = {**text_config(num_layers), "torch_dtype": "bfloat16"}
    return model_from_config(cfg, "tiny Kimi-K2.5 (cpu profile)", "eagle3lab.runtime.tinymodel.configs.text_config")


# -------------------------------------------------------------------------------------------- speculative flags
def speculative_flags(steps: int, topk: int, draft_tokens: int, draft_model_path: str = "(cost model: no launch)"):
    """The EAGLE flags in the object the server launch uses (``runtime.speculative.SpeculativeSpec``)."""

    return SpeculativeSpec(draft_model_path=draft_model_path, algorithm="EAGLE3", num_steps=steps, eagle_topk=topk,
                           num_draft_tokens=draft_tokens)


# ------------------------------------------------------------------------------------------- the cpu profile
def cpu_hardware(mem_bandwidth: float, bandwidth_source: str = "given") -> Hardware:
    """This machine as the cost model sees it: its copy bandwidth as measured during a run (``bench.host``: never
    probed here, when a figure is drawn), no tensor cores, no interconnect."""
    return Hardware(name="this machine (cpu)", mem_bandwidth=mem_bandwidth, memory_bytes=24 * 1024**3,
                    peak_bf16_flops=5e10, peak_fp8_flops=None, interconnect="none", link_bandwidth=1.0,
                    allreduce_latency_s=1e-9,
                    sources={"mem_bandwidth": bandwidth_source, "memory_bytes": "24 GiB RAM of this machine",
                             "peak_bf16_flops": "assumption: about 50 GFLOP/s BF16 on two cores",
                             "peak_fp8_flops": "no FP8 units", "link_bandwidth": "TP 1: unused",
                             "allreduce_latency_s": "TP 1: unused"})
