"""Which members sglang's runtime uses on the target and draft model objects, read from sglang's own AST.

The engineer's grep (``eagle3|aux_hidden|capture_aux``) cannot tell a call on the model object from a flag on
the runner, a guarded call from an unguarded one, or which of two model objects is meant. This module walks
every runtime file (model runners, graph runners, speculative workers, TP worker, scheduler), follows the names
the runtime gives the model objects (``self.model`` in a runner, ``model_runner.model``,
``self.target_worker.model_runner.model``, ``self.draft_model_runner.model``, local and ``self.x`` aliases) and
records each access with its guard, arguments and the conditions it runs under.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Literal, Optional, TypeGuard

from eagle3lab.trace.sources import SglangSource

ENGINEER_PATTERN = r"eagle3|aux_hidden|capture_aux"
Role = Literal["target", "draft", "either"]


class RunCondition(str, Enum):
    """When a traced site runs: structured facts that other modules test by member, never by retyping a string.

    The values are the labels people read in tables and the JSON sidecar; code compares members.
    """

    ERROR_PATH = "error path"
    NOT_EAGLE3 = "not EAGLE-3"
    EAGLE3_ONLY = "EAGLE-3 only"
    EAGLE_FAMILY = "EAGLE family"
    CUDA_GRAPHS_ON = "graphs on"
    TARGET_RUNNER_ONLY = "target runner only"


class CaptureMode(str, Enum):
    """How a ``set_eagle3_layers_to_capture`` call site's forwards run: eagerly or replayed from a CUDA graph."""

    EAGER = "eager"
    CUDA_GRAPH = "CUDA-graph capture"


ERROR_PATH = RunCondition.ERROR_PATH.value  # also the prefix of the condition label of an ``except`` body

_RUNTIME_NAME = re.compile(r"(model_runner|graph_runner|tp_worker|scheduler)", re.I)
_GREP_NAME = re.compile(r"(model_runner|graph_runner|worker)", re.I)
_RUNNER_EXPR = re.compile(r"(^|[._])(\w*runner)$")
_RUNNER_CLASS = re.compile(r"ModelRunner", re.I)


@dataclass(frozen=True)
class GrepHit:
    """One line the engineer's grep finds."""

    file: str
    line: int
    text: str


@dataclass
class Site:
    """One access by the runtime to a member of a model object."""

    file: str
    line: int
    function: str
    receiver: str
    member: str
    role: Role
    access: Literal["call", "read", "write", "check"]
    guarded: bool
    guard: str
    args: list[str]
    conditions: list[str]
    runs_when: list[RunCondition] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def eagle3_path(self) -> bool:
        """Runs when ``--speculative-algorithm EAGLE3`` is on (EAGLE-3 only, or any EAGLE family path)."""
        tags = set(self.runs_when)
        return bool(tags & {RunCondition.EAGLE3_ONLY, RunCondition.EAGLE_FAMILY}) and RunCondition.NOT_EAGLE3 not in tags

    @property
    def capture_mode(self) -> CaptureMode:
        return CaptureMode.CUDA_GRAPH if RunCondition.CUDA_GRAPHS_ON in self.runs_when else CaptureMode.EAGER

    def to_dict(self) -> dict:
        return {**asdict(self), "where": self.where, "eagle3_path": self.eagle3_path}


def runtime_files(src: SglangSource) -> list[str]:
    """Runtime files by role, not by fixed path, so releases that move files into subpackages are still scanned."""
    out = []
    for path in src.files("srt"):
        if path.startswith(("srt/models/", "srt/multimodal/", "srt/layers/")):
            continue
        name = path.rsplit("/", 1)[-1]
        if path.startswith(("srt/model_executor/", "srt/speculative/")) or _RUNTIME_NAME.search(name):
            out.append(path)
    return out


def grep_view(src: SglangSource, pattern: str = ENGINEER_PATTERN) -> list[GrepHit]:
    """The engineer's view: pattern matches in runner, graph-runner and speculative-worker files."""
    rx = re.compile(pattern)
    hits = []
    for path in runtime_files(src):
        if not _GREP_NAME.search(path.rsplit("/", 1)[-1]):
            continue
        for number, line in enumerate(src.text(path).splitlines(), 1):
            if rx.search(line):
                hits.append(GrepHit(path, number, line.strip()))
    return hits


# ----------------------------------------------------------------------------------------------------------
# condition bookkeeping


