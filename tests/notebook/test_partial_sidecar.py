"""Notebook 03's sidecar is written as arms finish: a failure after the benchmark keeps every measured arm."""

from __future__ import annotations

import pytest

from eagle3lab import sidecars
from eagle3lab.bench import lossless
from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ArmResult, PointResult
from eagle3lab.errors import ExpectationError
from eagle3lab.notebook.patch_and_bench.bench_records import PartialSidecar


def _arm(name: str, kind: str) -> ArmResult:
    point = PointResult(concurrency=1, status="ok", reason=None, metrics=None, server_info=None, warmup_requests=1,
                        warmup_failed=0, not_sent=0, flushed=True, started_at="2026-12-01T00:00:00+00:00")
    return ArmResult(name, "measured", kind, points=[point], requests_file=f"{name}.jsonl")


def _out(index: int, ids: list[int]) -> RequestRecord:
    return RequestRecord(f"c1-{index}", 1, "measure", True, 0.0, prompt_index=index, output_ids=ids)


def test_a_forced_late_failure_leaves_the_finished_arms_in_the_sidecar(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    partial = PartialSidecar(sidecars.PatchBenchSidecar(
        profile="gpu-1x", profile_values={}, models={"target": "t", "draft": "d"}, patch="p", delegated_members=[],
        chain=[], story=[]))
    partial.add_arm(_arm("eagle3", ARM_KIND_EAGLE3))
    partial.add_arm(_arm("baseline", ARM_KIND_BASELINE))
    # the late failure: a bf16 lossless check that diverges grossly, after both arms were measured
    report = lossless.lossless_report(("baseline", [_out(0, [1, 2, 3, 4])]), [("eagle3", [_out(0, [9, 2, 3, 4])])],
                                      mode=lossless.AGREEMENT, min_agreement=0.5)
    partial.update(lossless=report.to_dict())
    with pytest.raises(ExpectationError, match="diverges grossly"):
        lossless.expect_lossless(report)

    kept = sidecars.read(sidecars.PatchBenchSidecar, "gpu-1x")
    assert kept.complete is False
    assert {row["arm"] for row in kept.arms} == {"eagle3", "baseline"}
    assert kept.lossless is not None and kept.lossless.passed is False and kept.lossless.min_agreement == 0.5


def test_a_finished_notebook_writes_complete_true_by_default():
    sidecar = sidecars.PatchBenchSidecar(profile="cpu", profile_values={}, models={"target": "t", "draft": "d"},
                                         patch="p", delegated_members=[], chain=[], story=[])
    assert sidecar.complete is True
