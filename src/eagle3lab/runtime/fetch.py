"""``python -m eagle3lab fetch-models``: download a profile's checkpoints (and its benchmark's dataset file, when it
names one: ``runtime.datasets``) before any launch, resumably.

Launches run offline against what is on disk, so the download happens here, where its progress, its size and its
failures are visible, instead of inside a server's ready timeout. huggingface_hub's ``snapshot_download`` does the
work: it resumes partial files, skips complete ones, and shows a progress bar per file. A mirror is an endpoint
(``--endpoint`` or ``HF_ENDPOINT``); ``--local-dir`` puts the files in a plain directory instead of the cache.
Before downloading, the hub's file list is compared with the free disk; afterwards it is kept as a manifest so
``preflight`` can tell a complete snapshot from a partial one.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import FetchError
from eagle3lab.runtime import checkpoints, datasets, deployment
from eagle3lab.runtime.profiles import Profile

SMALL_FILES = ("*.json", "*.py", "*.model", "*.txt", "*.jinja", "*.tiktoken", "tokenizer*")
# What serving reads besides the small files: the weights, in safetensors when the repo has them (sglang prefers
# them), else PyTorch .bin files. Everything else a repo may carry (optimizer or training states such as
# training_state.pt, logs, images) is never fetched.
WEIGHTS_SAFETENSORS = ("*.safetensors",)
WEIGHTS_BIN = ("*.bin",)


def serving_patterns(names: Sequence[str]) -> tuple[str, ...]:
    """The allow patterns for serving a repo with these files: the small files and one weight format."""
    from fnmatch import fnmatch

    has_safetensors = any(fnmatch(n, WEIGHTS_SAFETENSORS[0]) for n in names)
    return SMALL_FILES + (WEIGHTS_SAFETENSORS if has_safetensors else WEIGHTS_BIN)


@dataclass
class RepoPlan:
    """One repository: what the hub lists, what is already here, what is left to fetch."""

    role: str
    repo_id: str
    commit: str
    files: dict[str, int | None]  # path in the repo -> size the hub reports (only the files to fetch)
    cached_bytes: int = 0
    patterns: tuple[str, ...] = ()  # allow patterns the files were chosen by
    left_out: list[str] = field(default_factory=list)  # files the repo lists that serving does not need

    @property
    def total_bytes(self) -> int:
        return sum(size or 0 for size in self.files.values())

    @property
    def to_fetch_bytes(self) -> int:
        return max(self.total_bytes - self.cached_bytes, 0)


@dataclass
class FetchResult:
    plans: list[RepoPlan] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # role -> local directory


def _endpoint(endpoint: str | None) -> str | None:
    return endpoint or os.environ.get("HF_ENDPOINT") or None


def hub_repos(profile: Profile) -> list[tuple[str, str]]:
    """(role, repo id) of the profile's models that come from the hub (tiny and local ones need no fetch)."""
    repos = [("target", profile.target_model), ("draft", profile.draft_model)]
    return [(role, source) for role, source in repos if source != deployment.TINY and checkpoints.is_hub_id(source)]


def plan(role: str, repo_id: str, *, endpoint: str | None = None, local_dir: Path | None = None,
         allow_patterns: Sequence[str] | None = None) -> RepoPlan:
    """The hub's file list with sizes (one API call), and how much of it is already on disk. Without
    ``allow_patterns`` only what serving needs is planned (``serving_patterns``)."""
    from fnmatch import fnmatch

    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        info = HfApi(endpoint=_endpoint(endpoint)).model_info(repo_id, files_metadata=True)
    except (HfHubHTTPError, OSError, ValueError) as exc:
        where = _endpoint(endpoint) or "https://huggingface.co"
        raise FetchError(f"cannot list {repo_id} on {where} ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0]}); check the network, the repo id, or set "
                         "HF_ENDPOINT / --endpoint to a mirror (gated repos need HF_TOKEN)", repo=repo_id,
                         problem="list_failed") from None
    listed = {s.rfilename: s.size for s in info.siblings or []}
    patterns = tuple(allow_patterns) if allow_patterns else serving_patterns(list(listed))
    files = {name: size for name, size in listed.items() if any(fnmatch(name, p) for p in patterns)}
    base = local_dir if local_dir is not None else checkpoints.repo_folder(repo_id) / "snapshots" / str(info.sha)
    cached = sum(min((base / name).stat().st_size, size or 0) for name, size in files.items()
                 if (base / name).is_file())
    return RepoPlan(role, repo_id, str(info.sha), files, cached, patterns,
                    sorted(name for name in listed if name not in files))


