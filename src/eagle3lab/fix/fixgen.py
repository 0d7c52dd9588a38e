"""Generate the Kimi-style delegation fix for every wrapper the audit finds lacking, and check each one.

A generated patch adds, to the class that assigns the wrapper's inner language model (``inner.owner``: the
wrapper itself, or the shared base the helper method lives in), one method per missing contract member:
guarded by ``hasattr`` and forwarding to ``self.<inner attr>`` with the inner method's own parameters, exactly
the shape of ``patches/kimi_k25-eagle3-delegation.patch``. Wrappers that share that class share one patch.

Each patch is then checked against the release it is for: it applies with exact context (``fix.patching``'s
hunk matcher), the patched source still parses and compiles, every added method forwards all its arguments
(``package.members.check_member``), and the audit run again on the patched release finds every wrapper it names
conforming. A patch is refused, with the reason, when delegation cannot work: the inner model lacks the
member too (a real lack), or the wrapper's ``forward`` post-processes the inner model's output instead of
returning it, so the aux hidden states a delegated capture hook switches on would never reach the drafter.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import unidiff

from eagle3lab.package import diffs
from eagle3lab.package.members import added_methods, check_member
from eagle3lab.paths import REPO_ROOT
from eagle3lab.trace import audit
from eagle3lab.trace.modindex import ClassRef, module_name
from eagle3lab.trace.resolve import Resolver, function_returns
from eagle3lab.trace.sources import SglangSource
from eagle3lab.atomic import write_text_atomic

UPSTREAM_DIR = REPO_ROOT / "patches" / "upstream"
SERIES = "series"
GENERATOR = "python -m eagle3lab upstream-fixes (src/eagle3lab/fix/fixgen.py)"


@dataclass
class Fix:
    """One generated patch: which class gains which methods, for which wrappers, and what the checks found."""

    release: str
    file: str  # sglang-relative (srt/models/llava.py)
    owner: str  # class that gains the methods
    attr: str  # the inner attribute they forward to
    members: list[str]
    entries: list[str]  # registered wrappers this fixes
    inner_classes: list[str]
    name: str = ""
    text: str = ""  # the patch (header + unified diff); empty when refused
    refused: str = ""  # why no patch could be made, or why the checks failed
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.text) and not self.refused and all(
            v.get("ok", True) for v in self.checks.values() if isinstance(v, dict))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


# ----------------------------------------------------------------------------------------------------------
# planning: which class gains which methods


def _owners(res: Resolver, ref: ClassRef) -> list[tuple[ClassRef, str, list[ClassRef]]]:
    """(class that assigns the inner model, its attribute, inner classes) for a wrapper, through proxies."""
    inner = res.inner(ref)
    if inner is None:
        return []
    if inner.owner is not None and not inner.via:
        return [(inner.owner, inner.attr, inner.resolved)]
    _, proxy_attr = res.proxy(ref)
    out: dict[str, tuple[ClassRef, str, list[ClassRef]]] = {}
    for _, _, values in res.attr_values(ref, proxy_attr):
        for value in values:
            if isinstance(value, ClassRef):
                for owner, attr, classes in _owners(res, value):
                    known = out.setdefault(owner.qualname, (owner, attr, []))
                    known[2].extend(c for c in classes if c.qualname not in {k.qualname for k in known[2]})
    return list(out.values())


def _forward_returns_inner(res: Resolver, cls: ClassRef, attr: str, depth: int = 0) -> tuple[Optional[bool], str]:
    """Does ``cls.forward`` return what ``self.<attr>`` computes? (True / False with the reason / None unknown).

    Delegating the capture hook makes the inner model return the aux hidden states inside its output; they reach
    the drafter only if the wrapper hands that output back unchanged.
    """
    found = res.owner_of(cls, "forward")
    if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > 4:
        return None, f"{cls.name}.forward not found in the release"
    owner, func = found
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


def plan(src: SglangSource, conf: Optional[dict] = None) -> list[Fix]:
    """One Fix per class that must gain methods, covering every lacking wrapper of the release's audit."""
    res = Resolver(src)
    conf = conf or audit.conformance(src)
    fixes: dict[str, Fix] = {}
    for row in conf["lacking"]:
        ref = res.index.resolve(row["module"], row["entry"])
        owners = _owners(res, ref)
        if not owners:
            key = f"{row['file']}::{row['entry']}"
            fixes[key] = Fix(src.version, row["file"], row["entry"], "", row["missing"], [row["entry"]], [],
                             refused="no class that assigns the inner model was found")
            continue
        for owner, attr, classes in owners:
            key = owner.qualname
            fix = fixes.get(key)
            if fix is None:
                path = res.index.by_name.get(owner.module, "")
                fix = fixes[key] = Fix(src.version, path, owner.name, attr, [], [],
                                       sorted({c.qualname for c in classes}))
            fix.entries = sorted({*fix.entries, row["entry"]})
            fix.members = sorted({*fix.members, *(m for m in row["missing"] if not res.has(owner, m))})
    for fix in fixes.values():
        fix.name = f"{_snake(fix.owner)}-eagle3-delegation"
    return sorted(fixes.values(), key=lambda f: (f.file, f.owner))


