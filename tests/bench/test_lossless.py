"""The lossless check on hand-written records: equal outputs pass, any differing token fails with its place."""

from __future__ import annotations

import pytest

from eagle3lab.bench.lossless import compare_outputs, expect_lossless, lossless_policy, lossless_report
from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.errors import BenchError, ExpectationError


def _out(concurrency: int, index: int, ids: list[int] | None, ok: bool = True, phase: str = "measure"):
    return RequestRecord(f"c{concurrency}-{phase}-{index}", concurrency, phase, ok, 0.0, prompt_index=index,
                         output_ids=ids)


BASE = [_out(1, 0, [5, 6, 7]), _out(1, 1, [8, 9, 10]), _out(2, 0, [5, 6, 7]), _out(2, 1, [8, 9, 10]),
        _out(1, 0, [99], phase="warmup")]


def test_identical_outputs_are_lossless_at_every_shared_concurrency():
    spec = [_out(1, 1, [8, 9, 10]), _out(1, 0, [5, 6, 7]), _out(2, 0, [5, 6, 7]), _out(2, 1, [8, 9, 10])]
    report = lossless_report(("baseline", BASE), [("eagle3", spec)])
    assert report.lossless and [c.concurrency for c in report.comparisons] == [1, 2]
    assert report.comparisons[0].tokens_compared == 6 and report.to_dict()["lossless"] is True
    expect_lossless(report)


def test_one_differing_token_fails_and_names_prompt_position_and_tokens():
    spec = [_out(1, 0, [5, 6, 7]), _out(1, 1, [8, 4, 10])]
    comparison = compare_outputs(BASE, spec, 1, reference_arm="baseline", candidate_arm="eagle3")
    assert (comparison.identical, comparison.prompts) == (1, 2) and not comparison.lossless
    first = comparison.mismatches[0]
    assert (first.prompt_index, first.position, first.reference_token, first.candidate_token) == (1, 1, 9, 4)
    with pytest.raises(ExpectationError) as err:
        expect_lossless(lossless_report(("baseline", BASE), [("eagle3", spec)]))
    assert (err.value.problem, err.value.arm, err.value.concurrency) == ("not_lossless", "eagle3", 1)
    assert (err.value.found, err.value.expected) == (1, 2)  # identical prompts of all compared


def test_a_missing_or_failed_request_is_not_counted_as_identical():
    spec = [_out(1, 0, [5, 6, 7]), _out(1, 1, None, ok=False)]
    comparison = compare_outputs(BASE, spec, 1, reference_arm="baseline", candidate_arm="eagle3")
    assert comparison.identical == 1 and comparison.mismatches[0].candidate_token is None


def test_a_shorter_output_differs_at_its_end():
    comparison = compare_outputs(BASE, [_out(1, 0, [5, 6]), _out(1, 1, [8, 9, 10])], 1, reference_arm="b",
                                 candidate_arm="s")
    assert comparison.mismatches[0].position == 2 and comparison.mismatches[0].candidate_token is None


def test_mismatch_only_at_higher_concurrency_does_not_fail_the_required_level():
    spec = [_out(1, 0, [5, 6, 7]), _out(1, 1, [8, 9, 10]), _out(2, 0, [5, 6, 1]), _out(2, 1, [8, 9, 10])]
    report = lossless_report(("baseline", BASE), [("eagle3", spec)])
    assert report.lossless and not report.comparisons[1].lossless
    assert [row["required"] for row in report.rows()] == [True, False]


def test_no_required_level_or_old_records_fail_in_one_line():
    with pytest.raises(ExpectationError) as err:
        expect_lossless(lossless_report(("baseline", BASE), [("eagle3", [_out(4, 0, [1])])]))
    assert (err.value.problem, err.value.concurrency) == ("not_measured", 1)
    old = [RequestRecord("x", 1, "measure", True, 0.0)]
    with pytest.raises(BenchError) as err:
        compare_outputs(old, old, 1, reference_arm="b", candidate_arm="s")
    assert (err.value.problem, err.value.key) == ("predates_check", "output_ids")


def test_bf16_agreement_records_each_prompt_and_passes_a_late_near_tie_flip():
    """A bf16 profile: prompt 1 flips at its last token (a near-tie), prompt 0 is identical; agreement 5/6."""
    spec = [_out(1, 0, [5, 6, 7]), _out(1, 1, [8, 9, 11])]
    mode, threshold = lossless_policy("bfloat16", 0.5)
    report = lossless_report(("baseline", BASE), [("eagle3", spec)], mode=mode, min_agreement=threshold)
    comparison = report.comparisons[0]
    assert [(p.prompt_index, p.identical, p.first_divergence, p.tokens_matched) for p in comparison.per_prompt] \
        == [(0, True, None, 3), (1, False, 2, 2)]
    assert comparison.tokens_matched == 5 and comparison.agreement == pytest.approx(5 / 6)
    assert not report.lossless and report.passed
    data = report.to_dict()
    assert data["mode"] == "agreement" and data["min_agreement"] == 0.5 and data["passed"] is True
    assert report.rows()[0]["threshold"] == 0.5
    expect_lossless(report)


def test_bf16_gross_divergence_fails_with_its_agreement_and_threshold():
    spec = [_out(1, 0, [1, 6, 7]), _out(1, 1, [8, 2, 10])]
    report = lossless_report(("baseline", BASE), [("eagle3", spec)], mode="agreement", min_agreement=0.5)
    assert report.comparisons[0].agreement == pytest.approx(1 / 6) and not report.passed
    with pytest.raises(ExpectationError, match=r"matched 1/6 tokens .* below the profile's lossless_min_agreement 0.5"):
        expect_lossless(report)


def test_fp32_profiles_need_exact_equality_and_bf16_ones_a_threshold():
    assert lossless_policy("float32", 0.9) == ("exact", None)
    assert lossless_policy("bfloat16", 0.7) == ("agreement", 0.7)
    with pytest.raises(ExpectationError, match="needs lossless_min_agreement"):
        lossless_policy("auto", None)
