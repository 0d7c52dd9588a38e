"""Where a patch keeps the originals it replaced, who holds them, and the lock every patcher shares.

Why: while a patch is applied, its originals and their sha256 sit in a backup folder under the per-user cache
with a manifest naming the process that applied it. If that process dies (SIGKILL, a power cut), the next
command finds a manifest whose holder is gone -- a stale backup -- and says how to restore. The lock does not
live in the cache: it is a file next to the sglang package it protects, so every process that patches that
package shares it, whatever its ``EAGLE3LAB_CACHE``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from eagle3lab import runguard
from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.errors import PatchError
from eagle3lab.paths import cache_dir

LOCK_NAME = ".eagle3lab-sglang.lock"
LOCK_TIMEOUT_ENV = "EAGLE3LAB_LOCK_TIMEOUT_S"
LOCK_TIMEOUT_S = 600.0  # longer than any patched launch holds the lock; a holder stopped or hung past it is named
MANIFEST = "manifest.json"
TEMPORARY = "temporary"  # applied for the length of a ``with patched(...)`` block
APPLIED = "applied"  # applied on purpose (``patch apply``) and left in place

RESTORE_COMMAND = "python -m eagle3lab patch restore"


def _cache_root() -> Path:
    return cache_dir("patch-backups").resolve()


def _root_key(root: Path) -> str:
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]


def _slug(name: str) -> str:
    """A patch name as one safe folder name (a header like ``Patch-Name: ../../x`` must not steer the path)."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "patch"
    return slug[:80] + "-" + hashlib.sha256(name.encode()).hexdigest()[:8] if slug != name else slug


def inside(path: Path, folder: Path) -> bool:
    """Does ``path`` resolve (symlinks followed) to ``folder`` or something below it?"""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def backup_dir(root: Path, patch_name: str) -> Path:
    folder = _cache_root() / _root_key(root) / _slug(patch_name)
    if not inside(folder, _cache_root()):
        raise PatchError(f"backup folder for {patch_name!r} would leave the cache ({folder}); refused",
                         patch=patch_name, path=folder, problem="outside_backup")
    return folder


@dataclass
class Manifest:
    """What one applied patch replaced, and who applied it."""

    path: Path  # the manifest file itself
    root: str
    patch: str  # the patch name
    patch_file: str
    kind: str  # TEMPORARY or APPLIED
    holder: dict[str, Any]  # pid, started (process start time), command
    files: list[dict[str, str]]  # path (site-packages-relative), sha256_original, sha256_patched
    saved_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def original(self, rel: str) -> Path:
        copy = self.folder / "originals" / rel
        if not inside(copy, self.folder):
            raise PatchError(f"manifest {self.path} names {rel!r}, which is outside its backup; delete it by hand",
                             path=self.path, file=rel, problem="outside_backup")
        return copy

    def holder_alive(self) -> bool:
        return process_alive(self.holder.get("pid"), self.holder.get("started"))

    @property
    def stale(self) -> bool:
        """A temporary patch whose process is gone: nobody will ever revert it."""
        return self.kind == TEMPORARY and not self.holder_alive()

    def describe_holder(self) -> str:
        return f"pid {self.holder.get('pid')} ({self.holder.get('command') or 'unknown command'})"


def process_alive(pid: Any, started: Any) -> bool:
    """Is ``pid`` running and the very process that started at ``started`` (pids get reused)?"""
    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - float(started)) < 0.5
    except (psutil.Error, ValueError, TypeError):
        return False


def this_process() -> dict[str, Any]:
    me = psutil.Process()
    return {"pid": me.pid, "started": me.create_time(), "command": " ".join(sys.argv[:4])[:200]}


def save(root: Path, patch_name: str, patch_file: str, kind: str,
         files: list[tuple[str, str, str, str]]) -> Manifest:
    """Copy the originals, then write the manifest (files: rel, original text, sha original, sha patched).

    The manifest is written last, so it only ever names copies that exist; a failure removes the folder.
    """
    folder = backup_dir(root, patch_name)
    entries = []
    try:
        for rel, text, sha_original, sha_patched in files:
            copy = folder / "originals" / rel
            if not inside(copy, folder):
                raise PatchError(f"{patch_name}: backup path {rel!r} would leave the backup folder; refused",
                                 patch=patch_name, file=rel, problem="outside_backup")
            write_text_atomic(copy, text, mode=None)
            entries.append({"path": rel, "sha256_original": sha_original, "sha256_patched": sha_patched})
        manifest = Manifest(folder / MANIFEST, str(Path(root).resolve()), patch_name, patch_file, kind,
                            this_process(), entries, time.time())
        write_json_atomic(manifest.path, {k: v for k, v in manifest.__dict__.items() if k != "path"})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return manifest


