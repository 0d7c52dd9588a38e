"""The measured noise floor (issue 41, item 2) on recorded outputs: the baseline at concurrency 1 against itself at
the sweep's highest, its interval over the prompts, and the EAGLE-3 arm bounded by it; fp32 stays exact."""

from __future__ import annotations

import pytest

from eagle3lab.bench.lossless import (NoiseFloor, agreement_interval, expect_lossless, lossless_policy,
                                      lossless_report, noise_floor, wants_noise_floor)
from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.errors import BenchError, ExpectationError
from eagle3lab.sidecars import NoiseFloorRecord


def _out(concurrency: int, index: int, ids: list[int]) -> RequestRecord:
    return RequestRecord(f"c{concurrency}-{index}", concurrency, "measure", True, 0.0, prompt_index=index,
                         output_ids=ids)


OUT = [list(range(10 * i, 10 * i + 10)) for i in range(8)]  # 8 prompts, 10 tokens each at concurrency 1


def _flipped(ids: list[int], at: int) -> list[int]:
    return ids[:at] + [-1] * (len(ids) - at)


# the baseline at 16: prompts 0-1 part at tokens 5 and 8 (a near-tie flipped by batching), the rest identical;
# prompts 8-15 exist only at 16 (the point's longer prompt list) and are not compared
BASELINE = [_out(1, i, o) for i, o in enumerate(OUT)] + \
    [_out(16, i, _flipped(o, {0: 5, 1: 8}.get(i, 10))) for i, o in enumerate(OUT)] + \
    [_out(16, i, [0] * 10) for i in range(8, 16)]


def test_the_floor_compares_the_same_prompts_at_two_batch_sizes_with_a_seeded_interval():
    floor = noise_floor(BASELINE, 16, how="recorded", workload={"prompt_kind": "ids"})
    assert (floor.prompts, floor.identical, floor.tokens_compared, floor.tokens_matched) == (8, 6, 80, 73)
    assert floor.agreement == pytest.approx(73 / 80)
    low, high = floor.interval
    assert low <= floor.agreement <= high and floor.bound == low and floor.margin == pytest.approx(73 / 80 - low)
    assert floor.interval == noise_floor(BASELINE, 16, how="again").interval, "seeded: the same bound every time"
    again = NoiseFloor.from_dict(NoiseFloorRecord.model_validate(floor.to_dict()).model_dump())
    assert again == floor, "the sidecar keeps every field notebook 03 reads back"


def test_an_all_identical_floor_leaves_no_margin_and_one_concurrency_is_refused():
    same = [_out(c, i, o) for c in (1, 4) for i, o in enumerate(OUT)]
    floor = noise_floor(same, 4, how="recorded")
    assert floor.agreement == 1.0 and floor.interval == [1.0, 1.0] and floor.margin == 0.0
    with pytest.raises(BenchError, match="add a higher concurrency"):
        noise_floor(same, 1, how="recorded")
    assert agreement_interval([]) == [0.0, 0.0]


def test_the_eagle3_arm_passes_above_the_floors_bound_and_fails_below_it_naming_the_floor():
    floor = noise_floor(BASELINE, 16, how="recorded")
    mode, bound = lossless_policy("bfloat16", None, floor, wants_floor=True)
    assert (mode, bound) == ("noise_floor", floor.bound)
    close = [_out(1, i, _flipped(o, 7 if i == 3 else 10)) for i, o in enumerate(OUT)]  # one late flip: 77/80
    report = lossless_report(("baseline", BASELINE), [("eagle3", close)], mode=mode, min_agreement=bound,
                             noise_floor=floor)
    assert report.passed and report.to_dict()["noise_floor"]["agreement"] == floor.agreement
    expect_lossless(report)
    broken = [_out(1, i, _flipped(o, 2)) for i, o in enumerate(OUT)]  # a real bug: every prompt parts at token 2
    report = lossless_report(("baseline", BASELINE), [("eagle3", broken)], mode=mode, min_agreement=bound,
                             noise_floor=floor)
    with pytest.raises(ExpectationError, match=r"matched 16/80 tokens .* below the noise floor.s bound 0.787 \(the "
                                               r"baseline at concurrency 1 against 16 agreed 0.912 over 8 prompts"):
        expect_lossless(report)


def test_fp32_stays_exact_and_a_profile_asking_for_a_floor_needs_one_measured():
    assert lossless_policy("float32", None, None, wants_floor=True) == ("exact", None)
    assert not wants_noise_floor("float32", True) and wants_noise_floor("bfloat16", True)
    with pytest.raises(ExpectationError, match="run notebook 01 first"):
        lossless_policy("bfloat16", None, None, wants_floor=True)
