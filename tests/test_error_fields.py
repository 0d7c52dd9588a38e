"""Errors enforce their own design: a raise site sets only the fields its class declares. Why: a misspelt field
became an attribute nobody read, and ``err.<declared>`` stayed ``None`` for the caller or test that asked."""

from __future__ import annotations

import ast
import pickle

import pytest

from eagle3lab import errors
from eagle3lab.errors import Eagle3LabError, PatchError, ServerDiedError, StaleStateError, declared_fields, problems
from eagle3lab.paths import REPO_ROOT

ERROR_CLASSES = {name: cls for name, cls in vars(errors).items()
                 if isinstance(cls, type) and issubclass(cls, Eagle3LabError)}


def test_an_undeclared_field_is_refused_and_a_declared_one_kept():
    with pytest.raises(TypeError, match="PatchError declares no field 'hnuk'"):
        PatchError("patch x does not apply", hnuk=2)  # "hunk", misspelt
    err = StaleStateError("left patched", patch="p", holder_pid=7, problem="patched")  # its own and its base's
    assert (err.patch, err.holder_pid, err.problem, err.file) == ("p", 7, "patched", None)
    again = pickle.loads(pickle.dumps(err))  # a child's error reaching its parent keeps its fields
    assert type(again) is StaleStateError and again.fields == err.fields and str(again) == "left patched"


def test_a_problem_outside_the_class_literal_is_refused():
    """``problem`` is a per-class Literal: each class says which failures it reports, and only those."""
    assert "not_applied" in problems(PatchError) and problems(ServerDiedError) == frozenset()
    with pytest.raises(TypeError, match="PatchError has no problem 'not_aplied'"):
        PatchError("the patch is not applied", problem="not_aplied")
    with pytest.raises(TypeError, match="ServerDiedError has no problem 'died'"):
        ServerDiedError("the server exited", problem="died")
    with pytest.raises(TypeError, match="Eagle3LabError has no problem"):
        Eagle3LabError("bare", problem="anything")  # the base names none: every raise site has its class
    assert [name for name, cls in ERROR_CLASSES.items()  # every class but the base narrows it
            if cls is not Eagle3LabError and "problem" not in vars(cls).get("__annotations__", {})] == []


def test_every_raise_site_in_the_package_sets_only_declared_fields():
    """Every call of an error class of ``errors.py`` by name, across src/, with its keyword fields; a literal
    ``problem`` is one its class names."""
    wrong = []
    for path in sorted((REPO_ROOT / "src" / "eagle3lab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            cls = ERROR_CLASSES.get(name or "")
            if cls is None:
                continue
            wrong += [f"{path.name}:{node.lineno} {name}({kw.arg}=)" for kw in node.keywords
                      if kw.arg is not None and kw.arg not in declared_fields(cls)]
            wrong += [f"{path.name}:{node.lineno} {name}(problem={kw.value.value!r})" for kw in node.keywords
                      if kw.arg == "problem" and isinstance(kw.value, ast.Constant)
                      and kw.value.value not in problems(cls)]
    assert wrong == []


def test_a_server_timeout_is_caught_as_a_timeout_and_keeps_its_fields():
    """A caller bounding a wait catches ``TimeoutError``; the message and fields stay the project's own."""
    with pytest.raises(TimeoutError) as caught:
        raise errors.ServerTimeoutError("the server was not ready after 5 s; see x.log", timeout_s=5.0)
    assert str(caught.value) == "the server was not ready after 5 s; see x.log" and caught.value.timeout_s == 5.0
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is errors.ServerTimeoutError and again.fields == {"timeout_s": 5.0}


def test_every_public_error_class_lives_in_errors_py():
    """Outside ``errors.py`` only private signals (a leading underscore, or ``WriteFailed``, which its package
    catches) and the harness errors under ``runtime/cpu_harness`` (hashed into the release records)."""
    outside = []
    for path in sorted((REPO_ROOT / "src" / "eagle3lab").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT / "src" / "eagle3lab").as_posix()
        if rel == "errors.py" or rel.startswith("runtime/cpu_harness/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", "")).endswith(
                    ("Error", "Exception", "Problem", "Failed", "NotFetched", "NotFound")) for b in node.bases):
                if not node.name.startswith("_") and node.name != "WriteFailed":
                    outside.append(f"{rel}:{node.lineno} {node.name}")
    assert outside == []
