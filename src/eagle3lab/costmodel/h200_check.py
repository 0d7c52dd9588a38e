"""The model's MoE and drafter terms against the raw-PyTorch H200 measurements (``data/measured/h200_cycle_parts.json``).

What it checks, not fits: (1) the expected distinct experts of uniform top-k routing (``arch.expected_distinct_experts``)
against the experts the measured random routing touched; (2) that a routed-expert layer's time grows linearly in the
distinct experts touched, as the model's weight term does (one fixed time per layer plus bytes per expert); (3) the
bandwidth those expert bytes achieved, against the model's 85% of the datasheet; (4) the drafter's forward at a TP-8
rank's shapes against the model's drafter pass without its collectives. Raw PyTorch, not an engine's kernels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from eagle3lab.costmodel.arch import expected_distinct_experts
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.forward import Pass, forward_cost
from eagle3lab.costmodel.gpus import hardware_preset
from eagle3lab.costmodel.presets import kimi_k25_eagle3_drafter

MEASURED = Path(__file__).resolve().parent / "data" / "measured" / "h200_cycle_parts.json"
LABEL = "measured: raw PyTorch, H200"


def load_measured(path: Path = MEASURED) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def moe_check(section: dict[str, Any]) -> dict[str, Any]:
    """Per token count: measured vs expected distinct experts, measured time, and the linear fit in distinct experts
    (seconds per expert, fixed seconds per layer, worst relative residual); achieved expert bandwidth at the largest."""
    rows = section["rows"]
    distinct = np.array([r["distinct_experts"] for r in rows], dtype=float)
    seconds = np.array([r["seconds"] for r in rows], dtype=float)
    slope, fixed = np.polyfit(distinct, seconds, 1)
    fit = slope * distinct + fixed
    bytes_per_expert = 3 * section["hidden"] * section["intermediate_per_rank"] * 2
    hw = hardware_preset("h200")
    table = [{"tokens": r["tokens"], "distinct_measured": r["distinct_experts"],
              "distinct_expected": expected_distinct_experts(r["tokens"], section["experts"], section["top_k"]),
              "seconds": r["seconds"], "linear_fit_seconds": float(f)} for r, f in zip(rows, fit)]
    return {"name": section["name"], "rows": table, "seconds_per_expert": float(slope),
            "fixed_seconds_per_layer": float(fixed),
            "worst_linear_residual": float(np.max(np.abs(fit - seconds) / seconds)),
            "achieved_expert_bandwidth": bytes_per_expert / float(slope),
            "achieved_fraction_of_datasheet": bytes_per_expert / float(slope) / hw.mem_bandwidth,
            "model_fraction_of_datasheet": engine_preset("sglang-0.5").bandwidth_efficiency, "kind": LABEL}


def drafter_check(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The measured drafter forward beside the model's drafter pass on one H200 at TP 8 (the collectives left out:
    one GPU ran it), uncalibrated (3 us per kernel, the engine's default)."""
    hw, engine, drafter = hardware_preset("h200"), engine_preset("sglang-0.5"), kimi_k25_eagle3_drafter()
    rows = []
    for r in section["rows"]:
        cost = forward_cost(drafter, hw, 8, engine, Pass(r["tokens"], 1, r["context"], 1))
        model = cost.total_s - cost.all_reduce - (cost.sampling if r["tokens"] else 0.0)
        rows.append({"tokens": r["tokens"], "measured_seconds": r["seconds"], "model_seconds": model,
                     "ratio": r["seconds"] / model})
    return rows


def h200_report(path: Path = MEASURED) -> dict[str, Any]:
    data = load_measured(path)
    return {"provenance": data["provenance"], "gpu": data["gpu"], "date": data["date"],
            "moe": [moe_check(data[k]) for k in ("moe_tp8_rank", "moe_qwen3_30b") if "rows" in data.get(k, {})],
            "drafter": drafter_check(data["drafter"]) if "rows" in data.get("drafter", {}) else [],
            "host": data.get("host"), "kind": LABEL}
