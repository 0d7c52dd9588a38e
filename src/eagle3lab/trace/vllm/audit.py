"""Does each registered vLLM target implement EAGLE-3 in a release? Per class: yes / no, how, and for wrappers
whether the wrapper lacks what its inner language model has (the class of the sglang incident).

``implements`` is what the runtime decides: the ``isinstance(model, SupportsEagle3)`` check passes (the class
inherits the protocol, or has every protocol member: duck typing) and the setter the check admits does its job:
a body of the class or of a base ("direct", "inherited"), or, from v0.18.0, the protocol's own default, which
reaches ``get_language_model().model`` (the inner model itself on v0.34) and works only when that is an
``EagleModelMixin`` ("protocol default"). Before v0.18.0 the protocol's methods are stubs: a class that inherits
the protocol without overriding them passes the check yet captures nothing ("protocol stub", not implemented).
A *defect* is a wrapper that does not implement while its inner language model does.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Optional

from eagle3lab.trace.modindex import ClassRef
from eagle3lab.trace.sources import SglangSource
from eagle3lab.trace.vllm.classes import ClassIndex, Held
from eagle3lab.trace.vllm.interface import INTERFACES, MIXIN, PROTOCOL, SETTER, Interface, read_interface
from eagle3lab.trace.vllm.layers import convention
from eagle3lab.trace.vllm.registry import Entry, read_registry

INTERFACES_MODULE = "vllm." + INTERFACES[:-3].replace("/", ".")
HOWS = ("direct", "inherited", "protocol default", "protocol stub", "duck typed", "")


@dataclass
class ClassRow:
    """One registered architecture's verdict (the ``audit --engine vllm --json`` row)."""

    arch: str
    cls: str
    module: str
    wrapper_of: Optional[str]  # the inner language model's class, or "dynamic: <expr>", or None (not a wrapper)
    implements: bool
    how: str
    defect: bool
    evidence: str
    category: str = ""
    passes_check: bool = False  # isinstance(model, SupportsEagle3)
    inner_implements: Optional[bool] = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["class"] = out.pop("cls")
        return out


