"""sglang source code of the installed package or of any release, without installing it.

The trace must work for any sglang release, not only the one in the venv, so a release is read straight out
of its wheel (a zip) fetched once with ``pip download --no-deps`` into the eagle3lab cache. Every path is
sglang-relative (``srt/models/kimi_k25.py``) so the analysis never cares where the text came from.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import re
import warnings
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from packaging.version import InvalidVersion, Version

from eagle3lab.progress import progress_bar
from eagle3lab.errors import SourceError
from eagle3lab.paths import cache_dir

INSTALLED = "installed"
PACKAGE = "sglang"


@dataclass(frozen=True)
class Skipped:
    """A file the analysis could not use, and why (never dropped silently)."""

    path: str
    reason: str


@dataclass
class SglangSource:
    """Text of one sglang release, addressed by sglang-relative paths (``srt/models/x.py``)."""

    version: str
    origin: str
    _texts: dict[str, bytes] = field(repr=False)
    skipped: list[Skipped] = field(default_factory=list)
    _trees: dict[str, Optional[ast.Module]] = field(default_factory=dict, repr=False)
    modified: list[str] = field(default_factory=list)

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
            raise SourceError(f"{path} is not in sglang {self.version} ({self.origin}); check the path with .files()")
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


def _collect(entries: Iterable[tuple[str, bytes]]) -> tuple[dict[str, bytes], list[Skipped]]:
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
        elif rel.endswith((".so", ".pyd")) and rel.startswith("srt/"):
            skipped.append(Skipped(rel, "compiled extension module, no Python source"))
    return texts, skipped


def installed_source() -> SglangSource:
    """The sglang package importable from this interpreter."""
    from importlib import metadata, util

    spec = util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SourceError("sglang is not installed in this environment; install it or pass a release version instead")
    root = Path(list(spec.submodule_search_locations)[0])
    entries = ((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    texts, skipped = _collect(entries)
    src = SglangSource(metadata.version(PACKAGE), str(root), texts, skipped)
    src.modified = _modified_since_install(texts, metadata.files(PACKAGE) or [])
    return src


def _modified_since_install(texts: dict[str, bytes], recorded: Iterable) -> list[str]:
    """Sources whose hash differs from the wheel's RECORD: a patched install is no longer the release."""
    out = []
    for entry in recorded:
        rel = str(entry)
        if not rel.startswith(PACKAGE + "/") or entry.hash is None or entry.hash.mode != "sha256":
            continue
        data = texts.get(rel[len(PACKAGE) + 1 :])
        if data is None:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != entry.hash.value:
            out.append(rel[len(PACKAGE) + 1 :])
    return sorted(out)


