"""Everything a GPU deployment needs, checked before anything is launched: ``python -m eagle3lab preflight``.

The incident's deployment loads 547 GB onto 8 GPUs before it can fail. Every problem that can be seen without
launching is found here, in seconds, each as one line with what to do: GPUs (count, architecture, memory against
``tp_size``), the sglang release and whether it is still pristine, both checkpoints (on disk, complete, size),
free disk, the host (``/dev/shm`` for NCCL, RAM against the checkpoint, ``Python.h`` and a compiler for
Triton, ``libnuma.so.1`` for sgl-kernel), both server command lines through sglang's own ``ServerArgs``, the drafter's aux layer ids with the
layers they make sglang capture eagerly and under CUDA graphs, the interconnect as evidence, and an all-reduce of
verify's message across the ``tp_size`` GPUs in a child with deadlines (a peer-to-peer hang becomes one line).

The ``cpu`` profile (tiny models generated here, no GPU) is passed over. A profile overridden to run on CPU
(the rehearsal of a GPU profile) skips the GPU checks, and says so in their rows.

One module per kind of check (``hardware``, ``install``, ``host``, ``flags``, ``layers``, ``memory``,
``allreduce``) over ``result``; ``runner`` runs them in order. This package's namespace is the public face
(``preflight.require``, ``preflight.check_driver``).
"""

from eagle3lab.preflight.result import Outcome, SLOW, Check, Preflight, passed_over
from eagle3lab.preflight.hardware import (check_gpu_count, check_capability, MIN_DRIVER, CUDNN_MIN,
                                          IDLE_MIB, check_driver, check_cudnn, check_sgl_kernel, check_idle,
                                          check_interconnect)
from eagle3lab.preflight.install import check_sglang, check_checkpoint, check_disk
from eagle3lab.preflight.host import (HostFacts, read_host_facts, check_shm, check_host_ram, check_triton_build,
                                      check_libnuma, check_host)
from eagle3lab.preflight.flags import check_server_flags, FULL_CHECK, check_full_server_args
from eagle3lab.preflight.layers import check_layers, check_capture_order, check_first_raise
from eagle3lab.preflight.memory import check_memory
from eagle3lab.preflight.allreduce import check_allreduce
from eagle3lab.preflight.runner import run_preflight, save, require, as_json

__all__ = ["Outcome", "SLOW", "Check", "Preflight", "passed_over", "check_gpu_count", "check_capability",
           "check_memory", "MIN_DRIVER", "CUDNN_MIN", "IDLE_MIB", "check_driver", "check_cudnn",
           "check_sgl_kernel", "check_idle", "check_interconnect", "check_sglang", "check_checkpoint", "check_disk",
           "HostFacts", "read_host_facts", "check_shm", "check_host_ram", "check_triton_build", "check_libnuma",
           "check_host",
           "check_server_flags", "FULL_CHECK", "check_full_server_args", "check_layers", "check_capture_order",
           "check_first_raise", "check_allreduce", "run_preflight", "save", "require", "as_json"]
