"""Facts read from the models' own config.json files: the one source for depth, entry class and aux layer ids.

sglang 0.5.9 reads the drafter's ``eagle_config.eagle_aux_hidden_state_layer_ids`` (``ModelRunner.__init__``) and
falls back to its own defaults when the drafter names none, so every claim about which layers are captured must
start from the drafter's real config, never from a number typed into a notebook. The target's depth comes from
its config too (a multimodal wrapper keeps it in ``text_config``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from eagle3lab.errors import ModelPathError

StartupName = Literal["cpu", "gpu"]


def read_config(model_dir: str | Path) -> dict[str, Any]:
    """A model directory's config.json as a dict, or one line saying what is wrong."""
    path = Path(model_dir) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelPathError(f"{path} does not exist; point the profile at a model directory", path=path,
                             problem="missing") from None
    except (OSError, ValueError) as exc:
        raise ModelPathError(f"{path} is not readable JSON ({type(exc).__name__})", path=path,
                             problem="unreadable") from None
    if not isinstance(data, dict):
        raise ModelPathError(f"{path} is not a JSON object", path=path, problem="not_an_object")
    return data


def text_section(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config (``text_config`` of a multimodal wrapper, else the config)."""
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def num_layers(config: dict[str, Any]) -> int | None:
    value = text_section(config).get("num_hidden_layers")
    return value if isinstance(value, int) else None


def entry_class(config: dict[str, Any]) -> str | None:
    archs = config.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def vocab_size(config: dict[str, Any]) -> int | None:
    for section in (config, text_section(config)):
        if isinstance(section.get("vocab_size"), int):
            return section["vocab_size"]
    return None


def drafter_aux_layer_ids(config: dict[str, Any]) -> list[int] | None:
    """The drafter's aux layer ids exactly as sglang 0.5.9 reads them, or None when it names none."""
    eagle = config.get("eagle_config")
    if not isinstance(eagle, dict):
        return None
    ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    return [int(i) for i in ids] if isinstance(ids, list) else None


def drafter_dir_aux_layer_ids(drafter_dir: str | Path) -> list[int]:
    """The aux layer ids a drafter directory's config.json declares; one line if it declares none."""
    ids = drafter_aux_layer_ids(read_config(drafter_dir))
    if ids is None:
        raise ModelPathError(f"{drafter_dir} is not an EAGLE-3 drafter directory (its config.json has no "
                             "eagle_config.eagle_aux_hidden_state_layer_ids)", path=Path(drafter_dir),
                             role="draft", problem="not_a_drafter")
    return ids


@dataclass
class LayerSetup:
    """What one deployment's drafter asks the target to capture, with where each number came from."""

    deployment: str  # the profile name
    startup: StartupName  # which start-up path of sglang it takes ("gpu": CUDA with graphs)
    device: str
    cuda_graphs: bool
    status: Literal["read", "not fetched"]
    depth: int | None = None
    aux_layer_ids: list[int] | None = None
    entry_class: str | None = None
    target_config: str | None = None  # the config.json files read
    draft_config: str | None = None
    fix: str | None = None

    @property
    def usable(self) -> bool:
        return self.status == "read" and self.depth is not None

    def row(self) -> dict[str, Any]:
        ids = self.aux_layer_ids if self.aux_layer_ids is not None else "none named (sglang's defaults)"
        return {"deployment": self.deployment, "start-up path": self.startup, "status": self.status,
                "target depth": self.depth, "drafter aux layer ids": ids if self.status == "read" else None,
                "entry class": self.entry_class, "read from": self.draft_config or self.fix}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def layer_setup(profile: Any, target_dir: str | None, draft_dir: str | None, fix: str | None = None) -> LayerSetup:
    """Read depth, entry class and aux ids for ``profile`` from its models' configs (None dirs: not fetched)."""
    startup: StartupName = "gpu" if profile.device == "cuda" else "cpu"
    base = dict(deployment=profile.name, startup=startup, device=profile.device,
                cuda_graphs=not profile.disable_cuda_graph)
    if target_dir is None or draft_dir is None:
        return LayerSetup(**base, status="not fetched", fix=fix)
    target, draft = read_config(target_dir), read_config(draft_dir)
    return LayerSetup(**base, status="read", depth=num_layers(target), aux_layer_ids=drafter_aux_layer_ids(draft),
                      entry_class=entry_class(target), target_config=str(Path(target_dir) / "config.json"),
                      draft_config=str(Path(draft_dir) / "config.json"))
