"""The incident's own numbers, kept as reported data with their source, never mixed with measurements.

The engineer ran Kimi-K2.5 (INT4) with TP 8 on 8x RTX PRO 6000 Blackwell (PCIe, no NVLink) under sglang and
reported two baseline throughputs and that EAGLE-3, once it started, gave no throughput gain. Figures draw
these as hollow markers labelled "reported by the engineer".
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.costmodel.presets import hardware_preset, load_config
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

# What the write-up did not say, and every conclusion about the incident therefore has to leave open.
NOT_REPORTED: tuple[str, ...] = ("the acceptance length EAGLE-3 reached", "the workload (prompt and output lengths)",
                                 "the concurrency of the peak")


def facts() -> dict[str, object]:
    """The incident as the report states it: the reported figures, what was not reported, and the deployment's
    launch settings as the blackwell-8x profile records them (the engineer's own flags)."""
    profile = load_profile(INCIDENT_PROFILE)
    return {"reported": {figure.key: vars(figure) for figure in REPORTED}, "not_reported": list(NOT_REPORTED),
            "label": REPORTED_LABEL, "profile": profile.name, "sglang": profile.sglang_version,
            "target": profile.target_model, "draft": profile.draft_model, "tp": profile.tp_size,
            "gpu": hardware_preset("rtx-pro-6000-blackwell").name, "target_layers": target_layers()}


def target_layers() -> int:
    """Kimi-K2.5's depth, from the stored config the cost model uses (its sources are named in the file)."""
    config, _ = load_config("kimi-k2.5")
    return int(config.get("text_config", config)["num_hidden_layers"])


def single_stream_step_s() -> float:
    """The decode step time implied by the reported single-stream rate (one token per step)."""
    return 1.0 / SINGLE_STREAM.value
