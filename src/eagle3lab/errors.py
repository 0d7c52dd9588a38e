"""One place for every failure eagle3lab reports.

Each error carries a message that names the problem and what to do next; the CLI and the notebooks print
it as one line (``str(err)``), never a traceback.
"""

from __future__ import annotations


class Eagle3LabError(Exception):
    """Base class: a problem the user can fix, reported as one line."""


class ProfileError(Eagle3LabError):
    """A parameter profile is missing, malformed, has an unknown key or a mistyped value."""


class EnvironmentProblem(Eagle3LabError):
    """The installed software does not match what the profile needs (sglang missing, wrong version, ...)."""


class ModelPathError(Eagle3LabError):
    """A model path does not exist or does not hold a model."""


class PortInUseError(Eagle3LabError):
    """The server port is already taken by another process."""


class HostBindError(Eagle3LabError):
    """The server's host cannot be bound on this machine (not one of its addresses, or not resolvable)."""


class ServerTimeoutError(Eagle3LabError):
    """The server neither became ready nor died within the time allowed."""


class ServerDiedError(Eagle3LabError):
    """The server exited while it was expected to be up."""


class ExpectationError(Eagle3LabError):
    """A run did not behave as the notebook asserts (for example: the expected crash did not happen)."""


class SourceError(Eagle3LabError):
    """sglang source for a release could not be found, downloaded or read."""


class EntryClassError(Eagle3LabError):
    """An entry model class does not exist in the scanned source."""


class PatchError(Eagle3LabError):
    """A patch could not be checked, applied, verified or reverted."""


class BenchError(Eagle3LabError):
    """A benchmark could not run or its data is unusable."""


class HarnessBuildError(Eagle3LabError):
    """The CPU harness (stub libcuda, shims) could not be built or set up."""


class TinyModelError(Eagle3LabError):
    """The tiny model could not be generated (bad size parameters, unwritable cache, ...)."""


class PerfModelError(Eagle3LabError):
    """A cost-model parameter is missing its source, out of range, or a calibration is impossible."""


class UnsupportedArchitectureError(PerfModelError):
    """A config names an architecture the cost model has no layout for (one line naming the supported ones)."""


class DiagnosticsError(Eagle3LabError):
    """Evidence handed to the diagnostics (server info, log, layer table, records) is malformed."""


class CaptureCheckError(Eagle3LabError):
    """The in-process EAGLE-3 capture check could not run or produced no result."""


class NotebookFailed(Eagle3LabError):
    """A notebook raised in one of its cells while papermill executed it."""


class OutputWriteError(Eagle3LabError):
    """An output (sidecar, figure, report, patched file) could not be written; the previous one is kept."""


class StaleStateError(PatchError):
    """The installed sglang is left patched by a process that is gone, or differs from every state we know."""


class ReportInputError(Eagle3LabError):
    """A sidecar or executed notebook the report needs is missing, unreadable or out of date."""


class PreflightFailed(Eagle3LabError):
    """A deployment check found a problem before anything was launched (GPUs, sglang, checkpoints, flags)."""


class FetchError(Eagle3LabError):
    """A checkpoint could not be listed or downloaded from the hub or the mirror."""


class SidecarError(Eagle3LabError):
    """A notebook's JSON sidecar is missing, unreadable, of another schema version or does not match its schema."""


class RunLockedError(Eagle3LabError):
    """Another eagle3lab run holds this checkout's run lock (its outputs would mix with this one's)."""


class CheckoutPathError(Eagle3LabError):
    """The checkout or its environment sits at a path the toolchain cannot use (spaces, non-ASCII characters)."""


class BenchmarkIncomplete(Eagle3LabError):
    """The benchmark ran but measured nothing usable (an arm died or stalled): no speedup to report."""
