"""Parameter profiles: one typed, validated object per deployment (``params/<name>.yaml``).

The ``cpu`` profile (default) runs real sglang on this machine with a tiny model; ``blackwell-8x`` is the
incident's real deployment. Both feed the same code; only these values differ. Validation is strict so that a
typo in a YAML file or a papermill override fails at once with one line naming the key and the file, instead of
surfacing minutes later as a confusing server error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Optional, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import ErrorDetails

from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir

DEFAULT_PROFILE = "cpu"
MAX_BENCH_CONCURRENCY = 1024  # far above what a CPU or one node serves at once; a typo, not a sweep
MAX_BENCH_NUM_PROMPTS = 100_000  # requests per sweep point: hours on any machine, beyond that a typo
MAX_LAUNCH_REPEATS = 5  # extra launches of the headline pair: each is a full server start-up
MAX_INTERLEAVE_ROUNDS = 16  # each round adds a warm-up request and two cache flushes per arm
MAX_INTERLEAVE_PROMPTS = 1024  # per arm; the measured stream is shared with the sweep's points
MAX_CROSSCHECK_ROUNDS = 8  # each round starts bench_serving once (an sglang import, its tokenizer, a warm-up)
NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

# What a run can be modelled as (``cost_model``). The names are the cost model's (``costmodel.presets.MODELS``,
# ``costmodel.gpus.HARDWARE``; tests/report/test_run_modelled_as.py keeps both lists equal): spelt out here because the
# profile loader sits below the cost model and must name a bad key before any notebook runs.
SERVED: Final = "served"  # the tiny target and drafter the run served, from their generated configs
MEASURED: Final = "measured"  # the run's own machine: the cpu host's measured copy bandwidth, or the GPU its record names
CostModelModel = Literal["served", "kimi-k2.5"]
CostModelHardware = Literal["measured", "a100-sxm", "b200", "gb200", "h100-sxm", "h200", "mi300x", "mi325x", "mi355x",
                            "rtx-pro-6000-blackwell"]


class CostModelKeys(BaseModel):
    """What the report's cost model takes a profile's run for: a target with its drafter, on a GPU."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: CostModelModel = Field(description="'served': the tiny target and drafter the run served; or a named "
                                              "target with its drafter (kimi-k2.5: Kimi-K2.5 INT4 with the "
                                              "AQ-MedAI EAGLE-3 drafter)")
    hardware: CostModelHardware = Field(description="'measured': the machine the run measured (cpu: this host; "
                                                    "cuda: the GPU its benchmark record names); or a GPU preset of "
                                                    "costmodel/gpus.py")


