"""Both GPU profiles' launch command and environment pass sglang 0.5.9's full ``check_server_args()``.

No CPU harness: the environment is exactly what ``deployment.server_spec`` gives a GPU launch. It runs on this
CPU-only machine because ``check_server_args()`` needs no CUDA: its cuDNN check reads
``torch.backends.cudnn.version()`` from the cuDNN library torch 2.9.1 ships (9.10), GPU or not. The only stand-in:
blackwell-8x's 547 GB checkpoints are not here, so its command line (TP 8, EAGLE-3 flags, remote code) points at the
tiny Kimi-K2.5-shaped checkpoints, the same multimodal ``KimiK25ForConditionalGeneration`` class the check keys on.
"""

from __future__ import annotations

import pytest

from eagle3lab.runtime.deployment import server_spec
from eagle3lab.runtime.launch_env import CUDNN_CHECK_ENV, launch_environment
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.sglang_args import parse_launches

GPU_PROFILES = ("gpu-1x", "blackwell-8x")
HARNESS_KEYS = ("SGLANG_USE_CPU_ENGINE", "TRITON_INTERPRET", "SGLANG_CPU_OMP_THREADS_BIND",
                "EAGLE3LAB_FORK_SUBPROCESSES",  # a forked child cannot use its parent's CUDA context
                "TORCHDYNAMO_DISABLE")  # on a GPU sglang's torch.compile'd functions are compiled, as released


def _launches(tiny_models):
    argvs, envs = {}, {}
    for name in GPU_PROFILES:
        profile = load_profile(name)
        for speculative in (False, True):
            spec = server_spec(profile, tiny_models, speculative=speculative)
            label = f"{name} {'eagle3' if speculative else 'baseline'}"
            argvs[label], envs[label] = spec.argv(), dict(spec.env)
    return argvs, envs


@pytest.fixture(scope="module")
def checked(tiny_models):
    argvs, envs = _launches(tiny_models)
    env = envs["gpu-1x baseline"]
    assert all(e == env for e in envs.values()), "every GPU launch gets the same environment"
    with_var = parse_launches(argvs, env, check=True)
    without = parse_launches({k: argvs[k] for k in ("gpu-1x eagle3", "blackwell-8x eagle3")},
                             {k: v for k, v in env.items() if k != CUDNN_CHECK_ENV}, check=True)
    return argvs, env, with_var, without


@pytest.mark.parametrize("label", [f"{p} {a}" for p in GPU_PROFILES for a in ("baseline", "eagle3")])
def test_gpu_launches_pass_sglangs_full_check_server_args_without_the_cpu_harness(checked, label):
    argvs, env, results, _ = checked
    assert not any(key in env for key in HARNESS_KEYS), "a GPU launch never gets the CPU harness"
    assert "--device" in argvs[label] and argvs[label][argvs[label].index("--device") + 1] == "cuda"
    result = results[label]
    assert result.validated, result.error
    assert result.checked is True, result.check_error


def test_without_the_variable_sglangs_cudnn_check_refuses_both_gpu_profiles(checked):
    """The control: the variable is what lets them through, and the refusal is sglang's own cuDNN check."""
    _, _, _, without = checked
    for label, result in without.items():
        assert result.validated and result.checked is False, label
        assert "CuDNN" in (result.check_error or "") and "2.9.1" in (result.check_error or ""), result.check_error


def test_blackwell_keeps_its_own_tp_and_speculative_flags_under_the_check(checked):
    argvs, _, results, _ = checked
    chosen = results["blackwell-8x eagle3"].chosen
    assert chosen["tp_size"] == 8 and chosen["speculative_algorithm"] == "EAGLE3"
    assert "--trust-remote-code" in argvs["blackwell-8x eagle3"]


def test_the_cpu_profile_keeps_its_harness_and_gpu_profiles_only_the_cudnn_variable():
    cpu = launch_environment(load_profile("cpu"))
    gpu = launch_environment(load_profile("gpu-1x"))
    assert cpu["SGLANG_USE_CPU_ENGINE"] == "1" and cpu[CUDNN_CHECK_ENV] == "1"
    assert gpu[CUDNN_CHECK_ENV] == "1" and not any(key in gpu for key in HARNESS_KEYS)
    assert gpu["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_both_arms_run_under_the_same_request_cap_as_sglang_resolves_it(checked, profile):
    """sglang resets an unset cap to 48 for speculative servers only; the profiles set it for both arms."""
    _, _, results, _ = checked
    baseline, eagle3 = results[f"{profile} baseline"].chosen, results[f"{profile} eagle3"].chosen
    assert baseline["max_running_requests"] == eagle3["max_running_requests"] is not None
    assert not any("reset to" in w for w in results[f"{profile} eagle3"].warnings)
