"""Launch command lines through sglang 0.5.9's own ServerArgs (argparse, then its __post_init__), in a child."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3lab.runtime.deployment import Models, resolve_models, server_spec
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.sglang_args import chosen_from_log, launch_flags, memory_setting, parse_launches
from timing import patience

CRASHLOGS = Path(__file__).parent / "data" / "crashlogs"


@pytest.fixture(scope="module")
def parsed(tiny_models):
    """The GPU profiles' two launches each, plus a typo, in one child process (sglang's import is slow) with the
    environment those launches get (no CPU harness; the cpu profile's flags are parsed by every real launch)."""
    argvs = {}
    for name in ("gpu-1x", "blackwell-8x"):
        profile = load_profile(name)
        models = tiny_models if profile.uses_tiny_model else Models(profile.target_model, profile.draft_model)
        for speculative in (False, True):
            spec = server_spec(profile, models, speculative=speculative)
            argvs[f"{name} {'eagle3' if speculative else 'baseline'}"] = spec.argv()
    gpu = load_profile("gpu-1x")
    argvs["typo"] = server_spec(gpu, tiny_models, speculative=False).argv() + ["--tp-sise", "2"]
    return parse_launches(argvs, server_spec(gpu, tiny_models, speculative=False).env)


@pytest.mark.parametrize("label", ["gpu-1x baseline", "gpu-1x eagle3"])
def test_the_tiny_profiles_parse_and_validate_with_sglangs_own_server_args(parsed, label):
    result = parsed[label]
    assert result.parsed and result.validated, result.error


def test_gpu_1x_keeps_cuda_graphs_on_and_sglang_caps_speculative_requests(parsed):
    baseline, eagle3 = parsed["gpu-1x baseline"].chosen, parsed["gpu-1x eagle3"].chosen
    assert baseline["device"] == "cuda" and baseline["disable_cuda_graph"] is False
    assert baseline["attention_backend"] == "triton" and baseline["tp_size"] == 1
    assert eagle3["speculative_algorithm"] == "EAGLE3" and eagle3["speculative_num_draft_tokens"] == 4
    # sglang 0.5.9 resets an unset cap to 48 for speculative servers only; the profile sets it for both arms
    assert eagle3["max_running_requests"] == baseline["max_running_requests"] == 48
    assert not any("Max running requests is reset" in w for w in parsed["gpu-1x eagle3"].warnings)


def test_the_gpu_profile_parses_before_its_models_are_fetched(parsed):
    for label in ("blackwell-8x baseline", "blackwell-8x eagle3"):
        assert parsed[label].parsed, parsed[label].error


def test_a_typo_is_named_by_sglangs_parser(parsed):
    result = parsed["typo"]
    assert not result.parsed and result.error == "unrecognized arguments: --tp-sise 2"


def test_launch_flags_drop_the_interpreter_and_module():
    assert launch_flags(["/py", "-m", "sglang.launch_server", "--tp-size", "8"]) == ["--tp-size", "8"]


def test_sglangs_chosen_values_are_read_from_its_own_log_line():
    chosen = chosen_from_log((CRASHLOGS / "kimi_eagle3_wrapper_gap.log").read_text())
    assert chosen["speculative_algorithm"] == "EAGLE3" and chosen["device"] == "cpu"
    assert isinstance(chosen["mem_fraction_static"], float) and 0 < chosen["mem_fraction_static"] < 1
    assert chosen["disable_cuda_graph"] is True and chosen["tp_size"] == 1
    setting = memory_setting(None, chosen, "server log")
    assert setting["set_by"] == "sglang" and setting["mem_fraction_static"] == chosen["mem_fraction_static"]
    assert chosen_from_log("no such line") == {}


SIZING = """
import json, sys
import sglang.srt.server_args as server_args
server_args.get_device_memory_capacity = lambda device=None: 96 * 1024  # MiB: one 96 GB GPU (constructed)
from eagle3lab.runtime.sglang_args import _parse_one
flags = json.loads(sys.argv[1])
print(json.dumps({k: _parse_one(k, v, True).chosen for k, v in flags.items()}))
"""


def test_sglang_sizes_memory_below_the_old_0_9_on_96gb_gpus_mocked_gpu(tiny_models):
    """sglang's own sizing, with only the GPU memory it would measure supplied (96 GiB, as on the incident's
    RTX PRO 6000 cards); the tiny Kimi-shaped (multimodal) checkpoints stand in for the real ones' configs."""
    profile = load_profile("blackwell-8x", overrides={"target_model": "tiny", "draft_model": "tiny",
                                                      "model_num_layers": 4, "mem_fraction_static": None})
    models = resolve_models(profile)
    flags = {label: launch_flags(server_spec(profile, models, speculative=spec).argv())
             for label, spec in (("baseline", False), ("eagle3", True))}
    proc = subprocess.run([sys.executable, "-c", SIZING, json.dumps(flags)], capture_output=True, text=True,
                          timeout=patience(300))
    chosen = json.loads(proc.stdout.strip().splitlines()[-1])
    baseline, eagle3 = chosen["baseline"]["mem_fraction_static"], chosen["eagle3"]["mem_fraction_static"]
    assert eagle3 < baseline < 0.9, "EAGLE-3 reserves room for the drafter and its graphs"
    assert chosen["baseline"]["chunked_prefill_size"] == 8192 and chosen["baseline"]["cuda_graph_max_bs"] == 512
    print(f"sglang's mem_fraction_static on 96 GiB GPUs, TP 8: baseline {baseline:.3f}, EAGLE-3 {eagle3:.3f}")
