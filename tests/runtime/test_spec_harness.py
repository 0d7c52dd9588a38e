"""The speculative CPU shims against the real sglang 0.5.9 code they patch, each shown without and with the shim.

Every case runs in a fresh interpreter under the harness environment (the shims are installed by the
``sitecustomize``, as in a real server). Expected values are computed independently in the child (plain softmax
attention) or derived by hand from the kernel's documented semantics; none is the shim's own output.
"""

from __future__ import annotations

import pytest

from eagle3lab.runtime.cpu_harness import SHIMS, SPEC_SHIMS, cpu_environment
from eagle3lab.runtime.cpu_harness.spec_attention import SpeculativeCpuError, check_supported
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from test_cpu_harness import run_child

ATTENTION_SETUP = """
    import json, sys, torch
    from types import SimpleNamespace
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
    from sglang.srt.layers.radix_attention import AttentionType
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    torch.manual_seed(0)
    H, D, SLOTS = 2, 8, 64

    class Pool:  # plain tensors standing in for the KV pool's storage (the backend only reads and writes them)
        def __init__(self):
            self.k, self.v = torch.randn(SLOTS, H, D), torch.randn(SLOTS, H, D)
        def set_kv_buffer(self, layer, loc, k, v):
            self.k[loc], self.v[loc] = k.view(-1, H, D), v.view(-1, H, D)
        def get_key_buffer(self, layer_id):
            return self.k
        def get_value_buffer(self, layer_id):
            return self.v

    layer = SimpleNamespace(qk_head_dim=D, v_head_dim=D, tp_q_head_num=H, tp_k_head_num=H, tp_v_head_num=H,
                            layer_id=0, scaling=D ** -0.5, is_cross_attention=False, attn_type=AttentionType.DECODER)
    req_to_token = torch.zeros(4, 32, dtype=torch.int64)
    req_to_token[0, :8], req_to_token[1, :6] = torch.arange(0, 8), torch.arange(20, 26)
    pool = Pool()

    def attend(q_row, slots, new_k=None, new_v=None, new_at=None):
        # plain softmax attention of one query over the given cache slots (new K/V overriding some of them)
        keys, vals = pool.k[slots].clone(), pool.v[slots].clone()
        if new_k is not None:
            keys[new_at], vals[new_at] = new_k, new_v
        qh = q_row.view(H, D)
        w = torch.softmax(torch.einsum("hd,shd->hs", qh, keys) * layer.scaling, dim=-1)
        return torch.einsum("hs,shd->hd", w, vals).reshape(-1)

    def batch(**fields):
        fb = SimpleNamespace(req_pool_indices=torch.tensor([0, 1]), token_to_kv_pool=pool, encoder_out_cache_loc=None,
                             req_to_token_pool=SimpleNamespace(req_to_token=req_to_token), **fields)
        return fb

    def lengths(fb):
        return {k: (None if getattr(fb, k, None) is None else getattr(fb, k).tolist())
                for k in ("seq_lens", "extend_prefix_lens", "extend_seq_lens")}

    def report(run, expected, fb):
        before = lengths(fb)
        try:
            got = run()
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "max_err": float((got - expected).abs().max()), "restored": lengths(fb) == before}
"""

