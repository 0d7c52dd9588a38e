"""CPU-only harness for real sglang 0.5.9: stub CUDA driver, environment, import-time shims.

Used only by the ``cpu`` profile. Nothing here touches the Kimi-K2.5 wrapper: the crash under study stays real.

The obstacles met on the way to a real ``python -m sglang.launch_server`` on CPU, in the order they appear; each
shim (``shims.SHIMS``) names the number it answers:

1. ``import sgl_kernel`` needs ``libcuda.so.1`` (imported unguarded by the KV-cache host pool): a stub driver
   library defining the symbols the wheel's ``.so`` files need, each returning CUDA_ERROR_STUB_LIBRARY.
2. Environment: sglang's CPU engine, its cuDNN version check off, offline hub, OpenMP threads bound for tp 1.
3. Server flags: ``--device cpu --attention-backend torch_native --disable-cuda-graph --tp-size 1``.
4. Tokenizer files in the model folder: Kimi-K2.5 is multimodal, so the tokenizer manager loads a processor.
5. The tiny config carries ``vision_config.vt_hidden_size`` (the projector reads it).
6. ``--load-format dummy`` runs ``post_load_weights`` only on the top-level model; the Kimi wrapper has none, so
   the inner DeepSeek model's absorbed MLA weights are never built (a real checkpoint avoids it).
7. torch_native has no DeepSeek MLA handler: prefill takes the MHA path with the compressed latent.
8. With speculative decoding on, the KV pool warms up a Triton copy kernel (no CPU driver).
9. ``LlamaForCausalLM.set_embed`` (called on the EAGLE-3 drafter) synchronises CUDA unconditionally.
10-15. sglang's EAGLE loop itself: the draft backend factory, torch_native verify and draft-extend, the two tree
   kernels of sgl_kernel (``build_tree_kernel_efficient``, ``verify_tree_greedy``; the latter's dispatch has no CPU
   branch and silently returns its buffers), the Triton interpreter under NumPy 2, and sampling at temperature > 0
   (verified greedily on CPU; refused here).
16. Not an error but a cost: under the interpreter, the Triton bookkeeping kernels of the EAGLE loop
   (``spec_utils.py``) take milliseconds per launch; torch ports (``spec_kernels.py``) replace them, so a cycle
   costs what sglang's own code costs. ``cycle_timers.py`` measures the cycle by component.
17. Also a cost: torch_native's extend attention computes a whole-sequence causal attention for the few new
   tokens of a verify or draft extend, and torch's CPU SDPA is slow at these sizes; every CPU server (baseline
   and EAGLE-3 alike) computes only the rows it keeps, written out (the same values).
18. A start-up cost: sglang spawns its scheduler and detokenizer, and each re-imports sglang and torch; with no CUDA
   context to protect on a CPU, the harness forks them instead (``start_method.py``).
19. Also a start-up cost: every server process traced sglang's few torch.compile'd functions (MoE top-k and
   others) and loaded inductor's C++ before its first request; they run eagerly instead (``environment.EAGER_ENV``),
   the same Python and torch ops on both servers.

``changes.harness_changes`` lists what a run's servers were launched with, for the report.
"""

from eagle3lab.runtime.cpu_harness.environment import cpu_environment
from eagle3lab.runtime.cpu_harness.libcuda_stub import build_libcuda_stub, driver_symbols, sgl_kernel_libraries
from eagle3lab.runtime.cpu_harness.shims import ALL_SHIMS, CONTROL_SHIMS, SHIMS, SPEC_SHIMS, Shim, install

__all__ = [
    "ALL_SHIMS",
    "CONTROL_SHIMS",
    "SHIMS",
    "SPEC_SHIMS",
    "Shim",
    "build_libcuda_stub",
    "cpu_environment",
    "driver_symbols",
    "install",
    "sgl_kernel_libraries",
]
