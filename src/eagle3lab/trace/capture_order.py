"""sglang's second EAGLE-3 defect: CUDA graphs are captured before the drafter's aux layer ids are set.

In sglang 0.5.9 ``CudaGraphRunner.__init__`` calls ``model.set_eagle3_layers_to_capture()`` with no ids
(``model_executor/cuda_graph_runner.py:365``) just before it captures the graphs, so the graphs record the model's
default layers (``[2, n // 2, n - 3]`` in ``DeepseekV2ForCausalLM``); only afterwards does ``ModelRunner`` call it
with the drafter's ``eagle_aux_hidden_state_layer_ids`` (``model_runner.py:621-624``), which eager forwards use
(through the hook's own arithmetic: id + 1 in 0.5.9). A drafter whose ids, so mapped, differ from the default reads
other layers in graph-replayed verify than in eager prefill. Upstream moved the call before graph capture and
removed the no-argument calls in sglang PR #22836 (https://github.com/sgl-project/sglang/pull/22836, merged
2026-04-15; first release 0.5.11).

What each path captures is the release's own hook body applied to the ids (``trace.capture_rule``): the +1 is not
a constant (0.5.13 on adds it only when the first id is 1, sglang PR #25454).

Everything here is read from a release's syntax tree (``trace.sources.open_source``): every call of the hook
under ``srt/model_executor``, whether a no-argument call sits in a graph runner's constructor before its capture,
whether the call with ids comes after ``init_device_graphs()`` in the runner, and the model's default list,
evaluated for a depth. Limitation, said in ``evidence``: the order is read within one function; a release that
moves the ids call to another module (as 0.5.23's ``attention_backend_setup.py`` does) is judged by the absence
of no-argument calls in graph runners.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from eagle3lab.errors import SourceError
from eagle3lab.trace import capture_rule
from eagle3lab.trace.capture_rule import HookRule
from eagle3lab.trace.sources import SglangSource

HOOK = "set_eagle3_layers_to_capture"
RUNNER_DIR = "srt/model_executor"
DEFAULT_MODEL_FILE = "srt/models/deepseek_v2.py"  # Kimi-K2.5's language model is DeepseekV3 (DeepseekV2 code)
GRAPH_INIT = ("init_device_graphs", "init_cuda_graphs")
FIX_PR = "https://github.com/sgl-project/sglang/pull/22836"
CONVENTION_PR = capture_rule.PR_25454


@dataclass
class HookCall:
    """One call of the hook: where, in which function, with ids or without."""

    path: str
    line: int
    function: str  # Class.method
    with_ids: bool
    before_capture_in_graph_runner: bool = False  # a no-arg call in a graph runner's __init__ before self.capture()
    after_graph_init: Optional[bool] = None  # a call with ids: after init_device_graphs() in the same function

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class CaptureOrder:
    """What a release's start-up does to the capture layers, and the file:line evidence."""

    release: str
    calls: list[HookCall] = field(default_factory=list)
    default_expr: Optional[str] = None  # the model's default list, as written
    default_site: Optional[str] = None
    rule: Optional[HookRule] = None  # the Kimi family's hook body in this release (what ids become)

    @property
    def graph_resets(self) -> list[HookCall]:
        return [c for c in self.calls if c.before_capture_in_graph_runner]

    @property
    def ids_calls(self) -> list[HookCall]:
        return [c for c in self.calls if c.with_ids]

    @property
    def defect(self) -> bool:
        """Graphs are captured with the defaults while eager forwards get the drafter's ids."""
        return bool(self.graph_resets) and any(c.after_graph_init for c in self.ids_calls)

    def default_layers(self, depth: int) -> Optional[list[int]]:
        """What the hook sets when called with no ids (the graph runner's call in a release with the defect)."""
        return self.rule.captured(depth, None) if self.rule else None

    def layers(self, depth: int, ids: Optional[Sequence[int]]) -> dict[str, Any]:
        """Graph-replayed and eager capture layers for a drafter's ids on a ``depth``-layer target
        (``captured_layers``)."""
        return captured_layers(self.release, self.defect, self.rule, depth, ids)

    def evidence(self) -> list[str]:
        out = [f"sglang {self.release}:"]
        for c in self.calls:
            kind = "with the drafter's ids" if c.with_ids else "with no ids"
            note = (" (graph runner constructor, before capture)" if c.before_capture_in_graph_runner else
                    " (after init_device_graphs in the same function)" if c.after_graph_init else "")
            out.append(f"  {c.where} {c.function}: {HOOK}() {kind}{note}")
        if self.default_site:
            out.append(f"  default layers: {self.default_expr} ({self.default_site})")
        rule = self.rule.rule() if self.rule else "no hook"
        if self.rule:
            out.append(f"  ids given: {rule} ({self.rule.where} {self.rule.family}.{HOOK})")
        out.append("  verdict: " + (f"graphs capture the defaults, eager forwards the drafter's ids ({rule})"
                                    if self.defect else
                                    "no graph-runner reset before capture: graphs and eager forwards agree"))
        if not self.defect and self.ids_calls and not any(c.after_graph_init is not None for c in self.ids_calls):
            out.append("  (the ids call is outside the runner's start-up function; order read by absence of resets)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "defect": self.defect, "default_expr": self.default_expr,
                "default_site": self.default_site, "fix_pr": FIX_PR,
                "rule": self.rule.rule() if self.rule else None, "rule_site": self.rule.where if self.rule else None,
                "calls": [{**asdict(c), "where": c.where} for c in self.calls], "evidence": self.evidence()}


