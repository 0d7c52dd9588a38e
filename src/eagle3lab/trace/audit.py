"""Does a model class satisfy the EAGLE-3 contract the runtime uses? Per class, per release, per wrapper.

For each contract member an entry class either provides it, inherits it, delegates it to its inner language
model, reaches it through a custom ``__getattr__`` proxy, or lacks it; a lacked member the inner model has is a
*delegation gap* (fixable by delegating), otherwise a real lack. ``nn.Module.__getattr__`` is what turns a lack
into the ``AttributeError`` of the incident.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from packaging.version import Version

from eagle3lab.trace import contract as contract_mod
from eagle3lab.errors import EntryClassError
from eagle3lab.trace.modindex import ClassRef, ModuleIndex
from eagle3lab.trace.sources import SglangSource, open_source
from eagle3lab.trace.startup import StartupProfile, startup_order

EAGLE3_HOOK = "set_eagle3_layers_to_capture"
_INNER_NAME = re.compile(r"For(CausalLM|ConditionalGeneration)|LanguageModel|LMHeadModel", re.I)
_PREFERRED_INNER = ("language_model", "model", "llm", "text_model", "lm")


@dataclass
class MemberStatus:
    member: str
    status: str  # provided | inherited | delegated | proxied | unresolved | missing
    via: str = ""
    inner_has: Optional[bool] = None

    @property
    def gap(self) -> str:
        """``delegation gap`` (inner has it), ``real lack`` or '' when satisfied."""
        if self.status != "missing":
            return ""
        return "delegation gap" if self.inner_has else "real lack"


@dataclass
class ClassReport:
    entry: str
    module: str
    resolution_order: list[str]
    nn_module_getattr: bool
    custom_getattr: list[str]
    inner_attr: str
    inner_class: str
    members: dict[str, MemberStatus] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["members"] = {k: {**asdict(v), "gap": v.gap} for k, v in self.members.items()}
        return data


# ----------------------------------------------------------------------------------------------------------
# members of one class


def _defined(node: ast.ClassDef) -> dict[str, ast.AST]:
    """Members a class body defines: methods, class attributes and ``self.x = ...`` in any method."""
    out: dict[str, ast.AST] = {}
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for tgt in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(tgt, ast.Name):
                    out[tgt.id] = stmt
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assign, ast.AnnAssign)):
            for tgt in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                    out.setdefault(tgt.attr, sub)
    return out


def _delegation_target(func: ast.AST, member: str) -> str:
    """``self.<inner>`` if a method's body just forwards ``member`` to an inner object, else ''."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == member:
            recv = node.func.value
            if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
                return recv.attr
    return ""


def _getattr_proxy(func: ast.FunctionDef) -> str:
    """The inner attribute a custom ``__getattr__`` forwards to (``getattr(self.inner, name)``), or ''."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if node.args and isinstance(node.args[0], ast.Attribute) and isinstance(node.args[0].value, ast.Name):
                if node.args[0].value.id == "self":
                    return node.args[0].attr
    return ""


@lru_cache(maxsize=1)
def torch_module_members() -> frozenset[str]:
    """Members ``torch.nn.Module`` defines, read from the installed torch's source (not imported: slow)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = Path(list(spec.submodule_search_locations)[0]) / "nn" / "modules" / "module.py"
    if not path.is_file():
        return frozenset()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Module":
            return frozenset(_defined(node))
    return frozenset()


def _is_torch_module(ref: ClassRef) -> bool:
    return ref.name == "Module" and ref.module.startswith("torch")


