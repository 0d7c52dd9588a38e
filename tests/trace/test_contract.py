"""contract: the AST tracer on a synthetic runtime (one file per trap) and on real sglang source."""

from __future__ import annotations

import pytest

import synthetic_sglang as syn
from eagle3lab.package import wheels
from eagle3lab.trace import contract, sources
from eagle3lab.trace.startup import StartupProfile, startup_order


@pytest.fixture(scope="module")
def sites() -> list[contract.Site]:
    return contract.trace(syn.source())


def one(sites: list[contract.Site], member: str, access: str = "call") -> contract.Site:
    found = [s for s in sites if s.member == member and s.access == access]
    assert len(found) == 1, found
    return found[0]


def test_runner_self_model_and_graph_runner_alias_are_the_target(sites):
    explicit = [s for s in sites if s.member == "set_eagle3_layers_to_capture" and s.args]
    no_args = [s for s in sites if s.member == "set_eagle3_layers_to_capture" and not s.args]
    assert [s.file for s in explicit] == ["srt/model_executor/model_runner.py"]
    assert [s.file for s in no_args] == ["srt/model_executor/cuda_graph_runner.py"]
    for site in explicit + no_args:
        # role comes from where the flag is set (only when not a draft worker), not from the receiver's name
        assert site.role == "target"
        assert not site.guarded
        assert "EAGLE-3 only" in site.runs_when
    assert explicit[0].args == ["self.layer_ids"]
    assert "graphs on" in no_args[0].runs_when and "graphs on" not in explicit[0].runs_when


def test_local_alias_and_arguments(sites):
    site = one(sites, "aliased_member")
    assert site.receiver == "m"
    assert site.args == ["1", "key=2"]


def test_guards_hasattr_getattr_default_and_try(sites):
    assert one(sites, "optional_hook").guard == "hasattr check"
    assert one(sites, "optional_hook", "check").guarded
    assert one(sites, "maybe_member", "read").guard == "getattr default"
    assert one(sites, "tolerant_member").guard == "try/except"


def test_hasattr_that_raises_otherwise_does_not_guard(sites):
    site = one(sites, "checked_member")
    assert not site.guarded
    assert "checked by hasattr, raises otherwise" in site.conditions
    assert site.eagle3_path  # the helper's eagle_* flag parameter puts it on the EAGLE path


def test_target_and_draft_objects_of_the_speculative_worker(sites):
    assert one(sites, "get_embed_and_head").role == "target"
    set_embed = one(sites, "set_embed")
    assert set_embed.role == "draft" and set_embed.eagle3_path
    other_branch = one(sites, "set_embed_and_head")
    assert "not EAGLE-3" in other_branch.runs_when and not other_branch.eagle3_path


def test_directly_negated_eagle3_test_is_not_the_eagle3_path():
    extra = {"srt/speculative/eagle_other_worker.py": '''
class OtherEAGLEWorker:
    def init(self):
        if not self.speculative_algorithm.is_eagle3():
            self.draft_model_runner.model.only_for_eagle_one()
'''}
    site = one(contract.trace(syn.source(extra)), "only_for_eagle_one")
    assert site.conditions == ["not (self.speculative_algorithm.is_eagle3())"]
    assert "not EAGLE-3" in site.runs_when and not site.eagle3_path


def test_helper_called_from_eagle_code_is_in_the_contract(sites):
    site = one(sites, "helper_member")
    assert site.role == "target" and site.eagle3_path


def test_unconditional_runner_code_is_not_eagle_path(sites):
    assert not one(sites, "load_weights").eagle3_path
    members = {s.member for s in contract.contract(sites)}
    assert "load_weights" not in members and "optional_hook" not in members


def test_grep_view_cannot_tell_flags_from_calls():
    hits = contract.grep_view(syn.source())
    texts = [h.text for h in hits]
    assert any("set_eagle3_layers_to_capture" in t for t in texts)
    assert any(t.startswith("self.eagle_use_aux_hidden_state =") for t in texts)  # a flag, not a model call
    assert not any("get_embed_and_head" in t for t in texts)  # the grep misses the second needed member


def test_startup_order_depends_on_profile():
    src = syn.source()
    found = contract.contract(contract.trace(src))
    cpu = [o["where"] for o in startup_order(src, found, StartupProfile.cpu())]
    gpu = [o["where"] for o in startup_order(src, found, StartupProfile.gpu())]
    graph_site = "srt/model_executor/cuda_graph_runner.py:6"
    assert graph_site not in cpu
    assert gpu[0] == graph_site
    assert cpu[0] == gpu[1] == "srt/model_executor/model_runner.py:17"
    assert cpu.index("srt/speculative/eagle_worker.py:8") > cpu.index("srt/model_executor/model_runner.py:17")


def test_startup_marks_sites_behind_undecidable_branches():
    runner = syn.RUNTIME["srt/model_executor/model_runner.py"].replace(
        "        if self.eagle_use_aux_hidden_state:\n            self.model.set_eagle3_layers_to_capture(",
        "        if self.eagle_use_aux_hidden_state and self.some_runtime_setting():\n"
        "            self.model.set_eagle3_layers_to_capture(",
    )
    src = syn.source({"srt/model_executor/model_runner.py": runner})
    order = startup_order(src, contract.contract(contract.trace(src)), StartupProfile.cpu())
    certain = {o["where"]: o["certain"] for o in order}
    assert certain["srt/model_executor/model_runner.py:17"] is False
    assert certain["srt/speculative/eagle_worker.py:8"] is True


def test_files_moved_to_subpackages_are_still_scanned():
    moved = {
        "srt/model_executor/runner_parts/graph_setup.py": '''
def setup(model_runner):
    if model_runner.spec_algorithm.is_eagle3():
        model_runner.model.set_eagle3_layers_to_capture(model_runner.ids)
''',
    }
    src = syn.source(moved)
    assert "srt/model_executor/runner_parts/graph_setup.py" in contract.runtime_files(src)
    hits = [s for s in contract.trace(src) if s.file.endswith("graph_setup.py")]
    assert [(s.member, s.args) for s in hits] == [("set_eagle3_layers_to_capture", ["model_runner.ids"])]


def test_syntax_error_in_a_runtime_file_is_reported():
    src = syn.source({"srt/speculative/broken_worker.py": "class X(:\n"})
    contract.trace(src)
    assert any(s.path == "srt/speculative/broken_worker.py" for s in src.skipped)


def _release_0_5_9() -> sources.SglangSource:
    """The 0.5.9 wheel, not the installed copy, which other notebooks patch while they run."""
    return sources.open_source("0.5.9")


@pytest.mark.network
def test_real_0_5_9_contract_finds_both_target_members_unguarded():
    found = contract.contract(contract.trace(_release_0_5_9()))
    target = {s.member for s in found if s.role == "target" and not s.guarded}
    assert {"set_eagle3_layers_to_capture", "get_embed_and_head"} <= target
    hook_files = {s.file for s in found if s.member == "set_eagle3_layers_to_capture"}
    assert "srt/model_executor/model_runner.py" in hook_files
    assert any("graph_runner" in f for f in hook_files)
    draft = {s.member for s in found if s.role == "draft"}
    assert "set_embed" in draft and "hot_token_id" in draft


@pytest.mark.network
def test_newest_release_contract_still_has_the_hook():
    newest = wheels.list_releases()[-1]
    found = contract.contract(contract.trace(sources.open_source(newest)))
    assert any(s.member == "set_eagle3_layers_to_capture" and s.role in ("target", "either") for s in found)