@dataclass(frozen=True)
class Cond:
    """One enclosing condition; ``negated`` for else-branches and code after an early exit.

    ``raises`` marks the negation of an ``if ...: raise`` early exit: the code after it runs only when the
    test failed, but the server still dies when it holds, so a ``hasattr`` there checks and does not guard.
    """

    test: ast.expr
    negated: bool = False
    raises: bool = False
    label: str = ""

    @property
    def text(self) -> str:
        if self.label:
            return self.label
        test, negated = self.normalised()
        body = ast.unparse(test)
        return f"not ({body})" if negated else body

    def normalised(self) -> tuple[ast.expr, bool]:
        """(test, negated) with ``not`` folded in, so ``not (not hasattr(x, 'm'))`` reads as ``hasattr``."""
        test, negated = self.test, self.negated
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, not negated
        return test, negated


def _hasattr_guards(conds: tuple[Cond, ...]) -> dict[tuple[str, str], bool]:
    """(receiver text, member) proven to exist by positive ``hasattr`` tests -> whether that guard is real
    (False when the alternative is raising an error)."""
    found: dict[tuple[str, str], bool] = {}
    for cond in conds:
        test, negated = cond.normalised()
        if negated:
            continue
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for node in parts:
            if _is_call_to(node, "hasattr") and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
                key = (ast.unparse(node.args[0]), str(node.args[1].value))
                found[key] = found.get(key, False) or not cond.raises
    return found


def _is_call_to(node: ast.AST, name: str) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _catches_attribute_error(handler: ast.ExceptHandler) -> bool:
    """A handler that swallows AttributeError; one that may re-raise it (a bare ``raise``) does not guard."""
    if any(isinstance(n, ast.Raise) and n.exc is None for n in ast.walk(handler)):
        return False
    if handler.type is None:
        return True
    names = [n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)]
    return bool({"AttributeError", "Exception", "BaseException"} & set(names))


def _ends_flow(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


# ----------------------------------------------------------------------------------------------------------
# the tracer


@dataclass
class _Ctx:
    file: str
    cls: str = ""
    func: str = ""
    conds: tuple[Cond, ...] = ()
    in_try: bool = False
    aliases: dict[str, Role] = field(default_factory=dict)
    self_aliases: dict[str, Role] = field(default_factory=dict)

    def with_cond(self, *conds: Cond) -> "_Ctx":
        return _Ctx(self.file, self.cls, self.func, self.conds + conds, self.in_try, self.aliases, self.self_aliases)


def _role_of(text: str, ctx: _Ctx) -> Role:
    """Target or draft, from the names the runtime uses; ``either`` when the code serves both."""
    low = text.lower()
    if "draft" in low:
        return "draft"
    if "target" in low:
        return "target"
    if "draft" in ctx.cls.lower():
        return "draft"
    if ctx.file.startswith("srt/speculative/") and "worker" in ctx.cls.lower() and "runner" in low:
        return "draft"  # a speculative worker's own runner runs the draft; the target is reached via target_worker
    return "either"


def _keyword(k: ast.keyword) -> str:
    return f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}"


_MODEL_PARAM = re.compile(r"^(target_|draft_)?model$")


def _param_aliases(func: ast.FunctionDef | ast.AsyncFunctionDef, ctx: "_Ctx") -> dict[str, Role]:
    """Runtime helpers that receive the model object as ``model``/``target_model``/``draft_model``."""
    params = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    return {p.arg: _role_of(p.arg, ctx) for p in params if _MODEL_PARAM.match(p.arg)}


