"""Validate a notebook's parameters right after papermill injects them.

Papermill injects whatever names it is given, so a typo (``-p tp_sise 8``) would silently do nothing. The
notebook calls ``begin(globals())`` before its parameters cell and ``resolve(globals())`` after it: names that
papermill injected on top of the declared ones must be profile keys (they override the profile; this is how
``papermill -f params/blackwell-8x.yaml`` or ``-p port 30123`` work); anything else, or a declared parameter of
the wrong type, fails with one line.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, MutableMapping

from eagle3lab import runguard
from eagle3lab.notebook import kernelguard
from eagle3lab.errors import ProfileError
from eagle3lab.runtime.profiles import Profile, load_profile

MARK = "_eagle3lab_names_before_parameters"


@dataclass(frozen=True)
class NotebookParameters:
    """The validated parameters of one notebook run: the notebook's own and the resolved profile."""

    values: dict[str, Any]
    profile: Profile
    profile_overrides: dict[str, Any]


def begin(namespace: MutableMapping[str, Any]) -> None:
    """Take the checkout's run lock, remember which names exist before the parameters cell (imports, IPython's
    own), and guard the kernel so that its parent's exit (papermill ended by a signal) reverts what a cell holds
    instead of skipping it.

    The lock first, before anything heavy: a notebook run directly (papermill, Jupyter) writes the same outputs as
    ``eagle3lab run``, so beside another run it stops here in one line naming that run; in a kernel the run itself
    started it is already held (``runguard.hold_until_exit``). Only a notebook's own globals (``__main__``) take
    it, not a test calling this with a namespace of its own.
    """
    if namespace.get("__name__") == "__main__":
        runguard.hold_until_exit("running this notebook")
    namespace[MARK] = frozenset(namespace)
    kernelguard.install()


def _type_ok(value: Any, annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    if origin is typing.Union:
        return any(_type_ok(value, arg) for arg in typing.get_args(annotation))
    if annotation is type(None) or annotation is None:
        return value is None
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(origin, type):
        return isinstance(value, origin)
    return True


def resolve(namespace: MutableMapping[str, Any]) -> NotebookParameters:
    """Check declared parameter types, route injected profile keys to the profile, reject anything else."""
    if MARK not in namespace:
        raise ProfileError("notebook bug: call eagle3lab.notebook.params.begin(globals()) before the parameters cell",
                           problem="notebook_bug")
    declared: dict[str, Any] = dict(namespace.get("__annotations__", {}))
    values = {name: namespace[name] for name in declared if name in namespace}
    for name, annotation in declared.items():
        if name in values and not _type_ok(values[name], annotation):
            shown = getattr(annotation, "__name__", str(annotation))
            raise ProfileError(f"notebook parameter '{name}' should be {shown}, "
                               f"got {type(values[name]).__name__} {values[name]!r}", key=name, problem="type",
                               value=values[name])
    injected = [name for name in namespace
                if name not in namespace[MARK] and name not in declared and not name.startswith("_")]
    unknown = [name for name in injected if name not in Profile.model_fields]
    if unknown:
        raise ProfileError(f"unknown notebook parameter '{unknown[0]}': not declared in the parameters cell and "
                           f"not a profile key (see `papermill --help-notebook` and params/*.yaml)", key=unknown[0],
                           problem="unknown")
    overrides = {**values.get("overrides", {}), **{name: namespace[name] for name in injected}}
    profile = load_profile(values.get("profile", "cpu"), overrides=overrides)
    return NotebookParameters(values, profile, overrides)
