"""``preflight-model --engine vllm``: Kimi-K2.5 on vLLM 0.17.1 crashes (the allow-list refuses its text model type
first, and the wrapper lacks the interface after), on 0.18.0 it passes; the bisect over the shipped record finds
0.18.0, and names every wrapper any release flagged. All offline, from ``trace/data/vllm_audit.json.gz``."""

from __future__ import annotations

import json

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.trace import engine_audit
from eagle3lab.trace.vllm import bisect, preflight

# Kimi-K2.5's config.json as moonshotai/Kimi-K2.5 publishes it, cut to what the preflight reads (the tiny model's
# config has the same three fields).
KIMI_CONFIG = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
               "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}}


@pytest.fixture
def kimi_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(KIMI_CONFIG))
    return path


def preflight_json(capsys, *args: str) -> dict:
    assert main(["preflight-model", "--engine", "vllm", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_kimi_k25_crashes_on_0_17_1_at_the_allow_list_then_the_interface_check(capsys, kimi_config):
    answer = preflight_json(capsys, "--config", str(kimi_config), "--release", "0.17.1")
    assert answer["will_crash"] is True and answer["entry_class"] == "KimiK25ForConditionalGeneration"
    first = answer["first_error"]
    assert first["stage"].startswith("engine config") and first["raises"].startswith("ValueError")
    assert "eagle3 is only supported for" in first["message"] and "'deepseek_v3'" in first["message"]
    assert first["where"].startswith("config/speculative.py:")
    later = answer["errors"][1]
    assert later["raises"] == "RuntimeError" and "does not support EAGLE3 interface" in later["message"]
    assert answer["fixed_in"] == "0.18.0"


def test_kimi_k25_passes_on_0_18_0(capsys, kimi_config):
    answer = preflight_json(capsys, "--config", str(kimi_config), "--release", "0.18.0")
    assert answer["will_crash"] is False and answer["errors"] == []
    assert answer["gate"]["admits"] is True and answer["implements"] and answer["how"] == "direct"


def test_without_a_config_the_gate_is_undecided_but_a_missing_interface_still_crashes(capsys):
    answer = preflight_json(capsys, "--arch", "KimiK25ForConditionalGeneration", "--release", "0.17.1")
    assert answer["will_crash"] is True and answer["first_error"]["raises"] == "RuntimeError"
    undecided = preflight_json(capsys, "--arch", "KimiK25ForConditionalGeneration", "--release", "0.18.0")
    assert undecided["will_crash"] is None and undecided["gate"]["admits"] is None


def test_an_unregistered_architecture_is_one_line(capsys):
    assert main(["preflight-model", "--engine", "vllm", "--arch", "NoSuchForCausalLM", "--release", "0.18.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "NoSuchForCausalLM" in err


def test_the_protocol_default_that_cannot_reach_a_mixin_crashes_with_its_assertion():
    audit = engine_audit.vllm_classes("0.18.0")
    answer = preflight.answer(audit, ["Qwen3_5ForConditionalGeneration"], "qwen3_5_text")
    assert answer["will_crash"] and answer["first_error"]["raises"] == "AssertionError"


def test_bisect_of_kimi_k25_and_of_every_flagged_wrapper():
    audits = engine_audit.vllm_audits()
    kimi = bisect.bisect_arch(audits, bisect.KIMI_K25, bisect.KIMI_K25_TEXT_TYPE)
    assert kimi["first_implements"] == "0.18.0" and kimi["first_admitted"] == "0.18.0"
    assert kimi["first_not_crashing"] == "0.18.0" and kimi["defect_in"] == []
    flagged = {row["arch"]: row for row in bisect.flagged_wrappers(audits)}
    assert flagged["KimiVLForConditionalGeneration"]["defect_from"] == "0.18.0"
    assert all(row["defect_releases"] >= 1 for row in flagged.values())
    assert all(row["fixed_in"] is None or row["fixed_in"] > row["defect_to"] for row in flagged.values()
               if row["fixed_in"] and row["fixed_in"].count(".") == row["defect_to"].count("."))