def load(path: Path) -> Manifest:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Manifest(Path(path), data["root"], data["patch"], data.get("patch_file", ""),
                        data.get("kind", TEMPORARY), data.get("holder") or {}, list(data["files"]),
                        float(data.get("saved_at", 0.0)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PatchError(f"backup manifest {path} is unreadable ({type(exc).__name__}); "
                         f"run {RESTORE_COMMAND}, which restores from the release wheel",
                         path=Path(path), problem="manifest_unreadable") from None


def manifests(root: Path) -> list[Manifest]:
    """Every backup manifest of patches applied to ``root`` (oldest first), as this process's cache sees them."""
    folder = _cache_root() / _root_key(root)
    found = [load(path) for path in sorted(folder.glob(f"*/{MANIFEST}"))] if folder.is_dir() else []
    return sorted(found, key=lambda m: m.saved_at)


def all_manifests() -> list[Manifest]:
    """Every readable backup manifest in this process's cache, whatever package root it belongs to."""
    found = []
    for path in sorted(_cache_root().glob(f"*/*/{MANIFEST}")):
        try:
            found.append(load(path))
        except PatchError:
            pass
    return sorted(found, key=lambda m: m.saved_at)


def find(root: Path, patch_name: str) -> Manifest | None:
    path = backup_dir(root, patch_name) / MANIFEST
    return load(path) if path.is_file() else None


def drop(manifest_or_folder: Manifest | Path) -> None:
    """The originals are back in place: forget them (manifest first, so no half-deleted backup looks valid)."""
    folder = manifest_or_folder.folder if isinstance(manifest_or_folder, Manifest) else Path(manifest_or_folder)
    with suppress(FileNotFoundError):
        (folder / MANIFEST).unlink()
    shutil.rmtree(folder, ignore_errors=True)
    with suppress(OSError):
        folder.parent.rmdir()


# ---------------------------------------------------------------------------------------------------------
# The lock, next to the package


def lock_path(root: Path) -> Path:
    return Path(root).resolve() / LOCK_NAME


_local = threading.local()


def _say(line: str) -> None:
    print(f"eagle3lab: {line}", file=sys.stderr, flush=True)


MAX_LOCK_TIMEOUT_S = 86400.0  # a day: a longer wait is a wait forever


def lock_timeout_s() -> float:
    """How long a patcher waits for the lock: ``EAGLE3LAB_LOCK_TIMEOUT_S`` or ``LOCK_TIMEOUT_S``.

    Refused unless a finite number of seconds above 0 and at most a day: ``nan`` and ``inf`` passed the old
    "> 0" check and made every wait endless (a comparison with nan is never true).
    """
    raw = os.environ.get(LOCK_TIMEOUT_ENV)
    if raw is None:
        return LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_LOCK_TIMEOUT_S:
        raise PatchError(f"{LOCK_TIMEOUT_ENV} must be a number of seconds above 0 and at most "
                         f"{MAX_LOCK_TIMEOUT_S:g}, got {raw!r}; set it to, say, 600 or unset it",
                         problem="bad_timeout", value=raw)
    return value


def _write_holder(fd: int) -> None:
    """Record who holds the lock in the lock file itself, so a waiter can name it."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(this_process()).encode(), 0)


def describe_lock_holder(path: Path) -> str:
    """"pid N (command, stopped)": the pid from the kernel's lock table (the file may not say yet), the command
    from the file; "another eagle3lab process" only where neither says."""
    return runguard.describe_lock_holder(path)


def lock_holder(root: Path) -> str | None:
    """Who holds the patch lock of ``root`` right now ("pid N (command, state)"); None when it is free or held
    by this process. A probe: a shared lock taken and dropped at once, never waited for (the file keeps its last
    holder's name after release, so only the lock itself says whether anyone holds it now)."""
    path = lock_path(root)
    if str(path) in (getattr(_local, "held", None) or {}):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # never locked here, or unreadable: nothing to name
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        return describe_lock_holder(path)
    finally:
        os.close(fd)  # closing drops the probe's lock
    return None


def _wait_for_lock(fd: int, path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        if time.monotonic() >= deadline:
            raise PatchError(f"the sglang patch lock {path} is still held after {timeout_s:g} s by "
                             f"{describe_lock_holder(path)}; wait for it to finish or end it, then retry "
                             f"(or set {LOCK_TIMEOUT_ENV})")
        time.sleep(0.2)


@contextmanager
def package_lock(root: Path, on_wait: Callable[[str], None] | None = _say,
                 timeout_s: float | None = None) -> Iterator[None]:
    """One patcher per sglang package across processes (re-entrant within a thread).

    The lock file lives beside the package, so processes with different caches still exclude each other.
    ``on_wait`` hears one line (default: stderr) naming the holder if this one has to wait; after ``timeout_s``
    (default: ``lock_timeout_s()``) the wait ends with a PatchError naming the holding process.
    """
    held: dict[str, tuple[int, int]] = getattr(_local, "held", None) or {}
    _local.held = held
    path = lock_path(root)
    key = str(path)
    if key in held:
        fd, depth = held[key]
        held[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = held[key]
            held[key] = (fd, depth - 1)
        return
    limit = lock_timeout_s() if timeout_s is None else timeout_s  # a bad setting is refused before any wait
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PatchError(f"cannot create the patch lock {path} ({exc.strerror}); the folder holding sglang "
                         f"must be writable to patch it", path=path, problem="lock_failed") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = describe_lock_holder(path)
            if on_wait:
                on_wait(f"waiting for {holder}, which holds the sglang patch lock {path}")
            _wait_for_lock(fd, path, limit)
        _write_holder(fd)
        held[key] = (fd, 1)
        try:
            yield
        finally:
            del held[key]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
