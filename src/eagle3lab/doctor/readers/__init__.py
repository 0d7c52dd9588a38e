"""Readers of the text users paste: one module per family of tools that print it (``serving``: sglang's
bench_serving and ``vllm bench serve``; ``sglang_scripts``: send_one, bench_speculative and sglang's benchmark/
scripts; ``specforge``: SpecForge's benchmark output; ``tables``: markdown or whitespace tables of one's own;
``own``: ``eagle3lab bench``'s JSON). Every reader returns what it recognised as ``Row``s; none raises on
half-read input (``text`` holds the shared number and line guards)."""
