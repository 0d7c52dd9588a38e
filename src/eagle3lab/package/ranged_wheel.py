"""A release's Python sources read out of its wheel on the package index with HTTP range requests.

Why: a vLLM wheel is 240-510 MB (its CUDA kernels), and the trace needs only its Python files (4-15 MB
compressed). A zip keeps its directory at the end, so the directory's bytes are fetched first, then the byte
ranges of the members wanted, coalesced into a few requests; ``zipfile`` itself parses both (it checks each
member's CRC), from a file object that serves only the fetched bytes. The members are kept in the eagle3lab cache as
one small zip per release (written atomically), which ``trace.sources.wheel_source`` reads like a wheel.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import requests
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from eagle3lab.atomic import write_bytes_atomic
from eagle3lab.errors import SourceError
from eagle3lab.paths import cache_dir

SIMPLE_INDEX = "https://pypi.org/simple"  # the index pip uses by default (PEP 691 JSON)
TIMEOUT_S = 60
TAIL_BYTES = 4 << 20  # fetched first: the zip's central directory of a vLLM wheel is about 0.3 MB
GAP_BYTES = 1 << 20  # members closer than this are fetched in one request (fewer round trips)


@dataclass(frozen=True)
class IndexFile:
    """One file of a project on the index."""

    filename: str
    url: str
    size: int


def _get(url: str, headers: dict[str, str]) -> requests.Response:
    try:
        response = requests.get(url, headers=headers, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        raise SourceError(f"cannot reach the package index ({type(exc).__name__}); connect and rerun, or use a "
                          "release the package ships a record of", problem="offline") from None
    return response


def index_files(project: str, index_url: str = SIMPLE_INDEX) -> list[IndexFile]:
    """Every file the index lists for ``project`` (its PEP 691 JSON page, as pip reads it)."""
    url = f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"
    response = _get(url, {"Accept": "application/vnd.pypi.simple.v1+json"})
    if response.status_code == 404:
        raise SourceError(f"{project} is not on the package index", problem="not_on_index")
    if response.status_code != 200:
        raise SourceError(f"the package index answered {response.status_code} for {project}; rerun later",
                          problem="download_failed")
    files = response.json().get("files", [])
    return [IndexFile(f["filename"], f["url"], int(f.get("size") or 0)) for f in files if not f.get("yanked")]


def releases(project: str, index_url: str = SIMPLE_INDEX) -> list[str]:
    """Releases of ``project`` that have a wheel on the index, oldest first (pre-releases excluded)."""
    found: set[Version] = set()
    for item in index_files(project, index_url):
        if item.filename.endswith(".whl"):
            version = parse_wheel_filename(item.filename)[1]
            if not version.is_prerelease:
                found.add(version)
    return [str(v) for v in sorted(found)]


def pick_wheel(files: list[IndexFile], project: str, version: str) -> IndexFile:
    """The release's wheel to read: the Python sources are the same in every platform's wheel, so the first
    x86_64 Linux one, else any."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise SourceError(f"'{version}' is not a version; use a release such as 0.17.1", version=version,
                          problem="not_a_version") from None
    wheels = [f for f in files if f.filename.endswith(".whl") and parse_wheel_filename(f.filename)[1] == wanted]
    if not wheels:
        known = sorted({parse_wheel_filename(f.filename)[1] for f in files if f.filename.endswith(".whl")})
        newest = str(known[-1]) if known else "none"
        raise SourceError(f"{project} {version} has no wheel on the package index (newest: {newest}); pick another "
                          "release", version=version, newest=newest, problem="not_on_index")
    linux = [f for f in wheels if re.search(r"linux.*x86_64", f.filename)]
    return (linux or wheels)[0]