EXTEND_MODES = ATTENTION_SETUP + """
    # Two requests with prefixes of 5 and 3 cached tokens, each extended by 3 tokens (verify: 3 draft tokens;
    # draft extend: 3 accepted tokens). Expected: every new token attends causally to its prefix and the new
    # tokens up to itself.
    prefix, n = [5, 3], 3
    q, k, v = (torch.randn(2 * n, H * D) for _ in range(3))
    out_loc = torch.cat([req_to_token[0, 5:8], req_to_token[1, 3:6]])
    rows = []
    for r, P in enumerate(prefix):
        for t in range(n):
            i = r * n + t
            rows.append(attend(q[i], req_to_token[r, :P + t + 1], k[r * n: i + 1].view(-1, H, D),
                               v[r * n: i + 1].view(-1, H, D), slice(P, P + t + 1)))
    expected = torch.stack(rows)
    batches = {
        "verify": batch(forward_mode=ForwardMode.TARGET_VERIFY, spec_info=SimpleNamespace(topk=1, draft_token_num=n),
                        seq_lens=torch.tensor(prefix), extend_prefix_lens=None, extend_seq_lens=None,
                        out_cache_loc=out_loc),
        "verify_topk2": batch(forward_mode=ForwardMode.TARGET_VERIFY,
                              spec_info=SimpleNamespace(topk=2, draft_token_num=n), seq_lens=torch.tensor(prefix),
                              extend_prefix_lens=None, extend_seq_lens=None, out_cache_loc=out_loc),
        # draft extend: seq_lens already count the accepted tokens; the batch's prefix lens are stale (0)
        "draft_extend": batch(forward_mode=ForwardMode.DRAFT_EXTEND, spec_info=SimpleNamespace(topk=1),
                              seq_lens=torch.tensor([p + n for p in prefix]), extend_prefix_lens=torch.tensor([0, 0]),
                              extend_seq_lens=torch.tensor([n, n]), out_cache_loc=out_loc),
    }
    backend = TorchNativeAttnBackend(SimpleNamespace(device="cpu"))
    print(json.dumps({mode: report(lambda: backend.forward_extend(q, k, v, layer, fb), expected, fb)
                      for mode, fb in batches.items()}))
"""


def test_torch_native_verify_and_draft_extend_attend_causally_over_prefix_and_refuse_topk2():
    without = run_child(EXTEND_MODES)
    for mode in ("verify", "draft_extend"):
        assert not without[mode]["ok"]
        assert without[mode]["error"].split(":")[0] in SHIMS["torch_native_verify_extend"].avoids
    with_shim = run_child(EXTEND_MODES, shims=("torch_native_verify_extend",))
    for mode in ("verify", "draft_extend"):
        assert with_shim[mode] == {"ok": True, "max_err": pytest.approx(0.0, abs=1e-5), "restored": True}
    refused = with_shim["verify_topk2"]
    assert not refused["ok"] and "topk 1 only" in refused["error"] and "topk 2" in refused["error"]


DRAFT_BACKENDS = ATTENTION_SETUP + """
    from sglang.srt.speculative.draft_utils import DraftBackendFactory

    def build(topk, page_size):
        args = SimpleNamespace(attention_backend="torch_native", speculative_draft_attention_backend=None,
                               decode_attention_backend=None, prefill_attention_backend=None,
                               speculative_attention_mode="prefill", page_size=page_size)
        factory = DraftBackendFactory(args, SimpleNamespace(device="cpu", server_args=args), topk, 3)
        return factory.create_decode_backend(), factory.create_draft_extend_backend()

    out = {}
    for topk, page_size in ((2, 1), (1, 16)):
        try:
            build(topk, page_size)
            out[f"{topk},{page_size}"] = {"ok": True}
        except Exception as exc:
            out[f"{topk},{page_size}"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    try:
        multi, extend = build(1, 1)
    except Exception as exc:
        print(json.dumps({**out, "1,1": {"ok": False, "error": f"{type(exc).__name__}: {exc}"}}))
        raise SystemExit
    # Draft step i of a request with seq_len 5: its query sits at position 5 + i and reads slots 0 .. 5 + i
    # of req_to_token (the prefix and the draft tokens so far, its own included), like the Triton backend.
    seq_len, results = 5, {}
    for step, backend in enumerate(multi.attn_backends):
        q, k, v = (torch.randn(1, H * D) for _ in range(3))
        loc = req_to_token[0, seq_len + step: seq_len + step + 1]
        expected = attend(q[0], req_to_token[0, :seq_len + step + 1], k.view(1, H, D), v.view(1, H, D),
                          slice(seq_len + step, seq_len + step + 1))[None]
        fb = batch(forward_mode=ForwardMode.DECODE, seq_lens=torch.tensor([seq_len]), out_cache_loc=loc)
        fb.req_pool_indices = torch.tensor([0])
        got = backend.forward_decode(q, k, v, layer, fb)
        results[step] = float((got - expected).abs().max())
    print(json.dumps({**out, "1,1": {"ok": True, "steps": len(multi.attn_backends), "errors": results,
                                     "extend": type(extend).__name__,
                                     "seq_lens_kept": fb.seq_lens.tolist() == [seq_len]}}))
"""