def wheel_source(wheel: Path, version: str) -> SglangSource:
    """Read a wheel as a zip (only what the analysis needs); a corrupt file is reported, never half-read."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.startswith(PACKAGE + "/") and not n.endswith("/")]
            entries = [
                (name[len(PACKAGE) + 1 :], zf.read(name) if name.endswith(".py") else b"") for name in names
            ]  # ZipFile.read checks each member's CRC
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise SourceError(f"wheel {wheel} is corrupt ({exc}); delete it and rerun to download again") from None
    if not entries:
        raise SourceError(f"wheel {wheel} holds no '{PACKAGE}/' package; delete it and rerun to download again")
    texts, skipped = _collect(entries)
    return SglangSource(version, str(wheel), texts, skipped)


def check_version(version: str) -> str:
    """Normalised release string, or one line saying the input is not a version."""
    try:
        return str(Version(version))
    except InvalidVersion:
        raise SourceError(f"'{version}' is not a version; use 'installed' or a release such as 0.5.9") from None


def cached_wheel(version: str, wheels: Optional[Path] = None) -> Optional[Path]:
    """The cached wheel of ``version`` (any platform tag), if present."""
    folder = wheels or cache_dir("wheels")
    pattern = re.compile(rf"^{PACKAGE}-{re.escape(version)}-.+\.whl$")
    hits = sorted(p for p in folder.glob(f"{PACKAGE}-*.whl") if pattern.match(p.name))
    return hits[0] if hits else None


def _pip(args: list[str], index_url: Optional[str]) -> subprocess.CompletedProcess[str]:
    """Run this interpreter's pip; an explicit index replaces (``--isolated``) the machine's pip config."""
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--retries", "0", "--timeout", "20"]
    if index_url:
        cmd += ["--isolated", "--index-url", index_url]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PIP_NO_INPUT": "1"})


def _pip_failure(version: str, stderr: str, index_url: Optional[str], folder: Path) -> SourceError:
    """One line for a failed pip call; "no such version" only when the index is reachable and lists others."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if "No matching distribution" in stderr or "Could not find a version" in stderr:
        listing = _pip(["index", "versions", PACKAGE], index_url)
        match = re.search(r"Available versions:\s*(.+)", listing.stdout)
        if listing.returncode == 0 and match:
            newest = match.group(1).split(",")[0].strip()
            return SourceError(
                f"sglang {version} is not on the package index (newest: {newest}); pick one from list_releases()"
            )
        return SourceError(
            f"cannot reach the package index (it lists no sglang) and no cached wheel of sglang {version}; "
            f"connect, or put the wheel in {folder}"
        )
    return SourceError(f"pip could not download sglang {version} ({lines[-1] if lines else 'no output'}); rerun later")


def fetch_wheel(version: str, wheels: Optional[Path] = None, index_url: Optional[str] = None) -> Path:
    """The wheel of ``version``, downloaded once into the cache (atomically, so a failed download leaves none)."""
    version = check_version(version)
    folder = wheels or cache_dir("wheels")
    hit = cached_wheel(version, folder)
    if hit:
        return hit
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        proc = _pip(["download", "--no-deps", "-d", tmp, f"{PACKAGE}=={version}"], index_url)
        got = sorted(Path(tmp).glob(f"{PACKAGE}-*.whl"))
        if proc.returncode != 0 or not got:
            raise _pip_failure(version, proc.stderr + proc.stdout, index_url, folder)
        final = folder / got[0].name
        got[0].replace(final)
    return final


def fetch_wheels(versions: list[str], wheels: Optional[Path] = None, index_url: Optional[str] = None) -> list[Path]:
    """Fetch several releases with a progress bar (off when ``CI`` is set)."""
    out = []
    for version in progress_bar(versions, desc="sglang wheels"):
        out.append(fetch_wheel(version, wheels, index_url))
    return out


def list_releases(index_url: Optional[str] = None) -> list[str]:
    """Every sglang release on the index, oldest first (pre-releases excluded)."""
    proc = _pip(["index", "versions", PACKAGE], index_url)
    match = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not match:
        where = index_url or "the index in pip's config"
        raise SourceError(f"cannot list sglang releases: {where} is unreachable or has none; connect and rerun")
    found = [Version(v.strip()) for v in match.group(1).split(",") if v.strip()]
    return [str(v) for v in sorted(found) if not v.is_prerelease]


def releases_between(first: str, last: Optional[str] = None, index_url: Optional[str] = None) -> list[str]:
    """Releases from ``first`` to ``last`` (default: newest), inclusive."""
    lo, hi = Version(check_version(first)), Version(check_version(last)) if last else None
    return [v for v in list_releases(index_url) if Version(v) >= lo and (hi is None or Version(v) <= hi)]


@lru_cache(maxsize=4)
def _open_cached(spec: str, index_url: Optional[str]) -> SglangSource:
    if spec == INSTALLED:
        return installed_source()
    version = check_version(spec)
    return wheel_source(fetch_wheel(version, index_url=index_url), version)


def open_source(spec: str = INSTALLED, index_url: Optional[str] = None) -> SglangSource:
    """``"installed"`` or a release version such as ``"0.5.9"`` -> its source (memoised per process)."""
    return _open_cached(spec, index_url)
