"""What each sglang release captures for a drafter's ids, read from the release's own hook body and call order.

The rows below were read by hand from each wheel (file:line in the comments) and are what the trace must compute
from the same wheel: the order defect (graphs reset to the defaults before capture, 0.5.9-0.5.10.post1), and the
Kimi family's hook (``DeepseekV2ForCausalLM.set_eagle3_layers_to_capture``: +1 to every id until 0.5.12, +1 only
when the first id is 1 from 0.5.13, sglang PR #25454)."""

from __future__ import annotations

import pytest

from eagle3lab.errors import SourceError
from eagle3lab.trace import capture_rule, release_layers
from eagle3lab.trace.capture_rule import HookRule
from eagle3lab.trace.release_layers import KIMI_CASE, SPECFORGE_CASE, ReleaseCapture
from eagle3lab.trace.sources import open_source

PLUS_ONE, FIRST_ID_ONE = capture_rule.RULE_PLUS_ONE, capture_rule.RULE_FIRST_ID_ONE

# release: (order defect, hook site, rule, Kimi ids [2, 30, 58] on 61 layers: (graphs, eager))
READ_FROM_THE_WHEELS = {
    # cuda_graph_runner.py:365 resets before capture; model_runner.py:622 sets ids after init_device_graphs;
    # deepseek_v2.py:2975 `[val + 1 for val in layer_ids]`
    "0.5.9": (True, "srt/models/deepseek_v2.py:2963", PLUS_ONE, ([2, 30, 58], [3, 31, 59])),
    # cuda_graph_runner.py:648 still resets; model_runner.py:668 after the graphs
    "0.5.10": (True, "srt/models/deepseek_v2.py:2295", PLUS_ONE, ([2, 30, 58], [3, 31, 59])),
    # model_runner.py:821 init_aux_hidden_state_capture before graph capture (PR #22836); +1 unchanged
    "0.5.11": (False, "srt/models/deepseek_v2.py:2362", PLUS_ONE, ([3, 31, 59], [3, 31, 59])),
    "0.5.12": (False, "srt/models/deepseek_v2.py:2529", PLUS_ONE, ([3, 31, 59], [3, 31, 59])),
    # deepseek_v2.py: `if layer_ids and layer_ids[0] == 1: +1 else list(layer_ids)` (PR #25454)
    "0.5.13": (False, "srt/models/deepseek_v2.py:2740", FIRST_ID_ONE, ([2, 30, 58], [2, 30, 58])),
    "0.5.17": (False, "srt/models/deepseek_v2.py:3134", FIRST_ID_ONE, ([2, 30, 58], [2, 30, 58])),
    # deepseek_v2.py:3470-3473; the ids call in model_runner_components/attention_backend_setup.py:61
    "0.5.23": (False, "srt/models/deepseek_v2.py:3458", FIRST_ID_ONE, ([2, 30, 58], [2, 30, 58])),
}


@pytest.mark.network
@pytest.mark.parametrize("release", sorted(READ_FROM_THE_WHEELS))
def test_each_release_captures_what_its_own_source_says(release):
    defect, site, rule, (graphs, eager) = READ_FROM_THE_WHEELS[release]
    cap = release_layers.trace_release(open_source(release))
    assert cap.defect is defect and cap.rule is not None and cap.rule.rule() == rule
    assert cap.rule.where == site
    kimi = cap.layers(61, [2, 30, 58])
    assert (kimi["cuda_graph_layers"], kimi["eager_layers"]) == (graphs, eager)
    # SpecForge's default ids [1, 29, 57] mean the outputs of layers 1, 29, 57: every release reads those
    specforge = cap.layers(61, [1, 29, 57])
    assert specforge["cuda_graph_layers"] == specforge["eager_layers"] == [2, 30, 58]


