"""Plain decoding steps and EAGLE speculative cycles, built from forward passes plus the engine's CPU work.

A plain step is one target pass over one token per request. Its CPU work (scheduling, output processing,
building the next batch) hides under the GPU when the engine overlaps them (sglang's overlap scheduler), else adds.

An EAGLE cycle (sglang 0.5.9 ``EAGLEWorker.forward_batch_generation``) is
  draft: ``num_steps - 1`` drafter passes over ``topk`` tokens per request, each followed by top-k selection;
  verify: one target pass over ``num_draft_tokens`` per request, logits for all of them, then tree verification;
  draft extend: one drafter pass over the accepted tokens (padded to ``num_steps + 1``), its fc reading the
  target's fused aux states.
The drafter attends over its own KV cache of the whole context on every pass. CPU work is not overlapped: the
scheduler's per-step and per-request work and the preparation of each pass after a GPU sync add to the cycle.
A cycle emits ``accept_length`` tokens per request (sglang's spec_accept_length), so speculation pays when
accept_length > cycle time / plain step time: that ratio is the break-even acceptance.

The speculative flags come from the same object the server launch uses (``runtime.speculative.SpeculativeSpec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import ModelArch
from eagle3lab.costmodel.engine import Engine
from eagle3lab.costmodel.forward import Pass, PassCost, forward_cost
from eagle3lab.costmodel.hardware import Hardware


class SpeculativeFlags(Protocol):
    """The EAGLE flags as ``runtime.speculative.SpeculativeSpec`` carries them (the launch's own object). Read-only
    properties: the model only reads them, and the launch's spec is a frozen dataclass."""

    @property
    def num_steps(self) -> int: ...

    @property
    def eagle_topk(self) -> int: ...

    @property
    def num_draft_tokens(self) -> int: ...

    @property
    def verify_tokens(self) -> int: ...


def verify_tokens(spec: SpeculativeFlags) -> int:
    """Tokens per request the target verifies (the launch spec's own rule: num_steps + 1 when topk == 1), after
    checking the flags describe a tree sglang can build."""
    if spec.num_steps < 1 or spec.eagle_topk < 1 or spec.num_draft_tokens < 1:
        raise PerfModelError(f"speculative flags must be >= 1: num_steps={spec.num_steps}, "
                             f"eagle_topk={spec.eagle_topk}, num_draft_tokens={spec.num_draft_tokens}")
    if spec.eagle_topk > 1:
        # the first step scores topk candidates, each later step topk * topk; num_draft_tokens - 1 are kept + root
        most = 1 + spec.eagle_topk + (spec.num_steps - 1) * spec.eagle_topk ** 2
        if not 2 <= spec.num_draft_tokens <= most:
            raise PerfModelError(f"num_draft_tokens={spec.num_draft_tokens} must be in [2, {most}] for a tree of "
                                 f"{spec.num_steps} steps and topk {spec.eagle_topk}", parameter="num_draft_tokens",
                                 value=spec.num_draft_tokens, problem="out_of_range")
    return spec.verify_tokens


def max_accept_length(spec: SpeculativeFlags) -> int:
    """Every drafted level accepted plus the target's bonus token."""
    return spec.num_steps + 1


def check_accept_length(accept_length: float, spec: SpeculativeFlags) -> None:
    top = max_accept_length(spec)
    if not 1.0 <= accept_length <= top:
        raise PerfModelError(f"acceptance length must be in [1, {top}] (tokens per verify) for num_steps="
                             f"{spec.num_steps}, got {accept_length}", parameter="accept_length",
                             value=accept_length, problem="out_of_range")


@dataclass(frozen=True)
class Deployment:
    """A target and its drafter on ``tp`` GPUs of one kind, served by one engine, at a mean decode context."""

    target: ModelArch
    drafter: ModelArch
    hardware: Hardware
    tp: int
    engine: Engine
    context: float  # mean tokens cached per request while decoding

    def __post_init__(self) -> None:
        if self.tp < 1 or self.context < 0:
            raise PerfModelError(f"deployment: need tp >= 1 and context >= 0, got tp={self.tp}, "
                                 f"context={self.context}")


@dataclass(frozen=True)
class StepTime:
    """One plain decoding step: the target pass, the CPU work, and the step time the engine turns them into."""

    batch: float
    target: PassCost
    cpu_s: float
    total_s: float

    @property
    def tok_s(self) -> float:
        return self.batch / self.total_s


@dataclass(frozen=True)
class CycleTime:
    """One speculative cycle, by part: draft passes, verify, draft extend, bookkeeping, CPU, calibrated extra."""

    batch: float
    draft: PassCost
    draft_passes: int
    verify: PassCost
    extend: PassCost
    bookkeeping_s: float
    cpu_s: float
    extra_s: float

    @property
    def gpu_s(self) -> float:
        return self.draft_passes * self.draft.total_s + self.verify.total_s + self.extend.total_s + self.bookkeeping_s

    @property
    def total_s(self) -> float:
        return self.gpu_s + self.cpu_s + self.extra_s

    def parts(self) -> dict[str, float]:
        return {"draft": self.draft_passes * self.draft.total_s, "verify": self.verify.total_s,
                "draft_extend": self.extend.total_s, "bookkeeping": self.bookkeeping_s, "cpu": self.cpu_s,
                "calibrated_extra": self.extra_s}  # orchestration per cycle and per draft step (fitted or measured)


def extend_tokens_per_request(engine: Engine, spec: SpeculativeFlags) -> int:
    """Tokens per request in the draft-extend pass, by the engine's rule (both engines: num_steps + 1, padded)."""
    if engine.extend_tokens == "steps+1":
        return spec.num_steps + 1
    raise PerfModelError(f"engine '{engine.name}': unknown extend_tokens rule '{engine.extend_tokens}'")


def _cpu(engine: Engine, batch: float, preps: int) -> float:
    return engine.cpu_step_s + engine.cpu_per_request_s * batch + preps * engine.cpu_forward_prep_s


def plain_step(dep: Deployment, batch: float) -> StepTime:
    """One plain decoding step for ``batch`` running requests."""
    target = forward_cost(dep.target, dep.hardware, dep.tp, dep.engine, Pass(batch, 1, dep.context, 1))
    cpu = _cpu(dep.engine, batch, 1)
    total = max(target.total_s, cpu) if dep.engine.overlap_baseline else target.total_s + cpu
    return StepTime(batch, target, cpu, total)


def spec_cycle(dep: Deployment, spec: SpeculativeFlags, batch: float) -> CycleTime:
    """One EAGLE cycle for ``batch`` running requests."""
    e = dep.engine
    topk, steps = spec.eagle_topk, spec.num_steps
    fc_draft = topk if dep.drafter.fc_every_pass else 0.0
    draft = forward_cost(dep.drafter, dep.hardware, dep.tp, e,
                         Pass(batch, topk, dep.context, topk, fc_tokens_per_request=fc_draft))
    verify = forward_cost(dep.target, dep.hardware, dep.tp, e,
                          Pass(batch, verify_tokens(spec), dep.context, verify_tokens(spec)))
    extend_q = extend_tokens_per_request(e, spec)
    extend = forward_cost(dep.drafter, dep.hardware, dep.tp, e,
                          Pass(batch, extend_q, dep.context, 1, fc_tokens_per_request=extend_q))
    bookkeeping = (e.kernels_per_verify + steps * e.kernels_per_draft_step) * e.kernel_overhead_s
    cpu = _cpu(e, batch, e.spec_cpu_preps)
    if e.overlap_spec:
        cpu = max(0.0, cpu - (verify.total_s + (steps - 1) * draft.total_s + extend.total_s))
    return CycleTime(batch, draft, steps - 1, verify, extend, bookkeeping, cpu,
                     orchestration_s(e, steps, dep.tp))


def orchestration_s(engine: Engine, steps: int, tp: int) -> float:
    """The engine's orchestration per cycle beyond the counted passes: per cycle, per draft step, and per TP rank
    beyond the first (fitted on development sources and frozen, or measured; 0 where neither)."""
    return engine.spec_cycle_extra_s + steps * engine.spec_step_extra_s + (tp - 1) * engine.spec_tp_extra_s


def plain_tok_s(dep: Deployment, batch: float) -> float:
    return plain_step(dep, batch).tok_s


def spec_tok_s(dep: Deployment, spec: SpeculativeFlags, batch: float, accept_length: float) -> float:
    """Output tokens/s under speculation; accept_length is tokens emitted per verify per request."""
    check_accept_length(accept_length, spec)
    return batch * accept_length / spec_cycle(dep, spec, batch).total_s


def speedup(dep: Deployment, spec: SpeculativeFlags, batch: float, accept_length: float) -> float:
    """Speculative over plain output tokens/s at the same number of running requests."""
    return spec_tok_s(dep, spec, batch, accept_length) / plain_tok_s(dep, batch)


def break_even_accept_length(dep: Deployment, spec: SpeculativeFlags, batch: float) -> float:
    """Acceptance length at which speculation only matches plain decoding: cycle time / plain step time.

    Above max_accept_length(spec) speculation cannot pay at this batch whatever the drafter does.
    """
    return spec_cycle(dep, spec, batch).total_s / plain_step(dep, batch).total_s


def cycle_parameters(dep: Deployment, spec: SpeculativeFlags) -> list[dict[str, object]]:
    """Every parameter of one EAGLE cycle with the value the model uses and where it comes from (measured here, a
    public source, a datasheet, sglang's code, fitted and frozen, or an assumption): the per-draft-step and
    per-cycle costs, the drafter's own layer and head (its draft vocabulary), the tree and the verify tokens."""
    e, d = dep.engine, dep.drafter
    src = e.sources
    rows: list[tuple[str, object, str, str]] = [
        ("num_steps (draft steps per cycle)", spec.num_steps, "", "the launch's speculative flags"),
        ("draft forwards per cycle", spec.num_steps - 1, "",
         f"{src.get('extend_tokens', 'engine structure')}; the first draft token comes from the draft extend"),
        ("eagle_topk (tree width)", spec.eagle_topk, "", "the launch's speculative flags"),
        ("verify tokens per request (tree size)", verify_tokens(spec), "tokens",
         "runtime.speculative.SpeculativeSpec.verify_tokens (sglang server_args: num_steps + 1 when topk is 1)"),
        ("draft extend tokens per request", extend_tokens_per_request(e, spec), "tokens",
         src.get("extend_tokens", "")),
        ("drafter layers", d.num_layers, "", d.source),
        ("drafter head vocabulary (draft_vocab_size)", d.head_vocab, "tokens", d.source),
        ("drafter hidden size", d.hidden, "", d.source),
        ("kernels per draft step (top-k, tree selection)", e.kernels_per_draft_step, "",
         src.get("kernels_per_draft_step", "")),
        ("kernels per verify (tree build, verify, KV slots)", e.kernels_per_verify, "",
         src.get("kernels_per_verify", "")),
        ("time one kernel adds", e.kernel_overhead_s * 1e6, "us", src.get("kernel_overhead_s", "")),
        ("CPU preparation per pass (after a GPU sync)", e.cpu_forward_prep_s * 1e3, "ms",
         src.get("cpu_forward_prep_s", "")),
        ("passes prepared after a sync per cycle", e.spec_cpu_preps, "", src.get("spec_cpu_preps", "")),
        ("overlap scheduler under speculation", e.overlap_spec, "", src.get("overlap_spec", "")),
        ("orchestration per cycle", e.spec_cycle_extra_s * 1e3, "ms",
         src.get("spec_cycle_extra_s", "none: not fitted or measured for this engine")),
        ("orchestration per draft step", e.spec_step_extra_s * 1e3, "ms",
         src.get("spec_step_extra_s", "none: not fitted or measured for this engine")),
        ("orchestration per cycle per TP rank beyond the first", e.spec_tp_extra_s * 1e3, "ms",
         src.get("spec_tp_extra_s", "none: not fitted or measured for this engine")),
        ("memory bandwidth", dep.hardware.mem_bandwidth / 1e9, "GB/s", dep.hardware.sources.get("mem_bandwidth", "")),
    ]
    return [{"parameter": name, "value": value, "unit": unit, "source": source} for name, value, unit, source in rows]
