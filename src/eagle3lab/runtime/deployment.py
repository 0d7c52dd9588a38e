"""From a profile to a concrete launch: model paths, harness environment and the ServerSpec.

This is the only place where the ``cpu`` and ``gpu`` profiles differ in code: the tiny model is generated and
the CPU harness environment is added when the profile asks for them; everything downstream is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from eagle3lab.runtime.envinfo import check_sglang
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import ServerSpec
from eagle3lab.runtime.speculative import SpeculativeSpec


@dataclass(frozen=True)
class Models:
    """Where the target and the drafter come from, and the tiny model's cache key if generated."""

    target: str
    draft: str
    cache_key: str | None = None
    aux_layer_ids: tuple[int, ...] | None = None


def resolve_models(profile: Profile) -> Models:
    """Generate (or reuse from the cache) the tiny models, or pass the profile's paths through."""
    if not profile.uses_tiny_model:
        return Models(profile.target_model, profile.draft_model)
    from eagle3lab.runtime.tinymodel import build_tiny_models

    tiny = build_tiny_models(num_layers=profile.model_num_layers)
    draft = str(tiny.draft_dir) if profile.draft_model == "tiny" else profile.draft_model
    return Models(str(tiny.target_dir), draft, tiny.cache_key, tuple(tiny.aux_layer_ids))


def harness_env(profile: Profile, shims: Sequence[str], speculative: bool = False) -> dict[str, str]:
    """The CPU harness variables for the cpu profile (a speculative server also gets Triton's interpreter);
    nothing for a GPU deployment."""
    if not profile.cpu_harness:
        return {}
    from eagle3lab.runtime.cpu_harness import cpu_environment

    return cpu_environment(shims=tuple(shims), speculative=speculative)


def server_spec(profile: Profile, models: Models, *, speculative: bool, shims: Sequence[str] = (),
                port: int | None = None) -> ServerSpec:
    """The launch for this profile, with or without EAGLE-3; checks the sglang release first."""
    check_sglang(profile.sglang_version)
    spec = SpeculativeSpec.from_profile(profile, models.draft) if speculative else None
    return ServerSpec(
        model_path=models.target, host=profile.host, port=port or profile.port, device=profile.device,
        tp_size=profile.tp_size, dtype=profile.dtype, trust_remote_code=profile.trust_remote_code,
        attention_backend=profile.attention_backend, disable_cuda_graph=profile.disable_cuda_graph,
        context_length=profile.context_length, max_total_tokens=profile.max_total_tokens,
        max_running_requests=profile.max_running_requests, mem_fraction_static=profile.mem_fraction_static,
        speculative=spec, extra_args=tuple(profile.extra_server_args), env=harness_env(profile, shims, speculative))
