"""Torch ports of the two sgl_kernel CUDA kernels sglang 0.5.9's EAGLE loop needs, for CPU tensors.

Why: ``speculative/eagle_utils.py`` imports sgl_kernel's ``build_tree_kernel_efficient`` only when ``is_cuda()``
(on CPU the name is missing: ``NameError`` inside ``EAGLEWorker.draft``), and its ``verify_tree_greedy_func`` has
branches for CUDA/HIP and NPU only, so on CPU it silently returns its inputs untouched (``predicts`` stays
``torch.empty`` garbage). Both ports follow the kernels in sgl-kernel ``csrc/speculative/eagle_utils.cu``
(``build_tree_efficient`` and ``VerifyTreeGreedy``) line by line, one Python loop per CUDA block/thread; the trees
here are a handful of tokens, so clarity beats speed. Anything the kernels would do undefined things with (a token
whose parent is not in the tree, a bit-packed mask) raises instead of guessing.
"""

from __future__ import annotations

import torch

from eagle3lab.errors import HarnessBuildError

# sglang's TreeMaskMode (speculative/eagle_utils.py): FULL_MASK = 0, QLEN_ONLY = 1, QLEN_ONLY_BITPACKING = 2.
FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING = 0, 1, 2


class TreeKernelError(HarnessBuildError):
    """Input the CUDA kernel would mis-handle silently; the port refuses it with one line."""

    argument: str | None = None  # the kernel argument that is wrong
    request: int | None = None  # the request (batch row) whose draft tree is invalid
    token: int | None = None  # the draft token in that tree


def _require(tensor: torch.Tensor, name: str, dtype: torch.dtype, dim: int) -> None:
    if tensor.dtype != dtype:
        raise TreeKernelError(f"{name} must be {dtype} (as sgl_kernel requires), got {tensor.dtype}", argument=name,
                              problem="dtype")
    if tensor.dim() != dim:
        raise TreeKernelError(f"{name} must have {dim} dimension(s), got shape {tuple(tensor.shape)}", argument=name,
                              problem="dim")


def build_tree_kernel_efficient(
    parent_list: torch.Tensor,
    selected_index: torch.Tensor,
    verified_seq_len: torch.Tensor,
    tree_mask: torch.Tensor,
    positions: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    topk: int,
    depth: int,
    draft_token_num: int,
    tree_mask_mode: int,
) -> None:
    """In place, like ``sgl_kernel.build_tree_kernel_efficient``: fill the verify tree's mask, positions and
    linked lists from the draft's top-k choices.

    Shapes (bs requests, n = draft_token_num): parent_list [bs, topk * (depth - 1) + 1], selected_index
    [bs, n - 1], verified_seq_len [bs], positions [bs * n], retrive_* [bs, n] (pre-filled with -1 by sglang),
    tree_mask flat bool, pre-filled True by sglang: FULL_MASK holds per request n rows of (seq_len + n) entries,
    QLEN_ONLY n rows of n entries.
    """
    if int(tree_mask_mode) == QLEN_ONLY_BITPACKING:
        raise TreeKernelError("tree_mask_mode QLEN_ONLY_BITPACKING is not ported to CPU; only FULL_MASK and "
                              "QLEN_ONLY are (sglang's v1 EAGLE worker uses FULL_MASK)", argument="tree_mask_mode",
                              problem="not_ported")
    if int(tree_mask_mode) not in (FULL_MASK, QLEN_ONLY):
        raise TreeKernelError(f"unknown tree_mask_mode {tree_mask_mode}", argument="tree_mask_mode",
                              problem="unknown")
    if topk < 1 or depth < 1 or draft_token_num < 1:
        raise TreeKernelError(f"topk, depth and draft_token_num must be >= 1, got {topk}, {depth}, {draft_token_num}",
                              problem="below_one")
    parents = parent_list.tolist()
    selected = selected_index.tolist()
    seq_lens = [int(x) for x in verified_seq_len.tolist()]
    n = draft_token_num
    # Flat views so that the indices below are the CUDA kernel's pointer arithmetic.
    pos = positions.view(-1)
    r_index, r_next, r_sibling = retrive_index.view(-1), retrive_next_token.view(-1), retrive_next_sibling.view(-1)
    mask = tree_mask.view(-1)

    def index_of(bid: int, token_idx: int) -> int | None:
        """Row of ``selected_index`` that holds ``token_idx`` (the kernel's linear search), None if absent."""
        row = selected[bid]
        for position in range(n - 1):
            if row[position] == token_idx:
                return position
        return None

    for bid in range(len(seq_lens)):
        seq_len = seq_lens[bid]
        seq_tree_idx = n * n * bid + sum(seq_lens[:bid]) * n
        for tid in range(n):
            if tree_mask_mode == FULL_MASK:
                token_tree_idx = seq_tree_idx + (seq_len + n) * tid + seq_len + 1
            else:
                token_tree_idx = n * n * bid + n * tid + 1
            mask[token_tree_idx - 1] = True
            mask[token_tree_idx: token_tree_idx + n - 1] = False
            if tid == 0:
                pos[bid * n] = seq_len
                for i in range(n - 1, 0, -1):
                    r_index[bid * n + i] = bid * n + i
                    parent_tb_idx = selected[bid][i - 1] // topk
                    parent_position = 0
                    if parent_tb_idx > 0:
                        found = index_of(bid, parents[bid][parent_tb_idx])
                        if found is None:  # the kernel prints "invalid eagle tree" and skips the token
                            raise TreeKernelError(f"invalid eagle tree in request {bid}: draft token {i} has no "
                                                  f"parent among the selected tokens (NaN log-probs?)", request=bid,
                                                  token=i, problem="no_parent")
                        parent_position = found + 1
                    slot = bid * n + parent_position
                    if r_next[slot] == -1:
                        r_next[slot] = i
                    else:
                        r_sibling[bid * n + i] = r_next[slot].clone()
                        r_next[slot] = i
                r_index[bid * n] = bid * n
            else:
                cur_position = tid - 1
                position = 0
                while True:
                    position += 1
                    if position > n:  # the CUDA kernel would spin forever on a parent cycle
                        raise TreeKernelError(f"invalid eagle tree in request {bid}: the ancestors of draft token "
                                              f"{tid} form a cycle (parent_list does not match selected_index)",
                                              request=bid, token=tid, problem="cycle")
                    mask[token_tree_idx + cur_position] = True
                    parent_tb_idx = selected[bid][cur_position] // topk
                    if parent_tb_idx == 0:
                        break
                    found = index_of(bid, parents[bid][parent_tb_idx])
                    if found is None:
                        raise TreeKernelError(f"invalid eagle tree in request {bid}: the ancestors of draft token "
                                              f"{tid} leave the selected tokens", request=bid, token=tid,
                                              problem="leaves_selection")
                    cur_position = found
                pos[bid * n + tid] = position + seq_len


