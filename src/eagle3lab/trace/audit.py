"""Does a model class satisfy the EAGLE-3 contract the runtime uses? Per class, per release, per wrapper.

For each contract member an entry class either provides it, inherits it, delegates it to its inner language
model, reaches it through a custom ``__getattr__`` proxy, or lacks it; a lacked member the inner model has is a
*delegation gap* (fixable by delegating), otherwise a real lack. ``nn.Module.__getattr__`` is what turns a lack
into the ``AttributeError`` of the incident. Class resolution (inner models, proxies, bases) lives in ``resolve``.
"""

from __future__ import annotations

import ast
import os
import textwrap
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Optional

from packaging.version import Version

from eagle3lab.package.wheels import fetch_wheels
from eagle3lab.trace import contract as contract_mod, release_record
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE
from eagle3lab.trace.modindex import ClassRef, ModuleIndex
# re-exported: the audit's public names
from eagle3lab.trace.class_ast import delegation_target, torch_module_members  # noqa: F401
from eagle3lab.trace.resolution import SATISFIED, ClassReport, MemberStatus  # noqa: F401
from eagle3lab.trace.resolve import Resolver
from eagle3lab.trace.sources import SglangSource, open_source
from eagle3lab.trace.facts import release_facts, startup
from eagle3lab.trace.startup import StartupProfile

EAGLE3_HOOK = SET_LAYERS_TO_CAPTURE
KIMI_ENTRY = "KimiK25ForConditionalGeneration"  # the incident's wrapper: notebook 02's default entry class


# ----------------------------------------------------------------------------------------------------------
# contract of a release


@dataclass
class Contract:
    """The sites an EAGLE-3 server runs on the target model object, and which members they need."""

    sites: list[contract_mod.Site]
    required: list[str]  # unguarded somewhere
    optional: list[str]  # only ever guarded
    every_module_has: list[str]  # used by the runtime, but every torch.nn.Module has them: not contract members

    @classmethod
    def of(cls, src: SglangSource, roles: tuple[str, ...] = ("target", "either")) -> "Contract":
        """The target's contract by default; ``roles=("draft", "either")`` gives the drafter's."""
        return cls.from_sites(release_facts(src).sites, roles)

    @classmethod
    def from_sites(cls, eagle_sites: list[contract_mod.Site], roles: tuple[str, ...] = ("target", "either")
                   ) -> "Contract":
        common = torch_module_members()
        sites = [s for s in eagle_sites if s.role in roles]
        members = {s.member for s in sites}
        required = sorted({s.member for s in sites if not s.guarded and contract_mod.RunCondition.ERROR_PATH not in s.runs_when}
                          - common)
        optional = sorted(members - set(required) - common)
        return cls(sites, required, optional, sorted(members & common))


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


def _gaps(rep: ClassReport, missing: list[str]) -> list[str]:
    return [m for m in missing if rep.members[m].gap == "delegation gap"]


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


def verdict(src: SglangSource, entry: str = KIMI_ENTRY,
            profiles: Optional[tuple[StartupProfile, ...]] = None) -> dict[str, Any]:
    """The members the runtime needs unguarded that ``entry`` lacks, where each profile raises first, and
    whether delegating one method would have been enough. ``profiles`` (default: the generic cpu and gpu start-up)
    may carry a launch's resolved server args and device capability, which decide branches such as FlashInfer
    autotune (see ``StartupProfile``)."""
    res = Resolver(src)
    return verdict_for(src, res, res.find(entry), profiles)


