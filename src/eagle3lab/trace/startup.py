"""The order in which an EAGLE-3 server reaches model-object sites at start-up, per profile.

"Which call raises first" depends on the branch the runtime takes (CPU without CUDA graphs versus GPU with
them), so this module walks sglang's own start-up code in statement order: the target ``ModelRunner``'s
constructor (following ``self.method()`` calls, ``super().__init__`` and graph-runner constructions), then the
EAGLE draft workers' constructors. Branch tests are evaluated against a small profile (device, CUDA graphs on
or off, EAGLE-3 on, target or draft runner); tests it cannot decide are taken both ways.

Newer releases no longer call the capture hook from the runner's constructor: the scheduler builds the TP worker
(which builds the runner) and then asks it to set up attention backends, which calls the hook. When the
constructor walk reaches no target site, the walk starts again from the scheduler's constructor and also follows
``self.<attr>.<method>()`` where ``self.<attr>`` is assigned one of the runtime's classes (or is a property
annotated with one), and the construction of runtime workers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Optional

from eagle3lab.trace.contract import Provenance, Site, flag_provenance, runtime_files
from eagle3lab.trace.sources import SglangSource

UNKNOWN = None
_NOT_KNOWN = object()  # a value the profile does not know (distinct from None, which sglang values can be)


@dataclass(frozen=True)
class StartupProfile:
    """The few facts about a launch that decide which start-up branches run."""

    name: str
    device: str
    cuda_graphs: bool
    torch_compile: bool = False
    # sglang's resolved ServerArgs values (runtime.sglang_args, after __post_init__) and the GPU's compute
    # capability: with them, tests such as ``self._should_run_flashinfer_autotune()`` (moe_runner_backend,
    # get_device_capability) are decided instead of taken both ways. Empty / None: not known.
    server_args: tuple[tuple[str, Any], ...] = ()
    capability: Optional[tuple[int, int]] = None

    def server_arg(self, key: str) -> Any:
        return dict(self.server_args).get(key, _NOT_KNOWN)

    @classmethod
    def cpu(cls) -> "StartupProfile":
        return cls("cpu", "cpu", cuda_graphs=False)

    @classmethod
    def gpu(cls) -> "StartupProfile":
        return cls("gpu", "cuda", cuda_graphs=True)

    @classmethod
    def resolved(cls, chosen: dict[str, Any], capability: Optional[tuple[int, int]]) -> "StartupProfile":
        """The gpu/cpu start-up of one launch, from sglang's resolved ServerArgs values
        (``runtime.sglang_args.ParsedLaunch.chosen``) and the GPU's compute capability."""
        device = str(chosen.get("device") or "cuda")
        return cls("gpu" if device == "cuda" else "cpu", device, cuda_graphs=not chosen.get("disable_cuda_graph"),
                   server_args=tuple(sorted(chosen.items())), capability=capability)


