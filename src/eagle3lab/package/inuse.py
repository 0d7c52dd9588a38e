"""Who is using sglang's files right now: a process holding a patch, the patch lock's holder, this checkout's run.

Why: a preflight made while a run's capture check held a patch said "sglang 0.5.9 differs from its release in
1 file (kimi_k25.py)": true for that second, but its fix (reinstall sglang) would have pulled the file from under
the run. Commands that meet a running job name it and its locks instead of reporting drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab import runguard
from eagle3lab.package import backups


@dataclass
class InUse:
    """The live holders of one sglang install; empty (falsy) when nobody else is using it."""

    root: Path
    patches: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (holder, patch, files it changed)
    patch_lock: str | None = None  # "pid N (command)" holding the patch lock now
    run: str | None = None  # "pid N (command)" holding this checkout's run lock

    def __bool__(self) -> bool:
        return bool(self.patches or self.patch_lock)

    @property
    def files(self) -> set[str]:
        """The files the live patches account for (relative to ``root``)."""
        return {rel for _, _, files in self.patches for rel in files}

    def holder(self) -> str:
        """The process to wait for: the one holding a patch, else the patch lock's holder."""
        return self.patches[0][0] if self.patches else self.patch_lock or "another eagle3lab process"

    def describe(self) -> str:
        """One clause naming every holder, e.g. "pid 12 (...) holds patch P on kimi_k25.py and the sglang patch
        lock; this checkout's run lock is held by pid 10 (python -m eagle3lab run)"."""
        parts = []
        for who, patch, files in self.patches:
            names = ", ".join(Path(rel).name for rel in files[:2]) + (f" +{len(files) - 2}" if len(files) > 2 else "")
            parts.append(f"{who} holds patch {patch} on {names or 'no file'}")
        if self.patch_lock and not any(self.patch_lock.split(" (")[0] == who.split(" (")[0]
                                       for who, _, _ in self.patches):
            parts.append(f"{self.patch_lock} holds the sglang patch lock {backups.lock_path(self.root)}")
        elif self.patch_lock:
            parts[-1] += " and the sglang patch lock"
        if self.run:
            parts.append(f"this checkout's run lock is held by {self.run}")
        return "; ".join(parts)


def in_use(root: Path) -> InUse:
    """Read-only: who, other than this process, holds ``root``'s files or its patch lock now, and this checkout's
    run. A run holding only the run lock is named only beside a holder of sglang's files (``run`` refuses a second
    run by itself)."""
    root = Path(root).resolve()
    me = backups.this_process()["pid"]
    live = [m for m in backups.manifests(root)
            if m.kind == backups.TEMPORARY and m.holder_alive() and m.holder.get("pid") != me]
    return InUse(root, [(m.describe_holder(), m.patch, [f["path"] for f in m.files]) for m in live],
                 backups.lock_holder(root), runguard.run_lock_holder())
