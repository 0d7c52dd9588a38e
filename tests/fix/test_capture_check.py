"""The capture check: real sglang ModelRunner runs (marker ``server``) and the parts around them."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from eagle3lab.package.location import installed_root
from eagle3lab.fix import capture_check as cc, capture_trace
from eagle3lab.fix.capture_result import CaptureResult, ForwardCapture, HookOutcome
from eagle3lab.package import patching
from eagle3lab.errors import CaptureCheckError, SidecarError
from eagle3lab.sidecars import InterfaceTraceSidecar

KIMI = "sglang/srt/models/kimi_k25.py"


def installed_sha() -> str:
    return hashlib.sha256((installed_root() / KIMI).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny():
    from eagle3lab.runtime.tinymodel import build_tiny_models

    return build_tiny_models()


def drafter_ids(tiny) -> list[int]:
    config = json.loads((tiny.draft_dir / "config.json").read_text())
    return config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]


def target_hidden(tiny) -> int:
    return json.loads((tiny.target_dir / "config.json").read_text())["text_config"]["hidden_size"]


@pytest.mark.server
def test_unpatched_runner_raises_the_real_attribute_error():
    before = installed_sha()
    result = cc.run_cpu_capture_check(None)
    hook = result.failed_hook
    assert hook is not None and hook.hook == "set_eagle3_layers_to_capture"
    assert hook.error_type == "AttributeError"
    assert "'KimiK25ForConditionalGeneration' object has no attribute 'set_eagle3_layers_to_capture'" in (
        hook.error_message or "")
    assert hook.raised_at and hook.raised_at.startswith("sglang/srt/model_executor/model_runner.py:")
    assert not result.ok and result.outcome == "hook_missing" and result.forwards == []
    assert installed_sha() == before
    print("unpatched seconds:", result.seconds)


@pytest.mark.server
def test_full_patch_captures_the_drafter_layers_in_prefill_and_decode(tiny):
    before = installed_sha()
    prompt_len, batch_size = 8, 2
    result = cc.run_capture_check(tiny.target_dir, tiny.draft_dir, patching.FULL_DELEGATION_PATCH,
                                  prompt_len=prompt_len, batch_size=batch_size, env=_cpu_env())
    assert installed_sha() == before, "the installed sglang must be restored after the check"
    assert result.patch == patching.FULL_DELEGATION_PATCH
    assert [h.ok for h in result.hooks] == [True, True], result.hooks
    ids = drafter_ids(tiny)
    assert result.drafter_layer_ids == ids
    hidden = target_hidden(tiny)
    tokens = {"prefill": prompt_len * batch_size, "decode": batch_size}
    assert [f.phase for f in result.forwards] == ["prefill", "decode"]
    for forward in result.forwards:
        assert forward.shape == [tokens[forward.phase], len(ids) * hidden]
        assert forward.matched_layers == ids  # slice k is the output of decoder layer ids[k]
        assert not forward.ambiguous  # ... and of no other layer: the seeded weights keep layers apart
        assert forward.max_abs_diff == 0.0
    assert result.ok and result.outcome == "captured"
    print("full patch seconds:", result.seconds, [(f.phase, f.seconds) for f in result.forwards])


@pytest.mark.server
def test_one_method_patch_still_misses_the_draft_worker_hook():
    before = installed_sha()
    result = cc.run_cpu_capture_check(patching.ONE_METHOD_PATCH)
    assert installed_sha() == before
    assert result.hooks[0].ok
    assert result.failed_hook is not None and result.failed_hook.hook == "get_embed_and_head"
    assert result.outcome == "hook_missing" and not result.ok


def _cpu_env() -> dict[str, str]:
    from eagle3lab.runtime.cpu_harness import cpu_environment

    return cpu_environment(shims=cc.CPU_SHIMS)


def trace(missing: list[str], first: str, after_one: str, layers: list[int]) -> InterfaceTraceSidecar:
    """Notebook 02's typed sidecar, with the parts the comparison reads filled in."""
    return InterfaceTraceSidecar(
        profile="cpu",
        verdict={"sglang_version": "0.5.9", "required_members": missing, "missing_members": missing,
                 "one_method_enough": False, "first_raise": {"cpu": {"member": first}},
                 "next_raise_after_one_method": {"cpu": {"member": after_one}}},
        layer_ids=[{"profile": "cpu", "depth": 4, "aux_layer_ids": [0, 1, 2], "rows": [
            {"function": "ModelRunner.initialize", "result": {"self.model.layers_to_capture": layers}}]}],
    )


def run(hooks: list[tuple[str, bool]], layers=None) -> CaptureResult:
    return CaptureResult(patch="x", hooks=[HookOutcome(h, "caller", ok) for h, ok in hooks],
                            drafter_layer_ids=[0, 1, 2] if layers else None, layers_to_capture=layers)


