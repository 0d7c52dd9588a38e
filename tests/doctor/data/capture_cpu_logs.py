"""Capture the project's own CPU server logs that doctor's tests read (run once, by hand; the logs are committed):
sglang 0.5.9 on CPU serving the tiny Kimi-K2.5-shaped target, first with EAGLE-3 (full delegation patch, the
drafter trained on the target), then without speculation, four concurrent greedy requests each, decode statistics
logged every step (``--decode-log-interval 1``). The venv and the home directory in the logs are replaced by
``/opt/venv`` and ``/home/user``.

    .venv/bin/python tests/doctor/data/capture_cpu_logs.py [PORT]
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from eagle3lab.notebook.patch_and_bench.arm_plans import resolve_drafters
from eagle3lab.package.patching import FULL_DELEGATION_PATCH
from eagle3lab.fix.relaunch import ChainStep, run_step, stop_serving
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
from eagle3lab.runtime.deployment import resolve_models, server_spec
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.server import running_server

HERE = Path(__file__).parent
PROMPTS = [[(37 * i + 11 * j) % 1000 + 16 for j in range(32)] for i in range(4)]


def _send(base_url: str) -> None:
    def one(prompt: list[int]) -> None:
        requests.post(f"{base_url}/generate", json={"input_ids": prompt, "sampling_params": {
            "max_new_tokens": 32, "temperature": 0, "ignore_eos": True}}, timeout=600).raise_for_status()

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        list(pool.map(one, PROMPTS))


def _scrub(src: Path, dst: Path) -> None:
    text = src.read_text(encoding="utf-8", errors="replace").replace(sys.prefix, "/opt/venv")
    text = text.replace(str(Path.home()), "/home/user")
    dst.write_text(text.replace(tempfile.gettempdir(), "/tmp"), encoding="utf-8")


def main(port: int = 31123) -> None:
    profile = load_profile("cpu", overrides={"extra_server_args": ["--decode-log-interval", "1"]})
    models = resolve_models(profile)
    drafters = resolve_drafters(profile, models)
    models = dataclasses.replace(models, draft=drafters.trained, aux_layer_ids=drafters.trained_layer_ids)
    work = Path(tempfile.mkdtemp(prefix="doctor-logs-"))
    try:
        step = run_step(ChainStep("full delegation patch", (FULL_DELEGATION_PATCH,)), profile, models, work,
                        SPEC_SHIMS, port=port, keep_serving=True)
        try:
            if step.status != "ready":
                raise SystemExit(f"EAGLE-3 server did not come up: {step.status}")
            _send(step.server.spec.base_url)
        finally:
            stop_serving([step])
        _scrub(next(work.glob("03_chain_*.log")), HERE / "cpu_eagle3.log")
        spec = server_spec(profile, models, speculative=False, shims=CONTROL_SHIMS, port=port + 1)
        with running_server(spec, work / "baseline.log", profile.ready_timeout_s):
            _send(spec.base_url)
        _scrub(work / "baseline.log", HERE / "cpu_baseline.log")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
