"""The keyed result cache: a warm run reuses a passing measurement and says when it was taken; failures and
damaged entries are measured again."""

from __future__ import annotations

import pytest

from eagle3lab import resultcache


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counting(result):
    calls = []

    def measure():
        calls.append(1)
        return dict(result)

    return measure, calls


def test_a_passing_result_is_measured_once_and_then_shown_as_cached_with_its_date():
    measure, calls = counting({"verified": True, "n": 3})
    first = resultcache.cached_result("ns", "k", measure)
    again = resultcache.cached_result("ns", "k", measure)
    assert len(calls) == 1
    assert first["cached"] is False and again["cached"] is True
    assert again["n"] == 3 and again["measured_at"] == first["measured_at"]
    assert resultcache.measured_label(again) == f"{first['measured_at']['date']} (cached)"
    assert resultcache.measured_label({"n": 1}) == "now"


def test_a_result_the_keep_rule_refuses_is_measured_again():
    measure, calls = counting({"verified": False})
    for _ in range(2):
        out = resultcache.cached_result("ns", "k", measure, keep=lambda r: r["verified"])
        assert out["cached"] is False
    assert len(calls) == 2


def test_a_damaged_entry_is_measured_again(own_cache):
    measure, calls = counting({"ok": True})
    resultcache.cached_result("ns", "k", measure)
    (own_cache / "ns" / "k.json").write_text('{"format": 1, "resu')
    assert resultcache.cached_result("ns", "k", measure)["cached"] is False
    assert len(calls) == 2


def test_the_key_follows_every_part_and_the_code_hash_follows_the_code(tmp_path, monkeypatch):
    assert resultcache.key_of("a", [1, 2]) == resultcache.key_of("a", [1, 2])
    assert resultcache.key_of("a", [1, 2]) != resultcache.key_of("a", [2, 1])
    pkg = tmp_path / "pkg"
    (pkg / "fix").mkdir(parents=True)
    (pkg / "fix" / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(resultcache, "PACKAGE_ROOT", pkg)
    before = resultcache.code_hash(["fix"])
    (pkg / "fix" / "m.py").write_text("x = 2\n")
    assert resultcache.code_hash(["fix"]) != before
    assert "sglang=" in resultcache.environment_key()


def test_code_hash_takes_single_files_and_the_fix_checks_ignore_drafter_training():
    from eagle3lab.notebook.fixes import CAPTURE_MODEL_CODE

    one = resultcache.code_hash(["runtime/tinymodel/configs.py"])
    assert one == resultcache.code_hash(["runtime/tinymodel/configs.py"]) != resultcache.code_hash(["runtime/tinymodel"])
    assert all((resultcache.PACKAGE_ROOT / name).is_file() for name in CAPTURE_MODEL_CODE)
    assert not any("drafter" in name for name in CAPTURE_MODEL_CODE)  # a new recipe keeps the measured fixes


def record_with(tmp_path, entries):
    path = tmp_path / "record.json"
    resultcache.write_record(path, entries, {"namespace": "ns"})
    return resultcache.load_record(path)


RECORDED = {"result": {"verified": True, "n": 7}, "measured_at": {"date": "2026-11-30T10:00:00+00:00",
                                                                  "machine": "x86_64, Linux"}}


def test_on_an_empty_cache_the_release_record_is_used_and_labelled_as_the_record(tmp_path):
    record = record_with(tmp_path, {"k": RECORDED})
    measure, calls = counting({"verified": True, "n": 1})
    out = resultcache.cached_result("ns", "k", measure, record=record)
    assert calls == [] and out["n"] == 7 and out["from_record"] is True
    assert resultcache.measured_label(out) == "2026-11-30T10:00:00+00:00 (release record)"
    assert "now" not in resultcache.measured_label(out)


def test_the_users_cache_wins_over_the_release_record(tmp_path):
    measure, calls = counting({"verified": True, "n": 1})
    mine = resultcache.cached_result("ns", "k", measure)  # measured here, stored in the user's cache
    out = resultcache.cached_result("ns", "k", measure, record=record_with(tmp_path, {"k": RECORDED}))
    assert len(calls) == 1 and out["n"] == 1 and not out.get("from_record")
    assert resultcache.measured_label(out) == f"{mine['measured_at']['date']} (cached)"


def test_a_record_entry_under_another_key_is_ignored_and_the_check_measured(tmp_path):
    measure, calls = counting({"verified": True, "n": 1})
    out = resultcache.cached_result("ns", "k", measure, record=record_with(tmp_path, {"other": RECORDED}))
    assert len(calls) == 1 and out["n"] == 1 and out["cached"] is False and not out.get("from_record")
    assert resultcache.measured_label(out).endswith("(now)")


@pytest.mark.parametrize("damage", ["truncated", "other format", "entry without its date", "not an object"])
def test_a_damaged_record_is_ignored_and_the_check_measured(tmp_path, damage):
    path = tmp_path / "record.json"
    resultcache.write_record(path, {"k": RECORDED}, {"namespace": "ns"})
    text = path.read_text()
    path.write_text({"truncated": text[: len(text) // 2],
                     "other format": text.replace(f'"format": {resultcache.FORMAT}', '"format": 99'),
                     "entry without its date": text.replace('"date"', '"when"'),
                     "not an object": "[1, 2]"}[damage])
    record = resultcache.load_record(path)
    assert record == {}
    measure, calls = counting({"verified": True, "n": 1})
    assert resultcache.cached_result("ns", "k", measure, record=record)["n"] == 1 and len(calls) == 1
    assert resultcache.load_record(tmp_path / "absent.json") == {}


def test_fresh_measures_again_whatever_the_cache_and_the_record_hold(tmp_path):
    measure, calls = counting({"verified": True, "n": 1})
    resultcache.cached_result("ns", "k", measure)
    out = resultcache.cached_result("ns", "k", measure, record=record_with(tmp_path, {"k": RECORDED}), fresh=True)
    assert len(calls) == 2 and out["cached"] is False
