"""The vLLM audits shipped with the package: they hold this code's audit of every release they name (a stale record
is caught here, with the command that rewrites it), ``audit --engine vllm`` answers from them offline in the shared
shape, and a recorded audit is what tracing the release now gives (network)."""

from __future__ import annotations

import gzip
import json

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.trace import engine_audit
from eagle3lab.trace.vllm import record
from eagle3lab.trace.vllm.audit import audit
from eagle3lab.trace.vllm.source import open_vllm

# The releases of the acceptance audit; 0.34.0 is the newest on the index as the record was written.
ACCEPTANCE = ("0.15.0", "0.17.1", "0.18.0", "0.34.0")


@pytest.fixture(scope="module")
def record_about() -> dict:
    assert record.RECORD.is_file(), f"no vLLM audit record shipped; run `{record.RECORD_COMMAND}`"
    return json.loads(gzip.decompress(record.RECORD.read_bytes()))


def test_the_record_holds_this_codes_audit_of_every_release_it_names(record_about):
    releases = record_about["releases"]
    assert record_about["made_by"] == record.RECORD_COMMAND and set(ACCEPTANCE) <= set(releases)
    stale = [v for v in releases if record.recorded(v) is None]
    assert not stale, f"the vLLM audit record is stale (the trace code changed) for {stale}: rerun `{record.RECORD_COMMAND}`"


def by_arch(version: str) -> dict[str, dict]:
    result = record.recorded(version)
    assert result is not None
    return {row["arch"]: row for row in result["classes"]}


def test_kimi_k25_lacks_the_interface_with_its_inner_model_on_0_17_1_and_has_it_on_0_18_0():
    old, new = by_arch("0.17.1")["KimiK25ForConditionalGeneration"], by_arch("0.18.0")["KimiK25ForConditionalGeneration"]
    assert old["wrapper_of"] == "DeepseekV2ForCausalLM" and not old["implements"]
    assert old["inner_implements"] is False and not old["defect"]  # a real lack on 0.17.1: DeepSeek has none either
    assert new["implements"] and new["how"] == "direct" and new["inner_implements"] is True


def test_from_0_18_0_the_protocol_default_carries_most_classes_and_kimi_vl_is_a_defect():
    rows = by_arch("0.18.0")
    assert rows["LlamaForCausalLM"]["how"] == "protocol default" and rows["LlamaForCausalLM"]["implements"]
    assert by_arch("0.17.1")["LlamaForCausalLM"]["how"] == "direct"
    kimi_vl = rows["KimiVLForConditionalGeneration"]  # its inner DeepSeek model gained the interface in 0.18.0
    assert kimi_vl["defect"] and kimi_vl["wrapper_of"] == "DeepseekV2ForCausalLM"
    assert not by_arch("0.17.1")["KimiVLForConditionalGeneration"]["defect"]


def test_every_registered_target_of_every_recorded_release_is_found_in_its_source(record_about):
    """Models moved to ``vllm/models/`` are registered by absolute module name (v0.22+); read as relative, 28 of
    0.34.0's targets (Qwen3.5's among them) were 'not defined' and failed every check."""
    lost = {v: [r["arch"] for r in record.recorded(v)["classes"] if "is not defined in" in r["evidence"]]
            for v in record_about["releases"]}
    assert {v: archs for v, archs in lost.items() if archs} == {}
    qwen35 = by_arch("0.34.0")["Qwen3_5ForConditionalGeneration"]
    assert qwen35["implements"] and qwen35["how"] == "protocol default"


def test_the_audit_command_answers_from_the_record_in_the_shared_shape(capsys, monkeypatch):
    def offline(version: str):
        raise AssertionError("fetched although the record holds the release")

    monkeypatch.setattr(engine_audit, "open_vllm", offline)
    assert main(["audit", "--engine", "vllm", "--release", "0.18.0", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["release"] == "0.18.0" and result["from_record"]
    assert all(set(engine_audit.ROW_KEYS) <= set(row) for row in result["classes"])
    assert main(["audit", "--engine", "vllm", "--release", "0.17.1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("vllm 0.17.1: ") and "(release record)" in text and "DEFECT " in text


def test_vllm_needs_a_release(capsys):
    assert main(["audit", "--engine", "vllm"]) == 2
    assert "pass --release" in capsys.readouterr().err


@pytest.mark.network
def test_a_recorded_audit_is_what_tracing_the_release_gives():
    traced = audit(open_vllm("0.18.0"))
    assert traced["classes"] == record.recorded("0.18.0")["classes"]
