"""Check, apply, verify and revert the project's sglang patches, atomically and idempotently.

This module is the API; the parts live beside it: ``diffs`` parses the unified diff and applies its hunks in
memory with exact context, ``transaction`` rewrites the target files as one step, ``members`` reads what the patch
adds with ``ast``. Every path in a patch must resolve inside the target sglang package (no ``../``, absolute paths
or escaping symlinks), checked here before anything is written. While a patch is applied its originals sit in a
backup folder under the cache with their sha256 and the process holding them (``backups``), so a run killed
meanwhile is found and repaired by ``python -m eagle3lab patch restore`` (``restore``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

import unidiff

from eagle3lab.errors import Eagle3LabError, PatchError
from eagle3lab.package import backups, diffs, transaction
from eagle3lab.package.diffs import PatchInfo
from eagle3lab.package.members import MemberCheck, added_methods, check_member
from eagle3lab.package.transaction import reason
from eagle3lab.package.backups import RESTORE_COMMAND
from eagle3lab.package.location import site_packages_root
from eagle3lab.paths import REPO_ROOT
from eagle3lab import signals
from eagle3lab.package.restore import require_known_state

PATCHES_DIR = REPO_ROOT / "patches"
# The two patches every notebook talks about, by their names in patches/.
FULL_DELEGATION_PATCH = "kimi_k25-eagle3-delegation"
ONE_METHOD_PATCH = "kimi_k25-one-method"
DUMMY_POST_LOAD_PATCH = "kimi_k25-dummy-post-load-weights"  # --load-format dummy on the Kimi wrapper: see the patch

APPLICABLE = "applicable"
APPLIED = "applied"
ALREADY_APPLIED = "already applied"
VERIFIED = "verified"
REVERTED = "reverted"
NOT_APPLIED = "not applied"
RESTORED = "restored"
PACKAGE = "sglang"


@dataclass(frozen=True)
class FileChange:
    """One target file: where it is and its content hash before and after the action."""

    path: str
    sha256_before: str
    sha256_after: str


@dataclass
class PatchResult:
    """What one action did; ``status`` is one of the module constants (APPLIED, ALREADY_APPLIED, ...)."""

    patch: str
    action: str
    status: str
    root: str
    files: list[FileChange] = field(default_factory=list)
    members: list[MemberCheck] = field(default_factory=list)
    message: str = ""
    backup_dir: str | None = None
    info: PatchInfo | None = None

    @property
    def changed(self) -> bool:
        return self.status in (APPLIED, REVERTED)

    def to_dict(self) -> dict:
        out = asdict(self)
        for member, check in zip(out["members"], self.members):
            member["ok"] = check.ok
        return out


# ---------------------------------------------------------------------------------------------------------
# Reading patches and targets


@dataclass(frozen=True)
class _Patch:
    path: Path
    info: PatchInfo
    files: list[unidiff.PatchedFile]


def resolve_patch(patch: str | os.PathLike) -> Path:
    """A patch file by path, or by bare name from the repository's ``patches/`` folder."""
    path = Path(patch)
    if path.is_file():
        return path.resolve()
    for candidate in (PATCHES_DIR / path.name, PATCHES_DIR / f"{path.name}.patch"):
        if candidate.is_file():
            return candidate
    raise PatchError(f"patch {patch} not found; pass a path or a name from {PATCHES_DIR.name}/",
                     patch=str(patch), problem="not_found")


def _read_patch(patch: str | os.PathLike) -> _Patch:
    path = resolve_patch(patch)
    return _Patch(path, *diffs.parse(path))


def patch_info(patch: str | os.PathLike) -> PatchInfo:
    """A patch's header (name, what, why, where fixed upstream), read from the file alone: no package is checked."""
    return _read_patch(patch).info


def _confined(root: Path, patch_name: str, name: str) -> tuple[str, Path]:
    """(site-packages-relative path, real file) for a path of the diff, refused unless it stays in the package.

    Refused before anything is written: absolute paths, ``..`` anywhere, paths outside ``sglang/``, and paths
    that leave the package through a symlink.
    """
    rel = diffs.diff_path(name)
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel or parts[0] != PACKAGE:
        raise PatchError(f"{patch_name}: refused, path {name!r} is not inside the {PACKAGE} package "
                         f"(absolute paths, '..' and other packages are not patched); nothing was written",
                         patch=patch_name, file=rel, problem="outside_package")
    package = (root / PACKAGE).resolve()
    real = (root / rel).resolve()
    if not real.is_relative_to(package):
        raise PatchError(f"{patch_name}: refused, {rel} resolves to {real}, outside {package} (a symlink); "
                         f"nothing was written", patch=patch_name, file=rel, path=real, problem="outside_package")
    return PurePosixPath(*parts).as_posix(), real


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class _FilePlan:
    rel: str
    path: Path
    text: str
    forward: str | None
    backward: str | None
    bad_hunk: int

    @property
    def state(self) -> str | None:
        if self.backward is not None:
            return ALREADY_APPLIED
        if self.forward is not None:
            return APPLICABLE
        return None


