"""All-reduce and all-gather times under tensor parallelism, from public measurements of each link.

Why measured curves: at TP 8 a decode pass runs two all-reduces per layer, and on PCIe without NVLink their time is
set by protocol latency (about 24 us through NCCL for anything under 256 KB on 8 RTX PRO 6000s), not by the link's
datasheet bandwidth; a verify pass over k x batch tokens moves k times the bytes of a plain step, which crosses
from the latency regime into the bandwidth one. ``data/collectives.yaml`` holds, per link, the published (bytes,
microseconds) points of the library path (NCCL/RCCL) and of the one-shot custom kernel, by TP size, each with its URL.

A GPU whose link has no curve of its own takes its link kind's reference curve with the size-dependent part scaled
by the ratio of the datasheet link bandwidths (said so in ``CollectiveTime.source``). The hardware's
``allreduce_latency_s`` is the reference curve's first point in every preset; a sensitivity check that changes it
shifts the library curve by the difference, so it still moves the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from eagle3lab.errors import PerfModelError

DATA = Path(__file__).resolve().parent / "data" / "collectives.yaml"
REFERENCE_BY_KIND = {"pcie": "pcie5-rtx-pro-6000", "nvlink": "nvlink4-h100", "xgmi": "xgmi-mi300x"}
ALGORITHMS = ("nccl", "custom")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CurveSpec(_Strict):
    tp: int
    points: list[tuple[float, float]]
    bus_bandwidth_gbs: Optional[float] = None
    source: str


class LinkSpec(_Strict):
    kind: str
    gpu: str
    reference_link_gbs: float
    curves: dict[str, list[CurveSpec]]


class LinksFile(_Strict):
    links: dict[str, LinkSpec]


@lru_cache(maxsize=1)
def load_links(path: Path = DATA) -> dict[str, LinkSpec]:
    """The measured curves, checked: sizes increasing, times positive, algorithms known."""
    try:
        parsed = LinksFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise PerfModelError(f"collectives data {path} is unreadable or malformed: {exc}", path=path) from None
    for key, link in parsed.links.items():
        for algorithm, curves in link.curves.items():
            if algorithm not in ALGORITHMS:
                raise PerfModelError(f"collectives data: link {key} has unknown algorithm {algorithm}")
            for c in curves:
                sizes = [p[0] for p in c.points]
                if sizes != sorted(sizes) or len(set(sizes)) != len(sizes) or any(p[1] <= 0 for p in c.points):
                    raise PerfModelError(f"collectives data: link {key} {algorithm} TP {c.tp}: sizes must increase "
                                         "and times be positive")
    return parsed.links


@dataclass(frozen=True)
class CollectiveTime:
    """One collective's seconds, the path taken, and the measurement it rests on."""

    seconds: float
    algorithm: str
    measured_tp: int
    source: str


def curve_seconds(curve: CurveSpec, nbytes: float, tp: int) -> float:
    """Seconds of one all-reduce of ``nbytes`` on a measured curve (linear between points; see the module doc)."""
    pts = curve.points
    if nbytes <= pts[0][0]:
        return pts[0][1] * 1e-6
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if nbytes <= x1:
            return (y0 + (y1 - y0) * (nbytes - x0) / (x1 - x0)) * 1e-6
    x_last, y_last = pts[-1]
    if curve.bus_bandwidth_gbs:
        return y_last * 1e-6 + (nbytes - x_last) * 2 * (tp - 1) / tp / (curve.bus_bandwidth_gbs * 1e9)
    (xa, ya), (xb, yb) = pts[-2], pts[-1]
    return (y_last + (yb - ya) * (nbytes - x_last) / (xb - xa)) * 1e-6


def _curve_for(curves: list[CurveSpec], tp: int) -> CurveSpec:
    """The curve measured at ``tp``; else the nearest TP measured above it; else the largest measured."""
    exact = [c for c in curves if c.tp == tp]
    if exact:
        return exact[0]
    above = sorted((c for c in curves if c.tp > tp), key=lambda c: c.tp)
    return above[0] if above else max(curves, key=lambda c: c.tp)


def link_for(collectives: Optional[str], interconnect: str) -> tuple[str, LinkSpec]:
    """The link's own curves, or its kind's reference curves (a GPU given by datasheet numbers)."""
    links = load_links()
    key = collectives or REFERENCE_BY_KIND.get(interconnect, "")
    if key not in links:
        raise PerfModelError(f"no measured collectives for link '{collectives or interconnect}'; known links: "
                             f"{', '.join(sorted(links))}, kinds: {', '.join(sorted(REFERENCE_BY_KIND))}",
                             parameter="interconnect", value=collectives or interconnect, problem="unknown")
    return key, links[key]


def allreduce(collectives: Optional[str], interconnect: str, link_gbs: float, latency_s: float, tp: int,
              nbytes: float, custom_allowed: bool, custom_max_bytes: float, custom_any_size_rows: int,
              rows: float) -> CollectiveTime:
    """One all-reduce of ``nbytes`` (``rows`` tokens) over ``tp`` GPUs: the custom one-shot kernel where the engine
    enables it on this link (``custom_allowed``) and the message is within its cut-off (``custom_max_bytes``, or any
    size at most ``custom_any_size_rows`` rows), as the engines' selectors decide (by size and rows, not by speed),
    while the size lies inside the custom curve's measured range; the library path otherwise (the engines' two-shot
    kernels for larger messages run near the library's bandwidth)."""
    if tp <= 1:
        return CollectiveTime(0.0, "none", 1, "TP 1: no all-reduce")
    key, link = link_for(collectives, interconnect)
    scale = link.reference_link_gbs * 1e9 / link_gbs if collectives is None and link_gbs > 0 else 1.0
    scaled = "" if scale == 1.0 else (f"; {link.gpu}'s curve, size-dependent part scaled by the datasheet link "
                                      f"bandwidths ({link.reference_link_gbs:g} / {link_gbs / 1e9:g} GB/s)")
    lib = _curve_for(link.curves["nccl"], tp)
    first = lib.points[0][1] * 1e-6
    # the hardware's latency moves the whole library curve (0 for a preset: its latency is the reference point)
    shift = latency_s - link.curves["nccl"][0].points[0][1] * 1e-6
    best = CollectiveTime(first + shift + (curve_seconds(lib, nbytes, tp) - first) * scale, "nccl", lib.tp,
                          f"{key} nccl TP {lib.tp}: {lib.source}{scaled}")
    within = nbytes <= custom_max_bytes or rows <= custom_any_size_rows
    if custom_allowed and within and link.curves.get("custom"):
        cc = _curve_for(link.curves["custom"], tp)
        if nbytes <= cc.points[-1][0]:  # the engines' selectors pick by size and rows, not by speed
            c0 = cc.points[0][1] * 1e-6
            return CollectiveTime(c0 + (curve_seconds(cc, nbytes, tp) - c0) * scale, "custom", cc.tp,
                                  f"{key} custom TP {cc.tp}: {cc.source}{scaled}")
    return best


def allgather(collectives: Optional[str], interconnect: str, link_gbs: float, latency_s: float, tp: int,
              nbytes: float) -> CollectiveTime:
    """One all-gather whose gathered result is ``nbytes`` (vocab-parallel logits): a ring all-gather moves half the
    bytes of an all-reduce of the same result, so it costs the library all-reduce of ``nbytes / 2``."""
    return allreduce(collectives, interconnect, link_gbs, latency_s, tp, nbytes / 2, False, 0.0, 0, 0.0)
