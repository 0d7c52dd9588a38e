"""In-process check of the EAGLE-3 hooks on sglang's own ModelRunner: does the target capture what the drafter reads?

The target ``ModelRunner`` is built exactly as ``sglang.bench_one_batch`` builds it (``ServerArgs`` ->
``PortArgs`` -> ``ModelConfig.from_server_args`` -> ``ModelRunner``), with the EAGLE-3 server arguments, so its
start-up calls ``set_eagle3_layers_to_capture`` on the wrapper like a real launch does. Then the check calls the
draft worker's hook (``get_embed_and_head``) on the same model object and runs a real prefill and decode forward
with ``CaptureHiddenMode.FULL``. The aux hidden states sglang returns are compared, slice by slice, with the
outputs of the decoder layers the drafter names (read with forward hooks), so the layer mapping is checked
against the model's own numbers, not against a copy of sglang's ``+1`` rule.

sglang's CPU environment (stub libcuda, ``SGLANG_USE_CPU_ENGINE`` ...) must be set before sglang is imported,
so the check runs in a child process (``python -m eagle3lab.fix.capture_check``) that prints one JSON line;
``run_capture_check`` starts it, applying a patch to the installed package around it when asked.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from eagle3lab.childjson import ask, emit
from eagle3lab.errors import CaptureCheckError
from eagle3lab.package.patching import FULL_DELEGATION_PATCH as FULL_PATCH, ONE_METHOD_PATCH
from eagle3lab import sidecars
from eagle3lab.runtime.server import free_port
from eagle3lab.sidecars import InterfaceTraceSidecar
from eagle3lab.trace.hooks import GET_EMBED_AND_HEAD, SET_LAYERS_TO_CAPTURE
from eagle3lab.runtime.cpu_harness import cpu_environment
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.package import patching
from eagle3lab.errors import PatchError
from eagle3lab.package.location import site_packages_root
from eagle3lab.package.restore import require_known_state
from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.profiles import load_profile

# The draft worker's call, as EAGLEWorker.__init__ makes it on the target model (sglang 0.5.9).
DRAFT_WORKER_HOOK = GET_EMBED_AND_HEAD
CAPTURE_HOOK = SET_LAYERS_TO_CAPTURE
# Where the wrapper keeps its language model (Kimi-K2.5: self.language_model); other wrappers pass theirs
# (``llm``, ``model``, or a path through a proxy such as ``minicpmv.llm``), as the audit resolved it.
DEFAULT_INNER = "language_model"
# In-process on CPU only the DeepSeek MLA prefill needs a shim (cpu_harness obstacle 7); 8 and 9 belong to the draft.
CPU_SHIMS: tuple[str, ...] = ("mla_torch_native",)


@dataclass
class HookOutcome:
    """One call the runtime makes on the target model object, and what happened."""

    hook: str
    caller: str  # where sglang makes this call at runtime
    ok: bool
    error_type: str | None = None
    error_message: str | None = None
    raised_at: str | None = None  # innermost sglang frame, "path:line in function"


@dataclass
class ForwardCapture:
    """The aux hidden states one real forward returned, against the layer outputs they should be."""

    phase: str  # "prefill" or "decode"
    tokens: int
    shape: list[int]
    expected_shape: list[int]
    matches_layer_outputs: bool  # slice k equals the output of decoder layer drafter_layer_ids[k]
    matched_layers: list[int | None]  # for each slice, the decoder layer whose output it equals
    ambiguous: bool  # some slice equals the outputs of several layers (e.g. near-zero dummy weights)
    max_abs_diff: float
    seconds: float


@dataclass
class CaptureResult:
    """Everything the check found; ``ok`` only when every hook passed and both forwards captured correctly."""

    patch: str | None
    drafter_layer_ids: list[int] | None = None
    layers_to_capture: list[int] | None = None  # what the inner model ended up with (sglang's own mapping)
    hidden_size: int | None = None
    hooks: list[HookOutcome] = field(default_factory=list)
    forwards: list[ForwardCapture] = field(default_factory=list)
    error_type: str | None = None  # an error outside the hooks (the check could not run)
    error_message: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    sglang_version: str | None = None
    harness_steps: list[str] = field(default_factory=list)  # anything the check did beyond sglang's own start-up

    @property
    def failed_hook(self) -> HookOutcome | None:
        return next((hook for hook in self.hooks if not hook.ok), None)

    @property
    def ok(self) -> bool:
        return (
            self.error_type is None
            and self.failed_hook is None
            and len(self.forwards) == 2
            and all(f.matches_layer_outputs and not f.ambiguous and f.shape == f.expected_shape
                    for f in self.forwards)
        )

    @property
    def outcome(self) -> str:
        """One word for tables: captured, hook_missing, error, ambiguous or mismatch."""
        if self.failed_hook is not None:
            return "hook_missing"
        if self.error_type is not None:
            return "error"
        if self.ok:
            return "captured"
        if all(f.matches_layer_outputs for f in self.forwards) and len(self.forwards) == 2:
            return "ambiguous"
        return "mismatch"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "outcome": self.outcome}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaptureResult:
        data = {k: v for k, v in data.items() if k not in ("ok", "outcome")}
        data["hooks"] = [HookOutcome(**h) for h in data.get("hooks", [])]
        data["forwards"] = [ForwardCapture(**f) for f in data.get("forwards", [])]
        return cls(**data)


# ---------------------------------------------------------------------------------------------------------
# Parent side


PatchArg = str | os.PathLike | Sequence[str | os.PathLike] | None


def child_argv(target: str | os.PathLike, draft: str | os.PathLike, *, prompt_len: int = 8, batch_size: int = 2,
               load_format: str = "auto", profile: str = "cpu", python: str = sys.executable,
               inner_attr: str = DEFAULT_INNER, inner_post_load: bool = False) -> list[str]:
    """The command line of the child process."""
    argv = [python, "-m", "eagle3lab.fix.capture_check", "--target", str(target), "--draft", str(draft),
            "--prompt-len", str(prompt_len), "--batch-size", str(batch_size), "--load-format", load_format,
            "--profile", profile, "--inner-attr", inner_attr]
    return argv + ["--inner-post-load"] if inner_post_load else argv


def run_capture_check(
    target: str | os.PathLike,
    draft: str | os.PathLike,
    patch: PatchArg = None,
    *,
    load_format: str = "auto",
    profile: str = "cpu",
    site_packages: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    prompt_len: int = 8,
    batch_size: int = 2,
    timeout_s: float = 900.0,
    inner_attr: str = DEFAULT_INNER,
    inner_post_load: bool = False,
) -> CaptureResult:
    """Run the check in a child process, with ``patch`` (one name/path or several) applied to the installed sglang.

    ``env`` is added to the child's environment; the ``cpu`` profile passes ``cpu_environment()`` (stub
    libcuda, CPU engine, shims). The installed package must carry none of the project's patches beforehand
    (checked under the patch lock), so each result shows exactly the patches asked for; it is restored after.
    ``load_format="dummy"`` exercises sglang's dummy loader instead of the checkpoint; ``profile`` names the
    params file whose launch flags (backend, dtype, lengths, speculative settings) the runner gets.
    ``inner_post_load`` runs the inner model's ``post_load_weights`` after a dummy load, which sglang's dummy
    loader does not do for a wrapper without one (so the Kimi wrapper shows that gap unless asked); the generated
    fixes' verification asks, since it checks delegation of the EAGLE-3 hooks, not the dummy loader.
    """
    for name, path in (("target", target), ("draft", draft)):
        if not Path(path).is_dir():
            raise CaptureCheckError(f"{name} model {path} is not a directory; build the tiny models first",
                                    path=Path(path), problem="not_a_directory")
    argv = child_argv(target, draft, prompt_len=prompt_len, batch_size=batch_size, load_format=load_format,
                      profile=profile, inner_attr=inner_attr, inner_post_load=inner_post_load)
    with _patch_state(patch, site_packages) as label:
        result = _run_child(argv, {**os.environ, **(env or {})}, timeout_s)
    result.patch = label
    return result


def run_cpu_capture_check(
    patch: PatchArg = None,
    *,
    load_format: str = "auto",
    num_layers: int = 4,
    site_packages: str | os.PathLike | None = None,
    timeout_s: float = 900.0,
) -> CaptureResult:
    """The ``cpu`` profile's check: tiny models from the cache, the CPU harness with only the shims it needs."""

    models = build_tiny_models(num_layers=num_layers)
    return run_capture_check(models.target_dir, models.draft_dir, patch, load_format=load_format,
                             site_packages=site_packages,
                             env=cpu_environment(shims=CPU_SHIMS), timeout_s=timeout_s)


