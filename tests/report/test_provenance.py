"""The report's number and tag checks on small texts: what counts as a number, what counts as evidence for it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from eagle3lab.report.provenance import (
    Evidence,
    Token,
    blocks,
    numeric_tokens,
    structural_numbers,
    unsourced_numbers,
    untagged_blocks,
)


def texts(markdown: str) -> list[str]:
    return [t.text for t in numeric_tokens(markdown)]


def test_numbers_are_found_in_prose_but_not_in_code_links_names_or_heading_ordinals():
    md = "\n".join([
        "## 6. Why EAGLE-3 on Kimi-K2.5 gave no speedup",
        "It costs 1.67x a plain step, 30.7% below, 1,643 tok/s at 126 requests; trends 2/3; range 1.36-1.90.",
        "Runs `model_runner.py:1906` on H200 and sm_120 with INT4 and fp8, see [liu2025](https://arxiv.org/abs/2601.11580).",
        "![01_launch.png](figures/01_launch.png) https://example.org/x/42",
        "```", "make run   # 8 GPUs", "```",
        "sglang 0.5.9 on 2026-11-30, the 48-request cap, drafter ids [2, 30, 58], shape (1, 192).",
    ])
    assert texts(md) == ["1.67", "30.7", "1,643", "126", "2", "3", "1.36", "1.90",
                         "0.5.9", "2026-11-30", "48", "2", "30", "58", "1", "192"]
    assert [t.line for t in numeric_tokens(md)][-1] == 8


def test_token_canonical_form_and_decimals():
    assert Token("1,643", 1).canonical == "1643" and Token("1,643", 1).decimals == 0
    assert Token("-30.70", 1).canonical == "30.70" and Token("-30.70", 1).decimals == 2
    assert Token("0.5.9", 1).decimals == 0


@dataclass
class _Point:
    batch: int
    rate: float


class _Sidecar(BaseModel):
    label: str
    values: list[float]


def test_evidence_matches_formatted_values_strings_and_counts():
    ev = Evidence.of({"ratio": 1.6705, "rate": 1643.07, "exact": 48, "small": 3.6},
                     _Sidecar(label="sglang 0.5.9, context 512 tokens", values=[2.0, 3.0]),
                     [_Point(1, 10.0), _Point(8, 20.0)],
                     {"sites": [{"role": "draft", "access": "call"}, {"role": "draft", "access": "read"},
                                {"role": "target", "access": "call"}]})
    held = lambda text: ev.holds(Token(text, 1))  # noqa: E731
    assert held("1.67") and held("1.671") and held("1,643") and held("48") and held("3.6")
    assert held("0.5.9") and held("512")  # tokens of an evidence string
    assert held("2") and held("3") and held("8")  # integral values
    assert not held("1.70") and not held("1,644") and not held("7,777") and not held("0.5.10")
    assert not held("4")  # 3.6 is not shown as 4: a rounded integer must come from a value of at least 100
    # counts: 3 sites, 2 on the draft, 1 target call (grouped by one or two keys)
    assert {1, 2, 3} <= ev.counts


def test_unsourced_numbers_name_the_typed_in_ones_and_spare_structure():
    ev = Evidence.of({"single": 63.6, "peak": 2370.0})
    md = "## 2. The crash (notebook 01)\nBaseline 63.6 tok/s, peak 2,370 tok/s; it costs about 3.5 plain steps.\n"
    bad = unsourced_numbers(md, ev, structural_numbers(["01_crash_repro"]))
    assert [(t.text, t.line) for t in bad] == [("3.5", 2)]
    assert structural_numbers(["01_crash_repro", "02_interface_trace"]) == {"01", "02"}


def test_blocks_split_paragraphs_items_and_tables_with_their_caption():
    md = "\n".join(["# Title", "", "Intro line one", "line two **[modelled]**:", "",
                    "| a | b |", "| --- | --- |", "| 1 | 2 |", "", "- item 3 **[measured]**", "  continued 4",
                    "- item 5"])
    kinds = [(b.kind, b.first_line) for b in blocks(md)]
    assert kinds == [("heading", 1), ("paragraph", 3), ("table", 6), ("item", 10), ("item", 12)]
    table = blocks(md)[2]
    assert "[modelled]" in table.caption


def test_untagged_blocks_accept_a_tag_in_the_block_the_header_each_row_or_the_caption():
    tagged_caption = "Rows **[measured]**:\n\n| x | y |\n| --- | --- |\n| 1 | 2 |\n"
    tagged_header = "Rows:\n\n| x **[traced]** | y |\n| --- | --- |\n| 1 | 2 |\n"
    tagged_rows = "Rows:\n\n| x | y |\n| --- | --- |\n| 1 **[reported]** | 2 |\n| 3 **[reported]** | 4 |\n"
    half_rows = "Rows:\n\n| x | y |\n| --- | --- |\n| 1 **[reported]** | 2 |\n| 3 | 4 |\n"
    assert untagged_blocks(tagged_caption) == []
    assert untagged_blocks(tagged_header) == []
    assert untagged_blocks(tagged_rows) == []
    assert [b.kind for b in untagged_blocks(half_rows)] == ["table"]
    assert [b.first_line for b in untagged_blocks("No number here.\n\nIt took 12.5 s.\n\nIt took 3 s **[measured]**.")] \
        == [3]
    assert untagged_blocks("## 3. Section\n\nSee notebook 02.", structural_numbers(["02_x"])) == []


def test_a_list_is_covered_by_the_tagged_paragraph_that_introduces_it_and_only_by_that():
    introduced = "Checks **[traced]**:\n\n- release 1: 25 of 26 pass\n  - refused 1\n- release 2: 28 of 30 pass\n"
    assert untagged_blocks(introduced) == []
    after_a_table = "Rows **[modelled]**:\n\n| x |\n| --- |\n| 1 |\n\n- then 12 more\n"
    assert [b.kind for b in untagged_blocks(after_a_table)] == ["item"]
    after_a_heading = "Intro **[traced]**.\n\n## Next\n- item 7\n"
    assert [b.kind for b in untagged_blocks(after_a_heading)] == ["item"]


def test_a_date_printed_from_a_records_iso_time_is_bound_to_it():
    """The layer experiment's record holds ``2026-12-05T16:16:18+00:00`` and its sentence prints the day: bound on
    any day the report is rendered, not only on the day of a run whose own dates happen to match."""
    evidence = Evidence.of({"date": "2026-12-05T16:16:18+00:00"})
    assert unsourced_numbers("measured on 2026-12-05 here", evidence, set()) == []
    assert [t.text for t in unsourced_numbers("measured on 2026-12-06", evidence, set())] == ["2026-12-06"]
