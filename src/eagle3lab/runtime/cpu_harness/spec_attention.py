"""torch_native attention for sglang 0.5.9's EAGLE loop on CPU: the draft steps, the verify and the draft extend.

Why: ``DraftBackendFactory`` (speculative/draft_utils.py) has no ``torch_native`` entry (``ValueError: EAGLE is not
supported in decode attention backend torch_native``), and ``TorchNativeAttnBackend.forward_extend`` knows only a
plain prefill: in ``TARGET_VERIFY`` the batch carries no extend lengths, and in ``DRAFT_EXTEND`` its
``extend_prefix_lens`` are stale (copied from the batch's last prefill). Everything here reuses sglang's own
``TorchNativeAttnBackend`` code and only hands it the right lengths, following what the Triton backend computes
for the same modes (``generate_draft_decode_kv_indices`` in speculative/spec_utils.py and the verify/extend
branches of ``TritonAttnBackend.init_forward_metadata``).

Supported: topk 1 (a chain, so the verify is a causal extend) and page size 1. Anything else raises one clear error
at start-up or at the first forward, never a silently wrong attention pattern.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from eagle3lab.errors import HarnessBuildError

UNSUPPORTED_TOPK = ("the eagle3lab CPU harness runs EAGLE with --speculative-eagle-topk 1 only (topk {topk} needs "
                    "the draft tree's custom attention mask, which torch_native does not apply); use topk 1 on CPU")
UNSUPPORTED_PAGE = ("the eagle3lab CPU harness runs EAGLE with --page-size 1 only (got {page_size}); "
                    "drop --page-size on CPU")


class SpeculativeCpuError(HarnessBuildError):
    """A speculative configuration the CPU harness does not implement."""

    setting: str | None = None  # the server argument it refuses ("speculative_eagle_topk", "page_size")
    value: object = None


def check_supported(topk: int, page_size: int) -> None:
    """The one gate for what the CPU EAGLE harness supports; raises one line otherwise."""
    if topk != 1:
        raise SpeculativeCpuError(UNSUPPORTED_TOPK.format(topk=topk), setting="speculative_eagle_topk", value=topk,
                                  problem="unsupported")
    if page_size != 1:
        raise SpeculativeCpuError(UNSUPPORTED_PAGE.format(page_size=page_size), setting="page_size",
                                  value=page_size, problem="unsupported")


@contextmanager
def _lengths(forward_batch: Any, **values: Any) -> Iterator[None]:
    """Hand sglang's own attention code other lengths for one call, then restore the batch as it was."""
    saved = {name: getattr(forward_batch, name) for name in values}
    for name, value in values.items():
        setattr(forward_batch, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(forward_batch, name, value)


def verify_lengths(forward_batch: Any) -> dict[str, Any]:
    """TARGET_VERIFY with topk 1: each request extends its ``seq_lens`` tokens by its ``draft_token_num`` draft
    tokens, causally (the tree is a chain); the KV cache then holds ``seq_lens + draft_token_num`` tokens."""
    import torch

    spec = forward_batch.spec_info
    topk = getattr(spec, "topk", None)
    if topk != 1:
        raise SpeculativeCpuError(UNSUPPORTED_TOPK.format(topk=topk), setting="speculative_eagle_topk", value=topk,
                                  problem="unsupported")
    prefix = forward_batch.seq_lens
    extend = torch.full_like(prefix, int(spec.draft_token_num))
    return {"seq_lens": prefix + extend, "extend_prefix_lens": prefix, "extend_seq_lens": extend}


def draft_extend_lengths(forward_batch: Any) -> dict[str, Any]:
    """DRAFT_EXTEND: ``seq_lens`` already counts the accepted tokens being extended, so the prefix is
    ``seq_lens - extend_seq_lens`` (the batch's own ``extend_prefix_lens`` are from an earlier prefill)."""
    extend = forward_batch.extend_seq_lens
    if extend is None:
        raise SpeculativeCpuError("DRAFT_EXTEND batch without extend_seq_lens; this sglang release is not the one "
                                  "the CPU harness was written for (0.5.9)", problem="other_release")
    seq_lens = forward_batch.seq_lens
    return {"extend_prefix_lens": seq_lens - extend.to(seq_lens.dtype), "extend_seq_lens": extend}


def patch_forward_extend(backend_class: Any) -> None:
    """Wrap ``backend_class.forward_extend`` so TARGET_VERIFY and DRAFT_EXTEND get their real lengths (the class is
    sglang's TorchNativeAttnBackend, untyped: sglang ships no types)."""
    original = backend_class.forward_extend

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):  # type: ignore[no-untyped-def]
        mode = forward_batch.forward_mode
        if mode.is_target_verify():
            lengths = verify_lengths(forward_batch)
        elif mode.is_draft_extend(include_v2=False):
            lengths = draft_extend_lengths(forward_batch)
        elif mode.is_draft_extend_v2():
            raise SpeculativeCpuError("DRAFT_EXTEND_V2 (the overlap EAGLE worker) is not supported by the CPU "
                                      "harness; it runs sglang's v1 EAGLE worker", problem="unsupported")
        else:
            return original(self, q, k, v, layer, forward_batch, save_kv_cache, **kwargs)
        with _lengths(forward_batch, **lengths):
            return original(self, q, k, v, layer, forward_batch, save_kv_cache, **kwargs)

    forward_extend.__wrapped__ = original  # type: ignore[attr-defined]
    forward_extend.__doc__ = original.__doc__
    backend_class.forward_extend = forward_extend


