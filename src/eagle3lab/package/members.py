"""What a patch adds to a class, read from source with ``ast``: does each new method forward to the wrapped model?

A delegation patch is right when each method it adds calls the method of the same name on an attribute of
``self`` (the wrapped model), passing all its arguments on, behind a ``hasattr`` guard that names the gap.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class MemberCheck:
    """One method the patch adds to a class, as read from the patched source."""

    cls: str
    name: str
    delegates_to: str | None  # "self.language_model.name" when it forwards the call
    passes_args: bool  # every parameter of the method reaches the delegated call
    guarded: bool  # a hasattr() check raises a clear error before delegating

    @property
    def ok(self) -> bool:
        return self.delegates_to is not None and self.passes_args


def added_methods(original: str, patched: str) -> list[tuple[str, ast.FunctionDef]]:
    """(class, method) pairs present in ``patched`` but not in ``original``."""

    def methods(tree: ast.Module) -> dict[str, dict[str, ast.FunctionDef]]:
        return {
            node.name: {fn.name: fn for fn in node.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
        }

    before, after = methods(ast.parse(original)), methods(ast.parse(patched))
    return [
        (cls, fn)
        for cls, fns in after.items()
        for name, fn in fns.items()
        if name not in before.get(cls, {})
    ]


def _self_attr(node: ast.AST) -> str | None:
    """``X`` when node is ``self.X``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def check_member(cls: str, fn: ast.FunctionDef) -> MemberCheck:
    """Does ``fn`` forward to ``self.<inner>.<same name>(...)`` with all its parameters, behind a hasattr guard?"""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs][1:]
    params += [a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
    delegates_to, passes_args, guarded = None, False, False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == fn.name:
            inner = _self_attr(node.func.value)
            if inner is not None:
                delegates_to = f"self.{inner}.{fn.name}"
                used = {n.id for arg in (*node.args, *(k.value for k in node.keywords)) for n in ast.walk(arg)
                        if isinstance(n, ast.Name)}
                passes_args = set(params) <= used
        if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in ast.walk(ast.Module(node.body, []))):
            for call in ast.walk(node.test):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id == "hasattr"
                    and len(call.args) == 2
                    and isinstance(call.args[1], ast.Constant)
                    and call.args[1].value == fn.name
                ):
                    guarded = True
    return MemberCheck(cls, fn.name, delegates_to, passes_args, guarded)
