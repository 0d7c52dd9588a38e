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

That threshold was a chosen number. A profile with ``lossless_noise_floor`` replaces it with a measured one: the
baseline against itself at another batch size (concurrency 1 against the sweep's highest, the same prompts, greedy)
disagrees only by the batch-dependent rounding every bf16 server has; the agreement of that pair is the floor
(``NoiseFloor``), measured first, on notebook 01's control server, and the EAGLE-3 arm must agree with the
baseline at least as well as the floor's 95% lower bound over its prompts (prompts resampled, seeded): the margin
below the measured floor is its own sampling spread, not a guess.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from eagle3lab.bench.metrics import RequestRecord
from eagle3lab.errors import BenchError, ExpectationError

REQUIRED_CONCURRENCY = 1
EXACT = "exact"  # fp32: every prompt identical
AGREEMENT = "agreement"  # bf16 and other reduced precisions: matched-prefix agreement at least the threshold
NOISE_FLOOR = "noise_floor"  # the same, with the threshold the measured noise floor's lower bound
EXACT_DTYPES = ("float32", "float")
FLOOR_LEVEL = 0.95  # the floor's interval: prompts resampled with replacement
FLOOR_RESAMPLES = 2000
FLOOR_SEED = 0


def lossless_policy(dtype: str, min_agreement: float | None, noise_floor: "NoiseFloor | None" = None,
                    wants_floor: bool = False) -> tuple[str, float | None]:
    """(mode, threshold) for a profile's ``dtype``, ``lossless_min_agreement`` and ``lossless_noise_floor``:
    exact where it runs fp32; else the measured floor's lower bound when the profile asks for it."""
    if dtype in EXACT_DTYPES:
        return EXACT, None
    if wants_floor:
        if noise_floor is None:
            raise ExpectationError("the profile bounds the lossless check by a measured noise floor "
                                   "(lossless_noise_floor) and none was measured; run notebook 01 first (its control "
                                   "server measures it)", problem="not_measured")
        return NOISE_FLOOR, noise_floor.bound
    if min_agreement is None:
        raise ExpectationError(f"a profile with dtype {dtype} needs lossless_min_agreement (0..1) or "
                               "lossless_noise_floor in its params file: greedy outputs are compared by agreement, "
                               "not equality, outside fp32")
    return AGREEMENT, float(min_agreement)


def wants_noise_floor(dtype: str, lossless_noise_floor: bool) -> bool:
    """Whether a profile's run measures the floor: asked for, and not fp32 (exact equality needs none)."""
    return lossless_noise_floor and dtype not in EXACT_DTYPES


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
                    *, reference_arm: str, candidate_arm: str,
                    candidate_concurrency: int | None = None) -> LosslessComparison:
    """Token-by-token comparison of two arms' measured outputs at one concurrency, over the prompts both have
    (``candidate_concurrency``: the candidate's outputs at another one, the same prompt indices; the noise floor).

    A prompt one arm lacks (a failed request) is not counted as identical: ``prompts`` is the reference's count.
    """
    ref = _outputs(reference, concurrency, reference_arm)
    cand = _outputs(candidate, concurrency if candidate_concurrency is None else candidate_concurrency,
                    candidate_arm)
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
class NoiseFloor:
    """The baseline against itself at another batch size: the agreement bf16 batching alone leaves, its 95%
    interval over the prompts, and the bound the EAGLE-3 arm is held to (the interval's lower end)."""

    low: int  # the reference concurrency (the lossless check's required one)
    high: int  # the other batch size: the sweep's highest concurrency
    prompts: int
    identical: int
    tokens_compared: int
    tokens_matched: int
    agreement: float
    interval: list[float]  # [lower, upper], FLOOR_LEVEL, prompts resampled FLOOR_RESAMPLES times
    bound: float  # interval[0]: the smallest agreement the EAGLE-3 arm may show
    margin: float  # agreement - bound: the floor's own sampling spread
    resamples: int
    seed: int
    how: str  # what was measured where, in words
    workload: dict[str, Any] = field(default_factory=dict)  # the prompts it was measured on (kind, lengths, seed)
    per_prompt: list[PromptAgreement] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NoiseFloor":
        values = dict(data)
        values["per_prompt"] = [PromptAgreement(**p) for p in values.get("per_prompt") or []]
        return cls(**values)


def agreement_interval(per_prompt: Sequence[PromptAgreement], level: float = FLOOR_LEVEL,
                       resamples: int = FLOOR_RESAMPLES, seed: int = FLOOR_SEED) -> list[float]:
    """The matched-prefix agreement's interval over prompts: the prompts resampled with replacement (seeded), the
    ratio of summed matched to summed compared tokens recomputed each time, its two-sided percentiles."""
    matched = np.array([p.tokens_matched for p in per_prompt], dtype=float)
    compared = np.array([p.tokens_compared for p in per_prompt], dtype=float)
    if not len(compared) or not compared.sum():
        return [0.0, 0.0]
    picks = np.random.default_rng(seed).integers(0, len(compared), size=(resamples, len(compared)))
    totals = compared[picks].sum(axis=1)
    ratios = np.divide(matched[picks].sum(axis=1), totals, out=np.zeros(resamples), where=totals > 0)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return [round(float(low), 6), round(float(high), 6)]


