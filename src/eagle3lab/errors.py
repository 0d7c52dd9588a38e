"""One place for every failure eagle3lab reports.

Each error carries a message that names the problem and what to do next; the CLI and the notebooks print
it as one line (``str(err)``), never a traceback. It also carries the facts behind the message as keyword fields
(``ProfileError(msg, path=..., key=...)``): a caller or a test reads ``err.key``, never parses the wording. A
subclass declares the fields its raise sites set (each ``None`` unless given); ``err.fields`` holds what was given.
A field the class does not declare is refused (``TypeError``, a bug at the raise site): a misspelt field used to
become an attribute nobody read, while ``err.<declared>`` stayed ``None``. Likewise ``problem``: each class narrows it
to a Literal of the failures it reports (``problems(cls)``), and any other value is refused. The harness errors under
``runtime/cpu_harness`` (hashed into the release records) report through ``HarnessBuildError``'s Literal.

Every error a caller may see lives here. Where a caller would reasonably catch a builtin, the class is one too
(``ServerTimeoutError`` is a ``TimeoutError``). The exceptions defined elsewhere are private signals that never
leave their module or package (the argparse ``_ParserError``s, ``package.transaction.WriteFailed``,
``runbook._StopBeforeCell``), and the three ``HarnessBuildError`` subclasses under ``runtime/cpu_harness``, which
stay there because that folder is hashed into the release records.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal, Optional


class Eagle3LabError(Exception):
    """Base class: a problem the user can fix, reported as one line, with the facts behind it as fields."""

    # which failure of this class, as a short key: each subclass narrows it to its own Literal, and a raise site that
    # gives another is refused like an undeclared field (this base names none)
    problem: Optional[str] = None

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        undeclared = sorted(set(fields) - declared_fields(type(self)))
        if undeclared:
            raise TypeError(f"{type(self).__name__} declares no field {', '.join(map(repr, undeclared))}; declare it "
                            f"on the class (declared: {', '.join(sorted(declared_fields(type(self))))})")
        problem = fields.get("problem")
        if problem is not None and problem not in problems(type(self)):
            raise TypeError(f"{type(self).__name__} has no problem {problem!r}; add it to the class's problem Literal "
                            f"(its problems: {', '.join(sorted(problems(type(self)))) or 'none'})")
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


def problems(cls: type[Eagle3LabError]) -> frozenset[str]:
    """The ``problem`` keys an error class may carry: the strings of its ``problem`` annotation's Literal."""
    def strings(hint: Any) -> set[str]:
        found = {hint} if isinstance(hint, str) else set()
        for arg in typing.get_args(hint):
            found |= strings(arg)
        return found
    return frozenset(strings(typing.get_type_hints(cls).get("problem")))


def _rebuild(cls: type[Eagle3LabError], message: str, fields: dict[str, Any]) -> Eagle3LabError:
    return cls(message, **fields)


class CommandLineError(Eagle3LabError):
    """Options that do not go together on the command line."""

    problem: Optional[Literal["vllm_live_alone"]] = None


class GpuCheckError(Eagle3LabError):
    """``make gpu-check`` cannot run here (no GPU, another profile) or found a failed row."""

    problem: Optional[Literal["gpu_check_failed", "gpu_check_profile", "no_gpu"]] = None


class NotebookNotFound(Eagle3LabError):
    """A notebook asked for by name is not one of the project's notebooks."""

    problem: Optional[Literal["unknown_notebook"]] = None

    path: Path | None = None  # where it was looked for


class ProfileError(Eagle3LabError):
    """A parameter profile is missing, malformed, has an unknown key or a mistyped value."""

    problem: Optional[Literal[
        "bad_override", "encoding", "invalid", "missing", "not_a_mapping", "not_found", "notebook_bug",
        "type", "unknown", "unreadable", "yaml"]] = None

    source: str | None = None  # the profile file (or "override") the bad value came from
    key: str | None = None  # the profile key (with an index, "bench_concurrency[1]")
    value: Any = None  # the value given, when it was wrong
    profile: str | None = None  # the name or path asked for
    line: int | None = None  # 1-based, for YAML syntax errors
    column: int | None = None


class EnvironmentProblem(Eagle3LabError):
    """The installed software does not match what the profile needs (sglang missing, wrong version, ...)."""

    problem: Optional[Literal[
        "no_tcmalloc", "no_torch_pin", "not_installed", "parser_failed", "pip_failed", "timeout",
        "wrong_version"]] = None

    package: str | None = None
    expected: str | None = None  # the version the profile pins
    found: str | None = None  # the version installed (None: not installed)


class ModelPathError(Eagle3LabError):
    """A model path does not exist or does not hold a model."""

    problem: Optional[Literal[
        "missing", "no_config", "no_weight_map", "no_weights", "not_a_drafter", "not_an_object", "unreadable",
        "unreadable_index"]] = None

    path: Path | None = None
    role: str | None = None  # "target", "draft", ...


class ModelsNotFetched(ModelPathError):
    """A profile's checkpoint is not on this machine (not a directory, not in the Hugging Face cache)."""

    problem: None = None  # no raise site of this class names a problem


