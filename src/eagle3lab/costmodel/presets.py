"""Named inputs for the cost model: GPUs (datasheet numbers with their URLs), stored model configs, the incident.

Kept apart from the equations (``costmodel``) so that every number someone may want to challenge sits in one short
file next to where it came from. Derived numbers say how they were derived; assumptions say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import ModelArch, eagle3_drafter, model_from_config, with_name
from eagle3lab.costmodel import gpus
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.runtime.tinymodel.configs import text_config
from eagle3lab.runtime.speculative import SpeculativeSpec

CONFIG_DIR = Path(__file__).resolve().parent / "data" / "configs"

# GPUs: presets and datasheet specs live in ``gpus`` (re-exported here for the callers that import them from presets)
HARDWARE = gpus.HARDWARE
hardware_preset = gpus.hardware_preset


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


# A profile's ``cost_model.model`` -> (target, drafter): the models a run may be modelled as besides the one it served
MODELS: dict[str, Callable[[], tuple[ModelArch, ModelArch]]] = {
    "kimi-k2.5": lambda: (kimi_k25(), kimi_k25_eagle3_drafter()),
}


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
