"""A second latent defect, shown from sglang's own source: ``verify_tree_greedy_func`` has no CPU branch.

In sglang 0.5.9 ``speculative/eagle_utils.py`` dispatches greedy tree verification with ``if _is_cuda or
_is_hip: ... elif _is_npu: ...`` and no ``else``: on any other device the function returns its output buffers
untouched, and its caller (``EagleVerifyInput.verify`` in ``eagle_info.py``) allocated ``predict`` with
``torch.empty``. So speculative decoding there would emit whatever memory held, with no error. The CPU harness
has to supply the branch (``cpu_harness.spec_shims.cpu_verify_tree_greedy``); this module proves the gap by reading
the syntax tree (not the text) of any sglang release, and returns file:line evidence.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any

from eagle3lab.errors import SourceError
from eagle3lab.trace.sources import SglangSource

EAGLE_UTILS = "srt/speculative/eagle_utils.py"
EAGLE_INFO = "srt/speculative/eagle_info.py"
FUNCTION = "verify_tree_greedy_func"


@dataclass
class Branch:
    """One arm of the device dispatch: its condition, where it is, and what it calls."""

    condition: str
    line: int
    calls: list[str]


@dataclass
class Evidence:
    """A located fact: ``sglang/<file>:<line>`` and the code there."""

    file: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"sglang/{self.file}:{self.line}: {self.code}"


@dataclass
class DispatchGap:
    """What the syntax tree says about ``verify_tree_greedy_func`` in one release."""

    release: str
    file: str
    function_line: int
    branches: list[Branch]
    has_else: bool
    cpu_branch: bool  # an ``else`` or a condition that names a CPU flag
    returns: Evidence | None  # what the function hands back when no branch ran
    flags: list[Evidence] = field(default_factory=list)  # how each flag in the conditions is defined
    caller: list[Evidence] = field(default_factory=list)  # the caller's torch.empty buffer and the call

    @property
    def silent_noop(self) -> bool:
        return not self.cpu_branch and not self.has_else

    def evidence(self) -> list[str]:
        """file:line lines, in reading order, for a report or a notebook."""
        lines = [f"sglang/{self.file}:{self.function_line}: def {FUNCTION}(...)"]
        lines += [f"sglang/{self.file}:{b.line}: {'if' if i == 0 else 'elif'} {b.condition}: "
                  f"{', '.join(b.calls) or '(no call)'}" for i, b in enumerate(self.branches)]
        lines.append(f"  no else branch: {not self.has_else}; a branch for CPU: {self.cpu_branch}")
        if self.returns:
            lines.append(str(self.returns))
        lines += [str(e) for e in self.flags + self.caller]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "silent_noop": self.silent_noop, "evidence": self.evidence()}


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SourceError(f"{EAGLE_UTILS} defines no top-level {name}(); this sglang release is laid out differently",
                      file=EAGLE_UTILS, problem="missing_function")


def _calls(nodes: list[ast.stmt]) -> list[str]:
    found = []
    for stmt in nodes:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                found.append(ast.unparse(node.func))
    return found


def _dispatch(fn: ast.FunctionDef) -> tuple[list[Branch], bool]:
    """The first ``if``/``elif`` chain of the function body and whether it ends in a plain ``else``."""
    node = next((stmt for stmt in fn.body if isinstance(stmt, ast.If)), None)
    branches: list[Branch] = []
    while node is not None:
        branches.append(Branch(ast.unparse(node.test), node.lineno, _calls(node.body)))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            return branches, bool(node.orelse)
    return branches, False


def _names(expression: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}


def _flag_definitions(tree: ast.Module, names: set[str], text: str) -> list[Evidence]:
    lines = text.splitlines()
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            found.append(Evidence(EAGLE_UTILS, node.lineno, lines[node.lineno - 1].strip()))
    return found


def _caller_evidence(source: SglangSource) -> list[Evidence]:
    """Where ``eagle_info`` allocates the buffer with ``torch.empty`` and hands it to the function."""
    if not source.exists(EAGLE_INFO):
        return []
    tree, lines = source.tree(EAGLE_INFO), source.text(EAGLE_INFO).splitlines()
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func) == "torch.empty" and \
                any(isinstance(t, ast.Name) and t.id == "predict" for t in node.targets):
            found.append(Evidence(EAGLE_INFO, node.lineno, lines[node.lineno - 1].strip()))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == FUNCTION:
            found.append(Evidence(EAGLE_INFO, node.lineno, lines[node.lineno - 1].strip()))
    return sorted(found, key=lambda e: e.line)


def find_dispatch_gap(source: SglangSource) -> DispatchGap:
    """Read ``verify_tree_greedy_func``'s device dispatch from ``source`` (``trace.sources.open_source()``)."""
    tree = source.tree(EAGLE_UTILS) if source.exists(EAGLE_UTILS) else None
    if tree is None:
        raise SourceError(f"sglang {source.version} has no parsable {EAGLE_UTILS}; this release has no EAGLE utils",
                          version=source.version, file=EAGLE_UTILS, problem="unparsable")
    fn = _function(tree, FUNCTION)
    branches, has_else = _dispatch(fn)
    names = set().union(*(_names(b.condition) for b in branches)) if branches else set()
    cpu_branch = has_else or any("cpu" in name.lower() for name in names)
    text = source.text(EAGLE_UTILS)
    last = fn.body[-1]
    returns = Evidence(EAGLE_UTILS, last.lineno, text.splitlines()[last.lineno - 1].strip()) \
        if isinstance(last, ast.Return) else None
    return DispatchGap(source.version, EAGLE_UTILS, fn.lineno, branches, has_else, cpu_branch, returns,
                       _flag_definitions(tree, names, text), _caller_evidence(source))
