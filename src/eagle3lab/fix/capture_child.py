"""The child side of the EAGLE-3 capture check: sglang's own ModelRunner, built and run in this process.

The target ``ModelRunner`` is built exactly as ``sglang.bench_one_batch`` builds it (``ServerArgs`` ->
``PortArgs`` -> ``ModelConfig.from_server_args`` -> ``ModelRunner``), with the EAGLE-3 server arguments, so its
start-up calls ``set_eagle3_layers_to_capture`` on the wrapper like a real launch does. Then the check calls the
draft worker's hook (``get_embed_and_head``) on the same model object and runs a real prefill and decode forward
with ``CaptureHiddenMode.FULL``. The aux hidden states sglang returns are compared, slice by slice, with the
outputs of the decoder layers the drafter names (read with forward hooks), so the layer mapping is checked
against the model's own numbers, not against a copy of sglang's ``+1`` rule.

sglang's CPU environment (stub libcuda, ``SGLANG_USE_CPU_ENGINE`` ...) must be set before sglang is imported, so
this runs only as ``python -m eagle3lab.fix.capture_child`` (started by ``capture_check``) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import time
import traceback
from typing import Any, Sequence

from eagle3lab.childjson import emit
from eagle3lab.fix.capture_result import (
    CAPTURE_HOOK, DEFAULT_INNER, DRAFT_WORKER_HOOK, CaptureResult, ForwardCapture, HookOutcome,
)
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.server import free_port


def _hook_outcome(hook: str, caller: str, err: BaseException | None) -> HookOutcome:
    if err is None:
        return HookOutcome(hook, caller, ok=True)
    frames = traceback.extract_tb(err.__traceback__)
    in_sglang = [f for f in frames if f"{os.sep}sglang{os.sep}" in f.filename]
    where = None
    if frames:
        frame = (in_sglang or frames)[-1]
        where = f"{frame.filename.split(f'{os.sep}site-packages{os.sep}')[-1]}:{frame.lineno} in {frame.name}"
    return HookOutcome(hook, caller, ok=False, error_type=type(err).__name__, error_message=str(err),
                       raised_at=where)


def _server_args(target: str, draft: str, load_format: str, profile_name: str) -> Any:
    """The profile's EAGLE-3 launch as ServerArgs (exactly what launch_server would parse), on fresh free ports."""
    from sglang.srt.server_args import ServerArgs


    spec = server_spec(load_profile(profile_name), Models(target, draft), speculative=True, port=free_port())
    return ServerArgs(**spec.server_args(), load_format=load_format, nccl_port=free_port())


def _build_runner(server_args: Any) -> Any:
    """sglang.bench_one_batch.load_model, minus the tokenizer."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.server_args import PortArgs

    port_args = PortArgs.init_new(server_args)
    model_config = ModelConfig.from_server_args(server_args)
    return ModelRunner(
        model_config=model_config, mem_fraction_static=server_args.mem_fraction_static, gpu_id=0, tp_rank=0,
        tp_size=server_args.tp_size, moe_ep_rank=0, moe_ep_size=server_args.ep_size, pp_rank=0, pp_size=1,
        nccl_port=port_args.nccl_port, server_args=server_args,
    )


class _LayerOutputs:
    """Records each decoder layer's output (hidden + residual) on every forward: the values EAGLE-3 should see."""

    def __init__(self, layers: Sequence[Any]) -> None:
        self.outputs: dict[int, Any] = {}
        self.handles = [layer.register_forward_hook(self._hook(i)) for i, layer in enumerate(layers)]

    def _hook(self, index: int):  # type: ignore[no-untyped-def]
        def record(_module, _inputs, output):  # type: ignore[no-untyped-def]
            hidden, residual = output
            self.outputs[index] = hidden if residual is None else hidden + residual

        return record

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _compare(phase: str, aux: Any, layer_ids: list[int], layers: _LayerOutputs, hidden: int,
             seconds: float) -> ForwardCapture:
    """Which decoder layer's output each ``hidden``-wide slice of the aux states equals, against the drafter ids."""
    import torch

    tokens = next(iter(layers.outputs.values())).shape[0]
    expected_shape = [tokens, len(layer_ids) * hidden]
    shape = list(aux.shape) if aux is not None else []
    matched: list[int | None] = []
    ambiguous = False
    diff = float("inf")
    if shape == expected_shape:
        for want, chunk in zip(layer_ids, aux.split(hidden, dim=-1)):
            hits = [i for i, out in sorted(layers.outputs.items()) if torch.equal(chunk, out)]
            matched.append(want if want in hits else (hits[0] if hits else None))
            ambiguous |= len(hits) > 1
        expected = torch.cat([layers.outputs[i] for i in layer_ids], dim=-1)
        diff = float((aux.float() - expected.float()).abs().max())
    return ForwardCapture(phase, tokens, shape, expected_shape, matched == list(layer_ids), matched, ambiguous,
                          diff, round(seconds, 3))


