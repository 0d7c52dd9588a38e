"""Timers around sglang's own functions, to measure one EAGLE-3 cycle (and one plain decode step) by component.

Why: the break-even acceptance rests on what one cycle costs in plain steps; this measures it in the real server
instead of assuming it. Installed like the CPU shims (post-import hooks from the harness ``sitecustomize``, so they
reach sglang's spawned scheduler), and only when ``EAGLE3LAB_CYCLE_TRACE`` names a JSONL file. Nothing is changed
but timing: every wrapper calls the original and returns its result.

Each wrapped call is a span; a span's *exclusive* time (its own time minus the spans inside it) is charged to its
component, so the components of one record add up to the record's total. Scheduler-level calls
are the roots: one record per root call on a batch (decode, and prefill, so that what runs between the cycles is
measured too), appended to the file with one ``write`` on an ``O_APPEND`` descriptor as soon as the root returns (no
buffering, no loss if the server is killed afterwards); an idle poll (no batch) writes nothing.

Record (one JSON object per line): ``t`` (unix seconds at the end), ``pid``, ``root`` (component of the root),
``mode`` (sglang ForwardMode name at entry), ``bs`` (requests in the batch), ``spec`` (speculative algorithm or
null), ``steps`` (speculative_num_steps or null), ``accepted`` (draft tokens accepted in this cycle, EAGLE
``run_batch`` only), ``ms`` (the root's wall time), ``parts`` ({component: [exclusive ms, calls]}).
Component names are ``<where>.<what>``; inside a model's forward, ``target.*``/``draft.*`` are its attention, MoE
or MLP and logits (``model.*`` keeps the rest of that forward); the groups are documented in ``eagle3lab.bench.cycle``.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from eagle3lab.runtime.cpu_harness.hooks import when_imported

CYCLE_TRACE_ENV = "EAGLE3LAB_CYCLE_TRACE"
RUN_BATCH = "scheduler.run_batch"  # the root whose records count plain steps and cycles
DECODE_MODE = "DECODE"  # sglang's ForwardMode of a decode batch at the scheduler (an EAGLE-3 cycle's too)


class _Span:
    __slots__ = ("name", "start", "child")

    def __init__(self, name: str, start: float):
        self.name, self.start, self.child = name, start, 0.0


class Recorder:
    """The span stack of one process and the file its records go to."""

    def __init__(self, path: str):
        self.path = path
        self.stack: list[_Span] = []
        self.parts: dict[str, list[float]] = {}
        self.context: dict[str, Any] = {}
        self.server: dict[str, Any] = {}

    def enter(self, name: str) -> _Span:
        span = _Span(name, time.perf_counter())
        self.stack.append(span)
        return span

    def leave(self, span: _Span) -> float:
        elapsed = time.perf_counter() - span.start
        self.stack.pop()
        part = self.parts.setdefault(span.name, [0.0, 0])
        part[0] += (elapsed - span.child) * 1000.0
        part[1] += 1
        if self.stack:
            self.stack[-1].child += elapsed
        return elapsed

    def emit(self, root: str, elapsed: float) -> None:
        record = {"t": round(time.time(), 4), "pid": os.getpid(), "root": root, **self.server, **self.context,
                  "ms": round(elapsed * 1000.0, 4),
                  "parts": {name: [round(ms, 4), calls] for name, (ms, calls) in self.parts.items()}}
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


_RECORDER: Recorder | None = None


def _recorder() -> Recorder | None:
    return _RECORDER


def _timed(original: Callable[..., Any], name: str | Callable[..., str | None]) -> Callable[..., Any]:
    """A non-root span around ``original``; outside a root (e.g. start-up, warm-up prefill) it only calls through.
    ``name`` may be a function of the call's arguments (e.g. the model runner's role and mode)."""

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = _RECORDER
        if rec is None or not rec.stack:
            return original(*args, **kwargs)
        label = name(*args, **kwargs) if callable(name) else name
        if label is None:
            return original(*args, **kwargs)
        span = rec.enter(label)
        try:
            return original(*args, **kwargs)
        finally:
            rec.leave(span)

    wrapper.__eagle3lab_timed__ = True  # type: ignore[attr-defined]
    return wrapper


def _mode_name(batch: Any) -> str:
    mode = getattr(batch, "forward_mode", None)
    return getattr(mode, "name", str(mode))


def _is_batch(batch: Any) -> bool:
    return getattr(batch, "forward_mode", None) is not None


def _root(original: Callable[..., Any], name: str, batch_arg: int | None) -> Callable[..., Any]:
    """A root span: one record per call on a batch, decode or prefill, with the batch's mode (``batch_arg`` is the
    batch's position after self; None: the batch is the return value, as for ``get_next_batch_to_run``)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _RECORDER
        if rec is None or rec.stack:
            return original(self, *args, **kwargs)
        # sglang's ScheduleBatch or ForwardBatch (untyped: sglang ships no types)
        batch: Any = args[batch_arg] if batch_arg is not None and len(args) > batch_arg else kwargs.get("batch")
        if batch_arg is not None and not _is_batch(batch):
            return original(self, *args, **kwargs)
        rec.parts = {}
        rec.context = {"mode": _mode_name(batch) if batch_arg is not None else None,
                       "bs": batch.batch_size() if batch_arg is not None else None}
        span = rec.enter(name)
        try:
            result = original(self, *args, **kwargs)
        finally:
            elapsed = rec.leave(span)
        if batch_arg is None:
            if not _is_batch(result):
                return result
            rec.context = {"mode": _mode_name(result), "bs": result.batch_size()}
        accepted = getattr(result, "num_accepted_tokens", None)
        if (name == RUN_BATCH and isinstance(accepted, int) and rec.server.get("spec")
                and rec.context.get("mode") == DECODE_MODE):
            rec.context["accepted"] = accepted
        rec.emit(name, elapsed)
        return result

    wrapper.__eagle3lab_timed__ = True  # type: ignore[attr-defined]
    return wrapper