def captured_layers(release: str, defect: bool, rule: Optional[HookRule], depth: int,
                    ids: Optional[Sequence[int]]) -> dict[str, Any]:
    """The capture indices (input of layer ``c``, so the output of layer ``c - 1``) graph replays and eager forwards
    use: eager forwards get the release's hook applied to the ids; graph replays the same, or the hook's no-ids
    default where the graph runner resets the layers before it captures (``defect``)."""
    if rule is None:
        raise SourceError(f"sglang {release} has no {capture_rule.KIMI_FAMILY}.{HOOK} to apply", version=release,
                          problem="no_hook")
    eager = rule.captured(depth, ids)
    graphs = rule.captured(depth, None) if defect else eager
    return {"release": release, "depth": depth, "drafter_ids": list(ids) if ids is not None else None,
            "cuda_graph_layers": graphs, "eager_layers": eager, "mismatch": graphs != eager, "defect": defect,
            "rule": rule.rule(), "rule_site": rule.where}


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    found: list[tuple[str, ast.FunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found += [(f"{node.name}.{item.name}", item) for item in node.body if isinstance(item, ast.FunctionDef)]
        elif isinstance(node, ast.FunctionDef):
            found.append((node.name, node))
    return found


def _calls_named(node: ast.AST, name: str) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == name]


def trace_capture_order(src: SglangSource) -> CaptureOrder:
    """Every call of the hook under ``srt/model_executor`` with its order facts, and the model's default."""
    result = CaptureOrder(src.version)
    for path in src.files(RUNNER_DIR):
        if HOOK not in src.text(path):
            continue
        tree = src.tree(path)
        if tree is None:
            continue
        for qualname, fn in _functions(tree):
            for call in _calls_named(fn, HOOK):
                with_ids = bool(call.args or call.keywords)
                entry = HookCall(path, call.lineno, qualname, with_ids)
                if not with_ids and "GraphRunner" in qualname.split(".")[0] and qualname.endswith(".__init__"):
                    captures = [c.lineno for c in _calls_named(fn, "capture")]
                    entry.before_capture_in_graph_runner = any(line > call.lineno for line in captures)
                if with_ids:
                    inits = [c.lineno for name in GRAPH_INIT for c in _calls_named(fn, name)]
                    entry.after_graph_init = any(line < call.lineno for line in inits) if inits else None
                result.calls.append(entry)
    result.calls.sort(key=lambda c: (c.path, c.line))
    result.default_expr, result.default_site = _default(src)
    result.rule = capture_rule.kimi_rule(src)
    return result


def _default(src: SglangSource) -> tuple[Optional[str], Optional[str]]:
    """The list the model's hook assigns when called with no ids (``layer_ids is None`` branch)."""
    if not src.exists(DEFAULT_MODEL_FILE):
        return None, None
    tree = src.tree(DEFAULT_MODEL_FILE)
    for qualname, fn in _functions(tree) if tree else []:
        if not qualname.endswith(f".{HOOK}"):
            continue
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
                    and isinstance(node.targets[0], ast.Attribute) and node.targets[0].attr == "layers_to_capture"):
                return ast.unparse(node.value), f"{DEFAULT_MODEL_FILE}:{node.lineno} {qualname}"
    return None, None


def bisect_fix(versions: Sequence[str], open_release: Callable[[str], SglangSource],
               known: Optional[Mapping[str, bool]] = None) -> dict[str, Any]:
    """The first release in ``versions`` (oldest first) without the defect, by binary search.

    Assumes the fix stays once made (checked at both ends); every release looked at is recorded in ``rows``, taken
    from ``known`` (the shipped release record's defects) where it is there, else opened and traced."""
    if not versions:
        raise SourceError("no releases to bisect")
    rows: dict[str, bool] = {}
    known = known or {}

    def defect(i: int) -> bool:
        version = versions[i]
        if version not in rows:
            rows[version] = bool(known[version]) if version in known else \
                trace_capture_order(open_release(version)).defect
        return rows[version]

    first_fixed: Optional[str] = None
    if defect(0) and not defect(len(versions) - 1):
        lo, hi = 0, len(versions) - 1  # defect at lo, fixed at hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if defect(mid) else (lo, mid)
        first_fixed = versions[hi]
    elif not defect(0):
        first_fixed = None  # the first release bisected is already fixed: nothing to bisect
    return {"versions": list(versions), "first_fixed": first_fixed, "fix_pr": FIX_PR,
            "rows": [{"version": v, "defect": d} for v, d in rows.items()]}
