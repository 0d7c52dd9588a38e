"""Several files rewritten as one step: every file or none, and a failure undoes exactly what it did.

Each file is replaced through a temp file and ``os.replace`` (``eagle3lab.atomic``), keeping its mode, so a
reader sees the old or the new text. If a write fails, the files already replaced get their old text back, each
once; the ones that could not be put back are named, so the caller can point at the backup.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3lab.atomic import write_text_atomic
from eagle3lab.errors import Eagle3LabError, OutputWriteError


@dataclass(frozen=True)
class Rewrite:
    """One file to rewrite: its name for messages, where it is, its text now and the text it gets."""

    rel: str
    path: Path
    old: str
    new: str


class WriteFailed(Exception):
    """Writing the files failed; ``unrestored`` lists files replaced that could not be put back. A private signal
    of this package: ``package.patching`` catches it and reports a ``PatchError``, so it is not in ``errors.py``."""

    def __init__(self, cause: BaseException, unrestored: list[str]):
        super().__init__(str(cause))
        self.cause = cause
        self.unrestored = unrestored


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step, keeping its mode: a reader sees the old or the new file."""
    write_text_atomic(path, text, mode=None)


def write_all(rewrites: list[Rewrite]) -> None:
    """Write every file or none. On a failure, only the files already replaced get their old text back, once;
    files never touched are not rewritten (on a read-only folder that would only fail a second time)."""
    done: list[Rewrite] = []
    try:
        for rewrite in rewrites:
            if rewrite.new == rewrite.old:
                continue
            write_atomic(rewrite.path, rewrite.new)
            done.append(rewrite)
    except BaseException as err:
        raise WriteFailed(err, put_back(done)) from None


def put_back(rewrites: list[Rewrite]) -> list[str]:
    """Write each file's earlier text back, each once; the ones that could not be written are returned."""
    unrestored = []
    for rewrite in rewrites:
        try:
            write_atomic(rewrite.path, rewrite.old)
        except OutputWriteError:
            unrestored.append(rewrite.rel)
    return unrestored


def reason(err: BaseException) -> str:
    return str(err) if isinstance(err, Eagle3LabError) else f"{type(err).__name__}: {err}"