def sdpa_extend_new_rows(query: Any, output: Any, k_cache: Any, v_cache: Any, req_to_token: Any,
                         req_pool_indices: Any, seq_lens: Any, extend_prefix_lens: Any, extend_seq_lens: Any,
                         scaling: float | None = None, enable_gqa: bool = False, causal: bool = False) -> Any:
    """``TorchNativeAttnBackend._run_sdpa_forward_extend`` computing only the rows it keeps.

    sglang's version builds, per request, a query of ``seq_len`` rows (the new tokens written after ``prefix``
    uninitialised rows), runs a causal SDPA over all of them and keeps rows ``prefix:``. Row ``prefix + i`` of a
    top-left causal mask attends to keys ``0 .. prefix + i``; here the ``extend`` new rows attend with that same
    mask (bottom-right aligned), so the kept rows are the same attention, without the ``prefix`` rows that are
    thrown away. A verify of 4 draft tokens after 100 cached ones then costs 4 query rows, as on a GPU backend,
    not 104. The attention is written out (matmul, mask, softmax, matmul): at these sizes torch's CPU SDPA costs
    several times more on this 2-core machine (its OpenMP region), which no GPU backend pays either.
    """
    import torch

    query = query.movedim(0, query.dim() - 2)  # [heads, tokens, dim]
    start_q = 0
    prefixes, extends = extend_prefix_lens.tolist(), extend_seq_lens.tolist()
    for seq_idx, seq_len_kv in enumerate(seq_lens.tolist()):
        prefix, extend = int(prefixes[seq_idx]), int(extends[seq_idx])
        end_q = start_q + extend
        per_req_query = query[:, start_q:end_q, :]
        per_req_tokens = req_to_token[req_pool_indices[seq_idx], :seq_len_kv]
        per_req_key = k_cache[per_req_tokens].movedim(0, query.dim() - 2)
        per_req_value = v_cache[per_req_tokens].movedim(0, query.dim() - 2)
        if not (per_req_query.dtype == per_req_key.dtype == per_req_value.dtype):
            per_req_key = per_req_key.to(per_req_query.dtype)
            per_req_value = per_req_value.to(per_req_query.dtype)
        if enable_gqa and per_req_key.shape[0] != per_req_query.shape[0]:  # SDPA's enable_gqa grouping
            group = per_req_query.shape[0] // per_req_key.shape[0]
            per_req_key = per_req_key.repeat_interleave(group, dim=0)
            per_req_value = per_req_value.repeat_interleave(group, dim=0)
        scale = scaling if scaling is not None else per_req_query.shape[-1] ** -0.5
        scores = torch.matmul(per_req_query, per_req_key.transpose(-1, -2)) * scale
        if causal:  # new row i sits at position prefix + i: it sees keys 0 .. prefix + i
            rows = torch.arange(prefix, prefix + extend, device=query.device).unsqueeze(1)
            scores = scores.masked_fill(torch.arange(seq_len_kv, device=query.device).unsqueeze(0) > rows,
                                        float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), per_req_value)
        output[start_q:end_q, :, :] = out.movedim(query.dim() - 2, 0)
        start_q = end_q
    return output


def sdpa_decode_rows(query: Any, output: Any, k_cache: Any, v_cache: Any, req_to_token: Any,
                     req_pool_indices: Any, seq_lens: Any, scaling: float | None = None, enable_gqa: bool = False,
                     causal: bool = False) -> Any:
    """``TorchNativeAttnBackend._run_sdpa_forward_decode`` written out: one query row per request over its
    ``seq_len`` keys. sglang calls it with ``causal=False`` (the row sees every key); with ``causal=True`` its
    one-row SDPA is top-left aligned (the row sees key 0 only), and so is this one."""
    import torch

    ones = torch.ones_like(seq_lens)
    rows_at = torch.zeros_like(seq_lens) if causal else seq_lens - ones
    return sdpa_extend_new_rows(query, output, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
                                rows_at, ones, scaling=scaling, enable_gqa=enable_gqa, causal=causal)


