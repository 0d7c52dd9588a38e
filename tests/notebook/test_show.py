"""Tables in the executed notebooks: a missing value reads as a dash, never NaN or None."""

from __future__ import annotations

from eagle3lab.notebook import show


def test_missing_values_show_as_a_dash_and_present_ones_unchanged():
    frame = show.table([{"arm": "baseline", "out_tok_s": 21.4, "accept_len": None},
                        {"arm": "eagle3", "out_tok_s": None, "accept_len": 2.216}])
    html = frame.to_html()
    assert "NaN" not in html and "None" not in html
    assert frame.loc[0, "accept_len"] == "--" and frame.loc[1, "out_tok_s"] == "--"
    assert frame.loc[0, "out_tok_s"] == 21.4 and frame.loc[1, "accept_len"] == 2.216
    assert list(show.table({"a": 1}).index) == ["a"]
