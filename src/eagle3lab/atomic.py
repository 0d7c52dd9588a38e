"""The one way eagle3lab writes a file: a temporary file in the same folder, then ``os.replace``.

Why: a run that dies half-way (a full disk, a signal, an exception) must never leave a truncated sidecar, figure,
report or patched sglang module behind, and must never replace a good file with a worse one. Readers see the old
file or the new one, never a mix. A full disk is reported as such, naming the path, instead of a bare ``OSError``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from eagle3lab.errors import OutputWriteError

# Files we create are world-readable like any other output (mkstemp alone would leave them 0600).
FILE_MODE = 0o644


def _describe(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device while writing {path}; free some space and rerun (nothing was replaced)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {path} ({exc.strerror}); make its folder writable and rerun (nothing was replaced)"
    return f"could not write {path}: {exc.strerror or exc} (nothing was replaced)"


def write_with(path: Path | str, fill: Callable[[Any], None], *, binary: bool = False,
               mode: int | None = FILE_MODE) -> Path:
    """Create ``path`` atomically: ``fill(handle)`` writes into a temporary sibling that is then renamed.

    ``mode=None`` keeps the mode of the file being replaced (for files we patch in place of the originals).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".eagle3lab-tmp")
    except OSError as exc:
        raise OutputWriteError(_describe(exc, path), path=path, errno=exc.errno) from None
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        keep = path.stat().st_mode & 0o7777 if mode is None and path.exists() else (mode or FILE_MODE)
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise OutputWriteError(_describe(exc, path), path=path, errno=exc.errno) from None
    except BaseException:
        _discard(tmp)
        raise
    return path


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def write_text_atomic(path: Path | str, text: str, *, mode: int | None = FILE_MODE) -> Path:
    return write_with(path, lambda handle: handle.write(text), mode=mode)


def write_bytes_atomic(path: Path | str, data: bytes) -> Path:
    return write_with(path, lambda handle: handle.write(data), binary=True)


def _json_default(value: Any) -> Any:
    import dataclasses
    import datetime as dt

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (Path, dt.date)):
        return str(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def json_text(data: Any) -> str:
    """The text ``write_json_atomic`` writes for ``data`` (so a digest can be taken over what lands on disk)."""
    return json.dumps(data, indent=2, default=_json_default) + "\n"


def write_json_atomic(path: Path | str, data: Any) -> Path:
    """JSON with two-space indent and a final newline; dataclasses, pydantic models and paths are converted."""
    return write_text_atomic(path, json_text(data))


def save_figure_atomic(fig: Any, path: Path | str, **savefig_kwargs: Any) -> Path:
    """``fig.savefig`` through a temporary file, so a failed draw never replaces the previous figure."""
    path = Path(path)
    kwargs = {"format": path.suffix.lstrip(".") or "png", **savefig_kwargs}
    return write_with(path, lambda handle: fig.savefig(handle, **kwargs), binary=True)


@contextmanager
def building_dir(target: Path | str) -> Iterator[Path]:
    """Build a folder atomically: the body fills a temporary sibling, which replaces ``target`` on success.

    Cached builds (tiny models, trained drafters, shifted drafter copies) use it, so an interrupted build is never
    found half-made under its key: on any exception the staging folder is removed and ``target`` is left as it was.
    """
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as exc:
        raise OutputWriteError(_describe(exc, target), path=target, errno=exc.errno) from None
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        raise OutputWriteError(_describe(exc, target), path=target, errno=exc.errno) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