def _wrap(owner: Any, attr: str, name: str | Callable[..., str | None]) -> None:
    original = getattr(owner, attr, None)
    if original is None or getattr(original, "__eagle3lab_timed__", False):
        return
    setattr(owner, attr, _timed(original, name))


# --- the hooks, one per sglang module ---------------------------------------------------------------------------

def _scheduler(module: ModuleType) -> None:
    cls = module.Scheduler
    for attr, name, batch_arg in (("run_batch", RUN_BATCH, 0),
                                  ("process_batch_result", "scheduler.process_batch_result", 0),
                                  ("get_next_batch_to_run", "scheduler.get_next_batch_to_run", None)):
        original = getattr(cls, attr)
        if not getattr(original, "__eagle3lab_timed__", False):
            setattr(cls, attr, _root(original, name, batch_arg))
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, server_args, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, server_args, *args, **kwargs)
        if _RECORDER is not None:
            spec = getattr(server_args, "speculative_algorithm", None)
            _RECORDER.server = {"spec": str(spec) if spec else None,
                                "steps": getattr(server_args, "speculative_num_steps", None) if spec else None,
                                "draft_tokens": getattr(server_args, "speculative_num_draft_tokens", None)
                                if spec else None}

    cls.__init__ = __init__


def _tp_worker(module: ModuleType) -> None:
    _wrap(module.TpModelWorker, "forward_batch_generation", "worker.forward_batch_generation")


_MODES = {"DECODE": "decode", "TARGET_VERIFY": "verify", "DRAFT_EXTEND": "extend", "EXTEND": "prefill",
          "IDLE": "idle"}


def _runner_label(prefix: str) -> Callable[..., str]:
    """``<prefix>.<target|draft>_<decode|verify|extend|...>`` from the runner and the batch's forward mode."""

    def label(self: Any, forward_batch: Any = None, *args: Any, **kwargs: Any) -> str:
        role = "draft" if getattr(self, "is_draft_worker", False) else "target"
        mode = _mode_name(forward_batch) if forward_batch is not None else "unknown"
        return f"{prefix}.{role}_{_MODES.get(mode, mode.lower())}"

    return label


def _model_runner(module: ModuleType) -> None:
    cls = module.ModelRunner
    _wrap(cls, "forward", _runner_label("runner"))
    for attr in ("forward_decode", "forward_extend", "forward_idle"):
        _wrap(cls, attr, _runner_label("model"))
    _wrap(cls, "sample", "runner.sample")


def _eagle_worker(module: ModuleType) -> None:
    cls = module.EAGLEWorker
    for attr, name in (("forward_batch_generation", "eagle.forward_batch_generation"),
                       ("draft", "eagle.draft"),
                       ("_draft_preprocess_decode", "eagle.draft_preprocess"),
                       ("draft_forward", "eagle.draft_loop"),
                       ("verify", "eagle.verify"),
                       ("forward_draft_extend_after_decode", "eagle.draft_extend"),
                       ("capture_for_decode", "eagle.capture_for_decode")):
        _wrap(cls, attr, name)