def _plan(patch: _Patch, root: Path) -> list[_FilePlan]:
    confined = []
    for pfile in patch.files:
        if pfile.source_file != "/dev/null":
            _confined(root, patch.info.name, pfile.source_file)
        confined.append((pfile, *_confined(root, patch.info.name, pfile.target_file)))
    plans = []
    for pfile, rel, path in confined:
        if not path.is_file():
            raise PatchError(f"{rel} not found under {root}; point site_packages at a folder holding sglang 0.5.9",
                             patch=patch.info.name, file=rel, path=path, problem="missing_file")
        with path.open(encoding="utf-8", newline="") as handle:  # keep line endings byte for byte
            text = handle.read()
        forward, bad = diffs.apply_hunks(text, pfile, reverse=False)
        backward, _ = diffs.apply_hunks(text, pfile, reverse=True)
        plans.append(_FilePlan(rel, path, text, forward, backward, bad))
    return plans


def _rewrites(plans: list[_FilePlan], contents: list[str]) -> list[transaction.Rewrite]:
    return [transaction.Rewrite(p.rel, p.path, p.text, new) for p, new in zip(plans, contents)]


def _state(patch: _Patch, plans: list[_FilePlan]) -> str:
    """APPLICABLE or ALREADY_APPLIED for the whole patch; a clear error for anything else."""
    for plan in plans:
        if plan.state is None:
            raise PatchError(
                f"{plan.rel} does not match {patch.path.name} (hunk {plan.bad_hunk} context not found): "
                f"unexpected original, expected {patch.info.applies_to or 'the release the patch was made for'}",
                patch=patch.info.name, file=plan.rel, hunk=plan.bad_hunk, problem="unexpected_original")
    states = {state for state in (plan.state for plan in plans) if state is not None}  # None raised above
    if len(states) > 1:
        mixed = ", ".join(f"{p.rel}: {p.state}" for p in plans)
        raise PatchError(f"{patch.path.name} is only partly applied ({mixed}); run {RESTORE_COMMAND}",
                         patch=patch.info.name, problem="partly_applied")
    return states.pop()


# ---------------------------------------------------------------------------------------------------------
# What the patch adds (``members``)


def added_members(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None) -> list[MemberCheck]:
    """The methods the patch adds, read from the real target source whether or not it is applied. Writes nothing."""
    patch, root = _read_patch(patch_path), site_packages_root(site_packages)
    return _members(_plan(patch, root))


def _members(plans: list[_FilePlan]) -> list[MemberCheck]:
    members: list[MemberCheck] = []
    for plan in plans:
        applied = plan.state == ALREADY_APPLIED
        original, patched_text = (plan.backward, plan.text) if applied else (plan.text, plan.forward)
        if plan.path.suffix == ".py" and original is not None and patched_text is not None:
            members += [check_member(cls, fn) for cls, fn in added_methods(original, patched_text)]
    return members


# ---------------------------------------------------------------------------------------------------------
# The four actions


def _known_state(root: Path) -> None:
    """Stop at once, with the restore command, if an earlier patcher died mid-way (see ``restore``)."""

    require_known_state(root)


def _result(patch: _Patch, root: Path, action: str, status: str, **kw) -> PatchResult:
    return PatchResult(patch=patch.info.name, action=action, status=status, root=str(root), info=patch.info, **kw)


def check(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None) -> PatchResult:
    """Dry run: APPLICABLE or ALREADY_APPLIED; raises PatchError on an unexpected original. Writes nothing."""
    patch, root = _read_patch(patch_path), site_packages_root(site_packages)
    _known_state(root)
    plans = _plan(patch, root)
    status = _state(patch, plans)
    files = [FileChange(p.rel, _sha256(p.text), _sha256(p.forward or p.text)) for p in plans]
    members = _members(plans)
    _require_forwards(patch, members)  # a dry run says what apply would refuse
    message = f"{patch.info.name}: {status} to {len(plans)} file(s) under {root}"
    return _result(patch, root, "check", status, files=files, members=members, message=message)


