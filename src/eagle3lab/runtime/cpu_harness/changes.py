"""What the CPU harness changes against a GPU host, read off the environments its servers were launched with.

The report lists these beside the CPU measurements so a reader can tell what both servers of a comparison share
(a shared change moves a speedup only through the per-step cost both pay) from what only the speculative server
pays, and what touches start-up only. Numbers are the obstacles of this package's docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from eagle3lab.runtime.cpu_harness.environment import EAGER_ENV, TRITON_INTERPRET_ENV, VEC_ISA_TRUST_ENV
from eagle3lab.runtime.cpu_harness.shims import SHIMS, SHIMS_ENV
from eagle3lab.runtime.cpu_harness.start_method import FORK_ENV

BOTH = "baseline and EAGLE-3"
KIND_START_UP = "start-up only"
KIND_STEP = "per-step code, both alike"
KIND_COST = "a harness cost removed"
KIND_ERROR = "an error avoided"
KIND_INTERPRETED = "GPU kernels interpreted"

#: Launch variables (not shims): (variable, obstacle, where, kind, what it does).
VARIABLES: tuple[tuple[str, int, str, str, str], ...] = (
    (VEC_ISA_TRUST_ENV, 2, "torch inductor", KIND_START_UP,
     "inductor takes the CPU's reported vector ISAs without building a probe library in every process"),
    (FORK_ENV, 18, "multiprocessing (sglang.srt.entrypoints.engine)", KIND_START_UP,
     "sglang's scheduler and detokenizer are forked, not spawned (no CUDA context to protect)"),
    (EAGER_ENV, 19, "torch.compile", KIND_STEP,
     "sglang's torch.compile'd functions (MoE top-k and a few others) run as the same Python and torch ops, uncompiled"),
    (TRITON_INTERPRET_ENV, 16, "triton", KIND_INTERPRETED,
     "Triton kernels of the EAGLE loop without a torch port run in Triton's interpreter (no CPU driver)"),
)


@dataclass(frozen=True)
class HarnessChange:
    """One change and the servers it applies to."""

    obstacle: int
    name: str
    where: str
    kind: str
    servers: str
    what: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _servers(in_baseline: bool, in_eagle3: bool) -> str | None:
    if in_baseline and in_eagle3:
        return BOTH
    return "baseline only" if in_baseline else "EAGLE-3 only" if in_eagle3 else None


#: How a shim's ``avoids`` text starts -> what kind of change it is (otherwise: the sglang error it avoids).
KIND_BY_PREFIX = {"Harness cost, not an error:": KIND_COST,
                  "Silent no-op:": "a silent wrong result avoided",
                  "UserWarning-only:": "a silent greedy fallback refused"}


def _shim_kind(avoids: str) -> tuple[str, str]:
    """(kind, what): the kind from the text's prefix, the text without it up to its parenthesised context."""
    for prefix, kind in KIND_BY_PREFIX.items():
        if avoids.startswith(prefix):
            return kind, _first_clause(avoids[len(prefix):])
    return KIND_ERROR, _first_clause(avoids)


def _first_clause(text: str) -> str:
    return text.split("  (")[0].strip()


def _shim_names(env: Mapping[str, str]) -> set[str]:
    return {name for name in env.get(SHIMS_ENV, "").split(",") if name}


def harness_changes(baseline_env: Mapping[str, str], eagle3_env: Mapping[str, str]) -> list[HarnessChange]:
    """Every harness change present in either server's launch environment, by obstacle number."""
    rows: list[HarnessChange] = []
    for variable, obstacle, where, kind, what in VARIABLES:
        servers = _servers(baseline_env.get(variable) == "1", eagle3_env.get(variable) == "1")
        if servers:
            rows.append(HarnessChange(obstacle, variable, where, kind, servers, what))
    baseline, eagle3 = _shim_names(baseline_env), _shim_names(eagle3_env)
    for name in sorted(baseline | eagle3, key=lambda n: SHIMS[n].obstacle):
        shim = SHIMS[name]
        kind, what = _shim_kind(shim.avoids)
        rows.append(HarnessChange(shim.obstacle, name, shim.module, kind,
                                  _servers(name in baseline, name in eagle3) or BOTH, what))
    return sorted(rows, key=lambda row: (row.obstacle, row.name))
