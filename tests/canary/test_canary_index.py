"""The release canary against the package index (network): each release's wheel read as downloaded (cached after
the first run), every wrapper the audit finds, each against the release before it on the index."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from eagle3lab.canary.rows import FAIL, PASS
from eagle3lab.canary.run import plan
from eagle3lab.package.wheels import list_releases
from test_canary import KIMI, canary

pytestmark = pytest.mark.network


def test_from_the_package_index_0_5_9_fails_on_kimi_k25_and_0_5_10_passes(tmp_path):
    done = canary("--engine", "sglang", "--release", "0.5.9", "--release", "sglang==0.5.10", "--out", str(tmp_path))
    assert done.returncode == 1, done.stderr
    nine = json.loads((tmp_path / "sglang-0.5.9.json").read_text())
    ten = json.loads((tmp_path / "sglang-0.5.10.json").read_text())
    assert nine["source"].startswith("wheel sglang-0.5.9-") and nine["previous"] == "0.5.8.post1"
    kimi_nine = {row["architecture"]: row for row in nine["rows"]}[KIMI]
    kimi_ten = {row["architecture"]: row for row in ten["rows"]}[KIMI]
    assert kimi_nine["verdict"] == FAIL and kimi_nine["first_raise"] == "cuda_graph_runner.py:365 (gpu)"
    assert kimi_nine["fix"] == "patches/kimi_k25-eagle3-delegation.patch" and kimi_nine["layer_ids"] == "every id + 1"
    assert any(line.startswith("regressed: sglang 0.5.9 Kimi-K2.5 (") for line in nine["regressions"])
    assert kimi_ten["verdict"] == PASS and ten["ok"] and ten["previous"] == "0.5.9"
    # every wrapper the static audit finds is a row, beside the models the canary names
    assert len(nine["rows"]) > 20 and {"DeepseekV3ForCausalLM", "KimiVLForConditionalGeneration"} <= {
        row["architecture"] for row in nine["rows"]}
    regressions = [line for line in done.stderr.splitlines() if line.startswith("regressed:")]
    assert regressions == nine["regressions"]  # one line per regressed wrapper, 0.5.10's none


def test_the_newest_release_is_checked_against_the_one_before_it():
    releases = list_releases()
    (target,) = plan(["sglang"], [], newest=True)
    assert target.release == releases[-1] == max(releases, key=Version) and target.previous == releases[-2]


def test_a_release_the_index_does_not_list_is_one_line(tmp_path):
    done = canary("--engine", "sglang", "--release", "0.5.999", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "sglang 0.5.999 is not on the package index (newest there:" in done.stderr
    assert not (tmp_path / "out").exists()
