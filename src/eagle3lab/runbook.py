"""Run the project's notebooks with papermill, always on the project's own Jupyter kernel.

Executed copies go to ``reports/<notebook>.<profile>.ipynb``, and only a run that succeeds puts one there:
papermill writes into ``<...>.running.ipynb``, which becomes the executed copy at the end, or
``<...>.failed.ipynb`` beside the last good one if the run fails or is interrupted. The source notebooks in
``notebooks/`` stay output-free.

Interruptions (Ctrl-C, SIGTERM, SIGHUP) take one path: papermill runs in a worker thread, so this thread keeps
the signal; it stops papermill before its next cell and interrupts the cell the kernel is running, whose
``finally`` blocks revert patches and stop servers. Whatever the kernel could not finish within a grace period
is finished here: its process tree is killed and a patch it left behind is restored from its backup.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from eagle3lab.errors import Eagle3LabError, NotebookFailed, NotebookNotFound
from eagle3lab.paths import REPO_ROOT, repo_dir
from eagle3lab.runtime import procwatch
from eagle3lab import signals
from eagle3lab.runtime.profiles import load_profile, Profile
from eagle3lab.package.location import installed_root
from eagle3lab.package import backups
from eagle3lab.package.restore import restore, require_release
from eagle3lab import preflight
from eagle3lab.progress import kernel_setting as progress_for_kernels
from eagle3lab import runguard
from eagle3lab.runtime.tinymodel.drafter_training import needs_trained_drafter, trained_drafter_cached

KERNEL_NAME = "eagle3lab"
NOTEBOOKS = ("01_crash_repro", "02_interface_trace", "03_patch_and_bench")
# Run on request only (`run --notebooks 04`, `make run-vllm`; its own test in `make test`), not by `make run`: the
# report shows its section when its sidecar is there.
EXTRA_NOTEBOOKS = ("04_vllm_same_class",)
INTERRUPT_GRACE_S = 60.0  # time the kernel gets to stop its servers and revert its patches


def notebook_path(name: str) -> Path:
    """``01``, ``01_crash_repro`` or a path to an ``.ipynb`` -> the notebook file."""
    given = Path(name)
    if given.suffix == ".ipynb" and given.is_file():
        return given.resolve()
    matches = [nb for nb in NOTEBOOKS + EXTRA_NOTEBOOKS if nb == name or nb.split("_", 1)[0] == name]
    path = REPO_ROOT / "notebooks" / f"{matches[0] if matches else name}.ipynb"
    if not path.is_file():
        raise NotebookNotFound(f"notebook '{name}' not found at {path}; known: {', '.join(NOTEBOOKS)}", path=path,
                               problem="unknown_notebook")
    return path


def available_notebooks() -> list[str]:
    return [nb for nb in NOTEBOOKS if (REPO_ROOT / "notebooks" / f"{nb}.ipynb").is_file()]


def profile_name(profile: str) -> str:
    """The name files are labelled with: the profile's own ``name`` (``profile`` may be a name or a YAML path)."""

    return load_profile(profile).name


def profile_argument(profile: str) -> str:
    """What the kernel gets: a name as is, a path made absolute (papermill runs the kernel in notebooks/)."""
    path = Path(profile)
    return str(path.resolve()) if path.suffix in (".yaml", ".yml") else profile


def executed_path(name: str, profile: str) -> Path:
    return repo_dir("reports") / f"{notebook_path(name).stem}.{profile}.ipynb"


def failed_path(executed: Path) -> Path:
    """Where a failed or interrupted run's copy goes: beside the last good one, clearly named."""
    return executed.with_name(executed.name.removesuffix(".ipynb") + ".failed.ipynb")


def running_path(executed: Path) -> Path:
    return executed.with_name(executed.name.removesuffix(".ipynb") + ".running.ipynb")


class _StopBeforeCell(Exception):
    """Raised by the cell hook: an interruption came, so papermill starts no further cell."""

