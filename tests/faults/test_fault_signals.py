"""SIGTERM and SIGHUP take Ctrl-C's clean way out: in the CLI, in the notebook kernel, and in every helper that
holds a patch or a server. One line says what was interrupted and what was restored; nothing is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from eagle3lab.package.release import sha256_file
from eagle3lab import signals
from leftovers import gone

from .faultkit import (
    FULL,
    KIMI,
    ONE,
    cli,
    command_lines,
    default_signals,
    make_notebook,
    one_line,
    patience,
    relaunch_notebook,
    start_cli,
    wait_for,
)


def holding_notebook(path: Path, flag: Path, patch: str = FULL) -> Path:
    """A notebook whose second cell holds a patch on the installed sglang (the sandbox's copy) and waits."""
    return make_notebook(
        path,
        "import time\nfrom pathlib import Path\nfrom eagle3lab.package import patching",
        f"""
        with patching.patched({patch!r}):
            Path({str(flag)!r}).write_text("applied")
            time.sleep(600)
        """,
        "print('the next cell ran')")


# ---------------------------------------------------------------------------------------------------------
# The CLI running a notebook whose kernel holds a patch


@pytest.mark.notebook
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_signal_to_run_while_the_kernel_holds_a_patch(sandbox, no_leftover_processes, tmp_path, sig):
    flag = tmp_path / "applied"
    notebook = holding_notebook(tmp_path / "hold.ipynb", flag)
    reports = sandbox.work / "reports"
    reports.mkdir(parents=True)
    good = reports / "hold.cpu.ipynb"
    good.write_text('{"a good run": true}')
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))
    wait_for(lambda: flag.exists() or run.poll() is not None, what="the kernel to apply the patch")
    assert run.poll() is None, run.communicate()
    assert sandbox.manifests() and sha256_file(sandbox.kimi) != sandbox.release[KIMI]  # really patched
    run.send_signal(sig)
    _, stderr = run.communicate(timeout=patience(180))

    assert run.returncode == 128 + sig
    line = one_line(stderr)
    name = signal.Signals(sig).name
    assert line.startswith(f"eagle3lab: {name} interrupted notebook hold, cell ")
    assert f"patch {FULL} reverted" in line
    assert "last good executed copy kept at hold.cpu.ipynb" in line
    sandbox.assert_nothing_left()
    assert good.read_text() == '{"a good run": true}'  # the last good run is not replaced
    last = json.loads((reports / "hold.cpu.failed.ipynb").read_text())["cells"][-1]
    assert last["outputs"] == [] and last["execution_count"] is None  # no cell ran after the interruption


@pytest.mark.notebook
def test_sigterm_before_the_kernel_holds_anything_says_nothing_needed_restoring(sandbox, no_leftover_processes,
                                                                                 tmp_path):
    flag = tmp_path / "started"
    notebook = make_notebook(tmp_path / "wait.ipynb",
                             f"import time\nfrom pathlib import Path\nPath({str(flag)!r}).write_text('x')\n"
                             f"time.sleep(600)")
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))
    wait_for(lambda: flag.exists() or run.poll() is not None, what="the cell to start")
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=patience(120))
    assert run.returncode == 143
    line = one_line(stderr)
    assert line.startswith("eagle3lab: SIGTERM interrupted notebook wait, cell ")  # never silent
    assert "this run's copy at wait.cpu.failed.ipynb" in line
    assert not (sandbox.work / "reports" / "wait.cpu.ipynb").exists()  # no failed run poses as executed
    sandbox.assert_nothing_left()


@pytest.mark.notebook
def test_sigterm_to_the_kernel_itself_reverts_its_patch(sandbox, no_leftover_processes, tmp_path):
    """The kernel, not the CLI, gets the signal (an OOM killer's SIGTERM, a supervisor): the helper holding the
    patch unwinds, the run fails in one line naming the interruption."""
    flag = tmp_path / "applied"
    notebook = holding_notebook(tmp_path / "hold.ipynb", flag)
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))
    wait_for(lambda: flag.exists() or run.poll() is not None, what="the kernel to apply the patch")
    kernel = next(p for p in psutil.Process(run.pid).children() if "ipykernel" in " ".join(p.cmdline()))
    kernel.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=patience(180))
    assert run.returncode == 2
    line = one_line(stderr)
    assert "notebook hold failed in cell" in line and "Interrupted: SIGTERM" in line
    sandbox.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# A helper process (no CLI) holding a patch or a server


