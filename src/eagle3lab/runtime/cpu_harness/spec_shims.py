"""The patch functions of the speculative CPU shims (registered in ``shims.SHIMS``).

Each one patches one function of one module, right after that module is imported, and acts only where the real
code has no CPU path: on a machine where sglang sees CUDA, HIP or NPU it leaves the original in charge.
"""

from __future__ import annotations

import functools
from types import ModuleType

from eagle3lab.runtime.cpu_harness import spec_attention, spec_kernels, tree_kernels

GREEDY_ONLY = ("speculative decoding on CPU verifies greedily only (sglang 0.5.9 has no CPU sampling kernel and "
               "would silently return greedy tokens): send temperature 0 (or top_k 1)")


def _has_accelerator_kernels(module: ModuleType) -> bool:
    """eagle_utils' own flags: True where sglang imports real sgl_kernel/NPU kernels."""
    return bool(getattr(module, "_is_cuda", False) or getattr(module, "_is_hip", False)
                or getattr(module, "_is_npu", False))


# --- C. build_tree_kernel_efficient: the sgl_kernel name is missing on CPU -----------------------------------

def provide_build_tree_kernel(module: ModuleType) -> None:
    """Define ``eagle_utils.sgl_build_tree_kernel_efficient`` (imported from sgl_kernel only under CUDA/HIP) as the
    torch port, so sglang's own ``build_tree_kernel_efficient`` wrapper runs unchanged on CPU tensors."""
    if _has_accelerator_kernels(module) or hasattr(module, "sgl_build_tree_kernel_efficient"):
        return
    # sglang ships no types: typeshed's ModuleType takes no new names, so setting one needs the ignore
    module.sgl_build_tree_kernel_efficient = tree_kernels.build_tree_kernel_efficient  # type: ignore[attr-defined]


# --- D. verify_tree_greedy_func: no CPU branch, a silent no-op ---------------------------------------------

def cpu_verify_tree_greedy(module: ModuleType) -> None:
    """Give ``eagle_utils.verify_tree_greedy_func`` the CPU branch it lacks (the torch port of
    ``sgl_kernel.verify_tree_greedy``); ``eagle_info`` imports the name after this hook has run."""
    if _has_accelerator_kernels(module):
        return
    original = module.verify_tree_greedy_func

    @functools.wraps(original)
    def verify_tree_greedy_func(predicts, accept_index, accept_token_num, candidates, retrive_index,  # type: ignore[no-untyped-def]
                                retrive_next_token, retrive_next_sibling, target_predict, topk=-1):
        tree_kernels.verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                        retrive_next_token, retrive_next_sibling, target_predict)
        return predicts, accept_index, accept_token_num

    module.verify_tree_greedy_func = verify_tree_greedy_func  # type: ignore[attr-defined]  # sglang's, untyped


# --- G. The Triton bookkeeping kernels of the EAGLE loop: torch ports instead of Triton's interpreter ---------

def torch_bookkeeping_kernels(module: ModuleType) -> None:
    """Replace ``spec_utils``' Triton kernels that the v1 EAGLE loop launches on CPU (page size 1, topk 1) with
    their torch ports, before ``eagle_worker`` and ``eagle_info`` import them by name. Under the interpreter they
    cost milliseconds per launch, a cost no GPU host pays."""
    if _has_accelerator_kernels(module):
        return
    for name, port in spec_kernels.PORTS.items():
        setattr(module, name, spec_kernels.TorchKernel(name, port))


# --- A and B. torch_native attention for the draft, the verify and the draft extend ------------------------

def torch_native_draft_backends(module: ModuleType) -> None:
    spec_attention.draft_backend_factory(module)


def torch_native_verify_and_draft_extend(module: ModuleType) -> None:
    spec_attention.patch_forward_extend(module.TorchNativeAttnBackend)


def attention_rows(module: ModuleType) -> None:
    spec_attention.attention_rows(module.TorchNativeAttnBackend)


# --- F. Triton interpreter: scalars are 1-element NumPy arrays ---------------------------------------------

def _scalar_index(self) -> int:  # type: ignore[no-untyped-def]
    """``tl.tensor.__index__`` for the interpreter: a one-element block is a scalar; anything larger is an error
    (Triton itself only turns scalars into Python ints)."""
    data = self.handle.data
    if getattr(data, "size", 1) != 1:
        raise TypeError(f"only a scalar Triton tensor can be used as an index, got shape {getattr(data, 'shape', ())}")
    return int(data.reshape(()).item()) if hasattr(data, "reshape") else int(data)


def interpreter_scalar_index(module: ModuleType) -> None:
    """Wrap ``triton.runtime.interpreter._patch_lang_tensor`` so the ``__index__`` it installs accepts the
    1-element arrays the interpreter uses for scalars (NumPy 2 refuses ``int()`` on them)."""
    original = module._patch_lang_tensor

    @functools.wraps(original)
    def _patch_lang_tensor(tensor):  # type: ignore[no-untyped-def]
        original(tensor)
        tensor.__index__ = _scalar_index

    module._patch_lang_tensor = _patch_lang_tensor  # type: ignore[attr-defined]  # triton's, untyped


# --- Sampling: refuse what the CPU verify cannot honour ----------------------------------------------------

def refuse_sampling(module: ModuleType) -> None:
    """``SamplingParams.verify`` also refuses non-greedy sampling (the HTTP request fails with one line), because
    on CPU ``EagleVerifyInput.verify`` falls back to greedy verification with only a log warning."""
    cls = module.SamplingParams
    original = cls.verify

    @functools.wraps(original)
    def verify(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, *args, **kwargs)
        if self.top_k != 1:  # sglang's normalisation turns temperature 0 into top_k 1
            raise ValueError(f"{GREEDY_ONLY}; got temperature={self.temperature}, top_k={self.top_k}")
        return result

    cls.verify = verify
