"""Will an EAGLE-3 launch of this model crash on this sglang release? Answered from sglang's source in seconds.

``python -m eagle3lab preflight-model --config CONFIG_JSON | --arch ARCHITECTURE [--sglang VERSION] [--json]``

The config's ``architectures`` go through sglang's own registry rules (``trace.registry``) to the entry class
sglang would instantiate; the release's EAGLE-3 contract (cached per release, ``trace.facts``) is checked against
that class (``trace.resolve``); the first start-up call site that would raise is named for the cpu and gpu
start-up paths; and the patches under ``patches/`` are tried on the release's source in memory to name one that
makes the class conform. Offline once the release's wheel is cached.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import unidiff

from eagle3lab.errors import EntryClassError, SourceError
from eagle3lab.fix import capture_rule_fix
from eagle3lab.fix.fixcheck import patched_source
from eagle3lab.fix.fixseries import read_series, refusals
from eagle3lab.package import diffs
from eagle3lab.paths import REPO_ROOT
from eagle3lab.runtime import modelinfo
from eagle3lab.trace import audit, capture_order, registry, sources
from eagle3lab.trace.facts import release_facts
from eagle3lab.trace.modindex import ClassRef
from eagle3lab.trace.resolve import Resolver
from eagle3lab.trace.sources import SglangSource

KEYS = ("architecture", "entry_class", "sglang_version", "will_crash", "missing", "first_raise", "patch")


def patch_that_fixes(src: SglangSource, ref: ClassRef, missing: list[str]) -> dict[str, Any]:
    """The first patch under ``patches/`` for this release that makes ``ref`` conform, tried in memory."""
    res = Resolver(src)
    files = {res.index.by_name.get(c.module) for c in res.index.mro(ref) if c.node is not None}
    inner = res.inner(ref)
    if inner is not None and not any(res.has(c, m) for c in inner.resolved for m in missing):
        return {"path": None, "reason": f"real lack: the inner model ({', '.join(c.name for c in inner.resolved)}) "
                                        f"has none of {', '.join(missing)} either; no delegation can fix it"}
    if inner is None:
        return {"path": None, "reason": f"{ref.name} holds no inner language model: it needs its own EAGLE-3 "
                                        "capture support, not a delegation"}
    wanted = f"sglang=={src.version}"
    # the project's own patches first (notebook 03 verifies them end to end), then the generated series
    candidates = sorted((REPO_ROOT / "patches").glob("*.patch")) + read_series(src.version)
    for path in candidates:
        text = path.read_text(encoding="utf-8")
        if diffs.read_header(text, path.stem).applies_to != wanted:
            continue
        targets = {diffs.target_path(f).removeprefix("sglang/") for f in unidiff.PatchSet(text)}
        if not targets & files:
            continue
        patched, _ = patched_source(src, text)
        if patched is None:
            continue
        pres = Resolver(patched)
        pref = pres.index.resolve(ref.module, ref.name)
        if pref.node is not None and all(pres.has(pref, m) for m in missing):
            return {"path": str(path.relative_to(REPO_ROOT)), "members": missing,
                    "how": f"applies cleanly to sglang {src.version}; re-audit: {ref.name} conforms"}
    refused = refusals(src.version).get(ref.name)
    if refused:
        return {"path": None, "reason": f"the generated delegation fix was refused: {refused}"}
    return {"path": None, "reason": f"no patch under patches/ for sglang {src.version} makes {ref.name} conform; "
                                    f"generate one with python -m eagle3lab upstream-fixes --sglang {src.version}"}


def read_architectures(config: str | Path) -> list[str]:
    """``architectures`` of a ``config.json`` (or of a model folder holding one)."""
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EntryClassError(f"{path} not found; pass a model's config.json or its folder", path=Path(path),
                              problem="missing") from None
    except (OSError, ValueError) as err:
        raise EntryClassError(f"{path} is not readable JSON ({err}); pass a model's config.json", path=Path(path),
                              problem="unreadable") from None
    archs = data.get("architectures") if isinstance(data, dict) else None
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs) or not archs:
        raise EntryClassError(f"{path} has no 'architectures' list; pass --arch ARCHITECTURE instead", path=Path(path),
                              problem="no_architectures")
    return archs


def open_release(version: Optional[str]) -> sources.SglangSource:
    """A release's wheel (cached after the first download); without a version the installed sglang, or its
    release wheel when the installed copy has been patched."""
    if version:
        return sources.open_source(version)
    src = sources.open_source(sources.INSTALLED)
    return sources.open_source(src.version) if src.modified else src


def _site(row: dict) -> Optional[dict]:
    if not row:
        return None
    out = {k: row.get(k) for k in ("where", "member", "function", "phase", "certain")}
    checked = any("raises otherwise" in c for c in row.get("conditions", []))
    out["error"] = ("the runtime's own hasattr check raises" if checked
                    else "AttributeError from nn.Module.__getattr__")
    if row.get("otherwise"):
        out["otherwise"] = {k: row["otherwise"].get(k) for k in ("where", "member", "function")}
    return out


def capture_order_answer(src: sources.SglangSource, depth: Optional[int], ids: Optional[list[int]],
                         cuda_graphs: bool = True) -> dict[str, Any]:
    """sglang's capture-order defect for this release and, given the target depth and the drafter's ids, the
    layers graph replays and eager forwards capture (``trace.capture_order``), with the fix when they differ."""
    order = capture_order.trace_capture_order(src)
    out: dict[str, Any] = {"defect": order.defect, "cuda_graphs": cuda_graphs,
                           "graph_resets": [c.where for c in order.graph_resets], "fix_pr": capture_order.FIX_PR,
                           "layers": None, "warn": False, "fix": None}
    if depth is not None and ids is not None:
        out["layers"] = order.layers(depth, ids)
        # sglang PR #25454's convention: a first id of 1 means +1, any other first id the ids as given
        expected = [i + 1 for i in ids] if list(ids)[:1] == [1] else list(ids)
        paths = [out["layers"]["eager_layers"]] + ([out["layers"]["cuda_graph_layers"]] if cuda_graphs else [])
        out["convention"] = {"pr": capture_rule_fix.CONVENTION_PR, "expected_layers": expected,
                             "agrees": all(p == expected for p in paths)}
        out["warn"] = bool(cuda_graphs and out["layers"]["mismatch"]) or not out["convention"]["agrees"]
    elif order.defect and cuda_graphs:
        out["warn"] = True  # the drafter's ids are not known: hit unless the hook maps them to the defaults
    if out["warn"]:
        out["fix"] = capture_rule_fix.right_fix(ids, release=src.version)
    return out


def drafter_inputs(config: Optional[str], draft_config: Optional[str]) -> tuple[Optional[int], Optional[list[int]]]:
    """(target depth, drafter ids) from the target's and the drafter's config.json (each optional)."""
    def folder(path: str) -> Path:
        return Path(path).parent if Path(path).is_file() else Path(path)

    depth = modelinfo.num_layers(modelinfo.read_config(folder(config))) if config else None
    ids = modelinfo.drafter_aux_layer_ids(modelinfo.read_config(folder(draft_config))) if draft_config else None
    return depth, ids


def preflight(architectures: list[str], version: Optional[str] = None, with_patch: bool = True,
              src: Optional[sources.SglangSource] = None, depth: Optional[int] = None,
              drafter_ids: Optional[list[int]] = None, cuda_graphs: bool = True) -> dict[str, Any]:
    """The answer as plain data (the JSON of ``--json``); ``src`` overrides the release (tests)."""
    started = time.perf_counter()
    src = src or open_release(version)
    facts = release_facts(src)
    res = Resolver(src)
    chosen, note = registry.choose(architectures, facts.registry, src.version)
    reg = facts.registry[chosen]
    ref = res.index.resolve(reg["module"], reg["class"])
    if ref.node is None:
        raise SourceError(f"{reg['class']} is registered by {reg['file']} but not readable in sglang {src.version}",
                          version=src.version, file=reg['file'], problem="unreadable_class")
    row = audit.classify(res, reg["file"], ref, audit.Contract.of(src).required, frozenset(facts.draft_only))
    verdict = audit.verdict_for(src, res, ref)
    missing = verdict["missing_members"]
    unresolved = {m: verdict["class_report"]["members"][m]["via"] for m in verdict["unresolved_members"]}
    will_crash: Optional[bool] = True if missing else (None if unresolved else False)
    answer: dict[str, Any] = {
        "architecture": chosen,
        "entry_class": ref.name,
        "sglang_version": src.version,
        "will_crash": will_crash,
        "missing": missing,
        "first_raise": {name: _site(site) for name, site in verdict["first_raise"].items()},
        "patch": None,
        "requested_architectures": list(architectures),
        "entry_file": reg["file"],
        "kind": row["kind"],
        "inner_model": row["inner"],
        "delegation_gaps": verdict["delegation_gaps"],
        "real_lacks": verdict["real_lacks"],
        "unresolved": unresolved,
        "note": note,
        "provenance": f"traced from sglang {src.version}'s source ({src.origin_label}); "
                      f"contract {'cached' if facts.cached else 'traced now'}",
    }
    if with_patch and missing:
        answer["patch"] = patch_that_fixes(src, ref, missing)
    answer["capture_order"] = capture_order_answer(src, depth, drafter_ids, cuda_graphs)
    answer["seconds"] = round(time.perf_counter() - started, 2)
    return answer


def text(answer: dict[str, Any]) -> str:
    """The answer in a few plain lines."""
    lines = [f"{', '.join(answer['requested_architectures'])} -> {answer['entry_class']} "
             f"({answer['entry_file']}, sglang {answer['sglang_version']}; {answer['kind']})"]
    if answer["note"]:
        lines.append(f"note: {answer['note']}")
    if answer["will_crash"]:
        lines.append(f"EAGLE-3 launch WILL CRASH: the entry class lacks {', '.join(answer['missing'])}")
        for profile, site in answer["first_raise"].items():
            if site:
                certain = "" if site.get("certain", True) else " (behind a branch the profile cannot decide)"
                lines.append(f"  {profile} start-up raises first at {site['where']} {site['member']} "
                             f"in {site['function']}{certain}: {site['error']}")
            else:
                lines.append(f"  {profile} start-up reaches no missing member; it raises when first served")
        patch = answer["patch"]
        if patch and patch.get("path"):
            lines.append(f"fix: {patch['path']} ({patch['how']})")
        elif patch:
            lines.append(f"fix: none available ({patch.get('reason', '')})")
    elif answer["will_crash"] is None:
        lines.append("EAGLE-3 launch: UNDECIDED, members not resolvable: "
                     + "; ".join(f"{m}: {why}" for m, why in answer["unresolved"].items()))
    else:
        lines.append("EAGLE-3 launch will not crash on a missing member: the entry class has every member "
                     "the runtime needs")
    order = answer.get("capture_order") or {}
    if order.get("warn"):
        layers = order.get("layers")
        what = (f"CUDA-graph replays capture {layers['cuda_graph_layers']}, eager forwards {layers['eager_layers']} "
                f"for drafter ids {layers['drafter_ids']} on {layers['depth']} layers" if layers
                else "the drafter's ids are unknown (pass --draft-config): hit unless sglang's hook maps them to "
                "the defaults (on 0.5.9, ids equal to the default are hit: eager forwards add 1)")
        convention = order.get("convention") or {}
        if order.get("defect") and order.get("cuda_graphs"):
            lines.append(f"WARNING capture order: sglang {answer['sglang_version']} captures CUDA graphs before the "
                         f"drafter's ids are set ({', '.join(order['graph_resets'])}); {what}")
        if convention and not convention["agrees"]:
            lines.append(f"WARNING layer convention: under {convention['pr']} these ids mean layers "
                         f"{convention['expected_layers']} on both paths; {what}")
        lines.append(f"  fix: {order['fix']}")
    elif order:
        lines.append(f"capture order: {'no mismatch' if not order.get('defect') else 'mismatch not hit'} "
                     f"(sglang {answer['sglang_version']})")
    lines.append(f"({answer['provenance']}; {answer['seconds']} s)")
    return "\n".join(lines)