class Profile(BaseModel):
    """Everything a notebook needs to know about one deployment."""

    # allow_inf_nan=False: ``.inf`` or ``.nan`` in a float key (a timeout, a read speed) is never meant
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=64,
                      description="profile name, used in file names of figures and sidecars (letters, digits, . _ -)")
    sglang_version: str = Field(description="the sglang release this profile is pinned to")
    device: Literal["cpu", "cuda"] = Field(description="where the model runs")
    cpu_harness: bool = Field(description="use the CPU harness (stub libcuda, env, shims); cpu profile only")
    target_model: str = Field(description="target model path or hub id; 'tiny' builds the tiny Kimi-K2.5 model")
    draft_model: str = Field(description="EAGLE-3 drafter path or hub id; 'tiny' builds the tiny drafter")
    model_num_layers: int = Field(gt=0, description="decoder layers of the target (tiny: generated depth)")
    tiny_aux_layer_ids: Optional[list[int]] = Field(
        default=None, description="tiny drafter's eagle_aux_hidden_state_layer_ids; null: the real drafter's ids "
                                  "scaled to model_num_layers (tinymodel.configs.scale_aux_layer_ids)")
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
    ready_timeout_s: float = Field(gt=0, description="seconds to wait for readiness or death, besides reading the "
                                                     "checkpoint when checkpoint_read_mb_s is set")
    checkpoint_read_mb_s: Optional[float] = Field(
        default=None, gt=0,
        description="the read speed (MB/s) a launch that reads the checkpoint is given time for: its ready timeout is "
                    "ready_timeout_s + the target checkpoint's bytes at this speed (deployment.ready_timeout_s); "
                    "null: ready_timeout_s alone")
    startup_checks_load_format: Literal["auto", "dummy"] = Field(
        default="auto",
        description="--load-format of the launches expected to die at start-up (notebook 01's crash, notebook 03's "
                    "unpatched and one-method steps): 'dummy' gives them sglang's random weights, since they raise "
                    "before any weight is read, so a large checkpoint is read only by the launches that serve; "
                    "'auto' reads the checkpoint for them too")
    extra_server_args: list[str] = Field(description="more launch_server flags, appended verbatim")
    server_omp_threads: Optional[int] = Field(
        default=None, gt=0, le=1024,
        description="OMP_NUM_THREADS of every server process (tokenizer, scheduler, detokenizer): torch's CPU thread "
                    "pool. Several processes sharing a few cores each spin-waiting on a pool of one thread per core "
                    "slow one another down; null: torch's default, one thread per core")
    bench_concurrency: list[Annotated[int, Field(gt=0, le=MAX_BENCH_CONCURRENCY)]] = Field(
        min_length=1, description="concurrency sweep of the benchmark")
    bench_input_len: int = Field(gt=0, description="prompt tokens per benchmark request")
    bench_output_len: int = Field(gt=0, description="completion tokens per benchmark request (ignore_eos)")
    bench_num_prompts: int = Field(gt=0, le=MAX_BENCH_NUM_PROMPTS,
                                   description="requests per sweep point (the floor when bench_prompts_per_concurrency "
                                               "is set)")
    bench_prompts_per_concurrency: Optional[int] = Field(
        default=None, gt=0, description="measured requests per point = max(bench_num_prompts, this x concurrency); "
                                        "null: bench_num_prompts at every point")
    bench_launch_repeats: int = Field(
        default=0, ge=0, le=MAX_LAUNCH_REPEATS,
        description="extra launches of the baseline and the headline EAGLE-3 server, each swept at concurrency 1 "
                    "after the benchmark, so the report shows the speedup's spread from launch to launch "
                    "(bench.launch_spread); 0: the benchmark's one launch of each")
    bench_interleave_rounds: int = Field(
        default=0, ge=0, le=MAX_INTERLEAVE_ROUNDS,
        description="above 0, each extra launch runs both servers at once and splits the concurrency-1 prompts "
                    "into this many blocks, measured in mirrored order (baseline, EAGLE-3 | EAGLE-3, baseline | "
                    "...), so a slow spell of a shared machine falls on both arms (bench.interleave); needs memory "
                    "for both servers. 0: the extra launches run one after the other")
    bench_interleave_prompts: Optional[int] = Field(
        default=None, gt=0, le=MAX_INTERLEAVE_PROMPTS,
        description="measured prompts per arm in an interleaved launch, split across its rounds (acceptance, "
                    "and with it the EAGLE-3 rate, varies from prompt to prompt: more prompts, a steadier pooled "
                    "speedup); null: the concurrency-1 point's own count")
    bench_interleave_concurrency: Optional[list[Annotated[int, Field(gt=0, le=MAX_BENCH_CONCURRENCY)]]] = Field(
        default=None, min_length=1,
        description="the concurrencies an interleaved launch measures, each in every round (a round runs each "
                    "concurrency's block on both servers), so that the cost model's run check can compare both arms "
                    "at every point in the same spells of the machine; those not in bench_concurrency are not "
                    "measured. null: concurrency 1 only")
    bench_interleave_overlap_control: bool = Field(
        default=False,
        description="in an interleaved launch, a baseline without sglang's overlap scheduler "
                    "(--disable-overlap-schedule, as sglang runs every EAGLE-3 server) joins the rounds at "
                    "concurrency 1 beside sglang's default baseline: what the scheduler gives the baseline, and "
                    "EAGLE-3's speedup over a baseline with the same scheduler, measured in the same spells with "
                    "the rounds' interval (one more server)")
    bench_crosscheck_rounds: int = Field(
        default=1, ge=1, le=MAX_CROSSCHECK_ROUNDS,
        description="runs of sglang's bench_serving and of our client each, alternated in mirrored order on the "
                    "baseline server at the sweep's highest concurrency; each client's throughput is pooled over "
                    "its runs (bench.crosscheck): one short run on a shared machine is several per cent off the next")
    bench_crosscheck_prompts: Optional[int] = Field(
        default=None, gt=0, le=MAX_BENCH_NUM_PROMPTS,
        description="measured prompts per cross-check run (each client, each round): a longer run, a steadier "
                    "ratio; null: the point's own count")
    bench_prompt_kind: Literal["ids", "text", "chat", "conversations"] = Field(
        default="ids", description="the headline workload: random token ids, their decoded text, the bundled "
                                   "chat questions in the model's chat template, or 'conversations': multi-turn "
                                   "conversations of bench_dataset in the model's chat template, each at most "
                                   "bench_input_len tokens, none repeated within a point (bench.workload); "
                                   "notebook 03's prompt_kind parameter overrides it")
    bench_dataset: Optional[str] = Field(
        default=None, description="the Hugging Face hub dataset (org/name) the 'conversations' workload is drawn "
                                  "from, fetched by fetch-models and setup (HF_ENDPOINT, HF_TOKEN and "
                                  "HF_HUB_OFFLINE honoured) and read offline from the hub cache; null: none")
    bench_dataset_file: Optional[str] = Field(
        default=None, validate_default=True, description="the ShareGPT-format JSON file in bench_dataset (a list of {\"conversations\": "
                                  "[{\"from\": \"human\", \"value\": ...}, ...]}, as sglang's bench_serving "
                                  "reads it)")
    cost_model: Optional[CostModelKeys] = Field(
        default=CostModelKeys(model=SERVED, hardware=MEASURED),
        description="what the report models and plots this run as (report/run_model.py): a mapping of model "
                    "('served' or a named model) and hardware ('measured' or a GPU preset); 'none': not modelled, "
                    "the report shows what was measured only")
    lossless_min_agreement: Optional[float] = Field(
        default=None, ge=0.0, le=1.0,
        description="lossless check outside fp32 (bench.lossless): the smallest fraction of compared tokens that "
                    "must match before each prompt's first divergence at the required concurrency; below it is "
                    "gross divergence and fails the run. Ignored (exact equality) when dtype is float32; required "
                    "otherwise unless lossless_noise_floor is set")
    lossless_noise_floor: bool = Field(
        default=False,
        description="outside fp32: measure the noise floor on notebook 01's control server (the baseline at "
                    "concurrency 1 against itself at the sweep's highest, on the same prompts, greedy) and bound "
                    "the EAGLE-3 arm's agreement at concurrency 1 by the floor's 95% lower bound over its prompts "
                    "(bench.lossless.NoiseFloor) instead of lossless_min_agreement; notebook 03 refuses to start "
                    "without it. Ignored (exact equality) when dtype is float32")

    @field_validator("cost_model", mode="before")
    @classmethod
    def _no_cost_model(cls, value: Any) -> Any:
        """``cost_model: none`` in YAML is the string 'none' (YAML's null is ``null``): either means not modelled."""
        if value == "none":
            return None
        if isinstance(value, str):
            raise ValueError("must be 'none' or a mapping of model and hardware, e.g. {model: served, hardware: "
                             "measured}")
        return value

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        """The name becomes part of file names under artifacts/, figures/, reports/: a path in it would escape."""
        if not set(value) <= NAME_CHARACTERS or ".." in value or value.startswith("."):
            raise ValueError("must be a plain name (letters, digits, '.', '_', '-'; no path separator, no '..', "
                             "not starting with '.')")
        return value

    @field_validator("bench_dataset_file")
    @classmethod
    def _dataset_named(cls, value: Optional[str], info: ValidationInfo) -> Optional[str]:
        """The 'conversations' workload reads a named dataset file: both keys, or the run would fail hours later."""
        if info.data.get("bench_prompt_kind") == "conversations" and not (value and info.data.get("bench_dataset")):
            raise ValueError("bench_prompt_kind 'conversations' needs bench_dataset (a hub dataset, org/name) and "
                             "bench_dataset_file (its ShareGPT-format JSON file)")
        return value

    @property
    def interleave_concurrency(self) -> list[int]:
        """The concurrencies an interleaved launch measures, ascending: those of ``bench_interleave_concurrency``
        the sweep has (a sweep cut short by an override, ``bench_concurrency=[1]``, interleaves only what it
        measures, since each interleaved point is set beside the sweep's own), concurrency 1 unless set."""
        return sorted(set(self.bench_interleave_concurrency or [1]) & set(self.bench_concurrency))

    @property
    def uses_tiny_model(self) -> bool:
        return self.target_model == "tiny"