class PortInUseError(Eagle3LabError):
    """The server port is already taken by another process."""

    problem: None = None  # no raise site of this class names a problem

    port: int | None = None
    host: str | None = None


class HostBindError(Eagle3LabError):
    """The server's host cannot be bound on this machine (not one of its addresses, or not resolvable)."""

    problem: Optional[Literal["not_bindable", "not_permitted", "unresolvable"]] = None

    host: str | None = None


class ServerTimeoutError(Eagle3LabError, TimeoutError):
    """The server neither became ready nor died within the time allowed. A ``TimeoutError`` too, so a caller that
    bounds a wait catches it as any other timeout."""

    problem: None = None  # no raise site of this class names a problem

    timeout_s: float | None = None
    log: Path | None = None


class ServerDiedError(Eagle3LabError):
    """The server exited while it was expected to be up."""

    problem: None = None  # no raise site of this class names a problem

    returncode: int | None = None
    log: Path | None = None


class ExpectationError(Eagle3LabError):
    """A run did not behave as the notebook asserts (for example: the expected crash did not happen)."""

    problem: Optional[Literal[
        "cpu_backend_missing", "disagreement", "generate_failed", "interface_gap", "member_not_in_contract",
        "no_cpu_record", "no_server_acceptance", "no_speculation", "not_lossless", "not_measured", "not_up",
        "patch_without_effect", "unpatched_not_a_gap"]] = None

    expected: Any = None
    found: Any = None
    log: Path | None = None
    arm: str | None = None
    concurrency: int | None = None


class SourceError(Eagle3LabError):
    """sglang source for a release could not be found, downloaded or read."""

    problem: Optional[Literal[
        "corrupt", "download_failed", "hook_not_evaluable", "hook_sets_nothing", "missing_file",
        "missing_function", "no_engine", "no_hook", "no_package", "no_plus_one", "no_registry", "no_release",
        "not_a_version", "not_in_record", "not_installed", "not_on_index", "offline", "sources_not_installed",
        "stale_record", "unknown_engine", "unparsable", "unreadable_class"]] = None

    version: str | None = None
    path: Path | None = None
    newest: str | None = None  # the newest release on the index, when the asked one is not there
    file: str | None = None  # a file inside the package
    engine: str | None = None  # an engine name that is not one of the canary's
    packages: tuple[str, ...] | list[str] | None = None  # packages whose sources are not installed


class EntryClassError(Eagle3LabError):
    """An entry model class does not exist in the scanned source."""

    problem: Optional[Literal["missing", "no_architectures", "not_defined", "not_registered", "unreadable"]] = None

    entry_class: str | None = None
    version: str | None = None
    architectures: tuple[str, ...] | None = None
    path: Path | None = None


class PatchError(Eagle3LabError):
    """A patch could not be checked, applied, verified or reverted."""

    problem: Optional[Literal[
        "apply_failed", "backup_failed", "bad_timeout", "empty_diff", "held", "invalid_diff", "lock_failed",
        "manifest_unreadable", "missing_file", "no_patch", "not_a_directory", "not_applied", "not_forwarding",
        "not_found", "not_installed", "not_only_forwarding", "outside_backup", "outside_package",
        "partly_applied", "patched", "revert_failed", "stale_backup", "still_differs", "unexpected_original",
        "unexplained_change", "verify_failed", "wheel_mismatch", "wheel_unreadable"]] = None

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

    problem: Optional[Literal[
        "empty", "exit_status", "incomplete_record", "length_mismatch", "missing", "missing_key",
        "mixed_concurrency", "no_measured", "no_reference", "not_json", "not_speculative", "predates_check",
        "remeasure_failed", "speculative", "timeout", "too_few_prompts", "unknown_keys", "unpaired_rounds",
        "unreachable", "unreadable", "zero_throughput"]] = None

    path: Path | None = None
    key: str | None = None  # the setting or record field at fault ("concurrency", "kind")
    value: Any = None
    line: int | None = None  # 1-based line of a JSONL file
    arm: str | None = None
    concurrency: int | None = None


class HarnessBuildError(Eagle3LabError):
    """The CPU harness (stub libcuda, shims) could not be built or set up."""

    problem: Optional[Literal[
        "below_one", "cycle", "dim", "dtype", "leaves_selection", "no_libraries", "no_parent", "no_symbols",
        "not_installed", "not_ported", "other_release", "shape", "tool_failed", "tool_missing", "unknown",
        "unknown_shim", "unsupported"]] = None

    tool: str | None = None
    shim: str | None = None
    path: Path | None = None


class TinyModelError(Eagle3LabError):
    """The tiny model could not be generated (bad size parameters, unwritable cache, ...)."""

    problem: Optional[Literal[
        "damaged", "empty", "incomplete_history", "mismatch", "out_of_range", "probe_failed", "ragged",
        "too_few_rows", "too_shallow", "unknown", "unreadable"]] = None

    parameter: str | None = None
    value: Any = None
    path: Path | None = None


