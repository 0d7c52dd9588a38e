"""Find what an interrupted patcher left behind, and bring the installed sglang back to its release.

Why: a process killed while it held a patch (SIGKILL, OOM, a power cut) cannot revert it, and the next run
would quietly measure a patched package (notebook 01 then fails far from the cause). Every run and patch
command therefore starts by inspecting the package: a backup manifest whose holder is gone, or a file that
differs from the release without a backup that explains it, stops the command with one line naming the file and
``python -m eagle3lab patch restore``. That command puts back the originals from the backups, and takes any
file still different from the release out of the release wheel itself (verified against pip's RECORD).
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.atomic import write_bytes_atomic, write_with
from eagle3lab.errors import PatchError, StaleStateError
from eagle3lab.package import backups
from eagle3lab.package.backups import RESTORE_COMMAND, Manifest
from eagle3lab.package.location import site_packages_root
from eagle3lab.package.release import Drift, ReleaseRecord, drift, release_record, sha256_file
from eagle3lab.package.wheels import fetch_wheel
from eagle3lab import signals


@dataclass
class PackageState:
    """The installed package against the release and the backups this process's cache knows about."""

    root: Path
    manifests: list[Manifest]
    drift: Drift | None  # None: no RECORD to compare with (a bare folder, not an installed distribution)
    current: dict[str, str] = field(default_factory=dict)  # sha256 of every drifted file

    @property
    def stale(self) -> list[Manifest]:
        return [m for m in self.manifests if m.stale]

    @property
    def held(self) -> list[Manifest]:
        """Patches in place on purpose (``patch apply``) or by a process that is still running."""
        return [m for m in self.manifests if not m.stale]

    @property
    def unexplained(self) -> list[str]:
        """Files that differ from the release although no live backup says which patch changed them."""
        if self.drift is None:
            return []
        explained = {(f["path"], f["sha256_patched"]) for m in self.held for f in m.files}
        out = [rel for rel in self.drift.modified if (rel, self.current.get(rel)) not in explained]
        return out + list(self.drift.missing) + list(self.drift.stray)

    @property
    def is_release(self) -> bool:
        return not self.manifests and (self.drift is None or self.drift.clean)


def inspect(root: Path) -> PackageState:
    """Read-only: the backups of ``root`` and how its files differ from the release."""
    root = Path(root).resolve()
    found = backups.manifests(root)
    diff = drift(root)
    current = {rel: sha256_file(root / rel) for rel in diff.modified} if diff else {}
    return PackageState(root, found, diff, current)


def require_known_state(root: Path, *, wait_message: bool = True) -> PackageState:
    """Refuse (one line) a stale backup or a package that matches no known state; else return the state.

    Taken under the package lock, so a patch another process holds right now is never mistaken for a stale one.
    """
    root = Path(root).resolve()
    with backups.package_lock(root) if wait_message else backups.package_lock(root, on_wait=None):
        state = inspect(root)
    if state.stale:
        m = state.stale[0]
        raise StaleStateError(
            f"sglang under {root} may still carry patch {m.patch}: its backup manifest {m.path} was left by "
            f"{m.describe_holder()}, which is gone; run {RESTORE_COMMAND}",
            patch=m.patch, path=m.path, holder_pid=m.holder.get("pid"), problem="stale_backup")
    if state.drift is not None and state.unexplained:  # (only a drift leaves files unexplained)
        rel = state.unexplained[0]
        more = f" (+{len(state.unexplained) - 1} more)" if len(state.unexplained) > 1 else ""
        raise StaleStateError(
            f"{root / rel}{more} differs from the sglang {state.drift.version} release and no eagle3lab backup "
            f"explains it; run {RESTORE_COMMAND} (it takes the file from the release wheel)",
            file=rel, path=root / rel, problem="unexplained_change")
    return state


def require_release(root: Path, for_what: str) -> PackageState:
    """Like ``require_known_state``, and no patch may be in place at all: runs measure the release."""
    state = require_known_state(root)
    if state.held:
        m = state.held[0]
        if m.kind == backups.APPLIED:
            how, then = "applied with `patch apply`", f"run {RESTORE_COMMAND}"
        else:  # a live holder: restoring under it would pull the files from under a running job
            how, then = f"held right now by {m.describe_holder()}", "wait for it to end (it puts the release back)"
        raise StaleStateError(f"{for_what} needs the sglang release, but {root} carries patch {m.patch} ({how}; "
                              f"backup manifest {m.path}); {then}",
                              patch=m.patch, path=m.path, holder_pid=m.holder.get("pid"), problem="patched")
    return state


# ---------------------------------------------------------------------------------------------------------
# Restore