def profile_path(name_or_path: str | Path) -> Path:
    """``cpu`` -> ``params/cpu.yaml``; an existing path is taken as is."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"}:
        return candidate
    return params_dir() / f"{name_or_path}.yaml"


def _key(error: ErrorDetails) -> str:
    """A pydantic error's location as a profile key: ``bench_concurrency[1]``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".") \
        or "(top level)"


def _problem(error: ErrorDetails) -> str:
    return {"missing": "missing", "extra_forbidden": "unknown"}.get(error["type"], "invalid")


def _describe(error: ErrorDetails) -> str:
    key = _key(error)
    kind = error["type"]
    if kind == "missing":
        return f"key '{key}' is missing"
    if kind == "extra_forbidden":
        allowed = CostModelKeys.model_fields if key.startswith("cost_model.") else Profile.model_fields
        return f"unknown key '{key}' (allowed: {', '.join(allowed)})"
    given = error.get("input")
    return f"key '{key}': {error['msg']} (got {type(given).__name__} {given!r})"


def validate_profile(data: Any, source: str, overrides: dict[str, Any] | None = None) -> Profile:
    """Turn a raw mapping (plus overrides) into a Profile, or raise ProfileError naming the key and the source."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}",
                           source=source, problem="not_a_mapping")
    merged = {**data, **(overrides or {})}
    try:
        profile = Profile.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        origin = "override" if overrides and str(first["loc"][0]) in overrides else source
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ProfileError(f"{origin}: {_describe(first)}{more}", source=origin, key=_key(first),
                           problem=_problem(first), value=first.get("input")) from None
    problem = cost_model_problem(profile)
    if problem is not None:
        origin = "override" if overrides and "cost_model" in overrides else source
        raise ProfileError(f"{origin}: key '{problem[0]}': {problem[1]}", source=origin, key=problem[0],
                           problem="invalid")
    return profile


def cost_model_problem(profile: Profile) -> Optional[tuple[str, str]]:
    """(key, problem) where ``cost_model`` names something this run cannot be: 'served' models the generated tiny
    pair, so a profile serving another checkpoint must name its model; a cpu run is modelled on its own host."""
    keys = profile.cost_model
    if keys is None:
        return None
    if keys.model == SERVED and not (profile.uses_tiny_model and profile.draft_model == "tiny"):
        return ("cost_model.model", f"'{SERVED}' models the generated tiny target and drafter, and this profile "
                                    f"serves {profile.target_model} with {profile.draft_model}; name the model it "
                                    f"is modelled as ({', '.join(m for m in get_args(CostModelModel) if m != SERVED)})"
                                    " or say cost_model: none")
    if profile.device == "cpu" and keys.hardware != MEASURED:
        return ("cost_model.hardware", f"a cpu run is modelled on the host it ran on; say '{MEASURED}' (got "
                                       f"'{keys.hardware}')")
    return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (plain PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (the first one would be silently replaced)",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


PLAIN_DATA = "mappings, lists, strings, numbers, booleans and null"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The problem of a YAML error in words; a tag such as ``!!python/object/apply`` is named as not plain data."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    tag = re.search(r"constructor for the tag '([^']*)'", problem) if isinstance(
        exc, yaml.constructor.ConstructorError) else None
    if tag:
        return (f"the tag '{tag.group(1).replace('tag:yaml.org,2002:', '!!')}' is not plain data; a profile holds "
                f"only {PLAIN_DATA}")
    context = getattr(exc, "context", None)
    return f"{problem}{', ' + context if context else ''}"


def _yaml_error(path: Path, exc: yaml.YAMLError) -> ProfileError:
    """``file:line:column: problem`` (1-based, as editors count), so the mistake can be found at once."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return ProfileError(f"{where}: not valid YAML ({_yaml_problem(exc)})",
                        source=str(path), problem="yaml", line=mark.line + 1 if mark is not None else None,
                        column=mark.column + 1 if mark is not None else None)