def test_draft_backend_factory_gets_a_torch_native_multi_step_backend_and_refuses_the_rest():
    without = run_child(DRAFT_BACKENDS)
    assert without["1,1"] == {"ok": False, "error": SHIMS["draft_backend_torch_native"].avoids.split("  (")[0]}
    result = run_child(DRAFT_BACKENDS, shims=("draft_backend_torch_native",))
    chain = result["1,1"]
    assert chain["ok"] and chain["steps"] == 2 and chain["extend"] == "TorchNativeAttnBackend"
    assert chain["seq_lens_kept"] and all(err < 1e-5 for err in chain["errors"].values())
    for key, message in (("2,1", "topk 1 only"), ("1,16", "page-size 1")):  # one clear line, never wrong tokens
        refused = result[key]
        assert not refused["ok"] and refused["error"].startswith("SpeculativeCpuError: ")
        assert message in refused["error"] and "\n" not in refused["error"]


def test_support_gate_is_one_line_per_case():
    check_supported(1, 1)
    for topk, page, setting, value in ((4, 1, "speculative_eagle_topk", 4), (1, 64, "page_size", 64)):
        with pytest.raises(SpeculativeCpuError) as err:
            check_supported(topk, page)
        assert (err.value.setting, err.value.value, err.value.problem) == (setting, value, "unsupported")
        assert "\n" not in str(err.value)


ASSIGN_REQ_TO_TOKEN = """
    import json, torch
    from sglang.srt.speculative.spec_utils import assign_req_to_token_pool_func
    req_to_token = torch.zeros((2, 16), dtype=torch.int32)
    try:
        # request 0 gets slots 10..12 at offsets 2..4, request 1 gets 20..21 at offsets 4..5
        assign_req_to_token_pool_func(torch.tensor([0, 1], dtype=torch.int32), req_to_token,
                                      torch.tensor([2, 4], dtype=torch.int32), torch.tensor([5, 6], dtype=torch.int32),
                                      torch.tensor([10, 11, 12, 20, 21], dtype=torch.int32), 2)
        print(json.dumps({"ok": True, "rows": req_to_token[:, :8].tolist()}))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


def test_triton_interpreter_runs_sglangs_bookkeeping_kernel_only_with_the_scalar_fix():
    without = run_child(ASSIGN_REQ_TO_TOKEN, speculative=True)
    assert not without["ok"] and "only 0-dimensional arrays can be converted to Python scalars" in without["error"]
    result = run_child(ASSIGN_REQ_TO_TOKEN, shims=("triton_interpreter_scalars",), speculative=True)
    assert result == {"ok": True, "rows": [[0, 0, 10, 11, 12, 0, 0, 0], [0, 0, 0, 0, 20, 21, 0, 0]]}


SAMPLING = """
    import json
    from sglang.srt.sampling.sampling_params import SamplingParams
    out = {}
    for name, kwargs in {"greedy": {"temperature": 0}, "top_k_1": {"temperature": 0.8, "top_k": 1},
                         "sampled": {"temperature": 0.7}}.items():
        params = SamplingParams(**kwargs)
        try:
            params.verify(1024)
            out[name] = "ok"
        except ValueError as exc:
            out[name] = str(exc)
    print(json.dumps(out))
"""


def test_speculative_cpu_server_refuses_sampling_instead_of_silently_going_greedy():
    assert run_child(SAMPLING) == {"greedy": "ok", "top_k_1": "ok", "sampled": "ok"}
    result = run_child(SAMPLING, shims=("greedy_only_sampling",))
    assert result["greedy"] == "ok" and result["top_k_1"] == "ok"
    assert result["sampled"].startswith(GREEDY_ONLY) and "temperature=0.7" in result["sampled"]


def test_triton_interpreter_only_in_speculative_environments():
    assert "TRITON_INTERPRET" not in cpu_environment(shims=())
    assert cpu_environment(shims=SPEC_SHIMS, speculative=True)["TRITON_INTERPRET"] == "1"
