"""The lossless check: greedy speculative decoding must return exactly the tokens greedy decoding returns.

EAGLE verification with temperature 0 accepts a draft token only where it equals the target's own argmax, so a
correct implementation changes speed, never output. The check compares, prompt by prompt and token by token, the
output ids each arm's measured requests returned (the benchmark prompts are the same in every arm) against the
baseline's at the same concurrency. Concurrency 1 is the requirement (one request per batch in both arms, so the
only difference is speculation itself); other concurrencies are compared too and reported, because batching can
change floating-point reduction order in both arms alike.

Exact equality holds only where the arithmetic is order-independent enough: a profile that runs fp32 (the ``cpu``
profile) must match token for token. In bf16 on a GPU, verify (M = draft tokens x batch, a TARGET_VERIFY graph and
the extend kernel) and plain decode (M = batch) reduce in different orders and do not give bit-identical logits, so
the argmax flips at near-ties and the two outputs part from there on. There the check records the agreement per
prompt (identical or not, the first divergence, the tokens matched before it) and fails only on gross divergence:
the fraction of compared tokens matched before each prompt's first divergence below the profile's
``lossless_min_agreement``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.errors import BenchError, ExpectationError

REQUIRED_CONCURRENCY = 1
EXACT = "exact"  # fp32: every prompt identical
AGREEMENT = "agreement"  # bf16 and other reduced precisions: matched-prefix agreement at least the threshold
EXACT_DTYPES = ("float32", "float")


def lossless_policy(dtype: str, min_agreement: float | None) -> tuple[str, float | None]:
    """(mode, threshold) for a profile's ``dtype`` and ``lossless_min_agreement``: exact where it runs fp32."""
    if dtype in EXACT_DTYPES:
        return EXACT, None
    if min_agreement is None:
        raise ExpectationError(f"a profile with dtype {dtype} needs lossless_min_agreement (0..1) in its params file: "
                               "greedy outputs are compared by agreement, not equality, outside fp32")
    return AGREEMENT, float(min_agreement)


@dataclass
class PromptAgreement:
    """One prompt's outputs in two arms: identical, or where they part and how much matched before."""

    prompt_index: int
    identical: bool
    first_divergence: int | None  # None when identical
    tokens_matched: int  # tokens before the first divergence (all compared tokens when identical)
    tokens_compared: int


@dataclass
class Mismatch:
    """The first place one prompt's output differs."""

    prompt_index: int
    position: int  # first differing token (or the shorter length, if one output is a prefix of the other)
    reference_token: int | None
    candidate_token: int | None


@dataclass
class LosslessComparison:
    """One arm against the reference arm at one concurrency."""

    arm: str
    reference: str
    concurrency: int
    prompts: int
    identical: int
    tokens_compared: int
    mismatches: list[Mismatch] = field(default_factory=list)
    per_prompt: list[PromptAgreement] = field(default_factory=list)

    @property
    def lossless(self) -> bool:
        return self.prompts > 0 and self.identical == self.prompts

    @property
    def tokens_matched(self) -> int:
        return sum(p.tokens_matched for p in self.per_prompt)

    @property
    def agreement(self) -> float:
        """Tokens matched before each prompt's first divergence, over tokens compared (a missing prompt: 0)."""
        return self.tokens_matched / self.tokens_compared if self.tokens_compared else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lossless": self.lossless, "tokens_matched": self.tokens_matched,
                "agreement": round(self.agreement, 6)}


def _outputs(records: Sequence[RequestRecord], concurrency: int, arm: str) -> dict[int, list[int]]:
    chosen = [r for r in records if r.phase == "measure" and r.concurrency == concurrency and r.ok]
    outputs: dict[int, list[int]] = {}
    for record in chosen:
        if record.prompt_index is None or record.output_ids is None:
            raise BenchError(f"arm '{arm}': request {record.request_id} has no prompt index or output ids; the "
                             "records predate the lossless check, rerun the benchmark", arm=arm, key="output_ids",
                             problem="predates_check")
        outputs[record.prompt_index] = list(record.output_ids)
    return outputs


def compare_outputs(reference: Sequence[RequestRecord], candidate: Sequence[RequestRecord], concurrency: int,
                    *, reference_arm: str, candidate_arm: str) -> LosslessComparison:
    """Token-by-token comparison of two arms' measured outputs at one concurrency, over the prompts both have.

    A prompt one arm lacks (a failed request) is not counted as identical: ``prompts`` is the reference's count.
    """
    ref = _outputs(reference, concurrency, reference_arm)
    cand = _outputs(candidate, concurrency, candidate_arm)
    if not ref:
        raise BenchError(f"arm '{reference_arm}' has no finished request at concurrency {concurrency} to compare with",
                         arm=reference_arm, concurrency=concurrency, problem="no_reference")
    result = LosslessComparison(candidate_arm, reference_arm, concurrency, prompts=len(ref), identical=0,
                                tokens_compared=0)
    for index in sorted(ref):
        want, got = ref[index], cand.get(index)
        if got is None:
            result.mismatches.append(Mismatch(index, 0, want[0] if want else None, None))
            result.tokens_compared += len(want)
            result.per_prompt.append(PromptAgreement(index, False, 0, 0, len(want)))
            continue
        compared = min(len(want), len(got))
        result.tokens_compared += compared
        if want == got:
            result.identical += 1
            result.per_prompt.append(PromptAgreement(index, True, None, compared, compared))
            continue
        position = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), compared)
        result.mismatches.append(Mismatch(index, position, want[position] if position < len(want) else None,
                                          got[position] if position < len(got) else None))
        result.per_prompt.append(PromptAgreement(index, False, position, min(position, compared), compared))
    return result