def _read_text(path: Path) -> str:
    """The profile's text, or one line naming the file: unreadable, or not UTF-8 (with the first bad byte's line)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read the profile ({exc.strerror or exc}); check its permissions",
                           source=str(path), problem="unreadable") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ProfileError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                           "save the profile as UTF-8", source=str(path), problem="encoding", line=line) from None


def parse_override(key: str, text: str) -> Any:
    """One ``--set key=value`` value as YAML plain data (``port=30123`` is an int), or one line naming the key.

    Why the project's loader: a tag (``!!python/object/apply:...``) or malformed YAML from the command line gets the
    same one line as in a profile file, not a PyYAML traceback."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the shell passed that are not UTF-8 (Python keeps them as surrogates)
        raise ProfileError(f"--set {key}: the value is not UTF-8 text; pass it in UTF-8", source="override", key=key,
                           problem="encoding") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ProfileError(f"--set {key}: not valid YAML ({_yaml_problem(exc)}); pass plain data such as "
                           f"{key}=30123, {key}=text or {key}=[1, 2]", source="override", key=key, problem="yaml",
                           value=text) from None


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE, overrides: dict[str, Any] | None = None) -> Profile:
    """Load ``params/<name>.yaml`` (or a YAML path) and apply overrides (for example from papermill)."""
    path = profile_path(name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in params_dir().glob("*.yaml")))
        raise ProfileError(f"profile '{name_or_path}' not found at {path}; known profiles: {known}",
                           profile=str(name_or_path), source=str(path), problem="not_found")
    text = _read_text(path)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    return validate_profile(data, str(path), overrides)


def parameter_help() -> dict[str, str]:
    """Key -> help text, for documentation and the CLI."""
    return {name: field.description or "" for name, field in Profile.model_fields.items()}
