"""Faults found from outside the suite (issue 21): each one is one clear line and exit 2, nothing lost, nothing
left behind."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eagle3lab import runguard
from eagle3lab.package import backups
from eagle3lab.errors import CheckoutPathError, ProfileError
from eagle3lab.paths import REPO_ROOT, params_dir
from eagle3lab.runtime.profiles import MAX_BENCH_CONCURRENCY, MAX_BENCH_NUM_PROMPTS, load_profile

from .faultkit import Sandbox, cli, default_signals, in_namespace, needs_namespace, one_line, patience


def cpu_yaml_with(tmp_path, text: str | None = None, **changes):
    """The cpu profile with ``changes`` (or ``text`` verbatim), as ``lab.yaml`` in ``tmp_path``."""
    data = {**yaml.safe_load((params_dir() / "cpu.yaml").read_text()), **changes}
    path = tmp_path / "lab.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(data))
    return path


# ---------------------------------------------------------------------------------------------------------
# (3) a profile name is a plain name; (9) duplicate keys, bounds


@pytest.mark.parametrize("name", ["x/../../../../escaped", "../up", "a\\b", "..", ".hidden", "a..b", ""])
def test_a_profile_name_must_be_a_plain_name(tmp_path, name):
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, name=name))
    assert "key 'name'" in str(err.value)


def test_preflight_with_an_escaping_profile_name_writes_nothing_outside(sandbox, tmp_path):
    profile = cpu_yaml_with(sandbox.work, text=(params_dir() / "cpu.yaml").read_text().replace(
        "name: cpu", 'name: "x/../../escaped"'))
    result = cli(sandbox, "preflight", "--profile", str(profile))
    assert result.returncode == 2
    assert "key 'name': Value error, must be a plain name" in one_line(result.stderr)
    assert not list(tmp_path.rglob("*escaped*")) and not (sandbox.work.parent.parent / "escaped.json").exists()


def test_duplicate_yaml_keys_are_refused_with_line_and_column(tmp_path):
    text = (params_dir() / "cpu.yaml").read_text() + "port: 31000\n"
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, text=text))
    message = str(err.value)
    assert "duplicate key 'port'" in message and f"{tmp_path / 'lab.yaml'}:" in message


@pytest.mark.parametrize("changes, key", [
    ({"bench_concurrency": [MAX_BENCH_CONCURRENCY + 1]}, "bench_concurrency[0]"),
    ({"bench_concurrency": [10000]}, "bench_concurrency[0]"),
    ({"bench_num_prompts": MAX_BENCH_NUM_PROMPTS + 1}, "bench_num_prompts"),
    ({"bench_num_prompts": 1e8}, "bench_num_prompts"),
    ({"bench_num_prompts": "1e8"}, "bench_num_prompts"),
])
def test_benchmark_sizes_are_bounded_integers(tmp_path, changes, key):
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, **changes))
    assert f"key '{key}'" in str(err.value)


def test_a_huge_benchmark_override_fails_at_once_in_one_line(sandbox):
    result = cli(sandbox, "run", "--set", "bench_num_prompts=100000000", "--notebooks", "01")
    assert result.returncode == 2
    assert "override: key 'bench_num_prompts': Input should be less than or equal to" in one_line(result.stderr)
    assert not (sandbox.work / "reports").exists()


# ---------------------------------------------------------------------------------------------------------
# (10) the patch lock wait ends, and names the holder


@pytest.mark.parametrize("command", [("patch", "check", "kimi_k25-one-method"), ("patch", "restore"), ("patch", "apply", "kimi_k25-one-method")])
def test_a_stopped_lock_holder_is_named_and_the_wait_ends(sandbox, no_leftover_processes, command):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from eagle3lab.package import patching\n"
         "with patching.held():\n    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=sandbox.env(), preexec_fn=default_signals)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)  # hung: holds the lock, never releases it
        result = cli(sandbox, *command, EAGLE3LAB_LOCK_TIMEOUT_S="2")
        assert result.returncode == 2 and "Traceback" not in result.stderr
        *waited, line = [x for x in result.stderr.splitlines() if x.startswith("eagle3lab:")]
        assert all(f"eagle3lab: waiting for pid {holder.pid} (" in x for x in waited)  # if said, names the holder
        assert f"still held after 2 s by pid {holder.pid}" in line and "stopped" in line, line
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=patience(30))
    sandbox.assert_nothing_left()


PATCH_LOCK_HOLDER = ("import time; from eagle3lab.package import patching\n"
                     "with patching.held():\n    print('held', flush=True); time.sleep(600)\n")
RUN_LOCK_HOLDER = ("import time; from eagle3lab import runguard\n"
                   "with runguard.run_lock('test'):\n    print('held', flush=True); time.sleep(600)\n")


def start_holder(sandbox: Sandbox, script: str) -> subprocess.Popen:
    """A process running ``script`` against the sandbox, once it has printed "held"."""
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=sandbox.env(),
                              preexec_fn=default_signals)
    assert holder.stdout.readline().strip() == "held"
    return holder


def end(holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGCONT)
    holder.kill()
    holder.wait(timeout=patience(30))


# Issue 43 (9): a holder stopped in the instant between taking the lock and writing its name (or whose file this
# user cannot read) was "another eagle3lab process"; the kernel's lock table names it on every path.
@pytest.mark.parametrize("command", [("patch", "check", "kimi_k25-one-method"), ("patch", "restore"),
                                     ("run", "--notebooks", "01")])
def test_a_stopped_lock_holder_that_wrote_no_name_is_named_from_the_lock_table(sandbox, no_leftover_processes,
                                                                                command):
    holder = start_holder(sandbox, PATCH_LOCK_HOLDER)
    try:
        backups.lock_path(sandbox.root).write_text("")  # as just after its flock, before it wrote its name
        holder.send_signal(signal.SIGSTOP)
        result = cli(sandbox, *command, EAGLE3LAB_LOCK_TIMEOUT_S="2")
    finally:
        end(holder)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "another eagle3lab process" not in result.stderr
    *waited, line = [x for x in result.stderr.splitlines() if x.startswith("eagle3lab:")]
    assert all(f"eagle3lab: waiting for pid {holder.pid} (" in x and "stopped" in x for x in waited), waited
    assert f"still held after 2 s by pid {holder.pid} (" in line and "stopped" in line, line
    sandbox.assert_nothing_left()


@pytest.mark.parametrize("args", [("run", "--notebooks", "01"), ("report", "--no-run")])
def test_a_run_lock_holder_that_wrote_no_name_is_named_from_the_lock_table(sandbox, no_leftover_processes, args):
    holder = start_holder(sandbox, RUN_LOCK_HOLDER)
    try:
        (sandbox.work / "artifacts" / runguard.RUN_LOCK_NAME).write_text("")
        result = cli(sandbox, *args)
    finally:
        end(holder)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert f"another eagle3lab run is using this checkout's outputs: pid {holder.pid} (" in line, line


# Issue 43 (9): nan and inf passed the "> 0" check and every wait was endless; a bad value said so only after a
# "waiting for" line. Now one line, exit 2, before any wait.
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "soon"])
def test_a_lock_timeout_that_is_not_a_positive_number_is_refused_before_any_wait(sandbox, no_leftover_processes,
                                                                                value):
    holder = start_holder(sandbox, PATCH_LOCK_HOLDER)
    try:
        results = [cli(sandbox, *command, EAGLE3LAB_LOCK_TIMEOUT_S=value, timeout=60)
                   for command in (("patch", "check", "kimi_k25-one-method"), ("patch", "restore"),
                                   ("run", "--notebooks", "01"))]
    finally:
        end(holder)
    for result in results:
        assert result.returncode == 2, result.stderr[-2000:]
        line = one_line(result.stderr)
        assert f"EAGLE3LAB_LOCK_TIMEOUT_S must be a number of seconds above 0 and at most 86400, got {value!r}" in line
    sandbox.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# (4) one run per checkout


def test_a_second_run_in_the_same_checkout_is_refused_naming_the_first(sandbox, no_leftover_processes):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from eagle3lab import runguard\n"
         "with runguard.run_lock('test'):\n    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=sandbox.env(), preexec_fn=default_signals)
    try:
        assert holder.stdout.readline().strip() == "held"
        for args in (("run", "--notebooks", "01"), ("report", "--no-run")):
            result = cli(sandbox, *args)
            assert result.returncode == 2
            line = one_line(result.stderr)
            assert "another eagle3lab run is using this checkout's outputs" in line and f"pid {holder.pid}" in line
        assert not list((sandbox.work / "reports").glob("*.ipynb"))  # nothing of the second run was written
        assert not (sandbox.work / "REPORT.md").exists()
    finally:
        holder.kill()
        holder.wait(timeout=patience(30))
    assert cli(sandbox, "report", "--no-run").stderr.count("another eagle3lab run") == 0  # a dead holder frees it
    sandbox.assert_nothing_left()


def test_the_run_lock_is_reentrant_within_one_process_and_leaves_no_file(sandbox):
    with runguard.run_lock("outer"), runguard.run_lock("inner"):
        assert runguard.run_lock_path().is_file()
    assert not runguard.run_lock_path().exists()
    with runguard.run_lock("again"):  # a released lock is taken again at once
        pass


# Issue 43 (6): a notebook run directly (papermill, Jupyter) took no lock and ran to the end beside `eagle3lab run`,
# writing the same outputs. Its first call (params.begin) now takes the run lock for the kernel's life; a kernel
# the run itself started shares the run's lock (the token in RUN_LOCK_ENV, and the holder is its ancestor).

BEGIN = "from eagle3lab.notebook import params\nparams.begin({'__name__': '__main__'})\nprint('began', flush=True)"


def test_a_notebook_shares_the_lock_of_the_run_that_started_it_and_of_no_other(sandbox, no_leftover_processes):
    script = ("import subprocess, sys, time; from eagle3lab import runguard\n"
              "with runguard.run_lock('test'):\n"
              f"    subprocess.run([sys.executable, '-c', {BEGIN!r}], check=True)\n"
              "    print('held', flush=True); time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=sandbox.env(),
                              preexec_fn=default_signals)
    try:
        assert holder.stdout.readline().strip() == "began"  # the run's own child went on
        assert holder.stdout.readline().strip() == "held"
        token = runguard.read_holder(sandbox.work / "artifacts" / runguard.RUN_LOCK_NAME)["token"]
        # not the run's child: refused, even carrying its token
        result = subprocess.run([sys.executable, "-c", BEGIN], capture_output=True, text=True, cwd=sandbox.work,
                                env=sandbox.env(**{runguard.RUN_LOCK_ENV: token}), timeout=patience(120),
                                preexec_fn=default_signals)
    finally:
        end(holder)
    assert result.returncode == 1 and "began" not in result.stdout
    assert (f"RunLockedError: another eagle3lab run is using this checkout's outputs: pid {holder.pid} ("
            in result.stderr.splitlines()[-1]), result.stderr[-2000:]


@pytest.mark.notebook
def test_notebook_02_run_directly_beside_a_run_stops_in_its_first_cell_naming_it(sandbox, no_leftover_processes,
                                                                                   tmp_path):
    holder = start_holder(sandbox, RUN_LOCK_HOLDER)
    executed = tmp_path / "02.ipynb"
    try:
        result = subprocess.run([sys.executable, "-m", "papermill", str(REPO_ROOT / "notebooks" /
                                                                      "02_interface_trace.ipynb"), str(executed),
                                 "-p", "verify_fixes", "False"],  # were it not refused: no minutes of checks
                                capture_output=True, text=True, env=sandbox.env(), cwd=sandbox.work,
                                timeout=patience(300), preexec_fn=default_signals)
    finally:
        end(holder)
    assert result.returncode != 0
    said = [line for line in result.stderr.splitlines() if line.startswith("RunLockedError:")]
    assert len(said) == 1 and f"outputs: pid {holder.pid} (" in said[0], result.stderr[-3000:]
    import nbformat

    code = [cell for cell in nbformat.read(executed, as_version=4).cells if cell.cell_type == "code"]
    assert code[0].outputs[-1].traceback == said, "the first cell's error is the one line, not a traceback"
    assert all(cell.execution_count is None for cell in code[1:]), "cells ran after the refusal"
    assert not list((sandbox.work / "artifacts").glob("*.json")) and not (sandbox.work / "reports").exists()


@pytest.mark.notebook
def test_a_notebook_run_directly_holds_the_lock_and_a_runs_own_notebooks_share_it(sandbox, no_leftover_processes,
                                                                                   tmp_path):
    from .faultkit import make_notebook, wait_for

    began, go, done = tmp_path / "began", tmp_path / "go", tmp_path / "done"
    first = "from eagle3lab.notebook import params\nparams.begin(globals())"
    notebook = make_notebook(tmp_path / "hold.ipynb", first,
                             f"import time\nfrom pathlib import Path\nPath({str(began)!r}).write_text('began')\n"
                             f"while not Path({str(go)!r}).exists():\n    time.sleep(0.1)")
    direct = subprocess.Popen([sys.executable, "-m", "papermill", str(notebook), str(tmp_path / "out.ipynb"),
                               "-k", "eagle3lab"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=sandbox.env(), cwd=sandbox.work, preexec_fn=default_signals)
    try:
        wait_for(lambda: began.exists() or direct.poll() is not None, what="the kernel to take the lock")
        refused = cli(sandbox, "report", "--no-run")
    finally:
        go.write_text("go")
        _, stderr = direct.communicate(timeout=patience(120))
    assert direct.returncode == 0, stderr[-3000:]
    line = one_line(refused.stderr)
    assert refused.returncode == 2 and "another eagle3lab run is using this checkout's outputs: pid " in line
    assert "ipykernel" in line, line  # the kernel of the notebook run directly
    assert not (sandbox.work / "artifacts" / runguard.RUN_LOCK_NAME).exists()  # released with the kernel
    # run's own kernel shares run's lock
    shared = make_notebook(tmp_path / "shared.ipynb", first, f"open({str(done)!r}, 'w').write('done')")
    result = cli(sandbox, "run", "--notebooks", str(shared))
    assert result.returncode == 0 and done.exists(), result.stderr[-3000:]
    sandbox.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# (8) output folders checked before anything starts; (5) the checkout's path


def test_an_output_folder_that_cannot_be_created_fails_before_anything_runs(sandbox):
    blocker = sandbox.work / "a-file"
    blocker.write_text("not a folder")
    result = cli(sandbox, "run", "--notebooks", "01", EAGLE3LAB_FIGURES_DIR=str(blocker / "figures"))
    assert result.returncode == 2
    assert "cannot create the output folder figures/" in one_line(result.stderr)
    assert not (sandbox.work / "reports").exists() or not list((sandbox.work / "reports").iterdir())


@needs_namespace
@pytest.mark.parametrize("folder", ["figures", "reports", "artifacts"])
def test_a_read_only_output_folder_fails_in_one_line_before_any_server(sandbox, folder):
    target = sandbox.work / folder
    target.mkdir(parents=True)
    result = subprocess.run(in_namespace(f"mount --bind {target} {target} && mount -o remount,bind,ro {target}",
                                         [sys.executable, "-m", "eagle3lab", "run", "--notebooks", "01"]),
                            capture_output=True, text=True, env=sandbox.env(), cwd=sandbox.work,
                            timeout=patience(300), preexec_fn=default_signals)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result.stderr)
    assert f"the output folder {target} is not writable (Read-only file system)" in line
    assert "sglang.launch_server" not in result.stderr
    sandbox.assert_nothing_left()


@pytest.mark.parametrize("path", ["/home/me/my lab/eagle3lab", "/home/me/l\u00e4b/eagle3lab", "/x/tab\there"])
def test_a_checkout_path_with_spaces_or_non_ascii_is_refused_naming_it(path):
    with pytest.raises(CheckoutPathError) as err:
        runguard.check_checkout_path((Path("/fine/path"), Path(path)))
    assert repr(path) in str(err.value) and "cannot link" in str(err.value)
    runguard.check_checkout_path((Path("/fine/path-1.2_x"),))


# ---------------------------------------------------------------------------------------------------------
# (2) the drafter cache is checked like the tiny models' cache, and rebuilt when damaged

SMALL_RECIPE = dict(train_prompts=64, heldout_prompts=8, optimizer_steps=4, batch_size=16, eval_every=4,
                    warmup_steps=1)


@pytest.fixture(scope="module")
def drafter_roots(tmp_path_factory):
    return tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("drafters")


def _build_small(drafter_roots, capsys=None):
    from eagle3lab.runtime.tinymodel.drafter_training import DrafterRecipe, DrafterWorkload, build_trained_drafter

    models, drafters = drafter_roots
    return build_trained_drafter(5, DrafterWorkload(input_len=8, output_len=6, benchmark_prompts=2),
                                 DrafterRecipe(**SMALL_RECIPE), cache_root=drafters, models_root=models)


@pytest.mark.parametrize("damage", ["truncate weights", "delete config", "truncate weights, old cache"])
def test_a_damaged_drafter_cache_is_detected_and_rebuilt(drafter_roots, capsys, damage):
    import json

    from eagle3lab.runtime.tinymodel.drafter_training import HISTORY_FILE, cache_damage

    first = _build_small(drafter_roots)
    weights, config = first.path / "model.safetensors", first.path / "config.json"
    whole = weights.read_bytes()
    if "old cache" in damage:  # a cache from before checksums were recorded: the structural check finds it
        history = json.loads((first.path / HISTORY_FILE).read_text())
        history.pop("files")
        (first.path / HISTORY_FILE).write_text(json.dumps(history))
    if "truncate" in damage:
        weights.write_bytes(whole[: len(whole) // 2])
    else:
        config.unlink()
    capsys.readouterr()
    again = _build_small(drafter_roots)
    said = capsys.readouterr().out
    assert f"the cache at {first.path} is damaged (" in said and "training it again" in said
    assert again.build_seconds is not None  # retrained, not "(cached)"
    assert cache_damage(again.path, again.history["files"]) is None
    assert weights.stat().st_size == len(whole) and config.is_file()


def test_a_damaged_shifted_copy_is_rebuilt(drafter_roots):
    from eagle3lab.runtime.tinymodel.drafter_training import cache_damage, shifted_drafter

    trained = _build_small(drafter_roots)
    shifted = shifted_drafter(trained.path)
    weights = shifted / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[:100])
    again = shifted_drafter(trained.path)
    assert again == shifted and weights.read_bytes() == whole
    assert cache_damage(shifted, None) is None


# ---------------------------------------------------------------------------------------------------------
# (1) a hung benchmark fails the run; the last good record and figures are kept


def _report_with(failed_point: bool):
    from eagle3lab.bench.sweep import POINT_FAILED, SERVER_DIED, BenchReport

    from conftest import synthetic_arm

    baseline = synthetic_arm("baseline", [1, 2], 0.02)
    eagle3 = synthetic_arm("eagle3", [1, 2], 0.01, verify_ct=4)
    if failed_point:
        stalled = eagle3.points[1]
        stalled.status, stalled.reason = POINT_FAILED, f"{SERVER_DIED}: no token for 120 s (stall)"
    return BenchReport.create("cpu", [baseline, eagle3])


def test_a_stalled_benchmark_point_fails_and_keeps_the_last_good_record(tmp_path):
    from eagle3lab.errors import BenchmarkIncomplete
    from eagle3lab.notebook.patch_and_bench.bench_records import BENCH_REPORT, BENCH_REPORT_FAILED, save_complete_report

    good = save_complete_report(_report_with(failed_point=False), tmp_path)
    assert good == tmp_path / BENCH_REPORT
    before = good.read_bytes()
    with pytest.raises(BenchmarkIncomplete) as err:
        save_complete_report(_report_with(failed_point=True), tmp_path)
    assert "arm eagle3 at concurrency 2: server died: no token for 120 s" in str(err.value)
    assert good.read_bytes() == before  # the last good record is not replaced
    assert (tmp_path / BENCH_REPORT_FAILED).is_file()  # the broken run's evidence is kept apart


def test_notebook_03_checks_the_benchmark_before_drawing_any_figure():
    """The check sits in the benchmark step (Benchmark.measure saves only a complete report), before the figure
    and sidecar steps, so a broken run draws nothing."""
    import inspect

    from eagle3lab.notebook import benchmark, patch_bench_run
    from eagle3lab.runbook import notebook_path

    source = notebook_path("03").with_suffix(".py").read_text()
    check = source.index("run.measure()")
    assert check < source.index("run.bench_figures()") and check < source.index("run.model_figures()")
    assert check < source.index("run.write_sidecar()")
    measure = inspect.getsource(benchmark.Benchmark.measure)
    assert "save_complete_report(" in measure
    for module in (benchmark, patch_bench_run):  # no other writer of bench_report.json
        assert "report.save(" not in inspect.getsource(module)


# ---------------------------------------------------------------------------------------------------------
# (11) papermill run directly: its SIGTERM (alone or to its process group) reverts the kernel's patch


@pytest.mark.notebook
@pytest.mark.parametrize("target", ["papermill alone", "its process group"])
def test_sigterm_to_papermill_run_directly_reverts_the_kernels_patch(sandbox, no_leftover_processes, tmp_path,
                                                                      target):
    import os

    from eagle3lab.package.release import sha256_file

    from .faultkit import KIMI, make_notebook, sandbox_processes, wait_for

    flag = tmp_path / "applied"
    notebook = make_notebook(
        tmp_path / "hold.ipynb",
        "import time\nfrom pathlib import Path\nfrom eagle3lab.package import patching\n"
        "from eagle3lab.notebook import params\nparams.begin(globals())",
        f"with patching.patched('kimi_k25-one-method'):\n    Path({str(flag)!r}).write_text('applied')\n"
        f"    time.sleep(600)")
    run = subprocess.Popen([sys.executable, "-m", "papermill", str(notebook), str(tmp_path / "out.ipynb"),
                            "-k", "eagle3lab"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=sandbox.env(), cwd=sandbox.work, preexec_fn=default_signals, start_new_session=True)
    wait_for(lambda: flag.exists() or run.poll() is not None, what="the kernel to apply the patch")
    assert run.poll() is None and sha256_file(sandbox.kimi) != sandbox.release[KIMI]  # really patched
    if target == "papermill alone":
        run.send_signal(signal.SIGTERM)
    else:
        os.killpg(run.pid, signal.SIGTERM)
    run.communicate(timeout=patience(60))
    wait_for(lambda: not sandbox_processes(sandbox), timeout=90, what="the kernel to revert and exit")
    sandbox.assert_nothing_left()  # reverted, no manifest left


# ---------------------------------------------------------------------------------------------------------
# (7) the kernel SIGKILLed while patched: the run's line says sglang is left patched and how to restore it


@pytest.mark.notebook
def test_a_kernel_killed_while_patched_says_sglang_is_left_patched(sandbox, no_leftover_processes, tmp_path):
    import psutil

    from .faultkit import make_notebook, start_cli, wait_for

    flag = tmp_path / "applied"
    notebook = make_notebook(
        tmp_path / "hold.ipynb", "import time\nfrom pathlib import Path\nfrom eagle3lab.package import patching",
        f"with patching.patched('kimi_k25-one-method'):\n    Path({str(flag)!r}).write_text('applied')\n"
        f"    time.sleep(600)")
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))
    wait_for(lambda: flag.exists() or run.poll() is not None, what="the kernel to apply the patch")
    kernel = next(p for p in psutil.Process(run.pid).children() if "ipykernel" in " ".join(p.cmdline()))
    kernel.send_signal(signal.SIGKILL)
    _, stderr = run.communicate(timeout=patience(180))
    assert run.returncode == 2
    line = one_line(stderr)
    assert "notebook hold" in line and "sglang is left patched (kimi_k25-one-method)" in line
    assert "restore it with python -m eagle3lab patch restore" in line
    assert cli(sandbox, "patch", "restore").returncode == 0  # the named command does undo it
    sandbox.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# (6) a full cache filesystem during set-up: one line, exit 2, nothing half-built left


@needs_namespace
def test_setup_on_a_full_cache_filesystem_is_one_line_and_exit_2(sandbox, no_leftover_processes):
    cache = sandbox.cache
    cache.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(in_namespace(f"mount -t tmpfs -o size=512k tmpfs {cache}",
                                         [sys.executable, "-m", "eagle3lab", "setup", "--profile", "cpu"]),
                            capture_output=True, text=True, env=sandbox.env(), cwd=sandbox.work,
                            timeout=patience(600), preexec_fn=default_signals)
    assert result.returncode == 2, result.stderr[-3000:]
    line = one_line(result.stderr)
    assert line.startswith("eagle3lab: no space left on the device") and "EAGLE3LAB_CACHE" in line, line
    sandbox.assert_nothing_left()


@needs_namespace
def test_make_on_a_disk_too_small_for_the_venv_says_so_before_pip(tmp_path):
    """The README's first command on a nearly full disk: one line naming the space needed and free, no half venv."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, checkout / name)
    disk = tmp_path / "small"
    disk.mkdir()
    venv = disk / "venv"
    result = subprocess.run(in_namespace(f"mount -t tmpfs -o size=64m tmpfs {disk}",
                                         ["sh", "-c", 'make --no-print-directory VENV="$1" "$1/.eagle3lab-installed"; '
                                          'status=$?; if [ -e "$1" ]; then echo "left: $1"; fi; exit $status',
                                          "sh", str(venv)]),
                            capture_output=True, text=True, cwd=checkout, timeout=60)
    assert result.returncode != 0, result.stdout
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert errors == ["error: the venv needs about 12 GB and this disk has 0 GB free; free some space or pass VENV= "
                      "on a bigger disk"], result.stdout + result.stderr
    assert "left:" not in result.stdout, "a half venv was left on the small disk"


