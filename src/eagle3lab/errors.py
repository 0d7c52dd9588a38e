"""One place for every failure eagle3lab reports.

Each error carries a message that names the problem and what to do next; the CLI and the notebooks print
it as one line (``str(err)``), never a traceback. It also carries the facts behind the message as keyword fields
(``ProfileError(msg, path=..., key=...)``): a caller or a test reads ``err.key``, never parses the wording. A
subclass declares the fields its raise sites set (each ``None`` unless given); ``err.fields`` holds what was given.
A field the class does not declare is refused (``TypeError``, a bug at the raise site): a misspelt field used to
become an attribute nobody read, while ``err.<declared>`` stayed ``None``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Eagle3LabError(Exception):
    """Base class: a problem the user can fix, reported as one line, with the facts behind it as fields."""

    problem: str | None = None  # which failure of this class, as a short key ("missing", "not_applied", ...)

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        undeclared = sorted(set(fields) - declared_fields(type(self)))
        if undeclared:
            raise TypeError(f"{type(self).__name__} declares no field {', '.join(map(repr, undeclared))}; declare it "
                            f"on the class (declared: {', '.join(sorted(declared_fields(type(self))))})")
        self.fields: dict[str, Any] = dict(fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the fields across pickling (a child process's error reaching its parent)
        return (_rebuild, (type(self), str(self), self.fields))


def declared_fields(cls: type[Eagle3LabError]) -> frozenset[str]:
    """The fields an error class and its bases declare (their annotated class attributes)."""
    return frozenset(name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {})
                     if name != "fields")


def _rebuild(cls: type[Eagle3LabError], message: str, fields: dict[str, Any]) -> Eagle3LabError:
    return cls(message, **fields)


class NotebookNotFound(Eagle3LabError):
    """A notebook asked for by name is not one of the project's notebooks."""

    path: Path | None = None  # where it was looked for


class ProfileError(Eagle3LabError):
    """A parameter profile is missing, malformed, has an unknown key or a mistyped value."""

    source: str | None = None  # the profile file (or "override") the bad value came from
    key: str | None = None  # the profile key (with an index, "bench_concurrency[1]")
    # problem: "missing", "unknown", "invalid", "not_found", "yaml", "not_a_mapping", "type"
    value: Any = None  # the value given, when it was wrong
    profile: str | None = None  # the name or path asked for
    line: int | None = None  # 1-based, for YAML syntax errors
    column: int | None = None


class EnvironmentProblem(Eagle3LabError):
    """The installed software does not match what the profile needs (sglang missing, wrong version, ...)."""

    package: str | None = None
    expected: str | None = None  # the version the profile pins
    found: str | None = None  # the version installed (None: not installed)


class ModelPathError(Eagle3LabError):
    """A model path does not exist or does not hold a model."""

    path: Path | None = None
    role: str | None = None  # "target", "draft", ...


class PortInUseError(Eagle3LabError):
    """The server port is already taken by another process."""

    port: int | None = None
    host: str | None = None


class HostBindError(Eagle3LabError):
    """The server's host cannot be bound on this machine (not one of its addresses, or not resolvable)."""

    host: str | None = None


class ServerTimeoutError(Eagle3LabError):
    """The server neither became ready nor died within the time allowed."""

    timeout_s: float | None = None
    log: Path | None = None


class ServerDiedError(Eagle3LabError):
    """The server exited while it was expected to be up."""

    returncode: int | None = None
    log: Path | None = None


class ExpectationError(Eagle3LabError):
    """A run did not behave as the notebook asserts (for example: the expected crash did not happen)."""

    expected: Any = None
    found: Any = None
    log: Path | None = None
    arm: str | None = None
    concurrency: int | None = None


class SourceError(Eagle3LabError):
    """sglang source for a release could not be found, downloaded or read."""

    version: str | None = None
    path: Path | None = None
    newest: str | None = None  # the newest release on the index, when the asked one is not there
    file: str | None = None  # a file inside the package
    engine: str | None = None  # an engine name that is not one of the canary's
    packages: tuple[str, ...] | list[str] | None = None  # packages whose sources are not installed


class EntryClassError(Eagle3LabError):
    """An entry model class does not exist in the scanned source."""

    entry_class: str | None = None
    version: str | None = None
    architectures: tuple[str, ...] | None = None
    path: Path | None = None


