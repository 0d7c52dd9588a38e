"""fixverify: the generated fixes at run time, through sglang's own ModelRunner on CPU.

Notebook 02 verifies every wrapper with a tiny config (unpatched and patched) as part of the main job; these tests
read what it measured in the session's full report instead of building the same runners again (minutes on CPU).
"""

from __future__ import annotations

import json

import pytest

from eagle3lab.fix import fixgen, fixseries
from eagle3lab.package.location import installed_version
from eagle3lab.package.release import drift
from eagle3lab.runtime.tinymodel.wrappers import WRAPPER_CONFIGS
from eagle3lab.trace import sources


@pytest.fixture(scope="module")
def fixes_0_5_9() -> list[fixgen.Fix]:
    if installed_version() != "0.5.9":
        pytest.skip("needs sglang 0.5.9 installed (the full report runs on a pristine copy of it)")
    return fixseries.fixes_for(sources.open_source("0.5.9"))


@pytest.fixture(scope="module")
def verification(full_report) -> dict:
    _, root = full_report
    data = json.loads((root / "artifacts" / "02_interface_trace.cpu.json").read_text())
    assert data["fixes"]["verification"]["ran"] is True, "notebook 02 ran its fixes' verification"
    return data["fixes"]["verification"]


@pytest.mark.server
@pytest.mark.parametrize("entry", sorted(WRAPPER_CONFIGS))
def test_generated_fix_makes_the_hook_reach_the_inner_model(entry, fixes_0_5_9, verification):
    """Three inner families (LLaVA over Qwen2 and over Llama, Kimi-VL over DeepSeek-V2): unpatched the runner dies
    on the missing hook where the trace says; patched, real forwards return the drafter's aux hidden states."""
    fix = next(f for f in fixes_0_5_9 if entry in f.entries)
    result = next(r for r in verification["capture"] if r["entry"] == entry)
    assert result["patch"] == f"{fix.name}.patch" and result["release"] == "0.5.9"
    failed = next(h for h in result["unpatched"]["hooks"] if not h["ok"])
    assert failed["hook"] == "set_eagle3_layers_to_capture" and failed["error_type"] == "AttributeError"
    assert failed["raised_at"].startswith("sglang/srt/model_executor/model_runner.py")
    after = result["patched"]
    assert after["outcome"] == "captured", after
    assert after["layers_to_capture"] == [i + 1 for i in after["drafter_layer_ids"]]
    assert [f["matched_layers"] for f in after["forwards"]] == [after["drafter_layer_ids"]] * 2
    assert result["verified"] and result["reason"] == ""
    assert "ModelRunner on CPU" in result["provenance"] and result["measured_at"]["date"]


@pytest.mark.server
def test_patched_modules_of_the_installed_release_still_import(fixes_0_5_9, verification, full_report):
    check = verification["imports"]["0.5.9"]
    assert check["ok"] and check["of"] == sum(1 for _ in {f.file for f in fixes_0_5_9 if f.ok})
    assert check["imported"] >= check["of"] - 1  # glmasr.py needs a newer transformers even unpatched
    assert all(row["patched"] == "ok" or row["patched"] == row["pristine"] for row in check["modules"].values())
    assert drift(full_report[1] / "site-packages").clean  # restored (the report's own copy of the release)
