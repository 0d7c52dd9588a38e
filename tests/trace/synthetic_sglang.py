"""A small sglang-shaped source tree for the trace tests: each file exercises one thing the tracer must get right.

Written by hand (not copied from sglang) so each test knows exactly what the answer must be.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from eagle3lab.trace.sources import SglangSource

BOM = "\ufeff"

RUNTIME = {
    "srt/model_executor/model_runner.py": '''
class ModelRunner:
    def __init__(self, server_args, spec_algorithm, is_draft_worker=False):
        self.server_args = server_args
        self.spec_algorithm = spec_algorithm
        self.is_draft_worker = is_draft_worker
        self.eagle_use_aux_hidden_state = False
        if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:
            self.eagle_use_aux_hidden_state = True
            self.layer_ids = [0, 1, 2]
        self.initialize()

    def initialize(self):
        if self.device == "cuda":
            self.init_device_graphs()
        if self.eagle_use_aux_hidden_state:
            self.model.set_eagle3_layers_to_capture(self.layer_ids)
        if hasattr(self.model, "optional_hook"):
            self.model.optional_hook()
        m = self.model
        m.aliased_member(1, key=2)
        maybe = getattr(self.model, "maybe_member", None)
        configure_capture(model=self.model, eagle_use_aux_hidden_state=self.eagle_use_aux_hidden_state)

    def init_device_graphs(self):
        if self.server_args.disable_cuda_graph:
            return
        self.graph_runner = CudaGraphRunner(self)

    def unrelated(self):
        self.model.load_weights([])


def configure_capture(*, model, eagle_use_aux_hidden_state):
    if eagle_use_aux_hidden_state:
        if not hasattr(model, "checked_member"):
            raise ValueError("model lacks checked_member")
        model.checked_member()
''',
    "srt/model_executor/cuda_graph_runner.py": '''
class CudaGraphRunner:
    def __init__(self, model_runner):
        self.model_runner = model_runner
        if model_runner.spec_algorithm.is_eagle3() and model_runner.eagle_use_aux_hidden_state:
            self.model_runner.model.set_eagle3_layers_to_capture()
''',
    "srt/speculative/eagle_worker.py": BOM + '''
from sglang.srt.speculative.helpers import share_embeddings


class EAGLEWorker:
    def __init__(self, target_worker):
        self.target_worker = target_worker
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()
        if self.speculative_algorithm.is_eagle3():
            self.draft_model_runner.model.set_embed(embed)
        else:
            self.draft_model_runner.model.set_embed_and_head(embed, head)
        try:
            self.target_worker.model_runner.model.tolerant_member()
        except AttributeError:
            pass
        share_embeddings(self.target_worker.model_runner.model)
        for _ in self.target_worker.model_runner.model.named_modules():  # every nn.Module has it
            pass
''',
    "srt/speculative/helpers.py": '''
def share_embeddings(target_model):
    return target_model.helper_member()
''',
}

MODELS = {
    "srt/models/inner.py": '''
from torch import nn


class InnerForCausalLM(nn.Module):
    def __init__(self, config):
        self.config = config

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            n = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, n // 2, n - 3]
        else:
            self.model.layers_to_capture = [v + 1 for v in layer_ids]

    def get_embed_and_head(self):
        return self.embed, self.head


class PlainForCausalLM(nn.Module):
    def forward(self):
        return None


EntryClass = [InnerForCausalLM, PlainForCausalLM]
''',
    "srt/models/mixins.py": '''
class EmbedMixin:
    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()
''',
    "srt/models/wrappers.py": BOM + '''
import torch.nn as nn

from sglang.srt.models.inner import InnerForCausalLM as Inner, PlainForCausalLM
from .mixins import EmbedMixin

AliasInner = Inner


class GapWrapper(nn.Module):
    def __init__(self, config):
        self.vision = object()
        self.language_model = AliasInner(config)


class MixinWrapper(EmbedMixin, nn.Module):
    def __init__(self, config):
        self.language_model = Inner(config)


class DelegatingWrapper(nn.Module):
    def __init__(self, config):
        self.language_model = Inner(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.language_model.set_eagle3_layers_to_capture(layer_ids)

    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()


class SubclassWrapper(DelegatingWrapper):
    pass


class ProxyWrapper(nn.Module):
    def __init__(self, config):
        self.language_model = Inner(config)

    def __getattr__(self, name):
        return getattr(self.language_model, name)


class NoEagleWrapper(nn.Module):
    def __init__(self, config):
        self.language_model = PlainForCausalLM(config)


EntryClass = [GapWrapper, MixinWrapper, DelegatingWrapper, SubclassWrapper, ProxyWrapper, NoEagleWrapper]
''',
}


# The shapes the audit once missed: each wrapper builds (or reaches) its inner model in another way.
SHAPES = {
    "srt/models/shape_bases.py": '''
from torch import nn


class HelperBase(nn.Module):
    def __init__(self, config):
        self.llm = self.init_llm(config)

    def init_llm(self, config):
        raise NotImplementedError

    def forward(self, x):
        return self.llm(x)


class RemoteBase(nn.Module):
    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()

    def forward(self, x):
        return self.language_model(x)
''',
    "srt/models/shapes.py": '''
from torch import nn
from transformers import PreTrainedModel

from sglang.srt.models.inner import InnerForCausalLM, PlainForCausalLM
from sglang.srt.models.shape_bases import HelperBase, RemoteBase


class HelperWrapper(HelperBase):
    def init_llm(self, config):
        return InnerForCausalLM(config)


class SwitchWrapper(nn.Module):
    def __init__(self, config):
        if config.mla:
            self.model = InnerForCausalLM(config)
        else:
            self.model = PlainForCausalLM(config)

    def forward(self, x):
        return self.model(x)


class ChoiceWrapper(nn.Module):
    def __init__(self, config):
        llm_cls = InnerForCausalLM if config.fast else PlainForCausalLM
        self.language_model = llm_cls(config)

    def forward(self, x):
        return self.language_model(x)


_VERSIONS = {1: HelperWrapper, 2: SwitchWrapper}


class DispatchProxy:
    def __init__(self, config):
        instance_class = _VERSIONS.get(config.version)
        self.impl = instance_class(config)

    def __getattr__(self, name):
        return getattr(self.impl, name)


class LocalImportWrapper(RemoteBase):
    def __init__(self, config):
        from sglang.srt.models.inner import InnerForCausalLM as LocalInner

        self.language_model = LocalInner(config)


class HFBaseWrapper(PreTrainedModel):
    def __init__(self, config):
        self.language_model = InnerForCausalLM(config)

    def forward(self, x):
        return self.language_model(x)


class ParamWrapper(nn.Module):
    def __init__(self, config, language_model_cls=PlainForCausalLM):
        self.language_model = language_model_cls(config)


class ParamChild(ParamWrapper):
    def __init__(self, config):
        super().__init__(config, language_model_cls=InnerForCausalLM)

    def forward(self, x):
        return self.language_model(x)


class RegistryWrapper(nn.Module):
    def __init__(self, config):
        self.language_model = ModelRegistry.resolve_model_cls(config.arch)[0](config)


class PostProcessWrapper(nn.Module):
    def __init__(self, config):
        self.language_model = InnerForCausalLM(config)

    def forward(self, x):
        hidden = self.language_model.model(x)
        return self.logits_processor(hidden)


class InnerForCausalLMNextN(nn.Module):
    def __init__(self, config):
        self.model = InnerForCausalLM(config)


EntryClass = [HelperWrapper, SwitchWrapper, ChoiceWrapper, DispatchProxy, LocalImportWrapper, HFBaseWrapper,
              ParamWrapper, ParamChild, RegistryWrapper, PostProcessWrapper, InnerForCausalLMNextN]
''',
    "srt/configs/model_config.py": '''
class ModelConfig:
    def _config_draft_model(self):
        if self.is_draft_model and self.hf_config.architectures[0] == "InnerForCausalLM":
            self.hf_config.architectures[0] = "InnerForCausalLMNextN"
''',
}


DRAFTERS = {
    "srt/models/drafter.py": '''
from torch import nn


class GoodDrafterEagle3(nn.Module):
    def set_embed(self, embed):
        self.embed = embed


class BareDrafterEagle3(nn.Module):
    pass


EntryClass = [GoodDrafterEagle3, BareDrafterEagle3]
''',
}


def files(extra: dict[str, str] | None = None, shapes: bool = False) -> dict[str, str]:
    return {**RUNTIME, **MODELS, **DRAFTERS, **(SHAPES if shapes else {}), **(extra or {})}


def source(extra: dict[str, str] | None = None, version: str = "0.0.0", shapes: bool = False) -> SglangSource:
    """The synthetic tree as an SglangSource, built the same way a wheel is read; ``shapes`` adds the wrappers
    that build or reach their inner model in the harder ways (helpers, proxies, several options ...)."""
    return SglangSource(version, "synthetic", {k: v.encode("utf-8") for k, v in files(extra, shapes).items()})


def write_wheel(path: Path, version: str = "0.0.0", extra: dict[str, str] | None = None) -> Path:
    """The synthetic tree packed as a wheel (plus dist-info), for the zip reader."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sglang/__init__.py", "")
        for rel, text in files(extra).items():
            zf.writestr(f"sglang/{rel}", text.encode("utf-8"))
        info = f"sglang-{version}.dist-info"
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"sglang-{version}.dist-info/RECORD", "")
    return path
