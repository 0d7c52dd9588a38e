"""The torch ports of sgl_kernel's ``verify_tree_greedy`` and ``build_tree_kernel_efficient``.

Reference values come from sglang's own test cases (quoted with their source) or are derived by hand from the
CUDA kernels' semantics (sgl-kernel csrc/speculative/eagle_utils.cu); none is copied from the port's output.
The cases that need sglang's Python (``organize_draft_results``, the ``build_tree_kernel_efficient`` wrapper,
``select_top_k_tokens``) run in a fresh interpreter under the harness, with and without the shim.
"""

from __future__ import annotations

import pytest
import torch

from eagle3lab.runtime.cpu_harness.tree_kernels import (TreeKernelError, build_tree_kernel_efficient,
                                                        verify_tree_greedy)
from test_cpu_harness import run_child


def _verify(candidates, retrive_index, next_token, next_sibling, target_predict, num_spec_step, predicts_len):
    bs = len(candidates)
    predicts = torch.full((predicts_len,), -1, dtype=torch.int32)
    accept_index = torch.full((bs, num_spec_step), -1, dtype=torch.int32)
    accept_token_num = torch.zeros((bs,), dtype=torch.int32)
    as_long = lambda rows: torch.tensor(rows, dtype=torch.int64)  # noqa: E731
    verify_tree_greedy(predicts, accept_index, accept_token_num, as_long(candidates), as_long(retrive_index),
                       as_long(next_token), as_long(next_sibling), target_predict)
    return predicts.tolist(), accept_index.tolist(), accept_token_num.tolist()


def test_verify_tree_greedy_matches_sgl_kernels_own_test_case():
    """sgl-kernel/tests/speculative/test_eagle_utils.py::test_verify_tree_greedy (a tree with siblings)."""
    target_logits = torch.full((2, 6, 20), 1.0)
    target_logits[0, 0, 3] = target_logits[0, 3, 4] = target_logits[0, 4, 5] = 10
    target_logits[1, 0, 11] = target_logits[1, 4, 12] = 10
    for i in range(2):
        for j in range(6):
            if target_logits[i, j].max() < 10:
                target_logits[i, j, 18] = 10
    predicts, accept_index, accept_num = _verify(
        candidates=[[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]],
        retrive_index=[[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]],
        next_token=[[1, 2, -1, 4, 5, -1], [4, 2, 3, -1, 5, -1]],
        next_sibling=[[-1, 3, -1, -1, -1, -1], [-1, -1, -1, -1, 1, -1]],
        target_predict=target_logits.argmax(dim=-1), num_spec_step=4, predicts_len=12)
    assert predicts == [3, -1, -1, 4, 5, 18, 11, -1, -1, -1, 12, 18]
    assert accept_index == [[0, 3, 4, 5], [6, 10, 11, -1]]
    assert accept_num == [3, 2]


def test_verify_topk1_chain_accepts_the_matching_prefix_and_adds_the_targets_token():
    """Hand-derived: request 0's target agrees with draft token 1 only, request 1's with both draft tokens; the
    token after the last accepted one is the target's own (the bonus token)."""
    predicts, accept_index, accept_num = _verify(
        candidates=[[7, 11, 12], [9, 21, 22]], retrive_index=[[0, 1, 2], [3, 4, 5]],
        next_token=[[1, 2, -1], [1, 2, -1]], next_sibling=[[-1] * 3, [-1] * 3],
        target_predict=torch.tensor([[11, 99, 0], [21, 22, 23]]), num_spec_step=3, predicts_len=6)
    assert accept_index == [[0, 1, -1], [3, 4, 5]]
    assert accept_num == [1, 2]
    assert predicts == [11, 99, -1, 21, 22, 23]