@dataclass
class _Execution:
    """One papermill run in a worker thread, and what the main thread needs to stop it cleanly."""

    stop: threading.Event = field(default_factory=threading.Event)
    cell_index: int | None = None
    cell_running: bool = False
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def on_cell_execute(self, cell: Any = None, cell_index: int | None = None, **_: Any) -> None:
        if self.stop.is_set():
            raise _StopBeforeCell()
        self.cell_index, self.cell_running = cell_index, True

    def on_cell_done(self, **_: Any) -> None:
        self.cell_running = False

    def hooks(self) -> dict[str, Any]:
        return {"on_cell_execute": self.on_cell_execute, "on_cell_executed": self.on_cell_done,
                "on_cell_error": self.on_cell_done}

    def start(self, target: Any) -> None:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # handed to the main thread
                self.error = exc
            finally:
                self.done.set()

        threading.Thread(target=run, name="papermill", daemon=True).start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the worker is done. Sleeps in short steps so this (main) thread handles signals; never
        ``Thread.join``: a signal raising inside it makes CPython 3.11 mark the live thread as stopped."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.done.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True


def _kernels() -> list[Any]:
    """This process's Jupyter kernels (papermill starts each as a direct child)."""
    out = []
    for proc in procwatch.descendants():
        try:
            if proc.ppid() == os.getpid() and any("ipykernel" in part for part in proc.cmdline()):
                out.append(proc)
        except Exception:  # psutil.Error: it is gone already
            pass
    return out


def _package_root() -> Path | None:
    try:

        return installed_root()
    except Eagle3LabError:
        return None


def _finish_interrupted(run: _Execution, stem: str) -> None:
    """Stop papermill and the kernel cleanly; say (``signals.restored``) what was given back, by whom."""

    kernels = _kernels()
    kernel_pids = {k.pid for k in kernels}
    servers = [p for k in kernels for p in procwatch.children_of(k.pid) if procwatch.is_sglang_server(p)]
    held = [m for m in backups.all_manifests() if m.holder.get("pid") in kernel_pids]
    run.stop.set()
    if run.cell_running:
        for kernel in kernels:
            try:
                kernel.send_signal(signal.SIGINT)  # the kernel's own Ctrl-C: the running cell unwinds
            except Exception:
                pass
    second: list[int] = []
    try:
        finished = run.wait(INTERRUPT_GRACE_S)
    except KeyboardInterrupt as again:  # a second signal: stop waiting
        second.append(getattr(again, "signum", signal.SIGINT))
        finished = False
    if finished:  # papermill shuts its kernel down at the end; give it the moment that takes
        for kernel in kernels:
            try:
                kernel.wait(10)
            except Exception:
                pass
    killed = []
    if not finished or any(procwatch.alive(k) for k in kernels):
        with signals.deferred():
            for kernel in kernels:
                killed += procwatch.kill_tree(kernel.pid)
            run.wait(10)
    for server in servers:
        if server.pid not in killed:
            signals.restored(f"sglang server pid {server.pid} stopped")
    if killed:
        why = "on a second signal" if second else \
            f"after {INTERRUPT_GRACE_S:.0f} s" if not finished else "as it did not exit after the run"
        signals.restored(f"kernel of {stem} and {len(killed) - 1} process(es) under it killed {why}")
    still = {m.path for m in backups.all_manifests()}
    for manifest in held:
        if manifest.path not in still:
            signals.restored(f"patch {manifest.patch} reverted")
    stale_roots = {m.root for m in held if m.path in still and m.stale}
    if stale_roots:

        with signals.deferred():
            for root in sorted(stale_roots):
                restore(root)


def _left_patched() -> str:
    """"; sglang is left patched ..." when a patch's holder died (a SIGKILLed kernel), else "".

    Why: a kernel killed outright runs no ``finally``; the failure line must say what it left, and how to undo it,
    not only "Kernel died" (the next command would notice, but the user reads this line first).
    """
    try:
        stale = [m for m in backups.all_manifests() if m.stale]
    except (OSError, Eagle3LabError):
        return ""
    if not stale:
        return ""
    names = ", ".join(sorted({m.patch for m in stale}))
    return (f"; sglang is left patched ({names}) by a process that is gone: restore it with "
            f"python -m eagle3lab patch restore")


