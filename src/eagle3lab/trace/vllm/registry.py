"""vLLM's model registry read from a release's source: architecture -> (module, class), by the dict it sits in.

``model_executor/models/registry.py`` lists each architecture in module-level dicts (``_TEXT_GENERATION_MODELS``,
``_MULTIMODAL_MODELS``, ``_EMBEDDING_MODELS``, ``_SPECULATIVE_DECODING_MODELS``, ...) as
``"Arch": ("module", "Class")``, the module relative to ``vllm.model_executor.models``, or, for models moved to
``vllm/models/`` (from v0.22), absolute (``"vllm.models.qwen3_5"``). The generating ones are the
classes that can be an EAGLE-3 target; drafters and pooling models cannot.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from eagle3lab.errors import SourceError
from eagle3lab.trace.sources import SglangSource

REGISTRY = "model_executor/models/registry.py"
MODELS_PACKAGE = "vllm.model_executor.models"
# The dicts whose classes generate text (EAGLE-3 targets); the others pool, classify or draft.
TARGET_DICTS = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")


@dataclass(frozen=True)
class Entry:
    """One registered architecture."""

    arch: str
    module: str  # dotted, ``vllm.model_executor.models.kimi_k25``
    class_name: str
    category: str  # the dict it is registered in, without the underscores: ``TEXT_GENERATION_MODELS``
    line: int


@dataclass
class Registry:
    # architecture -> its registration; a later dict overrides an earlier one, as ``_VLLM_MODELS = {**a, **b, ...}``
    # merges them in file order
    entries: dict[str, Entry] = field(default_factory=dict)
    target_entries: dict[str, Entry] = field(default_factory=dict)  # registrations in the target dicts

    @property
    def targets(self) -> list[Entry]:
        """Architectures that can be an EAGLE-3 target (registered in a generating dict), in registry order."""
        return list(self.target_entries.values())

    @property
    def generating_class_names(self) -> frozenset[str]:
        return frozenset(e.class_name for e in self.targets)


def read_registry(src: SglangSource) -> Registry:
    """Every ``"Arch": ("module", "Class")`` of the registry's ``_*_MODELS`` dicts."""
    tree = src.tree(REGISTRY) if src.exists(REGISTRY) else None
    if tree is None:
        raise SourceError(f"vLLM {src.version} has no readable {REGISTRY}; is it a vLLM release?",
                          version=src.version, problem="no_registry")
    reg = Registry()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict):
            continue
        name = target.id
        if not (name.startswith("_") and name.endswith("_MODELS")):
            continue
        for key, item in zip(value.keys, value.values):
            if not (isinstance(key, ast.Constant) and isinstance(item, ast.Tuple) and len(item.elts) == 2):
                continue
            module, cls = (e.value if isinstance(e, ast.Constant) else None for e in item.elts)
            if isinstance(module, str) and isinstance(cls, str) and isinstance(key.value, str):
                dotted = module if module.startswith("vllm.") else f"{MODELS_PACKAGE}.{module}"
                entry = Entry(key.value, dotted, cls, name.strip("_"), key.lineno)
                reg.entries[key.value] = entry
                if name in TARGET_DICTS:
                    reg.target_entries.setdefault(key.value, entry)
    return reg
