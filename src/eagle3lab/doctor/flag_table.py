"""sglang's launch flags release by release, read from each release's own ``srt/server_args.py`` (its
``add_argument`` calls, by AST, from the wheels in the cache), so a command written for the release the user ran
reads with that release's flag names: ``--speculative-draft`` was an unambiguous abbreviation of
``--speculative-draft-model-path`` while that was the only flag so named, and is ambiguous in 0.5.9.

The table ships as ``doctor/data/sglang_flags.json`` (``python -m eagle3lab.doctor.flag_table --record
0.4.1 0.4.3 ...`` rewrites it from the wheels, downloading those not cached)."""

from __future__ import annotations

import argparse
import ast
import functools
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from packaging.version import Version

from eagle3lab.atomic import write_json_atomic
from eagle3lab.package.wheels import fetch_wheels

TABLE = Path(__file__).resolve().parent / "data" / "sglang_flags.json"
SERVER_ARGS = "sglang/srt/server_args.py"
ARG_GROUPS = "sglang/srt/arg_groups/"


def _annotated_fields(tree: ast.AST, any_class: bool = False) -> dict[str, str]:
    """sglang 0.5.14+: ``ServerArgs`` fields annotated ``A[type, "help"]`` or ``A[type, Arg(...)]`` become flags
    (``arg_groups/arg_utils.add_cli_args_from_dataclass``: ``--`` + the field name dashed, or ``cli_name``, plus
    ``aliases``; dest the field name; ``no_cli=True`` none). 0.5.20+ keeps the fields in classes under
    ``arg_groups/fields/`` (``any_class``)."""
    out: dict[str, str] = {}
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and (any_class or cls.name == "ServerArgs")):
            continue
        for item in cls.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    and isinstance(item.annotation, ast.Subscript)
                    and isinstance(item.annotation.value, ast.Name) and item.annotation.value.id in ("A", "Annotated")):
                continue
            meta = item.annotation.slice.elts[1:] if isinstance(item.annotation.slice, ast.Tuple) else []
            call = next((m for m in meta if isinstance(m, ast.Call)), None)
            keywords = {k.arg: k.value for k in (call.keywords if call else [])}
            no_cli = keywords.get("no_cli")
            if isinstance(no_cli, ast.Constant) and no_cli.value is True:
                continue
            if not meta:
                continue
            name = item.target.id
            cli = keywords.get("cli_name")
            options = [cli.value if isinstance(cli, ast.Constant) and isinstance(cli.value, str)
                       else "--" + name.replace("_", "-")]
            aliases = keywords.get("aliases")
            if isinstance(aliases, (ast.List, ast.Tuple)):
                options += [a.value for a in aliases.elts if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            for option in options:
                out[option] = name
    return out


def release_flags(source: str) -> dict[str, str]:
    """Every option string of a ``server_args.py`` and the dest it sets (argparse's rule: ``dest=`` or the first
    long option, dashes to underscores; the dataclass-derived flags of 0.5.14+ too)."""
    tree = ast.parse(source)
    out: dict[str, str] = _annotated_fields(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                   and a.value.startswith("--")]
        if not options:
            continue
        dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                     and isinstance(k.value.value, str)), options[0][2:].replace("-", "_"))
        for option in options:
            out[option] = dest
    return out


def record(versions: Sequence[str]) -> dict[str, object]:
    """The table for these releases (oldest first): each flag's dest and the first and last release having it."""
    releases = sorted(versions, key=Version)
    flags: dict[str, dict[str, object]] = {}
    for index, wheel in enumerate(fetch_wheels(list(releases))):
        with zipfile.ZipFile(wheel) as archive:
            found = release_flags(archive.read(SERVER_ARGS).decode("utf-8"))
            for name in archive.namelist():
                if name.startswith(ARG_GROUPS) and name.endswith(".py"):
                    found.update(_annotated_fields(ast.parse(archive.read(name).decode("utf-8")), any_class=True))
        for option, dest in found.items():
            entry = flags.setdefault(option, {"dest": dest, "releases": []})
            entry["releases"].append(index)  # type: ignore[attr-defined]
    return {"source": f"the add_argument calls of {SERVER_ARGS} and the annotated fields of {ARG_GROUPS} in each "
                      "release's wheel", "releases": releases,
            "flags": dict(sorted(flags.items()))}


@dataclass(frozen=True)
class Resolved:
    """A flag as a release's parser reads it: its full option, dest, and the releases that read it so."""

    option: str
    dest: str
    releases: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, object]:
    try:
        return json.loads(TABLE.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {"releases": [], "flags": {}}


def releases() -> list[str]:
    return list(_table().get("releases") or [])  # type: ignore[call-overload]


@functools.lru_cache(maxsize=4096)  # a pasted command repeats its flags; each lookup scans every option
def resolve(flag: str) -> Optional[Resolved]:
    """How the releases in the table read ``flag``: an exact option of some release, else an abbreviation that is
    unambiguous in some releases (argparse's prefix rule; the newest such releases are named), else None."""
    table = _table()
    names: list[str] = list(table.get("releases") or [])  # type: ignore[call-overload]
    flags: dict[str, dict[str, object]] = table.get("flags") or {}  # type: ignore[assignment]
    if flag in flags:
        entry = flags[flag]
        return Resolved(flag, str(entry["dest"]), tuple(names[i] for i in entry["releases"]))  # type: ignore[attr-defined]
    by_release: dict[int, list[str]] = {}
    for option, entry in flags.items():
        if option.startswith(flag):
            for index in entry["releases"]:  # type: ignore[attr-defined]
                by_release.setdefault(index, []).append(option)
    unique = {index: options[0] for index, options in by_release.items() if len(options) == 1}
    if not unique:
        return None
    newest = max(unique)
    option = unique[newest]
    reading = tuple(names[i] for i in sorted(unique) if unique[i] == option)
    return Resolved(option, str(flags[option]["dest"]), reading)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", nargs="+", required=True, metavar="RELEASE", help="releases to read")
    args = parser.parse_args(argv)
    write_json_atomic(TABLE, record(args.record))
    print(f"{TABLE.name}: {len(args.record)} releases")


if __name__ == "__main__":
    main()