def _snake(name: str) -> str:
    """KimiVLForConditionalGeneration -> kimi_vl_for_conditional_generation."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# ----------------------------------------------------------------------------------------------------------
# generating the patch text


def _signature(res: Resolver, classes: list[ClassRef], member: str) -> tuple[str, str]:
    """(parameters without self, call arguments) copied from the inner model's own method (annotations dropped:
    the wrapper's module may not import their names)."""
    defs = []
    for cls in classes:
        found = res.owner_of(cls, member)
        if found and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.append(found[1])
    if not defs:
        return "*args, **kwargs", "*args, **kwargs"
    shapes = {ast.unparse(_strip(d.args)) for d in defs}
    if len(shapes) > 1:
        return "*args, **kwargs", "*args, **kwargs"  # options disagree: forward whatever the caller passes
    args = _strip(defs[0].args)
    args.args = args.args[1:]  # self
    if any(not isinstance(d, ast.Constant) for d in [*args.defaults, *[k for k in args.kw_defaults if k]]):
        return "*args, **kwargs", "*args, **kwargs"
    params = ast.unparse(args)
    call = [a.arg for a in args.posonlyargs + args.args]
    call += [f"*{args.vararg.arg}"] if args.vararg else []
    call += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    call += [f"**{args.kwarg.arg}"] if args.kwarg else []
    return params, ", ".join(call)


def _strip(args: ast.arguments) -> ast.arguments:
    copy = ast.parse(f"def f({ast.unparse(args)}): pass").body[0].args  # type: ignore[attr-defined]
    for a in [*copy.posonlyargs, *copy.args, *copy.kwonlyargs, copy.vararg, copy.kwarg]:
        if a is not None:
            a.annotation = None
    return copy


def _method(member: str, attr: str, params: str, call: str, indent: str) -> str:
    sig = f"self, {params}" if params else "self"
    body = f'''
def {member}({sig}):
    """Forward to the inner language model (EAGLE-3 calls this on the target model object)."""
    if not hasattr(self.{attr}, "{member}"):
        raise AttributeError(
            f"{{type(self.{attr}).__name__}} (the language model inside "
            f"{{type(self).__name__}}) has no {member}"
        )
    return self.{attr}.{member}({call})
'''
    return textwrap.indent(body.strip("\n"), indent) + "\n"


def _header(fix: Fix, sites: dict[str, list[str]]) -> str:
    def folded(key: str, value: str) -> str:
        lines = textwrap.wrap(value, 100 - len(key) - 2)
        return f"{key}: " + "\n  ".join(lines)

    calls = "; ".join(f"{m}: {', '.join(sites.get(m, [])[:4]) or 'see notebook 02'}" for m in fix.members)
    return "\n".join([
        f"Patch-Name: {fix.name}",
        f"Applies-To: sglang=={fix.release}",
        folded("What", f"{fix.owner} gains {', '.join(fix.members)}, each forwarding to self.{fix.attr} "
                       f"({', '.join(c.rsplit('.', 1)[-1] for c in fix.inner_classes)}) and raising a clear "
                       "AttributeError when the inner model lacks it."),
        folded("Why", f"EAGLE-3 start-up calls these on the target model object ({calls}). "
                      f"{', '.join(fix.entries)} {'lacks' if len(fix.entries) == 1 else 'lack'} them and "
                      f"nn.Module.__getattr__ does not look inside self.{fix.attr}, so an EAGLE-3 launch dies "
                      "with AttributeError."),
        folded("Fixes-Entry-Classes", ", ".join(fix.entries)),
        folded("Generated-By", f"{GENERATOR}, traced from sglang {fix.release}'s source"),
        f"Apply-With: python -m eagle3lab patch apply patches/upstream/{fix.release}/{fix.name}.patch",
    ]) + "\n\n"


