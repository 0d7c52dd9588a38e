"""Classes of an sglang release, resolvable by name across modules (imports, aliases, relative imports).

Class resolution must follow ``from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM`` and
``Alias = Base`` across files without importing anything (a release read from a wheel cannot be imported).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional

from eagle3lab.trace.sources import SglangSource

PKG = "sglang"


@dataclass
class Module:
    """Top-level names of one module: classes, imported names and simple aliases."""

    path: str
    name: str
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)
    aliases: dict[str, str] = field(default_factory=dict)  # local -> other local name
    entry: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClassRef:
    """A class found in the source, or an external one (``torch.nn.Module``) known only by name."""

    name: str
    module: str
    node: Optional[ast.ClassDef] = None

    @property
    def external(self) -> bool:
        return self.node is None

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


def module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PKG, *parts])


def _absolute(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    is_pkg = mod.path.endswith("__init__.py")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _scan(path: str, tree: ast.Module) -> Module:
    mod = Module(path, module_name(path))
    for stmt in tree.body:
        body = [stmt]
        if isinstance(stmt, (ast.If, ast.Try)):
            body = [*stmt.body, *getattr(stmt, "orelse", [])]  # guarded imports
        for node in body:
            if isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                src = _absolute(mod, node)
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = (src, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    mod.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, "")
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = node.targets[0].id
                if target == "EntryClass":
                    value = node.value
                    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                    mod.entry = [ast.unparse(i) for i in items]
                elif isinstance(node.value, (ast.Name, ast.Attribute)):
                    mod.aliases[target] = ast.unparse(node.value)
    return mod


class ModuleIndex:
    """All modules of a release under ``srt/``; parses lazily and once."""

    def __init__(self, src: SglangSource, under: str = "srt") -> None:
        self.src = src
        self.by_name: dict[str, str] = {module_name(p): p for p in src.files(under)}
        self._mods: dict[str, Optional[Module]] = {}

    def module(self, name: str) -> Optional[Module]:
        if name not in self._mods:
            path = self.by_name.get(name)
            tree = self.src.tree(path) if path else None
            self._mods[name] = _scan(path, tree) if tree is not None else None
        return self._mods[name]

    def module_of_path(self, path: str) -> Optional[Module]:
        return self.module(module_name(path))

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassRef:
        """The class a name means inside ``module`` (dotted names resolve their last part via the first)."""
        mod = self.module(module)
        if depth > 20 or mod is None:
            return ClassRef(name.rsplit(".", 1)[-1], module)
        if "." in name:
            head, rest = name.split(".", 1)
            if head in mod.imports:
                src_mod, src_name = mod.imports[head]
                target = f"{src_mod}.{src_name}" if src_name else src_mod
                if target in self.by_name or self.module(target):
                    return self.resolve(target, rest, depth + 1)
                return ClassRef(rest.rsplit(".", 1)[-1], target)
            return ClassRef(name.rsplit(".", 1)[-1], module)
        if name in mod.classes:
            return ClassRef(name, module, mod.classes[name])
        if name in mod.aliases:
            return self.resolve(module, mod.aliases[name], depth + 1)
        if name in mod.imports:
            src_mod, src_name = mod.imports[name]
            if not src_name:
                return ClassRef(name, src_mod)
            if self.module(src_mod) is not None:
                return self.resolve(src_mod, src_name, depth + 1)
            return ClassRef(src_name, src_mod)
        return ClassRef(name, module)

    def find_class(self, name: str, under: str = "srt/models") -> Optional[ClassRef]:
        """A class defined (not imported) somewhere below ``under``; entry modules win."""
        hits = []
        for path in self.src.files(under):
            if f"class {name}" not in self.src.text(path):
                continue
            mod = self.module_of_path(path)
            if mod and name in mod.classes:
                hits.append((name not in mod.entry, path, ClassRef(name, mod.name, mod.classes[name])))
        return sorted(hits, key=lambda h: (h[0], h[1]))[0][2] if hits else None

    def entry_classes(self, under: str = "srt/models") -> list[tuple[str, ClassRef]]:
        """(file, class) for every ``EntryClass`` registration below ``under``."""
        out = []
        for path in self.src.files(under):
            if "EntryClass" not in self.src.text(path):
                continue
            mod = self.module_of_path(path)
            for name in mod.entry if mod else []:
                out.append((path, self.resolve(mod.name, name)))
        return out

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        if ref.node is None:
            return []
        # ``Base[T]`` (generic bases) resolves through ``Base``
        plain = [b.value if isinstance(b, ast.Subscript) else b for b in ref.node.bases]
        return [self.resolve(ref.module, ast.unparse(b)) for b in plain]

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """Depth-first, left-to-right, no repeats: enough to find who defines a member."""
        seen: list[ClassRef] = []
        stack = [ref]
        while stack:
            cur = stack.pop(0)
            if any(c.qualname == cur.qualname for c in seen):
                continue
            seen.append(cur)
            stack = self.bases(cur) + stack
        return seen
