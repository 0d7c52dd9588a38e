"""The torch ports of sglang 0.5.9's Triton bookkeeping kernels (``speculative/spec_utils.py``).

Reference: the Triton kernels themselves, run under Triton's interpreter on the same small inputs in a fresh
interpreter under the harness (as a speculative CPU server ran them before the ports), and sglang's own wrapper
(``assign_req_to_token_pool_func``) with hand-derived rows. None of the expected values is the port's own output.
"""

from __future__ import annotations

import pytest
import torch

from eagle3lab.runtime.cpu_harness.spec_kernels import SpecKernelError, TorchKernel, assign_draft_cache_locs
from test_cpu_harness import run_child

# Each case is built from a seed in the child, run through the interpreted Triton kernel and through the port on
# copies of the same tensors; the child reports whether every output tensor is equal.
AGAINST_INTERPRETER = """
    import json, random, torch
    from sglang.srt.speculative import spec_utils
    from sglang.srt.utils import next_power_of_2
    from eagle3lab.runtime.cpu_harness import spec_kernels

    def both(kernel, port, grid, tensors, *consts):
        ref = [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]
        got = [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]
        kernel[grid](*ref, *consts)
        spec_kernels.TorchKernel("port", port)[grid](*got, *consts)
        pairs = [(a, b, t) for a, b, t in zip(ref, got, tensors) if isinstance(a, torch.Tensor)]
        # equal outputs, and the kernel wrote something (so an empty port cannot pass against an empty kernel)
        return all(torch.equal(a, b) for a, b, _ in pairs) and any(not torch.equal(a, t) for a, _, t in pairs)

    results = {}
    for seed in range(4):
        rng = random.Random(seed)
        bs, pool_len, steps = rng.randint(1, 4), 32, rng.randint(1, 4)
        rows = torch.tensor(rng.sample(range(6), bs), dtype=torch.int64)
        seq_lens = torch.tensor([rng.randint(1, 12) for _ in range(bs)], dtype=torch.int64)
        req_to_token = torch.zeros((6, pool_len), dtype=torch.int32)

        # assign_req_to_token_pool: each request extends by 1..5 tokens from one flat out_cache_loc
        ends = seq_lens + torch.tensor([rng.randint(1, 5) for _ in range(bs)])
        out = torch.randint(100, 999, (int((ends - seq_lens).sum()),), dtype=torch.int64)
        results[f"assign_req_to_token_pool/{seed}"] = both(
            spec_utils.assign_req_to_token_pool, spec_kernels.assign_req_to_token_pool, (bs,),
            [rows, req_to_token, seq_lens, ends, out], pool_len, next_power_of_2(bs))

        # assign_draft_cache_locs, page size 1 / topk 1: steps draft slots per request
        out = torch.randint(100, 999, (bs * steps,), dtype=torch.int64)
        results[f"assign_draft_cache_locs/{seed}"] = both(
            spec_utils.assign_draft_cache_locs, spec_kernels.assign_draft_cache_locs, (bs,),
            [rows, req_to_token, seq_lens, None, None, out, None, None, None], 0, pool_len, 1, steps, 1,
            next_power_of_2(bs), next_power_of_2(steps + 1))

        # create_extend_after_decode_spec_info: 1..steps+1 accepted tokens per request
        accept = torch.tensor([rng.randint(1, steps + 1) for _ in range(bs)], dtype=torch.int64)
        verified = torch.randint(0, 1000, (int(accept.sum()),), dtype=torch.int64)
        positions = torch.zeros(int(accept.sum()), dtype=torch.int64)
        new_verified = torch.zeros(bs, dtype=torch.int32)
        results[f"create_extend_after_decode_spec_info/{seed}"] = both(
            spec_utils.create_extend_after_decode_spec_info, spec_kernels.create_extend_after_decode_spec_info,
            (bs,), [verified, seq_lens + accept, accept, positions, new_verified],
            next_power_of_2(max(steps + 1, bs)))
    print(json.dumps(results))
"""


def test_ports_equal_the_triton_kernels_run_under_the_interpreter():
    results = run_child(AGAINST_INTERPRETER, shims=("triton_interpreter_scalars",), speculative=True)
    assert len(results) == 12
    assert all(results.values()), {case: ok for case, ok in results.items() if not ok}


