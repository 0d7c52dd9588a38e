"""Parameter profiles: one typed, validated object per deployment (``params/<name>.yaml``).

The ``cpu`` profile (default) runs real sglang on this machine with a tiny model; ``blackwell-8x`` is the
incident's real deployment. Both feed the same code; only these values differ. Validation is strict so that a
typo in a YAML file or a papermill override fails at once with one line naming the key and the file, instead of
surfacing minutes later as a confusing server error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir

DEFAULT_PROFILE = "cpu"


class Profile(BaseModel):
    """Everything a notebook needs to know about one deployment."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(description="profile name, used in file names of figures and sidecars")
    sglang_version: str = Field(description="the sglang release this profile is pinned to")
    device: Literal["cpu", "cuda"] = Field(description="where the model runs")
    cpu_harness: bool = Field(description="use the CPU harness (stub libcuda, env, shims); cpu profile only")
    target_model: str = Field(description="target model path or hub id; 'tiny' builds the tiny Kimi-K2.5 model")
    draft_model: str = Field(description="EAGLE-3 drafter path or hub id; 'tiny' builds the tiny drafter")
    model_num_layers: int = Field(gt=0, description="decoder layers of the target (tiny: generated depth)")
    tp_size: int = Field(gt=0, description="tensor-parallel degree")
    dtype: str = Field(description="--dtype for the server")
    trust_remote_code: bool = Field(description="pass --trust-remote-code")
    attention_backend: Optional[str] = Field(description="--attention-backend, null for sglang's default")
    disable_cuda_graph: bool = Field(description="pass --disable-cuda-graph")
    context_length: Optional[int] = Field(description="--context-length, null for the model's")
    max_total_tokens: Optional[int] = Field(description="--max-total-tokens, null for sglang's default")
    max_running_requests: Optional[int] = Field(description="--max-running-requests, null for sglang's default")
    mem_fraction_static: Optional[float] = Field(description="--mem-fraction-static, null for sglang's default")
    speculative_algorithm: Literal["EAGLE3", "EAGLE"] = Field(description="--speculative-algorithm")
    speculative_num_steps: int = Field(gt=0, description="--speculative-num-steps")
    speculative_eagle_topk: int = Field(gt=0, description="--speculative-eagle-topk")
    speculative_num_draft_tokens: int = Field(gt=0, description="--speculative-num-draft-tokens")
    host: str = Field(description="address the server binds (127.0.0.1 unless told)")
    port: int = Field(gt=0, lt=65536, description="server port")
    ready_timeout_s: float = Field(gt=0, description="seconds to wait for readiness or death")
    extra_server_args: list[str] = Field(description="more launch_server flags, appended verbatim")
    bench_concurrency: list[PositiveInt] = Field(min_length=1, description="concurrency sweep of the benchmark")
    bench_input_len: int = Field(gt=0, description="prompt tokens per benchmark request")
    bench_output_len: int = Field(gt=0, description="completion tokens per benchmark request (ignore_eos)")
    bench_num_prompts: int = Field(gt=0, description="requests per sweep point")

    @property
    def uses_tiny_model(self) -> bool:
        return self.target_model == "tiny"


def profile_path(name_or_path: str | Path) -> Path:
    """``cpu`` -> ``params/cpu.yaml``; an existing path is taken as is."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"}:
        return candidate
    return params_dir() / f"{name_or_path}.yaml"


def _key(error: dict[str, Any]) -> str:
    """A pydantic error's location as a profile key: ``bench_concurrency[1]``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".") \
        or "(top level)"


def _problem(error: dict[str, Any]) -> str:
    return {"missing": "missing", "extra_forbidden": "unknown"}.get(error["type"], "invalid")


def _describe(error: dict[str, Any]) -> str:
    key = _key(error)
    kind = error["type"]
    if kind == "missing":
        return f"key '{key}' is missing"
    if kind == "extra_forbidden":
        return f"unknown key '{key}' (allowed: {', '.join(Profile.model_fields)})"
    given = error.get("input")
    return f"key '{key}': {error['msg']} (got {type(given).__name__} {given!r})"


def validate_profile(data: Any, source: str, overrides: dict[str, Any] | None = None) -> Profile:
    """Turn a raw mapping (plus overrides) into a Profile, or raise ProfileError naming the key and the source."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}",
                           source=source, problem="not_a_mapping")
    merged = {**data, **(overrides or {})}
    try:
        return Profile.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        origin = "override" if overrides and str(first["loc"][0]) in overrides else source
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ProfileError(f"{origin}: {_describe(first)}{more}", source=origin, key=_key(first),
                           problem=_problem(first), value=first.get("input")) from None


def _yaml_error(path: Path, exc: yaml.YAMLError) -> ProfileError:
    """``file:line:column: problem`` (1-based, as editors count), so the mistake can be found at once."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return ProfileError(f"{where}: not valid YAML ({problem}{', ' + context if context else ''})",
                        source=str(path), problem="yaml", line=mark.line + 1 if mark is not None else None,
                        column=mark.column + 1 if mark is not None else None)


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE, overrides: dict[str, Any] | None = None) -> Profile:
    """Load ``params/<name>.yaml`` (or a YAML path) and apply overrides (for example from papermill)."""
    path = profile_path(name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in params_dir().glob("*.yaml")))
        raise ProfileError(f"profile '{name_or_path}' not found at {path}; known profiles: {known}",
                           profile=str(name_or_path), source=str(path), problem="not_found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    return validate_profile(data, str(path), overrides)


def parameter_help() -> dict[str, str]:
    """Key -> help text, for documentation and the CLI."""
    return {name: field.description or "" for name, field in Profile.model_fields.items()}
