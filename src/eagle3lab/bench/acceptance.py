"""Acceptance of the speculative arms, read three ways and checked against each other, and the layer-mismatch
experiment (the same trained drafter fed aux states at the layers it was trained on vs one layer early).

The three readings (sglang 0.5.9, see ``bench.metrics``):
- ours: completion tokens / verify steps, per point, from the server's per-request counts;
- sglang's per-request ``meta_info.spec_accept_length`` (the same ratio, computed by the server: must agree);
- sglang's lifetime ``/get_server_info`` ``avg_spec_accept_length`` (reset by the flush before each point): tokens
  per verify step without the prefill token and before the ``max_new_tokens`` cut, refreshed only every
  ``decode_log_interval`` steps; it is compared with the same quantity rebuilt from the per-request histograms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from eagle3lab.bench.sweep import ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, ARM_KIND_EAGLE3_SHIFTED, ArmResult
from eagle3lab.errors import ExpectationError


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def acceptance_records(arms: Sequence[ArmResult]) -> list[dict[str, Any]]:
    """One record per measured point of a speculative arm: every reading of its acceptance side by side."""
    records = []
    for arm in arms:
        if not arm.speculative:
            continue
        for point in arm.measured_points():
            m = point.metrics
            assert m is not None
            server_avg, per_step = point.server_avg_accept_length, m.accept_length_per_step
            records.append({
                "arm": arm.name, "kind": arm.kind, "concurrency": point.concurrency,
                "accept_length": m.accept_length, "accept_length_mean": m.accept_length_mean,
                "server_accept_length_mean": m.server_accept_length_mean,
                "disagreements": m.accept_length_disagreements,
                "accepted_per_verify_histogram": m.accepted_per_verify_histogram,
                "accept_length_per_step": per_step, "server_avg_accept_length": server_avg,
                "server_minus_per_step": None if server_avg is None or per_step is None else server_avg - per_step,
            })
    return records


ACCEPTANCE_LABELS = {
    "arm": "arm", "concurrency": "concurrency", "accept_length": "accept length (tokens / verify step)",
    "accept_length_mean": "per-request mean", "server_accept_length_mean": "server per-request mean (meta_info)",
    "disagreements": "requests disagreeing with the server",
    "accepted_per_verify_histogram": "verify steps accepting 0, 1, ... draft tokens",
    "accept_length_per_step": "tokens per verify step (histogram)",
    "server_avg_accept_length": "server avg_spec_accept_length (/get_server_info)",
    "server_minus_per_step": "server avg minus histogram",
}


def acceptance_table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records labelled for people (numbers rounded; labels live only here)."""
    return [{label: _round(r[key]) if isinstance(r[key], float) else r[key] for key, label in ACCEPTANCE_LABELS.items()}
            for r in records]


def expect_acceptance_consistent(arms: Sequence[ArmResult]) -> None:
    """Our per-request acceptance must equal the server's own on every request, and the server must report one.
    (The lifetime counter is only reported: it lags by up to ``decode_log_interval`` steps.)"""
    for r in acceptance_records(arms):
        if r["disagreements"]:
            raise ExpectationError(f"arm '{r['arm']}' at concurrency {r['concurrency']}: {r['disagreements']} "
                                   f"requests where completion tokens / spec_verify_ct differs from the server's "
                                   f"spec_accept_length", arm=r['arm'], concurrency=r['concurrency'],
                                   found=r['disagreements'], expected=0, problem="disagreement")
        if r["server_accept_length_mean"] is None:
            raise ExpectationError(f"arm '{r['arm']}' at concurrency {r['concurrency']}: the server reported no "
                                   f"spec_accept_length; was speculation on?", arm=r['arm'],
                                   concurrency=r['concurrency'], problem="no_server_acceptance")


@dataclass
class LayerMismatch:
    """Acceptance of the trained drafter with the aux layer ids it was trained on vs the ids shifted by one."""

    aligned_arm: str
    shifted_arm: str
    aligned_layer_ids: list[int] | None
    shifted_layer_ids: list[int] | None
    target_layers: int | None
    concurrency: list[int]
    aligned_accept_length: list[float]
    shifted_accept_length: list[float]

    @property
    def drop(self) -> list[float]:
        return [a - s for a, s in zip(self.aligned_accept_length, self.shifted_accept_length)]

    def to_dict(self) -> dict[str, Any]:
        return {"aligned_arm": self.aligned_arm, "shifted_arm": self.shifted_arm,
                "aligned_layer_ids": self.aligned_layer_ids, "shifted_layer_ids": self.shifted_layer_ids,
                "target_layers": self.target_layers, "concurrency": self.concurrency,
                "aligned_accept_length": self.aligned_accept_length,
                "shifted_accept_length": self.shifted_accept_length, "drop": self.drop,
                "relative_drop": [d / a if a else None for d, a in zip(self.drop, self.aligned_accept_length)]}

    def rows(self) -> list[dict[str, Any]]:
        return [{"concurrency": c, f"aligned {self.aligned_layer_ids}": round(a, 3),
                 f"shifted {self.shifted_layer_ids}": round(s, 3), "drop": round(a - s, 3)}
                for c, a, s in zip(self.concurrency, self.aligned_accept_length, self.shifted_accept_length)]


