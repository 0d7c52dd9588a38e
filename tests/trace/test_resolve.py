"""resolve: inner models built by helpers, proxies, several options, bases elsewhere, external bases, parameters."""

from __future__ import annotations

import pytest

import synthetic_sglang as syn
from eagle3lab.trace import audit, sources
from eagle3lab.trace.resolve import Resolver

CONTRACT = ["set_eagle3_layers_to_capture", "get_embed_and_head"]


@pytest.fixture(scope="module")
def res() -> Resolver:
    return Resolver(syn.source(shapes=True))


def inner_of(res: Resolver, entry: str) -> tuple[str, list[str], list[str]]:
    inner = res.inner(res.find(entry))
    assert inner is not None, entry
    return inner.attr, sorted(c.name for c in inner.resolved), [o.reason for o in inner.unresolved]


def status(res: Resolver, entry: str, member: str = "set_eagle3_layers_to_capture") -> str:
    return res.status(res.find(entry), member).status


def test_inner_model_built_by_a_helper_method_overridden_in_the_subclass(res):
    assert inner_of(res, "HelperWrapper") == ("llm", ["InnerForCausalLM"], [])
    assert res.inner(res.find("HelperWrapper")).owner.name == "HelperBase"  # the class that assigns self.llm


def test_several_possible_inner_classes(res):
    assert inner_of(res, "SwitchWrapper") == ("model", ["InnerForCausalLM", "PlainForCausalLM"], [])
    assert inner_of(res, "ChoiceWrapper") == ("language_model", ["InnerForCausalLM", "PlainForCausalLM"], [])
    rep = res.report(res.find("SwitchWrapper"), CONTRACT)
    options = rep.members["set_eagle3_layers_to_capture"].inner_options
    assert options == {"sglang.srt.models.inner.InnerForCausalLM": True,
                       "sglang.srt.models.inner.PlainForCausalLM": False}
    assert rep.members["set_eagle3_layers_to_capture"].gap == "delegation gap"  # one option has it


def test_getattr_proxy_over_a_dispatch_table(res):
    ref = res.find("DispatchProxy")
    inner = res.inner(ref)
    assert inner.via[0].endswith("DispatchProxy.__getattr__ -> self.impl")
    assert sorted(c.name for c in inner.resolved) == ["InnerForCausalLM", "PlainForCausalLM"]
    st = res.status(ref, "set_eagle3_layers_to_capture")
    assert st.status == "missing" and "HelperWrapper" in st.via and "SwitchWrapper" in st.via
    assert res.status(ref, "named_modules").status == "proxied"  # every option is an nn.Module


def test_function_local_import_and_base_in_another_module(res):
    assert inner_of(res, "LocalImportWrapper") == ("language_model", ["InnerForCausalLM"], [])
    st = res.status(res.find("LocalImportWrapper"), "get_embed_and_head")
    assert st.status == "delegated" and st.via.startswith("sglang.srt.models.shape_bases.RemoteBase")


def test_external_base_is_read_from_the_installed_package_not_left_unresolved(res):
    ref = res.find("HFBaseWrapper")
    order = [c.qualname for c in res.index.mro(ref)]
    assert "transformers.modeling_utils.PreTrainedModel" in order
    assert not res.unreadable_bases(ref)
    assert status(res, "HFBaseWrapper") == "missing"  # not 'unresolved': transformers' source says so
    assert status(res, "HFBaseWrapper", "named_modules") == "inherited"
    assert any(s.startswith("transformers ") for s in res.external_sources(ref))


def test_inner_class_passed_through_the_constructor(res):
    assert inner_of(res, "ParamWrapper") == ("language_model", ["PlainForCausalLM"], [])  # the default
    assert inner_of(res, "ParamChild") == ("language_model", ["InnerForCausalLM"], [])  # what super() gets


def test_class_chosen_at_run_time_is_unresolved_with_the_reason(res):
    attr, classes, reasons = inner_of(res, "RegistryWrapper")
    assert attr == "language_model" and classes == []
    assert reasons and "chosen at run time" in reasons[0]


@pytest.mark.network
@pytest.mark.parametrize("release", ["0.5.9", "0.5.23"])
def test_real_release_shapes(release):
    """Each shape on a real release: helper (MiniCPM-O/V), proxy (MiniCPMV), several options (DeepSeek-OCR), a
    function-local import of a class whose methods come from another module (LLaVA-Mistral), an external base
    (Janus-Pro's MultiModalityCausalLM)."""
    conf = audit.conformance(sources.open_source(release))
    rows = {e["entry"]: e for e in conf["entries"]}
    lacking = {e["entry"] for e in conf["lacking"]}
    assert {"MiniCPMO", "MiniCPMV", "DeepseekOCRForCausalLM", "LlavaMistralForCausalLM",
            "MultiModalityCausalLM"} <= lacking
    assert rows["MiniCPMO"]["inner_attr"] == "llm"
    assert rows["MiniCPMV"]["via"] and rows["MiniCPMV"]["inner_attr"].startswith("minicpmv.")
    ocr = {o["class"].rsplit(".", 1)[-1]: o["eagle3"] for o in rows["DeepseekOCRForCausalLM"]["inner_options"]}
    assert ocr["DeepseekV2ForCausalLM"] and ocr["DeepseekV3ForCausalLM"] and not ocr["DeepseekForCausalLM"]
    assert rows["LlavaMistralForCausalLM"]["inner"].endswith("mistral.MistralForCausalLM")
    assert any(s.startswith("transformers") for s in rows["MultiModalityCausalLM"]["resolved_with"])
    counts = conf["counts"]
    assert sum(counts[audit.KIND_KEYS[k]] for k in audit.KINDS) == counts["entry_classes"]
    assert all(u["reason"] for u in conf["unresolved"])
    assert "named_modules" not in conf["members"]