def verify_tree_greedy(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """In place, like ``sgl_kernel.verify_tree_greedy``: walk each request's draft tree from the root, accept a
    child whose token equals the target's argmax at the last accepted node, and write the target's own token
    after the last accepted one (the "bonus" token).

    predicts [bs * n] int32, accept_index [bs, num_spec_step] int32, accept_token_num [bs] int32, the rest
    [bs, n] int64; the same dtype and shape checks as the CUDA op.
    """
    _require(predicts, "predicts", torch.int32, 1)
    _require(accept_index, "accept_index", torch.int32, 2)
    _require(accept_token_num, "accept_token_num", torch.int32, 1)
    for name, tensor in (("candidates", candidates), ("retrive_index", retrive_index),
                         ("retrive_next_token", retrive_next_token), ("retrive_next_sibling", retrive_next_sibling),
                         ("target_predict", target_predict)):
        _require(tensor, name, torch.int64, 2)
        if tensor.shape != candidates.shape:
            raise TreeKernelError(f"{name} has shape {tuple(tensor.shape)}, expected {tuple(candidates.shape)}", argument=name,
                                  problem="shape")
    batch_size, num_draft_tokens = candidates.shape
    num_spec_step = accept_index.shape[1]
    if accept_index.shape[0] != batch_size or accept_token_num.shape[0] != batch_size:
        raise TreeKernelError("accept_index and accept_token_num must have one row per request",
                              problem="shape")
    cand, r_index = candidates.tolist(), retrive_index.tolist()
    r_next, r_sibling = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    # target_predict is indexed with the flat retrive index, exactly as the kernel does.
    target = target_predict.reshape(-1).tolist()
    accept_rows = accept_index.view(-1)

    for bx in range(batch_size):
        last_accepted = r_index[bx][0]
        accept_rows[bx * num_spec_step] = last_accepted
        accepted = 0
        cur_index = 0
        for _ in range(1, num_spec_step):
            cur_index = r_next[bx][cur_index]
            while cur_index != -1:
                draft_index = r_index[bx][cur_index]
                if cand[bx][cur_index] == target[last_accepted]:
                    predicts[last_accepted] = target[last_accepted]
                    accepted += 1
                    accept_rows[bx * num_spec_step + accepted] = draft_index
                    last_accepted = draft_index
                    break
                cur_index = r_sibling[bx][cur_index]
            if cur_index == -1:
                break
        accept_token_num[bx] = accepted
        predicts[last_accepted] = target[last_accepted]
