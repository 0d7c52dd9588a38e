"""Torch ports of the Triton bookkeeping kernels of sglang 0.5.9's EAGLE loop (``speculative/spec_utils.py``).

Why: on a GPU these kernels take microseconds; on this CPU harness Triton has no driver, so they ran in Triton's
interpreter (``TRITON_INTERPRET=1``), which costs milliseconds per launch and made the CPU cycle cost what the
interpreter costs, not what sglang's code costs. Each port follows its kernel line by line for the case the CPU
harness supports (page size 1, topk 1: the only branch sglang takes there) and refuses the others in one line.

A port is installed as a ``TorchKernel`` that keeps the Triton call syntax (``kernel[grid](*args)``), so sglang's
callers (``assign_req_to_token_pool_func``, ``EAGLEWorker._draft_preprocess_decode``,
``EagleDraftInput.prepare_extend_after_decode``) run unchanged. The ``bs_upper``-style ``tl.constexpr`` bounds are
honoured where they can truncate a copy (``tl.arange`` masks), so a port cannot be more generous than its kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from eagle3lab.errors import HarnessBuildError


class SpecKernelError(HarnessBuildError):
    """A kernel branch the CPU harness does not port (page size > 1 with topk > 1)."""


def _grid_size(grid: Any) -> int:
    """The number of programs along axis 0 (sglang launches these kernels with a one-dimensional grid)."""
    if callable(grid):
        raise SpecKernelError("a callable Triton grid is not supported by the CPU ports (sglang passes a tuple)")
    size = grid[0] if isinstance(grid, Sequence) else grid
    return int(size)


class TorchKernel:
    """A torch function dressed as a Triton kernel: ``kernel[grid](*args)`` calls ``fn(num_programs, *args)``."""

    def __init__(self, name: str, fn: Callable[..., None]):
        self.name = name
        self.fn = fn
        self.__name__ = name

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        programs = _grid_size(grid)

        def launch(*args: Any, **kwargs: Any) -> None:
            self.fn(programs, *args, **kwargs)

        return launch

    def __repr__(self) -> str:
        return f"TorchKernel({self.name})"


def _ints(tensor: torch.Tensor, count: int) -> list[int]:
    return [int(x) for x in tensor.reshape(-1)[:count].tolist()]


def assign_req_to_token_pool(programs: int, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                             start_offset: torch.Tensor, end_offset: torch.Tensor, out_cache_loc: torch.Tensor,
                             pool_len: int, bs_upper: int) -> None:
    """Program ``pid`` copies its slice of ``out_cache_loc`` (after the earlier programs' slices) into
    ``req_to_token[req_pool_indices[pid], start[pid]:end[pid]]``. The kernel sums the earlier lengths over
    ``tl.arange(0, bs_upper)`` masked by ``< pid``, so programs at or beyond ``bs_upper`` would sum only the first
    ``bs_upper``; sglang always passes ``next_power_of_2(bs)``."""
    rows, starts, ends = _ints(req_pool_indices, programs), _ints(start_offset, programs), _ints(end_offset, programs)
    flat = req_to_token.view(-1)
    src = out_cache_loc.reshape(-1)
    for pid in range(programs):
        out_offset = sum(ends[j] - starts[j] for j in range(min(pid, bs_upper)))
        length = ends[pid] - starts[pid]
        if length <= 0:
            continue
        base = rows[pid] * pool_len
        flat[base + starts[pid]: base + ends[pid]] = src[out_offset: out_offset + length].to(flat.dtype)


def assign_draft_cache_locs(programs: int, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                            seq_lens: torch.Tensor, extend_lens: torch.Tensor | None,
                            num_new_pages_per_topk: torch.Tensor | None, out_cache_loc: torch.Tensor,
                            source_cache_loc: torch.Tensor | None, target_cache_loc: torch.Tensor | None,
                            last_page_lens_cumsum: torch.Tensor | None, duplicate_cache_len: int, pool_len: int,
                            topk: int, speculative_num_steps: int, page_size: int, bs_upper: int,
                            iter_upper: int) -> None:
    """Part 1 of the kernel, its only part when ``page_size == 1 or topk == 1``: program ``pid`` copies the
    ``topk * speculative_num_steps`` draft slots at ``out_cache_loc[pid * copy_len:]`` into
    ``req_to_token[req_pool_indices[pid], seq_lens[pid]:]``."""
    if not (page_size == 1 or topk == 1):
        raise SpecKernelError(f"assign_draft_cache_locs with page_size {page_size} and topk {topk} is not ported "
                              f"to CPU (the CPU harness runs page size 1, topk 1)")
    copy_len = topk * speculative_num_steps
    rows, starts = _ints(req_pool_indices, programs), _ints(seq_lens, programs)
    flat = req_to_token.view(-1)
    src = out_cache_loc.reshape(-1)
    for pid in range(programs):
        base = rows[pid] * pool_len + starts[pid]
        flat[base: base + copy_len] = src[pid * copy_len: (pid + 1) * copy_len].to(flat.dtype)


def create_extend_after_decode_spec_info(programs: int, verified_id: torch.Tensor, seq_lens: torch.Tensor,
                                         accept_lens: torch.Tensor, positions: torch.Tensor,
                                         new_verified_id: torch.Tensor, bs_upper: int) -> None:
    """Program ``pid`` writes the positions of its accepted tokens (``seq_len - accept_len + i``, i below
    ``min(accept_len, bs_upper)``) after the earlier programs' tokens, and takes its last accepted token as the new
    verified id."""
    lens, accepts = _ints(seq_lens, programs), _ints(accept_lens, programs)
    for pid in range(programs):
        cumsum = sum(accepts[j] for j in range(min(pid, bs_upper)))
        count = max(0, min(accepts[pid], bs_upper))
        if count:
            positions[cumsum: cumsum + count] = torch.arange(lens[pid] - accepts[pid], lens[pid] - accepts[pid] + count,
                                                             dtype=positions.dtype)
        new_verified_id[pid] = verified_id[cumsum + accepts[pid] - 1]


# The kernels replaced by ``install``: name in spec_utils -> port.
PORTS: dict[str, Callable[..., None]] = {
    "assign_req_to_token_pool": assign_req_to_token_pool,
    "assign_draft_cache_locs": assign_draft_cache_locs,
    "create_extend_after_decode_spec_info": create_extend_after_decode_spec_info,
}
