"""What a patch adds to a class, read from source with ``ast``: is each new method exactly a forward to the wrapped
model, and nothing else?

A delegation patch is right when each method it adds is, in order: an optional docstring, an optional ``hasattr``
guard that raises a clear error naming the gap, and one call of the method of the same name on one attribute of
``self`` (the wrapped model, ``self.language_model`` in the Kimi patches) passing its own parameters on unchanged.
Why so strict: a patch in ``patches/`` edited to log, write a file or change state inside a delegated method still
"forwards"; checking only that the call is there let such a patch be applied. Anything else in the body (or code
run when the class is defined: decorators, computed defaults, calls in annotations) is named as ``extra``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

EXTRA_WIDTH = 80  # the quoted extra statement is cut to this many characters, to keep the refusal one line
_GUARD_CALLS = {"type"}  # calls a guard's error message may make (``type(self.language_model).__name__``)


@dataclass(frozen=True)
class MemberCheck:
    """One method the patch adds to a class, as read from the patched source."""

    cls: str
    name: str
    delegates_to: str | None  # "self.language_model.name" when it forwards the call
    passes_args: bool  # every parameter of the method reaches the delegated call, unchanged
    guarded: bool  # a hasattr() check raises a clear error before delegating
    extra: str | None = None  # the first thing it does besides the forward ("line 730: `os.system('x')`")

    @property
    def ok(self) -> bool:
        return self.delegates_to is not None and self.passes_args and self.extra is None


Function = ast.FunctionDef | ast.AsyncFunctionDef


def added_methods(original: str, patched: str) -> list[tuple[str, Function]]:
    """(class, method) pairs present in ``patched`` but not in ``original``."""

    def methods(tree: ast.Module) -> dict[str, dict[str, Function]]:
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


def _quote(node: ast.AST) -> str:
    """``line N: `code``` for a refusal: the first line of the code, cut to EXTRA_WIDTH characters."""
    text = ast.unparse(node).splitlines()[0] if ast.unparse(node) else type(node).__name__
    text = text if len(text) <= EXTRA_WIDTH else text[:EXTRA_WIDTH - 3] + "..."
    line = getattr(node, "lineno", None)
    return f"line {line}: `{text}`" if line else f"`{text}`"


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _forward_call(stmt: ast.stmt, name: str) -> ast.Call | None:
    """The call when ``stmt`` is ``[return] [await] self.X.<name>(...)``."""
    value = stmt.value if isinstance(stmt, (ast.Return, ast.Expr)) else None
    if isinstance(value, ast.Await):
        value = value.value
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == name
            and _self_attr(value.func.value) is not None):
        return value
    return None


def _parameters(fn: Function) -> tuple[list[str], list[str], str | None, str | None]:
    """(positional parameters without self, keyword-only ones, *args name, **kwargs name)."""
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args][1:]
    return (positional, [a.arg for a in args.kwonlyargs], args.vararg.arg if args.vararg else None,
            args.kwarg.arg if args.kwarg else None)


def _arguments(call: ast.Call, fn: Function) -> tuple[bool, str | None]:
    """(the call passes exactly the method's parameters, each once and unchanged; the first argument that is an
    expression rather than a parameter, quoted)."""
    positional, keyword_only, vararg, kwarg = _parameters(fn)
    passed_positional: list[str] = []
    passed: list[str] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
            passed.append("*" + arg.value.id)
        elif isinstance(arg, ast.Name):
            passed_positional.append(arg.id)
            passed.append(arg.id)
        else:
            return False, f"argument {_quote(arg)}"
    for keyword in call.keywords:
        if keyword.arg is None and isinstance(keyword.value, ast.Name):
            passed.append("**" + keyword.value.id)
        elif isinstance(keyword.value, ast.Name) and keyword.value.id == keyword.arg:
            passed.append(keyword.arg)
        else:
            return False, f"argument {_quote(keyword.value)}"
    wanted = [*positional, *keyword_only, *(["*" + vararg] if vararg else []), *(["**" + kwarg] if kwarg else [])]
    in_order = passed_positional == positional[:len(passed_positional)]
    return in_order and sorted(passed) == sorted(wanted), None


def _is_guard(stmt: ast.stmt, inner: str | None, name: str) -> bool:
    """``if not hasattr(self.<inner>, "<name>"): raise SomeError(<message>)``, the message computing nothing but
    ``type(...)`` and attribute reads."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Raise) and stmt.body[0].cause is None):
        return False
    test = stmt.test
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call)):
        return False
    check = test.operand
    if not (isinstance(check.func, ast.Name) and check.func.id == "hasattr" and len(check.args) == 2
            and not check.keywords and _self_attr(check.args[0]) is not None
            and (inner is None or _self_attr(check.args[0]) == inner)
            and isinstance(check.args[1], ast.Constant) and check.args[1].value == name):
        return False
    exc = stmt.body[0].exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, (ast.Name, ast.Attribute))):
        return False
    for node in (n for part in (*exc.args, *(k.value for k in exc.keywords)) for n in ast.walk(part)):
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _GUARD_CALLS):
            return False
    return True


def _definition_code(fn: Function) -> str | None:
    """Code that runs when the class is defined: decorators, defaults other than constants, calls in annotations."""
    for decorator in fn.decorator_list:
        return f"decorator {_quote(decorator)}"
    for default in [*fn.args.defaults, *(d for d in fn.args.kw_defaults if d is not None)]:
        if not isinstance(default, ast.Constant):
            return f"default {_quote(default)}"
    arguments = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]
    annotations = [a.annotation for a in arguments if a is not None and a.annotation is not None]
    for annotation in [*annotations, *([fn.returns] if fn.returns is not None else [])]:
        if any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Lambda)) for n in ast.walk(annotation)):
            return f"annotation {_quote(annotation)}"
    return None


def check_member(cls: str, fn: Function) -> MemberCheck:
    """Is ``fn`` exactly ``[docstring] [hasattr guard] [return] self.<inner>.<same name>(<its parameters>)``?"""
    body = list(fn.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    at = next((i for i, stmt in enumerate(body) if _forward_call(stmt, fn.name) is not None), None)
    call = _forward_call(body[at], fn.name) if at is not None else None
    inner = _self_attr(call.func.value) if call is not None and isinstance(call.func, ast.Attribute) else None
    passes_args, extra = _arguments(call, fn) if call is not None else (False, None)
    guarded = False
    for i, stmt in enumerate(body):
        if i == at:
            continue
        if not guarded and (at is None or i < at) and _is_guard(stmt, inner, fn.name):
            guarded = True
            continue
        extra = extra or _quote(stmt)
        break
    return MemberCheck(cls, fn.name, f"self.{inner}.{fn.name}" if call is not None else None, passes_args, guarded,
                       extra or _definition_code(fn))