def verify(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None) -> PatchResult:
    """The patch is applied and every method it adds forwards to the wrapped model; else PatchError."""
    patch, root = _read_patch(patch_path), site_packages_root(site_packages)
    _known_state(root)
    plans = _plan(patch, root)
    if _state(patch, plans) != ALREADY_APPLIED:
        raise PatchError(f"{patch.info.name} is not applied under {root}; run apply first",
                         patch=patch.info.name, path=root, problem="not_applied")
    return _verified(patch, root, plans)


def _require_forwards(patch: _Patch, members: list[MemberCheck], after: str = "") -> None:
    """Refuse, in one line, a patch whose added methods are not exactly forwards: the first one that does
    something else is named with that statement; else the ones that drop or change arguments."""
    extra = next((m for m in members if m.extra is not None), None)
    if extra is not None:
        raise PatchError(f"{patch.info.name}: {extra.cls}.{extra.name} does more than forward to "
                         f"{extra.delegates_to or 'the wrapped model'}: {extra.extra}; a delegating method may hold "
                         f"only a docstring, a hasattr guard and the forward{after}", patch=patch.info.name,
                         problem="not_only_forwarding", member=f"{extra.cls}.{extra.name}", extra=extra.extra)
    bad = [f"{m.cls}.{m.name}" for m in members if not m.ok]
    if bad:
        raise PatchError(f"{patch.info.name}: {', '.join(bad)} do not forward to the wrapped model with all "
                         f"arguments{after}", patch=patch.info.name, problem="not_forwarding")


def _verified(patch: _Patch, root: Path, plans: list[_FilePlan]) -> PatchResult:
    members = _members(plans)
    _require_forwards(patch, members)
    files = [FileChange(p.rel, _sha256(p.backward or ""), _sha256(p.text)) for p in plans]
    names = ", ".join(f"{m.name} -> {m.delegates_to}" for m in members) or "no methods added"
    return _result(patch, root, "verify", VERIFIED, files=files, members=members, message=f"{patch.info.name}: {names}")


def apply(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None, *,
          kind: str = backups.APPLIED) -> PatchResult:
    """Apply and verify, or change nothing: ALREADY_APPLIED is a no-op; a failure puts back what it changed.

    ``kind`` goes into the backup manifest: ``APPLIED`` (left in place on purpose) or ``TEMPORARY`` (a
    ``patched`` block that reverts it; stale if its process dies first). Signals wait until the files are
    consistent again, so an interruption never leaves a half-applied patch.
    """
    patch, root = _read_patch(patch_path), site_packages_root(site_packages)
    with backups.package_lock(root), signals.deferred():
        _known_state(root)
        plans = _plan(patch, root)
        if _state(patch, plans) == ALREADY_APPLIED:
            result = _verified(patch, root, plans)
            return _result(patch, root, "apply", ALREADY_APPLIED, files=result.files, members=result.members,
                           message=f"{patch.info.name}: already applied under {root}, nothing changed")
        _require_forwards(patch, _members(plans), "; nothing was applied")  # before any file is touched
        contents = [plan.forward or "" for plan in plans]
        rewrites = _rewrites(plans, contents)
        try:
            manifest = backups.save(root, patch.info.name, str(patch.path), kind,
                                    [(p.rel, p.text, _sha256(p.text), _sha256(c)) for p, c in zip(plans, contents)])
        except Eagle3LabError as err:
            raise PatchError(f"{patch.info.name}: could not save the originals ({reason(err)}); "
                             f"nothing was applied", patch=patch.info.name, problem="backup_failed") from None
        try:
            transaction.write_all(rewrites)
        except transaction.WriteFailed as failed:
            if failed.unrestored:
                raise PatchError(f"{patch.info.name}: applying failed ({reason(failed.cause)}) and "
                                 f"{', '.join(failed.unrestored)} could not be put back; run {RESTORE_COMMAND} "
                                 f"(backup: {manifest.path})", patch=patch.info.name, problem="apply_failed",
                                 unrestored=tuple(failed.unrestored), path=manifest.path) from None
            backups.drop(manifest)
            if not isinstance(failed.cause, Exception):
                raise failed.cause from None
            raise PatchError(f"{patch.info.name}: applying failed ({reason(failed.cause)}); "
                             f"the package is unchanged", patch=patch.info.name, problem="apply_failed",
                             unrestored=()) from None
        try:
            verified = _verified(patch, root, _plan(patch, root))
        except BaseException as err:
            unrestored = transaction.put_back(rewrites)
            if unrestored:
                raise PatchError(f"{patch.info.name}: verification failed ({reason(err)}) and "
                                 f"{', '.join(unrestored)} could not be put back; run {RESTORE_COMMAND} "
                                 f"(backup: {manifest.path})", patch=patch.info.name, problem="verify_failed",
                                 unrestored=tuple(unrestored), path=manifest.path) from None
            backups.drop(manifest)
            if isinstance(err, Eagle3LabError) or not isinstance(err, Exception):
                raise
            raise PatchError(f"{patch.info.name}: verification failed ({reason(err)}); "
                             f"the originals were restored", patch=patch.info.name, problem="verify_failed",
                             unrestored=()) from None
        files = [FileChange(p.rel, _sha256(p.text), _sha256(c)) for p, c in zip(plans, contents)]
        return _result(patch, root, "apply", APPLIED, files=files, members=verified.members,
                       backup_dir=str(manifest.folder),
                       message=f"{patch.info.name}: applied to {len(plans)} file(s) under {root}")