class _Tracer:
    """Walks one module and yields model-object sites."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.sites: list[Site] = []

    # -- model-object expressions
    def _is_runner(self, node: ast.expr, ctx: _Ctx) -> bool:
        if isinstance(node, ast.Name) and node.id == "self":
            # ModelRunner and its mixins; other classes in a model_runner*.py file share the runner's ``self``
            in_runner_file = self.path.rsplit("/", 1)[-1].startswith("model_runner")
            return bool(_RUNNER_CLASS.search(ctx.cls)) or (in_runner_file and "graphrunner" not in ctx.cls.lower())
        return bool(_RUNNER_EXPR.search(ast.unparse(node)))

    def model_role(self, node: ast.expr, ctx: _Ctx) -> Optional[Role]:
        if isinstance(node, ast.Name) and node.id in ctx.aliases:
            return ctx.aliases[node.id]
        if isinstance(node, ast.Attribute):
            if node.attr == "model" and self._is_runner(node.value, ctx):
                return _role_of(ast.unparse(node), ctx)
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in ctx.self_aliases:
                return ctx.self_aliases[node.attr]
        return None

    # -- walking
    def run(self) -> list[Site]:
        self._stmts(self.tree.body, _Ctx(self.path))
        return self.sites

    def _class_aliases(self, cls: ast.ClassDef, ctx: _Ctx) -> dict[str, Role]:
        """``self.x = <model object>`` anywhere in the class makes ``self.x`` an alias."""
        found: dict[str, Role] = {}
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                tgt = node.targets[0]
                if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                    role = self.model_role(node.value, ctx)
                    if role and tgt.attr != "model":
                        found[tgt.attr] = role
        return found

    def _stmts(self, body: list[ast.stmt], ctx: _Ctx) -> None:
        for stmt in body:
            self._stmt(stmt, ctx)
            if isinstance(stmt, ast.If) and not stmt.orelse and _ends_flow(stmt.body):
                raises = isinstance(stmt.body[-1], ast.Raise)
                ctx = ctx.with_cond(Cond(stmt.test, negated=True, raises=raises))  # code after an early exit

    def _stmt(self, stmt: ast.stmt, ctx: _Ctx) -> None:
        if isinstance(stmt, ast.ClassDef):
            inner = _Ctx(ctx.file, stmt.name)
            inner.self_aliases = self._class_aliases(stmt, inner)
            self._stmts(stmt.body, inner)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{ctx.cls}.{stmt.name}" if ctx.cls else stmt.name
            inner = _Ctx(ctx.file, ctx.cls, name, (), False, _param_aliases(stmt, ctx), ctx.self_aliases)
            self._stmts(stmt.body, inner)
        elif isinstance(stmt, (ast.If, ast.While)):
            self._expr(stmt.test, ctx)
            self._stmts(stmt.body, ctx.with_cond(Cond(stmt.test)))
            self._stmts(stmt.orelse, ctx.with_cond(Cond(stmt.test, negated=True)))
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            guarded = any(_catches_attribute_error(h) for h in stmt.handlers)
            inner = _Ctx(ctx.file, ctx.cls, ctx.func, ctx.conds, ctx.in_try or guarded, ctx.aliases, ctx.self_aliases)
            self._stmts(stmt.body, inner)
            for handler in stmt.handlers:
                caught = ast.unparse(handler.type) if handler.type is not None else "any error"
                marker = Cond(ast.Constant(True), label=f"{ERROR_PATH}: except {caught}")
                self._stmts(handler.body, ctx.with_cond(marker))
            self._stmts(stmt.orelse, ctx)
            self._stmts(stmt.finalbody, ctx)
        else:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                role = self.model_role(stmt.value, ctx)
                if role:
                    ctx.aliases[stmt.targets[0].id] = role
                else:
                    ctx.aliases.pop(stmt.targets[0].id, None)
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    self._stmt(child, ctx)
                else:
                    self._expr(child, ctx)

    def _expr(self, node: ast.AST, ctx: _Ctx) -> None:
        if isinstance(node, ast.BoolOp):
            for i, value in enumerate(node.values):
                prior = node.values[:i]
                extra = tuple(Cond(v, negated=isinstance(node.op, ast.Or)) for v in prior)
                self._expr(value, ctx.with_cond(*extra))
            return
        if isinstance(node, ast.IfExp):
            self._expr(node.test, ctx)
            self._expr(node.body, ctx.with_cond(Cond(node.test)))
            self._expr(node.orelse, ctx.with_cond(Cond(node.test, negated=True)))
            return
        if isinstance(node, ast.Call):
            if self._builtin_site(node, ctx):
                for arg in node.args[2:]:
                    self._expr(arg, ctx)
                return
            if isinstance(node.func, ast.Attribute):
                role = self.model_role(node.func.value, ctx)
                if role:
                    args = [ast.unparse(a) for a in node.args] + [_keyword(k) for k in node.keywords]
                    self._add(node.func, node.func.value, node.func.attr, role, "call", args, ctx)
                    for child in [*node.args, *(k.value for k in node.keywords)]:
                        self._expr(child, ctx)
                    return
        if isinstance(node, ast.Attribute):
            role = self.model_role(node.value, ctx)
            if role:
                access = "write" if isinstance(node.ctx, ast.Store) else "read"
                self._add(node, node.value, node.attr, role, access, [], ctx)
                return
        for sub in ast.iter_child_nodes(node):
            self._expr(sub, ctx)

    def _builtin_site(self, node: ast.Call, ctx: _Ctx) -> bool:
        """``hasattr``/``getattr``/``setattr`` on a model object with a literal member name."""
        if not isinstance(node.func, ast.Name) or node.func.id not in {"hasattr", "getattr", "setattr"}:
            return False
        if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant) or not isinstance(node.args[1].value, str):
            return False
        role = self.model_role(node.args[0], ctx)
        if not role:
            return False
        fn, member = node.func.id, node.args[1].value
        if fn == "hasattr":
            self._add(node, node.args[0], member, role, "check", [], ctx, guard="hasattr")
        elif fn == "getattr":
            has_default = len(node.args) >= 3 or any(k.arg == "default" for k in node.keywords)
            self._add(node, node.args[0], member, role, "read", [], ctx, guard="getattr default" if has_default else "")
        else:
            self._add(node, node.args[0], member, role, "write", [ast.unparse(a) for a in node.args[2:]], ctx)
        return True

    def _add(self, node, receiver, member, role, access, args, ctx: _Ctx, guard: str = "") -> None:
        if member.startswith("__") and member.endswith("__"):
            return  # every object has dunders (``model.__class__`` in error messages)
        recv = ast.unparse(receiver)
        checks = _hasattr_guards(ctx.conds)
        if not guard and (recv, member) in checks:
            if checks[(recv, member)]:
                guard = "hasattr check"
            else:
                note = "checked by hasattr, raises otherwise"
                conds = [*(c.text for c in ctx.conds), note]
                self._append(node, recv, member, role, access, args, ctx, "", conds)
                return
        if not guard and ctx.in_try:
            guard = "try/except"
        self._append(node, recv, member, role, access, args, ctx, guard, [c.text for c in ctx.conds])

    def _append(self, node, recv, member, role, access, args, ctx: _Ctx, guard: str, conds: list[str]) -> None:
        self.sites.append(
            Site(
                file=self.path,
                line=node.lineno,
                function=ctx.func or "<module>",
                receiver=recv,
                member=member,
                role=role,
                access=access,
                guarded=bool(guard),
                guard=guard,
                args=args,
                conditions=conds,
            )
        )


# ----------------------------------------------------------------------------------------------------------
# run conditions, derived from where flags are set


@dataclass
class Provenance:
    """For each runtime flag (``self.eagle_use_aux_hidden_state`` ...), the conditions it is set truthy under."""

    by_flag: dict[tuple[str, str], list[list[str]]] = field(default_factory=dict)

    def only_under(self, flag: tuple[str, str], needle: str) -> bool:
        """True if every truthy assignment of ``flag`` happens under a condition mentioning ``needle``."""
        sets = self.by_flag.get(flag)
        if not sets:
            return False
        return all(any(needle in c and not c.startswith("not (") for c in conds) for conds in sets)

    def only_under_pattern(self, flag: tuple[str, str], pattern: re.Pattern[str]) -> bool:
        sets = self.by_flag.get(flag)
        if not sets:
            return False
        return all(any(pattern.search(c) for c in conds) for conds in sets)

    def target_runner_only(self, flag: tuple[str, str]) -> bool:
        """The flag is only ever set truthy when the runner is not a draft worker."""
        return self.only_under_pattern(flag, _NOT_DRAFT)


def _owner_kind(cls: str) -> str:
    """Flags of every model-runner class share one namespace (graph runners read them via ``model_runner.x``)."""
    return "runner" if _RUNNER_CLASS.search(cls) else cls


class _FlagCollector(_Tracer):
    """Reuses the condition walk to find ``self.<flag> = <not False/None>`` assignments."""

    def __init__(self, path: str, tree: ast.Module, prov: Provenance) -> None:
        super().__init__(path, tree)
        self.prov = prov

    def _stmt(self, stmt: ast.stmt, ctx: _Ctx) -> None:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            falsy = isinstance(stmt.value, ast.Constant) and not stmt.value.value
            for tgt in targets:
                if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                    if not falsy and (_RUNNER_CLASS.search(ctx.cls) or "worker" in ctx.cls.lower()):
                        key = (_owner_kind(ctx.cls), tgt.attr)
                        self.prov.by_flag.setdefault(key, []).append([c.text for c in ctx.conds])
        super()._stmt(stmt, ctx)


_NOT_DRAFT = re.compile(r"not \(?[\w.]*is_draft_worker\b")
_NOT_DRAFT_WHOLE = re.compile(r"not \([\w.]*is_draft_worker\)")
_NOT_EAGLE3 = re.compile(r"not \([\w.]*is_eagle3\(\)\)")


def _eagle_callees(trees: list[tuple[str, ast.Module]], depth: int = 3) -> set[str]:
    """Module-level helpers reachable (by plain-name calls, up to ``depth`` levels) from EAGLE code: a file,
    class or function named eagle. Their sites run on EAGLE servers too.

    Newer releases move runtime steps into helpers (``resolve_target_embed_and_head(target_model)``) that
    name neither EAGLE nor the runner; following the calls keeps them in the contract.
    """
    seeds: set[str] = set()
    helpers: dict[str, set[str]] = {}
    for path, tree in trees:
        file_eagle = "eagle" in path.rsplit("/", 1)[-1].lower()
        for top in tree.body:
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
                helpers.setdefault(top.name, set()).update(_called_names(top))
                if file_eagle or "eagle" in top.name.lower():
                    seeds |= _called_names(top)
            elif isinstance(top, ast.ClassDef):
                owner_eagle = file_eagle or "eagle" in top.name.lower()
                for func in top.body:
                    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        if owner_eagle or "eagle" in func.name.lower():
                            seeds |= _called_names(func)
    reached, frontier = set(seeds), set(seeds)
    for _ in range(depth):
        frontier = {c for name in frontier for c in helpers.get(name, ())} - reached
        reached |= frontier
    return reached


def _called_names(func: ast.AST) -> set[str]:
    """Plain-name calls (module-level helpers); method names are too common to follow by name."""
    return {n.func.id for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _tags(site: Site, prov: Provenance, eagle_callees: frozenset[str] = frozenset()) -> list[RunCondition]:
    """Run conditions of a site, from its enclosing conditions and the provenance of the flags they test."""
    positive = [c for c in site.conditions if not c.startswith("not (")]
    owner = site.function.split(".")[0]
    joined = " ".join(positive)
    flags = {
        ("runner" if _RUNNER_EXPR.search(recv) else _owner_kind(owner) if recv == "self" else "?", attr)
        for recv, attr in re.findall(r"([\w.]+)\.(\w+)", joined)
    }
    # a bare name is a helper's parameter carrying the runner flag of the same name (``flag=self.flag``)
    flags |= {("runner", name) for name in re.findall(r"(?<![\w.])([a-z_]\w*)(?![\w(.])", joined)}
    tags: list[RunCondition] = []
    negative = [c for c in site.conditions if c.startswith("not (")]
    if any(c.startswith(ERROR_PATH) for c in site.conditions):
        tags.append(RunCondition.ERROR_PATH)
    if any(_NOT_EAGLE3.fullmatch(c) for c in site.conditions):
        tags.append(RunCondition.NOT_EAGLE3)
    eagle3 = any("is_eagle3" in c for c in positive) or any(prov.only_under(f, "is_eagle3") for f in flags)
    if eagle3:
        tags.append(RunCondition.EAGLE3_ONLY)
    fname = site.file.rsplit("/", 1)[-1].lower()
    bare = set(re.findall(r"(?<![\w.])([a-z_]\w*)(?![\w(.])", joined))
    named_flag = any("eagle" in name for name in bare)  # a helper's ``eagle_use_aux_hidden_state`` parameter
    called = "." not in site.function and site.function in eagle_callees
    if eagle3 or "eagle" in fname or "eagle" in site.function.lower() or named_flag or called:
        tags.append(RunCondition.EAGLE_FAMILY)
    if "graphrunner" in owner.lower() or "graph_runner" in fname or "cuda_graph" in " ".join(positive):
        tags.append(RunCondition.CUDA_GRAPHS_ON)
    not_draft = any(_NOT_DRAFT.search(c) for c in positive) or any(_NOT_DRAFT_WHOLE.fullmatch(c) for c in negative)
    if not_draft or any(prov.target_runner_only(f) for f in flags):
        tags.append(RunCondition.TARGET_RUNNER_ONLY)
    return tags


def flag_provenance(src: SglangSource) -> Provenance:
    """Where each runner/worker flag is set truthy, over all runtime files."""
    prov = Provenance()
    for path in runtime_files(src):
        tree = src.tree(path)
        if tree is not None:
            _FlagCollector(path, tree, prov).run()
    return prov


def trace(src: SglangSource) -> list[Site]:
    """Every model-object site in the runtime files, with guard, arguments and run conditions."""
    prov = flag_provenance(src)
    trees = [(p, t) for p in runtime_files(src) if (t := src.tree(p)) is not None]
    callees = frozenset(_eagle_callees(trees))
    sites: list[Site] = []
    for path, tree in trees:
        for site in _Tracer(path, tree).run():
            site.runs_when = _tags(site, prov, callees)
            if site.role == "either" and RunCondition.TARGET_RUNNER_ONLY in site.runs_when:
                site.role = "target"
            sites.append(site)
    return sites


def contract(sites: list[Site]) -> list[Site]:
    """The sites that run on an EAGLE-3 server."""
    return [s for s in sites if s.eagle3_path]