class PatchError(Eagle3LabError):
    """A patch could not be checked, applied, verified or reverted."""

    patch: str | None = None
    file: str | None = None  # the file inside the package (site-packages relative)
    hunk: int | None = None  # 1-based hunk of that file's section
    path: Path | None = None
    unrestored: tuple[str, ...] | None = None  # files a failed write could not put back
    member: str | None = None  # "Class.method" an added method that is not exactly a forward
    extra: str | None = None  # what that method does besides forwarding ("line 730: `os.system('x')`")
    value: Any = None  # a setting given with a wrong value (a lock timeout)


class BenchError(Eagle3LabError):
    """A benchmark could not run or its data is unusable."""

    path: Path | None = None
    key: str | None = None  # the setting or record field at fault ("concurrency", "kind")
    value: Any = None
    line: int | None = None  # 1-based line of a JSONL file
    arm: str | None = None
    concurrency: int | None = None


class HarnessBuildError(Eagle3LabError):
    """The CPU harness (stub libcuda, shims) could not be built or set up."""

    tool: str | None = None
    shim: str | None = None
    path: Path | None = None


class TinyModelError(Eagle3LabError):
    """The tiny model could not be generated (bad size parameters, unwritable cache, ...)."""

    parameter: str | None = None
    value: Any = None
    path: Path | None = None


class PerfModelError(Eagle3LabError):
    """A cost-model parameter is missing its source, out of range, or a calibration is impossible."""

    parameter: str | None = None
    value: Any = None
    path: Path | None = None


class UnsupportedArchitectureError(PerfModelError):
    """A config names an architecture the cost model has no layout for (one line naming the supported ones)."""

    architecture: str | None = None
    supported: tuple[str, ...] | None = None


class DiagnosticsError(Eagle3LabError):
    """Evidence handed to the diagnostics (server info, log, layer table, records) is malformed."""

    path: Path | None = None
    what: str | None = None  # which evidence ("server info", "layer table", "acceptance", "requests file")


class CaptureCheckError(Eagle3LabError):
    """The in-process EAGLE-3 capture check could not run or produced no result."""

    profile: str | None = None
    path: Path | None = None
    returncode: int | None = None
    timeout_s: float | None = None
    patch: str | None = None


class NotebookFailed(Eagle3LabError):
    """A notebook raised in one of its cells while papermill executed it."""

    notebook: str | None = None
    error_name: str | None = None  # the exception class the cell raised ("ExpectationError")
    cell: int | None = None  # its execution count
    path: Path | None = None  # this run's executed copy


class OutputWriteError(Eagle3LabError):
    """An output (sidecar, figure, report, patched file) could not be written; the previous one is kept."""

    path: Path | None = None
    errno: int | None = None


class StaleStateError(PatchError):
    """The installed sglang is left patched by a process that is gone, or differs from every state we know."""

    holder_pid: int | None = None  # the process that left the patch on


class ReportInputError(Eagle3LabError):
    """A sidecar or executed notebook the report needs is missing, unreadable or out of date."""

    path: Path | None = None
    notebook: str | None = None
    line: int | None = None  # where a JSON file stops parsing
    column: int | None = None


class PreflightFailed(Eagle3LabError):
    """A deployment check found a problem before anything was launched (GPUs, sglang, checkpoints, flags)."""

    check: str | None = None  # the first failed check's name
    failed: tuple[str, ...] | None = None  # every failed check's name
    profile: str | None = None


class FetchError(Eagle3LabError):
    """A checkpoint could not be listed or downloaded from the hub or the mirror."""

    repo: str | None = None
    path: Path | None = None
    needed_gb: float | None = None
    free_gb: float | None = None


class SidecarError(Eagle3LabError):
    """A notebook's JSON sidecar is missing, unreadable, of another schema version, does not match its schema, was
    written for another profile ("other_profile") or was changed after the run wrote it ("changed")."""

    path: Path | None = None
    notebook: str | None = None
    profile: str | None = None
    version: Any = None  # the schema version found in the file
    expected: int | None = None  # the schema version this eagle3lab reads
    location: str | None = None  # where the file departs from its schema ("crash.seconds_to_outcome")
    found: str | None = None  # the profile the sidecar was written for, when it is not the one asked for


class RunLockedError(Eagle3LabError):
    """Another eagle3lab run holds this checkout's run lock (its outputs would mix with this one's)."""

    path: Path | None = None  # the lock file

    def _render_traceback_(self) -> list[str]:
        """In a notebook (IPython asks for this), the one line, not a traceback through the first cell."""
        return [f"{type(self).__name__}: {self}"]


class CheckoutPathError(Eagle3LabError):
    """The checkout or its environment sits at a path the toolchain cannot use (spaces, non-ASCII characters)."""


class BenchmarkIncomplete(Eagle3LabError):
    """The benchmark ran but measured nothing usable (an arm died or stalled): no speedup to report."""