def layer_mismatch(arms: Sequence[ArmResult], target_layers: int | None,
                   layer_ids: dict[str, Sequence[int] | None]) -> LayerMismatch | None:
    """Aligned (kind eagle3) vs shifted (kind eagle3_shifted) acceptance at every concurrency both measured;
    None if either arm is missing or has no measured point. ``layer_ids`` maps arm name -> aux ids served."""
    aligned = next((a for a in arms if a.kind == ARM_KIND_EAGLE3), None)
    shifted = next((a for a in arms if a.kind == ARM_KIND_EAGLE3_SHIFTED), None)
    if aligned is None or shifted is None:
        return None
    a_points = {p.concurrency: p.metrics.accept_length for p in aligned.measured_points() if p.metrics}
    s_points = {p.concurrency: p.metrics.accept_length for p in shifted.measured_points() if p.metrics}
    common = sorted(c for c in a_points.keys() & s_points.keys()
                    if a_points[c] is not None and s_points[c] is not None)
    if not common:
        return None
    ids = {name: list(value) if value is not None else None for name, value in layer_ids.items()}
    return LayerMismatch(aligned.name, shifted.name, ids.get(aligned.name), ids.get(shifted.name), target_layers,
                         common, [float(a_points[c]) for c in common],  # type: ignore[arg-type]
                         [float(s_points[c]) for c in common])  # type: ignore[arg-type]


def speedup_records(arms: Sequence[ArmResult]) -> list[dict[str, Any]]:
    """EAGLE-3 (headline arm) over baseline output throughput at every concurrency both measured."""
    base = {p.concurrency: p.metrics.output_tok_per_s for a in arms if not a.speculative
            for p in a.measured_points() if p.metrics}
    records = []
    for arm in arms:
        if arm.kind != ARM_KIND_EAGLE3:
            continue
        for p in arm.measured_points():
            if p.metrics and base.get(p.concurrency):
                records.append({"concurrency": p.concurrency, "baseline_tok_s": base[p.concurrency],
                                "eagle3_tok_s": p.metrics.output_tok_per_s,
                                "speedup": p.metrics.output_tok_per_s / base[p.concurrency],
                                "accept_length": p.metrics.accept_length})
    return records


# The drafter's training simulates sglang's greedy topk-1 verify offline (transformers, fp32) on the same benchmark
# prompts; its arms are named after the aux ids served.
OFFLINE_ARM_OF_KIND = {ARM_KIND_EAGLE3: "aligned", ARM_KIND_EAGLE3_SHIFTED: "shifted", ARM_KIND_EAGLE3_CONTROL: "untrained"}


def offline_vs_served(arms: Sequence[ArmResult], offline: dict[str, Any] | None,
                      concurrency: int = 1) -> list[dict[str, Any]]:
    """Served acceptance at ``concurrency`` next to the drafter's offline simulation of the same requests: the
    harness's draft, verify and draft-extend attention must reproduce what the drafter was trained and scored on.
    ``offline`` maps 'aligned' / 'shifted' / 'untrained' to ``{mean_accept_length, pooled_accept_length,
    accepted_histogram}``; empty when the drafter records none."""
    records = []
    for arm in arms:
        sim = (offline or {}).get(OFFLINE_ARM_OF_KIND.get(arm.kind, ""))
        point = next((p for p in arm.measured_points() if p.concurrency == concurrency), None)
        if not sim or point is None or point.metrics is None:
            continue
        m = point.metrics
        hist = sim.get("accepted_histogram") or {}
        records.append({"arm": arm.name, "kind": arm.kind, "concurrency": concurrency,
                        "served_mean": m.accept_length_mean, "offline_mean": sim.get("mean_accept_length"),
                        "served_pooled": m.accept_length, "offline_pooled": sim.get("pooled_accept_length"),
                        "served_histogram": m.accepted_per_verify_histogram,
                        "offline_histogram": [int(hist.get(str(k), 0)) for k in range(max(map(int, hist), default=-1) + 1)]})
    return records
