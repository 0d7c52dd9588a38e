"""What a benchmark sends: the sweep settings and deterministic prompts.

Prompts are random token ids drawn from a seed, so every arm (baseline, EAGLE-3) and every rerun sends exactly
the same requests; only the server changes. Warm-up prompts come from a different stream so they never share a
prefix with measured prompts (the radix cache would otherwise turn prefill into a cache hit).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from eagle3lab.errors import BenchError
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.prompts import TOKEN_ID_LOW, random_token_ids

CHAT_QUESTIONS = Path(__file__).resolve().parent / "data" / "chat_questions.json"

Prompt = Union[list[int], str]
PROMPT_KINDS = ("ids", "text", "chat", "sharegpt", "conversations")
MEASURE = "measure"  # the measured stream; every other stream is a warm-up
PROBE_TIMEOUT_S = 15.0  # the liveness probe's default wait (a live server answers /get_server_info in well under it)


@dataclass(frozen=True)
class SweepConfig:
    """One benchmark workload: a concurrency sweep with fixed input/output lengths (``ignore_eos``)."""

    concurrency: list[int]
    input_len: int
    output_len: int
    num_prompts: int  # measured requests per point (the floor when prompts_per_concurrency is set)
    seed: int = 0
    # measured requests per point grow with concurrency: max(num_prompts, prompts_per_concurrency * c), so a point
    # at concurrency c keeps its slots busy for several rounds and concurrency 1 does not dominate the run
    prompts_per_concurrency: int | None = None
    # ids: random token ids; text: those decoded to text; chat: bundled questions in the model's chat template;
    # sharegpt: the first human turn of each conversation of a ShareGPT-format JSON file (dataset_path), as text;
    # conversations: each conversation of that file up to a human turn in the model's chat template, as ids, at most
    # input_len tokens, none repeated within a point (conversation_prompts)
    prompt_kind: Literal["ids", "text", "chat", "sharegpt", "conversations"] = "ids"
    vocab_size: int = 1024
    token_id_low: int = TOKEN_ID_LOW  # skip the lowest ids, where tokenizers keep their special tokens
    # random ids stay below this (the first special id above token_id_low, e.g. Kimi's reserved ids from 163584);
    # None: the vocabulary size
    token_id_high: int | None = None
    tokenizer_dir: str | None = None  # needed only for text prompts (ids are decoded to text); a local directory
    trust_remote_code: bool = False  # the profile's: Kimi's tokenizer is custom code
    warmup_requests: int | None = None  # per point; None = the point's concurrency (never fewer)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0  # longest silence allowed inside one stream (a hung server, not a slow one)
    # how long the liveness probe after a failed request waits for /get_server_info; never longer than a stream may
    # stay silent. None: PROBE_TIMEOUT_S, or the stall timeout when that is shorter (see probe_wait_s)
    probe_timeout_s: float | None = None
    read_bufsize: int = 8 * 1024 * 1024
    extra_sampling_params: dict[str, Any] = field(default_factory=dict)
    # the measured prompts of a point start this far into the "measure" stream: interleaved blocks
    # (bench.interleave) split one point's prompts between them, each block on the next ones
    measure_offset: int = 0
    dataset_path: str | None = None  # the ShareGPT-format JSON file of prompt_kind "sharegpt"
    # requests per second arriving as a Poisson process (seeded), at most ``concurrency`` in flight; None: closed
    # loop (each of ``concurrency`` workers sends its next request as soon as its last one finished)
    request_rate: float | None = None

    def __post_init__(self) -> None:
        if not self.concurrency or any((not isinstance(c, int)) or c < 1 for c in self.concurrency):
            raise BenchError(f"concurrency must be a non-empty list of positive integers, got {self.concurrency!r}",
                             key="concurrency", value=self.concurrency)
        for name in ("input_len", "output_len", "num_prompts"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise BenchError(f"{name} must be a positive integer, got {value!r}", key=name, value=value)
        if not 0 <= self.token_id_low < self.vocab_size:
            raise BenchError(
                f"token ids are drawn from [{self.token_id_low}, {self.vocab_size}); "
                "set token_id_low below vocab_size", key="token_id_low", value=self.token_id_low
            )
        if self.prompt_kind not in PROMPT_KINDS:
            raise BenchError(f"prompt_kind must be one of {', '.join(PROMPT_KINDS)}, got {self.prompt_kind!r}",
                             key="prompt_kind", value=self.prompt_kind)
        if self.prompt_kind in ("sharegpt", "conversations") and not self.dataset_path:
            raise BenchError(f"{self.prompt_kind} prompts need dataset_path (a ShareGPT-format JSON file)",
                             key="dataset_path")
        if self.request_rate is not None and (isinstance(self.request_rate, bool) or
                                              not isinstance(self.request_rate, (int, float)) or
                                              not self.request_rate > 0):
            raise BenchError(f"request_rate must be > 0 requests/s or None, got {self.request_rate!r}",
                             key="request_rate", value=self.request_rate)
        if self.prompt_kind in ("text", "chat", "conversations") and not self.tokenizer_dir:
            raise BenchError(f"{self.prompt_kind} prompts need tokenizer_dir (the model directory) for its tokenizer",
                             key="tokenizer_dir")
        if self.token_id_high is not None and not self.token_id_low < self.token_id_high <= self.vocab_size:
            raise BenchError(f"token_id_high {self.token_id_high} must lie in ({self.token_id_low}, {self.vocab_size}]",
                             key="token_id_high", value=self.token_id_high)
        if self.prompts_per_concurrency is not None and self.prompts_per_concurrency < 1:
            raise BenchError(f"prompts_per_concurrency must be >= 1 or None, got {self.prompts_per_concurrency!r}",
                             key="prompts_per_concurrency", value=self.prompts_per_concurrency)
        if not isinstance(self.measure_offset, int) or self.measure_offset < 0:
            raise BenchError(f"measure_offset must be an integer >= 0, got {self.measure_offset!r}",
                             key="measure_offset", value=self.measure_offset)
        if self.warmup_requests is not None and self.warmup_requests < 0:
            raise BenchError(f"warmup_requests must be >= 0 or None, got {self.warmup_requests!r}",
                             key="warmup_requests", value=self.warmup_requests)
        if self.request_timeout_s <= 0 or self.stall_timeout_s <= 0 or self.read_bufsize < 64 * 1024:
            raise BenchError("request_timeout_s and stall_timeout_s must be > 0 and read_bufsize at least 64 KiB",
                             key=next(name for name, bad in (("request_timeout_s", self.request_timeout_s <= 0),
                                                             ("stall_timeout_s", self.stall_timeout_s <= 0),
                                                             ("read_bufsize", True)) if bad))
        probe = self.probe_timeout_s
        if probe is not None and (isinstance(probe, bool) or not isinstance(probe, (int, float))
                                  or not 0 < probe <= self.stall_timeout_s):
            raise BenchError(f"probe_timeout_s must be > 0 and at most stall_timeout_s ({self.stall_timeout_s:g}), got "
                             f"{self.probe_timeout_s!r}", key="probe_timeout_s", value=self.probe_timeout_s)

    @property
    def probe_wait_s(self) -> float:
        """The liveness probe's wait: ``probe_timeout_s``, or by default the shorter of 15 s and the stall timeout
        (resolved here, not stored, so ``dataclasses.replace`` of the stall timeout keeps the default in step)."""
        if self.probe_timeout_s is not None:
            return float(self.probe_timeout_s)
        return min(PROBE_TIMEOUT_S, self.stall_timeout_s)

    def prompts_for(self, concurrency: int) -> int:
        """Measured requests at one point: ``num_prompts``, or more when the profile scales them with concurrency."""
        if self.prompts_per_concurrency is None:
            return self.num_prompts
        return max(self.num_prompts, self.prompts_per_concurrency * concurrency)

    def warmup_count(self, concurrency: int) -> int:
        """Warm-up requests for one point: at least the concurrency, so every slot has compiled its path."""
        return max(concurrency, self.warmup_requests or 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepConfig":
        return cls(**data)

    @classmethod
    def from_profile(cls, profile: Profile, **overrides: Any) -> "SweepConfig":
        """The profile's bench_* keys, plus any override (for example ``vocab_size`` of the model)."""
        values: dict[str, Any] = dict(
            concurrency=list(profile.bench_concurrency),
            input_len=profile.bench_input_len,
            output_len=profile.bench_output_len,
            num_prompts=profile.bench_num_prompts,
            prompts_per_concurrency=profile.bench_prompts_per_concurrency,
        )
        values.update(overrides)
        return cls(**values)


