"""The cycle timers: spans charge exclusive time, one record per root call on a batch (decode or prefill, with its
mode), appended at once.

The timed functions here are small Python functions that sleep (the timers only wrap and call through); the hooks
on sglang's own modules are checked against the installed sglang in a fresh interpreter under the harness.
"""

from __future__ import annotations

import json
import time

from eagle3lab.runtime.cpu_harness import cycle_timers
from test_cpu_harness import run_child


class _Mode:
    def __init__(self, name: str):
        self.name = name

    def is_decode(self) -> bool:
        return self.name == "DECODE"


class _Batch:
    def __init__(self, mode: str, size: int):
        self.forward_mode = _Mode(mode)
        self.size = size

    def batch_size(self) -> int:
        return self.size


class _Result:
    num_accepted_tokens = 3


def test_exclusive_times_add_up_to_the_root_and_records_are_appended_per_batch_call(tmp_path):
    path = tmp_path / "cycles.jsonl"
    recorder = cycle_timers.install(str(path))
    recorder.server = {"spec": "EAGLE3", "steps": 3}

    def leaf() -> None:
        time.sleep(0.01)

    timed_moe = cycle_timers._timed(leaf, cycle_timers._layer_label("moe"))

    def verify_forward() -> None:
        time.sleep(0.01)
        timed_moe()

    timed_leaf = cycle_timers._timed(verify_forward, "model.target_verify")

    def middle() -> None:
        time.sleep(0.005)
        timed_leaf()
        timed_leaf()

    timed_middle = cycle_timers._timed(middle, "eagle.verify")

    def run_batch(self, batch):  # noqa: ANN001
        timed_middle()
        return _Result()

    root = cycle_timers._root(run_batch, "scheduler.run_batch", 0)
    root(None, _Batch("DECODE", 2))
    root(None, _Batch("EXTEND", 2))  # prefill: a record of its own mode, no acceptance
    root(None, None)  # no batch (an idle poll): no record
    timed_leaf()  # outside a root: calls through, no record
    root(None, _Batch("DECODE", 1))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["mode"] for line in lines] == ["DECODE", "EXTEND", "DECODE"]
    prefill = json.loads(lines[1])
    assert prefill["bs"] == 2 and "accepted" not in prefill and prefill["parts"]["model.target_verify"][1] == 2
    first = json.loads(lines[0])
    assert first["root"] == "scheduler.run_batch" and first["bs"] == 2 and first["mode"] == "DECODE"
    assert first["accepted"] == 3 and first["spec"] == "EAGLE3"
    parts = first["parts"]
    assert parts["model.target_verify"][1] == 2 and parts["eagle.verify"][1] == 1
    assert parts["target.moe"][1] == 2 and parts["target.moe"][0] >= 20.0  # the layer inside the target's forward
    assert parts["model.target_verify"][0] >= 20.0
    assert 5.0 <= parts["eagle.verify"][0] < parts["model.target_verify"][0]
    assert abs(sum(ms for ms, _ in parts.values()) - first["ms"]) < 0.01
    cycle_timers._RECORDER = None


HOOKED = """
    import json, os
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.speculative import eagle_info, eagle_utils, eagle_worker, spec_utils
    timed = lambda f: bool(getattr(f, "__eagle3lab_timed__", False))
    print(json.dumps({
        "scheduler": all(timed(getattr(Scheduler, a)) for a in ("run_batch", "process_batch_result",
                                                                 "get_next_batch_to_run")),
        "runner": all(timed(getattr(ModelRunner, a)) for a in ("forward", "forward_decode", "forward_extend")),
        "eagle": all(timed(getattr(eagle_worker.EAGLEWorker, a)) for a in ("draft", "draft_forward", "verify",
                                                                          "forward_draft_extend_after_decode")),
        "tree": timed(eagle_worker.build_tree_kernel_efficient) and timed(eagle_info.verify_tree_greedy_func),
        "layers": timed(__import__("sglang.srt.models.deepseek_v2", fromlist=["x"]).DeepseekV2MoE.forward),
        "kernel": timed(spec_utils.assign_draft_cache_locs.fn),
        "worker_uses_port": type(eagle_worker.assign_draft_cache_locs).__name__,
    }))
"""


def test_hooks_wrap_sglangs_own_functions_after_the_shims(tmp_path, monkeypatch):
    monkeypatch.setenv(cycle_timers.CYCLE_TRACE_ENV, str(tmp_path / "cycles.jsonl"))
    result = run_child(HOOKED, shims=("build_tree_cpu", "verify_greedy_cpu", "bookkeeping_kernels_torch"))
    assert result == {"scheduler": True, "runner": True, "eagle": True, "tree": True, "layers": True, "kernel": True,
                      "worker_uses_port": "TorchKernel"}
    monkeypatch.delenv(cycle_timers.CYCLE_TRACE_ENV)
    untouched = run_child(HOOKED.replace('"kernel": timed(spec_utils.assign_draft_cache_locs.fn),', ""),
                          shims=("bookkeeping_kernels_torch",))
    assert not untouched["scheduler"] and not untouched["eagle"]
