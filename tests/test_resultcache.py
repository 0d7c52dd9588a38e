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
