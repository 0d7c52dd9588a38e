"""Check a generated delegation fix against the release it is for, in memory; a failed check refuses it.

It applies with exact context (``package.diffs``), the patched module still compiles, every added method forwards
all its arguments behind a guard and does nothing else (``package.members``), the audit run again on the patched
release finds every wrapper it names conforming, and each wrapper's ``forward`` returns what the inner model
computes (otherwise the aux hidden states a delegated capture hook switches on never reach the drafter).
``series_check`` applies every passing patch together.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

import unidiff

from eagle3lab.fix.fixgen import Fix, inner_owners
from eagle3lab.package import diffs
from eagle3lab.package.members import added_methods, check_member
from eagle3lab.trace import audit
from eagle3lab.trace.modindex import ClassRef, module_name
from eagle3lab.trace.class_ast import function_returns
from eagle3lab.trace.resolve import Resolver
from eagle3lab.trace.sources import SglangSource


def _forward_returns_inner(res: Resolver, cls: ClassRef, attr: str, depth: int = 0) -> tuple[Optional[bool], str]:
    """Does ``cls.forward`` return what ``self.<attr>`` computes? (True / False with the reason / None unknown).

    Delegating the capture hook makes the inner model return the aux hidden states inside its output; they reach
    the drafter only if the wrapper hands that output back unchanged.
    """
    found = res.owner_of(cls, "forward")
    if found is None or depth > 4:
        return None, f"{cls.name}.forward not found in the release"
    owner, func = found
    if not isinstance(func, ast.FunctionDef):  # an assignment, or an async def (no torch module's forward is one)
        return None, f"{cls.name}.forward not found in the release"
    verdicts: list[tuple[Optional[bool], str]] = []
    for ret in function_returns(func):
        verdicts.append(_passes_inner(res, cls, owner, func, ret, attr, depth))
    if not verdicts:
        return None, f"{owner.name}.forward returns nothing"
    bad = [why for ok, why in verdicts if ok is False]
    if bad:
        return False, bad[0]
    if all(ok for ok, _ in verdicts):
        return True, f"{owner.name}.forward returns self.{attr}'s output"
    return None, next(why for ok, why in verdicts if ok is None)


def _is_inner(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
        and node.attr == attr


def _passes_inner(res: Resolver, cls: ClassRef, owner: ClassRef, func: ast.FunctionDef, expr: ast.expr, attr: str,
                  depth: int, seen: frozenset[str] = frozenset()) -> tuple[Optional[bool], str]:
    if isinstance(expr, ast.Constant) and expr.value is None:
        return True, "returns None on a path that does not forward"
    if isinstance(expr, ast.Name):
        values = [n.value for n in ast.walk(func) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)]
        if not values or expr.id in seen:
            return None, f"{owner.name}.forward returns {expr.id}, whose value is not traced"
        results = [_passes_inner(res, cls, owner, func, v, attr, depth, seen | {expr.id}) for v in values]
        bad = [r for r in results if r[0] is False]
        return bad[0] if bad else (results[0] if all(r[0] for r in results) else
                                    next(r for r in results if not r[0]))
    if isinstance(expr, ast.Call):
        target = expr.func
        if _is_inner(target, attr) or (isinstance(target, ast.Attribute) and target.attr == "forward"
                                       and _is_inner(target.value, attr)):
            return True, f"returns self.{attr}(...)"
        if isinstance(target, ast.Attribute) and target.attr == "forward" and isinstance(target.value, ast.Call) \
                and isinstance(target.value.func, ast.Name) and target.value.func.id == "super":
            mro = res.index.mro(cls)
            names = [c.qualname for c in mro]
            parents = mro[names.index(owner.qualname) + 1:] if owner.qualname in names else []
            for parent in parents:
                if parent.node is not None and "forward" in res.defined(parent):
                    return _forward_returns_inner(res, parent, attr, depth + 1)
            return None, "super().forward not found"
        passed = [*expr.args, *(k.value for k in expr.keywords)]
        if any(_is_inner(a, attr) for a in passed):
            return True, f"returns {ast.unparse(target)}(..., self.{attr}, ...), which runs the inner model"
        return False, (f"{owner.name}.forward returns {ast.unparse(target)}(...), not self.{attr}'s output, so "
                       "aux hidden states switched on in the inner model would not reach the drafter; this "
                       "wrapper needs its own capture hook, not a delegation")
    return None, f"{owner.name}.forward returns {ast.unparse(expr)[:60]}, not traced"


def patched_source(src: SglangSource, patch_text: str) -> tuple[Optional[SglangSource], str]:
    """The release with the patch applied in memory (exact context, like ``fix.patching``), or (None, why)."""
    try:
        files = list(unidiff.PatchSet(patch_text))
    except unidiff.UnidiffParseError as err:
        return None, f"not a valid unified diff ({err})"
    texts = dict(src._texts)  # noqa: SLF001 - a copy of the release's bytes, one file replaced
    trees = dict(src._trees)  # noqa: SLF001
    for pfile in files:
        rel = diffs.target_path(pfile).removeprefix("sglang/")
        if not src.exists(rel):
            return None, f"{rel} is not in sglang {src.version}"
        original = src.text(rel)
        if diffs.apply_hunks(original, pfile, reverse=True)[0] is not None and pfile.added:
            return None, f"{rel} already carries this change"
        new, bad = diffs.apply_hunks(original, pfile, reverse=False)
        if new is None:
            return None, f"{rel}: hunk {bad} does not match sglang {src.version}'s source"
        texts[rel] = new.encode("utf-8")
        trees.pop(rel, None)
    out = SglangSource(src.version, f"{src.origin} + patch", texts, list(src.skipped), trees)
    facts = getattr(src, "_eagle3lab_release_facts", None)
    if facts is not None:
        # the runtime is untouched: same contract (trace/facts.py caches them under this undeclared attribute)
        setattr(out, "_eagle3lab_release_facts", facts)  # noqa: B010
    return out, ""


def check(src: SglangSource, fix: Fix, members: list[str]) -> Fix:
    """Apply, compile, member-check and re-audit one generated patch; a failed check refuses it."""
    if not fix.text:
        return fix
    patched, why = patched_source(src, fix.text)
    fix.checks["applies"] = {"ok": patched is not None, "detail": why or f"exact context against sglang {src.version}"}
    if patched is None:
        fix.refused = f"does not apply: {why}"
        return fix
    new_text = patched.text(fix.file)
    try:
        compile(new_text, fix.file, "exec")
        fix.checks["compiles"] = {"ok": True, "detail": "ast.parse + compile of the patched module"}
    except SyntaxError as err:
        fix.checks["compiles"] = {"ok": False, "detail": f"{err.msg} at line {err.lineno}"}
        fix.refused = f"patched module does not compile: {err.msg}"
        return fix
    added = [check_member(cls, fn) for cls, fn in
             added_methods(src.text(fix.file), new_text)]
    bad = [f"{m.cls}.{m.name}" + (f" (does more than forward: {m.extra})" if m.extra else "")
           for m in added if not (m.ok and m.guarded)]
    fix.checks["delegates"] = {"ok": not bad and bool(added),
                               "detail": ", ".join(f"{m.name} -> {m.delegates_to}" for m in added) or "no methods"}
    orig_res = Resolver(src)
    owner = orig_res.index.resolve(module_name(fix.file), fix.owner)
    alone = [e for e in fix.entries
             if (ref := orig_res.index.find_class(e)) is not None and len(inner_owners(orig_res, ref)) == 1]
    still = _still_lacking(patched, alone, fix.members)
    fix.checks["re-audit"] = {"ok": not still, "detail": (
        f"{', '.join(alone)} conform for {', '.join(fix.members)}" if alone and not still
        else f"still lacking: {still}" if still else "every wrapper it names needs other patches too: see series")}
    passes = {}
    for entry in fix.entries:
        ref = orig_res.index.find_class(entry)
        for cls in _forward_classes(orig_res, ref, [owner]) if ref is not None else []:
            passes[cls.name] = _forward_returns_inner(orig_res, cls, fix.attr)
    wrong = {k: why for k, (ok, why) in passes.items() if ok is False}
    fix.checks["output"] = {"ok": not wrong, "detail": "; ".join(f"{k}: {why}" for k, (ok, why) in passes.items())}
    if bad:
        fix.refused = f"added methods do not forward every argument behind a guard: {', '.join(bad)}"
    elif still:
        fix.refused = f"re-audit still finds members missing: {still}"
    elif wrong:
        by_reason: dict[str, list[str]] = {}
        for name, why in wrong.items():
            by_reason.setdefault(why, []).append(name)
        fix.refused = "; ".join(why if why.startswith(f"{classes[0]}.") and len(classes) == 1
                                else f"{', '.join(classes)}: {why}" for why, classes in by_reason.items())
    return fix


def _still_lacking(patched: SglangSource, entries: list[str], members: list[str]) -> dict[str, list[str]]:
    """entry -> members the audit of the patched release still finds unsatisfied."""
    res = Resolver(patched)
    still: dict[str, list[str]] = {}
    for entry in entries:
        ref = res.index.find_class(entry)
        if ref is None:
            still[entry] = ["(class not found)"]
            continue
        missing = [m for m in members if res.status(ref, m).status not in audit.SATISFIED]
        if missing:
            still[entry] = missing
    return still


def series_check(src: SglangSource, fixes: list[Fix], lacking: list[dict]) -> dict[str, Any]:
    """All passing patches applied together (the series): which lacking wrappers conform then, which do not."""
    patched: Optional[SglangSource] = src
    for fix in fixes:
        if fix.ok and patched is not None:
            patched, why = patched_source(patched, fix.text)
            if patched is None:
                return {"ok": False, "detail": f"{fix.name} does not apply on top of the series before it: {why}"}
    assert patched is not None
    still = {}
    for row in lacking:
        missing = _still_lacking(patched, [row["entry"]], row["missing"])
        still.update(missing)
    refused = {e for f in fixes if not f.ok for e in f.entries}
    unexpected = {e: m for e, m in still.items() if e not in refused}
    return {"ok": not unexpected, "conforming": sorted({r["entry"] for r in lacking} - set(still)),
            "still_lacking": still, "detail": (f"{len(lacking) - len(still)} of {len(lacking)} lacking wrappers "
                                               "conform with the whole series applied")}


def _forward_classes(res: Resolver, ref: ClassRef, owners: list[ClassRef]) -> list[ClassRef]:
    """The classes whose forward runs for a wrapper: itself, or each class its proxy can stand for."""
    _, proxy_attr = res.proxy(ref)
    if not proxy_attr:
        return [ref]
    out = []
    for _, _, values in res.attr_values(ref, proxy_attr):
        wanted = {o.qualname for o in owners}
        out += [v for v in values if isinstance(v, ClassRef) and wanted & {c.qualname for c in res.index.mro(v)}]
    return out
