"""sglang releases as wheels on the package index: list them, download one into the cache, once.

Below the trace (which reads any release's source) and the restore (which takes a file back from the release it
was installed from): both need the same wheel, downloaded the same way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Optional

from packaging.version import InvalidVersion, Version

from eagle3lab.errors import SourceError
from eagle3lab.package.location import PACKAGE
from eagle3lab.paths import cache_dir
from eagle3lab.progress import progress_bar


def check_version(version: str) -> str:
    """Normalised release string, or one line saying the input is not a version."""
    try:
        return str(Version(version))
    except InvalidVersion:
        raise SourceError(f"'{version}' is not a version; use 'installed' or a release such as 0.5.9", version=version,
                          problem="not_a_version") from None


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
                f"sglang {version} is not on the package index (newest: {newest}); pick one from list_releases()",
                version=version, newest=newest, problem="not_on_index")
        return SourceError(
            f"cannot reach the package index (it lists no sglang) and no cached wheel of sglang {version}; "
            f"connect, or put the wheel in {folder}", version=version, path=folder, problem="offline")
    return SourceError(f"pip could not download sglang {version} ({lines[-1] if lines else 'no output'}); rerun later",
                       version=version, problem="download_failed")


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


FETCH_WORKERS = 4  # downloads at once: a cold bisect fetches about 25 wheels (327 MB), one pip process each


def fetch_wheels(versions: list[str], wheels: Optional[Path] = None, index_url: Optional[str] = None) -> list[Path]:
    """Fetch several releases, ``FETCH_WORKERS`` at a time (each pip process mostly waits on the network, and each
    download lands atomically under its own name), with a progress bar (off when ``CI`` is set). Returns the
    wheels in the order asked. The first failure cancels the downloads not yet started and is raised once those
    under way have ended."""
    with ThreadPoolExecutor(max_workers=FETCH_WORKERS) as pool:
        futures = [pool.submit(fetch_wheel, version, wheels, index_url) for version in versions]
        for done in progress_bar(as_completed(futures), total=len(futures), desc="sglang wheels"):
            if done.exception() is not None:
                pool.shutdown(cancel_futures=True)  # waits for the downloads under way, drops the rest
                raise done.exception()  # type: ignore[misc]
        return [future.result() for future in futures]


def list_releases(index_url: Optional[str] = None) -> list[str]:
    """Every sglang release on the index, oldest first (pre-releases excluded)."""
    proc = _pip(["index", "versions", PACKAGE], index_url)
    match = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not match:
        where = index_url or "the index in pip's config"
        raise SourceError(f"cannot list sglang releases: {where} is unreachable or has none; connect and rerun",
                          problem="offline")
    found = [Version(v.strip()) for v in match.group(1).split(",") if v.strip()]
    return [str(v) for v in sorted(found) if not v.is_prerelease]


def releases_between(first: str, last: Optional[str] = None, index_url: Optional[str] = None) -> list[str]:
    """Releases from ``first`` to ``last`` (default: newest), inclusive."""
    lo, hi = Version(check_version(first)), Version(check_version(last)) if last else None
    return [v for v in list_releases(index_url) if Version(v) >= lo and (hi is None or Version(v) <= hi)]