@contextlib.contextmanager
def _patch_state(patch: PatchArg, site_packages: str | os.PathLike | None) -> Iterator[str | None]:
    """Hold the patch lock, insist on a pristine package, apply ``patch`` (one or several), restore on exit."""

    names = [patch] if isinstance(patch, (str, os.PathLike)) else list(patch or [])
    with patching.held(site_packages), contextlib.ExitStack() as stack:
        _require_pristine(site_packages)
        labels = [stack.enter_context(patching.patched(name, site_packages)).patch for name in names]
        yield "+".join(labels) or None


def _require_pristine(site_packages: str | os.PathLike | None) -> None:
    """No project patch may be in place already, or a result would show patches nobody asked for."""

    require_known_state(site_packages_root(site_packages))  # a patch left by a killed run: say so, with the fix
    applied, mismatched = [], []
    for path in sorted(patching.PATCHES_DIR.glob("*.patch")):
        try:
            if patching.check(path, site_packages).status == patching.ALREADY_APPLIED:
                applied.append(path.stem)
        except PatchError:
            mismatched.append(path.stem)
    if applied:
        raise CaptureCheckError(f"the installed sglang already carries {', '.join(applied)}; "
                                "revert with python -m eagle3lab patch revert NAME first", patch=applied[0],
                                problem="already_patched")
    if mismatched:
        raise CaptureCheckError(f"the installed sglang does not match {', '.join(mismatched)}: not the pristine "
                                "release the patches expect; reinstall sglang==0.5.9", patch=mismatched[0],
                                problem="not_pristine")


