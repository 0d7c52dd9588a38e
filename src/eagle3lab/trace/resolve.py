"""Class resolution for the audit: what a model class provides, and which inner language model it holds.

Wrappers build their inner model in several shapes, and the audit must see through all of them:
``self.language_model = Qwen2ForCausalLM(...)`` (a constructor), ``self.llm = self.init_llm(...)`` (a helper method,
overridden per subclass), ``llm_cls = A if ... else B`` or ``if ...: self.model = A(...) else: self.model = B(...)``
(several possible inner classes), ``instance_class = _SUPPORT_VERSION.get(version)`` (a dispatch table), and a
custom ``__getattr__`` that forwards every missing member to another object (a proxy). Expressions are evaluated
over the AST to the set of classes they can produce; what cannot be evaluated becomes an ``Unknown`` with the
reason, never a silent skip.

The answers' types live in ``resolution``, what one class's AST says in ``class_ast``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional
from eagle3lab.errors import EntryClassError
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE
from eagle3lab.trace.modindex import ClassRef, ModuleIndex, package_version
from eagle3lab.trace.sources import SglangSource
from eagle3lab.trace.resolution import ClassReport, Inner, MemberStatus, Option, SATISFIED, Unknown, Value
from eagle3lab.trace.class_ast import (harmless_external, is_dotted_name, self_attr, short_source, defined,
                                       delegation_target, function_returns, getattr_proxy, is_torch_module,
                                       torch_module_members)


LM_CLASS_NAME = re.compile(r"For(CausalLM|ConditionalGeneration)|LanguageModel|LMHeadModel", re.I)


# Attribute names wrappers give their language model, most telling first (others rank after these).
PREFERRED_INNER = ("language_model", "model", "llm", "text_model", "lm")


MAX_DEPTH = 12


@dataclass(frozen=True)
class _Ctx:
    """Where an expression is evaluated: on behalf of ``concrete``, in ``module``, inside ``func``."""

    concrete: ClassRef
    module: str
    func: Optional[ast.FunctionDef]
    depth: int = 0

    def deeper(self, **kw) -> "_Ctx":
        return _Ctx(**{"concrete": self.concrete, "module": self.module, "func": self.func,
                       "depth": self.depth + 1, **kw})


class Resolver:
    """Class resolution for one release (memoised per instance)."""

    def __init__(self, src: SglangSource, index: Optional[ModuleIndex] = None) -> None:
        self.src = src
        self.index = index or ModuleIndex(src)
        self._inner: dict[str, Optional[Inner]] = {}
        self._status: dict[tuple[str, str], MemberStatus] = {}
        self._assign_cache: dict[str, dict[str, list[tuple[ast.FunctionDef, ast.Assign]]]] = {}
        self._defined_cache: dict[str, dict[str, ast.AST]] = {}

    # -- lookup
    def find(self, entry: str) -> ClassRef:
        ref = self.index.find_class(entry)
        if ref is None:
            raise EntryClassError(
                f"class '{entry}' is not defined under srt/models in sglang {self.src.version}; "
                f"pick one from audit.entry_class_names()",
                entry_class=entry, version=self.src.version, problem="not_defined")
        return ref

    def defined(self, cls: ClassRef) -> dict[str, ast.AST]:
        """``defined(cls.node)``, memoised per class."""
        if cls.qualname not in self._defined_cache:
            self._defined_cache[cls.qualname] = defined(cls.node) if cls.node is not None else {}
        return self._defined_cache[cls.qualname]

    def owner_of(self, ref: ClassRef, member: str) -> Optional[tuple[ClassRef, ast.AST]]:
        for cls in self.index.mro(ref):
            if cls.node is not None:
                found = self.defined(cls).get(member)
                if found is not None:
                    return cls, found
            elif is_torch_module(cls) and member in torch_module_members():
                return cls, ast.Pass()
        return None

    def has(self, ref: ClassRef, member: str) -> bool:
        """``member`` is reachable on an instance (defined, inherited, or through a proxy that has it)."""
        return self.status(ref, member).status in SATISFIED

    def unreadable_bases(self, ref: ClassRef) -> list[str]:
        return [c.qualname for c in self.index.mro(ref) if c.external and not harmless_external(c)]

    def external_sources(self, ref: ClassRef) -> list[str]:
        """Installed packages (with versions) whose source was read to resolve ``ref``'s bases."""
        tops = sorted({c.module.split(".")[0] for c in self.index.mro(ref)
                       if not c.external and not c.module.startswith("sglang.")})
        return [f"{top} {package_version(top) or '(stdlib)'}" for top in tops]

    def proxy(self, ref: ClassRef) -> tuple[str, str]:
        """(class with a custom ``__getattr__``, attribute it forwards to) of the first such class in the MRO."""
        for cls in self.index.mro(ref):
            if cls.node is not None:
                node = self.defined(cls).get("__getattr__")
                if node is not None:
                    return cls.qualname, getattr_proxy(node)
        return "", ""

    # -- expression evaluation
    def _function(self, module: str, name: str, depth: int = 0) -> tuple[str, Optional[ast.FunctionDef]]:
        """A module-level function called by name: (its module, its def), following imports."""
        mod = self.index.module(module)
        if mod is None or depth > 5:
            return "", None
        if name in mod.functions:
            return module, mod.functions[name]
        imported = mod.imports.get(name) or mod.local_imports.get(name)
        if imported and imported[1]:
            return self._function(imported[0], imported[1], depth + 1)
        return "", None

    def _locals(self, func: Optional[ast.FunctionDef], name: str) -> list[ast.expr]:
        """Values assigned to a local variable anywhere in ``func`` (every branch counts)."""
        if func is None:
            return []
        out = []
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                out.append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                if node.value is not None:
                    out.append(node.value)
        return out

    def _params(self, func: Optional[ast.FunctionDef]) -> set[str]:
        if func is None:
            return set()
        args = func.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}

    def _param_values(self, name: str, ctx: _Ctx, as_class: bool) -> list[Value]:
        """A constructor parameter: what the nearest subclass passes to ``super().__init__``, else its default."""
        func = ctx.func
        if func is None or func.name != "__init__":
            return [Unknown(f"passed in as parameter '{name}' of {func.name if func else '?'}()")]
        mro = [c for c in self.index.mro(ctx.concrete) if c.node is not None]
        owner_pos = next((i for i, c in enumerate(mro) if func in c.node.body), None)  # type: ignore[union-attr]
        names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][1:]
        evaluate = self._classes if as_class else self._instances
        for sub in reversed(mro[:owner_pos] if owner_pos else []):
            init = self.defined(sub).get("__init__")
            if not isinstance(init, ast.FunctionDef):
                continue
            for call in ast.walk(init):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "__init__" and isinstance(call.func.value, ast.Call)
                        and isinstance(call.func.value.func, ast.Name) and call.func.value.func.id == "super"):
                    continue
                passed = next((k.value for k in call.keywords if k.arg == name), None)
                if passed is None and name in names and names.index(name) < len(call.args):
                    passed = call.args[names.index(name)]
                if passed is not None:
                    return evaluate(passed, ctx.deeper(module=sub.module, func=init))
        defaults = func.args.defaults
        positional = [*func.args.posonlyargs, *func.args.args]
        by_name = {a.arg: d for a, d in zip(positional[len(positional) - len(defaults):], defaults)}
        by_name.update({a.arg: d for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults) if d is not None})
        if name in by_name:
            return evaluate(by_name[name], ctx.deeper())
        return [Unknown(f"passed in as constructor parameter '{name}' without a default")]

    def _method_values(self, name: str, ctx: _Ctx, as_class: bool) -> list[Value]:
        """What ``self.<name>(...)`` returns, looked up on the concrete class (subclass overrides win)."""
        found = self.owner_of(ctx.concrete, name)
        if found is not None and isinstance(found[1], ast.Assign) and found[0].node is not None \
                and found[1] in found[0].node.body:
            # a class attribute holding a class (``body_cls = Qwen3_5ForCausalLM``): calling it builds one
            values = self._classes(found[1].value, ctx.deeper(module=found[0].module, func=None))
            return values
        if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [Unknown(f"self.{name}() is not defined in {ctx.concrete.name}'s classes")]
        owner, func = found
        returns = function_returns(func)  # type: ignore[arg-type]
        if not returns:
            return [Unknown(f"{owner.name}.{name}() returns nothing (abstract)")]
        inner = ctx.deeper(module=owner.module, func=func)
        return [v for r in returns for v in (self._classes(r, inner) if as_class else self._instances(r, inner))]

    def _dict_values(self, name: str, ctx: _Ctx) -> Optional[list[Value]]:
        mod = self.index.module(ctx.module)
        table = mod.dicts.get(name) if mod else None
        if table is None:
            return None
        inner = ctx.deeper(func=None)
        return [v for value in table.values for v in self._classes(value, inner)]

    def _classes(self, expr: ast.expr, ctx: _Ctx) -> list[Value]:
        """Classes an expression can denote (``Qwen2ForCausalLM``, ``A if c else B``, ``TABLE.get(key)``)."""
        if ctx.depth > MAX_DEPTH:
            return [Unknown(f"resolution deeper than {MAX_DEPTH} steps at {ast.unparse(expr)}")]
        if isinstance(expr, ast.IfExp):
            return self._classes(expr.body, ctx.deeper()) + self._classes(expr.orelse, ctx.deeper())
        if isinstance(expr, ast.BoolOp):
            return [v for e in expr.values for v in self._classes(e, ctx.deeper())]
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
            values = self._dict_values(expr.value.id, ctx)
            if values is not None:
                return values
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if expr.func.attr == "get" and isinstance(expr.func.value, ast.Name):
                values = self._dict_values(expr.func.value.id, ctx)
                if values is not None:
                    return values
            if self_attr(expr.func):
                return self._method_values(expr.func.attr, ctx, as_class=True)
        if isinstance(expr, ast.Name):
            if ctx.func is not None and expr.id in self._params(ctx.func):
                return self._param_values(expr.id, ctx, as_class=True)
            local = self._locals(ctx.func, expr.id)
            if local:
                return [v for e in local for v in self._classes(e, ctx.deeper())]
        if isinstance(expr, (ast.Name, ast.Attribute)):
            text = ast.unparse(expr)
            if isinstance(expr, ast.Attribute) and not is_dotted_name(expr):
                return [Unknown(f"class chosen at run time ({text})")]
            ref = self.index.resolve(ctx.module, text)
            if ref.node is not None or harmless_external(ref):
                return [ref]
            return [Unknown(f"{ref.qualname} is not readable here")]
        return [Unknown(f"class chosen at run time ({short_source(expr)})")]

    def _instances(self, expr: ast.expr, ctx: _Ctx) -> list[Value]:
        """Classes of the objects an expression can produce (``Cls(...)``, ``self.init_llm(...)``, a local)."""
        if ctx.depth > MAX_DEPTH:
            return [Unknown(f"resolution deeper than {MAX_DEPTH} steps at {short_source(expr)}")]
        if isinstance(expr, ast.IfExp):
            return self._instances(expr.body, ctx.deeper()) + self._instances(expr.orelse, ctx.deeper())
        if isinstance(expr, ast.BoolOp):
            return [v for e in expr.values for v in self._instances(e, ctx.deeper())]
        if isinstance(expr, ast.Constant):
            return []  # ``self.x = None``: no object
        if isinstance(expr, ast.Name):
            if ctx.func is not None and expr.id in self._params(ctx.func):
                return self._param_values(expr.id, ctx, as_class=False)
            local = self._locals(ctx.func, expr.id)
            if local:
                return [v for e in local for v in self._instances(e, ctx.deeper())]
            return [Unknown(f"{expr.id} is not assigned in this function")]
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and self_attr(func):
                return self._method_values(func.attr, ctx, as_class=False)
            if isinstance(func, ast.Name):
                fmod, fdef = self._function(ctx.module, func.id)
                if fdef is not None:
                    returns = function_returns(fdef)
                    inner = ctx.deeper(module=fmod, func=fdef)
                    return [v for r in returns for v in self._instances(r, inner)] or [
                        Unknown(f"{func.id}() returns nothing")]
            return self._classes(func, ctx.deeper())
        return [Unknown(f"built at run time ({short_source(expr)})")]

    def _assignments(self, cls: ClassRef) -> dict[str, list[tuple[ast.FunctionDef, ast.Assign]]]:
        """``self.<attr> = value`` statements in the methods of one class body, by attribute (memoised)."""
        key = cls.qualname
        if key not in self._assign_cache:
            found: dict[str, list[tuple[ast.FunctionDef, ast.Assign]]] = {}
            for func in cls.node.body if cls.node is not None else []:
                if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(func):
                    if isinstance(node, ast.Assign) and len(node.targets) == 1:
                        name = self_attr(node.targets[0])
                        if name:
                            found.setdefault(name, []).append((func, node))  # type: ignore[arg-type]
            self._assign_cache[key] = found
        return self._assign_cache[key]

    def _own_classes(self, ref: ClassRef) -> list[ClassRef]:
        """The release's own classes in the MRO: a base from another package (transformers) never builds the
        release's inner model."""
        return [c for c in self.index.mro(ref) if c.node is not None and c.module.startswith("sglang.")]

    def attr_values(self, ref: ClassRef, attr: str) -> list[tuple[ClassRef, ast.FunctionDef, list[Value]]]:
        """Every ``self.<attr> = ...`` in the classes of ``ref`` with the classes the value can have."""
        out = []
        for cls in self._own_classes(ref):
            for func, node in self._assignments(cls).get(attr, []):
                out.append((cls, func, self._instances(node.value, _Ctx(ref, cls.module, func))))
        return out

    def _assigned_attrs(self, ref: ClassRef) -> list[str]:
        names: list[str] = []
        for cls in self._own_classes(ref):
            for name, stmts in self._assignments(cls).items():
                if name not in names and any(isinstance(n.value, (ast.Call, ast.Name, ast.IfExp)) for _, n in stmts):
                    names.append(name)
        return names

    def is_language_model(self, ref: ClassRef) -> bool:
        """A class named like a full language model (``...ForCausalLM``), not a decoder body (``...Model``)."""
        return ref.node is not None and bool(LM_CLASS_NAME.search(ref.name))

    # -- inner model
    def inner(self, ref: ClassRef) -> Optional[Inner]:
        """The inner language model ``ref`` holds (through proxies), or None if it holds none."""
        key = ref.qualname
        if key not in self._inner:
            self._inner[key] = None  # recursion guard
            self._inner[key] = self._direct_inner(ref) or self._proxy_inner(ref)
        return self._inner[key]

    def _direct_inner(self, ref: ClassRef) -> Optional[Inner]:
        candidates: list[tuple[int, int, Inner]] = []
        for order, attr in enumerate(self._assigned_attrs(ref)):
            options: list[Option] = []
            owner: Optional[ClassRef] = None
            any_lm = False
            for cls, func, values in self.attr_values(ref, attr):
                how = f"self.{attr} = ... in {cls.name}.{func.name}"
                for value in values:
                    if isinstance(value, Unknown):
                        options.append(Option(None, how, value.reason))
                    elif self.is_language_model(value) and value.qualname != ref.qualname:
                        options.append(Option(value, how))
                        any_lm = True
                        owner = owner or cls
                    else:
                        options.append(Option(value, how, "not a language model"))
            lm_options = _unique([o for o in options if o.cls is not None and not o.reason])
            unknown = _unique([o for o in options if o.cls is None])
            if any_lm:
                rank = PREFERRED_INNER.index(attr) if attr in PREFERRED_INNER else len(PREFERRED_INNER)
                candidates.append((rank, order, Inner(attr, lm_options + unknown, owner=owner)))
            elif unknown and attr in PREFERRED_INNER and not [o for o in options if o.cls is not None]:
                rank = len(PREFERRED_INNER) + 1 + PREFERRED_INNER.index(attr)
                owner = next((c for c, _, _ in self.attr_values(ref, attr)), None)
                candidates.append((rank, order, Inner(attr, unknown, owner=owner)))
        if not candidates:
            return None
        return sorted(candidates, key=lambda c: (c[0], c[1]))[0][2]

    def _proxy_inner(self, ref: ClassRef) -> Optional[Inner]:
        """A proxy's inner model: the inner models of every class its ``__getattr__`` target can be."""
        owner, attr = self.proxy(ref)
        if not attr:
            return None
        options: list[Option] = []
        via = [f"{owner}.__getattr__ -> self.{attr}"]
        for cls, func, values in self.attr_values(ref, attr):
            for value in values:
                if isinstance(value, Unknown):
                    options.append(Option(None, f"self.{attr} = ... in {cls.name}.{func.name}", value.reason))
                    continue
                sub = self.inner(value)
                if sub is None:
                    if self.is_language_model(value):
                        options.append(Option(value, f"proxied self.{attr} is {value.name}"))
                    continue
                for opt in sub.options:
                    options.append(Option(opt.cls, f"{value.name}: {opt.how}", opt.reason))
                via.extend(v for v in sub.via if v not in via)
        options = _unique(options)
        if not options:
            return None
        inner_attrs = sorted({o.how.split("self.", 1)[-1].split(" ", 1)[0] for o in options if "self." in o.how})
        return Inner(".".join([attr, *inner_attrs[:1]]), options, via=via)

    # -- member status
    def status(self, ref: ClassRef, member: str, depth: int = 0) -> MemberStatus:
        key = (ref.qualname, member)
        if key in self._status:
            return self._status[key]
        self._status[key] = MemberStatus(member, "unresolved", "resolution cycle")  # recursion guard
        self._status[key] = result = self._status_uncached(ref, member, depth)
        return result

    def _inner_has(self, ref: ClassRef, member: str, depth: int) -> dict[str, bool]:
        inner = self.inner(ref)
        if inner is None or depth > 4:
            return {}
        return {c.qualname: self.status(c, member, depth + 1).status in SATISFIED for c in inner.resolved}

    def _status_uncached(self, ref: ClassRef, member: str, depth: int) -> MemberStatus:
        options = self._inner_has(ref, member, depth)
        inner_has = all(options.values()) if options else None
        found = self.owner_of(ref, member)
        if found is not None:
            owner, node = found
            via = delegation_target(node, member)
            if via:
                where = "" if owner.qualname == ref.qualname else f"{owner.qualname}: "
                return MemberStatus(member, "delegated", f"{where}self.{via}", inner_has, options)
            kind = "provided" if owner.qualname == ref.qualname else "inherited"
            return MemberStatus(member, kind, owner.qualname, inner_has, options)
        proxy_owner, proxy_attr = self.proxy(ref)
        if proxy_owner and not proxy_attr:
            return MemberStatus(member, "unresolved", f"custom __getattr__ in {proxy_owner} forwards to no attribute",
                                inner_has, options)
        if proxy_attr:
            return self._proxied(ref, member, proxy_attr, depth, inner_has, options)
        unreadable = self.unreadable_bases(ref)
        if unreadable:
            return MemberStatus(member, "unresolved", "base not readable here: " + ", ".join(unreadable),
                                inner_has, options)
        return MemberStatus(member, "missing", "", inner_has, options)

    def _proxied(self, ref: ClassRef, member: str, attr: str, depth: int, inner_has: Optional[bool],
                 options: dict[str, bool]) -> MemberStatus:
        """Through a proxy, a member exists only if every class the proxy target can be has it."""
        lacking, unknown = [], []
        for _, _, values in self.attr_values(ref, attr):
            for value in values:
                if isinstance(value, Unknown):
                    unknown.append(value.reason)
                    continue
                st = self.status(value, member, depth + 1).status
                if st == "missing":
                    lacking.append(value.name)
                elif st not in SATISFIED:
                    unknown.append(f"{value.name}: {st}")
        via = f"__getattr__ -> self.{attr}"
        if lacking:
            return MemberStatus(member, "missing", f"{via}; lacking in {', '.join(sorted(set(lacking)))}",
                                inner_has, options)
        if unknown:
            return MemberStatus(member, "unresolved", f"{via}; {'; '.join(sorted(set(unknown)))}", inner_has, options)
        return MemberStatus(member, "proxied", via, inner_has, options)

    # -- one class, all members
    def report(self, ref: ClassRef, members: list[str]) -> ClassReport:
        mro = self.index.mro(ref)
        inner = self.inner(ref)
        resolved = inner.resolved if inner else []
        rep = ClassReport(
            entry=ref.name,
            module=ref.module,
            resolution_order=[c.qualname for c in mro],
            nn_module_getattr=any(c.external and is_torch_module(c) for c in mro),
            custom_getattr=[c.qualname for c in mro if c.node is not None and "__getattr__" in self.defined(c)],
            inner_attr=inner.attr if inner else "",
            inner_class=resolved[0].qualname if resolved else "",
            inner_options=[o.to_dict() for o in inner.options] if inner else [],
            inner_via=inner.via if inner else [],
        )
        for member in members:
            rep.members[member] = self.status(ref, member)
        return rep

    def capable(self, ref: ClassRef) -> bool:
        """The class can capture aux hidden states itself (defines or inherits the EAGLE-3 capture hook)."""
        return self.has(ref, SET_LAYERS_TO_CAPTURE)


def _unique(options: list[Option]) -> list[Option]:
    """One option per class (or per reason, for unresolved ones), first source kept."""
    seen: dict[str, Option] = {}
    for opt in options:
        seen.setdefault(opt.cls.qualname if opt.cls else f"?{opt.reason}", opt)
    return list(seen.values())