@pytest.mark.network
def test_other_families_keep_their_own_rules():
    newest = release_layers.trace_release(open_source("0.5.23")).families
    assert newest["LlamaForCausalLM"]["rule"] == newest["Qwen3ForCausalLM"]["rule"] == PLUS_ONE
    assert newest["GptOssForCausalLM"]["rule"] == capture_rule.RULE_MAX_IS_DEPTH
    assert newest["Glm4MoeLiteForCausalLM"]["rule"] == FIRST_ID_ONE
    assert "KimiK25ForConditionalGeneration" not in newest  # the wrapper only passes the ids to DeepseekV2


def _rule(body: str, release: str = "x") -> HookRule:
    return HookRule(release, "Fake", "srt/models/fake.py", 1, body)


PLUS_ONE_BODY = '''def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None):
    if not self.pp_group.is_last_rank:
        return
    if layer_ids is None:
        num_layers = self.config.num_hidden_layers
        self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
    else:
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
'''
CONDITIONAL_BODY = PLUS_ONE_BODY.replace(
    "        self.model.layers_to_capture = [val + 1 for val in layer_ids]\n",
    "        if layer_ids and layer_ids[0] == 1:\n"
    "            self.model.layers_to_capture = [val + 1 for val in layer_ids]\n"
    "        else:\n"
    "            self.model.layers_to_capture = list(layer_ids)\n")


def test_the_rule_is_evaluated_not_assumed():
    assert _rule(PLUS_ONE_BODY).captured(61, [2, 30, 58]) == [3, 31, 59]
    assert _rule(PLUS_ONE_BODY).captured(61, None) == [2, 30, 58]
    assert _rule(CONDITIONAL_BODY).captured(61, [2, 30, 58]) == [2, 30, 58]
    assert _rule(CONDITIONAL_BODY).captured(61, [1, 29, 57]) == [2, 30, 58]
    assert (_rule(PLUS_ONE_BODY).rule(), _rule(CONDITIONAL_BODY).rule()) == (PLUS_ONE, FIRST_ID_ONE)


def test_a_body_the_recorder_cannot_answer_is_one_line_naming_the_site():
    body = "def set_eagle3_layers_to_capture(self, layer_ids=None):\n    self.model.layers_to_capture = open('x')\n"
    with pytest.raises(SourceError, match=r"cannot evaluate Fake.set_eagle3_layers_to_capture of sglang x "
                                          r"\(srt/models/fake.py:1\): NameError"):
        _rule(body).captured(8, [1, 2, 3])


def _capture(release: str, defect: bool, body: str) -> ReleaseCapture:
    return ReleaseCapture(release, defect, _rule(body, release), {})


def test_releases_that_capture_alike_merge_into_one_row_and_the_milestones_need_the_fix_to_stay():
    caps = [_capture("0.5.9", True, PLUS_ONE_BODY), _capture("0.5.10", True, PLUS_ONE_BODY),
            _capture("0.5.11", False, PLUS_ONE_BODY), _capture("0.5.13", False, CONDITIONAL_BODY),
            _capture("0.5.14", False, CONDITIONAL_BODY)]
    rows = release_layers.case_rows(caps, (KIMI_CASE, SPECFORGE_CASE))
    assert [r["releases"] for r in rows] == ["0.5.9 - 0.5.10", "0.5.11", "0.5.13 - 0.5.14"]
    kimi = [(r["cells"][KIMI_CASE[0]]["cuda_graph_layers"], r["cells"][KIMI_CASE[0]]["eager_layers"]) for r in rows]
    assert kimi == [([2, 30, 58], [3, 31, 59]), ([3, 31, 59], [3, 31, 59]), ([2, 30, 58], [2, 30, 58])]
    marks = release_layers.milestones(caps)
    assert (marks["order_fixed"], marks["convention_rule"], marks["both"]) == ("0.5.11", "0.5.13", "0.5.13")
    reverted = caps + [_capture("0.5.15", False, PLUS_ONE_BODY)]
    assert release_layers.milestones(reverted)["convention_rule"] is None


def test_a_record_row_round_trips():
    cap = _capture("0.5.13", False, CONDITIONAL_BODY)
    back = ReleaseCapture.from_row("0.5.13", cap.to_row())
    assert back.from_record and back.layers(61, [2, 30, 58]) == cap.layers(61, [2, 30, 58])