@dataclass
class _Index:
    classes: dict[str, tuple[str, ast.ClassDef]] = field(default_factory=dict)
    functions: dict[str, tuple[str, ast.FunctionDef]] = field(default_factory=dict)
    attr_types: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (class, attr) -> runtime classes

    def type_attributes(self) -> None:
        """``self.x = Cls(...)`` and ``@property def x(self) -> Cls`` with ``Cls`` a runtime class."""
        for name, (_, node) in self.classes.items():
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.value, ast.Call):
                    tgt, made = sub.targets[0], sub.value.func
                    if (isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self"
                            and isinstance(made, ast.Name) and made.id in self.classes):
                        self.attr_types.setdefault((name, tgt.attr.lstrip("_")), set()).add(made.id)
            for stmt in node.body:
                if (isinstance(stmt, ast.FunctionDef) and isinstance(stmt.returns, ast.Name)
                        and stmt.returns.id in self.classes
                        and any(ast.unparse(d) == "property" for d in stmt.decorator_list)):
                    self.attr_types.setdefault((name, stmt.name), set()).add(stmt.returns.id)

    def method(
        self, cls: str, name: str, seen: Optional[set[str]] = None
    ) -> Optional[tuple[str, str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """(file, owner class, def) of ``cls.name``, searching bases by name (single-file MRO approximation)."""
        seen = seen or set()
        if cls in seen or cls not in self.classes:
            return None
        seen.add(cls)
        path, node = self.classes[cls]
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return path, cls, stmt
        for base in node.bases:
            base_name = ast.unparse(base).rsplit(".", 1)[-1]
            found = self.method(base_name, name, seen)
            if found:
                return found
        return None


def _index(src: SglangSource) -> _Index:
    idx = _Index()
    for path in runtime_files(src):
        tree = src.tree(path)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                idx.classes.setdefault(node.name, (path, node))
        for top in tree.body:
            if isinstance(top, ast.FunctionDef):
                idx.functions.setdefault(top.name, (path, top))
    return idx


def _device_of_class(name: str) -> str:
    low = name.lower()
    for device in ("cpu", "npu", "xpu", "hpu", "mlx"):
        if low.startswith(device):
            return device
    return "cuda"


class _Walker:
    def __init__(
        self, idx: _Index, profile: StartupProfile, site_lines: set[tuple[str, int]], prov: Provenance
    ) -> None:
        self.idx = idx
        self.prov = prov
        self.profile = profile
        self.site_lines = site_lines
        self.order: list[tuple[str, int, str]] = []  # (file, line, role)
        self.certain: dict[tuple[str, int, str], bool] = {}
        self.visited: set[tuple[str, str, str]] = set()
        self.undecided = 0  # >0 while inside a branch whose test the profile cannot decide
        self.follow_objects = False  # the scheduler-driven walk of newer releases (see the module docstring)
        self.open_branches: list[dict[str, Any]] = []  # those branches, outermost first
        self.depends_on: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        self.cls_stack: list[str] = []  # the class whose method is being walked (for self.<predicate>() tests)

    # -- branch evaluation
    def truth(self, node: ast.expr, role: str) -> Optional[bool]:
        if isinstance(node, ast.BoolOp):
            vals = [self.truth(v, role) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if False in vals else (True if all(v is True for v in vals) else UNKNOWN)
            return True if True in vals else (False if all(v is False for v in vals) else UNKNOWN)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            val = self.truth(node.operand, role)
            return None if val is None else not val
        text = ast.unparse(node)
        last = text.rsplit(".", 1)[-1]
        if isinstance(node, ast.Call) and last in {"is_eagle3()", "is_eagle()"}:
            return True
        if last == "is_draft_worker":
            return role == "draft"
        if isinstance(node, ast.Attribute) and self.prov.target_runner_only(("runner", last)):
            return role == "target"  # a flag the runtime only sets on the target runner (with EAGLE-3 on)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and ast.unparse(node.func.value) == "self" and self.cls_stack:
            return self.method_truth(self.cls_stack[-1], node.func.attr, role)
        if last == "disable_cuda_graph":
            return not self.profile.cuda_graphs
        if last == "enable_torch_compile":
            return self.profile.torch_compile
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and ast.unparse(node.left).endswith("device"):
            right = node.comparators[0]
            try:
                value = ast.literal_eval(right)
            except ValueError:
                return UNKNOWN
            op = node.ops[0]
            if isinstance(op, ast.Eq):
                return self.profile.device == value
            if isinstance(op, ast.NotEq):
                return self.profile.device != value
            if isinstance(op, ast.In) and isinstance(value, (list, tuple, set)):
                return self.profile.device in value
            if isinstance(op, ast.NotIn) and isinstance(value, (list, tuple, set)):
                return self.profile.device not in value
        return UNKNOWN

    def method_truth(self, cls: str, name: str, role: str) -> Optional[bool]:
        """What a predicate method of the runner returns, when its early returns are decided by the profile's
        resolved server args and capability (``if <test>: return <value>`` in order, then a final return)."""
        found = self.idx.method(cls, name)
        if not found:
            return UNKNOWN
        env: dict[str, Any] = {}
        for stmt in found[2].body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                value = self.value(stmt.value, env, role)
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    env[target.id] = value
                elif isinstance(target, ast.Tuple) and isinstance(value, tuple) and len(value) == len(target.elts):
                    env.update({t.id: v for t, v in zip(target.elts, value) if isinstance(t, ast.Name)})
                else:
                    return UNKNOWN
                continue
            if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 \
                    and isinstance(stmt.body[0], ast.Return):
                test = self.value(stmt.test, env, role)
                if test is _NOT_KNOWN:
                    return UNKNOWN
                if test:
                    result = self.value(stmt.body[0].value, env, role) if stmt.body[0].value else None
                    return UNKNOWN if result is _NOT_KNOWN else bool(result)
                continue
            if isinstance(stmt, ast.Return):
                result = self.value(stmt.value, env, role) if stmt.value else None
                return UNKNOWN if result is _NOT_KNOWN else bool(result)
            return UNKNOWN
        return UNKNOWN

    def value(self, node: ast.expr, env: dict[str, Any], role: str) -> Any:
        """A small expression's value from the profile (server args, capability) or ``_NOT_KNOWN``."""
        text = ast.unparse(node)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.value(e, env, role) for e in node.elts]
            return _NOT_KNOWN if any(i is _NOT_KNOWN for i in items) else tuple(items)
        if isinstance(node, ast.Name):
            return env.get(node.id, _NOT_KNOWN)
        if text.startswith("self.server_args.") and text.count(".") == 2:
            return self.profile.server_arg(text.rsplit(".", 1)[-1])
        if text.endswith("get_device_capability()"):
            return self.profile.capability if self.profile.capability is not None else _NOT_KNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.value(node.operand, env, role)
            return _NOT_KNOWN if inner is _NOT_KNOWN else not inner
        if isinstance(node, ast.BoolOp):
            vals = [self.value(v, env, role) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if any(v is not _NOT_KNOWN and not v for v in vals) else \
                    (_NOT_KNOWN if any(v is _NOT_KNOWN for v in vals) else True)
            return True if any(v is not _NOT_KNOWN and v for v in vals) else \
                (_NOT_KNOWN if any(v is _NOT_KNOWN for v in vals) else False)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = self.value(node.left, env, role), self.value(node.comparators[0], env, role)
            if left is _NOT_KNOWN or right is _NOT_KNOWN:
                return _NOT_KNOWN
            ops = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.In: lambda a, b: a in b,
                   ast.NotIn: lambda a, b: a not in b, ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
                   ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.Is: lambda a, b: a is b,
                   ast.IsNot: lambda a, b: a is not b}
            op = ops.get(type(node.ops[0]))
            try:
                return op(left, right) if op else _NOT_KNOWN
            except TypeError:
                return _NOT_KNOWN
        truth = self.truth(node, role)  # spec algorithm, draft worker, device, graphs
        return _NOT_KNOWN if truth is None else truth

    # -- walking
    def walk_method(self, cls: str, name: str, role: str, depth: int = 0) -> None:
        found = self.idx.method(cls, name)
        if not found or depth > 30:
            return
        path, owner, func = found
        # following typed attributes, the concrete class decides what ``self.<attr>`` is: key on it too
        key = (f"{cls}:{owner}" if self.follow_objects else owner, func.name, role)
        if key in self.visited:
            return
        self.visited.add(key)
        self.cls_stack.append(cls)
        try:
            self.stmts(func.body, path, owner, cls, role, depth)
        finally:
            self.cls_stack.pop()

    def walk_function(self, name: str, role: str, depth: int) -> None:
        """A module-level helper the runtime calls by name (newer releases move start-up steps into them)."""
        path, func = self.idx.functions[name]
        key = ("", name, role)
        if key in self.visited or depth > 30:
            return
        self.visited.add(key)
        self.stmts(func.body, path, "", "", role, depth)

    def stmts(self, body: list[ast.stmt], path: str, owner: str, cls: str, role: str, depth: int) -> bool:
        """Walk statements; False once a return is certainly reached."""
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.If):
                self.exprs(stmt.test, path, owner, cls, role, depth)
                val = self.truth(stmt.test, role)
                self.undecided += val is None
                if val is None:
                    self.open_branches.append(self.branch(stmt, path, cls))
                try:
                    if val is not False:
                        cont = self.stmts(stmt.body, path, owner, cls, role, depth)
                        if val is True and not cont:
                            return False
                    if val is not True:
                        cont = self.stmts(stmt.orelse, path, owner, cls, role, depth)
                        if val is False and not cont:
                            return False
                finally:
                    self.undecided -= val is None
                    if val is None:
                        self.open_branches.pop()
                continue
            if isinstance(stmt, (ast.Return, ast.Raise)):
                value = stmt.exc if isinstance(stmt, ast.Raise) else stmt.value
                if value is not None:
                    self.exprs(value, path, owner, cls, role, depth)
                return False
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    self.stmts([child], path, owner, cls, role, depth)
                else:
                    self.exprs(child, path, owner, cls, role, depth)
        return True

    def branch(self, stmt: ast.If, path: str, cls: str) -> dict[str, Any]:
        """An ``if`` the profile cannot decide: where, its test, and -- when the test calls a method of the same
        class -- the tests inside that method, which are what really decide it (device capability, backend ...)."""
        decided_by: list[str] = []
        test = stmt.test
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and ast.unparse(test.func.value) == "self":
            found = self.idx.method(cls, test.func.attr) if cls else None
            if found:
                decided_by = [ast.unparse(node.test) for node in found[2].body if isinstance(node, ast.If)]
        return {"where": f"{path}:{stmt.lineno}", "test": ast.unparse(test), "decided_by": decided_by}

    def exprs(self, node: ast.AST, path: str, owner: str, cls: str, role: str, depth: int) -> None:
        for sub in _in_order(node):
            line = getattr(sub, "lineno", None)
            if line is not None and (path, line) in self.site_lines and (path, line, role) not in self.order:
                self.order.append((path, line, role))
                self.certain[(path, line, role)] = self.undecided == 0
                self.depends_on[(path, line, role)] = list(self.open_branches)
            if isinstance(sub, ast.Call):
                self.call(sub, cls, role, depth)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and "GraphRunner" in sub.id:
                if sub.id in self.idx.classes and _device_of_class(sub.id) == self.profile.device:
                    self.walk_method(sub.id, "__init__", role, depth + 1)

    def call(self, node: ast.Call, cls: str, role: str, depth: int) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            self.walk_method(cls, func.attr, role, depth + 1)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and _is_super(func.value):
            _, node_cls = self.idx.classes.get(cls, ("", None))
            for base in getattr(node_cls, "bases", []):
                self.walk_method(ast.unparse(base).rsplit(".", 1)[-1], func.attr, role, depth + 1)
        elif isinstance(func, ast.Name) and func.id in self.idx.functions:
            self.walk_function(func.id, role, depth + 1)
        elif isinstance(func, ast.Name) and func.id in self.idx.classes and func.id.endswith("ModelRunner"):
            draft = any(k.arg == "is_draft_worker" and ast.unparse(k.value) == "True" for k in node.keywords)
            self.walk_method(func.id, "__init__", "draft" if draft else role, depth + 1)
        elif not self.follow_objects:
            return
        elif isinstance(func, ast.Name) and func.id in self.idx.classes and func.id.endswith("Worker"):
            self.walk_method(func.id, "__init__", role, depth + 1)
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
              and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"):
            attr = func.value.attr.lstrip("_")
            owners = [c for c in self._mro_names(cls) if (c, attr) in self.idx.attr_types]
            for target in sorted(self.idx.attr_types[(owners[0], attr)]) if owners else []:
                self.walk_method(target, func.attr, "draft" if "draft" in attr else role, depth + 1)

    def _mro_names(self, cls: str) -> list[str]:
        """``cls`` and its bases by name (the index's single-namespace approximation)."""
        out, stack = [], [cls]
        while stack:
            name = stack.pop(0)
            if name in out or name not in self.idx.classes:
                continue
            out.append(name)
            stack += [ast.unparse(b).rsplit(".", 1)[-1] for b in self.idx.classes[name][1].bases]
        return out


def _is_super(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "super"


def _in_order(node: ast.AST):
    """Nodes in source order (pre-order), so nested calls are met where they are written."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.stmt):
            yield from _in_order(child)


def startup_order(src: SglangSource, sites: list[Site], profile: StartupProfile) -> list[dict]:
    """Sites reached at start-up, in order: target ModelRunner first, then the EAGLE draft workers."""
    idx = _index(src)
    lines = {(s.file, s.line) for s in sites}
    walker = _Walker(idx, profile, lines, flag_provenance(src))
    if "ModelRunner" in idx.classes:
        walker.walk_method("ModelRunner", "__init__", "target")
    target_sites = {(s.file, s.line) for s in sites if s.role in ("target", "either")}
    if "Scheduler" in idx.classes and not any((f, ln) in target_sites for f, ln, _ in walker.order):
        idx.type_attributes()
        walker.follow_objects = True
        walker.walk_method("Scheduler", "__init__", "target")
        walker.follow_objects = False
    phase_one = len(walker.order)
    workers = sorted(
        name
        for name, (path, _) in idx.classes.items()
        if path.startswith("srt/speculative/")
        and "eagle" in path.rsplit("/", 1)[-1]
        and name.lower().endswith("worker")
    )
    for name in workers:
        walker.walk_method(name, "__init__", "draft")
    by_line = {(s.file, s.line): s for s in sites}
    out = []
    for rank, (path, line, role) in enumerate(walker.order):
        site = by_line[(path, line)]
        phase = "target ModelRunner init" if rank < phase_one else "draft worker init"
        out.append({
            "rank": rank, "where": site.where, "member": site.member, "phase": phase, "runner_role": role,
            "certain": walker.certain[(path, line, role)],  # False: behind a branch the profile cannot decide
            "undecided_branches": walker.depends_on[(path, line, role)],  # which ones, and what decides them
        })
    return out