def generate(src: SglangSource, fix: Fix, sites: Optional[dict[str, list[str]]] = None) -> Fix:
    """Fill ``fix.text`` (or ``fix.refused``) for the release ``src``."""
    if fix.refused:
        return fix
    res = Resolver(src)
    owner = res.index.resolve(res.index.module_of_path(fix.file).name, fix.owner)  # type: ignore[union-attr]
    classes = [res.index.resolve(c.rsplit(".", 1)[0], c.rsplit(".", 1)[1]) for c in fix.inner_classes]
    real = [m for m in fix.members if not any(res.has(c, m) for c in classes)]
    if real:
        fix.refused = (f"real lack: no inner option ({', '.join(c.name for c in classes)}) has {', '.join(real)}; "
                       "delegating cannot supply it")
        return fix
    node = owner.node
    assert node is not None
    text = src.text(fix.file)
    lines = text.splitlines(keepends=True)
    indent = " " * (node.body[0].col_offset if node.body else node.col_offset + 4)
    methods = []
    for member in fix.members:
        params, call = _signature(res, classes, member)
        methods.append(_method(member, fix.attr, params, call, indent))
    end = node.end_lineno or len(lines)
    addition = "\n" + "\n".join(methods)
    patched = "".join(lines[:end]) + addition + "".join(lines[end:])
    diff = difflib.unified_diff(text.splitlines(keepends=True), patched.splitlines(keepends=True),
                                fromfile=f"a/sglang/{fix.file}", tofile=f"b/sglang/{fix.file}", n=3)
    fix.text = _header(fix, sites or {}) + "".join(diff)
    return fix


# ----------------------------------------------------------------------------------------------------------
# checking a patch against its release


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
        setattr(out, "_eagle3lab_release_facts", facts)  # the runtime is untouched: same contract
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
    bad = [f"{m.cls}.{m.name}" for m in added if not (m.ok and m.guarded)]
    fix.checks["delegates"] = {"ok": not bad and bool(added),
                               "detail": ", ".join(f"{m.name} -> {m.delegates_to}" for m in added) or "no methods"}
    orig_res = Resolver(src)
    owner = orig_res.index.resolve(module_name(fix.file), fix.owner)
    alone = [e for e in fix.entries if len(_owners(orig_res, orig_res.index.find_class(e))) == 1]
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
        for cls, why in wrong.items():
            by_reason.setdefault(why, []).append(cls)
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


def contract_sites(src: SglangSource) -> dict[str, list[str]]:
    """member -> runtime call sites (function names) on the target, for the patch header."""
    out: dict[str, list[str]] = {}
    for site in audit.Contract.of(src).sites:
        if not site.guarded and site.function not in out.get(site.member, []):
            out.setdefault(site.member, []).append(site.function)
    return out


def fixes_for(src: SglangSource, conf: Optional[dict] = None) -> list[Fix]:
    """Plan, generate and check a fix for every lacking wrapper of ``src``."""
    conf = conf or audit.conformance(src)
    sites = contract_sites(src)
    out = []
    for fix in plan(src, conf):
        generate(src, fix, sites)
        check(src, fix, conf["members"])
        out.append(fix)
    return out


def fixes_with_series(src: SglangSource, conf: Optional[dict] = None) -> tuple[list[Fix], dict[str, Any]]:
    """``fixes_for`` plus the re-audit of the whole series (wrappers that need several patches, e.g. proxies)."""
    conf = conf or audit.conformance(src)
    fixes = fixes_for(src, conf)
    return fixes, series_check(src, fixes, conf["lacking"])


# ----------------------------------------------------------------------------------------------------------
# the committed series


def release_dir(release: str) -> Path:
    return UPSTREAM_DIR / release


def committed_state(fix: Fix) -> str:
    """How the committed copy compares: identical, differs (regenerate), or absent."""
    path = release_dir(fix.release) / f"{fix.name}.patch"
    if not fix.ok:
        return "refused" if not path.exists() else "committed but now refused"
    if not path.is_file():
        return "not committed"
    return "identical" if path.read_text(encoding="utf-8") == fix.text else "differs: regenerate"


def write_series(release: str, fixes: list[Fix]) -> list[Path]:
    """Write every passing patch and the ``series`` file (apply order) under ``patches/upstream/<release>/``."""

    folder = release_dir(release)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    good = [f for f in fixes if f.ok]
    for fix in good:
        written.append(write_text_atomic(folder / f"{fix.name}.patch", fix.text))
    for stale in folder.glob("*.patch"):
        if stale.stem not in {f.name for f in good}:
            stale.unlink()
    series = "".join(f"{f.name}.patch\n" for f in good)
    refused = "".join(f"# refused {f.owner} ({', '.join(f.entries)}): {f.refused}\n" for f in fixes if not f.ok)
    written.append(write_text_atomic(folder / SERIES, f"# apply in order (quilt style); generated by {GENERATOR}\n"
                                     + series + refused))
    return written


def read_series(release: str) -> list[Path]:
    """The committed patches of a release, in series order."""
    path = release_dir(release) / SERIES
    if not path.is_file():
        return []
    names = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    return [release_dir(release) / n for n in names]


# ----------------------------------------------------------------------------------------------------------
# which patch fixes a class (preflight)


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


def refusals(release: str) -> dict[str, str]:
    """entry class -> why its generated fix was refused, from the ``# refused`` lines of the series file."""
    path = release_dir(release) / SERIES
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"# refused (\S+) \(([^)]*)\): (.*)", line)
        if match:
            for entry in match.group(2).split(", "):
                out[entry] = match.group(3)
    return out
