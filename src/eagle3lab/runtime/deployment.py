"""From a profile to a concrete launch: local model directories, harness environment and the ServerSpec.

Hub ids are resolved to their local snapshot here, once, offline; everything downstream (server, configs,
tokenizers, benchmark) reads the local directory. Launches never download: a 547 GB checkpoint fetched inside a
server's ready timeout ends as a misleading timeout, so it is fetched beforehand (``fetch-models``) and every
launch runs with the hub offline. The tiny model is generated and the CPU harness environment added when the
profile asks for them; this is the only place where the profiles differ in code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from eagle3lab.errors import ModelsNotFetched  # raised here; callers catch it from eagle3lab.errors
from eagle3lab.package.patching import DUMMY_POST_LOAD_PATCH
from eagle3lab.runtime import checkpoints, modelinfo
from eagle3lab.runtime.checkpoints import Checkpoint
from eagle3lab.runtime.envinfo import check_sglang
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.server import ServerSpec
from eagle3lab.runtime.speculative import SpeculativeSpec
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.runtime.launch_env import launch_environment

TINY = "tiny"


@dataclass(frozen=True)
class Models:
    """The local directories of the target and the drafter, and where they came from."""

    target: str  # local directory: the server, configs and tokenizers all read this
    draft: str
    cache_key: str | None = None  # the tiny models' cache key, when generated
    aux_layer_ids: tuple[int, ...] | None = None  # read from the drafter's config.json
    target_source: str | None = None  # as the profile names it (hub id, path or "tiny")
    draft_source: str | None = None
    trust_remote_code: bool = False


def fetch_command(profile: Profile) -> str:
    return f"python -m eagle3lab fetch-models --profile {profile.name}"


def locate_models(profile: Profile) -> tuple[Checkpoint, Checkpoint, str | None]:
    """(target, draft, tiny cache key): where each model is, generating the tiny ones; nothing raised."""
    cache_key = None
    tiny_dirs: dict[str, str] = {}
    if TINY in (profile.target_model, profile.draft_model):

        tiny = build_tiny_models(num_layers=profile.model_num_layers, aux_layer_ids=profile.tiny_aux_layer_ids)
        cache_key = tiny.cache_key
        tiny_dirs = {"target": str(tiny.target_dir), "draft": str(tiny.draft_dir)}

    def one(role: str, source: str) -> Checkpoint:
        if source == TINY:
            return Checkpoint(role, source, "generated", tiny_dirs[role])
        return checkpoints.locate(role, source)

    return one("target", profile.target_model), one("draft", profile.draft_model), cache_key


def not_fetched_message(profile: Profile, missing: Sequence[Checkpoint]) -> str:
    """One line: which models are missing, where they were looked for, and the command that fetches them."""
    names = " and ".join(f"{c.role} {c.source}" for c in missing)
    where = f"the Hugging Face cache at {checkpoints.hub_cache_dir()}" if any(c.kind == "hub" for c in missing) \
        else "this machine"
    verb = "is" if len(missing) == 1 else "are"
    return f"{names} {verb} not in {where}; fetch with: {fetch_command(profile)}"


def resolve_models(profile: Profile) -> Models:
    """Local directories for the profile's models (hub ids resolved offline, tiny ones generated), or one line
    naming what is missing and the command that fetches it."""
    target, draft, cache_key = locate_models(profile)
    missing = [c for c in (target, draft) if not c.present]
    if missing:
        raise ModelsNotFetched(not_fetched_message(profile, missing))
    ids = modelinfo.drafter_aux_layer_ids(modelinfo.read_config(draft.path))  # type: ignore[arg-type]
    return Models(target.path, draft.path, cache_key, tuple(ids) if ids is not None else None,  # type: ignore[arg-type]
                  profile.target_model, profile.draft_model, profile.trust_remote_code)


def layer_setup(profile: Profile) -> modelinfo.LayerSetup:
    """The profile's drafter ids and target depth, read from their configs; 'not fetched' when they are absent."""
    target, draft, _ = locate_models(profile)
    missing = [c for c in (target, draft) if not c.present]
    fix = not_fetched_message(profile, missing) if missing else None
    return modelinfo.layer_setup(profile, target.path, draft.path, fix)


def startup_check_load_format(profile: Profile) -> str | None:
    """``--load-format`` of a launch expected to die at start-up (the profile's ``startup_checks_load_format``):
    "dummy" when the profile asks for sglang's random weights there, None (sglang's "auto") otherwise."""
    return None if profile.startup_checks_load_format == "auto" else profile.startup_checks_load_format


def startup_check_patches(load_format: str | None, patches: Sequence[str]) -> tuple[str, ...]:
    """The patches a start-up check launches with. A patched launch on dummy weights also gets the wrapper's
    ``post_load_weights`` patch: it passes the first hook and on a GPU captures CUDA graphs (forwards) before the
    next one, and sglang's dummy loader finishes only the top-level model, so the inner model's MLA weights would
    be None there. An unpatched launch raises at the first hook before any forward and stays on the release as
    shipped (notebook 01 requires it)."""
    if load_format == "dummy" and patches and DUMMY_POST_LOAD_PATCH not in patches:
        return (*patches, DUMMY_POST_LOAD_PATCH)
    return tuple(patches)


WEIGHT_FILES = ("*.safetensors", "*.bin")  # what a load reads from a model directory


def checkpoint_bytes(path: str) -> int:
    """Bytes of the weight files in a local model directory (a hub snapshot's links are followed to their blobs);
    0 for anything that is not a directory."""
    folder = Path(path)
    if not folder.is_dir():
        return 0
    total = 0
    for pattern in WEIGHT_FILES:
        for file in folder.glob(pattern):
            try:
                total += file.stat().st_size
            except OSError:
                continue  # a dangling link: checkpoints.examine reports it, the load fails on it
    return total


def ready_timeout_s(profile: Profile, models: Models, load_format: str | None = None) -> float:
    """How long a launch may take to be ready: ``ready_timeout_s``, plus the target checkpoint's bytes at
    ``checkpoint_read_mb_s`` when the profile sets it and the launch reads the checkpoint (not on dummy weights)."""
    if profile.checkpoint_read_mb_s is None or load_format == "dummy":
        return profile.ready_timeout_s
    return profile.ready_timeout_s + checkpoint_bytes(models.target) / (profile.checkpoint_read_mb_s * 1e6)


def server_spec(profile: Profile, models: Models, *, speculative: bool, shims: Sequence[str] = (),
                port: int | None = None, load_format: str | None = None) -> ServerSpec:
    """The launch for this profile, with or without EAGLE-3; checks the sglang release first. ``load_format``:
    sglang's ``--load-format`` (None: its default, the checkpoint's weights)."""
    check_sglang(profile.sglang_version)
    spec = SpeculativeSpec.from_profile(profile, models.draft) if speculative else None
    return ServerSpec(
        model_path=models.target, host=profile.host, port=port or profile.port, device=profile.device,
        tp_size=profile.tp_size, dtype=profile.dtype, trust_remote_code=profile.trust_remote_code,
        attention_backend=profile.attention_backend, disable_cuda_graph=profile.disable_cuda_graph,
        context_length=profile.context_length, max_total_tokens=profile.max_total_tokens,
        max_running_requests=profile.max_running_requests, mem_fraction_static=profile.mem_fraction_static,
        speculative=spec, load_format=load_format, extra_args=tuple(profile.extra_server_args),
        env=launch_environment(profile, shims, speculative))