@dataclass
class LosslessReport:
    """Every speculative arm against the baseline, and the verdict the notebook enforces."""

    required_concurrency: int
    comparisons: list[LosslessComparison]
    mode: str = EXACT  # EXACT or AGREEMENT (lossless_policy)
    min_agreement: float | None = None  # the profile's threshold in AGREEMENT mode

    def _required(self) -> list[LosslessComparison]:
        return [c for c in self.comparisons if c.concurrency == self.required_concurrency]

    @property
    def lossless(self) -> bool:
        required = self._required()
        return bool(required) and all(c.lossless for c in required)

    @property
    def passed(self) -> bool:
        """Exact mode: lossless. Agreement mode: every required comparison agrees at least ``min_agreement``."""
        if self.mode == EXACT:
            return self.lossless
        required = self._required()
        return bool(required) and all(c.agreement >= (self.min_agreement or 0.0) for c in required)

    def to_dict(self) -> dict[str, Any]:
        return {"lossless": self.lossless, "required_concurrency": self.required_concurrency,
                "mode": self.mode, "min_agreement": self.min_agreement, "passed": self.passed,
                "comparisons": [c.to_dict() for c in self.comparisons]}

    def rows(self) -> list[dict[str, Any]]:
        return [{"arm": c.arm, "vs": c.reference, "concurrency": c.concurrency,
                 "identical prompts": f"{c.identical}/{c.prompts}", "tokens compared": c.tokens_compared,
                 "tokens matched": c.tokens_matched, "agreement": round(c.agreement, 4),
                 "threshold": self.min_agreement if self.mode == AGREEMENT else "exact",
                 "first mismatch": None if not c.mismatches else asdict(c.mismatches[0]),
                 "required": c.concurrency == self.required_concurrency} for c in self.comparisons]


def lossless_report(reference: tuple[str, Sequence[RequestRecord]],
                    candidates: Sequence[tuple[str, Sequence[RequestRecord]]],
                    required_concurrency: int = REQUIRED_CONCURRENCY, *, mode: str = EXACT,
                    min_agreement: float | None = None) -> LosslessReport:
    """Compare each candidate arm with the reference at every concurrency both measured."""
    ref_name, ref_records = reference
    ref_levels = {r.concurrency for r in ref_records if r.phase == "measure"}
    comparisons = []
    for name, records in candidates:
        for level in sorted(ref_levels & {r.concurrency for r in records if r.phase == "measure"}):
            comparisons.append(compare_outputs(ref_records, records, level, reference_arm=ref_name,
                                               candidate_arm=name))
    return LosslessReport(required_concurrency, comparisons, mode, min_agreement)


def expect_lossless(report: LosslessReport) -> None:
    """Fail (one line) unless every speculative arm matched the baseline on every prompt at the required level."""
    required = [c for c in report.comparisons if c.concurrency == report.required_concurrency]
    if not required:
        raise ExpectationError(f"no speculative arm was measured at concurrency {report.required_concurrency}, so "
                               "the lossless check could not run; include it in the sweep",
                               concurrency=report.required_concurrency, problem="not_measured")
    if report.mode == AGREEMENT:
        threshold = report.min_agreement or 0.0
        for c in required:
            if c.agreement < threshold:
                raise ExpectationError(f"speculative decoding diverges grossly from greedy decoding: arm '{c.arm}' "
                                       f"matched {c.tokens_matched}/{c.tokens_compared} tokens before each prompt's "
                                       f"first divergence ({c.agreement:.3f}) at concurrency {c.concurrency}, below "
                                       f"the profile's lossless_min_agreement {threshold}")
        return
    for c in required:
        if not c.lossless:
            first = c.mismatches[0] if c.mismatches else None
            where = (f"; first at prompt {first.prompt_index}, token {first.position}: baseline "
                     f"{first.reference_token}, {c.arm} {first.candidate_token}") if first else ""
            raise ExpectationError(f"speculative decoding is not lossless: arm '{c.arm}' matched the baseline's "
                                   f"greedy output on {c.identical}/{c.prompts} prompts at concurrency "
                                   f"{c.concurrency}{where}", arm=c.arm, concurrency=c.concurrency,
                                   expected=c.prompts, found=c.identical, problem="not_lossless")