def test_verify_rejects_first_draft_token_and_still_emits_one_token():
    predicts, accept_index, accept_num = _verify(
        candidates=[[5, 6, 7, 8]], retrive_index=[[0, 1, 2, 3]], next_token=[[1, 2, 3, -1]],
        next_sibling=[[-1] * 4], target_predict=torch.tensor([[40, 41, 42, 43]]), num_spec_step=4, predicts_len=4)
    assert (predicts, accept_index, accept_num) == ([40, -1, -1, -1], [[0, -1, -1, -1]], [0])


def test_verify_refuses_the_dtypes_the_cuda_op_refuses():
    bad = torch.zeros(4, dtype=torch.int64)  # the CUDA op requires int32 predicts
    with pytest.raises(TreeKernelError) as err:
        verify_tree_greedy(bad, torch.zeros((1, 4), dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                           *(torch.zeros((1, 4), dtype=torch.int64) for _ in range(5)))
    assert (err.value.problem, err.value.argument) == ("dtype", "predicts")


def _chain_tree(seq_lens: list[int], n: int, mode: int):
    """topk-1 inputs as sglang's select_top_k_tokens/organize_draft_results lay them out (parent_list starts
    with -1, then the flat score index of each step's token)."""
    bs = len(seq_lens)
    parent_list = torch.tensor([[-1] + list(range(n - 2))] * bs)
    selected = torch.tensor([list(range(n - 1))] * bs)
    width = sum(seq_lens) * n + n * n * bs if mode == 0 else n * n * bs
    tree_mask = torch.full((width,), True)
    positions = torch.empty(bs * n, dtype=torch.long)
    retrive = torch.full((3, bs, n), -1, dtype=torch.long)
    build_tree_kernel_efficient(parent_list, selected, torch.tensor(seq_lens), tree_mask, positions, retrive[0],
                                retrive[1], retrive[2], 1, n - 1, n, mode)
    return tree_mask, positions, retrive


def test_build_tree_topk1_is_a_causal_chain_after_the_whole_prefix():
    """For topk 1 the tree is a chain: positions follow the prefix, each draft token sees the whole prefix and the
    draft tokens up to itself (a causal mask), and the linked list is 0 -> 1 -> ... -> n-1."""
    seq_lens, n = [5, 3], 4
    tree_mask, positions, (index, next_token, sibling) = _chain_tree(seq_lens, n, mode=0)
    assert positions.tolist() == [5, 6, 7, 8, 3, 4, 5, 6]
    assert index.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert next_token.tolist() == [[1, 2, 3, -1]] * 2 and sibling.tolist() == [[-1] * 4] * 2
    offset, rows = 0, []
    for seq_len in seq_lens:
        width = seq_len + n
        block = tree_mask[offset: offset + n * width].view(n, width)
        assert block[:, :seq_len].all()
        rows.append(block[:, seq_len:].tolist())
        offset += n * width
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool)).tolist()
    assert rows == [causal, causal]


def test_build_tree_qlen_only_mask_is_the_draft_block_alone():
    tree_mask, positions, _ = _chain_tree([2], 3, mode=1)
    assert tree_mask.view(3, 3).tolist() == torch.tril(torch.ones(3, 3, dtype=torch.bool)).tolist()
    assert positions.tolist() == [2, 3, 4]


def test_build_tree_refuses_bitpacked_masks_and_parent_cycles():
    with pytest.raises(TreeKernelError) as err:
        _chain_tree([2], 3, mode=2)
    assert (err.value.problem, err.value.argument) == ("not_ported", "tree_mask_mode")
    retrive = torch.full((3, 1, 3), -1, dtype=torch.long)
    with pytest.raises(TreeKernelError) as err:  # token 2's parent is itself: CUDA would spin forever
        build_tree_kernel_efficient(torch.tensor([[0, 1]]), torch.tensor([[0, 1]]), torch.tensor([4]),
                                    torch.full((21,), True), torch.empty(3, dtype=torch.long), *retrive, 1, 2, 3, 0)
    assert (err.value.problem, err.value.request, err.value.token) == ("cycle", 0, 2)


# --- through sglang's own Python, in a fresh interpreter ------------------------------------------------------

