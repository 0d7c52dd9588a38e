"""Post-import hooks: run a function right after a named module has been executed, in any process.

Why: sglang starts its scheduler in a spawned subprocess, so patching classes in the launching process is not
enough; the shims must be applied wherever sglang's modules get imported. A meta-path finder wraps the loader of
the watched modules, so the patch runs exactly once, right after the module body, before anyone uses it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Hook = Callable[[ModuleType], None]


class _HookedLoader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the hooks on the freshly executed module."""

    def __init__(self, loader: importlib.abc.Loader, hooks: list[Hook]):
        self._loader = loader
        self._hooks = hooks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for hook in self._hooks:
            hook(module)


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds watched modules through the other finders and wraps their loaders."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _HookedLoader(spec.loader, self.hooks[fullname])
                return spec
        return None


def _finder() -> PostImportFinder:
    for finder in sys.meta_path:
        if isinstance(finder, PostImportFinder):
            return finder
    finder = PostImportFinder()
    sys.meta_path.insert(0, finder)
    return finder


def when_imported(module_name: str, hook: Hook) -> None:
    """Run ``hook(module)`` after ``module_name`` is imported; at once if it already is."""
    module = sys.modules.get(module_name)
    if module is not None:
        hook(module)
        return
    _finder().hooks.setdefault(module_name, []).append(hook)