def check_free_disk(plans: Sequence[RepoPlan], where: Path) -> None:
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    needed = sum(p.to_fetch_bytes for p in plans)
    if needed > free:
        raise FetchError(f"{needed / 1e9:.1f} GB to fetch but only {free / 1e9:.1f} GB free at {probe}; free space "
                         "or move the cache (HF_HOME / HF_HUB_CACHE, or --local-dir)", path=probe,
                         needed_gb=needed / 1e9, free_gb=free / 1e9, problem="no_space")


def record_manifest(plan_: RepoPlan, endpoint: str | None) -> Path:
    """The hub's file list for this snapshot, so preflight can check completeness offline."""
    return write_json_atomic(checkpoints.manifest_path(plan_.repo_id, plan_.commit), {
        "repo_id": plan_.repo_id, "commit": plan_.commit, "endpoint": _endpoint(endpoint) or "https://huggingface.co",
        "files": plan_.files, "total_bytes": plan_.total_bytes,
        "fetched_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})


def fetch_models(profile: Profile, *, endpoint: str | None = None, local_dir: str | Path | None = None,
                 configs_only: bool = False, max_workers: int = 8,
                 echo: Callable[[str], None] = print) -> FetchResult:
    """Download (or resume) every hub checkpoint of ``profile``; returns where each one is."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    repos = hub_repos(profile)
    result = FetchResult()
    if not configs_only:  # the benchmark's dataset file, when the profile names one (a run reads it offline)
        datasets.fetch_dataset(profile, endpoint=endpoint, echo=echo)
    if not repos:
        echo(f"profile {profile.name} has no hub checkpoints to fetch (tiny or local models)")
        return result
    patterns = list(SMALL_FILES) if configs_only else None
    dirs = {repo: Path(local_dir) / repo if local_dir else None for _, repo in repos}
    plans = [plan(role, repo, endpoint=endpoint, local_dir=dirs[repo], allow_patterns=patterns) for role, repo in repos]
    for p in plans:
        echo(f"{p.role} {p.repo_id} @ {p.commit[:12]}: {len(p.files)} files, {p.total_bytes / 1e9:.2f} GB; "
             f"{p.cached_bytes / 1e9:.2f} GB already here, {p.to_fetch_bytes / 1e9:.2f} GB to fetch"
             + (f"; not needed for serving, left out: {', '.join(p.left_out[:5])}"
                f"{' ...' if len(p.left_out) > 5 else ''}" if p.left_out else ""))
    check_free_disk(plans, Path(local_dir) if local_dir else checkpoints.hub_cache_dir())
    for p in plans:
        kwargs: dict[str, Any] = dict(revision=p.commit, endpoint=_endpoint(endpoint), max_workers=max_workers,
                                      allow_patterns=list(p.patterns))
        if dirs[p.repo_id] is not None:
            kwargs["local_dir"] = str(dirs[p.repo_id])
        else:
            kwargs["cache_dir"] = str(checkpoints.hub_cache_dir())
        try:
            path = snapshot_download(p.repo_id, **kwargs)
        except (HfHubHTTPError, OSError, ValueError) as exc:
            raise FetchError(f"download of {p.repo_id} stopped ({type(exc).__name__}: "
                             f"{(str(exc).splitlines() or [''])[0]}); run the same command again to resume",
                             repo=p.repo_id, problem="download_stopped") from None
        if dirs[p.repo_id] is None:
            _point_main_at(p)
        if not configs_only:
            record_manifest(p, endpoint)
        result.paths[p.role] = path
        echo(f"{p.role} {p.repo_id}: {path}")
    result.plans = plans
    if local_dir:
        sets = " ".join(f"--set {role}_model={path}" for role, path in result.paths.items())
        echo(f"the files are outside the Hugging Face cache; run with: {sets}")
    return result


def _point_main_at(p: RepoPlan) -> None:
    """snapshot_download by commit does not move refs/main; offline resolution of the plain id reads it."""
    ref = checkpoints.repo_folder(p.repo_id) / "refs" / "main"
    ref.parent.mkdir(parents=True, exist_ok=True)
    if not ref.is_file() or ref.read_text().strip() != p.commit:
        ref.write_text(p.commit)
