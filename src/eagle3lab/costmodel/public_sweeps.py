"""Public decode sweeps of the incident's model family on the incident's hardware, as transcribed data.

``data/rtx6kpro_kimi_sweeps.yaml`` holds every paired cell (EAGLE-3 and plain decode at the same concurrency and
context) that the ``local-inference-lab/rtx6kpro`` pages publish for Kimi-K2.6 with an EAGLE-3 drafter on 8x RTX PRO
6000 Blackwell over PCIe, TP 8, with vLLM; the v4 page adds the acceptance rate per cell. The cost model uses it as
development / check data (issue 36 quotes it, so it is never held out). This module only loads and checks it: each
row repeats its page's URL, commit, engine and TP, and its speedup must be its two published rates' ratio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from eagle3lab.errors import PerfModelError

SWEEPS = Path(__file__).resolve().parent / "data" / "rtx6kpro_kimi_sweeps.yaml"
SPEEDUP_DECIMALS = 3  # the file's speedups are spec / no-spec rounded to this many decimals


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Page(_Strict):
    """One published page (or one section of it) and the deployment its tables were measured on."""

    key: str
    url: str
    commit: str
    measured: str
    engine: str
    engine_version: str
    image: str
    model: str
    drafter: str
    method: str
    num_speculative_tokens: int
    hardware: str
    dcp: list[int]
    seconds_per_cell: int
    notes: str


class Lines(_Strict):
    spec: int
    no_spec: Optional[int] = None
    acceptance: Optional[int] = None


class Cell(_Strict):
    """One cell: both arms' aggregate decode tok/s as published, the acceptance rate where published."""

    id: str
    page: str
    tp: int
    dcp: int
    concurrency: int
    context: str  # the row label as published
    context_tokens: int
    acceptance_rate: Optional[float] = None
    no_spec_tok_s: Optional[float] = None
    spec_tok_s: Optional[float] = None
    speedup: Optional[float] = None
    engine: str
    engine_version: str
    commit: str
    url: str
    lines: Lines

    @model_validator(mode="after")
    def _consistent(self) -> "Cell":
        if self.no_spec_tok_s is None and self.spec_tok_s is None:
            raise ValueError(f"row {self.id}: neither arm has a rate (a cell skipped on both sides is left out)")
        spec, plain, speedup = self.spec_tok_s, self.no_spec_tok_s, self.speedup
        if (spec is not None and plain is not None) != (speedup is not None):
            raise ValueError(f"row {self.id}: speedup must be given exactly when both arms' rates are")
        if spec is not None and plain is not None and speedup is not None \
                and abs(speedup - spec / plain) > 0.5 * 10 ** -SPEEDUP_DECIMALS + 1e-9:
            raise ValueError(f"row {self.id}: speedup {self.speedup} is not spec/no-spec "
                             f"{self.spec_tok_s}/{self.no_spec_tok_s} to {SPEEDUP_DECIMALS} decimals")
        if self.acceptance_rate is not None and not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError(f"row {self.id}: acceptance_rate {self.acceptance_rate} is not a rate in [0, 1]")
        if self.commit not in self.url or not self.url.endswith(f"#L{self.lines.spec}"):
            raise ValueError(f"row {self.id}: url must be at commit {self.commit} and point at line {self.lines.spec}")
        return self


class AcceptanceSummary(_Strict):
    url: str
    page: str
    columns: list[str]
    profiles: dict[int, list[float]]


class Sweeps(_Strict):
    dataset: str
    role: str
    repository: str
    transcribed: str
    speedup_rule: str
    pages: list[Page]
    acceptance_summary: AcceptanceSummary
    rows: list[Cell]

    @model_validator(mode="after")
    def _rows_match_pages(self) -> "Sweeps":
        pages = {p.key: p for p in self.pages}
        if len(pages) != len(self.pages):
            raise ValueError("two pages share a key")
        if self.role != "development":
            raise ValueError("these sweeps are quoted by issue 36: they are development data, never held out")
        ids = [r.id for r in self.rows]
        if len(set(ids)) != len(ids):
            raise ValueError("two rows share an id")
        for row in self.rows:
            page = pages.get(row.page)
            if page is None:
                raise ValueError(f"row {row.id}: page {row.page} is not listed under pages")
            if (row.commit, row.engine, row.engine_version) != (page.commit, page.engine, page.engine_version):
                raise ValueError(f"row {row.id}: commit, engine or engine_version differ from page {page.key}")
            if not row.url.startswith(page.url + "#") or row.dcp not in page.dcp:
                raise ValueError(f"row {row.id}: url or dcp do not belong to page {page.key}")
        return self

    def cells(self, page: str, dcp: Optional[int] = None, paired: bool = True) -> list[Cell]:
        """A page's cells (one DCP size if given), in the file's order; only cells with both arms if ``paired``."""
        return [r for r in self.rows if r.page == page and (dcp is None or r.dcp == dcp)
                and (not paired or r.speedup is not None)]

    def page(self, key: str) -> Page:
        return next(p for p in self.pages if p.key == key)


def accept_length(cell: Cell, num_speculative_tokens: int) -> Optional[float]:
    """Mean tokens per verify step from vLLM's draft acceptance rate: 1 + k x rate (k draft tokens per step)."""
    return None if cell.acceptance_rate is None else 1.0 + num_speculative_tokens * cell.acceptance_rate


def load_sweeps(path: Path = SWEEPS) -> Sweeps:
    """The transcribed sweeps, checked (one clear line if the file is malformed)."""
    try:
        return Sweeps.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise PerfModelError(f"cannot read the public sweeps {path}: {exc}", path=path) from None
    except yaml.YAMLError as exc:
        raise PerfModelError(f"public sweeps {path} are not valid YAML: {exc}", path=path) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PerfModelError(f"public sweeps {path}: {where}: {first['msg']}", path=path, parameter=where) from None
