"""vLLM's EAGLE-3 audit on small vLLM-shaped sources: protocol stubs and defaults, inheritance, duck typing, the C3
order, wrappers (literal and config-chosen inner models), the allow-list gate and the runtime's check sites.

The sources are written here in vLLM's own shapes (the protocol, registry and runner code as the releases have
them, cut down), so every rule is exercised in milliseconds; the shipped record of the real releases is checked in
``test_vllm_record.py``.
"""

from __future__ import annotations

import textwrap

import pytest

from eagle3lab.trace.sources import SglangSource
from eagle3lab.trace.vllm.audit import Auditor, audit
from eagle3lab.trace.vllm.interface import read_interface

STUB_PROTOCOL = '''
from typing import ClassVar, Literal, Protocol, runtime_checkable

@runtime_checkable
class SupportsEagleBase(Protocol):
    has_own_lm_head: bool = False
    has_own_embed_tokens: bool = False

@runtime_checkable
class SupportsEagle3(SupportsEagleBase, Protocol):
    supports_eagle3: ClassVar[Literal[True]] = True

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        """Set the layers."""
        ...

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        ...

def supports_eagle3(model):
    return isinstance(model, SupportsEagle3)
'''

DEFAULT_PROTOCOL = '''
from typing import ClassVar, Literal, Protocol, runtime_checkable

@runtime_checkable
class SupportsEagleBase(Protocol):
    has_own_lm_head: bool = False
    has_own_embed_tokens: bool = False

class EagleModelMixin:
    aux_hidden_state_layers: tuple[int, ...] = ()

    def _set_aux_hidden_state_layers(self, layers):
        self.aux_hidden_state_layers = layers

@runtime_checkable
class SupportsEagle3(SupportsEagleBase, Protocol):
    supports_eagle3: ClassVar[Literal[True]] = True

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        parent_ref = self
        if hasattr(self, "get_language_model"):
            parent_ref = self.get_language_model()
        elif hasattr(self, "language_model"):
            parent_ref = self.language_model
        assert isinstance(parent_ref.model, EagleModelMixin)
        parent_ref.model._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)

class SupportsMultiModal(Protocol):
    def get_language_model(self):
        return self.language_model

def supports_eagle3(model):
    return isinstance(model, SupportsEagle3)
'''

REGISTRY = '''
_TEXT_GENERATION_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "DuckForCausalLM": ("duck", "DuckForCausalLM"),
    "HalfDuckForCausalLM": ("duck", "HalfDuckForCausalLM"),
    "StubForCausalLM": ("stub", "StubForCausalLM"),
    "DiamondForCausalLM": ("diamond", "DiamondForCausalLM"),
    "DeepseekV2ForCausalLM": ("deepseek", "DeepseekV2ForCausalLM"),
    "MovedForCausalLM": ("vllm.models.moved", "MovedForCausalLM"),
}
_EMBEDDING_MODELS = {
    "WrapperForConditionalGeneration": ("wrapper", "WrapperForConditionalGeneration"),
}
_MULTIMODAL_MODELS = {
    "WrapperForConditionalGeneration": ("wrapper", "WrapperForConditionalGeneration"),
    "GoodWrapperForConditionalGeneration": ("wrapper", "GoodWrapperForConditionalGeneration"),
    "DynamicWrapperForConditionalGeneration": ("wrapper", "DynamicWrapperForConditionalGeneration"),
    "DefaultWrapperForConditionalGeneration": ("wrapper", "DefaultWrapperForConditionalGeneration"),
    "BadDefaultWrapperForConditionalGeneration": ("wrapper", "BadDefaultWrapperForConditionalGeneration"),
}
_SPECULATIVE_DECODING_MODELS = {
    "Eagle3LlamaForCausalLM": ("llama_eagle3", "Eagle3LlamaForCausalLM"),
}
_VLLM_MODELS = {**_TEXT_GENERATION_MODELS, **_EMBEDDING_MODELS, **_MULTIMODAL_MODELS}
'''

GATE = '''
class SpeculativeConfig:
    def _verify_args(self):
        supported = ["llama", "qwen"]
        if self.method == "eagle3" and self.target_model_config and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in supported):
            raise ValueError(f"Eagle3 is only supported for {supported} models. "
                             f"Got {self.target_model_config.hf_text_config.model_type=}")
        return self
'''

RUNNER = '''
from vllm.model_executor.models.interfaces import supports_eagle3

class GPUModelRunner:
    def load_model(self):
        if self.use_aux_hidden_state_outputs:
            if not supports_eagle3(self.get_model()):
                raise RuntimeError(
                    "Model does not support EAGLE3 interface but "
                    "aux_hidden_state_outputs was requested"
                )
'''