UPSTREAM_TOPK4 = """
    import json, torch
    from sglang.srt.speculative.eagle_utils import build_tree_kernel_efficient, organize_draft_results
    # sglang test/registered/spec/utils/test_build_eagle_tree.py::test_build_tree_kernel_efficient (on CPU)
    score_list = [
        torch.tensor([[[7.1127e-01, 2.8292e-01, 2.2995e-03, 1.7357e-03]],
                      [[9.7476e-01, 2.2219e-02, 6.5031e-04, 1.3212e-04]]]),
        torch.tensor([[[6.9142e-01, 1.2863e-02, 1.6873e-03, 1.1871e-03], [2.4787e-01, 1.8818e-02, 1.4204e-02, 9.2235e-04],
                       [2.2971e-03, 1.6700e-06, 1.8737e-07, 8.3146e-08], [1.2771e-03, 2.4374e-04, 1.7832e-04, 1.1947e-05]],
                      [[8.4832e-02, 6.6068e-02, 5.8304e-02, 5.7851e-02], [2.3616e-03, 1.1243e-03, 5.4368e-04, 2.7768e-04],
                       [2.5286e-04, 1.5578e-04, 2.8817e-05, 1.2888e-05], [1.2834e-04, 2.5417e-06, 1.1279e-06, 1.6088e-08]]]),
        torch.tensor([[[6.6438e-01, 2.6997e-02, 2.4236e-05, 4.0821e-06], [2.4402e-01, 2.8409e-03, 5.0935e-04, 2.9022e-04],
                       [1.6178e-02, 2.0567e-03, 4.5892e-04, 3.0034e-05], [1.3023e-02, 5.0497e-04, 3.6371e-04, 8.7750e-05]],
                      [[2.3263e-02, 2.0054e-02, 9.3990e-03, 2.7783e-03], [6.4156e-02, 5.5506e-04, 1.0429e-04, 9.7211e-05],
                       [4.9950e-02, 5.0630e-03, 9.0068e-04, 3.3656e-04], [7.5817e-03, 8.5731e-04, 6.9972e-04, 6.0793e-04]]]),
        torch.tensor([[[6.6420e-01, 1.0525e-04, 6.5864e-05, 1.2253e-06], [1.3019e-01, 1.0461e-01, 5.2083e-03, 1.6777e-03],
                       [2.0103e-02, 6.7335e-03, 1.2625e-04, 1.0364e-05], [1.5142e-02, 7.0819e-04, 9.6595e-05, 8.7951e-05]],
                      [[5.8608e-02, 1.8840e-03, 7.8535e-04, 4.4400e-04], [1.2185e-02, 2.0684e-03, 1.7418e-03, 1.4327e-03],
                       [6.2455e-03, 6.1487e-03, 2.6862e-03, 1.8034e-03], [1.8590e-03, 1.6151e-03, 1.2481e-03, 3.6038e-04]]]),
    ]
    token_list = [
        torch.tensor([[29896, 29906, 29900, 29945], [13, 2, 29871, 28956]]),
        torch.tensor([[29889, 29974, 29945, 29900, 29974, 29922, 29930, 29958, 29889, 29974, 29930, 29945, 29974, 29922,
                       29930, 29958],
                      [22550, 4136, 16492, 8439, 29871, 2, 3001, 13, 2, 13, 29906, 29946, 2, 13, 29871, 259]]),
        torch.tensor([[29946, 29945, 29953, 29906, 29896, 29945, 29900, 29906, 29896, 29945, 29906, 29953, 29896, 29945,
                       29906, 29946],
                      [29871, 2, 29901, 29889, 29871, 2, 395, 259, 29901, 29871, 2, 29889, 3001, 1234, 7146, 2186]]),
        torch.tensor([[29946, 29974, 29945, 29930, 29889, 29922, 29974, 29930, 29974, 29946, 29930, 29922, 29889, 29974,
                       29945, 29922],
                      [29941, 29906, 2, 29946, 29871, 450, 319, 14990, 29946, 29941, 2, 29906, 29871, 2, 3001, 13]]),
    ]
    parents_list = [torch.tensor([[-1, 0, 1, 2, 3], [-1, 0, 1, 2, 3]]), torch.tensor([[4, 8, 9, 10], [4, 5, 6, 7]]),
                    torch.tensor([[20, 24, 21, 28], [24, 28, 20, 21]]), torch.tensor([[36, 40, 41, 44], [36, 40, 44, 45]])]
    seq_lens = torch.tensor([5, 10])
    try:
        parent_list, top_scores_index, draft_tokens = organize_draft_results(score_list, token_list, parents_list, 8)
        out = build_tree_kernel_efficient(torch.tensor([29974, 13], dtype=torch.int32), parent_list, top_scores_index,
                                          draft_tokens, seq_lens, int(seq_lens.sum()), 4, 4, 8)
        print(json.dumps({"ok": True, "out": [t.tolist() for t in out[1:]]}))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


def test_build_tree_shim_reproduces_sglangs_own_topk4_test_through_its_wrapper():
    """Without the shim, sglang's wrapper dies on the missing sgl_kernel name; with it, sglang's own expected
    values (test_build_eagle_tree.py) come out of sglang's own wrapper on CPU."""
    from eagle3lab.runtime.cpu_harness import SHIMS

    without = run_child(UPSTREAM_TOPK4)
    assert not without["ok"] and without["error"] in SHIMS["build_tree_cpu"].avoids
    result = run_child(UPSTREAM_TOPK4, shims=("build_tree_cpu",))
    assert result["ok"], result
    positions, retrieve_index, next_token, next_sibling, draft_tokens = result["out"]
    assert positions == [5, 6, 6, 7, 7, 8, 8, 9, 10, 11, 12, 12, 12, 12, 13, 14]
    assert retrieve_index == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]
    assert next_token == [[1, 3, 4, 5, 6, 7, -1, -1], [1, 2, -1, 6, -1, -1, 7, -1]]
    assert next_sibling == [[-1, 2, -1, -1, -1, -1, -1, -1], [-1, -1, 3, 4, 5, -1, -1, -1]]
    assert draft_tokens == [29974, 29896, 29906, 29889, 29974, 29946, 29896, 29946,
                            13, 13, 22550, 4136, 16492, 8439, 29871, 29941]


