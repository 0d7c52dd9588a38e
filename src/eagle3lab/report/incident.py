"""The incident's own numbers, kept as reported data with their source, never mixed with measurements.

The engineer ran Kimi-K2.5 (INT4) with TP 8 on 8x RTX PRO 6000 Blackwell (PCIe, no NVLink) under sglang and
reported two baseline throughputs and that EAGLE-3, once it started, gave no throughput gain. Figures draw
these as hollow markers labelled "reported by the engineer".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from eagle3lab.costmodel.presets import hardware_preset, load_config
from eagle3lab.report.evidence_table import incident_evidence
from eagle3lab.runtime.profiles import load_profile

SOURCE = ("reported by the engineer in the incident write-up (Kimi-K2.5 INT4, sglang, TP 8 on 8x RTX PRO 6000 "
          "Blackwell PCIe, no NVLink); not measured here")
REPORTED_LABEL = "reported by the engineer"
# The project's profile of the incident's deployment (params/blackwell-8x.yaml): its TP, flags and workload.
INCIDENT_PROFILE = "blackwell-8x"


@dataclass(frozen=True)
class ReportedFigure:
    """One number somebody else reported: value, unit, what it measures, where it comes from."""

    key: str
    value: float
    unit: str
    what: str
    source: str = SOURCE
    kind: str = "reported"


SINGLE_STREAM = ReportedFigure("single_stream_tok_s", 63.6, "tok/s", "baseline output throughput, one request")
PEAK = ReportedFigure("peak_tok_s", 2370.0, "tok/s", "baseline peak output throughput, best concurrency")
EAGLE3_GAIN = ReportedFigure("eagle3_throughput_gain", 1.0, "x", "EAGLE-3 throughput over baseline ('no benefit')")
# No public source gives the on-disk size of this checkpoint; the engineer's figure is the only one.
CHECKPOINT = ReportedFigure("checkpoint_gb", 547.0, "GB", "size of the Kimi-K2.5 INT4 checkpoint")
GPUS = ReportedFigure("gpus", 8.0, "GPUs", "RTX PRO 6000 Blackwell cards, PCIe only (no NVLink), one TP rank each")
# The launch flag the cost model's KV capacity rests on. The blackwell-8x profile now leaves the fraction to sglang
# (our own GPU launches); the incident's model keeps the engineer's value.
MEM_FRACTION = ReportedFigure("mem_fraction_static", 0.9, "", "--mem-fraction-static of the engineer's launch")

REPORTED: tuple[ReportedFigure, ...] = (SINGLE_STREAM, PEAK, EAGLE3_GAIN, CHECKPOINT, GPUS, MEM_FRACTION)

# What the write-up claims, in words, with its source: the report states these as claims, never as findings.
WRITEUP_CLAIMS: dict[str, str] = {
    "one_method_patch": "delegating `set_eagle3_layers_to_capture` alone to the inner model made the server start",
    "no_gain": "with that patch EAGLE-3 ran and gave no throughput gain over the baseline",
}
# The drafter's aux layer ids as the write-up quotes them (AQ-MedAI/Kimi-K25-eagle3's config.json,
# eagle_aux_hidden_state_layer_ids); the project's GPU profile reads the real config when it is fetched.
WRITEUP_AUX_LAYER_VALUES: tuple[int, ...] = (2, 30, 58)

# What the write-up did not say, and every conclusion about the incident therefore has to leave open.
NOT_REPORTED: tuple[str, ...] = ("the acceptance length EAGLE-3 reached", "the workload (prompt and output lengths)",
                                 "the concurrency of the peak")


def facts() -> dict[str, object]:
    """The incident as the report states it: the reported figures, the write-up's claims, what was not reported,
    the public evidence on its drafter, the evidence table on its hardware and model family (``evidence_table``),
    and the deployment's launch settings as the blackwell-8x profile records them (the project's profile; its
    speculative flags match sglang PR #19689's published launch command)."""
    profile = load_profile(INCIDENT_PROFILE)
    layers = target_layers()
    return {"reported": {figure.key: vars(figure) for figure in REPORTED}, "not_reported": list(NOT_REPORTED),
            "label": REPORTED_LABEL, "source": SOURCE, "claims": dict(WRITEUP_CLAIMS),
            "writeup_aux_ids": list(WRITEUP_AUX_LAYER_VALUES), "sglang_default_aux_ids": sglang_default_aux_ids(layers),
            "profile": profile.name, "sglang": profile.sglang_version,
            "target": profile.target_model, "draft": profile.draft_model, "tp": profile.tp_size,
            "gpu": hardware_preset("rtx-pro-6000-blackwell").name, "target_layers": layers,
            "public": public_evidence(), "evidence": incident_evidence(SINGLE_STREAM.value, PEAK.value)}


def sglang_default_aux_ids(num_layers: int) -> list[int]:
    """sglang 0.5.9's aux layers when none are configured (``[2, n // 2, n - 3]``, the layers CUDA-graph replays
    capture per the trace); a drafter whose ids equal these is the only case the one-layer-early claim covers."""
    return [2, num_layers // 2, num_layers - 3]


PUBLIC_EVIDENCE = Path(__file__).resolve().parent / "data" / "public_evidence.yaml"


def public_evidence(path: Optional[Path] = None) -> dict[str, dict[str, Any]]:
    """The public figures on this drafter and on a one-layer shift, keyed by source, each with its URL."""
    data = yaml.safe_load((path or PUBLIC_EVIDENCE).read_text())
    out = {}
    for row in data["sources"]:
        row = dict(row)
        if row["key"] == "vllm_pr_35966" and row.get("value") is not None:
            # vLLM's rate is accepted/proposed draft tokens; one verify step emits 1 + k * rate tokens on average
            row["accept_length"] = 1.0 + row["num_speculative_tokens"] * row["value"]
            row["rate_pct"] = 100.0 * row["value"]
            row["max_accept_length"] = row["num_speculative_tokens"] + 1  # every draft accepted, plus the bonus
        out[row["key"]] = row
    return out


def target_layers() -> int:
    """Kimi-K2.5's depth, from the stored config the cost model uses (its sources are named in the file)."""
    config, _ = load_config("kimi-k2.5")
    return int(config.get("text_config", config)["num_hidden_layers"])


def single_stream_step_s() -> float:
    """The decode step time implied by the reported single-stream rate (one token per step)."""
    return 1.0 / SINGLE_STREAM.value
