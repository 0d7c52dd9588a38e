"""Import-time shims for obstacles of *running sglang 0.5.9 on a CPU*, none of which is the bug under study.

Every shim names the exact sglang error it avoids (or, for sglang's silent CPU paths, what happens instead of an
error), patches one function in one sglang module (one is Triton's interpreter), and never touches the Kimi-K2.5
wrapper (``sglang/srt/models/kimi_k25.py``) or any other model file: the crash this project reproduces must stay
real. The speculative shims (``spec_shims.py``) support topk 1 and page size 1 only and refuse the rest loudly.
Shims are chosen by name through the ``EAGLE3LAB_SHIMS`` environment variable (comma separated), read by the
``sitecustomize`` in ``cpu_harness/site`` so that sglang's spawned scheduler process gets them too.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType

from eagle3lab.runtime.cpu_harness.hooks import when_imported
from eagle3lab.errors import HarnessBuildError

SHIMS_ENV = "EAGLE3LAB_SHIMS"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shim:
    """One CPU-only patch: where it applies and which sglang error it avoids."""

    name: str
    obstacle: int  # number in the obstacle list of this package's docstring (cpu_harness/__init__.py)
    module: str
    avoids: str  # the sglang error, quoted as seen
    apply: Callable[[ModuleType], None]


# --- (7) torch_native has no DeepSeek MLA handler -------------------------------------------------------------

def _absorbed_mla_for_torch_native(module: ModuleType) -> None:
    """Register a ``torch_native`` handler that always takes the absorbed-MLA path.

    Without it ``AttentionBackendRegistry.get_handler`` falls back to the triton handler, whose prefill takes the
    MHA path and hands the compressed KV latent to torch_native's SDPA as if it were full keys.
    """
    registry = module.AttentionBackendRegistry

    def handle_attention_torch_native(attn, forward_batch):  # type: ignore[no-untyped-def]
        return module._dispatch_mla_subtype(attn, forward_batch)

    registry.register("torch_native", handle_attention_torch_native)


# --- (8) Triton warm-up of the KV copy kernel --------------------------------------------------------------

def _skip_kv_copy_warmup_on_cpu(module: ModuleType) -> None:
    """On a CPU pool, leave the KV-copy kernel unconfigured (as when ``enable_kv_cache_copy`` is False).

    The warm-up launches a Triton kernel, and Triton has no CPU driver.
    """
    pool = module.MHATokenToKVPool
    original = pool._init_kv_copy_and_warmup

    @functools.wraps(original)
    def _init_kv_copy_and_warmup(self):  # type: ignore[no-untyped-def]
        if str(self.device).startswith("cpu"):
            self._kv_copy_config = None
            return None
        return original(self)

    pool._init_kv_copy_and_warmup = _init_kv_copy_and_warmup


# --- (9) set_embed synchronises CUDA unconditionally ---------------------------------------------------------

@contextlib.contextmanager
def _cuda_sync_is_noop() -> Iterator[None]:
    import torch

    saved = torch.cuda.synchronize
    torch.cuda.synchronize = lambda *args, **kwargs: None
    try:
        yield
    finally:
        torch.cuda.synchronize = saved


def _set_embed_without_cuda_sync(module: ModuleType) -> None:
    """Run the real ``LlamaForCausalLM.set_embed``, with ``torch.cuda.synchronize`` a no-op when there is no GPU."""
    import torch

    cls = module.LlamaForCausalLM
    original = cls.set_embed

    @functools.wraps(original)
    def set_embed(self, embed):  # type: ignore[no-untyped-def]
        if torch.cuda.is_available():
            return original(self, embed)
        with _cuda_sync_is_noop():
            return original(self, embed)

    cls.set_embed = set_embed


SHIMS: dict[str, Shim] = {
    shim.name: shim
    for shim in (
        Shim(
            name="mla_torch_native",
            obstacle=7,
            module="sglang.srt.models.deepseek_common.attention_backend_handler",
            avoids="RuntimeError: Expected size for first two dimensions of batch2 tensor to be: [4, 32] but got: "
            "[4, 48]  (first prefill of a DeepSeek MLA model with --attention-backend torch_native)",
            apply=_absorbed_mla_for_torch_native,
        ),
        Shim(
            name="kv_copy_warmup_cpu",
            obstacle=8,
            module="sglang.srt.mem_cache.memory_pool",
            avoids="RuntimeError: 0 active drivers ([]). There should only be one.  "
            "(MHATokenToKVPool._init_kv_copy_and_warmup, speculative decoding start-up)",
            apply=_skip_kv_copy_warmup_on_cpu,
        ),
        Shim(
            name="set_embed_cuda_sync",
            obstacle=9,
            module="sglang.srt.models.llama",
            avoids="RuntimeError: Unexpected error from cudaGetDeviceCount(). ... Error 34: CUDA driver is a stub "
            "library  (torch.cuda.synchronize() in LlamaForCausalLM.set_embed, called on the EAGLE-3 draft model)",
            apply=_set_embed_without_cuda_sync,
        ),
    )
}

# --- The speculative loop itself (obstacles 10-15 of the package docstring); see spec_shims.py -----------------
# Obstacle numbers continue the list above: 10 is where the launch stopped before these shims existed.

def _from_spec_shims(name: str) -> Callable[[ModuleType], None]:
    """``spec_shims.<name>``, imported only when its sglang module is. spec_shims imports torch, and this module
    runs in every Python process of a harness launch through the ``sitecustomize`` (multiprocessing's resource
    tracker too, which imports nothing else): an eager import there cost about 6 s of CPU per launch."""

    def apply(module: ModuleType) -> None:
        getattr(importlib.import_module("eagle3lab.runtime.cpu_harness.spec_shims"), name)(module)

    apply.__qualname__ = apply.__name__ = f"spec_shims.{name}"
    return apply


def _spec_shims() -> tuple[Shim, ...]:

    return (
        Shim(
            name="draft_backend_torch_native",
            obstacle=10,
            module="sglang.srt.speculative.draft_utils",
            avoids="ValueError: EAGLE is not supported in decode attention backend torch_native  "
            "(DraftBackendFactory.create_decode_backend, speculative/draft_utils.py)",
            apply=_from_spec_shims("torch_native_draft_backends"),
        ),
        Shim(
            name="torch_native_verify_extend",
            obstacle=11,
            module="sglang.srt.layers.attention.torch_native_backend",
            avoids="AttributeError: 'NoneType' object has no attribute 'shape'  (TorchNativeAttnBackend."
            "forward_extend in TARGET_VERIFY: the verify batch carries no extend lengths); and RuntimeError: The "
            "expanded size of the tensor ... must match the existing size  (DRAFT_EXTEND: stale extend_prefix_lens)",
            apply=_from_spec_shims("torch_native_verify_and_draft_extend"),
        ),
        Shim(
            name="build_tree_cpu",
            obstacle=12,
            module="sglang.srt.speculative.eagle_utils",
            avoids="NameError: name 'sgl_build_tree_kernel_efficient' is not defined  (eagle_utils imports the "
            "sgl_kernel op only under CUDA/HIP; EAGLEWorker.draft)",
            apply=_from_spec_shims("provide_build_tree_kernel"),
        ),
        Shim(
            name="verify_greedy_cpu",
            obstacle=13,
            module="sglang.srt.speculative.eagle_utils",
            avoids="Silent no-op: verify_tree_greedy_func has no CPU branch and returns its buffers untouched "
            "(predicts stays torch.empty, so the accepted tokens are whatever memory held; no error is raised)",
            apply=_from_spec_shims("cpu_verify_tree_greedy"),
        ),
        Shim(
            name="triton_interpreter_scalars",
            obstacle=14,
            module="triton.runtime.interpreter",
            avoids="InterpreterError: TypeError('only 0-dimensional arrays can be converted to Python scalars')  "
            "(Triton 3.5.1 interpreter under NumPy 2, first hit in spec_utils.assign_draft_cache_locs)",
            apply=_from_spec_shims("interpreter_scalar_index"),
        ),
        Shim(
            name="greedy_only_sampling",
            obstacle=15,
            module="sglang.srt.sampling.sampling_params",
            avoids="UserWarning-only: Tree speculative sampling kernel unavailable ... Falling back to greedy "
            "verification  (EagleVerifyInput.verify on CPU ignores temperature > 0)",
            apply=_from_spec_shims("refuse_sampling"),
        ),
        Shim(
            name="bookkeeping_kernels_torch",
            obstacle=16,
            module="sglang.srt.speculative.spec_utils",
            avoids="Harness cost, not an error: under TRITON_INTERPRET=1 every launch of assign_req_to_token_pool, "
            "assign_draft_cache_locs and create_extend_after_decode_spec_info runs in Triton's interpreter "
            "(milliseconds per launch on CPU, microseconds as a CUDA kernel)",
            apply=_from_spec_shims("torch_bookkeeping_kernels"),
        ),
        Shim(
            name="torch_native_attention_rows",
            obstacle=17,
            module="sglang.srt.layers.attention.torch_native_backend",
            avoids="Harness cost, not an error: torch_native's extend attention runs, per request, a causal SDPA "
            "over seq_len query rows and keeps the last extend rows (a verify of 4 draft tokens costs a prefill of "
            "the whole sequence), and torch's CPU SDPA costs several times a written-out attention at these "
            "sizes; applied to the baseline and the EAGLE-3 servers alike",
            apply=_from_spec_shims("attention_rows"),
        ),
    )


SHIMS.update({shim.name: shim for shim in _spec_shims()})

ALL_SHIMS: tuple[str, ...] = tuple(SHIMS)
CONTROL_SHIMS: tuple[str, ...] = ("mla_torch_native", "torch_native_attention_rows")
# Everything a speculative CPU server needs; these servers also run with TRITON_INTERPRET=1 (see environment.py).
SPEC_SHIMS: tuple[str, ...] = ALL_SHIMS
# The shims that only make sense with Triton's interpreter on (sglang's bookkeeping kernels are Triton kernels).
INTERPRETER_SHIMS: tuple[str, ...] = ("triton_interpreter_scalars",)


def check_shim_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate shim names; unknown names fail with one line listing the known ones."""
    unknown = [name for name in names if name not in SHIMS]
    if unknown:
        raise HarnessBuildError(f"unknown shim(s) {', '.join(unknown)}; known shims: {', '.join(ALL_SHIMS)}",
                                shim=unknown[0], problem="unknown_shim")
    return tuple(dict.fromkeys(names))


def install(names: Sequence[str]) -> tuple[str, ...]:
    """Arrange for each named shim to patch its module as soon as it is imported (now, if it already is)."""
    chosen = check_shim_names(names)
    for name in chosen:
        shim = SHIMS[name]
        when_imported(shim.module, shim.apply)
    return chosen


def install_from_environment(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Install the shims listed in ``EAGLE3LAB_SHIMS`` (empty or unset: none)."""
    value = (environ if environ is not None else os.environ).get(SHIMS_ENV, "")
    names = [part.strip() for part in value.split(",") if part.strip()]
    return install(names) if names else ()
