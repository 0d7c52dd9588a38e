"""A model's config.json by Hugging Face hub id, and every other way ``predict --config`` names a model.

Why: users name models as "Qwen/Qwen3-235B-A22B", not as files. Only ``config.json`` is fetched, through
huggingface_hub (so ``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` work as users expect, and the file is cached);
no weights. Offline or unreachable is one line that says what to pass instead.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.presets import CONFIG_DIR, load_config

PROBE_TIMEOUT_S = 5.0
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def stored_names() -> dict[str, str]:
    """Stored config names, lower-cased, to their file stem (so 'DeepSeek-V3' finds deepseek-v3)."""
    return {p.stem.lower(): p.stem for p in CONFIG_DIR.glob("*.json")}


def fetch_config(repo_id: str) -> tuple[dict[str, Any], str]:
    """(config dict, where it came from) for a hub id: config.json only, via huggingface_hub."""
    # heavy third-party package: imported only when a hub id is given
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, HfHubHTTPError, HFValidationError,
                                        LocalEntryNotFoundError, OfflineModeIsEnabled, RepositoryNotFoundError)

    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    where = f"config.json of '{repo_id}' from {endpoint}"
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if not offline and not _reachable(endpoint):  # huggingface_hub would retry for half a minute first
        raise _unreachable(where, repo_id, "no connection")
    try:
        path = hf_hub_download(repo_id, "config.json", endpoint=endpoint, token=os.environ.get("HF_TOKEN") or None)
    except GatedRepoError:
        raise PerfModelError(f"cannot fetch {where}: the repository is gated; set HF_TOKEN to a token with access, or "
                             "pass a local config.json", value=repo_id, problem="gated") from None
    except (RepositoryNotFoundError, HFValidationError):
        raise PerfModelError(f"cannot fetch {where}: no such repository (or it is private: set HF_TOKEN); check the "
                             "id or pass a local config.json", value=repo_id, problem="not_found") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:  # the former subclasses EntryNotFoundError
        raise _unreachable(where, repo_id, type(exc).__name__) from None
    except EntryNotFoundError:
        raise PerfModelError(f"cannot fetch {where}: the repository has no config.json; pass the model's own "
                             "config.json", value=repo_id, problem="no_config") from None
    except (HfHubHTTPError, OSError) as exc:
        raise _unreachable(where, repo_id, type(exc).__name__) from None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PerfModelError(f"{where} is not valid JSON: {exc}", value=repo_id, problem="unreadable") from None
    if not isinstance(data, dict):
        raise PerfModelError(f"{where}: a config.json must be a JSON object", value=repo_id, problem="unreadable")
    return data, f"{endpoint}/{repo_id} config.json"


def _reachable(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the endpoint's host and port opens within the timeout."""
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _unreachable(where: str, repo_id: str, why: str) -> PerfModelError:
    return PerfModelError(f"cannot fetch {where}: offline or unreachable ({why}); pass a local config.json (or a "
                          "stored config name), or set HF_ENDPOINT to a reachable mirror", value=repo_id,
                          problem="unreachable")


def resolve_config(config: str | Path) -> tuple[dict[str, Any], str, str]:
    """(config dict, source, display name) for a config.json path or folder, a stored config name (any case), or a
    hub id ("org/name"), in that order."""
    text = str(config)
    path = Path(text)
    if path.is_file() or path.is_dir():
        cfg, source = load_config(path)
        name = path.parent.name if path.name == "config.json" else path.stem if path.is_file() else path.name
        return cfg, source, name
    stored = stored_names().get(text.lower())
    if stored:
        cfg, source = load_config(stored)
        return cfg, source, stored
    if HUB_ID.match(text):
        cfg, source = fetch_config(text)
        return cfg, source, text
    known = ", ".join(sorted(stored_names().values()))
    raise PerfModelError(f"config '{text}' is not a config.json (or a folder holding one), a stored config ({known}) "
                         "or a hub id such as Qwen/Qwen3-235B-A22B", value=text, problem="not_found")