def _token_ids(config: SweepConfig, stream: str, count: int) -> list[list[int]]:
    high = config.token_id_high or config.vocab_size
    return random_token_ids(config.seed, stream, count, config.input_len, config.token_id_low, high)


def chat_questions() -> list[dict[str, str]]:
    """The bundled MT-Bench-style questions (``bench/data/chat_questions.json``, written for this project)."""
    data = json.loads(CHAT_QUESTIONS.read_text(encoding="utf-8"))
    return list(data["questions"])


def _chat_prompts(config: SweepConfig, stream: str, count: int) -> list[list[int]]:
    """``count`` single-turn questions rendered with the model's own chat template (generation prompt added),
    as token ids. The order is shuffled per stream; a point asking for more prompts than there are questions
    repeats them (the radix cache then serves a repeated question's prefill)."""
    tokenizer = _chat_tokenizer(config)
    questions = chat_questions()
    order = list(range(len(questions)))
    random.Random(f"eagle3lab:{config.seed}:chat:{stream}").shuffle(order)
    picked = [questions[order[i % len(order)]]["text"] for i in range(count)]
    return [list(tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                               tokenize=True)) for q in picked]


def special_id_floor(tokenizer_dir: str | Path, low: int = TOKEN_ID_LOW) -> int | None:
    """The smallest special token id at or above ``low`` in a tokenizer's ``tokenizer_config.json``
    (``added_tokens_decoder``), so random-id prompts stay below the reserved ids; None if there is none."""
    path = Path(tokenizer_dir) / "tokenizer_config.json"
    try:
        added = json.loads(path.read_text(encoding="utf-8")).get("added_tokens_decoder") or {}
    except (OSError, json.JSONDecodeError):
        return None
    ids = [int(i) for i, tok in added.items() if isinstance(tok, dict) and tok.get("special") and int(i) >= low]
    return min(ids) if ids else None


