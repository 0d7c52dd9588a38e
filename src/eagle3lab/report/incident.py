"""The incident's own numbers, kept as reported data with their source, never mixed with measurements.

The engineer ran Kimi-K2.5 (INT4) with TP 8 on 8x RTX PRO 6000 Blackwell (PCIe, no NVLink) under sglang and
reported two baseline throughputs and that EAGLE-3, once it started, gave no throughput gain. Figures draw
these as hollow markers labelled "reported by the engineer".
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("reported by the engineer in the incident write-up (Kimi-K2.5 INT4, sglang, TP 8 on 8x RTX PRO 6000 "
          "Blackwell PCIe, no NVLink); not measured here")
REPORTED_LABEL = "reported by the engineer"


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

REPORTED: tuple[ReportedFigure, ...] = (SINGLE_STREAM, PEAK, EAGLE3_GAIN)


def single_stream_step_s() -> float:
    """The decode step time implied by the reported single-stream rate (one token per step)."""
    return 1.0 / SINGLE_STREAM.value