def _forwards(runner: Any, layer_ids: list[int], hidden: int, prompt_len: int, batch_size: int,
              vocab: int, inner_attr: str = DEFAULT_INNER) -> list[ForwardCapture]:
    """One real prefill and one decode step, the way bench_one_batch runs them, but with FULL hidden capture."""
    import torch
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.bench_one_batch import TreeCacheNamespace

    generator = torch.Generator().manual_seed(0)
    reqs = []
    for rid in range(batch_size):
        ids = torch.randint(16, vocab, (prompt_len,), generator=generator).tolist()
        req = Req(rid=rid, origin_input_text="", origin_input_ids=ids,
                  sampling_params=SamplingParams(temperature=0, max_new_tokens=4))
        req.fill_ids = req.origin_input_ids
        req.logprob_start_len = -1
        req.set_extend_input_len(len(req.fill_ids) - len(req.prefix_indices))
        reqs.append(req)
    tree_cache = TreeCacheNamespace(page_size=runner.server_args.page_size, device=runner.device,
                                    token_to_kv_pool_allocator=runner.token_to_kv_pool_allocator)
    batch = ScheduleBatch.init_new(reqs=reqs, req_to_token_pool=runner.req_to_token_pool,
                                   token_to_kv_pool_allocator=runner.token_to_kv_pool_allocator,
                                   tree_cache=tree_cache, model_config=runner.model_config, enable_overlap=False,
                                   spec_algorithm=SpeculativeAlgorithm.NONE)
    inner_layers = inner_model(runner.model, inner_attr).model.layers
    recorder = _LayerOutputs(inner_layers)
    results = []
    try:
        batch.prepare_for_extend()
        next_ids = None
        for phase in ("prefill", "decode"):
            if phase == "decode":
                batch.output_ids = next_ids
                batch.prepare_for_decode()
            worker_batch = batch.get_model_worker_batch()
            worker_batch.capture_hidden_mode = CaptureHiddenMode.FULL
            forward_batch = ForwardBatch.init_new(worker_batch, runner)
            recorder.outputs.clear()
            started = time.monotonic()
            with torch.no_grad():
                logits_output = runner.forward(forward_batch).logits_output
            elapsed = time.monotonic() - started
            next_ids = runner.sample(logits_output, forward_batch)
            results.append(_compare(phase, logits_output.hidden_states, layer_ids, recorder, hidden, elapsed))
    finally:
        recorder.close()
    return results


def inner_model(model: Any, path: str) -> Any:
    """``model.<path>`` for a dotted attribute path (``language_model``, ``minicpmv.llm``)."""
    for part in path.split("."):
        model = getattr(model, part)
    return model


def _finish_dummy_load(runner: Any, inner_attr: str, load_format: str, inner_post_load: bool) -> list[str]:
    """Make a ``--load-format dummy`` model usable for the layer comparison, and say what was done.

    sglang's dummy loader draws every weight from a tiny uniform range, so in bfloat16 each decoder layer's change
    to the residual stream rounds away and several layers' outputs come out bit-identical: the comparison cannot
    tell which layer a captured slice came from (``ambiguous``). The weights are redrawn, seeded, the way the tiny
    checkpoint draws them (N(0, 0.02), norms 1, biases 0). The loader also calls ``post_load_weights`` on the
    top-level model only, and only if it has one (DeepSeek MLA builds w_kc/w_vc there); with ``inner_post_load`` it is
    run on the inner model when the wrapper has none, as a checkpoint load does from the wrapper's load_weights.
    Neither step touches an EAGLE-3 hook: the capture hook already ran during start-up.
    """
    if load_format != "dummy":
        return []
    import torch

    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in runner.model.named_parameters():
            if not param.dtype.is_floating_point:
                continue
            if name.endswith("bias"):
                param.zero_()
            elif param.dim() == 1 and "norm" in name:
                param.fill_(1.0)
            else:
                param.copy_((torch.randn(tuple(param.shape), generator=generator) * 0.02).to(param.dtype))
    steps = ["dummy loader: weights redrawn N(0, 0.02) (seed 0) so layer outputs differ in bfloat16"]
    owner = runner.model if hasattr(runner.model, "post_load_weights") else inner_model(runner.model, inner_attr)
    if owner is not runner.model and not inner_post_load:
        return steps  # sglang's dummy loader stops here; the wrapper's gap shows at the first forward
    if hasattr(owner, "post_load_weights"):
        owner.post_load_weights()
        where = "the wrapper" if owner is runner.model else f"{inner_attr} (the wrapper has none)"
        steps.append(f"dummy loader: post_load_weights() run on {where}, as a checkpoint load does")
    return steps