def revert(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None) -> PatchResult:
    """Take the patch out again (NOT_APPLIED if it is not in); leaves other stacked patches in place."""
    patch, root = _read_patch(patch_path), site_packages_root(site_packages)
    with backups.package_lock(root), signals.deferred():
        _known_state(root)
        return _revert(patch, root)


def _revert(patch: _Patch, root: Path) -> PatchResult:
    plans = _plan(patch, root)
    if _state(patch, plans) == APPLICABLE:
        return _result(patch, root, "revert", NOT_APPLIED, message=f"{patch.info.name}: not applied under {root}")
    contents = [plan.backward or "" for plan in plans]
    try:
        transaction.write_all(_rewrites(plans, contents))
    except transaction.WriteFailed as failed:
        undone = f"; {', '.join(failed.unrestored)} could not be put back either" if failed.unrestored else ""
        raise PatchError(f"{patch.info.name}: reverting failed ({reason(failed.cause)}){undone}; "
                         f"run {RESTORE_COMMAND}", patch=patch.info.name, problem="revert_failed",
                         unrestored=tuple(failed.unrestored)) from None
    manifest = backups.find(root, patch.info.name)
    if manifest is not None:
        backups.drop(manifest)
    files = [FileChange(p.rel, _sha256(p.text), _sha256(c)) for p, c in zip(plans, contents)]
    return _result(patch, root, "revert", REVERTED, files=files,
                   message=f"{patch.info.name}: reverted {len(plans)} file(s) under {root}")


@contextmanager
def held(site_packages: str | os.PathLike | None = None) -> Iterator[Path]:
    """Hold the patch lock on a root: no eagle3lab process patches or reverts it until the block ends."""
    root = site_packages_root(site_packages)
    with backups.package_lock(root):
        yield root


@contextmanager
def patched(patch_path: str | os.PathLike, site_packages: str | os.PathLike | None = None) -> Iterator[PatchResult]:
    """Apply for the duration of the block and restore the previous state on exit, on every exit path.

    Holds the package lock throughout, so two runs never see each other's patches. A patch that was already in
    place before the block stays in place. SIGTERM and SIGHUP unwind the block like Ctrl-C (the patch is
    reverted); a second signal waits until the revert is done; after SIGKILL the backup's manifest is found
    stale by the next command.
    """
    root = site_packages_root(site_packages)
    with signals.trap_termination(), backups.package_lock(root):
        result: PatchResult | None = None
        try:
            with signals.deferred():  # applied and recorded as applied, or neither
                result = apply(patch_path, root, kind=backups.TEMPORARY)
            yield result
        finally:
            if result is not None and result.status == APPLIED:
                with signals.deferred():
                    _revert(_read_patch(patch_path), root)
                signals.restored(f"patch {result.patch} reverted")


# ---------------------------------------------------------------------------------------------------------
# CLI (wired into ``python -m eagle3lab patch ...`` by cli.py)

ACTIONS = {"check": check, "apply": apply, "verify": verify, "revert": revert}  # what `eagle3lab patch` offers
