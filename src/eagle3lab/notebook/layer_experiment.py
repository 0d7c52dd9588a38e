"""The layer-convention experiment on the CPU miniature (issue 37, item 3): served acceptance per cell.

Two tiny drafters of the same recipe, one trained on the outputs of the profile's drafter ids (convention
"output") and one on the outputs of the layers one below (convention "input": the input of each id's layer), each
served by the real sglang 0.5.9 CPU server with both captures a release can give (``bench.layer_cells``). The
"output" drafter is the profile's own (the cache notebook 03 uses); the "input" one is trained once and cached
the same way. Each cell is one patched server at concurrency 1 on the benchmark's measured prompts; each finished
cell is written to the record at once (atomically), and every server is stopped on every way out
(``fix.relaunch.patched_server``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import platform
from pathlib import Path
from typing import Any, Callable

from eagle3lab.atomic import write_json_atomic
from eagle3lab.bench import layer_cells
from eagle3lab.bench.layer_cells import Cell
from eagle3lab.bench.sweep import ARM_KIND_EAGLE3, load_requests, run_arm, save_arm
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError
from eagle3lab.fix.relaunch import patched_server
from eagle3lab.notebook.patch_and_bench.server_arms import sweep_config
from eagle3lab.runtime import deployment
from eagle3lab.runtime.cpu_harness import SPEC_SHIMS
from eagle3lab.runtime.deployment import Models, ready_timeout_s, server_spec
from eagle3lab.runtime.envinfo import check_sglang
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.tinymodel.checkpoint import CHECKPOINT_FILE
from eagle3lab.runtime.tinymodel.drafter_training import (TrainedDrafter, build_trained_drafter, shifted_drafter,
                                                          trained_drafter_for_profile, workload_for_profile)

PATCH = "kimi_k25-eagle3-delegation"  # notebook 03's fix: the server must pass the wrapper's hooks to serve at all
MAX_PROMPTS = 256


def check_request(profile: Profile, prompts: int) -> None:
    """Refuse, in one line, what the experiment cannot run: a profile off the tiny target or the CPU harness,
    topk above 1, or a prompt count outside 2..MAX_PROMPTS (one prompt gives no interval)."""
    if not (profile.uses_tiny_model and profile.cpu_harness and profile.device == "cpu"):
        raise BenchError(f"layer-experiment runs the CPU miniature (the tiny target on the CPU harness); profile "
                         f"{profile.name} is not one: pass --profile cpu", key="profile", value=profile.name)
    if profile.speculative_eagle_topk != 1:
        raise BenchError(f"layer-experiment trains topk-1 drafters; profile {profile.name} asks for "
                         f"speculative_eagle_topk={profile.speculative_eagle_topk}: set it to 1",
                         key="speculative_eagle_topk", value=profile.speculative_eagle_topk)
    if not 2 <= prompts <= MAX_PROMPTS:
        raise BenchError(f"--prompts {prompts}: give 2 to {MAX_PROMPTS} (an interval needs at least two requests)",
                         key="prompts", value=prompts)


def _sha(path: Path) -> str:
    return hashlib.sha256((path / CHECKPOINT_FILE).read_bytes()).hexdigest()


def drafters(profile: Profile) -> dict[str, TrainedDrafter]:
    """Both conventions' drafters: the profile's own (cached) and the one trained one layer below it. Refused when
    the two were trained on targets with different weights (they must differ only in the layers read)."""
    output = trained_drafter_for_profile(profile)
    below = [i - 1 for i in output.aux_layer_ids]
    layer_cells.cells(output.aux_layer_ids, profile.model_num_layers)  # validates the ids before minutes of training
    inp = build_trained_drafter(profile.model_num_layers, workload_for_profile(profile), aux_layer_ids=below)
    if _sha(output.target_dir) != _sha(inp.target_dir):
        raise BenchError(f"the two drafters were trained on different target weights ({output.target_dir} vs "
                         f"{inp.target_dir}); rebuild the tiny models with `eagle3lab setup --rebuild`")
    return {layer_cells.OUTPUT: output, layer_cells.INPUT: inp}


def served_dir(drafter: TrainedDrafter, cell: Cell) -> Path:
    """The drafter's folder with config ids equal to the cell's fed layers (sglang 0.5.9 on CPU adds 1 to each)."""
    shift = cell.fed_outputs[0] - drafter.aux_layer_ids[0]
    return drafter.path if shift == 0 else shifted_drafter(drafter.path, shift, drafter.num_layers)


def _machine() -> dict[str, Any]:
    return {"host_cpus": os.cpu_count(), "platform": platform.platform(), "machine": platform.machine(),
            "load_average_at_start": [round(v, 2) for v in os.getloadavg()]}


def new_record(profile: Profile, found: dict[str, TrainedDrafter], config: SweepConfig) -> dict[str, Any]:
    """The record before any cell: what was measured, where, when, with what, and the cells planned."""
    output = found[layer_cells.OUTPUT]
    planned = layer_cells.cells(output.aux_layer_ids, profile.model_num_layers)
    return {
        "schema_version": layer_cells.SCHEMA_VERSION, "kind": layer_cells.RECORD_KIND,
        "provenance": "measured here (served by sglang's own EAGLE-3 loop on the CPU harness; not a GPU number)",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": _machine(),
        "profile": profile.name, "sglang": check_sglang(profile.sglang_version),
        "target_layers": profile.model_num_layers, "drafter_ids": list(output.aux_layer_ids),
        "drafters": {conv: {"cache_key": d.cache_key, "trained_outputs": list(d.aux_layer_ids),
                            "offline_benchmark_accept_length":
                                d.history["final"]["benchmark"]["aligned"]["acceptance"]["mean_accept_length"]}
                     for conv, d in found.items()},
        "workload": {"prompts": config.num_prompts, "input_len": config.input_len, "output_len": config.output_len,
                     "concurrency": 1, "draft_steps": profile.speculative_num_steps,
                     "topk": profile.speculative_eagle_topk, "draft_tokens": profile.speculative_num_draft_tokens},
        "bootstrap": {"level": layer_cells.BOOTSTRAP_LEVEL, "level_pct": round(layer_cells.BOOTSTRAP_LEVEL * 100),
                      "resamples": layer_cells.BOOTSTRAP_RESAMPLES,
                      "seed": layer_cells.BOOTSTRAP_SEED, "over": "requests"},
        "conventions": layer_cells.CONVENTIONS, "captures": layer_cells.CAPTURES,
        "mixed": {"capture": "0.5.9 mixed (CUDA graphs as given, eager +1)", "served": False,
                  "why": layer_cells.MIXED_ON_CPU},
        "cells": [{"convention": c.convention, "capture": c.capture, "trained_outputs": list(c.trained_outputs),
                   "fed_outputs": list(c.fed_outputs), "offset": c.offset, "status": "planned"} for c in planned],
        "costs": [],
    }


def measure_cell(profile: Profile, models: Models, drafter: TrainedDrafter, cell: Cell, config: SweepConfig,
                 out_dir: Path, logs_dir: Path) -> dict[str, Any]:
    """Serve one cell on its own patched server and read its acceptance from the per-request counts."""
    draft = served_dir(drafter, cell)
    served = dataclasses.replace(models, draft=str(draft), aux_layer_ids=cell.fed_outputs)
    spec = server_spec(profile, served, speculative=True, shims=SPEC_SHIMS)
    log = logs_dir / f"layer_experiment_{cell.name}.{profile.name}.log"
    with patched_server(spec, log, ready_timeout_s(profile, served), [PATCH]) as server:
        ready_s = round(server.elapsed(), 2)
        arm = run_arm(cell.name, spec.base_url, config, out_dir, kind=ARM_KIND_EAGLE3, log=lambda line: None)
        arm.server_ready_seconds = ready_s
        save_arm(arm, out_dir)
    if arm.requests_file is None:
        raise BenchError(f"cell {cell.name}: the sweep kept no request file (see {log})")
    counts = layer_cells.request_counts(load_requests(out_dir / arm.requests_file))
    if not counts:
        raise BenchError(f"cell {cell.name}: no request finished with a verify count (see {log})")
    acc = layer_cells.served_acceptance(counts)
    return {"status": "measured", "accept_length": acc.accept_length, "low": acc.low, "high": acc.high,
            "requests": acc.requests, "completion_tokens": acc.tokens, "verify_steps": acc.verify_steps,
            "per_request": counts, "server_ready_s": ready_s, "served_config_ids": list(cell.fed_outputs)}


def run(profile: Profile, prompts: int, out: Path, work_dir: Path, logs_dir: Path,
        say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every cell in order, the record rewritten after each; returns the record."""
    check_request(profile, prompts)
    found = drafters(profile)
    models = deployment.resolve_models(profile)
    config = dataclasses.replace(sweep_config(profile, models, "ids"), concurrency=[1], num_prompts=prompts,
                                 prompts_per_concurrency=None)
    record = new_record(profile, found, config)
    write_json_atomic(out, record)
    logs_dir.mkdir(parents=True, exist_ok=True)
    planned = layer_cells.cells(found[layer_cells.OUTPUT].aux_layer_ids, profile.model_num_layers)
    for index, (cell, entry) in enumerate(zip(planned, record["cells"]), start=1):
        say(f"[{index}/{len(planned)}] {cell.name}: trained on outputs of {list(cell.trained_outputs)}, fed "
            f"{list(cell.fed_outputs)} ({prompts} prompts) ...")
        entry.update(measure_cell(profile, models, found[cell.convention], cell, config, work_dir, logs_dir))
        record["costs"] = layer_cells.mismatch_costs(record)
        write_json_atomic(out, record)
        say(f"[{index}/{len(planned)}] {cell.name}: {entry['accept_length']:.3f} tokens per verify step "
            f"(95% interval {entry['low']:.3f}-{entry['high']:.3f}, {entry['requests']} requests); wrote {out}")
    record["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_json_atomic(out, record)
    return record
