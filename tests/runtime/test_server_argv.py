"""ServerSpec -> launch_server argv, from both profiles (no server is started here)."""

import pytest

from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.launch_env import OFFLINE_ENV, gpu_environment
from eagle3lab.errors import EnvironmentProblem
from eagle3lab.runtime import envinfo
from eagle3lab.runtime.profiles import load_profile

TINY = Models(target="/models/tiny-target", draft="/models/tiny-draft")


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_gpu_profile_argv_has_the_incident_flags():
    profile = load_profile("blackwell-8x")
    spec = server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=True)
    argv = spec.argv()
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert flag(argv, "--model-path") == "moonshotai/Kimi-K2.5"
    assert flag(argv, "--speculative-draft-model-path") == "AQ-MedAI/Kimi-K25-eagle3"
    assert flag(argv, "--speculative-algorithm") == "EAGLE3"
    assert (flag(argv, "--tp-size"), flag(argv, "--speculative-num-steps"), flag(argv, "--speculative-eagle-topk"),
            flag(argv, "--speculative-num-draft-tokens")) == ("8", "3", "1", "4")
    plain = server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=False).argv()
    fraction = str(profile.mem_fraction_static)
    assert flag(argv, "--mem-fraction-static") == flag(plain, "--mem-fraction-static") == fraction, \
        "both arms get the profile's one fraction, so neither gets sglang's own (which differs by arm)"
    assert "--trust-remote-code" in argv and "--disable-cuda-graph" not in argv
    assert flag(argv, "--host") == "127.0.0.1"
    assert spec.env == {**gpu_environment(), **OFFLINE_ENV}, \
        "the gpu profile never gets the CPU harness, gets the cuDNN-check variable, and launches never download"


def test_a_memory_fraction_the_user_sets_is_passed_on():
    profile = load_profile("blackwell-8x", overrides={"mem_fraction_static": 0.8})
    argv = server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=False).argv()
    assert flag(argv, "--mem-fraction-static") == "0.8"


def test_every_launch_runs_offline():
    spec = server_spec(load_profile("cpu"), TINY, speculative=True)
    assert spec.env["HF_HUB_OFFLINE"] == "1" and spec.env["TRANSFORMERS_OFFLINE"] == "1"


def test_cpu_profile_argv_without_speculation():
    spec = server_spec(load_profile("cpu"), TINY, speculative=False, port=31999)
    argv = spec.argv()
    assert "--speculative-algorithm" not in argv
    assert (flag(argv, "--device"), flag(argv, "--attention-backend"), flag(argv, "--port")) == \
        ("cpu", "torch_native", "31999")
    assert "--disable-cuda-graph" in argv and "--trust-remote-code" not in argv
    assert spec.env["SGLANG_USE_CPU_ENGINE"] == "1"


def test_extra_args_are_appended_verbatim():
    profile = load_profile("cpu", overrides={"extra_server_args": ["--log-level", "debug"]})
    assert server_spec(profile, TINY, speculative=False).argv()[-2:] == ["--log-level", "debug"]


def test_wrong_sglang_version_is_one_line():
    profile = load_profile("cpu", overrides={"sglang_version": "0.5.10"})
    with pytest.raises(EnvironmentProblem) as err:
        server_spec(profile, TINY, speculative=True)
    assert (err.value.problem, err.value.expected, err.value.found) == ("wrong_version", "0.5.10", "0.5.9")


def test_missing_sglang_is_one_line(monkeypatch):
    # Uninstalling sglang from the shared test venv is not an option, so its metadata lookup is made to miss.
    monkeypatch.setattr(envinfo, "package_version", lambda name: None)
    with pytest.raises(EnvironmentProblem) as err:
        envinfo.check_sglang("0.5.9")
    assert (err.value.problem, err.value.expected, err.value.found) == ("not_installed", "0.5.9", None)
    assert "make setup" in str(err.value)  # the fix the line tells the user


@pytest.mark.parametrize("name", ["cpu", "blackwell-8x"])
@pytest.mark.parametrize("speculative", [True, False])
def test_argv_is_server_args_through_sglangs_own_parser(name, speculative):
    """argv() and server_args() are one fact: sglang's own argparse reads every field back unchanged."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    profile = load_profile(name)
    models = TINY if profile.uses_tiny_model else Models(profile.target_model, profile.draft_model)
    spec = server_spec(profile, models, speculative=speculative)
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    parsed = vars(parser.parse_args(spec.argv()[3:]))
    dest = {option: action.dest for action in parser._actions for option in action.option_strings}
    for field_name, value in spec.server_args().items():
        option = "--" + field_name.replace("_", "-")
        assert option in dest, f"sglang has no flag {option}"
        assert parsed[dest[option]] == value, field_name
    assert ("speculative_algorithm" in spec.server_args()) is speculative
