"""What a class's own AST says about its members: what it defines, which members it delegates and to what, a
forwarding ``__getattr__``, what a function returns, and the members every ``torch.nn.Module`` has (read from
torch's own source).
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path
from eagle3lab.trace.modindex import ClassRef


def defined(node: ast.ClassDef) -> dict[str, ast.AST]:
    """Members a class body defines: methods, class attributes and ``self.x = ...`` in any method."""
    out: dict[str, ast.AST] = {}
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for tgt in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(tgt, ast.Name) and (isinstance(stmt, ast.Assign) or stmt.value is not None):
                    out[tgt.id] = stmt
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assign, ast.AnnAssign)):
            for tgt in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                if attr := self_attr(tgt):
                    out.setdefault(attr, sub)
    return out


def self_attr(node: ast.AST) -> str:
    """``X`` when node is ``self.X``, else ''."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return ""


def delegation_target(func: ast.AST, member: str) -> str:
    """``<inner>`` if a method's body forwards ``member`` to ``self.<inner>``, else ''."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == member:
            if inner := self_attr(node.func.value):
                return inner
    return ""


def getattr_proxy(func: ast.AST) -> str:
    """The attribute a custom ``__getattr__`` forwards to (``getattr(self.inner, name)``), or ''."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if node.args and (inner := self_attr(node.args[0])):
                return inner
    return ""


@lru_cache(maxsize=1)
def torch_module_members() -> frozenset[str]:
    """Members ``torch.nn.Module`` defines, read from the installed torch's own source (importing torch is slow).

    Methods, class attributes and the ``self.x`` its methods set (``training``, ``_parameters`` ...).
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = Path(list(spec.submodule_search_locations)[0]) / "nn" / "modules" / "module.py"
    if not path.is_file():
        return frozenset()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Module":
            return frozenset(defined(node))
    return frozenset()


def is_torch_module(ref: ClassRef) -> bool:
    return ref.name == "Module" and ref.module.split(".")[0] == "torch"


def harmless_external(ref: ClassRef) -> bool:
    """``object`` and torch.nn.Module need no source: one defines nothing, the other is read separately."""
    return ref.name == "object" or is_torch_module(ref)


def function_returns(func: ast.FunctionDef) -> list[ast.expr]:
    """The values ``func`` itself returns (not those of functions or classes nested in it)."""
    out = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            out.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return out


def is_dotted_name(expr: ast.expr) -> bool:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id != "self"


def short_source(expr: ast.AST, limit: int = 80) -> str:
    text = " ".join(ast.unparse(expr).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
