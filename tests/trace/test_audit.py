"""audit: class resolution, verdict, layer ids, conformance and bisect, on synthetic trees and real releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import synthetic_sglang as syn
from notebook_02 import run_notebook_02
from eagle3lab.package import wheels
from eagle3lab.sidecars import SCHEMA_VERSION
from eagle3lab.trace import audit, sources
from eagle3lab.errors import EntryClassError
from eagle3lab.trace.startup import StartupProfile


@pytest.fixture(scope="module")
def src() -> sources.SglangSource:
    return syn.source()


def statuses(src: sources.SglangSource, entry: str) -> dict[str, str]:
    return {m: s["status"] for m, s in audit.verdict(src, entry)["class_report"]["members"].items()}


def test_gap_wrapper_resolves_alias_across_modules_and_names_delegation_gaps(src):
    v = audit.verdict(src, "GapWrapper")
    rep = v["class_report"]
    assert rep["inner_attr"] == "language_model"  # not self.vision, which is no language model
    assert rep["inner_class"] == "sglang.srt.models.inner.InnerForCausalLM"  # via `as Inner` and `AliasInner = Inner`
    assert rep["nn_module_getattr"] and not rep["custom_getattr"]
    assert set(v["delegation_gaps"]) == {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    assert set(v["real_lacks"]) == {"checked_member", "helper_member"}  # the inner model lacks those too
    assert not v["one_method_enough"]


def test_first_raise_per_profile(src):
    v = audit.verdict(src, "GapWrapper")
    assert v["first_raise"]["cpu"]["where"] == "srt/model_executor/model_runner.py:17"
    assert v["first_raise"]["gpu"]["where"] == "srt/model_executor/cuda_graph_runner.py:6"
    assert v["next_raise_after_one_method"]["cpu"]["member"] != "set_eagle3_layers_to_capture"


def test_mixin_from_a_relative_import_counts(src):
    st = statuses(src, "MixinWrapper")
    assert st["get_embed_and_head"] == "delegated"
    assert st["set_eagle3_layers_to_capture"] == "missing"
    via = audit.verdict(src, "MixinWrapper")["class_report"]["members"]["get_embed_and_head"]["via"]
    assert via.startswith("sglang.srt.models.mixins.EmbedMixin")


def test_delegating_subclass_and_proxy(src):
    assert statuses(src, "DelegatingWrapper")["set_eagle3_layers_to_capture"] == "delegated"
    sub = audit.Resolver(src)
    ref = sub.find("SubclassWrapper")
    owner, _ = sub.owner_of(ref, "get_embed_and_head")
    assert owner.name == "DelegatingWrapper"
    proxy = statuses(src, "ProxyWrapper")
    assert proxy["set_eagle3_layers_to_capture"] == proxy["get_embed_and_head"] == "proxied"
    # a proxy forwards a member only as far as the object behind it has it: the inner model lacks these two
    assert proxy["checked_member"] == proxy["helper_member"] == "missing"
    via = audit.verdict(src, "ProxyWrapper")["class_report"]["members"]["checked_member"]["via"]
    assert "__getattr__ -> self.language_model" in via and "InnerForCausalLM" in via


def test_unknown_entry_class_is_one_line(src):
    with pytest.raises(EntryClassError) as err:
        audit.verdict(src, "NoSuchModel")
    assert (err.value.problem, err.value.entry_class, err.value.version) == ("not_defined", "NoSuchModel", src.version)
    assert "\n" not in str(err.value)


def test_nn_module_members_are_inherited_from_torch(src):
    rep = audit.Resolver(src).report(audit.Resolver(src).find("GapWrapper"), ["named_modules", "no_such_member"])
    assert rep.members["named_modules"].status == "inherited"
    assert rep.members["no_such_member"].status == "missing"


def test_layer_table_runs_the_models_own_hook(src):
    ids = [2, 30, 58]
    gpu = audit.layer_table(src, "GapWrapper", 61, ids, StartupProfile.gpu())
    by_args = {bool(r["args"]): r["result"]["self.model.layers_to_capture"] for r in gpu["rows"]}
    assert by_args[True] == [i + 1 for i in ids]  # the synthetic hook shifts explicit ids by one
    assert by_args[False] == [2, 61 // 2, 61 - 3]  # and picks its own default without ids
    assert gpu["conflict"]
    # graphs are recorded under the no-argument default; eager forwards see the last (explicit) call
    assert gpu["cuda_graph_forwards_capture"]["self.model.layers_to_capture"] == by_args[False]
    assert gpu["eager_forwards_capture"]["self.model.layers_to_capture"] == by_args[True]
    cpu = audit.layer_table(src, "GapWrapper", 4, [0, 1, 2], StartupProfile.cpu())
    reached = [r for r in cpu["rows"] if r["startup_rank"] is not None]
    assert [r["result"]["self.model.layers_to_capture"] for r in reached] == [[1, 2, 3]]
    assert not cpu["conflict"] and cpu["cuda_graph_forwards_capture"] is None


def test_conformance_lists_wrappers_of_eagle3_models_only(src):
    conf = audit.conformance(src, members=["set_eagle3_layers_to_capture", "get_embed_and_head"])
    rows = {r["entry"]: r for r in conf["rows"]}
    assert set(rows) == {"GapWrapper", "MixinWrapper", "DelegatingWrapper", "SubclassWrapper", "ProxyWrapper"}
    assert "set_eagle3_layers_to_capture" in rows["GapWrapper"]["missing"]
    assert "set_eagle3_layers_to_capture" not in rows["SubclassWrapper"]["missing"]
    assert {r["entry"] for r in conf["lacking"]} == {"GapWrapper", "MixinWrapper"}
    assert conf["wrappers_of_non_eagle3_models"] == ["NoEagleWrapper"]
    assert conf["entry_classes"] == 10  # two in inner.py, six in wrappers.py, two in drafter.py
    assert conf["counts"]["wrappers_conforming"] == 3 and conf["counts"]["wrappers_lacking"] == 2
    assert conf["seconds"] >= 0


def test_no_entry_class_vanishes_from_the_counts():
    conf = audit.conformance(syn.source(shapes=True))
    counts = conf["counts"]
    assert sum(counts[audit.KIND_KEYS[k]] for k in audit.KINDS) == counts["entry_classes"] == len(conf["entries"]) == 21
    assert sum(counts[audit.verdict_key(v)] for v in audit.VERDICTS) == counts["wrapper"] == len(conf["rows"])
    unresolved = {u["entry"]: u["reason"] for u in conf["unresolved"]}
    assert set(unresolved) == {"RegistryWrapper"}
    assert "chosen at run time" in unresolved["RegistryWrapper"]
    kinds = {e["entry"]: e["kind"] for e in conf["entries"]}
    assert kinds["InnerForCausalLMNextN"] == audit.DRAFT  # ModelConfig renames draft models to it
    assert kinds["ParamWrapper"] == audit.OTHER_WRAPPER  # its default inner class has no EAGLE-3
    assert kinds["InnerForCausalLM"] == audit.PLAIN


def test_members_every_nn_module_has_are_not_contract_members(src):
    con = audit.Contract.of(src)
    assert con.every_module_has == ["named_modules"]  # the runtime calls it, but every nn.Module has it
    assert "named_modules" not in con.required + con.optional
    # torch as a fresh interpreter sees it: libraries imported by other tests add methods to nn.Module at runtime
    listed = subprocess.run([sys.executable, "-c", "import torch; print(' '.join(dir(torch.nn.Module)))"],
                            capture_output=True, text=True, check=True).stdout.split()
    public = {n for n in listed if not n.startswith("__")}
    assert public <= audit.torch_module_members(), public - audit.torch_module_members()  # from torch's source


def test_draft_side_of_the_contract(src):
    good = audit.draft_report(src, "GoodDrafterEagle3")
    assert good["required_members"] == ["set_embed"]  # set_embed_and_head runs only when not EAGLE-3
    assert good["missing_members"] == []
    assert audit.draft_report(src, "BareDrafterEagle3")["missing_members"] == ["set_embed"]


@pytest.mark.network
def test_real_0_5_9_kimi_verdict():
    v = audit.verdict(sources.open_source("0.5.9"))
    rep = v["class_report"]
    assert rep["inner_class"].endswith("DeepseekV3ForCausalLM") and rep["inner_attr"] == "language_model"
    assert {"set_eagle3_layers_to_capture", "get_embed_and_head"} <= set(v["delegation_gaps"])
    assert not v["one_method_enough"]
    assert v["first_raise"]["cpu"]["member"] == "set_eagle3_layers_to_capture"
    assert v["first_raise"]["cpu"]["where"].startswith("srt/model_executor/model_runner.py")
    assert v["next_raise_after_one_method"]["cpu"]["member"] == "get_embed_and_head"
    drafter = audit.draft_report(sources.open_source("0.5.9"))
    assert drafter["missing_members"] == [] and "set_embed" in drafter["required_members"]


@pytest.mark.network
def test_real_release_bisect_and_newest_conformance():
    versions = ["0.5.8", "0.5.9", "0.5.10"]
    bis = audit.bisect(versions, workers=1, use_record=False)  # traced here, not read from the release record
    assert bis["appeared"] == "0.5.9" and bis["first_fixed"] == "0.5.10"
    assert set(bis["member_gained"]) >= {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    newest = wheels.list_releases()[-1]
    conf = audit.conformance(sources.open_source(newest))
    kimi = [r for r in conf["rows"] if r["entry"] == "KimiK25ForConditionalGeneration"]
    assert kimi and kimi[0]["missing"] == []


@pytest.mark.network
@pytest.mark.notebook
def test_notebook_02_runs_and_writes_the_sidecar_notebook_03_reads(tmp_path: Path):
    # the run-time checks of the generated fixes have their own server tests (tests/fix/test_fixverify.py)
    side = run_notebook_02(tmp_path, 'sglang_source: "0.5.9"\nbisect_versions: ["0.5.9", "0.5.10"]\n'
                           'verify_fixes: false\n')
    assert side["schema_version"] == SCHEMA_VERSION
    verdict = side["verdict"]
    assert {"missing_members", "delegation_gaps", "first_raise", "one_method_enough"} <= set(verdict)
    assert set(verdict["first_raise"]) == {"cpu", "gpu"}
    assert "set_eagle3_layers_to_capture" in verdict["missing_members"]
    assert side["layer_ids"] and all(t["rows"] for t in side["layer_ids"] if t["status"] == "read")
    assert {t["profile"]: t["status"] for t in side["layer_ids"]}["cpu"] == "read"
    assert [s["deployment"] for s in side["layer_setups"]] == ["blackwell-8x", "cpu"]
    assert side["timings"]["bisect_releases"] == 2
    assert (tmp_path / "figures" / "02_bisect_timeline.png").stat().st_size > 0
    # every lacking wrapper, in the traced and the newest release (0.5.10 here), with counts that add up
    for key, release in (("traced", "0.5.9"), ("newest", "0.5.10")):
        conf = side["conformance"][key]
        assert conf["sglang_version"] == release
        counts = conf["counts"]
        assert sum(counts[audit.KIND_KEYS[k]] for k in audit.KINDS) == counts["entry_classes"] == len(conf["entries"])
        assert len(conf["lacking"]) == counts["wrappers_lacking"] > 0
    assert "KimiK25ForConditionalGeneration" in {r["entry"] for r in side["conformance"]["traced"]["lacking"]}
    assert "KimiK25ForConditionalGeneration" not in {r["entry"] for r in side["conformance"]["newest"]["lacking"]}
    fixes = side["fixes"]
    assert set(fixes["releases"]) == {"0.5.9", "0.5.10"} and fixes["verification"]["ran"] is False
    covered = {e for f in fixes["releases"]["0.5.9"]["fixes"] for e in f["entries"]}
    assert {r["entry"] for r in side["conformance"]["traced"]["lacking"]} <= covered


def test_uncertain_first_raise_names_the_branch_that_decides_it():
    """On 0.5.9's GPU path the first raise sits behind FlashInfer autotune, which the profile cannot decide: the
    row must say which branch, what decides it, and where the raise happens otherwise."""
    src = sources.open_source("installed")
    gpu = audit.verdict(src, "KimiK25ForConditionalGeneration")["first_raise"]["gpu"]
    assert src.version == "0.5.9" and gpu["certain"] is False
    branch = gpu["undecided_branches"][0]
    assert branch["test"] == "self._should_run_flashinfer_autotune()"
    assert any("major < 9" in test for test in branch["decided_by"])
    assert gpu["otherwise"]["where"].startswith("srt/model_executor/cuda_graph_runner.py")
    assert gpu["otherwise"]["certain"] is True