MODELS = {
    "llama.py": '''
from torch import nn
from .interfaces import SupportsEagle3, EagleModelMixin

class LlamaModel(nn.Module, EagleModelMixin):
    pass

class LlamaForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self):
        self.model = LlamaModel()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers
''',
    "duck.py": '''
from torch import nn

class DuckForCausalLM(nn.Module):
    supports_eagle3 = True
    has_own_lm_head = False

    def __init__(self):
        self.has_own_embed_tokens = False

    def set_aux_hidden_state_layers(self, layers):
        pass

    def get_eagle3_aux_hidden_state_layers(self):
        return (1, 2)

class HalfDuckForCausalLM(nn.Module):
    def set_aux_hidden_state_layers(self, layers):
        pass
''',
    "stub.py": '''
from torch import nn
from .interfaces import SupportsEagle3

class StubForCausalLM(nn.Module, SupportsEagle3):
    pass
''',
    # C3 puts Right's body before the protocol's stub (Left -> SupportsEagle3 comes after Right); depth-first
    # order would find the stub first.
    "diamond.py": '''
from torch import nn
from .interfaces import SupportsEagle3

class Left(SupportsEagle3):
    pass

class Right(SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers):
        self.layers = layers

class DiamondForCausalLM(nn.Module, Left, Right):
    pass
''',
    "deepseek.py": '''
from torch import nn

class DeepseekV2Model(nn.Module):
    pass

class DeepseekV2ForCausalLM(nn.Module):
    model_cls = DeepseekV2Model

    def __init__(self):
        self.model = self.model_cls()
''',
    "wrapper.py": '''
from torch import nn
from .interfaces import SupportsEagle3, SupportsMultiModal
from .utils import init_vllm_registered_model

class WrapperForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, vllm_config, config):
        with self._mark_language_model(vllm_config):
            self.language_model = init_vllm_registered_model(
                vllm_config=vllm_config, hf_config=config.text_config, architectures=["LlamaForCausalLM"])

class GoodWrapperForConditionalGeneration(WrapperForConditionalGeneration, SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers):
        self.language_model.set_aux_hidden_state_layers(layers)

class DynamicWrapperForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, vllm_config, config):
        self.language_model = init_vllm_registered_model(vllm_config=vllm_config, hf_config=config.text_config)

class DefaultWrapperForConditionalGeneration(WrapperForConditionalGeneration, SupportsEagle3):
    pass

class BadDefaultWrapperForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsEagle3):
    def __init__(self, vllm_config, config):
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config, hf_config=config.text_config, architectures=["DeepseekV2ForCausalLM"])
''',
}


MOVED = '''
from torch import nn
from vllm.model_executor.models.interfaces import SupportsEagle3

class MovedForCausalLM(nn.Module, SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers):
        self.layers = layers
'''


def _source(protocol: str, version: str, gate: bool = True) -> SglangSource:
    texts = {"model_executor/models/interfaces.py": protocol, "model_executor/models/registry.py": REGISTRY,
             "model_executor/models/utils.py": "def init_vllm_registered_model(**kw):\n    pass\n",
             "v1/worker/gpu_model_runner.py": RUNNER}
    if gate:
        texts["config/speculative.py"] = GATE
    texts.update({f"model_executor/models/{name}": body for name, body in MODELS.items()})
    texts["models/moved/__init__.py"] = MOVED  # a model moved out of model_executor (vLLM 0.22+), named absolutely
    return SglangSource(version, f"vllm-{version}.whl",
                        {path: textwrap.dedent(text).encode() for path, text in texts.items()}, package="vllm")


@pytest.fixture(scope="module")
def stub_release() -> dict:
    return {row["arch"]: row for row in audit(_source(STUB_PROTOCOL, "0.17.1"))["classes"]}


@pytest.fixture(scope="module")
def default_release() -> dict:
    return {row["arch"]: row for row in audit(_source(DEFAULT_PROTOCOL, "0.18.0", gate=False))["classes"]}


def test_interface_reads_members_bodies_check_site_and_gate():
    stub = read_interface(_source(STUB_PROTOCOL, "0.17.1"))
    assert stub.present and not stub.has_defaults
    assert {m.name for m in stub.members} == {"supports_eagle3", "set_aux_hidden_state_layers",
                                              "get_eagle3_aux_hidden_state_layers", "has_own_lm_head",
                                              "has_own_embed_tokens"}
    assert stub.getters == ["get_eagle3_aux_hidden_state_layers"]
    [site] = stub.check_sites
    assert site.where.startswith("v1/worker/gpu_model_runner.py:") and site.raises == "RuntimeError"
    assert site.message == "Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"
    assert stub.gate is not None and stub.gate.allow_list == ("llama", "qwen") and stub.gate.match == "substring"
    assert stub.gate.tested == "self.target_model_config.hf_text_config.model_type"
    assert stub.gate.admits("qwen2_vl") and not stub.gate.admits("deepseek_v3")
    default = read_interface(_source(DEFAULT_PROTOCOL, "0.18.0", gate=False))
    assert default.has_defaults and default.has_mixin and default.gate is None
    assert default.getters == ["get_eagle3_default_aux_hidden_state_layers"]


