"""What a vLLM release requires of an EAGLE-3 target, read from its source: the protocol, its check, its gate.

vLLM's interface is a ``runtime_checkable`` protocol, ``SupportsEagle3`` in ``model_executor/models/interfaces.py``
(from v0.10.1, PR #22642): ``supports_eagle3(model)`` is ``isinstance(model, SupportsEagle3)``, true when the class
inherits the protocol or has every protocol member (duck typing; members inherited from ``SupportsEagleBase``
count). Up to v0.17 the protocol's methods are stubs (``...``); from v0.18.0 (PR #36063) they have bodies that
reach the inner language model by themselves (``get_language_model()``, then its ``.model``, which must be an
``EagleModelMixin``), and the getter is renamed. The runtime checks the target after loading it and raises; before
that, until v0.21, ``SpeculativeConfig`` rejects targets whose ``hf_text_config.model_type`` contains none of an
allow-list's entries. All of it is read here per release, never assumed.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from eagle3lab.trace.sources import SglangSource

INTERFACES = "model_executor/models/interfaces.py"
PROTOCOL = "SupportsEagle3"
CHECK_FUNCTION = "supports_eagle3"
MIXIN = "EagleModelMixin"
SETTER = "set_aux_hidden_state_layers"
CONFIG_FILES = ("config/speculative.py", "config/__init__.py", "config.py")
# Where the runtime checks the loaded target (not the model files, which may call the check on their parts).
RUNTIME_DIRS = ("v1/", "worker/", "spec_decode/")
EAGLE3_METHOD = "eagle3"


@dataclass(frozen=True)
class Member:
    """One member of the protocol (or of a protocol it extends): a method or a class attribute."""

    name: str
    kind: str  # "method" or "attribute"
    owner: str  # the protocol class that declares it
    body: str  # "stub" (``...``), "default" (a body that does work) or "value" (an attribute's default)


@dataclass(frozen=True)
class CheckSite:
    """A place the runtime calls ``supports_eagle3`` on the target, and what it raises when the check fails."""

    where: str  # file:line
    function: str
    raises: str  # exception class, '' when the failing branch raises nothing
    message: str


@dataclass(frozen=True)
class Gate:
    """``SpeculativeConfig``'s allow-list: EAGLE-3 only for targets whose tested model type contains an entry."""

    where: str
    tested: str  # the expression tested (``self.target_model_config.hf_text_config.model_type``)
    allow_list: tuple[str, ...]
    match: str  # "substring" (``entry in model_type``) or "equal"
    raises: str
    message: str

    def admits(self, model_type: str) -> bool:
        if self.match == "equal":
            return model_type in self.allow_list
        return any(entry in model_type for entry in self.allow_list)


@dataclass
class Interface:
    """The EAGLE-3 interface of one vLLM release."""

    version: str
    present: bool
    where: str = ""
    members: list[Member] = field(default_factory=list)
    has_defaults: bool = False  # the protocol's methods do work themselves (v0.18+)
    unwraps_holder: bool = False  # the defaults use the inner model itself when it has no ``.model`` (v0.34)
    has_mixin: bool = False
    check_sites: list[CheckSite] = field(default_factory=list)
    gate: Optional[Gate] = None

    @property
    def methods(self) -> list[str]:
        return [m.name for m in self.members if m.kind == "method"]

    @property
    def getters(self) -> list[str]:
        return [m for m in self.methods if m != SETTER]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["methods"], out["getters"] = self.methods, self.getters
        return out


def _is_stub(func: ast.FunctionDef) -> bool:
    """A body of only a docstring and ``...`` / ``pass``."""
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                         and isinstance(s.value.value, str))]
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                           and s.value.value is Ellipsis) for s in body)


def _class_members(node: ast.ClassDef) -> list[Member]:
    """What ``typing`` counts as protocol members: annotated or assigned names and methods, not private ones."""
    out: list[Member] = []
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_"):
            out.append(Member(stmt.name, "method", node.name, "stub" if _is_stub(stmt) else "default"))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and not stmt.target.id.startswith("_"):
            out.append(Member(stmt.target.id, "attribute", node.name, "value"))
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and not target.id.startswith("_"):
                    out.append(Member(target.id, "attribute", node.name, "value"))
    return out