def _tokenizer(config: SweepConfig) -> Any:
    """The model's tokenizer (text, chat and conversation prompts), or one line naming the directory."""
    from transformers import AutoTokenizer  # only these prompts need it; importing it costs seconds

    try:
        return AutoTokenizer.from_pretrained(config.tokenizer_dir, trust_remote_code=config.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot load a tokenizer from {config.tokenizer_dir} ({type(exc).__name__}); "
                         "point tokenizer_dir at the model directory",
                         path=Path(config.tokenizer_dir) if config.tokenizer_dir else None,
                         key="tokenizer_dir") from None


def _chat_tokenizer(config: SweepConfig) -> Any:
    tokenizer = _tokenizer(config)
    if not getattr(tokenizer, "chat_template", None):
        raise BenchError(f"the tokenizer in {config.tokenizer_dir} has no chat template; use prompt_kind 'ids'")
    return tokenizer


def _as_text(config: SweepConfig, ids: list[list[int]]) -> list[str]:
    tokenizer = _tokenizer(config)
    return [tokenizer.decode(row, skip_special_tokens=True) for row in ids]


def _read_sharegpt(path: Path) -> list[Any]:
    """A ShareGPT-format file's list of conversations, or one line naming the file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise BenchError(f"cannot read the ShareGPT file {path} ({type(exc).__name__}); give a JSON list of "
                         "conversations", path=Path(path), problem="unreadable") from None
    return data if isinstance(data, list) else []


def sharegpt_questions(path: str | Path) -> list[str]:
    """The first human turn of every conversation in a ShareGPT-format JSON file (a list of ``{"conversations":
    [{"from": "human", "value": ...}, ...]}``, the format sglang's and vLLM's serving benchmarks read)."""
    data = _read_sharegpt(Path(path))
    out = []
    for item in data:
        turns = item.get("conversations") if isinstance(item, dict) else None
        first = next((t.get("value") for t in turns or [] if isinstance(t, dict)
                      and t.get("from") in ("human", "user") and isinstance(t.get("value"), str) and t["value"]),
                     None)
        if first:
            out.append(first)
    if not out:
        raise BenchError(f"the ShareGPT file {path} holds no conversation with a human turn", path=Path(path),
                         problem="empty")
    return out


def _sharegpt_prompts(config: SweepConfig, stream: str, count: int) -> list[str]:
    """``count`` first human turns, in an order shuffled per stream (repeated when the file has fewer)."""
    questions = sharegpt_questions(str(config.dataset_path))
    order = list(range(len(questions)))
    random.Random(f"eagle3lab:{config.seed}:sharegpt:{stream}").shuffle(order)
    return [questions[order[i % len(order)]] for i in range(count)]


USER_ROLES = ("human", "user")
ASSISTANT_ROLES = ("gpt", "chatgpt", "assistant", "bard", "bing", "model")


def conversation_turns(item: Any) -> list[dict[str, str]]:
    """One ShareGPT conversation as chat messages: user and assistant turns alternating from the first user turn,
    cut at the first turn that breaks the alternation or is empty (a system turn, an unknown speaker)."""
    turns = item.get("conversations") if isinstance(item, dict) else None
    messages: list[dict[str, str]] = []
    for turn in turns if isinstance(turns, list) else []:
        speaker = turn.get("from") if isinstance(turn, dict) else None
        value = turn.get("value") if isinstance(turn, dict) else None
        role = "user" if speaker in USER_ROLES else "assistant" if speaker in ASSISTANT_ROLES else None
        if role is None or not isinstance(value, str) or not value.strip():
            if messages:
                break
            continue
        if role != ("user" if len(messages) % 2 == 0 else "assistant"):
            if messages:
                break
            continue  # leading assistant turns: the conversation starts at its first user turn
        messages.append({"role": role, "content": value})
    return messages


def _longest_fitting(tokenizer: Any, messages: list[dict[str, str]], limit: int) -> list[int] | None:
    """The conversation up to its latest user turn whose chat-template rendering (generation prompt added) is at
    most ``limit`` tokens: the context a chat server sees at that turn; None when even the first turn is longer."""
    best = None
    for end in range(1, len(messages) + 1, 2):  # prefixes ending in a user turn
        ids = list(tokenizer.apply_chat_template(messages[:end], add_generation_prompt=True, tokenize=True))
        if len(ids) > limit:
            break
        best = ids
    return best


@dataclass
class _Pool:
    """The distinct conversation prompts drawn so far, in the seeded order, and where the draw stopped."""

    prompts: list[list[int]] = field(default_factory=list)
    seen: set[tuple[int, ...]] = field(default_factory=set)
    next_item: int = 0
    items: int = 0  # conversations in the file
    exhausted: bool = False


_POOLS: dict[tuple[Any, ...], _Pool] = {}


def conversation_pool(config: SweepConfig, needed: int) -> list[list[int]]:
    """At least ``needed`` distinct prompts of ``dataset_path`` in one seeded order (fewer only when the file has no
    more): its conversations are shuffled by the seed and each gives the one prompt ``_longest_fitting`` renders,
    so a prompt never repeats and the same seed gives the same prompts in every arm. Built lazily and kept per file
    and setting (rendering the whole set would take minutes)."""
    path = Path(str(config.dataset_path))
    try:
        stat = path.stat()
    except OSError as exc:
        raise BenchError(f"cannot read the conversation file {path} ({type(exc).__name__}); fetch it with "
                         "python -m eagle3lab fetch-models", path=path, problem="unreadable") from None
    key = (str(path), stat.st_size, stat.st_mtime_ns, config.tokenizer_dir, config.seed, config.input_len)
    pool = _POOLS.setdefault(key, _Pool())
    if len(pool.prompts) >= needed or pool.exhausted:
        return pool.prompts
    data = _read_sharegpt(path)
    order = list(range(len(data)))
    random.Random(f"eagle3lab:{config.seed}:conversations").shuffle(order)
    tokenizer = _chat_tokenizer(config)
    pool.items = len(data)
    while len(pool.prompts) < needed and pool.next_item < len(order):
        ids = _longest_fitting(tokenizer, conversation_turns(data[order[pool.next_item]]), config.input_len)
        pool.next_item += 1
        if ids is not None and tuple(ids) not in pool.seen:
            pool.seen.add(tuple(ids))
            pool.prompts.append(ids)
    pool.exhausted = pool.next_item >= len(order)
    return pool.prompts


def measured_span(config: SweepConfig) -> int:
    """Prompts the measured stream uses at the sweep's largest point: warm-ups are drawn after them, so a warm-up
    never shares its conversation with a measured prompt."""
    return config.measure_offset + max(config.prompts_for(c) for c in config.concurrency)


def check_prompt_supply(config: SweepConfig) -> int:
    """Refuse, in one line and before any server starts, a sweep whose largest point needs more distinct
    conversation prompts (measured and warm-up) than the file has; returns the prompts the sweep needs (0 for
    the other prompt kinds, which never run out)."""
    if config.prompt_kind != "conversations":
        return 0
    top = max(config.concurrency, key=lambda c: config.prompts_for(c) + config.warmup_count(c))
    needed = measured_span(config) + config.warmup_count(top)
    have = len(conversation_pool(config, needed))
    if have < needed:
        raise BenchError(f"concurrency {top} needs {needed} distinct prompts ({measured_span(config)} measured, "
                         f"{config.warmup_count(top)} warm-up) but {Path(str(config.dataset_path)).name} has only "
                         f"{have} conversations that fit in {config.input_len} tokens; lower bench_num_prompts or "
                         "bench_prompts_per_concurrency, or raise bench_input_len", concurrency=top,
                         key="bench_prompts_per_concurrency", value=needed, problem="too_few_prompts")
    return needed


def _conversation_prompts(config: SweepConfig, stream: str, count: int) -> list[list[int]]:
    """The measured stream from the pool's start; every other stream (warm-ups) after the measured span."""
    check_prompt_supply(config)
    start = 0 if stream == MEASURE else measured_span(config)
    pool = conversation_pool(config, start + count)
    if len(pool) < start + count:
        raise BenchError(f"{count} more prompts of stream '{stream}' than {config.dataset_path} has distinct "
                         "conversations; lower the prompt counts", key="num_prompts", value=count,
                         problem="too_few_prompts")
    return pool[start:start + count]