def _child(target: str, draft: str, prompt_len: int, batch_size: int, load_format: str,
           profile: str, inner_attr: str = DEFAULT_INNER, inner_post_load: bool = False) -> CaptureResult:
    import sglang

    result = CaptureResult(patch=None, sglang_version=sglang.__version__)
    started = time.monotonic()
    server_args = _server_args(target, draft, load_format, profile)
    try:
        runner = _build_runner(server_args)
    except AttributeError as err:
        if CAPTURE_HOOK not in str(err):
            raise  # some other start-up problem: reported as the check's error, not as the hook's
        result.hooks.append(_hook_outcome(CAPTURE_HOOK, "ModelRunner.initialize", err))
        result.seconds["build"] = round(time.monotonic() - started, 2)
        return result
    result.seconds["build"] = round(time.monotonic() - started, 2)
    result.hooks.append(_hook_outcome(CAPTURE_HOOK, "ModelRunner.initialize", None))
    result.drafter_layer_ids = list(runner.eagle_aux_hidden_state_layer_ids or [])
    inner = inner_model(runner.model, inner_attr)
    result.layers_to_capture = list(inner.model.layers_to_capture)
    result.harness_steps = _finish_dummy_load(runner, inner_attr, load_format, inner_post_load)
    text_config = runner.model_config.hf_text_config
    result.hidden_size = int(text_config.hidden_size)

    try:
        embed, head = getattr(runner.model, DRAFT_WORKER_HOOK)()
        if embed is not inner.model.embed_tokens.weight or head is not inner.lm_head.weight:
            raise ValueError(f"{DRAFT_WORKER_HOOK} returned tensors that are not the inner model's embedding "
                             "and LM head, so the drafter would not share the target's weights")
        result.hooks.append(_hook_outcome(DRAFT_WORKER_HOOK, "EAGLEWorker.__init__", None))
    except (AttributeError, ValueError) as err:
        result.hooks.append(_hook_outcome(DRAFT_WORKER_HOOK, "EAGLEWorker.__init__", err))

    started = time.monotonic()
    try:
        result.forwards = _forwards(runner, result.drafter_layer_ids, result.hidden_size, prompt_len, batch_size,
                                    int(text_config.vocab_size), inner_attr)
    except Exception as err:  # noqa: BLE001 -- keep what the hooks showed, record why the forwards failed
        traceback.print_exc()
        result.error_type, result.error_message = type(err).__name__, (str(err).splitlines() or [""])[0]
    result.seconds["forwards"] = round(time.monotonic() - started, 2)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Child entry point: run the check and print one ``EAGLE3LAB_CAPTURE_RESULT {json}`` line."""
    parser = argparse.ArgumentParser(prog="python -m eagle3lab.fix.capture_child", description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", required=True)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--load-format", default="auto", help="sglang --load-format (auto, dummy, ...)")
    parser.add_argument("--profile", default="cpu", help="params/<profile>.yaml with the launch flags")
    parser.add_argument("--inner-attr", default=DEFAULT_INNER, help="the wrapper's inner language model attribute")
    parser.add_argument("--inner-post-load", action="store_true",
                        help="after a dummy load, run the inner model's post_load_weights (sglang does not)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        result = _child(args.target, args.draft, args.prompt_len, args.batch_size, args.load_format, args.profile,
                        args.inner_attr, args.inner_post_load)
    except Exception as err:  # noqa: BLE001 -- every failure becomes part of the structured result
        traceback.print_exc()
        result = CaptureResult(patch=None, error_type=type(err).__name__, error_message=str(err).splitlines()[0])
    result.seconds["child"] = round(time.monotonic() - started, 2)
    emit(result.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
