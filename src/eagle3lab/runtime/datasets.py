"""The benchmark's dataset file: fetched once through huggingface_hub, read offline from the hub cache afterwards.

A profile whose workload is ``conversations`` names a hub dataset and a file in it (``bench_dataset``,
``bench_dataset_file``: the ShareGPT set sglang's bench_serving reads). It is fetched where the models are
(``fetch-models``, and ``setup``), with the hub's own settings (``HF_ENDPOINT`` or ``--endpoint``, ``HF_TOKEN``,
``HF_HUB_OFFLINE``), into the same hub cache; a run only locates it there, never downloads, so a missing file is one
line naming the command before any server starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from eagle3lab.errors import FetchError, ModelPathError
from eagle3lab.runtime import checkpoints
from eagle3lab.runtime.profiles import Profile


def has_dataset(profile: Profile) -> bool:
    """Whether the profile names a dataset file (only the 'conversations' workload reads one)."""
    return bool(profile.bench_dataset and profile.bench_dataset_file)


def fetch_command(profile: Profile) -> str:
    return f"python -m eagle3lab fetch-models --profile {profile.name}"


def cached_dataset(repo_id: str, filename: str) -> Path | None:
    """The file in the hub cache, or None; never goes online."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", cache_dir=checkpoints.hub_cache_dir(),
                                    local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError):
        return None


def locate_dataset(profile: Profile) -> Path | None:
    """The profile's dataset file on this machine (None: it names none, or it is not fetched)."""
    if not has_dataset(profile):
        return None
    return cached_dataset(str(profile.bench_dataset), str(profile.bench_dataset_file))


def resolve_dataset(profile: Profile) -> Path:
    """The profile's dataset file, or one line naming what is missing and the command that fetches it."""
    path = locate_dataset(profile)
    if path is None:
        raise ModelPathError(f"dataset {profile.bench_dataset} ({profile.bench_dataset_file}) is not in the Hugging "
                             f"Face cache at {checkpoints.hub_cache_dir()}; fetch with: {fetch_command(profile)}",
                             path=Path(str(profile.bench_dataset_file)), role="dataset", problem="missing")
    return path


def fetch_dataset(profile: Profile, *, endpoint: str | None = None,
                  echo: Callable[[str], None] = print) -> Path | None:
    """Download (or find) the profile's dataset file into the hub cache; None when it names none. Offline
    (``HF_HUB_OFFLINE``) a file not yet cached is one line saying so."""
    if not has_dataset(profile):
        return None
    repo_id, filename = str(profile.bench_dataset), str(profile.bench_dataset_file)
    cached = cached_dataset(repo_id, filename)
    if cached is not None:
        echo(f"dataset {repo_id} {filename}: {cached}")
        return cached
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    where = endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    try:
        path = Path(hf_hub_download(repo_id, filename, repo_type="dataset", cache_dir=checkpoints.hub_cache_dir(),
                                    endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None))
    except LocalEntryNotFoundError:
        raise FetchError(f"dataset {repo_id} ({filename}) is not in the Hugging Face cache and the hub is offline "
                         "(HF_HUB_OFFLINE); fetch it where the hub is reachable, or copy that cache here",
                         repo=repo_id, problem="offline") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise FetchError(f"download of dataset {repo_id} ({filename}) from {where} stopped ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0]}); check the network or set HF_ENDPOINT / --endpoint "
                         "to a mirror (gated sets need HF_TOKEN), then run the same command again", repo=repo_id,
                         problem="download_stopped") from None
    echo(f"dataset {repo_id} {filename}: {path}")
    return path