def make_prompts(config: SweepConfig, stream: str = MEASURE, count: int | None = None) -> list[Prompt]:
    """``count`` prompts (default ``num_prompts``) of ``input_len`` tokens from the named random stream."""
    count = config.num_prompts if count is None else count
    if config.prompt_kind == "conversations":
        return _conversation_prompts(config, stream, count)  # type: ignore[return-value]
    if config.prompt_kind == "sharegpt":
        return _sharegpt_prompts(config, stream, count)  # type: ignore[return-value]
    if config.prompt_kind == "chat":
        return _chat_prompts(config, stream, count)  # type: ignore[return-value]
    ids = _token_ids(config, stream, count)
    return ids if config.prompt_kind == "ids" else _as_text(config, ids)  # type: ignore[return-value]


def measure_prompts(config: SweepConfig, concurrency: int) -> list[Prompt]:
    """The measured prompts of one point: the next ``prompts_for(concurrency)`` of the "measure" stream from
    ``measure_offset`` on (the stream is the same whatever the count, so a block is a slice of the point's prompts)."""
    start = config.measure_offset
    return make_prompts(config, MEASURE, start + config.prompts_for(concurrency))[start:]


def model_vocab_size(model_dir: str | Path) -> int:
    """The vocabulary size from a model's ``config.json`` (multimodal wrappers keep it in ``text_config``), so
    random prompts never contain an id the model cannot embed."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read {path} ({type(exc).__name__}); point at a model directory", path=path,
                         problem="unreadable") from None
    for section in (config, config.get("text_config") or {}):
        if isinstance(section.get("vocab_size"), int):
            return section["vocab_size"]
    raise BenchError(f"{path} has no vocab_size (top level or text_config); pass vocab_size explicitly", path=path,
                     key="vocab_size", problem="missing")