class PerfModelError(Eagle3LabError):
    """A cost-model parameter is missing its source, out of range, or a calibration is impossible."""

    problem: Optional[Literal[
        "above_model_ceiling", "acceptance_out_of_range", "already_evaluated", "bad_link",
        "below_model_floor", "conflict", "constants_changed", "cycle_shorter_than_model", "duplicate",
        "empty", "frozen_commit_unreadable", "gated", "held_out_read", "indivisible", "invalid", "missing",
        "no_bandwidth", "no_config", "no_constants_commit", "no_single_stream", "not_a_drafter",
        "not_a_number", "not_an_integer", "not_found", "not_modelled", "not_positive", "out_of_range",
        "published_value_fitted", "unknown", "unknown_key", "unknown_parameter", "unparsable", "unreachable",
        "unreadable", "unsupported", "wrong_length"]] = None

    parameter: str | None = None
    value: Any = None
    path: Path | None = None


class UnsupportedArchitectureError(PerfModelError):
    """A config names an architecture the cost model has no layout for (one line naming the supported ones)."""

    problem: None = None  # no raise site of this class names a problem

    architecture: str | None = None
    supported: tuple[str, ...] | None = None


class DiagnosticsError(Eagle3LabError):
    """Evidence handed to the diagnostics (server info, log, layer table, records) is malformed."""

    problem: Optional[Literal["missing", "no_rows", "not_a_mapping", "rejected"]] = None

    path: Path | None = None
    what: str | None = None  # which evidence ("server info", "layer table", "acceptance", "requests file")


class CaptureCheckError(Eagle3LabError):
    """The in-process EAGLE-3 capture check could not run or produced no result."""

    problem: Optional[Literal[
        "already_patched", "no_layer_table", "no_result", "not_a_directory", "not_pristine", "timeout",
        "wrong_release"]] = None

    profile: str | None = None
    path: Path | None = None
    returncode: int | None = None
    timeout_s: float | None = None
    patch: str | None = None


class NotebookFailed(Eagle3LabError):
    """A notebook raised in one of its cells while papermill executed it."""

    problem: None = None  # no raise site of this class names a problem

    notebook: str | None = None
    error_name: str | None = None  # the exception class the cell raised ("ExpectationError")
    cell: int | None = None  # its execution count
    path: Path | None = None  # this run's executed copy


class OutputWriteError(Eagle3LabError):
    """An output (sidecar, figure, report, patched file) could not be written; the previous one is kept."""

    problem: None = None  # no raise site of this class names a problem

    path: Path | None = None
    errno: int | None = None


class StaleStateError(PatchError):
    """The installed sglang is left patched by a process that is gone, or differs from every state we know."""

    problem: Optional[Literal["patched", "stale_backup", "unexplained_change"]] = None

    holder_pid: int | None = None  # the process that left the patch on


class ReportInputError(Eagle3LabError):
    """A sidecar or executed notebook the report needs is missing, unreadable or out of date."""

    problem: Optional[Literal["failed_run", "missing", "nothing", "other_profile", "stale", "unreadable"]] = None

    path: Path | None = None
    notebook: str | None = None
    line: int | None = None  # where a JSON file stops parsing
    column: int | None = None


class PreflightFailed(Eagle3LabError):
    """A deployment check found a problem before anything was launched (GPUs, sglang, checkpoints, flags)."""

    problem: None = None  # no raise site of this class names a problem

    check: str | None = None  # the first failed check's name
    failed: tuple[str, ...] | None = None  # every failed check's name
    profile: str | None = None


class FetchError(Eagle3LabError):
    """A checkpoint could not be listed or downloaded from the hub or the mirror."""

    problem: Optional[Literal["download_stopped", "list_failed", "no_space", "offline"]] = None

    repo: str | None = None
    path: Path | None = None
    needed_gb: float | None = None
    free_gb: float | None = None


class SidecarError(Eagle3LabError):
    """A notebook's JSON sidecar is missing, unreadable, of another schema version, does not match its schema, was
    written for another profile ("other_profile") or was changed after the run wrote it ("changed")."""

    problem: Optional[Literal["changed", "other_profile"]] = None

    path: Path | None = None
    notebook: str | None = None
    profile: str | None = None
    version: Any = None  # the schema version found in the file
    expected: int | None = None  # the schema version this eagle3lab reads
    location: str | None = None  # where the file departs from its schema ("crash.seconds_to_outcome")
    found: str | None = None  # the profile the sidecar was written for, when it is not the one asked for


class RunLockedError(Eagle3LabError):
    """Another eagle3lab run holds this checkout's run lock (its outputs would mix with this one's)."""

    problem: None = None  # no raise site of this class names a problem

    path: Path | None = None  # the lock file

    def _render_traceback_(self) -> list[str]:
        """In a notebook (IPython asks for this), the one line, not a traceback through the first cell."""
        return [f"{type(self).__name__}: {self}"]


class CheckoutPathError(Eagle3LabError):
    """The checkout or its environment sits at a path the toolchain cannot use (spaces, non-ASCII characters)."""

    problem: None = None  # no raise site of this class names a problem


class BenchmarkIncomplete(Eagle3LabError):
    """The benchmark ran but measured nothing usable (an arm died or stalled): no speedup to report."""

    problem: None = None  # no raise site of this class names a problem