class Resolver:
    """Class resolution for one release."""

    def __init__(self, src: SglangSource) -> None:
        self.src = src
        self.index = ModuleIndex(src)
        self._has_cache: dict[tuple[str, str], bool] = {}

    def find(self, entry: str) -> ClassRef:
        ref = self.index.find_class(entry)
        if ref is None:
            raise EntryClassError(
                f"class '{entry}' is not defined under srt/models in sglang {self.src.version}; "
                f"pick one from audit.entry_class_names()"
            )
        return ref

    def owner_of(self, ref: ClassRef, member: str) -> Optional[tuple[ClassRef, ast.AST]]:
        for cls in self.index.mro(ref):
            if cls.node is not None:
                found = _defined(cls.node).get(member)
                if found is not None:
                    return cls, found
            elif _is_torch_module(cls) and member in torch_module_members():
                return cls, ast.Pass()
        return None

    def has(self, ref: ClassRef, member: str) -> bool:
        key = (ref.qualname, member)
        if key not in self._has_cache:
            self._has_cache[key] = self.owner_of(ref, member) is not None
        return self._has_cache[key]

    def inner_model(self, ref: ClassRef) -> tuple[str, Optional[ClassRef]]:
        """(attribute, class) of the inner language model a wrapper holds, from ``self.x = Cls(...)``."""
        candidates: list[tuple[int, str, ClassRef]] = []
        for cls in self.index.mro(ref):
            if cls.node is None:
                continue
            for sub in ast.walk(cls.node):
                if not (isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.value, ast.Call)):
                    continue
                tgt = sub.targets[0]
                if not (isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self"):
                    continue
                called = ast.unparse(sub.value.func)
                target = self.index.resolve(cls.module, called)
                if target.external or not _INNER_NAME.search(target.name) or target.qualname == ref.qualname:
                    continue
                rank = _PREFERRED_INNER.index(tgt.attr) if tgt.attr in _PREFERRED_INNER else len(_PREFERRED_INNER)
                candidates.append((rank, tgt.attr, target))
        if not candidates:
            return "", None
        _, attr, target = sorted(candidates, key=lambda c: c[0])[0]
        return attr, target

    def report(self, ref: ClassRef, members: list[str]) -> ClassReport:
        mro = self.index.mro(ref)
        nn_getattr = any(c.external and _is_torch_module(c) for c in mro)
        proxies = []
        proxy_attr = ""
        for cls in mro:
            if cls.node is not None and "__getattr__" in _defined(cls.node):
                proxies.append(cls.qualname)
                proxy_attr = proxy_attr or _getattr_proxy(_defined(cls.node)["__getattr__"])  # type: ignore[arg-type]
        inner_attr, inner = self.inner_model(ref)
        # bases outside the release (transformers' PreTrainedModel ...) may define anything: say so, do not guess
        unreadable = [c.qualname for c in mro if c.external and c.name != "object" and not _is_torch_module(c)]
        rep = ClassReport(
            entry=ref.name,
            module=ref.module,
            resolution_order=[c.qualname for c in mro],
            nn_module_getattr=nn_getattr,
            custom_getattr=proxies,
            inner_attr=inner_attr,
            inner_class=inner.qualname if inner else "",
        )
        for member in members:
            inner_has = self.has(inner, member) if inner else None
            found = self.owner_of(ref, member)
            if found is not None:
                owner, node = found
                via = _delegation_target(node, member)
                if via:
                    where = "" if owner.qualname == ref.qualname else f"{owner.qualname}: "
                    status = MemberStatus(member, "delegated", f"{where}self.{via}", inner_has)
                elif owner.qualname == ref.qualname:
                    status = MemberStatus(member, "provided", owner.qualname, inner_has)
                else:
                    status = MemberStatus(member, "inherited", owner.qualname, inner_has)
            elif proxy_attr:
                status = MemberStatus(member, "proxied", f"__getattr__ -> self.{proxy_attr}", inner_has)
            elif unreadable:
                status = MemberStatus(member, "unresolved", "external base " + ", ".join(unreadable), inner_has)
            else:
                status = MemberStatus(member, "missing", "", inner_has)
            rep.members[member] = status
        return rep


# ----------------------------------------------------------------------------------------------------------
# contract of a release


@dataclass
class Contract:
    """The sites an EAGLE-3 server runs on the target model object, and which members they need."""

    sites: list[contract_mod.Site]
    required: list[str]  # unguarded somewhere
    optional: list[str]  # only ever guarded

    @classmethod
    def of(cls, src: SglangSource, roles: tuple[str, ...] = ("target", "either")) -> "Contract":
        """The target's contract by default; ``roles=("draft", "either")`` gives the drafter's."""
        sites = [s for s in contract_mod.contract(contract_mod.trace(src)) if s.role in roles]
        required = sorted({s.member for s in sites if not s.guarded and contract_mod.RunCondition.ERROR_PATH not in s.runs_when})
        optional = sorted({s.member for s in sites} - set(required))
        return cls(sites, required, optional)


def draft_report(src: SglangSource, draft_class: str = "LlamaForCausalLMEagle3") -> dict[str, Any]:
    """The drafter's side of the contract: members the EAGLE workers use on the draft model, and whether the
    draft class has them (the incident's drafter is ``LlamaForCausalLMEagle3``)."""
    res = Resolver(src)
    con = Contract.of(src, roles=("draft", "either"))
    rep = res.report(res.find(draft_class), con.required + con.optional)
    return {"draft_class": draft_class, "required_members": con.required, "optional_members": con.optional,
            "missing_members": [m for m in con.required if rep.members[m].status == "missing"],
            "class_report": rep.to_dict()}


def entry_class_names(src: SglangSource) -> list[str]:
    return sorted({ref.name for _, ref in ModuleIndex(src).entry_classes()})


def _first_raise(order: list[dict], sites: list[contract_mod.Site], lacking: set[str]) -> dict:
    """The first start-up site that would raise; if it sits behind a branch the profile cannot decide, the
    first certain one is attached as ``otherwise``."""
    by_where = {s.where: s for s in sites}
    raising = []
    for entry in order:
        site = by_where.get(entry["where"])
        if site and site.member in lacking and not site.guarded and site.role in ("target", "either"):
            raising.append({**entry, "args": site.args, "function": site.function, "conditions": site.conditions,
                            "runs_when": site.runs_when})
    if not raising:
        return {}
    first = raising[0]
    if not first["certain"]:
        first["otherwise"] = next((r for r in raising if r["certain"]), {})
    return first


def verdict(src: SglangSource, entry: str = "KimiK25ForConditionalGeneration") -> dict[str, Any]:
    """The members the runtime needs unguarded that ``entry`` lacks, where each profile raises first, and
    whether delegating one method would have been enough."""
    res = Resolver(src)
    con = Contract.of(src)
    ref = res.find(entry)
    rep = res.report(ref, con.required + con.optional)
    missing = [m for m in con.required if rep.members[m].status == "missing"]
    gaps = [m for m in missing if rep.members[m].gap == "delegation gap"]
    first: dict[str, dict] = {}
    after_one: dict[str, dict] = {}
    for profile in (StartupProfile.cpu(), StartupProfile.gpu()):
        order = startup_order(src, con.sites, profile)
        first[profile.name] = _first_raise(order, con.sites, set(missing))
        hit = first[profile.name].get("member")
        after_one[profile.name] = _first_raise(order, con.sites, set(missing) - {hit}) if hit else {}
    return {
        "sglang_version": src.version,
        "entry_class": entry,
        "class_report": rep.to_dict(),
        "required_members": con.required,
        "optional_members": con.optional,
        "missing_members": missing,
        "delegation_gaps": gaps,
        "real_lacks": [m for m in missing if m not in gaps],
        "first_raise": first,
        "next_raise_after_one_method": after_one,
        "one_method_enough": len(missing) <= 1,
    }


# ----------------------------------------------------------------------------------------------------------
# layer ids


class _Probe:
    """A stand-in ``self``: every attribute exists; layer counts return the given depth; writes are kept."""

    def __init__(self, depth: int) -> None:
        object.__setattr__(self, "_depth", depth)
        object.__setattr__(self, "_kids", {})

    def __getattr__(self, name: str) -> Any:
        if name in ("num_hidden_layers", "num_layers", "n_layers"):
            return self._depth
        kids = object.__getattribute__(self, "_kids")
        kids.setdefault(name, _Probe(self._depth))
        return kids[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self._kids[name] = value

    def __call__(self, *a: Any, **k: Any) -> "_Probe":
        return self

    def written(self, prefix: str = "self") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self._kids.items():
            if isinstance(value, _Probe):
                out.update(value.written(f"{prefix}.{name}"))
            else:
                out[f"{prefix}.{name}"] = value
        return out


def _hook_function(res: Resolver, ref: ClassRef, member: str = EAGLE3_HOOK) -> tuple[str, Optional[ast.FunctionDef]]:
    """The function that really runs for ``member``: follow delegation (or a gap) into the inner model."""
    for _ in range(5):
        found = res.owner_of(ref, member)
        inner_attr, inner = res.inner_model(ref)
        if found is None:
            if inner is None:
                return "", None
            ref = inner
            continue
        owner, node = found
        via = _delegation_target(node, member)
        if via and inner is not None and via == inner_attr:
            ref = inner
            continue
        return owner.qualname, node if isinstance(node, ast.FunctionDef) else None
    return "", None


def run_hook(func: ast.FunctionDef, depth: int, layer_ids: Optional[list[int]]) -> dict[str, Any]:
    """Execute the hook's own source on a probe ``self`` and return what it wrote (e.g. layers_to_capture)."""
    code = "from __future__ import annotations\n" + textwrap.dedent(ast.unparse(func))
    namespace: dict[str, Any] = {}
    exec(compile(code, "<hook>", "exec"), namespace)  # noqa: S102 - sglang's own source, run on a probe
    probe = _Probe(depth)
    namespace[func.name](probe, layer_ids)
    return {k: v for k, v in probe.written().items() if "capture" in k}


def layer_table(src: SglangSource, entry: str, depth: int, aux_ids: list[int], profile: StartupProfile) -> dict:
    """For each ``set_eagle3_layers_to_capture`` site in start-up order: arguments and captured layers."""
    res = Resolver(src)
    con = Contract.of(src)
    owner, func = _hook_function(res, res.find(entry))
    order = startup_order(src, con.sites, profile)
    rank = {o["where"]: o["rank"] for o in order}
    certain = {o["where"]: o["certain"] for o in order}
    hook_sites = [s for s in con.sites if s.member == EAGLE3_HOOK and s.access == "call"]
    hook_sites.sort(key=lambda s: (rank.get(s.where, 10**6), s.where))
    rows = []
    for site in hook_sites:
        passed = aux_ids if site.args else None
        row = {
            "where": site.where, "function": site.function, "args": site.args, "startup_rank": rank.get(site.where),
            "runs_when": site.runs_when, "layer_ids_passed": passed, "implementation": owner,
        }
        try:
            row["result"] = run_hook(func, depth, passed) if func else {}
        except Exception as exc:  # the hook may use things a probe cannot stand in for
            row["result"] = {}
            row["error"] = f"{type(exc).__name__}: {exc}"
        row["uses"] = site.capture_mode
        row["certain"] = certain.get(site.where)
        rows.append(row)
    reached = [r for r in rows if r["startup_rank"] is not None and r["result"]]
    graphs = [r for r in reached if r["uses"] == "CUDA-graph capture"]
    # graphs bake in the layers captured when they are recorded; eager forwards read the last call's value
    eager_state = reached[-1]["result"] if reached else None
    graph_state = graphs[-1]["result"] if graphs else None
    return {
        "profile": profile.name, "depth": depth, "aux_layer_ids": aux_ids, "rows": rows,
        "eager_forwards_capture": eager_state, "cuda_graph_forwards_capture": graph_state,
        "conflict": graph_state is not None and graph_state != eager_state,
    }


# ----------------------------------------------------------------------------------------------------------
# conformance and bisect


def conformance(src: SglangSource, members: Optional[list[str]] = None) -> dict[str, Any]:
    """Every registered entry class that wraps an EAGLE-3-capable inner model: its status per contract member."""
    t0 = time.perf_counter()
    res = Resolver(src)
    con = Contract.of(src)
    members = members or con.required
    rows = []
    entries = res.index.entry_classes()
    unresolved = sorted({ref.name for _, ref in entries if ref.external})
    not_eagle3: list[str] = []
    for path, ref in entries:
        if ref.external:
            continue
        attr, inner = res.inner_model(ref)
        if inner is None:
            continue  # not a wrapper (or it builds its inner model in a way ``self.x = Cls(...)`` does not show)
        if not res.has(inner, EAGLE3_HOOK):
            not_eagle3.append(ref.name)
            continue
        rep = res.report(ref, members)
        rows.append({
            "file": path, "entry": ref.name, "inner": inner.qualname, "inner_attr": attr,
            "status": {m: rep.members[m].status for m in members},
            "missing": [m for m in members if rep.members[m].status == "missing"],
        })
    return {"sglang_version": src.version, "members": members, "rows": rows, "entry_classes": len(entries),
            "wrappers_of_non_eagle3_models": sorted(set(not_eagle3)), "unresolved_entry_classes": unresolved,
            "seconds": round(time.perf_counter() - t0, 3), "skipped": [asdict(s) for s in src.skipped]}


def bisect_row(version: str, entry: str) -> dict[str, Any]:
    """One release of the bisect: is the entry class there, which contract members it has, is it fixed."""
    src = open_source(version)
    res = Resolver(src)
    ref = res.index.find_class(entry)
    if ref is None:
        return {"version": version, "present": False}
    con = Contract.of(src)
    rep = res.report(ref, con.required)
    missing = [m for m in con.required if rep.members[m].status == "missing"]
    return {
        "version": version, "present": True, "file": res.index.by_name.get(ref.module, ""),
        "status": {m: rep.members[m].status for m in con.required}, "missing": missing, "fixed": not missing,
    }


def bisect(versions: list[str], entry: str = "KimiK25ForConditionalGeneration", workers: int = 0) -> dict[str, Any]:
    """Releases in order: when the entry class appeared, when it gained each member, the first fixed one.

    Releases are independent, so they are audited in parallel processes (one per core unless ``workers``).
    """
    t0 = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    if workers > 1 and len(versions) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(bisect_row, versions, [entry] * len(versions)))
    else:
        rows = [bisect_row(v, entry) for v in versions]
    present = [r for r in rows if r["present"]]
    first_fixed = next((r["version"] for r in present if r["fixed"]), None)
    gained: dict[str, str] = {}
    ever_missing = {m for r in present for m in r["missing"]}
    for r in present:
        for m, st in r["status"].items():
            if m in ever_missing and st != "missing" and m not in gained:
                earlier = [p for p in present if Version(p["version"]) < Version(r["version"])]
                if any(m in p["missing"] for p in earlier):
                    gained[m] = r["version"]
    return {
        "entry_class": entry, "rows": rows, "appeared": present[0]["version"] if present else None,
        "member_gained": gained, "first_fixed": first_fixed, "seconds": round(time.perf_counter() - t0, 2),
        "workers": workers,
    }
