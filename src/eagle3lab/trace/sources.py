"""An engine's source code (sglang's installed package or any release; any vLLM release), without installing it.

The trace must work for any sglang release, not only the one in the venv, so a release is read straight out
of its wheel (a zip) fetched once with ``pip download --no-deps`` into the eagle3lab cache. Every path is
package-relative (``srt/models/kimi_k25.py``) so the analysis never cares where the text came from. vLLM's
releases are read the same way, from a zip of their Python sources (``package.ranged_wheel``), with ``package``
"vllm".
"""

from __future__ import annotations

import ast
import warnings
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from eagle3lab.errors import PatchError, SourceError
from eagle3lab.package.location import PACKAGE, installed_root, installed_version
from eagle3lab.package.release import drift
from eagle3lab.package.wheels import check_version, fetch_wheel

INSTALLED = "installed"


@dataclass(frozen=True)
class Skipped:
    """A file the analysis could not use, and why (never dropped silently)."""

    path: str
    reason: str


@dataclass
class SglangSource:
    """Text of one release of an engine (sglang unless ``package`` says otherwise), addressed by package-relative
    paths (``srt/models/x.py``; vLLM's ``model_executor/models/x.py``)."""

    version: str
    origin: str
    _texts: dict[str, bytes] = field(repr=False)
    skipped: list[Skipped] = field(default_factory=list)
    _trees: dict[str, Optional[ast.Module]] = field(default_factory=dict, repr=False)
    modified: list[str] = field(default_factory=list)
    package: str = PACKAGE  # the top-level package the paths are relative to

    def files(self, under: str = "", suffix: str = ".py") -> list[str]:
        """Sorted paths below ``under`` ending with ``suffix``."""
        prefix = under.rstrip("/") + "/" if under else ""
        return sorted(p for p in self._texts if p.startswith(prefix) and p.endswith(suffix))

    @property
    def origin_label(self) -> str:
        """Where the text came from, without machine paths: the wheel's file name or "installed package"."""
        if self.origin.endswith(".whl"):
            return Path(self.origin).name
        return "installed package" if Path(self.origin, "__init__.py").is_file() else self.origin

    def exists(self, path: str) -> bool:
        return path in self._texts

    def text(self, path: str) -> str:
        """Decoded text; a UTF-8 byte-order mark is dropped (``utf-8-sig``), since ``ast`` rejects it in str."""
        if path not in self._texts:
            raise SourceError(f"{path} is not in {self.package} {self.version} ({self.origin}); check the path with "
                              ".files()",
                              version=self.version, file=path, problem="missing_file")
        return self._texts[path].decode("utf-8-sig")

    def tree(self, path: str) -> Optional[ast.Module]:
        """Parsed module (memoised); ``None`` and a recorded skip if the file does not parse on this Python."""
        if path not in self._trees:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)
                    self._trees[path] = ast.parse(self.text(path), filename=path)
            except (SyntaxError, ValueError) as exc:
                self.skip(path, f"does not parse on this Python ({type(exc).__name__}: {exc})")
                self._trees[path] = None
        return self._trees[path]

    def skip(self, path: str, reason: str) -> None:
        """Record that ``path`` was not analysed (analysers call this, e.g. on a syntax error); idempotent."""
        entry = Skipped(path, reason)
        if entry not in self.skipped:
            self.skipped.append(entry)


def _collect(entries: Iterable[tuple[str, bytes]], compiled_under: str = "srt/") -> tuple[dict[str, bytes], list[Skipped]]:
    """Keep Python sources; note compiled modules, which carry no source to analyse."""
    texts: dict[str, bytes] = {}
    skipped: list[Skipped] = []
    for rel, data in entries:
        if rel.endswith(".py"):
            try:
                data.decode("utf-8-sig")
            except UnicodeDecodeError:
                skipped.append(Skipped(rel, "not valid UTF-8"))
                continue
            texts[rel] = data
        elif rel.endswith((".so", ".pyd")) and rel.startswith(compiled_under):
            skipped.append(Skipped(rel, "compiled extension module, no Python source"))
    return texts, skipped


def installed_source() -> SglangSource:
    """The sglang package importable from this interpreter; ``modified`` lists the sources that differ from the
    release's RECORD (a patched install is no longer the release)."""
    try:
        site = installed_root()
    except PatchError:
        raise SourceError("sglang is not installed in this environment; install it or pass a release version "
                          "instead", problem="not_installed") from None
    root = site / PACKAGE
    entries = ((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    texts, skipped = _collect(entries)
    src = SglangSource(installed_version() or "unknown", str(root), texts, skipped)
    diff = drift(site)
    src.modified = sorted(rel[len(PACKAGE) + 1:] for rel in diff.modified) if diff else []
    return src


def wheel_source(wheel: Path, version: str, package: str = PACKAGE) -> SglangSource:
    """Read a wheel (or a zip of a wheel's sources) as a zip, only what the analysis needs; a corrupt file is
    reported, never half-read."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.startswith(package + "/") and not n.endswith("/")]
            entries = [
                (name[len(package) + 1 :], zf.read(name) if name.endswith(".py") else b"") for name in names
            ]  # ZipFile.read checks each member's CRC
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise SourceError(f"wheel {wheel} is corrupt ({exc}); delete it and rerun to download again", path=wheel,
                          version=version, problem="corrupt") from None
    if not entries:
        raise SourceError(f"wheel {wheel} holds no '{package}/' package; delete it and rerun to download again",
                          path=wheel, version=version, problem="no_package")
    texts, skipped = _collect(entries, "srt/" if package == PACKAGE else "")
    return SglangSource(version, str(wheel), texts, skipped, package=package)


@lru_cache(maxsize=4)
def _open_cached(spec: str, index_url: Optional[str]) -> SglangSource:
    if spec == INSTALLED:
        return installed_source()
    version = check_version(spec)
    return wheel_source(fetch_wheel(version, index_url=index_url), version)


def open_source(spec: str = INSTALLED, index_url: Optional[str] = None) -> SglangSource:
    """``"installed"`` or a release version such as ``"0.5.9"`` -> its source (memoised per process)."""
    return _open_cached(spec, index_url)
