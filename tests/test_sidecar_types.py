"""The sidecar schemas type every field and refuse keys they do not name, and they still read the sidecars of the
last real run exactly: the committed evidence (``reports-evidence/cpu.json``) holds them, and the report tests rebuild
sidecars from it. Why: a field typed ``dict[str, Any]`` kept a misspelt key beside the real one, and the reader saw
the default three stages later."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from eagle3lab import sidecars
from eagle3lab.paths import REPO_ROOT
from eagle3lab.sidecars import (SCHEMA_VERSION, BisectRow, CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                VllmSameClassSidecar)

TREE_KEYS = {"crash": CrashReproSidecar, "trace": InterfaceTraceSidecar, "patch": PatchBenchSidecar}


@pytest.fixture(scope="module")
def tree() -> dict[str, Any]:
    return json.loads((REPO_ROOT / "reports-evidence" / "cpu.json").read_text(encoding="utf-8"))["tree"]


def _records(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    """Every model reachable from ``model``'s fields."""
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for inner in _types(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                _records(inner, seen)


def _types(annotation: Any) -> list[Any]:
    """``annotation`` and every type nested in it (list[X], dict[K, V], Optional[X], unions)."""
    found = [annotation]
    for arg in typing.get_args(annotation):
        found += _types(arg)
    return found


def _untyped(model: type[BaseModel]) -> list[str]:
    return [f"{model.__name__}.{name}" for name, field in model.model_fields.items()
            if any(t is Any for t in _types(field.annotation))]


@pytest.mark.parametrize("key", sorted(TREE_KEYS))
def test_the_last_runs_sidecars_read_under_the_typed_schemas_and_write_back_unchanged(tree, key):
    """Extra keys forbidden at every depth; what a schema reads it writes back key for key."""
    data = tree[key]
    assert data["schema_version"] == SCHEMA_VERSION
    sidecar = TREE_KEYS[key].model_validate(data)
    assert sidecar.model_dump(mode="json") == data


def test_no_sidecar_field_is_typed_any():
    """Every notebook's schema, notebook 04's included."""
    seen: set[type[BaseModel]] = set()
    for schema in (*TREE_KEYS.values(), VllmSameClassSidecar):
        _records(schema, seen)
    assert len(seen) > 80  # the schemas and every record in them
    assert [name for model in sorted(seen, key=lambda m: m.__name__) for name in _untyped(model)] == []
    assert all(model.model_config.get("extra") == "forbid" for model in seen)


def test_a_misspelt_key_deep_in_a_sidecar_is_refused(tree):
    data = json.loads(json.dumps(tree["trace"]))
    data["bisect"]["rows"][0]["fixd"] = True  # "fixed", misspelt
    with pytest.raises(ValidationError, match="fixd"):
        InterfaceTraceSidecar.model_validate(data)
    patch = json.loads(json.dumps(tree["patch"]))
    patch["arms"][0]["out_tok_per_s"] = 1.0  # the arm rows call it out_tok_s
    with pytest.raises(ValidationError, match="out_tok_per_s"):
        PatchBenchSidecar.model_validate(patch)


def test_a_record_writes_back_only_the_keys_it_was_given_and_reads_by_json_key():
    """A bisect row of a release without the class has no file or members; written back, it still has none. The
    key bridge (``record["class"]``) answers as the dictionary did, for the hashed code that still reads keys."""
    row = BisectRow.model_validate({"version": "0.5.0", "present": False})
    assert row.model_dump() == {"version": "0.5.0", "present": False}
    assert row["version"] == "0.5.0" and row.get("file") is None and "file" not in row
    with pytest.raises(KeyError):
        row["file"]
    option = sidecars.InnerOptionRecord.model_validate({"class": "a.B", "how": "assigned", "reason": ""})
    assert option["class"] == option.cls == "a.B" and option.model_dump() == {"class": "a.B", "how": "assigned",
                                                                                   "reason": ""}



def _notebook_04_sidecar() -> dict[str, Any]:
    """A small notebook 04 sidecar in the shapes its producers return (``trace.vllm``, ``repro.vllm_cpu``)."""
    error = {"stage": "engine config (SpeculativeConfig)", "where": "config/speculative.py:1", "raises": "ValueError",
             "message": "eagle3 is only supported for ['llama'] models"}
    return {"profile": "cpu", "audits": [{
        "release": "0.17.1", "counts": {"classes": 2, "defects": 1}, "from_record": True,
        "defects": [{"arch": "KimiK25ForConditionalGeneration", "wrapper_of": "DeepseekV3ForCausalLM",
                     "evidence": "lacks set_aux_hidden_state_layers"}],
        "interface": {"version": "0.17.1", "present": True, "check_sites": [
            {"where": "v1/worker/gpu_model_runner.py:1", "function": "load_model", "raises": "RuntimeError",
             "message": "does not support EAGLE3"}]}}],
        "kimi_bisect": {"arch": "KimiK25ForConditionalGeneration", "model_type": "deepseek_v3",
                        "rows": [{"release": "0.10.0", "present": False}], "first_not_crashing": "0.18.0"},
        "preflight": {"0.17.1": {"engine": "vllm", "release": "0.17.1", "architecture": "KimiK25ForConditionalGeneration",
                                 "entry_class": "KimiK25ForConditionalGeneration", "module": "kimi_k25",
                                 "model_type": "deepseek_v3", "will_crash": True, "first_error": error,
                                 "errors": [error], "gate": {"present": True, "admits": False,
                                                             "allow_list": ["llama"]},
                                 "implements": False, "how": "none", "wrapper_of": "DeepseekV3ForCausalLM",
                                 "defect": True, "evidence": "", "requested_architectures": ["Kimi"],
                                 "provenance": "vLLM 0.17.1 wheel"}},
        "layers": [{"engine": "vllm", "releases": "0.17.1", "reader": "none", "captures_at": "layer input",
                    "captured": {"the tiny drafter: ids under eagle_config": [2, 5], "the tiny drafter: ids at "
                                 "the top": None}}],
        "cpu_runs": [{"release": "0.17.1", "mode": "probe", "torch": "2.10.0", "vllm": "0.17.1", "outcome": "served",
                      "probe": {"class": "KimiK25ForConditionalGeneration", "supports_eagle3": False},
                      "tokens": [1, 2], "loaded_s": 3.5, "seconds": 9.0}],
        "cpu_installs": {"0.17.1": {"torch": "2.10.0", "seconds_now": {}}}}


@pytest.mark.parametrize("where, key", [
    (("audits", 0, "interface"), "has_default"),  # "has_defaults", misspelt
    (("kimi_bisect",), "first_not_crasing"),
    (("preflight", "0.17.1", "gate"), "admit"),
    (("layers", 0), "captures at"),  # the display label, not the field
    (("cpu_runs", 0, "probe"), "supports_eagle"),
    (("cpu_installs", "0.17.1"), "seconds"),
])
def test_notebook_04s_sidecar_refuses_a_misspelt_key_at_any_depth(where, key):
    data = _notebook_04_sidecar()
    assert VllmSameClassSidecar.model_validate(data).cpu_runs[0].probe.supports_eagle3 is False  # valid as written
    node: Any = data
    for step in where:
        node = node[step]
    node[key] = True
    with pytest.raises(ValidationError, match=key):
        VllmSameClassSidecar.model_validate(data)
