"""sglang's model registry, read from a release's source: which class serves which ``architectures`` entry.

sglang's ``ModelRegistry`` imports every module of ``sglang.srt.models`` and registers each class of its
``EntryClass`` under the class's ``__name__`` (an alias registers the class it names). ``resolve_model_cls`` takes
the config's architectures in order, keeps the registered ones, and appends ``TransformersForCausalLM`` when any is
not registered; the first registered one wins. The same rules are applied here to the source, without importing.
Draft-only architectures are the names ``ModelConfig`` rewrites a draft model's architecture to
(``hf_config.architectures[0] = "...NextN"``): they never serve as an EAGLE-3 target.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Collection

from eagle3lab.errors import EntryClassError
from eagle3lab.trace.modindex import ClassRef, ModuleIndex
from eagle3lab.trace.sources import SglangSource

MODEL_CONFIG = "srt/configs/model_config.py"
FALLBACK_ARCH = "TransformersForCausalLM"


@dataclass(frozen=True)
class Registration:
    """One registered architecture: the class sglang instantiates and the file that registers it."""

    architecture: str
    file: str
    ref: ClassRef


def registrations(index: ModuleIndex) -> dict[str, Registration]:
    """Architecture name -> registration, as ``import_model_classes`` builds it (first file wins on a clash)."""
    out: dict[str, Registration] = {}
    for path, ref in index.entry_classes():
        out.setdefault(ref.name, Registration(ref.name, path, ref))
    return out


def draft_only_architectures(src: SglangSource) -> frozenset[str]:
    """Names ``ModelConfig`` assigns to ``hf_config.architectures[0]`` for draft models (MTP / NextN heads)."""
    tree = src.tree(MODEL_CONFIG) if src.exists(MODEL_CONFIG) else None
    names: set[str] = set()
    for node in ast.walk(tree) if tree is not None else []:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        for target in node.targets:
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)
                    and target.value.attr == "architectures" and isinstance(node.value.value, str)):
                names.add(node.value.value)
    return frozenset(names)


def choose(architectures: list[str], registered: Collection[str], version: str = "") -> tuple[str, str]:
    """(architecture sglang instantiates, note) by ``resolve_model_cls``'s rules: registered ones in order, then the
    transformers fallback when any is not registered. One line when nothing fits."""
    if not architectures:
        raise EntryClassError("the config names no architectures; pass --arch ARCHITECTURE or a config.json "
                              "with an 'architectures' list", problem="no_architectures")
    supported = [a for a in architectures if a in registered]
    note = ""
    if len(supported) != len(architectures):
        note = f"not registered in sglang {version}: {', '.join(a for a in architectures if a not in registered)}"
        supported.append(FALLBACK_ARCH)
    for arch in supported:
        if arch in registered:
            if arch == FALLBACK_ARCH and arch not in architectures:
                note += f"; sglang falls back to {FALLBACK_ARCH} (the transformers backend)"
            return arch, note
    raise EntryClassError(f"no architecture of {architectures} is registered in sglang {version} and it has no "
                          f"{FALLBACK_ARCH}; check the name (case matters) or pick another release",
                          architectures=tuple(architectures), version=version, problem="not_registered")