def _run_child(argv: list[str], env: dict[str, str], timeout_s: float) -> CaptureResult:
    started = time.monotonic()
    answer = ask(argv, env=env, timeout_s=timeout_s)
    if answer.timed_out:
        raise CaptureCheckError(f"the capture check did not finish within {timeout_s:.0f} s; raise timeout_s",
                                timeout_s=timeout_s, problem="timeout")
    if not answer.ok:
        raise CaptureCheckError(f"the capture check gave no result: {answer.failure()}",
                                returncode=answer.returncode, problem="no_result")
    result = CaptureResult.from_dict(answer.payload)
    result.seconds["wall"] = round(time.monotonic() - started, 2)
    return result


# ---------------------------------------------------------------------------------------------------------
# Agreement with notebook 02's static trace

@dataclass(frozen=True)
class Agreement:
    """One claim of the static trace (notebook 02) next to what the patch or the live check shows."""

    item: str
    trace: Any
    measured: Any

    @property
    def agree(self) -> bool:
        return self.trace == self.measured

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agree": self.agree}


def load_trace(profile: str = "cpu", path: str | os.PathLike | None = None) -> InterfaceTraceSidecar:
    """Notebook 02's typed sidecar for ``profile`` (one clear line if it is missing or unusable)."""
    return sidecars.read(InterfaceTraceSidecar, profile, Path(path) if path is not None else None)


def compare_with_trace(
    trace: InterfaceTraceSidecar,
    results: dict[str | None, CaptureResult],
    *,
    profile: str = "cpu",
    full_patch: str | os.PathLike = FULL_PATCH,
    site_packages: str | os.PathLike | None = None,
) -> list[Agreement]:
    """Rows for a table: the trace's missing members vs the full patch, and its first raises and layer ids vs
    the live runs in ``results`` (keyed by patch name, ``None`` for the unpatched run). Absent runs are skipped."""

    verdict, layer_table = trace.verdict, trace.layer_table(profile)
    if layer_table is None:
        raise CaptureCheckError(f"the trace has no layer-id table for profile {profile}; rerun notebook 02",
                                profile=profile, problem="no_layer_table")
    members = sorted(m.name for m in patching.added_members(full_patch, site_packages))
    rows = [Agreement("members the full patch delegates", sorted(verdict.missing_members), members)]

    def failed(key: str | None) -> str | None:
        hook = results[key].failed_hook
        return hook.hook if hook else None

    if None in results:
        first = verdict.first_raise.get(profile)
        rows.append(Agreement("first missing hook, unpatched", first.member if first else None, failed(None)))
    if ONE_METHOD_PATCH in results:
        after = verdict.next_raise_after_one_method.get(profile)
        rows.append(Agreement("next missing hook, one-method patch", after.member if after else None,
                              failed(ONE_METHOD_PATCH)))
    patched_runs = [r for key, r in results.items() if key is not None and r.layers_to_capture is not None]
    if patched_runs:
        run = patched_runs[0]
        init_row = next((row for row in layer_table.rows if row["function"] == "ModelRunner.initialize"), None)
        rows.append(Agreement("drafter aux layer ids", list(layer_table.aux_layer_ids or []), run.drafter_layer_ids))
        if init_row is not None:
            rows.append(Agreement("layers_to_capture after ModelRunner.initialize",
                                  init_row["result"].get("self.model.layers_to_capture"), run.layers_to_capture))
    return rows


# ---------------------------------------------------------------------------------------------------------
# Child side: everything below imports sglang and runs only in ``python -m eagle3lab.fix.capture_check``


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
    parser = argparse.ArgumentParser(prog="python -m eagle3lab.fix.capture_check", description=__doc__.splitlines()[0])
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
