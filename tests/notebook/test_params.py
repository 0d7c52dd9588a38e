"""Notebook parameter validation right after papermill's injection."""

import pytest

from eagle3lab.notebook import params as nbparams
from eagle3lab.errors import ProfileError


def namespace_after_injection(declared: dict, injected: dict) -> dict:
    namespace = {"In": [], "Out": {}, "get_ipython": object()}
    nbparams.begin(namespace)
    namespace["__annotations__"] = {name: type(value) for name, value in declared.items()}
    namespace.update(declared)
    namespace.update(injected)
    return namespace


def test_defaults_resolve_to_the_cpu_profile():
    params = nbparams.resolve(namespace_after_injection({"profile": "cpu", "overrides": {}}, {}))
    assert params.profile.name == "cpu" and params.profile_overrides == {}


def test_injected_profile_key_overrides_the_profile():
    ns = namespace_after_injection({"profile": "cpu", "overrides": {}}, {"port": 31555})
    assert nbparams.resolve(ns).profile.port == 31555


def test_overrides_dict_is_applied():
    ns = namespace_after_injection({"profile": "cpu", "overrides": {"max_running_requests": 2}}, {})
    assert nbparams.resolve(ns).profile.max_running_requests == 2


def test_whole_profile_injected_like_papermill_f_yaml():
    import yaml
    from eagle3lab.paths import params_dir

    injected = yaml.safe_load((params_dir() / "blackwell-8x.yaml").read_text())
    ns = namespace_after_injection({"profile": "cpu", "overrides": {}}, injected)
    assert nbparams.resolve(ns).profile.name == "blackwell-8x"


def test_unknown_injected_name_is_one_line():
    ns = namespace_after_injection({"profile": "cpu", "overrides": {}}, {"tp_sise": 8})
    with pytest.raises(ProfileError) as err:
        nbparams.resolve(ns)
    assert (err.value.problem, err.value.key) == ("unknown", "tp_sise")


def test_mistyped_declared_parameter_is_one_line():
    ns = namespace_after_injection({"profile": "cpu", "overrides": {}, "control_max_new_tokens": 16}, {})
    ns["control_max_new_tokens"] = "sixteen"
    with pytest.raises(ProfileError) as err:
        nbparams.resolve(ns)
    assert (err.value.problem, err.value.key, err.value.value) == ("type", "control_max_new_tokens", "sixteen")


def test_mistyped_profile_override_names_the_key():
    ns = namespace_after_injection({"profile": "cpu", "overrides": {}}, {"tp_size": "eight"})
    with pytest.raises(ProfileError) as err:
        nbparams.resolve(ns)
    assert (err.value.source, err.value.key, err.value.value) == ("override", "tp_size", "eight")