def _settle(running: Path, final: Path, ok: bool) -> Path:
    """Rename papermill's in-progress copy: to the executed copy on success, else beside it as ``.failed``."""
    target = final if ok else failed_path(final)
    if running.is_file():
        os.replace(running, target)
    if ok:
        failed_path(final).unlink(missing_ok=True)  # an older failure no longer describes the last run
    return target


def run_notebook(name: str, profile: str = "cpu", parameters: dict[str, Any] | None = None,
                 progress: bool | None = None) -> Path:
    """Execute one notebook top to bottom; a cell error raises NotebookFailed, a signal raises Interrupted."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = notebook_path(name)
    output = repo_dir("reports") / f"{source.stem}.{profile_name(profile)}.ipynb"
    running = running_path(output)
    run = _Execution()
    previous = os.environ.get("EAGLE3LAB_PROGRESS")
    # The kernel inherits it: a line per measured point (to the notebook and this process's stderr), no bars.
    os.environ["EAGLE3LAB_PROGRESS"] = progress_for_kernels()
    run.start(lambda: papermill.execute_notebook(
        str(source), str(running), parameters={"profile": profile_argument(profile), **(parameters or {})},
        kernel_name=KERNEL_NAME, cwd=str(source.parent),
        progress_bar=(not os.environ.get("CI")) if progress is None else progress, **run.hooks()))
    try:
        with signals.activity(f"notebook {source.stem}"), signals.trap_termination():
            try:
                run.wait()
            except KeyboardInterrupt as exc:
                interrupted = exc if isinstance(exc, signals.Interrupted) else signals.Interrupted(signal.SIGINT)
                cell = f", cell {run.cell_index}" if run.cell_index is not None else ""
                interrupted.during = f"notebook {source.stem}{cell}"
                _finish_interrupted(run, source.stem)
                kept = _settle(running, output, ok=False)
                signals.restored(f"last good executed copy kept at {output.name}, this run's at {kept.name}"
                                 if output.is_file() else f"this run's copy at {kept.name}")
                raise interrupted from None
    finally:
        if previous is None:
            os.environ.pop("EAGLE3LAB_PROGRESS", None)
        else:
            os.environ["EAGLE3LAB_PROGRESS"] = previous
    error = run.error
    if error is None:
        return _settle(running, output, ok=True)
    kept = _settle(running, output, ok=False)
    last_good = f"; the last good run stays at {output}" if output.is_file() else ""
    last_good += _left_patched()
    if isinstance(error, PapermillExecutionError):
        message = str(error.evalue).splitlines()[0] if error.evalue else ""
        raise NotebookFailed(f"notebook {source.stem} failed in cell {error.exec_count}: {error.ename}: {message} "
                             f"(this run's copy: {kept}{last_good})", notebook=source.stem, error_name=error.ename,
                             cell=error.exec_count, path=kept) from None
    if isinstance(error, Eagle3LabError):
        raise error
    raise NotebookFailed(f"notebook {source.stem} could not run: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''} (this run's copy: {kept}{last_good})",
                         notebook=source.stem, error_name=type(error).__name__, path=kept)


def profile_overrides(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """The profile keys among notebook parameters: ``overrides`` and any profile key passed directly."""

    parameters = parameters or {}
    return {**parameters.get("overrides", {}), **{k: v for k, v in parameters.items() if k in Profile.model_fields}}


def run_all(profile: str = "cpu", names: Sequence[str] | None = None,
            parameters: dict[str, Any] | None = None,
            per_notebook: Mapping[str, Mapping[str, Any]] | None = None) -> list[Path]:
    """Run the given notebooks (default: every notebook that exists), in order, after the deployment's preflight
    (a GPU profile stops here, in seconds, instead of after loading its checkpoints) and on an unpatched sglang.

    The profile and its overrides are validated first, so a bad value fails before any notebook starts; then the
    checkout's path, the output folders (writable) and the run lock (one run per checkout), before any server.
    ``per_notebook``: parameters of one notebook's own (``"02"`` or its stem -> values), on top of ``parameters``:
    a notebook refuses a parameter it does not declare, so they cannot go to every notebook.
    """

    checked = load_profile(profile, overrides=profile_overrides(parameters))
    runguard.check_checkout_path()
    runguard.check_writable(runguard.output_folders())
    with runguard.run_lock("running the notebooks"):
        preflight.require(checked, quick=True)
        root = _package_root()
        if root is not None:
            require_release(root, "running the notebooks")
        names = list(names or available_notebooks())
        own = {notebook_path(name).stem: dict(values) for name, values in (per_notebook or {}).items()}
        with drafter_in_background(checked, profile, parameters, names) as drafter_ready:
            executed = []
            for name in names:
                stem = notebook_path(name).stem
                if stem == DRAFTER_NOTEBOOK:
                    drafter_ready()
                executed.append(run_notebook(name, profile, {**(parameters or {}), **own.get(stem, {})}))
            return executed


# The one notebook that serves the trained drafter; the ones before it do not need it, so a drafter that is not
# cached yet is trained beside them (one thread, minutes on a CPU) instead of before them.
DRAFTER_NOTEBOOK = "03_patch_and_bench"


def drafter_build_command(profile: str, parameters: dict[str, Any] | None) -> list[str]:
    """``eagle3lab setup`` for this profile and overrides: it trains and caches the drafter (nothing else is new)."""
    sets = [f"--set={key}={json.dumps(value)}" for key, value in profile_overrides(parameters).items()]
    return [sys.executable, "-m", "eagle3lab", "setup", "--profile", profile_argument(profile), *sets]


@contextmanager
def drafter_in_background(checked: Profile, profile: str, parameters: dict[str, Any] | None,
                          names: Sequence[str], command: Sequence[str] | None = None
                          ) -> Iterator[Callable[[], None]]:
    """Train the profile's drafter in a child process while the notebooks before ``DRAFTER_NOTEBOOK`` run, when it
    is needed, not cached and some notebook runs before it. Yields ``ready()``, which waits for the child (so no
    benchmark shares the CPU with training); a failed child leaves the training to notebook 03 itself, as before.
    The child never outlives the run: on any exit (error, signal) it is killed with its tree."""
    stems = [notebook_path(name).stem for name in names]
    first_use = stems.index(DRAFTER_NOTEBOOK) if DRAFTER_NOTEBOOK in stems else 0
    if first_use == 0 or not needs_trained_drafter(checked) or trained_drafter_cached(checked):
        yield lambda: None
        return
    log = repo_dir("reports") / f"drafter-build.{checked.name}.log"
    argv = list(command or drafter_build_command(profile, parameters))
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=str(REPO_ROOT))
    print(f"trained drafter: not cached; training it in the background while {', '.join(stems[:first_use])} "
          f"run (log: {log.relative_to(REPO_ROOT) if log.is_relative_to(REPO_ROOT) else log})", flush=True)
    waited = False

    def ready() -> None:
        nonlocal waited
        if waited:
            return
        waited = True
        with signals.activity("waiting for the drafter trained in the background"):
            code = child.wait()
        if code == 0:
            print(f"trained drafter: the background build is done ({time.perf_counter() - started:.0f} s after it "
                  f"started)", flush=True)
        else:
            print(f"trained drafter: the background build failed ({procwatch.describe_returncode(code)}; see "
                  f"{log.name}); {DRAFTER_NOTEBOOK} trains it itself", flush=True)

    try:
        yield ready
    finally:
        if child.poll() is None:
            procwatch.kill_tree(child.pid)
            child.wait()