def _protocol_chain(tree: ast.Module, name: str) -> list[ast.ClassDef]:
    """The protocol class and the protocols it extends in the same module, nearest first."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    chain: list[ast.ClassDef] = []
    todo = [name]
    while todo:
        current = classes.get(todo.pop(0))
        if current is None or current in chain:
            continue
        chain.append(current)
        todo += [ast.unparse(b) for b in current.bases if ast.unparse(b) in classes]
    return chain


def _uses(func: ast.FunctionDef, text: str) -> bool:
    return text in ast.unparse(func)


def _text_of(node: Optional[ast.expr]) -> str:
    """A raise's message as written: string parts kept, formatted values shown as ``{...}``."""
    if node is None:
        return ""
    if isinstance(node, ast.Call) and node.args:
        return _text_of(node.args[0])
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join("{" + ast.unparse(v.value) + "}" if isinstance(v, ast.FormattedValue) else
                       str(v.value) if isinstance(v, ast.Constant) else "" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text_of(node.left) + _text_of(node.right)
    return ast.unparse(node)


def _raise_in(stmts: list[ast.stmt]) -> Optional[ast.Raise]:
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Raise):
                return node
    return None


def _exception_name(node: ast.Raise) -> str:
    exc = node.exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    return ast.unparse(target) if target is not None else ""


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def check_sites(src: SglangSource) -> list[CheckSite]:
    """Every ``if [not] supports_eagle3(...)`` of the runtime, with the exception its failing branch raises."""
    sites: list[CheckSite] = []
    for path in src.files():
        if not path.startswith(RUNTIME_DIRS) or CHECK_FUNCTION + "(" not in src.text(path):
            continue
        tree = src.tree(path)
        for func in _functions(tree) if tree is not None else []:
            for node in ast.walk(func):
                if not isinstance(node, ast.If):
                    continue
                calls = [c for c in ast.walk(node.test) if isinstance(c, ast.Call)
                         and ast.unparse(c.func).endswith(CHECK_FUNCTION)]
                if not calls:
                    continue
                negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
                failing = node.body if negated else node.orelse
                raised = _raise_in(failing)
                sites.append(CheckSite(f"{path}:{node.lineno}", func.name,
                                       _exception_name(raised) if raised else "",
                                       _text_of(raised.exc) if raised else ""))
    return sorted(set(sites), key=lambda s: s.where)


def _allow_list(func: ast.FunctionDef, name: str) -> tuple[str, ...]:
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return tuple(e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def gate(src: SglangSource) -> Optional[Gate]:
    """The allow-list check of ``SpeculativeConfig`` for EAGLE-3 targets, if the release has one."""
    for path in CONFIG_FILES:
        if not src.exists(path) or "model_type" not in src.text(path):
            continue
        tree = src.tree(path)
        for func in _functions(tree) if tree is not None else []:
            for node in ast.walk(func):
                if not isinstance(node, ast.If):
                    continue
                test = ast.unparse(node.test)
                if f"'{EAGLE3_METHOD}'" not in test or "model_type" not in test:
                    continue
                raised = _raise_in(node.body)
                comps = [g for g in ast.walk(node.test) if isinstance(g, ast.comprehension)]
                if raised is None or not comps or not isinstance(comps[0].iter, ast.Name):
                    continue
                compare = next((c for c in ast.walk(node.test) if isinstance(c, ast.Compare)
                                and "model_type" in ast.unparse(c)), None)
                tested = ast.unparse(compare.comparators[0]) if compare is not None else ""
                match = "substring" if compare is not None and isinstance(compare.ops[0], ast.In) else "equal"
                return Gate(f"{path}:{node.lineno}", tested, _allow_list(func, comps[0].iter.id), match,
                            _exception_name(raised), _text_of(raised.exc))
    return None


def read_interface(src: SglangSource) -> Interface:
    """The release's EAGLE-3 interface, check sites and gate."""
    tree = src.tree(INTERFACES) if src.exists(INTERFACES) else None
    chain = _protocol_chain(tree, PROTOCOL) if tree is not None else []
    iface = Interface(src.version, bool(chain), check_sites=check_sites(src), gate=gate(src))
    if not chain or tree is None:
        return iface
    iface.where = f"{INTERFACES}:{chain[0].lineno}"
    seen: set[str] = set()
    for cls in chain:
        for member in _class_members(cls):
            if member.name not in seen:
                seen.add(member.name)
                iface.members.append(member)
    setter = next((n for n in chain[0].body if isinstance(n, ast.FunctionDef) and n.name == SETTER), None)
    iface.has_defaults = any(m.body == "default" for m in iface.members if m.kind == "method")
    iface.has_mixin = any(isinstance(n, ast.ClassDef) and n.name == MIXIN for n in tree.body)
    iface.unwraps_holder = setter is not None and _uses(setter, 'getattr(parent_ref, "model", parent_ref)'.replace('"', "'"))
    return iface
