"""Classes of an sglang release, resolvable by name across modules (imports, aliases, relative imports).

Class resolution must follow ``from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM`` and
``Alias = Base`` across files without importing anything (a release read from a wheel cannot be imported).
Imports inside functions count too (``LlavaMistralForCausalLM.__init__`` imports its inner class locally), and a
base class from another installed package (``transformers.PreTrainedModel``) is read from that package's source,
so its members are known rather than guessed. ``torch`` stays opaque: ``torch.nn.Module``'s members are read from
torch's own source by the resolver.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Optional

from eagle3lab.trace.sources import SglangSource

PKG = "sglang"
# Packages whose classes the resolver models itself instead of reading them (torch.nn.Module's members).
OPAQUE_PACKAGES = frozenset({"torch"})


@dataclass
class Module:
    """Top-level names of one module: classes, imported names and simple aliases."""

    path: str
    name: str
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)
    aliases: dict[str, str] = field(default_factory=dict)  # local -> other local name
    entry: list[str] = field(default_factory=list)
    local_imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # imports inside functions
    dicts: dict[str, ast.Dict] = field(default_factory=dict)  # module-level ``NAME = {...}`` (dispatch tables)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # module-level functions
    external: bool = False  # read from an installed package other than the release


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


def module_name(path: str, package: str = PKG) -> str:
    """The dotted module of a package-relative path (``srt/models/x.py`` -> ``sglang.srt.models.x``)."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _absolute(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    is_pkg = mod.path.endswith("__init__.py")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _scan(path: str, tree: ast.Module, name: str = "", external: bool = False) -> Module:
    mod = Module(path, name or module_name(path), external=external)
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
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.functions[node.name] = node  # type: ignore[assignment]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
                    continue
                target = targets[0].id
                if target == "EntryClass":
                    value = node.value
                    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                    mod.entry = [ast.unparse(i) for i in items]
                elif isinstance(node.value, (ast.Name, ast.Attribute)):
                    mod.aliases[target] = ast.unparse(node.value)
                elif isinstance(node.value, ast.Dict):
                    mod.dicts[target] = node.value
    for sub in ast.walk(tree):  # imports inside functions (top-level ones are already in ``imports``)
        if isinstance(sub, ast.ImportFrom):
            src = _absolute(mod, sub)
            for alias in sub.names:
                name = alias.asname or alias.name
                if mod.imports.get(name) != (src, alias.name):
                    mod.local_imports.setdefault(name, (src, alias.name))
    return mod


@lru_cache(maxsize=64)
def package_root(top: str) -> Optional[Path]:
    """Folder (or single file) of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None


@lru_cache(maxsize=64)
def package_version(top: str) -> str:
    """Installed version of a top-level package, or '' (stdlib modules have none)."""
    try:
        return metadata.version(top)
    except metadata.PackageNotFoundError:
        return ""


def external_module_path(name: str) -> Optional[Path]:
    """Source file of a dotted module of an installed package (``transformers.modeling_utils``), if any."""
    top, _, rest = name.partition(".")
    root = package_root(top)
    if root is None:
        return None
    if root.is_file():
        return root if not rest else None
    base = root.joinpath(*rest.split(".")) if rest else root
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=256)
def _parse_file(path: Path) -> Optional[ast.Module]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.parse(path.read_text(encoding="utf-8-sig"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


@lru_cache(maxsize=256)
def _external_module(name: str) -> Optional[Module]:
    path = external_module_path(name)
    tree = _parse_file(path) if path else None
    return _scan(str(path), tree, name, external=True) if tree is not None else None


@lru_cache(maxsize=16)
def _package_classes(top: str) -> dict[str, list[str]]:
    """Class name -> modules defining it, for one installed package (one scan, then memoised)."""
    root = package_root(top)
    found: dict[str, list[str]] = {}
    if root is None or root.is_file():
        return found
    pattern = re.compile(rb"^class ([A-Za-z_]\w*)", re.M)
    for path in sorted(root.rglob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for match in pattern.finditer(data):
            found.setdefault(match.group(1).decode(), []).append(dotted)
    return found


@lru_cache(maxsize=256)
def _external_class_file(top: str, name: str) -> Optional[str]:
    """The module of an installed package that defines ``class name`` (for packages that re-export lazily)."""
    hits = []
    for dotted in _package_classes(top).get(name, []):
        mod = _external_module(dotted)
        node = mod.classes.get(name) if mod else None
        if node is not None:
            hits.append((not node.bases, dotted.count("."), dotted))  # a real class over a placeholder without bases
    return sorted(hits)[0][2] if hits else None


class ModuleIndex:
    """All modules of a release under ``under`` (sglang's ``srt/``; ``""`` for all); parses lazily and once."""

    def __init__(self, src: SglangSource, under: str = "srt") -> None:
        self.src = src
        self.package = src.package
        self.by_name: dict[str, str] = {module_name(p, self.package): p for p in src.files(under)}
        self._mods: dict[str, Optional[Module]] = {}
        self._mro: dict[str, list[ClassRef]] = {}

    def module(self, name: str) -> Optional[Module]:
        """A module of the release, or of another installed package (read from its source); None if neither."""
        if name not in self._mods:
            path = self.by_name.get(name)
            if path:
                tree = self.src.tree(path)
                self._mods[name] = _scan(path, tree, name) if tree is not None else None
            elif name.split(".")[0] not in OPAQUE_PACKAGES | {self.package}:
                self._mods[name] = _external_module(name)
            else:
                self._mods[name] = None
        return self._mods[name]

    def module_of_path(self, path: str) -> Optional[Module]:
        return self.module(module_name(path, self.package))

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
        imported = mod.imports.get(name) or mod.local_imports.get(name)
        if imported:
            src_mod, src_name = imported
            if not src_name:
                return ClassRef(name, src_mod)
            if self.module(src_mod) is not None:
                return self.resolve(src_mod, src_name, depth + 1)
            return ClassRef(src_name, src_mod)
        if mod.external:
            # an installed package that re-exports lazily (transformers' __init__): find the defining module
            found = _external_class_file(module.split(".")[0], name)
            if found and found != module:
                return self.resolve(found, name, depth + 1)
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
            if mod is None:
                continue
            for name in mod.entry:
                out.append((path, self.resolve(mod.name, name)))
        return out

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        if ref.node is None:
            return []
        # ``Base[T]`` (generic bases) resolves through ``Base``
        plain = [b.value if isinstance(b, ast.Subscript) else b for b in ref.node.bases]
        return [self.resolve(ref.module, ast.unparse(b)) for b in plain]

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """Depth-first, left-to-right, no repeats: enough to find who defines a member (memoised)."""
        if ref.qualname not in self._mro:
            self._mro[ref.qualname] = self._mro_uncached(ref)
        return self._mro[ref.qualname]

    def _mro_uncached(self, ref: ClassRef) -> list[ClassRef]:
        seen: list[ClassRef] = []
        stack = [ref]
        while stack:
            cur = stack.pop(0)
            if any(c.qualname == cur.qualname for c in seen):
                continue
            seen.append(cur)
            stack = self.bases(cur) + stack
        return seen
