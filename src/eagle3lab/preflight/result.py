"""A preflight's result: one ``Check`` per question (ok / warn / fail / skipped / info, one line, what to do),
and the ``Preflight`` of a profile that holds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from eagle3lab.runtime import deployment
from eagle3lab.runtime.profiles import Profile


Outcome = Literal["ok", "warn", "fail", "skipped", "info"]


SLOW = "server flags"  # sglang's parser imports sglang (seconds); skipped by a quick run once something failed


@dataclass
class Check:
    """One check: its outcome, one line of detail, what to do, and the evidence behind it."""

    name: str
    outcome: Outcome
    detail: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"check": self.name, "outcome": self.outcome, "detail": self.detail, "fix": self.fix or ""}


@dataclass
class Preflight:
    """All checks of one profile; ``ok`` unless one failed."""

    profile: str
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    passed_over: str | None = None  # why no check applies (the cpu profile)
    quick: bool = False

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def rows(self) -> list[dict[str, Any]]:
        if self.passed_over:
            return [{"check": "preflight", "outcome": "skipped", "detail": self.passed_over, "fix": ""}]
        return [c.row() for c in self.checks]

    def problem_line(self) -> str:
        """The first failure and its fix in one line, and how many more there are."""
        first = self.failures[0]
        line = first.detail + (f"; {first.fix}" if first.fix else "")
        more = len(self.failures) - 1
        return line + (f" (+{more} more failed check{'s' if more > 1 else ''}: "
                       f"python -m eagle3lab preflight --profile {self.profile})" if more else "")

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "ok": self.ok, "passed_over": self.passed_over, "quick": self.quick,
                "seconds": self.seconds, "checks": [asdict(c) for c in self.checks]}

    def text(self) -> str:
        """A plain table for the terminal."""
        width = max((len(c.name) for c in self.checks), default=10)
        if self.passed_over:
            return f"preflight {self.profile}: passed over ({self.passed_over})"
        lines = [f"preflight {self.profile} ({self.seconds:.1f} s):"]
        for c in self.checks:
            lines.append(f"  {c.outcome:<7} {c.name:<{width}}  {c.detail}")
            if c.fix and c.outcome in ("fail", "warn", "skipped"):
                lines.append(f"  {'':<7} {'':<{width}}  -> {c.fix}")
        return "\n".join(lines)


def passed_over(profile: Profile) -> str | None:
    """Why preflight does not apply to this profile, or None when it does."""
    if profile.device == "cpu" and profile.target_model == deployment.TINY and profile.draft_model == deployment.TINY:
        return (f"profile {profile.name} runs generated tiny models on the CPU: no GPU, checkpoint or download "
                "to check")
    return None


def size_text(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
