"""What a target's ``set_eagle3_layers_to_capture`` does with a drafter's aux layer ids, read from each release.

sglang captures aux hidden state ``c`` at the *input* of decoder layer ``c`` (``if i in self.layers_to_capture``
before layer ``i`` runs), so the hook's arithmetic decides which layer's output a drafter reads, and it differs by
release and by model family: 0.5.9-0.5.12's ``DeepseekV2ForCausalLM`` adds 1 to every id, 0.5.13 on adds 1 only
when the first id is 1 (upstream PR #25454), ``GptOssForCausalLM`` from 0.5.17 keeps ids whose largest equals the
depth, and every release's no-ids branch returns ``[2, n // 2, n - 3]`` as is.

Why the body is evaluated rather than pattern-matched: the rule *is* the body (an ``if`` on ``layer_ids[0]``, a
``max``, a helper on the inner model), and a pattern match would be a guess at each new form. The function is
compiled on its own from the release's syntax tree (annotations and decorators dropped), with ``self`` a recorder
that answers the few attributes hook bodies read (the pipeline rank, the config's depth, the inner model's layers)
and no builtins beyond a handful of pure ones; nothing else of sglang is imported or run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional, Sequence

from eagle3lab.errors import SourceError
from eagle3lab.trace.sources import SglangSource

HOOK = "set_eagle3_layers_to_capture"
MODELS_DIR = "srt/models"
KIMI_FAMILY = "DeepseekV2ForCausalLM"  # Kimi-K2.5's language model is DeepseekV3ForCausalLM, which inherits this hook
FAMILY_FILES = {KIMI_FAMILY: "srt/models/deepseek_v2.py"}
PR_25454 = "https://github.com/sgl-project/sglang/pull/25454"

# The rule's name, from what the body does to three probe id sets at a 12-layer depth: one starting at 1, one
# starting at 2, and one whose largest id equals the depth (gpt-oss's exception).
PROBE_DEPTH = 12
PROBES = ((1, 5, 9), (2, 5, 9), (2, 5, 12))
RULE_PLUS_ONE = "every id + 1"
RULE_AS_GIVEN = "ids as given"
RULE_FIRST_ID_ONE = "+1 only when the first id is 1, else as given (PR #25454)"
RULE_MAX_IS_DEPTH = "+1 unless the largest id equals the depth"
_SAFE_BUILTINS = {"len": len, "list": list, "max": max, "min": min, "hasattr": hasattr, "getattr": getattr,
                  "setattr": setattr, "range": range, "tuple": tuple, "sorted": sorted, "isinstance": isinstance,
                  "int": int, "AttributeError": AttributeError, "ValueError": ValueError}


class _InnerModel:
    """``self.model`` / ``self.language_model`` of a hook body: records what it is told to capture."""

    def __init__(self, depth: int) -> None:
        self.layers = [SimpleNamespace() for _ in range(depth)]
        self.layers_to_capture: Optional[list[int]] = None
        self.capture_aux_hidden_states = False

    def set_eagle3_layers_to_capture(self, layers: Sequence[int]) -> None:
        self.layers_to_capture = list(layers)


def _self_for(depth: int) -> SimpleNamespace:
    config = SimpleNamespace(num_hidden_layers=depth, text_config=SimpleNamespace(num_hidden_layers=depth))
    return SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True), config=config, model=_InnerModel(depth),
                           language_model=_InnerModel(depth), capture_aux_hidden_states=False)


def _parallel() -> SimpleNamespace:
    return SimpleNamespace(is_last_rank=True, pp_group=SimpleNamespace(is_last_rank=True))


@dataclass(frozen=True)
class HookRule:
    """One class's hook body in one release, and what it captures."""

    release: str
    family: str  # the class that defines the hook
    path: str
    line: int
    source: str  # the function, unparsed from the release's syntax tree

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def _function(self) -> Any:
        fn = ast.parse(self.source).body[0]
        assert isinstance(fn, ast.FunctionDef)
        fn.decorator_list, fn.returns = [], None
        for arg in fn.args.args + fn.args.kwonlyargs:
            arg.annotation = None
        namespace: dict[str, Any] = {"__builtins__": _SAFE_BUILTINS, "get_pp_group": _parallel,
                                     "get_parallel": _parallel}
        exec(compile(ast.Module([fn], []), f"<{self.release} {self.where}>", "exec"), namespace)  # noqa: S102
        return namespace[fn.name]

    def captured(self, depth: int, ids: Optional[Sequence[int]]) -> list[int]:
        """The capture indices (input of layer ``c``) this body sets for ``ids`` (``None``: called with no ids)."""
        target = _self_for(depth)
        try:
            self._function()(target, list(ids) if ids is not None else None)
        except Exception as err:  # a body this recorder cannot answer: say which, never guess
            raise SourceError(f"cannot evaluate {self.family}.{HOOK} of sglang {self.release} ({self.where}): "
                              f"{type(err).__name__}: {err}", version=self.release, file=self.path,
                              problem="hook_not_evaluable") from None
        for inner in (target.model, target.language_model):
            if inner.layers_to_capture is not None:
                return inner.layers_to_capture
        raise SourceError(f"{self.family}.{HOOK} of sglang {self.release} ({self.where}) sets no capture layers",
                          version=self.release, file=self.path, problem="hook_sets_nothing")

    def rule(self) -> str:
        """The rule's name, from the body's answers to ``PROBES``."""
        shifts = [[c - i for c, i in zip(self.captured(PROBE_DEPTH, probe), probe)] for probe in PROBES]
        plus = [all(s == 1 for s in shift) for shift in shifts]
        given = [all(s == 0 for s in shift) for shift in shifts]
        if all(plus):
            return RULE_PLUS_ONE
        if all(given):
            return RULE_AS_GIVEN
        if plus[0] and given[1] and given[2]:
            return RULE_FIRST_ID_ONE
        if plus[0] and plus[1] and given[2]:
            return RULE_MAX_IS_DEPTH
        return "other: " + "; ".join(f"{list(p)} -> {self.captured(PROBE_DEPTH, p)}" for p in PROBES)

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "family": self.family, "where": self.where, "rule": self.rule()}


def _delegates_only(fn: ast.FunctionDef) -> bool:
    """A wrapper's hook that only passes the ids on (``self.language_model.set_eagle3_layers_to_capture(ids)``),
    or an inner model's setter that takes the final list: neither decides the arithmetic."""
    params = [a.arg for a in fn.args.args]
    if "layers_to_capture" in params:
        return True
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))]
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == HOOK]
    return not assigns and bool(calls) and all(isinstance(a, ast.Name) for c in calls for a in c.args)


def hook_rules(src: SglangSource, files: Optional[Sequence[str]] = None) -> dict[str, HookRule]:
    """Every model class under ``srt/models`` (or in ``files``) whose hook decides the capture layers, by name."""
    found: dict[str, HookRule] = {}
    for path in files if files is not None else src.files(MODELS_DIR):
        if not src.exists(path) or f"def {HOOK}" not in src.text(path):
            continue
        tree = src.tree(path)
        for node in tree.body if tree else []:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == HOOK and not _delegates_only(item):
                    found[node.name] = HookRule(src.version, node.name, path, item.lineno, ast.unparse(item))
    return found


def kimi_rule(src: SglangSource) -> Optional[HookRule]:
    """The hook Kimi-K2.5's language model runs (``DeepseekV2ForCausalLM``'s), if the release has it."""
    return hook_rules(src, [FAMILY_FILES[KIMI_FAMILY]]).get(KIMI_FAMILY)
