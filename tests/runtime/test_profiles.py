"""Profiles: both shipped profiles load; every kind of bad key fails with one line naming key and file."""

from pathlib import Path

import pytest
import yaml

from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir
from eagle3lab.runtime.launch_env import launch_environment
from eagle3lab.runtime.profiles import Profile, load_profile, parameter_help


def write_profile(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load((params_dir() / "cpu.yaml").read_text())
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_cpu_profile_is_the_tiny_cpu_deployment():
    profile = load_profile()
    assert profile.name == "cpu" and profile.device == "cpu" and profile.cpu_harness
    assert profile.uses_tiny_model and profile.disable_cuda_graph


def test_blackwell_profile_is_the_incident_deployment():
    profile = load_profile("blackwell-8x")
    assert profile.target_model == "moonshotai/Kimi-K2.5"
    assert profile.draft_model == "AQ-MedAI/Kimi-K25-eagle3"
    assert (profile.tp_size, profile.speculative_num_steps, profile.speculative_eagle_topk,
            profile.speculative_num_draft_tokens) == (8, 3, 1, 4)
    # set for both arms alike: sglang's own sizing leaves the EAGLE-3 arm no KV cache (tests/runtime/test_kv_budget.py
    # checks the value against sglang's arithmetic on Kimi-K2.5's config)
    assert profile.mem_fraction_static is not None and profile.mem_fraction_static < 0.9
    assert profile.trust_remote_code and not profile.cpu_harness


def test_gpu_1x_profile_is_the_tiny_pair_on_one_gpu_with_graphs():
    profile = load_profile("gpu-1x")
    assert (profile.device, profile.tp_size, profile.disable_cuda_graph, profile.cpu_harness) == ("cuda", 1, False, False)
    assert profile.uses_tiny_model and profile.draft_model == "tiny"
    # depth 8 with the drafter's ids equal to sglang's graph default [2, n//2, n-3]: 0.5.9's graphs capture [2, 4, 5]
    # while eager forwards capture [3, 5, 6], the one-layer shift of the Kimi drafter (issue 17, item 6)
    assert (profile.model_num_layers, profile.tiny_aux_layer_ids) == (8, [2, 4, 5])
    # as cpu: fp32 so the lossless check is exact equality, random ids as the tiny drafter was trained on
    assert (profile.dtype, profile.lossless_min_agreement, profile.bench_prompt_kind) == ("float32", None, "ids")


def test_both_profiles_define_the_same_keys():
    keys = [set(yaml.safe_load(p.read_text())) for p in sorted(params_dir().glob("*.yaml"))]
    assert len(keys) >= 2 and all(k == set(Profile.model_fields) for k in keys)


def test_unknown_key_names_key_and_file(tmp_path):
    path = write_profile(tmp_path, tp_sise=8)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert (err.value.problem, err.value.key) == ("unknown", "tp_sise")
    assert err.value.source == str(path)
    assert "\n" not in str(err.value)


def test_missing_key_names_key_and_file(tmp_path):
    with pytest.raises(ProfileError) as err:
        load_profile(write_profile(tmp_path, port=...))
    assert (err.value.problem, err.value.key) == ("missing", "port")
    assert err.value.source.endswith("custom.yaml")


def test_wrong_type_names_key_value_and_file(tmp_path):
    with pytest.raises(ProfileError) as err:
        load_profile(write_profile(tmp_path, tp_size="eight"))
    assert (err.value.problem, err.value.key, err.value.value) == ("invalid", "tp_size", "eight")
    assert err.value.source.endswith("custom.yaml")


def test_bad_literal_is_rejected(tmp_path):
    with pytest.raises(ProfileError) as err:
        load_profile(write_profile(tmp_path, device="tpu"))
    assert (err.value.key, err.value.value) == ("device", "tpu")


def test_override_is_applied_and_validated():
    assert load_profile("cpu", overrides={"port": 31234}).port == 31234
    with pytest.raises(ProfileError) as err:
        load_profile("cpu", overrides={"port": "x"})
    assert (err.value.source, err.value.key, err.value.value) == ("override", "port", "x")


def test_unknown_profile_lists_known_ones():
    with pytest.raises(ProfileError) as err:
        load_profile("nope")
    assert (err.value.problem, err.value.profile) == ("not_found", "nope")
    assert "known profiles: blackwell-8x, cpu" in str(err.value)  # the hint lists the choices


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert (err.value.problem, err.value.line, err.value.column) == ("yaml", 2, 1)
    assert err.value.source == str(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, where, problem", [
    ("name: cpu\nport: [1\nhost: a\n", ":3:5:", "expected ',' or ']'"),
    ("name: cpu\n  port: 3\n", ":2:7:", "mapping values are not allowed"),
    ("name: cpu\n\tport: 3\n", ":2:1:", "'\\t' that cannot start any token"),
])
def test_yaml_errors_give_line_and_column(tmp_path, text, where, problem):
    """Line and column count from 1, as editors do, and point at the offending character."""
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert f"typo.yaml{where} not valid YAML" in str(err.value) and problem in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("values, item", [([0, -3], "0"), ([1, 2, -1], "2"), ([1, 0], "1")])
def test_every_concurrency_must_be_positive(values, item):
    """Caught when the profile loads, not in notebook 03 after the relaunch chain."""
    with pytest.raises(ProfileError) as err:
        load_profile("cpu", overrides={"bench_concurrency": values})
    assert (err.value.key, err.value.problem) == (f"bench_concurrency[{item}]", "invalid")
    assert err.value.source == "override"


def test_every_key_is_documented():
    assert all(text for text in parameter_help().values())


def test_the_cpu_profile_gives_every_server_one_openmp_thread_and_the_gpu_profiles_torchs_default(monkeypatch):
    """Issue 43: torch's default pool (one thread per core) in each of the processes a cpu run keeps up makes them
    spin at each other's barriers on 2 cores. The profile's value wins over the caller's variable."""
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert launch_environment(load_profile("cpu"))["OMP_NUM_THREADS"] == "1"
    assert launch_environment(load_profile("cpu", overrides={"server_omp_threads": 3}))["OMP_NUM_THREADS"] == "3"
    for unset in (load_profile("cpu", overrides={"server_omp_threads": None}), load_profile("gpu-1x"),
                  load_profile("blackwell-8x")):
        assert "OMP_NUM_THREADS" not in launch_environment(unset), unset.name
    with pytest.raises(ProfileError, match="server_omp_threads"):
        load_profile("cpu", overrides={"server_omp_threads": 0})