@dataclass
class RestoreResult:
    root: str
    version: str | None
    from_backup: list[str] = field(default_factory=list)
    from_wheel: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)  # the patches whose backups were used and dropped

    @property
    def changed(self) -> bool:
        return bool(self.from_backup or self.from_wheel or self.removed or self.patches)

    @property
    def message(self) -> str:
        release = f"sglang {self.version}" if self.version else "sglang"
        if not self.changed:
            return f"{release} under {self.root} is the release already; nothing to restore"
        parts = []
        if self.from_backup:
            parts.append(f"{len(self.from_backup)} file(s) from the backup of {', '.join(self.patches)}")
        elif self.patches:
            parts.append(f"backup of {', '.join(self.patches)} dropped (its files were the originals already)")
        if self.from_wheel:
            parts.append(f"{len(self.from_wheel)} file(s) from the release wheel")
        if self.removed:
            parts.append(f"{len(self.removed)} stray temporary file(s) removed")
        checked = "matches its release again" if self.version else "has its originals back"
        return f"{release} under {self.root} {checked}: {'; '.join(parts)}"


def _confined(root: Path, rel: str) -> Path:
    path = root / rel
    if not rel.startswith("sglang/") or ".." in Path(rel).parts or not backups.inside(path, root / "sglang"):
        raise PatchError(f"refusing to restore {rel!r}: it is not inside {root / 'sglang'}", file=rel,
                         problem="outside_package")
    return path


def _put_back(path: Path, data: bytes) -> None:
    if path.exists():
        write_with(path, lambda handle: handle.write(data), binary=True, mode=None)
    else:
        write_bytes_atomic(path, data)


def _from_backups(root: Path, found: list[Manifest], result: RestoreResult) -> None:
    """Each file gets the original of the OLDEST backup that covers it (stacked patches: the release text)."""
    chosen: dict[str, tuple[Manifest, dict[str, str]]] = {}
    for manifest in sorted(found, key=lambda m: m.saved_at):
        for entry in manifest.files:
            chosen.setdefault(entry["path"], (manifest, entry))
    for rel, (manifest, entry) in chosen.items():
        path = _confined(root, rel)
        if path.is_file() and sha256_file(path) == entry["sha256_original"]:
            continue
        copy = manifest.original(rel)
        if not copy.is_file() or sha256_file(copy) != entry["sha256_original"]:
            continue  # a damaged backup: the wheel step below takes this file from the release
        _put_back(path, copy.read_bytes())
        result.from_backup.append(rel)
        signals.restored(f"{rel} restored from the backup of {manifest.patch}")
    for manifest in found:
        backups.drop(manifest)
        result.patches.append(manifest.patch)


def _from_wheel(root: Path, record: ReleaseRecord, files: list[str], wheel: Path | None,
                result: RestoreResult) -> None:
    wheel = wheel or fetch_wheel(record.version)
    try:
        with zipfile.ZipFile(wheel) as archive:
            for rel in files:
                data = archive.read(rel)
                if hashlib.sha256(data).hexdigest() != record.hashes[rel]:
                    raise PatchError(f"{rel} in {wheel} does not match the installed RECORD of sglang "
                                     f"{record.version}; reinstall with pip install --force-reinstall "
                                     f"sglang=={record.version}", file=rel, path=wheel, problem="wheel_mismatch")
                _put_back(_confined(root, rel), data)
                result.from_wheel.append(rel)
                signals.restored(f"{rel} restored from the sglang {record.version} wheel")
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise PatchError(f"cannot restore from {wheel} ({type(exc).__name__}: {exc}); delete it so it is "
                         f"downloaded again, or pip install --force-reinstall sglang=={record.version}",
                         path=wheel, problem="wheel_unreadable") from None


def restore(site_packages: str | Path | None = None, wheel: Path | None = None) -> RestoreResult:
    """Bring the package back to its release: originals from the backups, anything else from the wheel."""
    root = site_packages_root(site_packages)
    with backups.package_lock(root), signals.deferred():
        record = release_record(root)
        result = RestoreResult(str(root), record.version if record else None)
        found = backups.manifests(root)
        live = [m for m in found if m.kind == backups.TEMPORARY and m.holder_alive()
                and m.holder.get("pid") != backups.this_process()["pid"]]
        if live:
            raise PatchError(f"{live[0].describe_holder()} holds patch {live[0].patch} right now; "
                             f"stop it (it restores on exit) instead of restoring under it",
                             patch=live[0].patch, path=live[0].path, problem="held")
        _from_backups(root, found, result)
        if record is None:
            return result
        diff = drift(root, record)
        if diff.modified or diff.missing:
            _from_wheel(root, record, [*diff.modified, *diff.missing], wheel, result)
        for rel in diff.stray:
            _confined(root, rel).unlink(missing_ok=True)
            result.removed.append(rel)
        after = drift(root, record)
        if not after.clean:
            raise PatchError(f"after restoring, {root / after.files()[0]} still differs from sglang "
                             f"{record.version}; pip install --force-reinstall sglang=={record.version}",
                             file=after.files()[0], path=root / after.files()[0], problem="still_differs")
        return result
