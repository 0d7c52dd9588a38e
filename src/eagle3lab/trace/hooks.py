"""The names of the EAGLE-3 hooks sglang's runtime calls on the target model object, defined once.

The contract itself is traced from sglang's source (``trace.contract``); these constants only name the two members
the project's own code must refer to directly (the capture check calls them, the relaunch chain and the crash
reproduction recognise them in a traceback), so a rename happens in one place.
"""

from __future__ import annotations

# ModelRunner.initialize (and the CUDA-graph runner) call it so the target keeps the drafter's aux hidden states.
SET_LAYERS_TO_CAPTURE = "set_eagle3_layers_to_capture"
# The EAGLE draft worker calls it to share the target's embedding and LM head with the drafter.
GET_EMBED_AND_HEAD = "get_embed_and_head"

TARGET_HOOKS = (SET_LAYERS_TO_CAPTURE, GET_EMBED_AND_HEAD)
