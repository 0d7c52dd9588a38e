"""Generate the Kimi-style delegation fix for every wrapper the audit finds lacking (``fixcheck`` checks each one,
``fixseries`` makes and writes the series).

A generated patch adds, to the class that assigns the wrapper's inner language model (``inner.owner``: the
wrapper itself, or the shared base the helper method lives in), one method per missing contract member:
guarded by ``hasattr`` and forwarding to ``self.<inner attr>`` with the inner method's own parameters, exactly
the shape of ``patches/kimi_k25-eagle3-delegation.patch``. Wrappers that share that class share one patch.

A fix is refused here, with the reason, when no class assigns the inner model; ``fixcheck`` refuses the ones
whose delegation cannot work (the inner model lacks the member too, or the wrapper's ``forward`` does not return
the inner model's output).
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from eagle3lab.trace import audit
from eagle3lab.trace.modindex import ClassRef
from eagle3lab.trace.resolve import Resolver
from eagle3lab.trace.sources import SglangSource

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


def inner_owners(res: Resolver, ref: ClassRef) -> list[tuple[ClassRef, str, list[ClassRef]]]:
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
                for owner, attr, classes in inner_owners(res, value):
                    known = out.setdefault(owner.qualname, (owner, attr, []))
                    known[2].extend(c for c in classes if c.qualname not in {k.qualname for k in known[2]})
    return list(out.values())


def plan(src: SglangSource, conf: Optional[dict] = None) -> list[Fix]:
    """One Fix per class that must gain methods, covering every lacking wrapper of the release's audit."""
    res = Resolver(src)
    conf = conf or audit.conformance(src)
    fixes: dict[str, Fix] = {}
    for row in conf["lacking"]:
        ref = res.index.resolve(row["module"], row["entry"])
        owners = inner_owners(res, ref)
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


def contract_sites(src: SglangSource) -> dict[str, list[str]]:
    """member -> runtime call sites (function names) on the target, for the patch header."""
    out: dict[str, list[str]] = {}
    for site in audit.Contract.of(src).sites:
        if not site.guarded and site.function not in out.get(site.member, []):
            out.setdefault(site.member, []).append(site.function)
    return out