THROUGH_SGLANG = """
    import json, torch
    from sglang.srt.speculative import spec_utils
    req_to_token = torch.zeros((2, 16), dtype=torch.int32)
    # request 0 gets slots 10..12 at offsets 2..4, request 1 gets 20..21 at offsets 4..5
    spec_utils.assign_req_to_token_pool_func(torch.tensor([0, 1]), req_to_token, torch.tensor([2, 4]),
                                             torch.tensor([5, 6]), torch.tensor([10, 11, 12, 20, 21]), 2)
    print(json.dumps({"kind": type(spec_utils.assign_req_to_token_pool).__name__,
                      "rows": req_to_token[:, :8].tolist()}))
"""


def test_shim_installs_the_ports_under_sglangs_own_wrapper_without_the_interpreter():
    before = run_child(THROUGH_SGLANG, shims=("triton_interpreter_scalars",), speculative=True)
    assert before["kind"] == "InterpretedFunction"
    after = run_child(THROUGH_SGLANG, shims=("bookkeeping_kernels_torch",), speculative=False)
    assert after == {"kind": "TorchKernel", "rows": [[0, 0, 10, 11, 12, 0, 0, 0], [0, 0, 0, 0, 20, 21, 0, 0]]}
    assert before["rows"] == after["rows"]


def test_unported_branch_is_refused_in_one_line():
    with pytest.raises(SpecKernelError) as err:
        TorchKernel("assign_draft_cache_locs", assign_draft_cache_locs)[(1,)](
            torch.tensor([0]), torch.zeros((1, 8), dtype=torch.int32), torch.tensor([2]), None, None,
            torch.arange(4), None, None, None, 0, 8, 2, 2, 4, 1, 8)
    assert "page_size 4 and topk 2" in str(err.value) and "\n" not in str(err.value)


NEW_ROWS = """
    import json, torch
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
    from eagle3lab.runtime.cpu_harness.spec_attention import sdpa_decode_rows, sdpa_extend_new_rows

    torch.manual_seed(0)
    out = {}
    for causal in (True, False):
        for q_heads, kv_heads in ((4, 4), (4, 2)):
            slots, dim = 64, 8
            k_cache, v_cache = torch.randn(slots, kv_heads, dim), torch.randn(slots, kv_heads, dim)
            req_to_token = torch.randperm(slots)[:48].view(3, 16)
            # three requests: 5 cached + 3 new (a verify), 0 cached + 4 new (a prefill), 9 cached + 1 new
            prefix, extend = torch.tensor([5, 0, 9]), torch.tensor([3, 4, 1])
            seq_lens, rows = prefix + extend, torch.tensor([2, 0, 1])
            query = torch.randn(int(extend.sum()), q_heads, dim)
            args = (query, k_cache, v_cache, req_to_token, rows, seq_lens, prefix, extend)
            kwargs = dict(scaling=dim ** -0.5, enable_gqa=q_heads != kv_heads, causal=causal)
            ref = torch.zeros(query.shape[0], q_heads, dim)
            TorchNativeAttnBackend._run_sdpa_forward_extend(None, query, ref, *args[1:], **kwargs)
            got = sdpa_extend_new_rows(query, torch.zeros_like(ref), *args[1:], **kwargs)
            out[f"causal={causal},gqa={q_heads != kv_heads}"] = float((got - ref).abs().max())
            one = query[:3]  # decode: one new token per request after its whole cached sequence
            ref = torch.zeros(3, q_heads, dim)
            TorchNativeAttnBackend._run_sdpa_forward_decode(None, one, ref, k_cache, v_cache, req_to_token, rows,
                                                            seq_lens, **kwargs)
            got = sdpa_decode_rows(one, torch.zeros_like(ref), k_cache, v_cache, req_to_token, rows, seq_lens,
                                   **kwargs)
            out[f"decode,causal={causal},gqa={q_heads != kv_heads}"] = float((got - ref).abs().max())
    print(json.dumps(out))
"""


def test_written_out_attention_equals_sglangs_torch_native_extend_and_decode():
    """sglang's torch_native extend (its own code, unshimmed, in a fresh interpreter) against the new-rows version:
    the same kept rows, causal or not, with and without grouped-query heads, with and without a cached prefix."""
    errors = run_child(NEW_ROWS)
    assert len(errors) == 8
    assert all(err < 1e-5 for err in errors.values()), errors
