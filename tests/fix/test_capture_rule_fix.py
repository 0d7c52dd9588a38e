"""The 0.5.9 backport of sglang PR #25454's hook rule and the advice by drafter ids (issue 37, item 4): with the
order patch, AQ-MedAI/Kimi-K25-eagle3's ids [2, 30, 58] are captured as given on both paths, as current sglang
(0.5.13 on) captures them; SpecForge-style ids starting at 1 keep the +1."""

from __future__ import annotations

import pytest

from eagle3lab.fix import capture_order_fix, capture_rule_fix
from eagle3lab.package import patching
from eagle3lab.trace.capture_order import trace_capture_order
from eagle3lab.trace.sources import open_source

KIMI_IDS, SPECFORGE_IDS = [2, 30, 58], [1, 29, 57]


@pytest.fixture(scope="module")
def release_059():
    return open_source("0.5.9")


def test_the_generated_patch_is_the_committed_one_and_applies(release_059):
    text = capture_rule_fix.generate_patch(release_059)
    path = patching.PATCHES_DIR / f"{capture_rule_fix.PATCH_NAME}.patch"
    assert text == path.read_text(encoding="utf-8"), \
        "regenerate: fix.capture_rule_fix.write_patch(open_source('0.5.9'))"
    assert patching.check(path).status == patching.APPLICABLE


def test_both_patches_capture_kimi_ids_as_given_on_both_paths(release_059):
    both = trace_capture_order(capture_order_fix.patched_source(capture_rule_fix.patched_source(release_059)))
    kimi = both.layers(61, KIMI_IDS)
    assert not both.defect and (kimi["cuda_graph_layers"], kimi["eager_layers"]) == (KIMI_IDS, KIMI_IDS)
    spec = both.layers(61, SPECFORGE_IDS)
    assert spec["cuda_graph_layers"] == spec["eager_layers"] == [2, 30, 58]
    # the order patch alone moves graphs to the +1, the direction PR #25454 calls the bug for a first id of 2
    order_only = trace_capture_order(capture_order_fix.patched_source(release_059)).layers(61, KIMI_IDS)
    assert order_only["cuda_graph_layers"] == order_only["eager_layers"] == [3, 31, 59]


@pytest.mark.network
def test_the_backported_rule_is_the_one_0_5_13_ships(release_059):
    ours = trace_capture_order(capture_rule_fix.patched_source(release_059)).rule
    theirs = trace_capture_order(open_source("0.5.13")).rule
    assert ours is not None and theirs is not None and ours.rule() == theirs.rule()
    for ids in (KIMI_IDS, SPECFORGE_IDS, None):
        assert ours.captured(61, ids) == theirs.captured(61, ids)


def test_the_advice_follows_the_first_id_and_the_recorded_releases():
    marks = capture_rule_fix.recorded_milestones()
    assert (marks["order_fixed"], marks["both"]) == ("0.5.11", "0.5.13")  # from the shipped release record
    kimi = capture_rule_fix.right_fix(KIMI_IDS, marks)
    assert "0.5.13 or newer" in kimi and capture_rule_fix.PATCH_NAME in kimi and capture_order_fix.PATCH_NAME in kimi
    spec = capture_rule_fix.right_fix(SPECFORGE_IDS, marks)
    assert "0.5.11 or newer" in spec and capture_rule_fix.PATCH_NAME not in spec
    tiny = capture_rule_fix.right_fix([2, 4, 5], marks, plus_one_intended=True)
    assert "0.5.11 or newer" in tiny and capture_rule_fix.PATCH_NAME not in tiny
    # the patches are for 0.5.9 (their Applies-To line); on 0.5.11 only the upgrade is offered
    assert capture_rule_fix.patch_release(capture_rule_fix.PATCH_NAME) == "0.5.9"
    later = capture_rule_fix.right_fix(KIMI_IDS, marks, release="0.5.11")
    assert "0.5.13 or newer" in later and "patch apply" not in later
    assert "patch apply" in capture_rule_fix.right_fix(KIMI_IDS, marks, release="0.5.9")
    unknown = capture_rule_fix.right_fix(None, marks)
    assert "if its first id is 1" in unknown and "0.5.13" in unknown


def test_a_release_without_the_unconditional_plus_one_has_nothing_to_backport():
    from eagle3lab.errors import SourceError

    with pytest.raises(SourceError, match=r"has no unconditional \+1 to replace"):
        capture_rule_fix.patched_texts(capture_rule_fix.patched_source(open_source("0.5.9")))
