"""Validation up front: profile paths work wherever profile names do, list elements are validated, YAML errors
have a line and column, ``setup`` checks model paths and the tiny-model cache against its checksums (and
``--rebuild`` rebuilds it), a host that cannot be bound is reported as such, and a full disk under artifacts is
named before a server starts."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from eagle3lab.errors import HostBindError, PortInUseError
from eagle3lab.paths import params_dir
from eagle3lab.runtime.server import check_port_free, free_port

from .faultkit import (
    cli,
    default_signals,
    in_namespace,
    make_notebook,
    needs_namespace,
    one_line,
    patience,
)


def profile_file(folder: Path, name: str = "lab", **changes) -> Path:
    data = {**yaml.safe_load((params_dir() / "cpu.yaml").read_text()), "name": name, **changes}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_report_accepts_a_profile_path(sandbox):
    """Files are named by the profile's own name; before, a path crashed with a 46-line FileNotFoundError."""
    profile = profile_file(sandbox.work / "mine")
    result = cli(sandbox, "report", "--no-run", "--profile", "mine/lab.yaml")  # relative to the working folder
    assert result.returncode == 2
    assert f"there is no executed notebook {sandbox.work / 'reports' / '01_crash_repro.lab.ipynb'}" in \
        one_line(result.stderr)
    assert profile.is_file()


@pytest.mark.notebook
def test_run_accepts_a_profile_path(sandbox, no_leftover_processes, tmp_path):
    profile_file(sandbox.work / "mine", bench_concurrency=[3])
    notebook = make_notebook(tmp_path / "which.ipynb",
                             'profile = "cpu"',  # becomes the parameters cell below
                             "from eagle3lab.runtime.profiles import load_profile\nP = load_profile(profile)\n"
                             "assert (P.name, P.bench_concurrency) == ('lab', [3]), P")
    data = json.loads(notebook.read_text())
    data["cells"][0]["metadata"]["tags"] = ["parameters"]
    notebook.write_text(json.dumps(data))
    result = cli(sandbox, "run", "--profile", "mine/lab.yaml", "--notebooks", str(notebook))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (sandbox.work / "reports" / "which.lab.ipynb").is_file()
    sandbox.assert_nothing_left()


@pytest.mark.parametrize("override, expected", [
    ("bench_concurrency=[0, -3]", "override: key 'bench_concurrency[0]': Input should be greater than 0"),
    ("bench_concurrency=[]", "override: key 'bench_concurrency': List should have at least 1 item"),
    ("port=70000", "override: key 'port': Input should be less than 65536"),
])
def test_bad_list_elements_and_values_fail_at_once(sandbox, override, expected):
    result = cli(sandbox, "run", "--set", override, "--notebooks", "01")
    assert result.returncode == 2 and expected in one_line(result.stderr)
    assert not (sandbox.work / "reports").exists()  # nothing ran


def test_invalid_yaml_is_one_line_with_line_and_column(sandbox):
    bad = sandbox.work / "bad.yaml"
    bad.write_text("name: lab\nbench_concurrency: [1, 2\nport: 30000\n")
    result = cli(sandbox, "setup", "--profile", str(bad))
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(f"eagle3lab: {bad}:3:5: not valid YAML (expected ',' or ']'")


def test_setup_checks_model_paths(sandbox, tmp_path):
    missing = tmp_path / "no-such-model"
    profile = profile_file(tmp_path, cpu_harness=False, target_model=str(missing), draft_model=str(missing),
                           cost_model="none")  # no model of its own to validate: the paths are what is checked
    result = cli(sandbox, "setup", "--profile", str(profile))
    assert result.returncode == 2
    assert one_line(result.stderr) == (f"eagle3lab: target model path {missing} does not exist; check the profile's "
                                       f"'target_model' setting")


@pytest.fixture
def cached_tiny_models(sandbox, tiny_models):
    """The user's built tiny models (and the drafters trained on them, so setup need not train again), copied
    into the sandbox's cache as setup left them."""
    source = Path(tiny_models.target).parent
    target = sandbox.cache / "models" / source.name
    shutil.copytree(source, target)
    drafters = source.parent.parent / "drafters"  # <cache>/models/<key> -> <cache>/drafters
    if drafters.is_dir():
        shutil.copytree(drafters, sandbox.cache / "drafters")
    return target


