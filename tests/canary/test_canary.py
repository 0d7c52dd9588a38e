"""The release canary offline: from the release record the package ships it fails on sglang 0.5.9 (Kimi-K2.5 arrives
without the EAGLE-3 interface) and passes on 0.5.10; what counts as a regression; bad input is one line, exit 2, and
no file written. The same runs against the package index are in test_canary_index.py (network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eagle3lab.canary import engines, rows as canary_rows
from eagle3lab.canary.rows import ABSENT, FAIL, PASS, UNDECIDED, ReleaseRows, Row, compare, markdown
from eagle3lab.errors import SourceError
from eagle3lab.paths import REPO_ROOT
from timing import patience

KIMI = "KimiK25ForConditionalGeneration"


def canary(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m eagle3lab canary ...``, as ``make canary`` runs it."""
    return subprocess.run([sys.executable, "-m", "eagle3lab", "canary", *args], capture_output=True, text=True,
                          timeout=patience(300), cwd=REPO_ROOT, env={**os.environ, **(env or {})})


def offline_pip(tmp_path: Path) -> dict[str, str]:
    """pip pointed at an index nobody listens on, with no config: the package index is unreachable."""
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
            "PIP_EXTRA_INDEX_URL": "", "EAGLE3LAB_CACHE": str(tmp_path / "cache")}


def test_from_the_release_record_0_5_9_fails_on_kimi_k25(tmp_path):
    done = canary("--engine", "sglang", "--from-record", "--release", "0.5.9", "--out", str(tmp_path))
    regressions = [line for line in done.stderr.splitlines() if line.startswith("regressed:")]
    assert done.returncode == 1, done.stderr
    assert len(regressions) == 1 and "Kimi-K2.5 (KimiK25ForConditionalGeneration): FAIL" in regressions[0]
    assert "set_eagle3_layers_to_capture" in regressions[0] and "was absent in 0.5.8.post1" in regressions[0]
    got = json.loads((tmp_path / "sglang-0.5.9.json").read_text())
    kimi = {row["architecture"]: row for row in got["rows"]}[KIMI]
    assert kimi["verdict"] == FAIL and kimi["interface"].startswith("lacking") and not got["ok"]
    assert got["previous"] == "0.5.8.post1" and got["regressions"] == regressions
    table = (tmp_path / "sglang-0.5.9.md").read_text()
    assert f"| Kimi-K2.5 | `{KIMI}` | lacking: get_embed_and_head, set_eagle3_layers_to_capture |" in table
    assert table in (tmp_path / "canary.md").read_text() and table in done.stdout


def test_from_the_release_record_0_5_10_passes_and_says_kimi_k25_was_fixed(tmp_path):
    done = canary("--engine", "sglang", "--from-record", "--release", "0.5.10", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "sglang-0.5.10.json").read_text())
    kimi = {row["architecture"]: row for row in got["rows"]}[KIMI]
    assert kimi["verdict"] == PASS and kimi["previous_verdict"] == FAIL and got["ok"] and got["regressions"] == []
    assert any(line.startswith("fixed: sglang 0.5.10 Kimi-K2.5") for line in got["changes"])


def test_from_the_release_record_0_5_13_reports_pr_25454s_layer_id_rule_without_failing(tmp_path):
    """sglang 0.5.13 changed how Kimi-K2.5's family turns a drafter's ids into captured layers: a change a team must
    see (whether it fixes or breaks their drafter depends on its training convention), not a regression."""
    done = canary("--engine", "sglang", "--from-record", "--release", "0.5.13", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "sglang-0.5.13.json").read_text())
    kimi = {row["architecture"]: row for row in got["rows"]}[KIMI]
    assert kimi["layer_ids"].startswith("+1 only when the first id is 1") and got["previous"] == "0.5.12.post1"
    assert [line for line in got["changes"] if line.startswith("layer ids changed:")] == [
        f"layer ids changed: sglang 0.5.13 Kimi-K2.5 ({KIMI}): {kimi['layer_ids']} (was every id + 1 in 0.5.12.post1); "
        "check the drafter's training convention"]


def rows_of(release: str, *rows: Row) -> ReleaseRows:
    return ReleaseRows("sglang", release, "test rows", list(rows))


@pytest.mark.parametrize(("before", "now", "worse"), [
    (ABSENT, FAIL, True),  # a wrapper that arrives without the interface (Kimi-K2.5 in 0.5.9)
    (PASS, FAIL, True), (UNDECIDED, FAIL, True), (PASS, UNDECIDED, True), (PASS, ABSENT, True),
    (FAIL, FAIL, False),  # still broken: known already, not a regression
    (FAIL, PASS, False), (ABSENT, PASS, False), (ABSENT, UNDECIDED, False), (FAIL, ABSENT, False),
])
def test_a_row_regresses_only_when_its_verdict_gets_worse(before, now, worse):
    old = rows_of("1.0", Row("W", "W", before))
    new = rows_of("1.1", Row("W", "W", now, missing=["m"] if now == FAIL else []))
    got = compare(new, old)
    assert bool(got.regressions) is worse and canary_rows.regressed(before, now) is worse
    assert len(got.regressions) == int(worse)


