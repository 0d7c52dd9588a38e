"""Classes of a vLLM release read statically: Python's method resolution order, who defines a member, and what
class an attribute such as ``self.language_model`` or ``self.model`` holds.

The protocol check is ``isinstance``, so what counts is what Python itself would find: the C3 linearisation of the
bases (computed here, not a depth-first walk, since a diamond decides whether a protocol's stub or a base's body
wins), class-level definitions, and for attributes also ``self.name = ...`` in a constructor. vLLM builds a
wrapper's language model with ``init_vllm_registered_model(..., architectures=[...])``: a literal list resolves
through the release's registry; a list taken from the checkpoint's config is only known at load time, and says so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Optional

from eagle3lab.trace.modindex import ClassRef, ModuleIndex
from eagle3lab.trace.sources import SglangSource
from eagle3lab.trace.vllm.registry import Registry

REGISTERED_INIT = "init_vllm_registered_model"
MARK_LANGUAGE_MODEL = "_mark_language_model"
# Attribute names wrappers give their language model, most telling first.
INNER_NAMES = ("language_model", "llm", "text_model", "lm", "model", "decoder")
MAX_DEPTH = 8
LM_NAME = re.compile(r"For(CausalLM|ConditionalGeneration)$|LMHeadModel$")


@dataclass(frozen=True)
class Held:
    """What an attribute holds: resolved classes, or why not (a config-dependent architecture, say)."""

    attr: str
    classes: tuple[ClassRef, ...] = ()
    dynamic: str = ""  # the expression the class comes from at load time, when it is not in the source
    evidence: str = ""  # file:line of the assignment

    @property
    def resolved(self) -> bool:
        return bool(self.classes)


@dataclass
class ClassIndex:
    """A release's classes: MRO, members and held attributes, memoised."""

    src: SglangSource
    registry: Registry
    index: ModuleIndex = field(init=False)
    _mro: dict[str, list[ClassRef]] = field(default_factory=dict, repr=False)
    _assigns: dict[str, dict[str, list[tuple[ast.FunctionDef, ast.expr, int]]]] = field(default_factory=dict,
                                                                                         repr=False)
    _inner: dict[str, Optional[Held]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.index = ModuleIndex(self.src, under="")

    def resolve(self, module: str, name: str) -> ClassRef:
        return self.index.resolve(module, name)

    def where(self, ref: ClassRef, node: Optional[ast.AST] = None) -> str:
        path = self.index.by_name.get(ref.module, ref.module)
        line = getattr(node if node is not None else ref.node, "lineno", 0)
        return f"{path}:{line}" if line else path

    # -- method resolution order ---------------------------------------------------------------------------

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """Python's C3 linearisation; a class whose bases cannot be linearised (Python would refuse to create it)
        falls back to depth-first order."""
        if ref.qualname not in self._mro:
            self._mro[ref.qualname] = [ref]  # guards a cycle while computing
            self._mro[ref.qualname] = self._c3(ref, 0)
        return self._mro[ref.qualname]

    def _c3(self, ref: ClassRef, depth: int) -> list[ClassRef]:
        bases = self.index.bases(ref) if depth < 40 else []
        seqs = [list(self.mro(b)) for b in bases] + [list(bases)]
        out = [ref]
        while any(seqs):
            seqs = [s for s in seqs if s]
            head = next((s[0] for s in seqs if not any(s[0].qualname in {c.qualname for c in t[1:]} for t in seqs)),
                        None)
            if head is None:
                return self.index.mro(ref)
            out.append(head)
            seqs = [s[1:] if s[0].qualname == head.qualname else s for s in seqs]
        return out

    def has_base(self, ref: ClassRef, name: str, module: str) -> bool:
        return any(c.name == name and c.module == module for c in self.mro(ref))

    # -- members ---------------------------------------------------------------------------------------------

    @staticmethod
    def defines(node: ast.ClassDef, member: str) -> Optional[ast.AST]:
        """The statement of a class body that defines ``member`` (a method, an assignment or an annotation)."""
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == member:
                return stmt
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == member for t in stmt.targets):
                return stmt
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == member
                    and stmt.value is not None):
                return stmt
        return None

    def owner(self, ref: ClassRef, member: str) -> Optional[tuple[ClassRef, ast.AST]]:
        """The first class of the MRO that defines ``member`` at class level, and the definition."""
        for cls in self.mro(ref):
            if cls.node is not None:
                found = self.defines(cls.node, member)
                if found is not None:
                    return cls, found
        return None

    def self_assignments(self, ref: ClassRef, attr: str) -> list[tuple[ClassRef, ast.FunctionDef, ast.expr, int]]:
        """``self.attr = value`` in the methods of the class and its bases: (class, method, value, line)."""
        return [(cls, func, value, line) for cls in self.mro(ref)
                for func, value, line in self._assigned(cls).get(attr, [])]

    def _assigned(self, cls: ClassRef) -> dict[str, list[tuple[ast.FunctionDef, ast.expr, int]]]:
        """Every ``self.x = value`` of one class's own methods, by ``x`` (one walk per class, memoised)."""
        if cls.qualname not in self._assigns:
            found: dict[str, list[tuple[ast.FunctionDef, ast.expr, int]]] = {}
            for func in (n for n in (cls.node.body if cls.node else []) if isinstance(n, ast.FunctionDef)):
                for node in ast.walk(func):
                    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for t in targets:
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                found.setdefault(t.attr, []).append((func, node.value, node.lineno))
            self._assigns[cls.qualname] = found
        return self._assigns[cls.qualname]

    # -- what an attribute holds -------------------------------------------------------------------------------

    def marked_language_model(self, ref: ClassRef) -> Optional[str]:
        """The attribute assigned inside ``with self._mark_language_model(...)``: what vLLM's default
        ``get_language_model`` returns."""
        for cls in self.mro(ref):
            for node in ast.walk(cls.node) if cls.node is not None else []:
                if isinstance(node, ast.With) and MARK_LANGUAGE_MODEL in ast.unparse(node.items[0].context_expr):
                    for stmt in ast.walk(node):
                        if isinstance(stmt, ast.Assign):
                            for target in stmt.targets:
                                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                                        and target.value.id == "self"):
                                    return target.attr
        return None

    def held(self, ref: ClassRef, attr: str, depth: int = 0) -> Held:
        """The class(es) ``self.<attr>`` holds, from its assignments (the first one found through the MRO)."""
        assignments = self.self_assignments(ref, attr)
        if not assignments:
            return Held(attr)
        dynamic = ""
        evidence = self.where(assignments[0][0], ast.Pass(lineno=assignments[0][3]))
        classes: list[ClassRef] = []
        for cls, func, value, line in assignments:
            got, why = self._value_classes(cls, func, value, ref, depth)
            for c in got:
                if all(c.qualname != k.qualname for k in classes):
                    classes.append(c)
            if why and not dynamic:
                dynamic, evidence = why, self.where(cls, ast.Pass(lineno=line))
            if classes:
                return Held(attr, tuple(classes), "", self.where(cls, ast.Pass(lineno=line)))
        return Held(attr, (), dynamic, evidence)

    def _value_classes(self, cls: ClassRef, func: ast.FunctionDef, value: ast.expr, owner: ClassRef,
                       depth: int) -> tuple[list[ClassRef], str]:
        """Classes an assigned expression produces, or the reason it is only known at load time."""
        if depth > MAX_DEPTH or not isinstance(value, ast.Call):
            return [], ""
        callee = value.func
        name = ast.unparse(callee)
        if name.endswith(REGISTERED_INIT):
            return self._registered(value, func)
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
            found = self.owner(owner, callee.attr)
            if found is None:
                return [], ""
            where_cls, node = found
            if isinstance(node, ast.FunctionDef):  # self._init_model(...): what the helper returns
                out: list[ClassRef] = []
                reason = ""
                for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None):
                    got, why = self._value_classes(where_cls, node, ret.value, owner, depth + 1)  # type: ignore[arg-type]
                    out += got
                    reason = reason or why
                return out, reason
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:  # model_cls = SomeModel
                ref = self.resolve(where_cls.module, ast.unparse(node.value))
                return ([ref] if ref.node is not None else []), ""
            return [], ""
        if isinstance(callee, (ast.Name, ast.Attribute)):
            local = self._local_class(func, name)
            ref = self.resolve(cls.module, local or name)
            if ref.node is not None:
                return [ref], ""
        return [], ""

    @staticmethod
    def _local_class(func: ast.FunctionDef, name: str) -> Optional[str]:
        """``model_cls = SomeModel`` inside the method, for ``self.x = model_cls(...)``."""
        for node in ast.walk(func):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == name and isinstance(node.value, (ast.Name, ast.Attribute))):
                return ast.unparse(node.value)
        return None

    def _registered(self, call: ast.Call, func: ast.FunctionDef) -> tuple[list[ClassRef], str]:
        """``init_vllm_registered_model(..., architectures=[...])``: the first registered architecture of a literal
        list, as vLLM's registry resolves it; otherwise the config expression it is read from at load time."""
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        archs = kwargs.get("architectures")
        if archs is not None and isinstance(archs, ast.Name):
            archs = next((n.value for n in ast.walk(func) if isinstance(n, ast.Assign) and len(n.targets) == 1
                          and isinstance(n.targets[0], ast.Name) and n.targets[0].id == archs.id), archs)
        if isinstance(archs, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in archs.elts):
            for element in archs.elts:
                entry = self.registry.entries.get(str(element.value))  # type: ignore[attr-defined]
                if entry is not None:
                    ref = self.resolve(entry.module, entry.class_name)
                    if ref.node is not None:
                        return [ref], ""
            return [], f"architectures {ast.unparse(archs)} (not registered)"
        config = kwargs.get("hf_config")
        source = ast.unparse(archs) if archs is not None else (
            f"{ast.unparse(config)}.architectures" if config is not None else "the model config's architectures")
        return [], source

    def inner_language_model(self, ref: ClassRef) -> Optional[Held]:
        """The wrapper's language model: the attribute ``_mark_language_model`` marks, else the first of
        ``INNER_NAMES`` that holds a model built by the registry or a class that is itself a causal LM (memoised)."""
        if ref.qualname not in self._inner:
            self._inner[ref.qualname] = self._inner_uncached(ref)
        return self._inner[ref.qualname]

    def _inner_uncached(self, ref: ClassRef) -> Optional[Held]:
        marked = self.marked_language_model(ref)
        names = ([marked] if marked else []) + [n for n in INNER_NAMES if n != marked]
        for attr in names:
            held = self.held(ref, attr)
            if held.resolved and (attr == marked or any(self.is_language_model(c) for c in held.classes)):
                return held
            if held.dynamic and (attr == marked or attr != "model"):
                return held
        return None

    def is_language_model(self, ref: ClassRef) -> bool:
        """A generating model (a causal LM: registered as one, or named so), not a backbone such as ``LlamaModel``."""
        names = {c.name for c in self.mro(ref)}
        return bool(names & self.registry.generating_class_names) or bool(LM_NAME.search(ref.name))