def test_compare_with_trace_agrees_and_catches_disagreement():
    results = {
        None: run([("set_eagle3_layers_to_capture", False)]),
        patching.ONE_METHOD_PATCH: run([("set_eagle3_layers_to_capture", True), ("get_embed_and_head", False)],
                                 layers=[1, 2, 3]),
    }
    good = trace(["set_eagle3_layers_to_capture", "get_embed_and_head"], "set_eagle3_layers_to_capture",
                 "get_embed_and_head", [1, 2, 3])
    rows = capture_trace.compare_with_trace(good, results)
    assert len(rows) == 5 and all(row.agree for row in rows), [r.to_dict() for r in rows]

    bad = trace(["set_eagle3_layers_to_capture", "get_embed_and_head", "set_embed_and_head"],
                "get_embed_and_head", "get_embed_and_head", [0, 1, 2])
    disagree = {row.item for row in capture_trace.compare_with_trace(bad, results) if not row.agree}
    assert disagree == {"members the full patch delegates", "first missing hook, unpatched",
                        "layers_to_capture after ModelRunner.initialize"}


def test_compare_with_trace_rejects_a_trace_without_this_profiles_layer_table():
    no_gpu_table = trace(["set_eagle3_layers_to_capture"], "set_eagle3_layers_to_capture", "x", [1, 2, 3])
    with pytest.raises(CaptureCheckError) as err:
        capture_trace.compare_with_trace(no_gpu_table, {}, profile="gpu")
    assert (err.value.problem, err.value.profile) == ("no_layer_table", "gpu")


def test_load_trace_missing_file_says_what_to_run(tmp_path):
    with pytest.raises(SidecarError) as err:
        capture_trace.load_trace("cpu", tmp_path / "none.json")
    assert err.value.path == tmp_path / "none.json" and err.value.notebook == "02_interface_trace"


def test_missing_model_dir_is_one_line(tmp_path):
    with pytest.raises(CaptureCheckError) as err:
        cc.run_capture_check(tmp_path / "no-target", tmp_path, None)
    assert (err.value.problem, err.value.path) == ("not_a_directory", tmp_path / "no-target")


def test_child_without_result_reports_its_exit_and_stderr():
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('boom at start-up\\n'); sys.exit(3)"]
    with pytest.raises(CaptureCheckError) as err:
        cc._run_child(argv, {}, timeout_s=30)
    assert (err.value.problem, err.value.returncode) == ("no_result", 3)
    assert "boom at start-up" in str(err.value)  # the child's stderr tail is the only clue the user gets


def test_child_past_its_timeout_is_killed():
    with pytest.raises(CaptureCheckError) as err:
        cc._run_child([sys.executable, "-c", "import time; time.sleep(60)"], {}, timeout_s=1)
    assert (err.value.problem, err.value.timeout_s) == ("timeout", 1)


def test_result_round_trips_through_json():
    result = CaptureResult(
        patch="p", drafter_layer_ids=[0, 1, 2], layers_to_capture=[1, 2, 3], hidden_size=64,
        hooks=[HookOutcome("set_eagle3_layers_to_capture", "ModelRunner.initialize", True)],
        forwards=[ForwardCapture("decode", 2, [2, 192], [2, 192], True, [0, 1, 2], False, 0.0, 0.1)])
    again = CaptureResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result and again.to_dict()["outcome"] == result.outcome


@pytest.mark.server
def test_dummy_loader_needs_its_own_patch():
    """--load-format dummy: the delegation patch alone fails at the first forward; with the post_load_weights
    patch stacked on top the forwards run and capture."""
    before = installed_sha()
    alone = cc.run_cpu_capture_check([patching.FULL_DELEGATION_PATCH], load_format="dummy")
    assert all(h.ok for h in alone.hooks)
    assert alone.error_type == "AttributeError" and "'NoneType' object has no attribute 'dtype'" in alone.error_message
    both = cc.run_cpu_capture_check([patching.FULL_DELEGATION_PATCH, "kimi_k25-dummy-post-load-weights"],
                                    load_format="dummy")
    assert installed_sha() == before
    assert both.patch == f"{patching.FULL_DELEGATION_PATCH}+kimi_k25-dummy-post-load-weights"
    assert both.error_type is None and [f.phase for f in both.forwards] == ["prefill", "decode"]
    assert all(f.shape == f.expected_shape and f.matches_layer_outputs for f in both.forwards)
    print("dummy loader:", alone.outcome, both.outcome, [f.ambiguous for f in both.forwards])


def test_refuses_a_package_that_already_carries_a_patch(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))  # keep its backup out of the real cache
    root = tmp_path / "site-packages"
    (root / KIMI).parent.mkdir(parents=True)
    (root / KIMI).write_bytes((installed_root() / KIMI).read_bytes())
    patching.apply(patching.ONE_METHOD_PATCH, root)
    with pytest.raises(CaptureCheckError) as err:
        cc.run_capture_check(tmp_path, tmp_path, patching.FULL_DELEGATION_PATCH, site_packages=root)
    assert (err.value.problem, err.value.patch) == ("already_patched", "kimi_k25-one-method")
    assert patching.check(patching.ONE_METHOD_PATCH, root).status == patching.ALREADY_APPLIED