def test_registry_targets_exclude_drafters_and_keep_a_class_registered_twice(stub_release):
    assert "Eagle3LlamaForCausalLM" not in stub_release  # a drafter is not a target
    assert stub_release["WrapperForConditionalGeneration"]["category"] == "MULTIMODAL_MODELS"


def test_a_registry_entry_named_absolutely_is_read_from_its_own_package(stub_release):
    """From vLLM 0.22 the registry names models moved to ``vllm/models/`` absolutely (``"vllm.models.qwen3_5"``);
    read as relative to model_executor/models they were 'not defined', 28 targets of 0.34.0 among them."""
    moved = stub_release["MovedForCausalLM"]
    assert moved["module"] == "vllm.models.moved" and moved["implements"] and moved["how"] == "direct"


def test_direct_duck_typed_and_half_duck(stub_release):
    assert stub_release["LlamaForCausalLM"]["implements"] and stub_release["LlamaForCausalLM"]["how"] == "direct"
    duck = stub_release["DuckForCausalLM"]  # every member, one of them set in __init__, no protocol base
    assert duck["implements"] and duck["how"] == "duck typed" and duck["passes_check"]
    half = stub_release["HalfDuckForCausalLM"]
    assert not half["implements"] and not half["passes_check"] and "lacks supports_eagle3" in half["evidence"]


def test_protocol_stub_passes_the_check_but_does_not_implement(stub_release):
    stub = stub_release["StubForCausalLM"]
    assert stub["passes_check"] and not stub["implements"] and stub["how"] == "protocol stub"


def test_c3_order_decides_which_body_runs(stub_release):
    diamond = stub_release["DiamondForCausalLM"]
    assert diamond["implements"] and diamond["how"] == "inherited" and "from Right" in diamond["evidence"]


def test_wrapper_lacking_what_its_inner_model_has_is_a_defect(stub_release):
    wrapper = stub_release["WrapperForConditionalGeneration"]
    assert wrapper["wrapper_of"] == "LlamaForCausalLM" and not wrapper["implements"] and wrapper["defect"]
    good = stub_release["GoodWrapperForConditionalGeneration"]
    assert good["implements"] and good["how"] == "direct" and not good["defect"]


def test_inner_model_chosen_at_load_time_is_never_a_defect(stub_release):
    dynamic = stub_release["DynamicWrapperForConditionalGeneration"]
    assert dynamic["wrapper_of"] == "dynamic: config.text_config.architectures"
    assert not dynamic["implements"] and not dynamic["defect"] and dynamic["inner_implements"] is None


def test_wrapper_of_an_inner_model_without_the_interface_is_no_defect(stub_release):
    assert stub_release["DeepseekV2ForCausalLM"]["implements"] is False
    bad = stub_release["BadDefaultWrapperForConditionalGeneration"]
    assert bad["wrapper_of"] == "DeepseekV2ForCausalLM" and not bad["defect"]
    assert bad["how"] == "protocol stub" and not bad["implements"]


def test_protocol_default_implements_only_when_it_reaches_an_eagle_model_mixin(default_release):
    llama = default_release["LlamaForCausalLM"]
    assert llama["how"] == "direct" and llama["implements"]
    good = default_release["DefaultWrapperForConditionalGeneration"]
    assert good["implements"] and good["how"] == "protocol default" and "LlamaModel" in good["evidence"]
    bad = default_release["BadDefaultWrapperForConditionalGeneration"]  # DeepseekV2Model is no EagleModelMixin
    assert bad["passes_check"] and not bad["implements"] and "not an EagleModelMixin" in bad["evidence"]
    stub_now_default = default_release["StubForCausalLM"]  # no .model at all: the default cannot reach one
    assert stub_now_default["how"] == "protocol default" and not stub_now_default["implements"]


def test_a_release_without_the_protocol_implements_nothing():
    src = _source(STUB_PROTOCOL.replace("class SupportsEagle3(", "class SupportsEagleX("), "0.10.0")
    rows = Auditor(src)
    assert not rows.iface.present
    result = audit(src)
    assert result["counts"]["implements"] == 0
    assert "no SupportsEagle3 protocol" in result["classes"][0]["evidence"]
