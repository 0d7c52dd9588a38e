"""The environment every sglang launch gets, by profile: the one place a GPU launch's variables are decided.

A GPU launch gets ``SGLANG_DISABLE_CUDNN_CHECK=1`` on purpose. sglang 0.5.9's ``check_server_args()``
(``server_args.py:5130``, called from ``entrypoints/engine.py:1026`` before any model code runs) calls
``check_torch_2_9_1_cudnn_compatibility()`` (``server_args.py:5263-5298``): for a multimodal model on torch 2.9.1
with cuDNN older than 9.15 it raises, because of a torch ``nn.Conv3d`` bug with those cuDNN versions
(https://github.com/pytorch/pytorch/issues/168167). Both targets here, the real Kimi-K2.5 and the tiny one, are
``KimiK25ForConditionalGeneration`` (multimodal), and torch 2.9.1 pins cuDNN 9.10 (``torch.backends.cudnn.version()``
answers 91002 in this venv), so without the variable every GPU launch dies at that check. Every request this project
sends is text only, so the vision tower never runs and the bug the check guards against cannot touch these runs.
The CPU harness sets the same variable for its own reason (no CUDA at all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eagle3lab.runtime.cpu_harness import cpu_environment
from eagle3lab.runtime.profiles import Profile

CUDNN_CHECK_ENV = "SGLANG_DISABLE_CUDNN_CHECK"
CUDNN_CHECK_SITE = "sglang/srt/server_args.py:5263-5298 (check_torch_2_9_1_cudnn_compatibility, 0.5.9)"
CUDNN_CHECK_REASON = ("sglang refuses a multimodal model on torch 2.9.1 with cuDNN < 9.15 (a Conv3d bug, "
                      "https://github.com/pytorch/pytorch/issues/168167); every request here is text only, so the "
                      "vision tower never runs")
# Every launch and every reader runs against what is on disk; nothing reaches the hub behind the user's back.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
OMP_THREADS_ENV = "OMP_NUM_THREADS"


def gpu_environment() -> dict[str, str]:
    """The variables a GPU launch adds to its environment (see the module docstring for why)."""
    return {CUDNN_CHECK_ENV: "1"}


def launch_environment(profile: Profile, shims: Sequence[str] = (), speculative: bool = False
                       ) -> dict[str, str]:
    """What a launch of ``profile`` adds to ``os.environ``: the CPU harness (cpu profile; a speculative server
    also gets Triton's interpreter) or the GPU variables, and the offline hub either way."""
    own: Mapping[str, str] = (cpu_environment(shims=tuple(shims), speculative=speculative) if profile.cpu_harness
                              else gpu_environment())
    return {**own, **OFFLINE_ENV, **thread_environment(profile)}


def thread_environment(profile: Profile) -> dict[str, str]:
    """``OMP_NUM_THREADS`` when the profile sets ``server_omp_threads`` (it wins over the caller's own variable, so
    what a run measured is what its profile says); nothing otherwise, leaving torch's default or the caller's."""
    return {} if profile.server_omp_threads is None else {OMP_THREADS_ENV: str(profile.server_omp_threads)}
