"""fixverify: the generated fixes at run time, through sglang's own ModelRunner on CPU (slow: marked server)."""

from __future__ import annotations

import pytest

from eagle3lab.fix import fixgen, fixverify
from eagle3lab.runtime.tinymodel.wrappers import WRAPPER_CONFIGS
from eagle3lab.trace import sources


@pytest.fixture(scope="module")
def fixes_0_5_9() -> list[fixgen.Fix]:
    installed = sources.open_source(sources.INSTALLED)
    if installed.version != "0.5.9" or installed.modified:
        pytest.skip("needs the pristine installed sglang 0.5.9")
    return fixgen.fixes_for(sources.open_source("0.5.9"))


@pytest.mark.server
@pytest.mark.parametrize("entry", sorted(WRAPPER_CONFIGS))
def test_generated_fix_makes_the_hook_reach_the_inner_model(entry, fixes_0_5_9):
    """Three inner families (LLaVA over Qwen2 and over Llama, Kimi-VL over DeepSeek-V2): unpatched the runner dies
    on the missing hook where the trace says; patched, real forwards return the drafter's aux hidden states."""
    fix = next(f for f in fixes_0_5_9 if entry in f.entries)
    show_crash = entry == "LlavaQwenForCausalLM"  # the unpatched run once (a minute each on CPU); notebook 02 does all
    result = fixverify.capture_verify(fix, entry, unpatched=show_crash)
    before, after = result["unpatched"], result["patched"]
    if show_crash:
        failed = next(h for h in before["hooks"] if not h["ok"])
        assert failed["hook"] == "set_eagle3_layers_to_capture" and failed["error_type"] == "AttributeError"
        assert failed["raised_at"].startswith("sglang/srt/model_executor/model_runner.py")
    else:
        assert before is None
    assert after["outcome"] == "captured", after
    assert after["layers_to_capture"] == [i + 1 for i in after["drafter_layer_ids"]]
    assert [f["matched_layers"] for f in after["forwards"]] == [after["drafter_layer_ids"]] * 2
    assert result["verified"]


@pytest.mark.server
def test_patched_modules_of_the_installed_release_still_import(fixes_0_5_9):
    check = fixverify.import_check("0.5.9", fixes_0_5_9)
    assert check["ok"] and check["of"] == sum(1 for _ in {f.file for f in fixes_0_5_9 if f.ok})
    assert check["imported"] >= check["of"] - 1  # glmasr.py needs a newer transformers even unpatched
    assert sources.installed_source().modified == []  # restored