def noise_floor(records: Sequence[RequestRecord], high: int, *, how: str, low: int = REQUIRED_CONCURRENCY,
                workload: dict[str, Any] | None = None, seed: int = FLOOR_SEED) -> NoiseFloor:
    """One baseline server's measured outputs at concurrency ``low`` against the same prompts' at ``high``."""
    if high == low:
        raise BenchError(f"the noise floor compares concurrency {low} with another; the sweep's highest is {low} "
                         "too: add a higher concurrency to bench_concurrency", concurrency=high, key="concurrency")
    pair = compare_outputs(records, records, low, reference_arm=f"baseline c{low}",
                           candidate_arm=f"baseline c{high}", candidate_concurrency=high)
    interval = agreement_interval(pair.per_prompt, seed=seed)
    agreement = round(pair.agreement, 6)
    return NoiseFloor(low, high, pair.prompts, pair.identical, pair.tokens_compared, pair.tokens_matched, agreement,
                      interval, interval[0], round(agreement - interval[0], 6), FLOOR_RESAMPLES, seed, how,
                      dict(workload or {}), pair.per_prompt)


@dataclass
class LosslessReport:
    """Every speculative arm against the baseline, and the verdict the notebook enforces."""

    required_concurrency: int
    comparisons: list[LosslessComparison]
    mode: str = EXACT  # EXACT, AGREEMENT or NOISE_FLOOR (lossless_policy)
    min_agreement: float | None = None  # the threshold: the profile's (AGREEMENT) or the floor's bound (NOISE_FLOOR)
    noise_floor: NoiseFloor | None = None  # the measured floor in NOISE_FLOOR mode

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
                "comparisons": [c.to_dict() for c in self.comparisons],
                "noise_floor": self.noise_floor.to_dict() if self.noise_floor else None}

    def rows(self) -> list[dict[str, Any]]:
        return [{"arm": c.arm, "vs": c.reference, "concurrency": c.concurrency,
                 "identical prompts": f"{c.identical}/{c.prompts}", "tokens compared": c.tokens_compared,
                 "tokens matched": c.tokens_matched, "agreement": round(c.agreement, 4),
                 "threshold": "exact" if self.mode == EXACT else self.min_agreement,
                 "first mismatch": None if not c.mismatches else asdict(c.mismatches[0]),
                 "required": c.concurrency == self.required_concurrency} for c in self.comparisons]


def lossless_report(reference: tuple[str, Sequence[RequestRecord]],
                    candidates: Sequence[tuple[str, Sequence[RequestRecord]]],
                    required_concurrency: int = REQUIRED_CONCURRENCY, *, mode: str = EXACT,
                    min_agreement: float | None = None, noise_floor: NoiseFloor | None = None) -> LosslessReport:
    """Compare each candidate arm with the reference at every concurrency both measured."""
    ref_name, ref_records = reference
    ref_levels = {r.concurrency for r in ref_records if r.phase == "measure"}
    comparisons = []
    for name, records in candidates:
        for level in sorted(ref_levels & {r.concurrency for r in records if r.phase == "measure"}):
            comparisons.append(compare_outputs(ref_records, records, level, reference_arm=ref_name,
                                               candidate_arm=name))
    return LosslessReport(required_concurrency, comparisons, mode, min_agreement, noise_floor)


def expect_lossless(report: LosslessReport) -> None:
    """Fail (one line) unless every speculative arm matched the baseline on every prompt at the required level."""
    required = [c for c in report.comparisons if c.concurrency == report.required_concurrency]
    if not required:
        raise ExpectationError(f"no speculative arm was measured at concurrency {report.required_concurrency}, so "
                               "the lossless check could not run; include it in the sweep",
                               concurrency=report.required_concurrency, problem="not_measured")
    if report.mode != EXACT:
        threshold = report.min_agreement or 0.0
        floor = report.noise_floor
        bound = (f"the noise floor's bound {threshold:.3f} (the baseline at concurrency {floor.low} against "
                 f"{floor.high} agreed {floor.agreement:.3f} over {floor.prompts} prompts; the 95% lower bound)"
                 if floor is not None else f"the profile's lossless_min_agreement {threshold}")
        for c in required:
            if c.agreement < threshold:
                raise ExpectationError(f"speculative decoding diverges {'' if floor else 'grossly '}from greedy "
                                       f"decoding: arm '{c.arm}' "
                                       f"matched {c.tokens_matched}/{c.tokens_compared} tokens before each prompt's "
                                       f"first divergence ({c.agreement:.3f}) at concurrency {c.concurrency}, below "
                                       f"{bound}", arm=c.arm, concurrency=c.concurrency, problem="not_lossless")
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
