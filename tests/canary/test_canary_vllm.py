"""The release canary on vLLM. Offline, from the vLLM audits the package ships: Kimi-K2.5 fails on v0.17.1 (the
allow-list refuses its text model type before the missing interface is reached) and passes on v0.18.0 (PR #36361);
v0.18.0 regresses the Qwen3.5 wrappers (the protocol's default setter finds no EagleModelMixin, the AssertionError
vllm-ascend PR #7867 reports); v0.34.0 stops reading a drafter's ids under eagle_config. Bad input is one line, exit
2, nothing written. From the package index (network): the rows traced from the wheels are the record's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3lab.canary import vllm_engine
from eagle3lab.canary.rows import ABSENT, FAIL, PASS, UNDECIDED
from eagle3lab.canary.run import run_canary
from eagle3lab.errors import SourceError
from test_canary import KIMI, canary, one_line_and_nothing_written

QWEN35 = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")


def rows(path: Path) -> tuple[dict, dict[str, dict]]:
    got = json.loads(path.read_text())
    return got, {row["architecture"]: row for row in got["rows"]}


@pytest.fixture(scope="module")
def kimi_releases(tmp_path_factory) -> tuple:
    out = tmp_path_factory.mktemp("canary")
    done = canary("--engine", "vllm", "--from-record", "--release", "0.17.1", "--release", "vllm==0.18.0",
                  "--out", str(out))
    return done, out


def test_from_the_release_record_kimi_k25_fails_on_vllm_0_17_1(kimi_releases):
    done, out = kimi_releases
    got, by_arch = rows(out / "vllm-0.17.1.json")
    kimi = by_arch[KIMI]
    assert got["previous"] == "0.17.0" and got["source"].startswith("the release record (vllm_audit.json.gz")
    assert kimi["verdict"] == FAIL and kimi["has_interface"] is False and kimi["previous_verdict"] == FAIL
    assert kimi["first_raise"] == "speculative.py:778 (ValueError)"  # the allow-list, before the interface check
    assert "set_aux_hidden_state_layers" in kimi["missing"] and kimi["interface"].startswith("lacking: ")
    assert kimi["layer_ids"] == "ids as given (top level)" and kimi["kind"] == "wrapper of DeepseekV2ForCausalLM"
    assert got["regressions"] == []  # it failed on 0.17.0 too: known, not a regression
    assert (f"| Kimi-K2.5 | `{KIMI}` | {kimi['interface']} | ids as given (top level) | FAIL at speculative.py:778 "
            "(ValueError) | FAIL |") in (out / "vllm-0.17.1.md").read_text()


def test_from_the_release_record_kimi_k25_passes_on_vllm_0_18_0_and_the_qwen3_5_wrappers_regress(kimi_releases):
    done, out = kimi_releases
    got, by_arch = rows(out / "vllm-0.18.0.json")
    kimi = by_arch[KIMI]
    assert got["previous"] == "0.17.1" and kimi["verdict"] == PASS and kimi["interface"] == "present (direct)"
    assert f"fixed: vllm 0.18.0 Kimi-K2.5 ({KIMI}): pass (was FAIL in 0.17.1)" in got["changes"]
    assert f"| Kimi-K2.5 | `{KIMI}` | present (direct) | ids as given (top level) | pass | FAIL |" in (
        out / "vllm-0.18.0.md").read_text()
    # the one thing that got worse: the protocol's default setter reaches a model that is no EagleModelMixin
    assert got["regressions"] == [f"regressed: vllm 0.18.0 {arch}: FAIL, raises at interfaces.py:1340 "
                                  f"(AssertionError) (was undecided in 0.17.1)" for arch in QWEN35]
    assert [by_arch[arch]["interface"] for arch in QWEN35] == ["lacking (protocol default)"] * 2
    assert done.returncode == 1 and [line for line in done.stderr.splitlines()
                                     if line.startswith("regressed:")] == got["regressions"]
    summary = (out / "canary.md").read_text()
    assert (out / "vllm-0.17.1.md").read_text() in summary and (out / "vllm-0.18.0.md").read_text() in summary


def test_the_allow_list_leaves_a_class_whose_model_type_the_canary_cannot_name_undecided(kimi_releases):
    """Until v0.21 the gate tests the text model type, which a class name does not carry: a wrapper that implements
    the interface is undecided, as ``preflight-model --engine vllm --arch`` answers without a config."""
    _, by_arch = rows(kimi_releases[1] / "vllm-0.17.1.json")
    llava = by_arch["LlavaForConditionalGeneration"]
    assert llava["verdict"] == UNDECIDED and llava["has_interface"] and not llava["watched"]


def test_vllm_0_34_0_reads_a_drafters_ids_only_at_the_top_level_one_line_for_every_class(tmp_path):
    done = canary("--engine", "vllm", "--from-record", "--release", "0.34.0", "--out", str(tmp_path))
    got, by_arch = rows(tmp_path / "vllm-0.34.0.json")
    assert done.returncode == 0 and got["ok"] and got["previous"] == "0.33.0", done.stderr
    [line] = [change for change in got["changes"] if change.startswith("layer ids changed:")]
    in_both = [a for a, row in by_arch.items() if ABSENT not in (row["verdict"], row["previous_verdict"] or ABSENT)]
    assert line.startswith(f"layer ids changed: vllm 0.34.0 {len(in_both)} classes (Kimi-K2.5 ({KIMI}), ")
    assert line.endswith(": ids as given (top level) (was ids as given (eagle3_utils.py: top level; "
                         "gpu_model_runner.py: top level and eagle_config) in 0.33.0); check the drafter's training "
                         "convention")
    # the models moved to vllm/models/ are read (they were 'not defined' before the registry reader knew them)
    assert all(by_arch[arch]["verdict"] == PASS for arch in QWEN35)


@pytest.mark.parametrize(("readers", "expected"), [
    ([], "not read: no reader of the drafter's ids"),
    ([{"where": "v1/a.py:1", "top_level": False, "nested": False, "shift": 0}], "not read: no reader of the drafter's ids"),
    ([{"where": "v1/a.py:1", "top_level": True, "nested": True, "shift": 0}], "ids as given (top level and eagle_config)"),
    ([{"where": "v1/a.py:1", "top_level": True, "nested": False, "shift": 1},
      {"where": "v1/b.py:9", "top_level": False, "nested": True, "shift": 0}],
     "ids as given / every id + 1 (a.py: top level; b.py: eagle_config)"),
])
def test_the_layer_id_column_names_each_readers_arithmetic_and_where_it_looks(readers, expected):
    assert vllm_engine.layer_id_convention({"readers": readers}) == expected


def test_a_release_the_vllm_record_lacks_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    done = canary("--engine", "vllm", "--from-record", "--release", "0.9.2", "--out", str(out))
    one_line_and_nothing_written(done, out, "vllm 0.9.2 is not in the release record (it holds 0.10.0 to",
                                 "drop --from-record")


def test_a_stale_vllm_record_is_one_line_naming_the_command_that_rewrites_it(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_engine.record, "recorded", lambda version: None)
    with pytest.raises(SourceError, match=r"holds no audit of vllm 0\.18\.0 for this trace code \(stale\); rerun "
                                          r"`python -m eagle3lab audit --engine vllm --record`"):
        run_canary(["vllm"], ["0.18.0"], from_record=True, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_no_network_is_one_line_for_vllm_too(tmp_path):
    """The vLLM index is read by ``requests`` (not pip): a proxy nobody listens on makes it unreachable."""
    out = tmp_path / "out"
    env = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "", "no_proxy": "",
           "EAGLE3LAB_CACHE": str(tmp_path / "cache")}
    done = canary("--engine", "vllm", "--out", str(out), env=env)
    one_line_and_nothing_written(done, out, "cannot reach the package index")


def test_a_malformed_cached_vllm_source_is_one_line_and_writes_nothing(tmp_path):
    cache = tmp_path / "cache"
    (cache / "engine-sources").mkdir(parents=True)
    (cache / "engine-sources" / "vllm-0.18.0-py.zip").write_bytes(b"not a zip at all")
    out = tmp_path / "out"
    done = canary("--engine", "vllm", "--release", "0.18.0", "--against", "0.17.1", "--out", str(out),
                  env={"EAGLE3LAB_CACHE": str(cache)})
    one_line_and_nothing_written(done, out, "vllm-0.18.0-py.zip is corrupt", "delete it and rerun")


@pytest.mark.network
def test_from_the_package_index_the_rows_traced_from_the_wheels_are_the_records(tmp_path):
    """The canary's default path: each release's Python files read from its wheel by range requests and audited now;
    the rows are the ones the shipped record gives (the same code), only the source differs."""
    traced, recorded = tmp_path / "traced", tmp_path / "recorded"
    assert canary("--engine", "vllm", "--release", "0.18.0", "--against", "0.17.1", "--out", str(traced)).returncode == 1
    canary("--engine", "vllm", "--from-record", "--release", "0.18.0", "--against", "0.17.1", "--out", str(recorded))
    wheel, record = rows(traced / "vllm-0.18.0.json")[0], rows(recorded / "vllm-0.18.0.json")[0]
    assert wheel["source"].startswith("wheel vllm-0.18.0-") and wheel["source"].endswith(".whl")
    assert wheel["rows"] == record["rows"] and wheel["regressions"] == record["regressions"]
