"""The deterministic random token-id prompt streams, defined once.

The benchmark sends them and the tiny drafter is trained on them, so both must draw exactly the same ids from the
same named stream: a string seed is hashed with SHA-512 by ``random``, so a stream is stable across runs and Python
builds. Warm-up and measured prompts come from different streams, so they never share a prefix (the radix cache
would otherwise turn prefill into a cache hit).
"""

from __future__ import annotations

import random

# The lowest id a random prompt may hold: tokenizers keep their special tokens at the bottom of the vocabulary.
TOKEN_ID_LOW = 16


def random_token_ids(seed: int, stream: str, count: int, length: int, low: int, high: int) -> list[list[int]]:
    """``count`` prompts of ``length`` ids drawn uniformly from ``[low, high)`` out of the named stream."""
    rng = random.Random(f"eagle3lab:{seed}:{stream}")
    return [[rng.randrange(low, high) for _ in range(length)] for _ in range(count)]