def test_a_class_gone_from_the_release_is_compared_too_and_layer_id_changes_are_reported_not_failed():
    old = rows_of("1.0", Row("Gone", "Gone", PASS), Row("K", "Kimi", PASS, layer_ids="ids + 1", watched=True))
    new = rows_of("1.1", Row("K", "Kimi", PASS, layer_ids="ids as given", watched=True))
    got = compare(new, old)
    assert got.regressions == ["regressed: sglang 1.1 Gone: absent, absent (was pass in 1.0)"]
    assert got.changes == ["layer ids changed: sglang 1.1 Kimi (K): ids as given (was ids + 1 in 1.0); check the "
                           "drafter's training convention"]
    table = markdown(got)
    assert "| Kimi | `K` | present | ids as given | pass | pass |" in table and "regressed" in table


def one_line_and_nothing_written(done: subprocess.CompletedProcess, out: Path, *words: str) -> None:
    line = done.stderr.strip()
    assert done.returncode == 2, done.stderr
    assert "\n" not in line and line.startswith("eagle3lab: ") and "Traceback" not in done.stderr
    assert all(word in line for word in words), line
    assert not out.exists() or [p.name for p in out.iterdir()] == ["canary.md"]


def test_a_release_the_record_lacks_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    done = canary("--engine", "sglang", "--from-record", "--release", "0.4.0", "--out", str(out))
    one_line_and_nothing_written(done, out, "sglang 0.4.0 is not in the release record", "drop --from-record")


def test_not_a_version_and_an_engine_it_cannot_read_are_one_line(tmp_path):
    out = tmp_path / "out"
    one_line_and_nothing_written(canary("--from-record", "--release", "sglang==0.5.x", "--out", str(out)), out,
                                 "'0.5.x' is not a version")
    with pytest.raises(SourceError, match="trtllm: unknown engine; the canary reads sglang, vllm"):
        engines.engine("trtllm")


def test_no_network_is_one_line_and_leaves_the_last_summary_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "canary.md").write_text("the last run's summary\n")
    done = canary("--engine", "sglang", "--out", str(out), env=offline_pip(tmp_path))
    one_line_and_nothing_written(done, out, "cannot list sglang releases", "unreachable")
    assert (out / "canary.md").read_text() == "the last run's summary\n"


def test_a_malformed_wheel_is_one_line_and_writes_nothing(tmp_path):
    env = offline_pip(tmp_path)
    wheels = Path(env["EAGLE3LAB_CACHE"]) / "wheels"
    wheels.mkdir(parents=True)
    (wheels / "sglang-0.5.10-py3-none-any.whl").write_bytes(b"not a zip at all")
    with zipfile.ZipFile(wheels / "sglang-0.5.9-py3-none-any.whl", "w") as zf:
        zf.writestr("other/__init__.py", "")  # a zip, but no sglang package inside
    out = tmp_path / "out"
    done = canary("--engine", "sglang", "--release", "0.5.10", "--against", "0.5.9", "--out", str(out), env=env)
    one_line_and_nothing_written(done, out, "sglang-0.5.10-py3-none-any.whl is corrupt", "delete it and rerun")
    done = canary("--engine", "sglang", "--release", "0.5.9", "--against", "0.5.10", "--out", str(out), env=env)
    one_line_and_nothing_written(done, out, "holds no 'sglang/' package")


def test_the_canary_imports_no_engine_and_no_torch():
    """The canary job installs eagle3lab without its heavy dependencies (``make canary``'s own venv): reading a
    release's source must never import the engine, torch or transformers."""
    code = ("import sys, eagle3lab.commands.canary, eagle3lab.canary.run; "
            "print(sorted(m for m in ('torch', 'sglang', 'transformers', 'vllm', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=patience(60))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_without_the_sources_the_audit_reads_the_canary_says_so_instead_of_failing_every_class(monkeypatch):
    from eagle3lab.canary import sglang_engine

    monkeypatch.setattr(sglang_engine, "torch_module_members", frozenset)
    with pytest.raises(SourceError, match="the source of torch is not installed here") as err:
        sglang_engine.open_release("0.5.10")
    assert err.value.problem == "sources_not_installed"
    monkeypatch.setattr(sglang_engine, "SOURCES_READ", ("torch", "transformers", "no_such_package_here"))
    with pytest.raises(SourceError, match="the source of no_such_package_here is not installed"):
        sglang_engine.open_release("0.5.10")