def fake_python(path: Path, version: str, calls: Path) -> Path:
    """An interpreter that says it is Python ``version`` and records anything else it is asked to do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\ncase "$1" in -c) echo {version}; exit 0;; esac\necho "$*" >> {calls}\nexit 1\n')
    path.chmod(0o755)
    return path


# Issue 43 (10): with Python 3.12, make spent 192 s in pip before "requires a different Python".
@pytest.mark.parametrize("case", ["PYTHON", "an old venv", "3.11"])
def test_make_checks_the_python_version_before_the_venv(tmp_path, case):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, checkout / name)
    calls, venv = tmp_path / "calls", tmp_path / "venv"
    python = fake_python(tmp_path / "bin" / f"python{'3.11' if case == '3.11' else '3.12'}",
                         "3.11" if case == "3.11" else "3.12", calls)
    if case == "an old venv":  # a venv made with 3.12 by an earlier make
        fake_python(venv / "bin" / "python", "3.12", calls)
    result = subprocess.run(["make", "--no-print-directory", f"PYTHON={python}", f"VENV={venv}", "VENV_GB=0",
                             f"{venv}/.eagle3lab-installed"], capture_output=True, text=True, cwd=checkout,
                            timeout=60)
    assert result.returncode != 0
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    said = calls.read_text() if calls.exists() else ""
    if case == "3.11":  # the check passes: the venv is made (by the fake, which then fails)
        assert errors == [] and said.startswith("-m venv "), result.stdout + result.stderr
        return
    expected = (f"error: {python} is Python 3.12, needs 3.11; pass PYTHON=python3.11 or the path of a Python 3.11"
                if case == "PYTHON" else
                f"error: the venv {venv} has Python 3.12, needs 3.11; remove it or pass VENV=...")
    assert errors == [expected], result.stdout + result.stderr
    assert said == "", "the interpreter was asked to make the venv or run pip"
    assert case == "an old venv" or not venv.exists()


def test_a_full_disk_deep_in_a_library_is_recognised():
    from eagle3lab.commands.cli import full_disk_line

    try:
        try:
            raise OSError(28, "No space left on device", "/cache/x.safetensors")
        except OSError as inner:
            raise RuntimeError("save failed") from inner
    except RuntimeError as exc:
        assert "while writing /cache/x.safetensors" in full_disk_line(exc)
    assert full_disk_line(Exception("I/O error: No space left on device (os error 28)")) is not None
    assert full_disk_line(ValueError("something else")) is None


# ---------------------------------------------------------------------------------------------------------
# (4) notebook 01 holds the patch lock from its "unpatched?" check through its launch


def test_the_crash_reproduction_takes_the_patch_lock_before_checking_and_launching(sandbox, no_leftover_processes):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from eagle3lab.package import patching\n"
         "with patching.held():\n    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=sandbox.env(), preexec_fn=default_signals)
    script = ("from eagle3lab.repro.crashrepro import reproduce_crash\n"
              "from eagle3lab.runtime.deployment import Models\n"
              "from eagle3lab.runtime.profiles import load_profile\n"
              "from eagle3lab.errors import PatchError\n"
              "try:\n    reproduce_crash(load_profile('cpu'), Models('/nonexistent/t', '/nonexistent/d'), '.')\n"
              "except PatchError as exc:\n    print('refused:', exc)\n")
    try:
        assert holder.stdout.readline().strip() == "held"
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=sandbox.work,
                                env=sandbox.env(EAGLE3LAB_LOCK_TIMEOUT_S="2"), timeout=patience(120),
                                preexec_fn=default_signals)
    finally:
        holder.kill()
        holder.wait(timeout=patience(30))
    assert result.stdout.startswith("refused: the sglang patch lock"), result.stdout + result.stderr[-2000:]
    assert f"by pid {holder.pid}" in result.stdout
    assert not (sandbox.work / "01_eagle3_launch.cpu.log").exists()  # nothing was launched
    sandbox.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# (11, also) an interrupt during the benchmark ends the sweep now, not after the whole benchmark


def test_an_interrupted_sweep_inside_a_kernel_loop_is_cancelled_at_once():
    import asyncio
    import os
    import threading
    import time

    from eagle3lab.bench.sweep import run_async

    cancelled = threading.Event()

    async def forever():
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def like_a_notebook_cell():  # Jupyter's loop is running: run_async uses its worker thread
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as ipykernel sets it while a cell runs
        return run_async(forever)

    previous = signal.getsignal(signal.SIGINT)
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # the runbook's SIGINT to the kernel
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(like_a_notebook_cell())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancelled.wait(patience(10)), "the sweep went on after the interrupt"
    assert time.monotonic() - started < patience(60)  # a bound, not a measurement: before, it waited 600 s
