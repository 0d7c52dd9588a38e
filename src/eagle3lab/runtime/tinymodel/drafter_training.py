"""A tiny EAGLE-3 drafter trained on the tiny target, cached by key like the tiny models.

Why train one: a random drafter never guesses the target's tokens (acceptance about 1.0), so a served EAGLE-3 run
would measure nothing about acceptance. This one learns from the target's own greedy continuations and its
hidden states at the drafter's aux layer ids, with training-time test over the draft steps (each step after the
first reads the drafter's own previous state, as in serving) and hard labels on the target's argmax (the tiny
target's softmax is nearly flat, so soft targets carry almost no signal).

Prompts are random token ids of the benchmark's length from their own seeded streams (``drafter-train``,
``drafter-heldout``), never the benchmark's (``measure``/``warmup``), which are scored apart.

``build_trained_drafter`` returns a ``TrainedDrafter`` whose ``path`` sglang loads as
``--speculative-draft-model-path``; ``shifted_drafter`` gives the same weights with the aux layer ids moved by
one layer (what sglang 0.5.9's CUDA-graph capture hands the drafter while eager forwards hand the trained ids).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import platform
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eagle3lab.atomic import building_dir
from eagle3lab.errors import TinyModelError
from eagle3lab.paths import cache_dir
from eagle3lab.progress import progress_bar
from eagle3lab.runtime.modelinfo import drafter_dir_aux_layer_ids
from eagle3lab.runtime.prompts import TOKEN_ID_LOW, random_token_ids
from eagle3lab.runtime.tinymodel import TinyModels, build_tiny_models, safetensors_problem
from eagle3lab.runtime.tinymodel.checkpoint import CHECKPOINT_FILE
from eagle3lab.runtime.tinymodel.drafter_eval import score_drafter, ttt_loss
from eagle3lab.runtime.tinymodel.drafter_net import DrafterShape, Eagle3Drafter
from eagle3lab.runtime.tinymodel.target_states import load_text_model, rollout

TRAINER_VERSION = "1"
HISTORY_FILE = "training.json"
SHIFT_FILE = "eagle3lab-shift.json"
CACHE_FOLDER = "drafters"
TRAIN_STREAM, HELDOUT_STREAM = "drafter-train", "drafter-heldout"
BENCHMARK_STREAM = "measure"  # bench.workload's measured prompts: scored, never trained on


@dataclass(frozen=True)
class DrafterRecipe:
    """Everything about the training that changes the weights (hashed into the cache key).

    The values were chosen on held-out prompts (never on the benchmark's) within the time budget; what they give
    is recorded in each drafter's training.json.
    """

    # 4096 prompts, 1100 steps (the same ~17 passes over the data as the earlier 8192 x 2200): 211 CPU-s instead of
    # 354 (rollouts 50 + training 161, one thread, measured 2026-12-01), held-out aligned acceptance 2.09 (was 2.29)
    train_prompts: int = 4096
    heldout_prompts: int = 256
    optimizer_steps: int = 1100
    batch_size: int = 64
    learning_rate: float = 8e-3
    warmup_steps: int = 50  # linear warm-up, then cosine decay to zero at the last step
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    step_weight_decay: float = 0.8  # loss weight of draft step k is decay ** (k - 1)
    eval_every: int = 275
    threads: int = 1  # one thread: the same bits run to run, and no OpenMP spin-waiting on a shared machine
    seed: int = 0
    rollout_batch: int = 512

    def __post_init__(self) -> None:
        positive = ("train_prompts", "heldout_prompts", "optimizer_steps", "batch_size", "eval_every", "threads",
                    "rollout_batch")
        bad = [name for name in positive if not isinstance(getattr(self, name), int) or getattr(self, name) < 1]
        if bad:
            raise TinyModelError(f"drafter recipe: {', '.join(bad)} must be positive integers")
        if self.batch_size > self.train_prompts:
            raise TinyModelError(f"drafter recipe: batch_size {self.batch_size} exceeds train_prompts "
                                 f"{self.train_prompts}")
        if not (self.learning_rate > 0 and 0 < self.step_weight_decay <= 1 and self.seed >= 0):
            raise TinyModelError("drafter recipe: learning_rate must be > 0, step_weight_decay in (0, 1], seed >= 0")


@dataclass(frozen=True)
class DrafterWorkload:
    """The request shape the drafter is trained for: the benchmark's prompt and output lengths."""

    input_len: int = 32
    output_len: int = 32
    draft_steps: int = 3
    benchmark_prompts: int = 16
    benchmark_seed: int = 0

    def __post_init__(self) -> None:
        if min(self.input_len, self.output_len, self.draft_steps, self.benchmark_prompts) < 1:
            raise TinyModelError("drafter workload: input_len, output_len, draft_steps and benchmark_prompts must "
                                 "be positive")
        if self.output_len < 2:
            raise TinyModelError("drafter workload: output_len must be at least 2 (one prefill token, one draft)")


@dataclass(frozen=True)
class TrainedDrafter:
    """A trained drafter directory (config.json, tokenizer, weights, training.json) and what it was built from."""

    path: Path
    cache_key: str
    aux_layer_ids: list[int]
    num_layers: int
    target_dir: Path
    control_dir: Path  # the untrained generated drafter: same shape and ids, random weights
    history: dict[str, Any]
    build_seconds: float | None  # None when taken from the cache

    @property
    def history_path(self) -> Path:
        return self.path / HISTORY_FILE


# --- keys ------------------------------------------------------------------------------------------------------

def _installed(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def drafter_inputs(tiny: TinyModels, recipe: DrafterRecipe, workload: DrafterWorkload) -> dict[str, Any]:
    """What determines the trained weights: the target (its own cache key covers its generator inputs), the ids,
    the drafter config, recipe, workload, trainer version and the torch/transformers releases that compute it."""
    config = json.loads((tiny.draft_dir / "config.json").read_text(encoding="utf-8"))
    return {"trainer_version": TRAINER_VERSION, "target_cache_key": tiny.cache_key,
            "aux_layer_ids": list(tiny.aux_layer_ids), "draft_config": config,
            "recipe": dataclasses.asdict(recipe), "workload": dataclasses.asdict(workload),
            "torch": _installed("torch"), "transformers": _installed("transformers")}


def drafter_cache_key(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


# --- prompts and data ------------------------------------------------------------------------------------------

def _prompts(workload: DrafterWorkload, vocab_size: int, stream: str, count: int, seed: int) -> list[list[int]]:
    """The benchmark's own prompt stream (``runtime.prompts``), so the drafter trains on what it will serve."""
    return random_token_ids(seed, stream, count, workload.input_len, TOKEN_ID_LOW, vocab_size)


def _embedding(target_dir: Path) -> torch.Tensor:
    from safetensors import safe_open

    with safe_open(str(target_dir / CHECKPOINT_FILE), framework="pt") as handle:
        return handle.get_tensor("language_model.model.embed_tokens.weight").float()


def _cosine_lr(recipe: DrafterRecipe, step: int) -> float:
    if step < recipe.warmup_steps:
        return recipe.learning_rate * (step + 1) / recipe.warmup_steps
    span = max(1, recipe.optimizer_steps - recipe.warmup_steps)
    return recipe.learning_rate * 0.5 * (1 + math.cos(math.pi * (step - recipe.warmup_steps) / span))


class _Clock:
    """Wall and CPU seconds of one phase (CPU time is the honest measure on a shared machine)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> dict[str, float]:
        return {"wall_s": round(time.perf_counter() - self.wall, 1), "cpu_s": round(time.process_time() - self.cpu, 1)}


# --- the build -------------------------------------------------------------------------------------------------

def _train(tiny: TinyModels, recipe: DrafterRecipe, workload: DrafterWorkload, staging: Path) -> dict[str, Any]:
    """Roll out the target, train, score, write weights and config into ``staging``; returns the history."""
    from safetensors.torch import save_file


    config = json.loads((tiny.draft_dir / "config.json").read_text(encoding="utf-8"))
    ids = list(tiny.aux_layer_ids)
    shifted = [i - 1 for i in ids]
    vocab = config["vocab_size"]
    history: dict[str, Any] = {
        "provenance": "measured here (offline simulation of sglang's greedy verify; not a served number)",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"host_cpus": os.cpu_count(), "load_average_at_start": [round(v, 2) for v in os.getloadavg()],
                    "platform": platform.platform(), "torch": torch.__version__, "threads": recipe.threads},
        "aux_layer_ids": ids, "num_layers": tiny.num_layers, "target_cache_key": tiny.cache_key,
        "recipe": dataclasses.asdict(recipe), "workload": dataclasses.asdict(workload),
    }

    clock = _Clock()
    train_prompts = _prompts(workload, vocab, TRAIN_STREAM, recipe.train_prompts, recipe.seed)
    heldout_prompts = _prompts(workload, vocab, HELDOUT_STREAM, recipe.heldout_prompts, recipe.seed)
    bench_prompts = _prompts(workload, vocab, BENCHMARK_STREAM, workload.benchmark_prompts, workload.benchmark_seed)
    overlap = {tuple(p) for p in train_prompts} & {tuple(p) for p in heldout_prompts + bench_prompts}
    if overlap:
        raise TinyModelError(f"{len(overlap)} training prompt(s) also appear among held-out or benchmark prompts")
    target = load_text_model(tiny.target_dir)
    total = len(train_prompts) + len(heldout_prompts) + len(bench_prompts)
    with progress_bar(total=total, desc="target rollouts", unit="prompt", mininterval=2.0) as bar:
        data = {name: rollout(target, prompts, workload.output_len, recipe.rollout_batch, bar)
                for name, prompts in (("train", train_prompts), ("heldout", heldout_prompts),
                                      ("benchmark", bench_prompts))}
    del target
    history["rollout_time"] = clock.read()

    torch.manual_seed(recipe.seed)
    embedding = _embedding(tiny.target_dir)
    shape = DrafterShape.from_config(config)
    drafter = Eagle3Drafter(shape, embedding)
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=recipe.learning_rate, betas=recipe.adam_betas,
                                  weight_decay=recipe.weight_decay)
    generator = torch.Generator().manual_seed(recipe.seed)
    train = data["train"]
    first_anchor = workload.input_len - 1
    curve: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    clock = _Clock()
    order = torch.randperm(train.tokens.shape[0], generator=generator)
    cursor = 0
    with progress_bar(total=recipe.optimizer_steps, desc="drafter training", unit="step", mininterval=2.0) as bar:
        for step in range(recipe.optimizer_steps):
            if cursor + recipe.batch_size > len(order):
                order, cursor = torch.randperm(train.tokens.shape[0], generator=generator), 0
            rows = order[cursor:cursor + recipe.batch_size]
            cursor += recipe.batch_size
            for group in optimizer.param_groups:
                group["lr"] = _cosine_lr(recipe, step)
            tokens = train.tokens[rows]
            outputs = drafter(tokens, train.aux(ids, rows).float(), first_anchor=first_anchor,
                              steps=workload.draft_steps)
            loss, per_step = ttt_loss(outputs, tokens, first_anchor, recipe.step_weight_decay)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(drafter.parameters(), recipe.grad_clip)
            optimizer.step()
            curve.append({"step": step + 1, "loss": round(float(loss.detach()), 4),
                          "loss_per_step": [round(v, 4) for v in per_step]})
            bar.update(1)
            if (step + 1) % recipe.eval_every == 0 or step + 1 == recipe.optimizer_steps:
                score = score_drafter(drafter, data["heldout"], ids, workload.draft_steps)
                evals.append({"step": step + 1, "heldout": score.to_dict(), **clock.read()})
                bar.set_postfix(accept=f"{score.acceptance.mean_accept_length:.2f}")
    history["train_time"] = clock.read()
    history["train_curve"] = curve
    history["evals"] = evals

    # Score the weights as sglang will hold them (bfloat16), aligned, one layer early, and untrained.
    tensors = drafter.checkpoint_tensors()
    served = Eagle3Drafter(shape, embedding)
    served.load_checkpoint_tensors(tensors)
    control = Eagle3Drafter(shape, embedding)
    control.load_checkpoint_tensors(_read_tensors(tiny.draft_dir))
    final: dict[str, Any] = {}
    for name in ("heldout", "benchmark"):
        arms = {"aligned": score_drafter(served, data[name], ids, workload.draft_steps),
                "untrained": score_drafter(control, data[name], ids, workload.draft_steps)}
        if min(shifted) >= 0:
            arms["shifted"] = score_drafter(served, data[name], shifted, workload.draft_steps)
        final[name] = {arm: score.to_dict() for arm, score in arms.items()}
        final[name]["prompts"] = data[name].tokens.shape[0]
    history["final"] = final
    history["shifted_aux_layer_ids"] = shifted if min(shifted) >= 0 else None

    for source in tiny.draft_dir.iterdir():  # config.json and tokenizer files, exactly as the control's
        if source.is_file() and not source.name.startswith(CHECKPOINT_FILE):
            shutil.copy2(source, staging / source.name)
    save_file({**tensors, **_vocab_maps(tiny.draft_dir)}, str(staging / CHECKPOINT_FILE), metadata={"format": "pt"})
    index = {"metadata": {"total_size": (staging / CHECKPOINT_FILE).stat().st_size},
             "weight_map": {name: CHECKPOINT_FILE for name in sorted(_read_tensors(staging))}}
    (staging / f"{CHECKPOINT_FILE}.index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return history


def _read_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / CHECKPOINT_FILE))


def _vocab_maps(draft_dir: Path) -> dict[str, torch.Tensor]:
    """``d2t``/``t2d`` as the generated drafter has them (identity: draft vocabulary == target vocabulary)."""
    return {name: t for name, t in _read_tensors(draft_dir).items() if name in ("d2t", "t2d")}


def _check_naming(trained: Path, control: Path) -> None:
    """The trained checkpoint must carry exactly the control's tensors (names derived from sglang's classes)."""
    from safetensors import safe_open

    def specs(path: Path) -> dict[str, tuple]:
        with safe_open(str(path / CHECKPOINT_FILE), framework="pt") as handle:
            return {n: (tuple(handle.get_slice(n).get_shape()), handle.get_slice(n).get_dtype()) for n in handle.keys()}  # noqa: SIM118

    ours, theirs = specs(trained), specs(control)
    if ours != theirs:
        diff = sorted(set(ours.items()) ^ set(theirs.items()))[:3]
        raise TinyModelError(f"trained drafter tensors differ from the generated drafter's (first: {diff}); "
                             "the trainer no longer matches sglang's LlamaForCausalLMEagle3 naming")


def _dir_hashes(root: Path, skip: tuple[str, ...]) -> dict[str, str]:
    """sha256 of every file directly in ``root`` but ``skip`` (the record that lists them)."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.iterdir()) if path.is_file() and path.name not in skip}


def cache_damage(root: Path, recorded: dict[str, str] | None) -> str | None:
    """Why a cached drafter folder cannot be used (a file missing, truncated or changed), or None if it can.

    Why: a truncated ``model.safetensors`` or a missing ``config.json`` was reported "(cached)" and failed four
    minutes later inside sglang, blamed on the patch. A folder from before checksums were recorded gets the
    structural check the tiny models' cache gets (its weights file whole, its config readable).
    """
    if recorded is None:
        for required in ("config.json", CHECKPOINT_FILE):
            if not (root / required).is_file():
                return f"{required} is missing"
        try:
            json.loads((root / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "config.json is not readable JSON"
        problem = safetensors_problem(root / CHECKPOINT_FILE)
        return f"{CHECKPOINT_FILE} {problem}" if problem else None
    for name, digest in recorded.items():
        path = root / name
        if not path.is_file():
            return f"{name} is missing"
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return f"{name} does not match the checksum recorded when it was built"
    return None


def _read_history(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / HISTORY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_trained_drafter(num_layers: int, workload: DrafterWorkload = DrafterWorkload(),
                          recipe: DrafterRecipe = DrafterRecipe(), tiny_seed: int = 0,
                          cache_root: Path | None = None, models_root: Path | None = None,
                          force: bool = False, aux_layer_ids: Sequence[int] | None = None) -> TrainedDrafter:
    """Return the trained drafter for a ``num_layers``-deep tiny target, training it if the cache lacks it.

    ``aux_layer_ids``: the layers whose outputs it is trained on (default: the real drafter's scaled to the depth);
    the layer-convention experiment trains one on the ids one layer below (``layer_experiment``).

    The build is atomic: everything is written into a temporary folder that is renamed into
    ``<cache_root>/<cache_key>`` at the end, so an interrupted build is never reused. ``cache_root`` defaults to
    ``cache_dir("drafters")``; ``models_root`` is handed to ``build_tiny_models``.
    """
    tiny = build_tiny_models(cache_root=models_root, seed=tiny_seed, num_layers=num_layers,
                             aux_layer_ids=aux_layer_ids)
    inputs = drafter_inputs(tiny, recipe, workload)
    key = drafter_cache_key(inputs)
    base = Path(cache_root) if cache_root is not None else cache_dir(CACHE_FOLDER)
    root = base / key
    history = None if force else _read_history(root)
    damage = cache_damage(root, history.get("files")) if history is not None else None
    if damage:
        print(f"trained drafter: the cache at {root} is damaged ({damage}); training it again")
        history = None
    build_seconds: float | None = None
    if history is None:
        started = time.perf_counter()
        threads = torch.get_num_threads()
        try:
            torch.set_num_threads(recipe.threads)
            with building_dir(root) as staging:
                history = _train(tiny, recipe, workload, staging)
                _check_naming(staging, tiny.draft_dir)
                history.update(cache_key=key, inputs=inputs, files=_dir_hashes(staging, (HISTORY_FILE,)))
                (staging / HISTORY_FILE).write_text(json.dumps(history, indent=1), encoding="utf-8")
            build_seconds = round(time.perf_counter() - started, 1)
        finally:
            torch.set_num_threads(threads)
        history = _read_history(root)  # the JSON on disk is the one record (tuples come back as lists)
        if history is None:
            raise TinyModelError(f"the trained drafter at {root} has no readable {HISTORY_FILE} right after training")
    origin = f"trained in {build_seconds:.0f} s" if build_seconds is not None else "cached"
    aligned = history["final"]["benchmark"]["aligned"]["acceptance"]["mean_accept_length"]
    print(f"trained drafter: cache key {key} ({origin}) at {root}; offline acceptance on the benchmark prompts "
          f"{aligned:.2f} (simulated, aux ids {history['aux_layer_ids']})")
    return TrainedDrafter(path=root, cache_key=key, aux_layer_ids=list(history["aux_layer_ids"]),
                          num_layers=num_layers, target_dir=tiny.target_dir, control_dir=tiny.draft_dir,
                          history=history, build_seconds=build_seconds)


# --- the one-layer-early sibling -------------------------------------------------------------------------------

def _checkpoint_digest(path: Path) -> str:
    return hashlib.sha256((path / CHECKPOINT_FILE).read_bytes()).hexdigest()[:16]


def shifted_drafter(path: Path | str, shift: int = -1, num_layers: int | None = None) -> Path:
    """A sibling drafter directory, identical but for ``eagle_aux_hidden_state_layer_ids`` moved by ``shift``.

    ``num_layers`` (the target's depth) defaults to what the drafter's training.json records. Every shifted id
    must stay in ``0 .. num_layers - 2``: sglang captures id ``i`` at the input of layer ``i + 1``, so id -1 would
    land before layer 0 (where the DeepSeek layer loop adds a residual that is still None) and id ``L - 1`` past
    the last layer (never captured: two aux states instead of three). Cached next to ``path`` as
    ``<name>-shift<shift>``, rebuilt when the source weights change.
    """
    path = Path(path)
    ids = drafter_dir_aux_layer_ids(path)
    if num_layers is None:
        history = _read_history(path)
        if history is None or "num_layers" not in history:
            raise TinyModelError(f"{path} records no target depth (no training.json); pass num_layers")
        num_layers = int(history["num_layers"])
    moved = [i + shift for i in ids]
    if shift == 0 or any(not 0 <= i <= num_layers - 2 for i in moved):
        raise TinyModelError(f"cannot shift aux layer ids {ids} by {shift} for a {num_layers}-layer target: "
                             f"{moved} must be a different set within 0..{num_layers - 2}")
    target = path.parent / f"{path.name}-shift{shift:+d}"
    digest = _checkpoint_digest(path)
    try:
        recorded = json.loads((target / SHIFT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    if recorded and recorded.get("source_checkpoint") == digest and recorded.get("aux_layer_ids") == moved \
            and cache_damage(target, recorded.get("files")) is None:
        return target
    with building_dir(target) as staging:
        for source in path.iterdir():
            if source.is_file():
                shutil.copy2(source, staging / source.name)
        config = json.loads((staging / "config.json").read_text(encoding="utf-8"))
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = moved
        (staging / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        (staging / SHIFT_FILE).write_text(json.dumps({"source": path.name, "source_checkpoint": digest, "shift": shift,
                                                      "trained_aux_layer_ids": ids, "aux_layer_ids": moved,
                                                      "num_layers": num_layers,
                                                      "files": _dir_hashes(staging, (SHIFT_FILE,))},
                                                     indent=1), encoding="utf-8")
    return target


# --- the profile's drafter -------------------------------------------------------------------------------------

def workload_for_profile(profile: Any) -> DrafterWorkload:
    """The benchmark's request shape from a profile (``bench_*`` and ``speculative_*`` keys)."""
    if profile.speculative_eagle_topk != 1:
        raise TinyModelError(f"the tiny drafter is trained and scored for topk 1 chains; the profile asks for "
                             f"speculative_eagle_topk={profile.speculative_eagle_topk}")
    return DrafterWorkload(input_len=profile.bench_input_len, output_len=profile.bench_output_len,
                           draft_steps=profile.speculative_num_steps, benchmark_prompts=profile.bench_num_prompts)


def needs_trained_drafter(profile: Any) -> bool:
    """Whether a profile serves the trained tiny drafter (a tiny target with one draft token per step)."""
    return bool(profile.uses_tiny_model and profile.speculative_eagle_topk == 1)


def trained_drafter_cached(profile: Any) -> bool:
    """Whether the profile's trained drafter is in the cache, whole (so nothing would be trained for it)."""
    tiny = build_tiny_models(num_layers=profile.model_num_layers, aux_layer_ids=profile.tiny_aux_layer_ids)
    root = cache_dir(CACHE_FOLDER) / drafter_cache_key(drafter_inputs(tiny, DrafterRecipe(),
                                                                      workload_for_profile(profile)))
    history = _read_history(root)
    return history is not None and cache_damage(root, history.get("files")) is None


def trained_drafter_for_profile(profile: Any, force: bool = False) -> TrainedDrafter:
    """The trained drafter for a tiny-model profile (cpu, gpu-1x): its depth, its aux layer ids
    (``tiny_aux_layer_ids``: gpu-1x names sglang's graph default [2, 4, 5], which notebook 03 must serve, not the
    scaled ids of its depth) and its benchmark's shape."""
    if not profile.uses_tiny_model:
        raise TinyModelError(f"profile {profile.name} serves {profile.target_model}, not the tiny target; "
                             "a trained tiny drafter only exists for tiny-model profiles")
    return build_trained_drafter(profile.model_num_layers, workload_for_profile(profile), force=force,
                                 aux_layer_ids=profile.tiny_aux_layer_ids)


def shifted_ids_valid(ids: Sequence[int], num_layers: int, shift: int = -1) -> bool:
    """Whether ``ids`` moved by ``shift`` stay capturable by sglang on a ``num_layers``-deep target."""
    return shift != 0 and all(0 <= i + shift <= num_layers - 2 for i in ids)


def describe_trained_drafter(drafter: TrainedDrafter) -> str:
    """A few lines for people: where it is, its key, its ids, its offline scores and what training cost."""
    history = drafter.history
    lines = [f"trained drafter: {drafter.path}", f"trained drafter cache key: {drafter.cache_key}",
             (f"aux layer ids: {drafter.aux_layer_ids} of {drafter.num_layers} layers "
              f"(one layer early: {history.get('shifted_aux_layer_ids')}); control (untrained): {drafter.control_dir}")]
    for name, scores in history["final"].items():
        arms = ", ".join(f"{arm} {scores[arm]['acceptance']['mean_accept_length']:.2f}"
                         for arm in ("aligned", "shifted", "untrained") if arm in scores)
        lines.append(f"offline acceptance length on {scores['prompts']} {name} prompts: {arms}")
    rollout, train = history["rollout_time"], history["train_time"]
    lines.append(f"build cost (recorded when trained, {history['date']}, load average "
                 f"{history['machine']['load_average_at_start']}): target rollouts {rollout['cpu_s']} s CPU / "
                 f"{rollout['wall_s']} s wall, training {train['cpu_s']} s CPU / {train['wall_s']} s wall")
    lines.append(f"source: {history['provenance']}")
    return "\n".join(lines)