HOLD_SCRIPT = """
import sys, time
from pathlib import Path
from eagle3lab.package import patching
with patching.patched(sys.argv[1]):
    Path(sys.argv[2]).write_text("applied")
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_a_helper_holding_a_patch_reverts_it(sandbox, no_leftover_processes, tmp_path, sig):
    flag = tmp_path / "applied"
    helper = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, ONE, str(flag)], env=sandbox.env(),
                              stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    wait_for(lambda: flag.exists() or helper.poll() is not None, what="the patch")
    assert len(sandbox.manifests()) == 1
    helper.send_signal(sig)
    _, stderr = helper.communicate(timeout=patience(60))
    assert helper.returncode != 0 and "Interrupted" in stderr  # unwound like Ctrl-C, not killed outright
    sandbox.assert_nothing_left()


def test_second_signal_waits_until_the_restore_is_done():
    """Inside ``deferred()`` a signal only marks itself; it is raised once the block is complete."""
    steps = []
    with signals.trap_termination():
        with pytest.raises(signals.Interrupted) as err:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGHUP)
                steps.append("restore finished")
        assert steps == ["restore finished"] and err.value.signame == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # released: the default is back


def test_trap_keeps_an_ignored_signal_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with signals.trap_termination():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.server
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_a_helper_holding_a_server_stops_its_tree(sandbox, no_leftover_processes, tmp_path, sig,
                                                             cpu_profile, tiny_models):
    from eagle3lab.runtime.server import check_port_free, free_port

    port = free_port()
    script = textwrap.dedent(f"""
        import json
        from eagle3lab.runtime.profiles import load_profile
        from eagle3lab.runtime.deployment import Models, server_spec
        from eagle3lab.runtime.server import ServerProcess
        spec = server_spec(load_profile("cpu"), Models({tiny_models.target!r}, {tiny_models.draft!r}),
                           speculative=False, shims=("mla_torch_native",), port={port})
        server = ServerProcess(spec, {str(tmp_path / 'server.log')!r})
        server.start()
        print(json.dumps({{"pid": server.pid}}), flush=True)
        try:
            server.wait({patience(600)!r})
        finally:
            server.stop()
    """)
    helper = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=sandbox.env(), preexec_fn=default_signals)
    pid = json.loads(helper.stdout.readline())["pid"]
    launcher = psutil.Process(pid)
    wait_for(lambda: len(launcher.children(recursive=True)) >= 2, what="sglang's subprocesses")
    members = [launcher, *launcher.children(recursive=True)]
    helper.send_signal(sig)
    _, stderr = helper.communicate(timeout=patience(120))
    assert "Interrupted" in stderr
    assert all(gone(proc) for proc in members)
    check_port_free("127.0.0.1", port)
    sandbox.assert_nothing_left()


def test_sigterm_during_setup_is_one_line_and_leaves_no_half_built_model(sandbox, no_leftover_processes):
    """The tiny-model build runs a probe subprocess and stages files: SIGTERM removes both, says so in a line."""
    run = start_cli(sandbox, "setup", "--profile", "cpu")

    def probing() -> bool:
        for child in psutil.Process(run.pid).children():
            try:
                if "tinymodel.probe" in " ".join(child.cmdline()):
                    return True
            except psutil.Error:
                pass
        return False

    wait_for(lambda: probing() or run.poll() is not None, timeout=300, what="the tiny-model probe")
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=patience(120))
    assert run.returncode == 143
    assert one_line(stderr) == "eagle3lab: SIGTERM interrupted setup --profile cpu; nothing needed restoring"
    models = sandbox.cache / "models"
    assert not models.exists() or list(models.iterdir()) == []  # no staging folder, no half-built model
    sandbox.assert_nothing_left()


def test_cli_exit_statuses_follow_the_shell_convention(sandbox):
    """An ordinary error stays exit 2 with one line, so scripts tell refusals from interruptions (128 + n)."""
    result = cli(sandbox, "patch", "apply")
    assert result.returncode == 2 and one_line(result.stderr).endswith("needs a patch: a file, or a name from patches/")


@pytest.mark.server
@pytest.mark.notebook
def test_sigterm_to_run_during_a_real_patched_relaunch(sandbox, no_leftover_processes, tmp_path, tiny_models):
    """The issue's case: SIGTERM while notebook 03's relaunch chain has the one-method patch applied and its
    EAGLE-3 server starting. The kernel stops the server tree and reverts the patch; the CLI says so."""
    from eagle3lab.runtime.server import check_port_free, free_port

    port = free_port()
    notebook = relaunch_notebook(tmp_path / "chain.ipynb", tiny_models, tmp_path / "logs", port)
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))
    wait_for(lambda: any("sglang.launch_server" in line for line in command_lines(run.pid)) or run.poll() is not None,
             what="the patched EAGLE-3 launch")
    assert run.poll() is None and sha256_file(sandbox.kimi) != sandbox.release[KIMI]
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=patience(180))
    assert run.returncode == 143
    line = one_line(stderr)
    print(line)  # for the record
    assert line.startswith("eagle3lab: SIGTERM interrupted notebook chain, cell ")
    assert f"patch {ONE} reverted" in line and "sglang server pid" in line and " stopped" in line
    sandbox.assert_nothing_left()
    check_port_free("127.0.0.1", port)


def test_children_of_the_tests_start_with_sighup_at_its_default_even_under_nohup():
    """The suite passes however it is launched: a runner under ``nohup`` ignores SIGHUP, and the children the
    tests start must not inherit that (else every SIGHUP case waits for a signal the child ignores)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        probe = "import signal; print(signal.getsignal(signal.SIGHUP) == signal.SIG_DFL)"
        inherited = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        reset = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                               preexec_fn=default_signals)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert inherited.stdout.strip() == "False"  # the fault the issue saw: ignored, inherited
    assert reset.stdout.strip() == "True"