@pytest.mark.parametrize("recorded", [True, False], ids=["checksums", "cache-from-before-checksums"])
def test_setup_finds_a_truncated_checkpoint_in_the_cache(sandbox, cached_tiny_models, recorded):
    checkpoint = cached_tiny_models / "target" / "model.safetensors"
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])
    manifest = cached_tiny_models / "eagle3lab-tiny.json"
    if not recorded:
        content = json.loads(manifest.read_text())
        content.pop("files", None)
        manifest.write_text(json.dumps(content))
    result = cli(sandbox, "setup")
    assert result.returncode == 2
    line = one_line(result.stderr)
    why = "does not match the checksum recorded when it was built" if recorded else \
        f"is {len(data) // 2} bytes, its header says {len(data)}"
    assert line == (f"eagle3lab: tiny model cache {cached_tiny_models} is damaged: target/model.safetensors {why}; "
                    f"rebuild it with: python -m eagle3lab setup --rebuild")
    assert "(cached" not in result.stdout


@pytest.mark.server  # the rebuild probes sglang's model classes in a subprocess: tens of seconds
def test_setup_rebuild_replaces_a_damaged_cache(sandbox, cached_tiny_models):
    checkpoint = cached_tiny_models / "target" / "model.safetensors"
    good = checkpoint.read_bytes()
    checkpoint.write_bytes(good[:100])
    result = cli(sandbox, "setup", "--rebuild", timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert checkpoint.read_bytes() == good  # the same inputs build the same bytes
    again = cli(sandbox, "setup")
    assert again.returncode == 0 and "(cached, checksums verified)" in again.stdout


@pytest.mark.parametrize("host, expected", [
    ("10.255.255.1", "host '10.255.255.1' cannot be bound on this machine (Cannot assign requested address)"),
    ("no-such-host.invalid", "host 'no-such-host.invalid' does not resolve"),
])
def test_a_host_that_cannot_be_bound_is_not_called_port_in_use(host, expected):
    with pytest.raises(HostBindError) as err:
        check_port_free(host, free_port())
    assert expected in str(err.value) and "in use" not in str(err.value)


def test_a_taken_port_is_still_port_in_use():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(PortInUseError) as err:
            check_port_free("127.0.0.1", holder.getsockname()[1])
        assert (err.value.port, err.value.host) == (holder.getsockname()[1], "127.0.0.1")


@needs_namespace
def test_full_disk_under_artifacts_is_named_before_the_server_starts(sandbox, no_leftover_processes, tiny_models,
                                                                      tmp_path):
    logs = sandbox.work / "artifacts" / "logs"
    logs.mkdir(parents=True)
    script = textwrap.dedent(f"""
        from eagle3lab.errors import OutputWriteError
        from eagle3lab.runtime.deployment import Models, server_spec
        from eagle3lab.runtime.profiles import load_profile
        from eagle3lab.runtime.server import ServerProcess, free_port
        spec = server_spec(load_profile("cpu"), Models({str(tiny_models.target)!r}, {str(tiny_models.draft)!r}),
                           speculative=False, port=free_port())
        server = ServerProcess(spec, {str(logs / 'server.log')!r})
        try:
            server.start()
        except OutputWriteError as err:
            print(err)
        print("started" if server.proc else "not started")
    """)
    mount = f"mount -t tmpfs -o size=1m tmpfs {logs} && head -c 1000000 /dev/zero > {logs}/filler"
    result = subprocess.run(in_namespace(mount, [sys.executable, "-c", script]), capture_output=True, text=True,
                            env=sandbox.env(), timeout=patience(120))
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "not started", result.stdout + result.stderr
    assert lines[0].startswith(f"no space left on the device holding {logs} (") and "the server log needs" in lines[0]


@needs_namespace
def test_server_dying_on_a_full_disk_is_reported_as_a_full_disk_with_a_stand_in_server(sandbox, tmp_path):
    """The disk fills while the server runs: its log is cut short, so the death is reported as the full disk,
    not as a log without a traceback. The stand-in for sglang writes its log until the disk is full, then dies by
    SIGKILL, as the issue's run did (the real server's reaction to a full disk is not reproducible on demand)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    stand_in = tmp_path / "stand_in_python"
    stand_in.write_text("#!/bin/sh\nwhile true; do head -c 65536 /dev/zero || break; done\nkill -9 $$\n")
    stand_in.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    script = textwrap.dedent(f"""
        from eagle3lab.errors import OutputWriteError
        from eagle3lab.runtime.server import ServerProcess, ServerSpec, free_port
        server = ServerProcess(ServerSpec(model_path={str(model)!r}, port=free_port(), python={str(stand_in)!r}),
                               {str(logs / 'server.log')!r})
        server.start()
        try:
            server.wait({patience(120)!r})
            print("no error")
        except OutputWriteError as err:
            print(err)
        finally:
            server.stop()
    """)
    result = subprocess.run(in_namespace(f"mount -t tmpfs -o size=17m tmpfs {logs}", [sys.executable, "-c", script]),
                            capture_output=True, text=True, env=sandbox.env(), timeout=patience(180), preexec_fn=default_signals)
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith(f"the server died while the device holding its log {logs / 'server.log'} is full"), \
        result.stdout + result.stderr
    assert "free some space and rerun" in line