class RangedFile(io.RawIOBase):
    """A read-only file over byte ranges fetched from a URL; reading bytes not fetched is an error, never a
    silent request (every request is planned by ``read_members``)."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.pos = url, size, 0
        self.chunks: list[tuple[int, bytes]] = []
        self.session = requests.Session()
        self.requests_made = 0
        self.bytes_fetched = 0

    def fetch(self, start: int, end: int) -> None:
        """Fetch bytes ``[start, end)`` with one range request."""
        try:
            response = self.session.get(self.url, headers={"Range": f"bytes={start}-{end - 1}"}, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise SourceError(f"cannot reach the package index ({type(exc).__name__}); connect and rerun",
                              problem="offline") from None
        if response.status_code != 206 or len(response.content) != end - start:
            raise SourceError(f"the package index did not serve a byte range of {self.url.rsplit('/', 1)[-1]} "
                              f"(status {response.status_code}); rerun later", problem="download_failed")
        self.chunks.append((start, response.content))
        self.requests_made += 1
        self.bytes_fetched += end - start

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, size: Optional[int] = -1) -> bytes:
        want = self.size - self.pos if size is None or size < 0 else min(size, self.size - self.pos)
        for start, data in self.chunks:
            if start <= self.pos and self.pos + want <= start + len(data):
                out = data[self.pos - start : self.pos - start + want]
                self.pos += len(out)
                return out
        raise OSError(f"bytes {self.pos}-{self.pos + want} of {self.url} were not fetched")


def _ranges(infos: list[zipfile.ZipInfo], ends: dict[str, int]) -> list[tuple[int, int]]:
    """Byte ranges covering each member's local header and data, merged when closer than ``GAP_BYTES``."""
    merged: list[list[int]] = []
    for info in sorted(infos, key=lambda i: i.header_offset):
        start, end = info.header_offset, ends[info.filename]
        if merged and start - merged[-1][1] < GAP_BYTES:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def read_members(url: str, size: int, wanted: Callable[[str], bool]) -> tuple[dict[str, bytes], dict[str, int]]:
    """The members of the remote zip whose names ``wanted`` accepts, and how many requests and bytes it took."""
    remote = RangedFile(url, size)
    remote.fetch(max(0, size - TAIL_BYTES), size)
    try:
        archive = zipfile.ZipFile(remote)  # type: ignore[arg-type]  # a binary file object, as zipfile needs
    except (zipfile.BadZipFile, OSError) as exc:
        raise SourceError(f"{url.rsplit('/', 1)[-1]} is not a readable zip ({exc})", problem="corrupt") from None
    everything = sorted(archive.infolist(), key=lambda i: i.header_offset)
    ends = {info.filename: (everything[k + 1].header_offset if k + 1 < len(everything) else archive.start_dir)
            for k, info in enumerate(everything)}
    chosen = [info for info in everything if wanted(info.filename)]
    for start, end in _ranges(chosen, ends):
        remote.fetch(start, end)
    members = {info.filename: archive.read(info) for info in chosen}
    return members, {"requests": remote.requests_made, "bytes": remote.bytes_fetched, "wheel_bytes": size}


def source_zip_path(project: str, version: str) -> Path:
    return cache_dir("engine-sources") / f"{canonicalize_name(project)}-{version}-py.zip"


def fetch_python_sources(project: str, version: str, package: str, index_url: str = SIMPLE_INDEX) -> Path:
    """A zip of the ``.py`` files under ``package/`` in the release's wheel, fetched once into the cache."""
    path = source_zip_path(project, version)
    if path.is_file():
        return path
    chosen = pick_wheel(index_files(project, index_url), project, version)
    members, _ = read_members(chosen.url, chosen.size,
                              lambda name: name.startswith(package + "/") and name.endswith(".py"))
    if not members:
        raise SourceError(f"{chosen.filename} holds no Python files under {package}/", problem="no_package")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name in sorted(members):
            out.writestr(name, members[name])
        out.comment = chosen.filename.encode()  # the wheel it came from (origin_label reads the zip's name)
    return write_bytes_atomic(path, buffer.getvalue())
