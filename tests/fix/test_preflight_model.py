"""preflight-model: architectures -> sglang's entry class -> will an EAGLE-3 launch crash, where, and which patch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trace"))
import synthetic_sglang as syn  # noqa: E402
from eagle3lab.package import wheels
from eagle3lab.errors import EntryClassError  # noqa: E402
from eagle3lab.fix import preflight_model as pm
from eagle3lab.trace import registry, sources
from eagle3lab.trace.modindex import ModuleIndex
from timing import patience


@pytest.fixture(scope="module")
def src() -> sources.SglangSource:
    return syn.source(shapes=True)


def test_registry_follows_sglang_rules(src):
    index = ModuleIndex(src)
    regs = registry.registrations(index)
    assert regs["GapWrapper"].file == "srt/models/wrappers.py"
    arch, note = registry.choose(["NotThere", "GapWrapper"], regs)
    assert arch == "GapWrapper" and "NotThere" in note  # first registered one wins
    assert registry.draft_only_architectures(src) == {"InnerForCausalLMNextN"}
    with pytest.raises(EntryClassError) as err:
        registry.choose(["NotThere"], regs)  # the synthetic tree has no fallback class
    assert (err.value.problem, err.value.architectures) == ("not_registered", ("NotThere",))
    assert "TransformersForCausalLM" in str(err.value)  # the line names the fallback that is missing
    assert "\n" not in str(err.value)


def test_wrapper_that_lacks_the_contract_will_crash(src):
    answer = pm.preflight(["GapWrapper"], src=src, with_patch=False)
    assert set(pm.KEYS) <= set(answer)
    assert answer["will_crash"] is True
    assert set(answer["missing"]) >= {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    assert answer["first_raise"]["cpu"]["where"] == "srt/model_executor/model_runner.py:17"
    assert answer["first_raise"]["gpu"]["where"] == "srt/model_executor/cuda_graph_runner.py:6"
    assert answer["first_raise"]["cpu"]["error"].startswith("AttributeError")
    assert "WILL CRASH" in pm.text(answer)


def test_model_with_every_member_will_not_crash(src):
    answer = pm.preflight(["InnerForCausalLM"], src=src, with_patch=False)
    # the synthetic runtime also needs checked_member/helper_member, which the inner model itself lacks
    assert answer["kind"] == "not a wrapper" and set(answer["missing"]) == {"checked_member", "helper_member"}


def test_config_file_or_folder_and_bad_input_is_one_line(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    assert pm.read_architectures(tmp_path) == pm.read_architectures(tmp_path / "config.json")
    (tmp_path / "bad.json").write_text(json.dumps({"model_type": "x"}))
    for bad, problem in ((tmp_path / "bad.json", "no_architectures"), (tmp_path / "none.json", "missing")):
        with pytest.raises(EntryClassError) as err:
            pm.read_architectures(bad)
        assert (err.value.problem, err.value.path) == (problem, bad)
        assert "\n" not in str(err.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eagle3lab", "preflight-model", *args], capture_output=True,
                          text=True, timeout=patience(300))


@pytest.mark.network
def test_kimi_k25_on_0_5_9_will_crash_and_names_the_fix():
    proc = _cli("--arch", "KimiK25ForConditionalGeneration", "--sglang", "0.5.9", "--json")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["will_crash"] is True and answer["sglang_version"] == "0.5.9"
    assert set(answer["missing"]) == {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    assert answer["first_raise"]["cpu"]["member"] == "set_eagle3_layers_to_capture"
    assert answer["first_raise"]["cpu"]["where"].startswith("srt/model_executor/model_runner.py")
    assert answer["patch"]["path"] == "patches/kimi_k25-eagle3-delegation.patch"


@pytest.mark.network
def test_kimi_k25_on_0_5_10_will_not_crash(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    proc = _cli("--config", str(tmp_path), "--sglang", "0.5.10", "--json")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["will_crash"] is False and answer["missing"] == [] and answer["patch"] is None


@pytest.mark.network
def test_newest_release_start_up_reaches_the_hook_through_the_scheduler():
    """Newer releases call the hook from the scheduler's attention-backend set-up, not the runner's constructor."""
    newest = wheels.list_releases()[-1]
    answer = pm.preflight(["MultiModalityCausalLM"], newest, with_patch=False)
    assert answer["will_crash"] is True
    assert answer["first_raise"]["cpu"] and answer["first_raise"]["cpu"]["member"] == "set_eagle3_layers_to_capture"


def test_unknown_release_is_one_line():
    proc = _cli("--arch", "X", "--sglang", "not-a-version")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a version" in proc.stderr


def test_missing_arguments_are_one_line():
    proc = _cli("--sglang", "0.5.9")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--config" in proc.stderr


def test_capture_order_warns_for_kimi_ids_on_0_5_9_with_graphs_and_names_the_fix(tmp_path: Path):
    """The Kimi target's depth (61) and the drafter ids [2, 30, 58] (as the engineer's write-up quotes them)."""
    target, draft = tmp_path / "target", tmp_path / "draft"
    target.mkdir(), draft.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                    "text_config": {"num_hidden_layers": 61}}))
    (draft / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                                   "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}))
    proc = _cli("--config", str(target), "--draft-config", str(draft / "config.json"), "--sglang", "0.5.9", "--json")
    assert proc.returncode == 0, proc.stderr
    order = json.loads(proc.stdout)["capture_order"]
    assert order["defect"] and order["warn"]
    assert (order["layers"]["cuda_graph_layers"], order["layers"]["eager_layers"]) == ([2, 30, 58], [3, 31, 59])
    # sglang PR #25454's convention: a first id other than 1 is captured as given, so the fix is the order patch
    # with the first-id rule (or the first release with both), never the order fix alone (+1 on both paths)
    assert order["convention"] == {"pr": "https://github.com/sgl-project/sglang/pull/25454",
                                   "expected_layers": [2, 30, 58], "agrees": False}
    assert "patches/sglang-eagle3-capture-order.patch" in order["fix"]
    assert "patches/sglang-eagle3-first-id-rule.patch" in order["fix"] and "0.5.13 or newer" in order["fix"]
    assert "0.5.10" not in order["fix"] and "0.5.11" not in order["fix"]
    plain = _cli("--config", str(target), "--draft-config", str(draft), "--sglang", "0.5.9")
    assert "WARNING capture order" in plain.stdout
    off = _cli("--config", str(target), "--draft-config", str(draft), "--sglang", "0.5.9", "--no-cuda-graph",
               "--json")
    # graphs off: eager forwards alone, still +1 on a first id of 2 -- the convention warning stays
    off_order = json.loads(off.stdout)["capture_order"]
    assert off_order["warn"] is True and off_order["convention"]["agrees"] is False
    spec = draft / "config.json"
    spec.write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}))
    specforge = _cli("--config", str(target), "--draft-config", str(spec), "--sglang", "0.5.9", "--no-cuda-graph",
                     "--json")
    assert json.loads(specforge.stdout)["capture_order"]["warn"] is False  # first id 1: the +1 is intended