def verdict_for(src: SglangSource, res: Resolver, ref: ClassRef,
                profiles: Optional[tuple[StartupProfile, ...]] = None) -> dict[str, Any]:
    """``verdict`` for a class already found (the preflight reaches it through the registry)."""
    con = Contract.of(src)
    entry = ref.name
    rep = res.report(ref, con.required + con.optional)
    missing = [m for m in con.required if rep.members[m].status == "missing"]
    gaps = _gaps(rep, missing)
    first: dict[str, dict] = {}
    after_one: dict[str, dict] = {}
    for profile in profiles or (StartupProfile.cpu(), StartupProfile.gpu()):
        order = startup(src, profile)
        first[profile.name] = _first_raise(order, con.sites, set(missing))
        hit = first[profile.name].get("member")
        after_one[profile.name] = _first_raise(order, con.sites, set(missing) - {hit}) if hit else {}
    return {
        "sglang_version": src.version,
        "entry_class": entry,
        "class_report": rep.to_dict(),
        "required_members": con.required,
        "optional_members": con.optional,
        "every_module_has": con.every_module_has,
        "missing_members": missing,
        "unresolved_members": [m for m in con.required if rep.members[m].status == "unresolved"],
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
        inner = res.inner(ref)
        options = inner.resolved if inner else []
        target = next((c for c in options if res.owner_of(c, member)), options[0] if options else None)
        if found is None:
            if target is None:
                return "", None
            ref = target
            continue
        owner, node = found
        via = delegation_target(node, member)
        if via and target is not None and inner is not None and via == inner.attr.split(".")[0]:
            ref = target
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


def layer_table(src: SglangSource, entry: str, depth: int, aux_ids: Optional[list[int]], profile: StartupProfile
                ) -> dict:
    """For each ``set_eagle3_layers_to_capture`` site in start-up order: arguments and captured layers."""
    res = Resolver(src)
    con = Contract.of(src)
    owner, func = _hook_function(res, res.find(entry))
    order = startup(src, profile)
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


WRAPPER = "wrapper of an EAGLE-3-capable model"
OTHER_WRAPPER = "wrapper of a model without EAGLE-3"
PLAIN = "not a wrapper"
DRAFT = "draft model (MTP/NextN head)"
UNRESOLVED = "unresolved entry"
KINDS = (WRAPPER, OTHER_WRAPPER, PLAIN, DRAFT, UNRESOLVED)
VERDICTS = ("conforming", "lacking", "unresolved")
# The short key of each kind, as the counts (and the sidecar's ``AuditCounts``) carry it; KINDS are the labels.
KIND_KEYS = {WRAPPER: "wrapper", OTHER_WRAPPER: "other_wrapper", PLAIN: "plain", DRAFT: "draft",
             UNRESOLVED: "unresolved"}


def verdict_key(verdict: str) -> str:
    """The counts' key of a wrapper verdict: ``wrappers_lacking``."""
    return f"wrappers_{verdict}"


def classify(res: Resolver, path: str, ref: ClassRef, members: list[str], draft_only: frozenset[str]) -> dict:
    """One entry class: what it is (a wrapper of an EAGLE-3-capable model or not) and, for wrappers, whether it
    satisfies the contract. Every entry gets a row; what cannot be decided says ``unresolved`` and why."""
    row: dict[str, Any] = {"file": path, "entry": ref.name, "module": ref.module, "kind": "", "verdict": "",
                           "reason": "", "inner": "", "inner_attr": "", "inner_options": [], "via": [],
                           "status": {}, "missing": [], "unresolved_members": {}, "gaps": {}, "resolved_with": []}
    if ref.external:
        row.update(kind=UNRESOLVED, reason=f"EntryClass names {ref.qualname}, which is not defined in the release")
        return row
    row["resolved_with"] = res.external_sources(ref)
    if ref.name in draft_only:
        row.update(kind=DRAFT, reason="sglang's ModelConfig rewrites a draft model's architecture to this name")
        return row
    inner = res.inner(ref)
    if inner is None:
        row.update(kind=PLAIN, reason="holds no inner language model")
        return row
    capable = {c.qualname: res.capable(c) for c in inner.resolved}
    row.update(inner=next(iter(capable), ""), inner_attr=inner.attr, via=inner.via,
               inner_options=[{**o.to_dict(), "eagle3": capable.get(o.cls.qualname) if o.cls else None}
                              for o in inner.options])
    if not any(capable.values()):
        if inner.unresolved:
            reasons = sorted({o.reason for o in inner.unresolved})
            row.update(kind=UNRESOLVED, reason=f"inner model self.{inner.attr} not resolved: {'; '.join(reasons)}")
        else:
            row.update(kind=OTHER_WRAPPER, reason="no inner option defines " + EAGLE3_HOOK)
        return row
    row["kind"] = WRAPPER
    rep = res.report(ref, members)
    row["status"] = {m: rep.members[m].status for m in members}
    row["missing"] = [m for m in members if rep.members[m].status == "missing"]
    row["unresolved_members"] = {m: rep.members[m].via for m in members if rep.members[m].status == "unresolved"}
    row["gaps"] = {m: rep.members[m].gap for m in row["missing"]}
    if row["missing"]:
        row["verdict"] = "lacking"
    elif row["unresolved_members"]:
        row["verdict"] = "unresolved"
        row["reason"] = "; ".join(f"{m}: {why}" for m, why in row["unresolved_members"].items())
    else:
        row["verdict"] = "conforming"
    return row


def conformance(src: SglangSource, members: Optional[list[str]] = None) -> dict[str, Any]:
    """Every registered entry class, classified; wrappers of EAGLE-3-capable models checked per contract member.

    ``counts`` add up: every entry is exactly one kind, every wrapper exactly one verdict. ``rows`` keeps the
    wrappers (the matrix), ``lacking`` and ``unresolved`` the ones that need attention, with reasons.
    """
    t0 = time.perf_counter()
    res = Resolver(src)
    con = Contract.of(src)
    members = members or con.required
    draft_only = frozenset(release_facts(src).draft_only)
    entries = [classify(res, path, ref, members, draft_only) for path, ref in res.index.entry_classes()]
    kinds = Counter(e["kind"] for e in entries)
    wrappers = [e for e in entries if e["kind"] == WRAPPER]
    verdicts = Counter(e["verdict"] for e in wrappers)
    counts = {"entry_classes": len(entries), **{KIND_KEYS[k]: kinds.get(k, 0) for k in KINDS},
              **{verdict_key(v): verdicts.get(v, 0) for v in VERDICTS}}
    if sum(kinds.values()) != len(entries) or sum(verdicts.values()) != len(wrappers):
        raise AssertionError("an entry class fell out of the counts")  # a programming error
    unresolved = [{"entry": e["entry"], "file": e["file"], "kind": e["kind"],
                   "reason": e["reason"]} for e in entries if e["kind"] == UNRESOLVED or e["verdict"] == "unresolved"]
    return {"sglang_version": src.version, "provenance": f"traced from sglang {src.version}'s source ({src.origin_label})",
            "members": members, "every_module_has": con.every_module_has, "counts": counts,
            "rows": wrappers, "lacking": [e for e in wrappers if e["verdict"] == "lacking"],
            "unresolved": unresolved, "entries": entries,
            "wrappers_of_non_eagle3_models": sorted({e["entry"] for e in entries if e["kind"] == OTHER_WRAPPER}),
            "entry_classes": len(entries),
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


def bisect(versions: list[str], entry: str = KIMI_ENTRY, workers: int = 0,
           use_record: bool = True) -> dict[str, Any]:
    """Releases in order: when the entry class appeared, when it gained each member, the first fixed one.

    Rows the shipped release record holds for this trace code are taken from it (``trace.release_record``;
    ``use_record`` False traces every release); the rest are fetched together and audited in parallel processes
    (one per core unless ``workers``), since releases are independent.
    """
    t0 = time.perf_counter()
    known = release_record.recorded(release_record.BISECT_ROW, versions, entry) if use_record else {}
    missing = [v for v in versions if v not in known]
    workers = workers or os.cpu_count() or 1
    if len(missing) > 1:
        fetch_wheels(missing)
    if workers > 1 and len(missing) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            traced = dict(zip(missing, pool.map(bisect_row, missing, [entry] * len(missing))))
    else:
        traced = {v: bisect_row(v, entry) for v in missing}
    rows = [known[v] if v in known else traced[v] for v in versions]
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
        "workers": workers, "from_record": [v for v in versions if v in known], "traced_now": missing,
    }