class Auditor:
    """The audit of one release (the interface read once, classes memoised)."""

    def __init__(self, src: SglangSource) -> None:
        self.src = src
        self.iface: Interface = read_interface(src)
        self.registry = read_registry(src)
        self.classes = ClassIndex(src, self.registry)
        self._implements: dict[str, tuple[bool, str, str, bool]] = {}

    def is_protocol(self, ref: ClassRef) -> bool:
        return ref.module == INTERFACES_MODULE and ref.name == PROTOCOL

    def _missing(self, ref: ClassRef) -> list[str]:
        """Protocol members the class has neither at class level nor as ``self.x = ...`` (attributes only)."""
        missing = []
        for member in self.iface.members:
            if self.classes.owner(ref, member.name) is not None:
                continue
            if member.kind == "attribute" and self.classes.self_assignments(ref, member.name):
                continue
            missing.append(member.name)
        return missing

    def implements(self, ref: ClassRef, depth: int = 0) -> tuple[bool, str, str, bool]:
        """(implements, how, evidence, passes the isinstance check), memoised per class."""
        if ref.qualname not in self._implements:
            self._implements[ref.qualname] = (False, "", "resolving", False)  # guards a cycle
            self._implements[ref.qualname] = self._implements_uncached(ref, depth)
        return self._implements[ref.qualname]

    def _implements_uncached(self, ref: ClassRef, depth: int) -> tuple[bool, str, str, bool]:
        if not self.iface.present:
            return False, "", f"vLLM {self.src.version} has no {PROTOCOL} protocol (EAGLE-3 came in v0.10.1)", False
        mro = self.classes.mro(ref)
        inherits = any(self.is_protocol(c) for c in mro)
        missing = self._missing(ref)
        if not inherits and missing:
            return False, "", f"not a {PROTOCOL}: lacks {', '.join(missing)}", False
        found = self.classes.owner(ref, SETTER)
        if found is None:  # only through an instance attribute; the check passes, nothing to call
            return False, "", f"{SETTER} is not a method of {ref.name}", True
        owner, node = found
        where = self.classes.where(owner, node)
        if self.is_protocol(owner):
            if not self.iface.has_defaults:
                return False, "protocol stub", (f"inherits {PROTOCOL} but not {SETTER}: the protocol's stub "
                                                f"({where}) captures nothing"), True
            ok, why = self._default_reaches(ref, depth)
            return ok, "protocol default", f"{PROTOCOL}.{SETTER} default ({where}): {why}", True
        how = "direct" if owner.qualname == ref.qualname else "inherited"
        if not inherits:
            how = "duck typed" if how == "direct" else how
        via = "" if how in ("direct", "duck typed") else f" from {owner.name}"
        return True, how, f"{SETTER}{via} at {where}", True

    def _default_reaches(self, ref: ClassRef, depth: int) -> tuple[bool, str]:
        """Whether the protocol's default setter finds an ``EagleModelMixin``: it takes ``get_language_model()``
        (else ``self.language_model``, else ``self``), then that model's ``.model`` (v0.34: the model itself when
        it has no ``.model``)."""
        parent: list[ClassRef] = [ref]
        route = "self"
        if self.classes.owner(ref, "get_language_model") is not None or self.classes.self_assignments(
                ref, "language_model"):
            inner = self.classes.inner_language_model(ref)
            if inner is None:
                return False, "no language model attribute found for get_language_model() to return"
            if not inner.resolved:
                return True, (f"reaches the language model chosen at load time ({inner.dynamic}); works when that "
                              f"model's .model is an {MIXIN}")
            parent, route = list(inner.classes), f"self.{inner.attr}"
        verdicts = []
        for cls in parent:
            holder = self.classes.held(cls, "model")
            targets = list(holder.classes) if holder.resolved else ([cls] if self.iface.unwraps_holder else [])
            ok = bool(targets) and all(self.classes.has_base(t, MIXIN, INTERFACES_MODULE) for t in targets)
            names = ", ".join(t.name for t in targets) or "unresolved"
            verdicts.append((ok, f"{route} ({cls.name}).model is {names}: "
                                 f"{'an' if ok else 'not an'} {MIXIN}"))
        return all(v[0] for v in verdicts), "; ".join(v[1] for v in verdicts)

    def row(self, entry: Entry) -> ClassRow:
        ref = self.classes.resolve(entry.module, entry.class_name)
        if ref.node is None:
            return ClassRow(entry.arch, entry.class_name, entry.module, None, False, "", False,
                            f"{entry.class_name} is not defined in {entry.module}", entry.category)
        ok, how, evidence, check = self.implements(ref)
        inner = self.classes.inner_language_model(ref)
        wrapper_of, inner_ok = self._inner(inner)
        defect = bool(inner is not None and not ok and inner_ok)
        if inner is not None and not ok:
            evidence += f"; inner {wrapper_of} {'implements' if inner_ok else 'does not implement' if inner_ok is False else 'is chosen at load time'}"
        return ClassRow(entry.arch, ref.name, ref.module, wrapper_of, ok, how if ok or how == "protocol stub" or
                        how == "protocol default" else "", defect, evidence, entry.category, check, inner_ok)

    def _inner(self, inner: Optional[Held]) -> tuple[Optional[str], Optional[bool]]:
        if inner is None:
            return None, None
        if not inner.resolved:
            return f"dynamic: {inner.dynamic}", None
        verdicts = [self.implements(c, 1)[0] for c in inner.classes]
        return " | ".join(c.name for c in inner.classes), all(verdicts)


def audit(src: SglangSource) -> dict[str, Any]:
    """Every registered target of the release: ``{"release", "interface", "classes", "counts"}``."""
    started = time.perf_counter()
    auditor = Auditor(src)
    rows = [auditor.row(e) for e in auditor.registry.targets]
    counts = {"classes": len(rows), "implements": sum(r.implements for r in rows),
              "passes_check": sum(r.passes_check for r in rows),
              "wrappers": sum(r.wrapper_of is not None for r in rows),
              "dynamic_wrappers": sum(bool(r.wrapper_of and r.wrapper_of.startswith("dynamic")) for r in rows),
              "dynamic_wrappers_lacking": sum(bool(r.wrapper_of and r.wrapper_of.startswith("dynamic"))
                                              and not r.implements for r in rows),
              "defects": sum(r.defect for r in rows)}
    for how in HOWS[:-1]:
        counts[how.replace(" ", "_")] = sum(r.how == how and r.implements for r in rows)
    return {"release": src.version, "engine": "vllm", "provenance": f"traced from vLLM {src.version}'s source "
            f"({src.origin_label})", "interface": auditor.iface.to_dict(), "counts": counts,
            "layers": convention(src).to_dict(), "classes": [r.to_dict() for r in rows],
            "seconds": round(time.perf_counter() - started, 2)}