VERIFY_FUNC = """
    import json, torch
    from sglang.srt.speculative.eagle_utils import verify_tree_greedy_func
    predicts = torch.full((6,), -7, dtype=torch.int32)  # sglang allocates torch.empty; -7 marks "never written"
    accept_index = torch.full((2, 3), -1, dtype=torch.int32)
    accept_num = torch.full((2,), -7, dtype=torch.int32)
    long = lambda rows: torch.tensor(rows, dtype=torch.int64)
    verify_tree_greedy_func(predicts, accept_index, accept_num, long([[7, 11, 12], [9, 21, 22]]),
                            long([[0, 1, 2], [3, 4, 5]]), long([[1, 2, -1], [1, 2, -1]]), long([[-1] * 3] * 2),
                            long([[11, 99, 0], [21, 22, 23]]), topk=1)
    print(json.dumps({"predicts": predicts.tolist(), "accept_index": accept_index.tolist(),
                      "accept_num": accept_num.tolist()}))
"""


def test_verify_shim_turns_sglangs_silent_cpu_noop_into_the_kernels_result():
    """sglang 0.5.9 on CPU returns the buffers untouched (no error): that is the latent defect the shim fixes."""
    untouched = run_child(VERIFY_FUNC)
    assert untouched == {"predicts": [-7] * 6, "accept_index": [[-1] * 3] * 2, "accept_num": [-7, -7]}
    fixed = run_child(VERIFY_FUNC, shims=("verify_greedy_cpu",))
    assert fixed == {"predicts": [11, 99, -7, 21, 22, 23], "accept_index": [[0, 1, -1], [3, 4, 5]],
                     "accept_num": [1, 2]}
