"""The speculative-decoding settings of a launch, defined once.

Why one place: the server command line, the in-process capture check (sglang's ``ServerArgs``) and the cost model
all need the same EAGLE-3 settings; when each spelled them out, a change to one silently disagreed with the others.
Everything else derives from :class:`SpeculativeSpec`: ``server_args()`` gives sglang's own ``ServerArgs`` field
names, from which ``ServerSpec.argv()`` builds the flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3lab.runtime.profiles import Profile


@dataclass(frozen=True)
class SpeculativeSpec:
    """EAGLE/EAGLE-3 settings: the drafter and the shape of each draft-verify cycle."""

    draft_model_path: str
    algorithm: str = "EAGLE3"
    num_steps: int = 3
    eagle_topk: int = 1
    num_draft_tokens: int = 4

    @classmethod
    def from_profile(cls, profile: Profile, draft_model_path: str) -> "SpeculativeSpec":
        """The profile's ``speculative_*`` keys with the resolved drafter path (a local dir or a hub id)."""
        return cls(draft_model_path=draft_model_path, algorithm=profile.speculative_algorithm,
                   num_steps=profile.speculative_num_steps, eagle_topk=profile.speculative_eagle_topk,
                   num_draft_tokens=profile.speculative_num_draft_tokens)

    def server_args(self) -> dict[str, Any]:
        """sglang ``ServerArgs`` fields (``--speculative-*`` flags on the command line)."""
        return {
            "speculative_algorithm": self.algorithm,
            "speculative_draft_model_path": self.draft_model_path,
            "speculative_num_steps": self.num_steps,
            "speculative_eagle_topk": self.eagle_topk,
            "speculative_num_draft_tokens": self.num_draft_tokens,
        }

    @property
    def verify_tokens(self) -> int:
        """Tokens per request in one verify forward (sglang forces num_steps + 1 when topk is 1)."""
        return self.num_steps + 1 if self.eagle_topk == 1 else self.num_draft_tokens