def _eagle_info(module: ModuleType) -> None:
    _wrap(module.EagleVerifyInput, "prepare_for_verify", "eagle.verify_prepare")
    _wrap(module.EagleVerifyInput, "verify", "eagle.verify_accept")
    _wrap(module.EagleDraftInput, "prepare_extend_after_decode", "eagle.draft_extend_prepare")


def _eagle_utils(module: ModuleType) -> None:
    _wrap(module, "build_tree_kernel_efficient", "eagle.build_tree")
    _wrap(module, "organize_draft_results", "eagle.organize_draft_results")
    _wrap(module, "verify_tree_greedy_func", "kernel.verify_tree_greedy")
    _wrap(module, "sgl_build_tree_kernel_efficient", "kernel.build_tree_kernel_efficient")


def _spec_utils(module: ModuleType) -> None:
    # spec_kernels imports torch, so only now (sglang has imported it): the sitecustomize imports this module in
    # every process of a traced launch, multiprocessing's resource tracker included
    kernels = importlib.import_module("eagle3lab.runtime.cpu_harness.spec_kernels")
    _wrap(module, "select_top_k_tokens", "eagle.select_top_k_tokens")
    for kernel in kernels.PORTS:
        launcher = getattr(module, kernel, None)
        if isinstance(launcher, kernels.TorchKernel) and not getattr(launcher.fn, "__eagle3lab_timed__", False):
            launcher.fn = _timed(launcher.fn, f"kernel.{kernel}")


def _layer_label(part: str) -> Callable[..., str]:
    """``<target|draft>.<part>``: the model a layer belongs to is the nearest enclosing ``model.*`` span."""

    def label(*args: Any, **kwargs: Any) -> str:
        rec = _RECORDER
        for span in reversed(rec.stack if rec is not None else []):
            if span.name.startswith("model."):
                return f"{span.name.removeprefix('model.').split('_', 1)[0]}.{part}"
        return f"other.{part}"

    return label


def _deepseek(module: ModuleType) -> None:
    """Inside the target's forward: its MLA attention and its MoE (the rest stays with ``model.target_*``)."""
    _wrap(module.DeepseekV2AttentionMLA, "forward", _layer_label("attention"))
    _wrap(module.DeepseekV2MoE, "forward", _layer_label("moe"))


def _llama(module: ModuleType) -> None:
    """Inside the drafter's forward (``LlamaForCausalLMEagle3`` reuses Llama's attention and MLP)."""
    _wrap(module.LlamaAttention, "forward", _layer_label("attention"))
    _wrap(module.LlamaMLP, "forward", _layer_label("mlp"))


def _logits(module: ModuleType) -> None:
    _wrap(module.LogitsProcessor, "forward", _layer_label("logits"))


def _triton_interpreter(module: ModuleType) -> None:
    """``kernel[grid](...)`` under the interpreter is ``InterpretedFunction.__getitem__`` -> ``GridExecutor``."""

    def label(self: Any, *args: Any, **kwargs: Any) -> str:
        return f"triton_interp.{getattr(getattr(self, 'fn', None), '__name__', 'kernel')}"

    _wrap(module.GridExecutor, "__call__", label)


HOOKS: dict[str, Callable[[ModuleType], None]] = {
    "sglang.srt.managers.scheduler": _scheduler,
    "sglang.srt.managers.tp_worker": _tp_worker,
    "sglang.srt.model_executor.model_runner": _model_runner,
    "sglang.srt.speculative.eagle_worker": _eagle_worker,
    "sglang.srt.speculative.eagle_info": _eagle_info,
    "sglang.srt.speculative.eagle_utils": _eagle_utils,
    "sglang.srt.speculative.spec_utils": _spec_utils,
    "sglang.srt.models.deepseek_v2": _deepseek,
    "sglang.srt.models.llama": _llama,
    "sglang.srt.layers.logits_processor": _logits,
    "triton.runtime.interpreter": _triton_interpreter,
}


def install(path: str) -> Recorder:
    """Record to ``path``; the hooks run after the shims' hooks on the same modules (install the shims first)."""
    global _RECORDER
    _RECORDER = Recorder(path)
    for module_name, hook in HOOKS.items():
        when_imported(module_name, hook)
    return _RECORDER


def install_from_environment(environ: dict[str, str] | None = None) -> Recorder | None:
    """Install when ``EAGLE3LAB_CYCLE_TRACE`` names a file; otherwise do nothing."""
    path = (environ if environ is not None else os.environ).get(CYCLE_TRACE_ENV, "").strip()
    return install(path) if path else None
