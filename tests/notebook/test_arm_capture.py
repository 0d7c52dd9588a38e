"""Notebook 03's EAGLE-3 arms are labelled by what each path feeds the drafter, computed from the release's trace
(issue 37): on gpu-1x (sglang 0.5.9, CUDA graphs on, ids [2, 4, 5] = the 8-layer default) the headline arm is the
mixed one and the shifted arm is one layer early on both paths; on the cpu profile every forward is eager."""

from __future__ import annotations

import pytest

from eagle3lab.notebook import arm_capture
from eagle3lab.notebook.arm_capture import AS_TRAINED, ServedCapture, offset_text
from eagle3lab.notebook.patch_and_bench.arm_plans import Drafters, eagle3_arm_plans
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.trace.capture_order import trace_capture_order
from eagle3lab.trace.sources import open_source


@pytest.fixture(scope="module")
def order_059():
    return trace_capture_order(open_source("0.5.9"))


def _gpu_1x_drafters() -> Drafters:
    ids = tuple(load_profile("gpu-1x").tiny_aux_layer_ids)
    return Drafters("/trained", ids, control="/untrained", control_layer_ids=ids, shifted="/shifted",
                    shifted_layer_ids=tuple(i - 1 for i in ids))


def test_gpu_1x_labels_agree_with_the_trace(order_059):
    profile = load_profile("gpu-1x")
    served = arm_capture.served_capture(profile)
    assert served is not None and served.cuda_graphs and served.depth == 8 and served.order.release == "0.5.9"
    drafters = _gpu_1x_drafters()
    plans = {p.name: p for p in eagle3_arm_plans(drafters, experiment_concurrency=[1], served=served)}
    trained = list(drafters.trained_layer_ids)
    for name, ids in (("eagle3", drafters.trained_layer_ids), ("eagle3-shifted", drafters.shifted_layer_ids)):
        # recomputed here from the trace's capture indices (input of layer c = output of layer c - 1)
        layers = order_059.layers(8, list(ids))
        graphs = [c - 1 for c in layers["cuda_graph_layers"]]
        eager = [c - 1 for c in layers["eager_layers"]]
        purpose = plans[name].purpose
        assert f"CUDA-graph replays feed the outputs of layers {graphs} ({offset_text(graphs, trained)})" in purpose
        assert f"eager forwards feed the outputs of layers {eager} ({offset_text(eager, trained)})" in purpose
    headline = served.arm(trained, drafters.trained_layer_ids)
    shifted = served.arm(trained, drafters.shifted_layer_ids)
    # the headline arm is the mixed one, the shifted arm one layer early on both paths
    assert (headline.graphs, headline.eager, headline.consistent) == ("one layer early", AS_TRAINED, False)
    assert (shifted.graphs, shifted.eager, shifted.consistent) == ("one layer early", "one layer early", True)
    assert "untrained" in plans["eagle3-untrained"].purpose and "feed" not in plans["eagle3-untrained"].purpose


def test_cpu_profile_is_eager_only_so_the_headline_arm_is_as_trained(order_059):
    cpu = load_profile("cpu")
    served = ServedCapture(order_059, cpu.model_num_layers, cuda_graphs=False)
    head = served.arm([2, 6, 9], [2, 6, 9])
    assert (head.graphs, head.eager, head.consistent) == (None, AS_TRAINED, True)
    assert "CUDA graphs off" in head.label()
    assert served.arm([2, 6, 9], [1, 5, 8]).eager == "one layer early"


@pytest.mark.network
def test_a_release_with_pr_25454s_rule_feeds_a_first_id_other_than_1_without_the_plus_one():
    # 0.5.13's DeepseekV2 hook adds 1 only when the first id is 1: ids [2, 4, 5] are fed the outputs of [1, 3, 4]
    served = ServedCapture(trace_capture_order(open_source("0.5.13")), 8, cuda_graphs=True)
    arm = served.arm([2, 4, 5], [2, 4, 5])
    assert (arm.graph_outputs, arm.eager_outputs) == ((1, 3, 4), (1, 3, 4))
    assert (arm.graphs, arm.eager, arm.consistent) == ("one layer early", "one layer early", True)


def test_offsets_are_named_or_the_layers_listed():
    assert offset_text([2, 4, 5], [2, 4, 5]) == AS_TRAINED
    assert offset_text([3, 5, 6], [2, 4, 5]) == "one layer late"
    assert offset_text([0, 2, 3], [2, 4, 5]) == "2 layers early"
    assert offset_text([2, 4, 6], [2, 4, 5]) == "outputs of layers [2, 4, 6], not the trained [2, 4, 5]"


def test_profiles_off_the_tiny_model_get_no_label():
    assert arm_capture.served_capture(load_profile("blackwell-8x")) is None
    assert eagle3_arm_plans(Drafters("/t", (2, 30, 58)), served=None)[0].purpose.endswith("trained on")