def attention_rows(backend_class: type) -> None:
    """Make ``backend_class``'s extend and decode SDPA helpers compute only the rows they keep, written out
    (``sdpa_extend_new_rows``, ``sdpa_decode_rows``): the same attention, at the cost of the rows it returns."""
    for name, port in (("_run_sdpa_forward_extend", sdpa_extend_new_rows),
                       ("_run_sdpa_forward_decode", sdpa_decode_rows)):
        original = getattr(backend_class, name)

        def method(self, *args, _port=port, **kwargs):  # type: ignore[no-untyped-def]
            return _port(*args, **kwargs)

        method.__wrapped__ = original  # type: ignore[attr-defined]
        method.__doc__ = port.__doc__
        setattr(backend_class, name, method)


def make_draft_step_backend(backend_class: type) -> type:
    """A torch_native backend for draft step ``step``: the query at ``seq_lens + step`` attends to the request's
    first ``seq_lens + step + 1`` slots of ``req_to_token`` (the prefix plus the draft tokens so far, its own
    included), as ``generate_draft_decode_kv_indices`` lays them out for topk 1."""

    class TorchNativeDraftStepBackend(backend_class):  # type: ignore[misc, valid-type]
        def __init__(self, model_runner: Any, step: int):
            super().__init__(model_runner)
            self.step = step

        def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):  # type: ignore[no-untyped-def]
            seq_lens = forward_batch.seq_lens + (self.step + 1)
            with _lengths(forward_batch, seq_lens=seq_lens):
                return super().forward_decode(q, k, v, layer, forward_batch, save_kv_cache, **kwargs)

    return TorchNativeDraftStepBackend


class TorchNativeMultiStepDraftBackend:
    """The draft worker's multi-step backend (the role of ``TritonMultiStepDraftBackend``): one backend per draft
    forward (``speculative_num_steps - 1`` of them), each reading one more draft token than the last."""

    def __init__(self, model_runner: Any, topk: int, speculative_num_steps: int):
        from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

        check_supported(topk, model_runner.server_args.page_size)
        self.topk = topk
        self.speculative_num_steps = speculative_num_steps
        step_backend = make_draft_step_backend(TorchNativeAttnBackend)
        self.attn_backends = [step_backend(model_runner, step) for step in range(speculative_num_steps - 1)]

    def init_forward_metadata(self, forward_batch: Any) -> None:
        for backend in self.attn_backends:
            backend.init_forward_metadata(forward_batch)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        raise SpeculativeCpuError("CUDA graphs with the torch_native draft backend: pass --disable-cuda-graph on CPU",
                                  setting="disable_cuda_graph", value=False, problem="unsupported")


def draft_backend_factory(module: Any) -> None:
    """Give ``DraftBackendFactory`` a ``torch_native`` entry in its decode and draft-extend maps.

    ``_create_backend(backend_name, backend_map, error_template)`` is where sglang looks the name up; the wrapper
    adds one entry to the map it is handed and changes nothing else (other names behave exactly as before).
    """
    factory = module.DraftBackendFactory
    original = factory._create_backend

    def _create_backend(self, backend_name, backend_map, error_template):  # type: ignore[no-untyped-def]
        if backend_map.get("triton") == self._create_triton_decode_backend:
            entry = lambda: TorchNativeMultiStepDraftBackend(  # noqa: E731
                self.draft_model_runner, self.topk, self.speculative_num_steps)
        elif backend_map.get("triton") == self._create_triton_prefill_backend:
            entry = lambda: _draft_extend_backend(self)  # noqa: E731
        else:
            raise SpeculativeCpuError("DraftBackendFactory asked for a map that is neither the decode nor the "
                                      "draft-extend one; this sglang release is not 0.5.9", problem="other_release")
        return original(self, backend_name, {**backend_map, "torch_native": entry}, error_template)

    _create_backend.__wrapped__ = original  # type: ignore[attr-defined]
    factory._create_backend = _create_backend


def _draft_extend_backend(factory: Any) -> Any:
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

    check_supported(factory.topk, factory.draft_model_runner.server_args.page_size)
    return TorchNativeAttnBackend(factory.draft_model_runner)
