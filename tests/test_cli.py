"""The CLI turns every eagle3lab error into one line on stderr and exit status 2."""

import subprocess
import sys

from timing import patience


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eagle3lab", *args], capture_output=True, text=True,
                          timeout=patience(120))


def test_unknown_profile_is_one_line():
    result = run_cli("setup", "--profile", "no-such-profile")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "profile 'no-such-profile' not found" in result.stderr and "Traceback" not in result.stderr


def test_bad_override_is_one_line():
    result = run_cli("setup", "--set", "port=not-a-port")
    assert result.returncode == 2 and "override: key 'port'" in result.stderr


def test_override_without_equals_is_one_line():
    result = run_cli("run", "--set", "port")
    assert result.returncode == 2 and "--set expects key=value" in result.stderr


def test_unknown_notebook_is_one_line():
    result = run_cli("run", "--notebooks", "99")
    assert result.returncode == 2 and "notebook '99' not found" in result.stderr


# One bad argument per subcommand that reaches the command's own code (not argparse): each must end in exit 2 and
# one line naming the problem. A command added to COMMANDS without a case here fails the first assertion.
BAD_ARGUMENTS = {
    "run": (["--profile", "no-such-profile", "--notebooks", "01"], "no-such-profile"),
    "report": (["--profile", "no-such-profile", "--no-run"], "no-such-profile"),
    "setup": (["--profile", "no-such-profile"], "no-such-profile"),
    "preflight": (["--profile", "no-such-profile"], "no-such-profile"),
    "fetch-models": (["--profile", "no-such-profile"], "no-such-profile"),
    "patch": (["check", "no-such-patch"], "no-such-patch"),
    "preflight-model": (["--config", "/no/such/dir/config.json"], "/no/such/dir/config.json"),
    "audit": (["--engine", "vllm", "--release", "latest-please"], "latest-please"),
    "setup-vllm": (["--profile", "no-such-profile", "--measure"], "no-such-profile"),
    "upstream-fixes": (["--sglang", "latest-please"], "latest-please"),
    "predict": (["--config", "kimi-k2.5", "--hardware", "b200", "--tp", "8", "--steps", "3", "--topk", "1",
                 "--draft-tokens", "4", "--accept", "2.5", "--context", "2048", "--batch", "one,two"], "one,two"),
    "canary": (["--from-record", "--release", "not-a-version"], "not-a-version"),
    "ci-summary": (["--profile", "no-such-profile"], "no-such-profile"),
    "gpu-check": (["--profile", "no-such-profile"], "no-such-profile"),
    "doctor": (["--launch", "--speculative-algorithm EAGLE3", "--server-log", "/no/such/server.log"],
               "/no/such/server.log"),
    "evaluate-sealed": (["--set", "no-such-set"], "no-such-set"),
    "layer-experiment": (["--profile", "cpu", "--prompts", "1"], "--prompts 1"),
    "bench": (["--base-url", "http://127.0.0.1:9", "--concurrency", "one,two"], "one,two"),
}


def test_every_command_turns_an_eagle3lab_error_into_one_line_and_exit_2():
    from eagle3lab.commands.cli import COMMANDS

    assert set(BAD_ARGUMENTS) == set(COMMANDS)
    for name, (args, named) in BAD_ARGUMENTS.items():
        result = run_cli(name, *args)
        line = result.stderr.strip()
        assert result.returncode == 2, (name, result.stderr[-500:])
        assert "\n" not in line and line.startswith("eagle3lab: ") and "Traceback" not in line, (name, line)
        assert named in line, (name, line)  # the line names the bad value, so it is this error and not another


def test_layer_experiment_refuses_a_profile_off_the_cpu_miniature_in_one_line():
    result = run_cli("layer-experiment", "--profile", "gpu-1x")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "profile gpu-1x is not one: pass --profile cpu" in result.stderr and "Traceback" not in result.stderr
