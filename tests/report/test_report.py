"""The main job end to end (notebooks 01 -> 02 -> 03 through papermill on the cpu profile) and its report."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from eagle3lab import sidecars
from eagle3lab.bench.sweep import BenchReport, point_rows
from eagle3lab.sidecars import CrashReproSidecar

pytestmark = [pytest.mark.notebook, pytest.mark.server]


def sidecar(root: Path, name: str) -> dict:
    return json.loads((root / "artifacts" / name).read_text())


def report_documents(root: Path) -> str:
    """REPORT.md and its appendices (docs/report/*.md), where the full tables and per-point sentences now live."""
    return "\n".join(p.read_text() for p in [root / "REPORT.md", *sorted((root / "docs" / "report").glob("*.md"))])


def test_report_command_writes_notebooks_html_and_report(full_report):
    outputs, root = full_report
    assert [p.name for p in outputs.executed] == [
        "01_crash_repro.cpu.ipynb", "02_interface_trace.cpu.ipynb", "03_patch_and_bench.cpu.ipynb"]
    assert len(outputs.html) == 6 and any(p.name.endswith(".nocode.html") for p in outputs.html)
    text = outputs.report_md.read_text()
    assert "has not run" not in text and "No benchmark" not in text
    assert sidecars.read(CrashReproSidecar, "cpu").crash.signature in text


def test_every_number_in_report_md_is_one_of_its_sources_with_a_provenance_tag(full_report):
    """The report and its appendices as written, against the sidecars and the model evidence they were rendered
    from; the summary and REPORT.md within their word limits."""
    from eagle3lab.report import build, model_evidence, provenance, summary
    from eagle3lab.report.build import gather_sources, render_documents

    outputs, root = full_report
    text = outputs.report_md.read_text()
    sources = gather_sources("cpu", outputs.figures, model=model_evidence.load("cpu"))
    evidence_tree = json.loads((root / "reports-evidence" / "cpu.json").read_text())["tree"]
    sources.rendered_by = evidence_tree["rendered_by"]  # the checkout's commit when it was rendered
    documents, _ = render_documents(sources)
    assert documents[build.REPORT_MD] == text  # these are exactly the sources of the file
    for name, doc in documents.items():
        assert (root / name).read_text() == doc, name  # each appendix written beside it
    from eagle3lab.report.evidence_file import check_report, evidence_path

    # the evidence written beside it binds every bound sentence to its keys, with every document's hash
    assert check_report(outputs.report_md, evidence_path(outputs.report_md, "cpu")) == []
    evidence, structural = sources.evidence(), sources.structural()
    for name, doc in documents.items():
        assert [(t.text, t.line) for t in provenance.unsourced_numbers(doc, evidence, structural)] == [], name
        assert [(b.first_line, b.text[:80]) for b in provenance.untagged_blocks(doc, structural)] == [], name
    bullets = [line for line in text.split("## Summary\n", 1)[1].split("\n## ", 1)[0].splitlines()
               if line.startswith("- ")]
    assert len(bullets) == summary.BULLETS and sum(summary.words(b[2:]) for b in bullets) <= summary.MAX_WORDS
    assert summary.words(text) <= build.MAX_WORDS
    rtx = sources.model.incident["predicted"]["rtx_pro_6000_x8"]
    assert f"only above acceptance {rtx['break_even_at_peak']:.2f}" in documents["docs/report/cost-model.md"]
    if sources.model.run_check:  # this run's plain decode rates, measured and predicted, are in the validation
        for row in sources.model.run_check["rows"]:
            assert f"| {row['concurrency']} | {row['measured_baseline_tok_s']:,.1f} | " in \
                documents["docs/report/validation.md"]


def test_report_images_all_exist(full_report):
    outputs, root = full_report
    links = re.findall(r"!\[[^\]]*\]\(figures/([^)]+)\)", outputs.report_md.read_text())
    assert links, "the report shows figures"
    for appendix in (root / "docs" / "report").glob("*.md"):
        links += re.findall(r"!\[[^\]]*\]\(\.\./\.\./figures/([^)]+)\)", appendix.read_text())
    missing = [name for name in links if not (root / "figures" / name).is_file()]
    assert missing == []


def test_notebook_01_reproduced_the_crash_and_the_control_answered(full_report):
    _, root = full_report
    data = sidecar(root, "01_crash_repro.cpu.json")
    report = data["crash"]["report"]
    assert report["missing_attribute"] == data["parameters"]["expected_attribute"]
    assert report["object_class"] == "KimiK25ForConditionalGeneration"
    assert data["crash"]["status"] == "died"
    assert data["control"]["completion_tokens"] == data["parameters"]["control_max_new_tokens"]
    assert data["environment"]["sglang"] == "0.5.9" and data["environment"]["git revision"]


def test_notebook_03_chain_capture_and_arms(full_report):
    _, root = full_report
    data = sidecar(root, "03_patch_and_bench.cpu.json")
    outcomes = [(row["step"], row["category"], row["outcome"]) for row in data["chain"]]
    assert outcomes == [("unpatched", "interface_gap", "died"), ("one-method patch", "interface_gap", "died"),
                        ("full delegation patch", None, "ready")]
    probe = data["chain"][-1]["probe"]
    assert probe["ok"] and probe["speculated"] and probe["spec_verify_ct"] > 0
    assert data["capture"]["None"]["outcome"] == "hook_missing"
    patched = data["capture"]["kimi_k25-eagle3-delegation"]
    assert patched["ok"] and all(f["shape"] == f["expected_shape"] for f in patched["forwards"])
    sweep = data["profile_values"]["bench_concurrency"]
    for arm in ("baseline", "eagle3"):  # both arms measured at every sweep point
        rows = [row for row in data["arms"] if row["arm"] == arm]
        assert [row["concurrency"] for row in rows] == sweep and all(row["status"] == "ok" for row in rows)
        assert all(row["out_tok_s"] and row["out_tok_s"] > 0 for row in rows)
    eagle3 = [row for row in data["arms"] if row["arm"] == "eagle3"]
    assert all(row["accept_len"] >= 2.0 for row in eagle3)  # the trained drafter (sglang's per-request figure)
    for row in data["offline_vs_served"]:  # served as the drafter's offline simulation predicted
        assert row["served_mean"] == pytest.approx(row["offline_mean"], abs=0.1)
    assert data["lossless"]["lossless"] is True
    control = [r for r in data["acceptance"] if r["kind"] == "eagle3_control"]
    assert control and all(r["accept_length"] < 1.2 for r in control)  # untrained: almost nothing accepted
    mismatch = data["layer_mismatch"]
    assert mismatch and mismatch["shifted_layer_ids"] == [i - 1 for i in mismatch["aligned_layer_ids"]]
    assert len(mismatch["aligned_accept_length"]) == len(mismatch["shifted_accept_length"]) >= 1
    assert data["sampling"]["policy"] == "refused" and data["verify_dispatch_gap"]["silent_noop"] is True
    bench = BenchReport.load(Path(data["bench_report"]))
    assert data["arms"] == json.loads(json.dumps(point_rows(bench.arms)))  # the sidecar shows the bench's own numbers
    cross, profile = data["cross_check"], data["profile_values"]
    # each client ran the profile's rounds, in mirrored order, and was pooled over them
    assert cross["rounds"] == profile["bench_crosscheck_rounds"] >= 2 and cross["order"] == ["ours", "theirs"][:cross["rounds"]]
    assert len(cross["ours_rounds"]) == len(cross["theirs_rounds"]) == len(cross["round_ratios"]) == cross["rounds"]
    assert min(cross["ours_rounds"]) <= cross["ours_output_tok_per_s"] <= max(cross["ours_rounds"])
    assert min(cross["theirs_rounds"]) <= cross["theirs_output_tok_per_s"] <= max(cross["theirs_rounds"])
    assert cross["theirs_rounds"][-1] == cross["theirs"]["output_throughput"]
    assert cross["ratio"] == pytest.approx(cross["ours_output_tok_per_s"] / cross["theirs_output_tok_per_s"])
    assert cross["num_prompts"] == profile["bench_crosscheck_prompts"]
    # bench_serving ran the same workload to the end (the ratio itself is a timing on a shared box: not asserted)
    assert cross["theirs"]["completed"] == cross["num_prompts"]
    assert cross["theirs"]["total_input_tokens"] == cross["num_prompts"] * profile["bench_input_len"]
    assert cross["theirs"]["total_output_tokens"] == cross["num_prompts"] * profile["bench_output_len"]


def test_each_points_window_is_split_by_the_servers_own_timers(full_report):
    """Decode batches, prefill batches and the rest of every headline point's measured window (bench.server_time),
    from the real servers' cycle-timer records, and the report's sentence on where the cycle miss sits; the control
    arm's window is split too (its prefill is the EAGLE-3 side of the model's request turnover)."""
    _, root = full_report
    data = sidecar(root, "03_patch_and_bench.cpu.json")
    table = data["cycle_components"]
    splits, sweep = table["by_point"], data["profile_values"]["bench_concurrency"]
    batches = {}
    for speculative, arm in ((False, table["baseline_arm"]), (True, table["eagle_arm"])):
        mine = [s for s in splits if s["arm"] == arm]
        assert [s["concurrency"] for s in mine] == sweep and all(s["speculative"] is speculative for s in mine)
        for s in mine:
            assert s["decode_batches"] > 0 and s["prefill_batches"] >= 1  # the measured requests' own prompts
            assert 1 <= s["mean_batch_size"] <= s["concurrency"] and 0 < s["full_batch_share"] <= 1
            assert s["decode_ms"] > 0 and s["prefill_ms"] > 0 and s["decode_ms"] + s["prefill_ms"] <= s["wall_ms"]
            assert s["decode_ms"] + s["prefill_ms"] + s["other_ms"] == pytest.approx(s["wall_ms"], abs=0.01)
            batches[(speculative, s["concurrency"])] = s["decode_batches"]
    for concurrency in sweep:  # the same tokens in fewer decode batches: each cycle accepted drafts
        assert batches[(True, concurrency)] < batches[(False, concurrency)]
    assert "Where each cycle's time went in the EAGLE-3 server's measured windows" in report_documents(root)
    control = [s for s in splits if s["arm"] == "eagle3-untrained"]
    planned = next(arm["concurrency"] for arm in data["spec_arms"] if arm["name"] == "eagle3-untrained")
    assert [s["concurrency"] for s in control] == sorted(planned) and 1 in planned and len(planned) >= 2
    assert control[0]["speculative"] and control[0]["prefill_batches"]
    # the control arm at two batch sizes: the model's host work per running request, from it alone
    host = json.loads((root / "artifacts" / "report_model_evidence.cpu.json").read_text())["run_check"][
        "per_request_host"]
    assert host is not None and "arm 'eagle3-untrained'" in host["source"] and host["target_pass_ms"] >= 0
    turnover = json.loads((root / "artifacts" / "report_model_evidence.cpu.json").read_text())["run_check"]["turnover"]
    assert "arm 'eagle3-untrained'" in turnover["sources"]["eagle3"] and turnover["eagle3_prefill_ms"] > 0


def test_the_headline_pair_was_relaunched_and_each_pair_measured_on_its_own_servers(full_report):
    _, root = full_report
    data = sidecar(root, "03_patch_and_bench.cpu.json")
    spread = data["launch_spread"]
    repeats, rounds = (data["profile_values"][key] for key in ("bench_launch_repeats", "bench_interleave_rounds"))
    assert repeats >= 1 and rounds >= 2 and spread["skipped"] == []
    assert [s["launch"] for s in spread["launches"]] == list(range(1, repeats + 2))
    # the relaunched pair: both servers up, the concurrency-1 prompts in mirrored blocks, every round measured
    mirrored = " ".join(("BE", "EB")[r % 2] for r in range(rounds))
    assert spread["order"].split(" | ")[:2] == ["eagle3, baseline", f"both up, {rounds} rounds {mirrored}"]
    assert [s["method"] for s in spread["launches"]] == ["sequential"] + ["interleaved"] * repeats
    again_rounds, again_accepts = (spread["launches"][1][key] for key in ("round_speedups", "round_accept_lengths"))
    assert len(again_rounds) == len(again_accepts) == rounds and min(again_rounds) > 0 and min(again_accepts) >= 1
    bench_dir = root / "artifacts" / "03_bench.cpu"
    for number in range(1, rounds + 1):
        for arm in ("baseline", "eagle3"):
            block = json.loads((bench_dir / f"{arm}-launch2-c{spread['concurrency']}-round{number}.arm.json").read_text())
            assert block["points"][0]["concurrency"] == spread["concurrency"] and block["status"] == "measured"
    first, again = spread["launches"][0], spread["launches"][1]
    c1 = {row["arm"]: row["out_tok_s"] for row in data["arms"] if row["concurrency"] == spread["concurrency"]}
    assert round(first["baseline_tok_s"], 1) == c1["baseline"] and round(first["eagle3_tok_s"], 1) == c1["eagle3"]
    assert again["baseline_arm"] == "baseline-launch2-c1" and again["eagle3_arm"] == "eagle3-launch2-c1"
    for s in spread["launches"]:  # each pair's own launches, traced by the harness timers
        assert s["speedup"] == pytest.approx(s["eagle3_tok_s"] / s["baseline_tok_s"])
        assert s["accept_length"] >= 2.0 and s["plain_step_ms"] > 0 and s["cycle_ms"] > 0
    logs = root / "artifacts" / "logs"
    assert (logs / "03_baseline-launch2.cpu.log").is_file() and (logs / "03_eagle3-launch2.cpu.log").is_file()
    report = report_documents(root)
    assert "The same pair relaunched" in report
    assert ("Within the project's" in report) == spread["agrees"]


def test_the_interleaved_launch_measured_every_point_and_the_model_is_checked_against_it(full_report):
    _, root = full_report
    data = sidecar(root, "03_patch_and_bench.cpu.json")
    values = data["profile_values"]
    expected = sorted(set(values["bench_interleave_concurrency"] or [1]) & set(values["bench_concurrency"]))
    points = data["interleaved_sweep"]
    assert [s["concurrency"] for s in points] == expected and len(expected) >= 2
    c1 = next(s for s in data["launch_spread"]["launches"] if s["method"] == "interleaved")
    assert points[0] == c1  # the launch table's interleaved pair is this launch's concurrency-1 point
    for s in points:  # each point pooled from its own blocks, on both servers, decode-only rates beside
        assert s["eagle3_arm"] == f"eagle3-launch2-c{s['concurrency']}" and s["round_speedups"]
        assert s["baseline_decode_tok_s"] > 0 and s["eagle3_decode_tok_s"] > 0 and s["accept_length"] >= 1
    check = json.loads((root / "artifacts" / "report_model_evidence.cpu.json").read_text())["run_check"]["interleaved"]
    assert [r["concurrency"] for r in check["rows"]] == expected
    assert check["rows"][0]["measured_baseline_tok_s"] == pytest.approx(points[0]["baseline_decode_tok_s"])
    assert "interleaved rounds" in check["calibrated_on"] and check["speedup_mape_pct"] is not None
    text = report_documents(root)
    assert "The same model against the interleaved launch" in text
    # the validation appendix leads with the interleaved check and says how far the sweep measured the same
    # points apart
    sweep = json.loads((root / "artifacts" / "report_model_evidence.cpu.json").read_text())["run_check"]["rows"]
    both = [r["concurrency"] for r in sweep if "measured_speedup" in r]
    assert check["sweep_gap"]["concurrency"] in both
    summary = next(line for line in text.splitlines()
                   if line.startswith("On this run, against the interleaved launch"))
    assert summary.index(f"{check['speedup_mape_pct']:,.1f}% counting the decode passes only") < \
        summary.index("Against the sequential sweep") < summary.index(f"{check['sweep_gap']['gap_pct']:,.1f}% apart")


def test_the_layer_mismatch_arm_ran_in_the_interleaved_rounds_and_its_throughput_cost_is_reported(full_report):
    """The shifted drafter's server joined the interleaved launch at concurrency 1: its blocks ran in the same rounds
    as the headline pair's, its rate is compared with the headline EAGLE-3 arm's from those rounds, and REPORT.md
    says so beside the acceptance drop."""
    _, root = full_report
    data = sidecar(root, "03_patch_and_bench.cpu.json")
    assert any(a["kind"] == "eagle3_shifted" for a in data["spec_arms"]), "the tiny target is deep enough to shift"
    headline = next(s for s in data["interleaved_sweep"] if s["concurrency"] == 1)
    (variant,) = [v for v in data["interleaved_variants"] if v["role"] is None]  # not the overlap control
    (cost,) = data["variant_costs"]
    assert variant["eagle3_arm"] == f"eagle3-shifted-launch{headline['launch']}-c1" and variant["concurrency"] == 1
    assert variant["round_baseline"] == headline["round_baseline"]  # the same baseline blocks
    assert len(variant["round_eagle3"]) == len(headline["round_eagle3"]) == cost["rounds"]
    assert cost["rate_ratio"] == pytest.approx(variant["eagle3_tok_s"] / headline["eagle3_tok_s"])
    text = " ".join(report_documents(root).split())
    assert f"ran at {cost['rate_ratio']:.3f} times the aligned drafter's rate" in text


def test_the_sglang_the_report_ran_on_is_pristine_after_it(full_report):
    """Notebook 03 patched it twice and notebook 02 patched it for its checks: all reverted, byte for byte."""
    from eagle3lab.package import patching
    from eagle3lab.package.release import drift

    _, root = full_report
    site = root / "site-packages"
    for name in ("kimi_k25-eagle3-delegation.patch", "kimi_k25-one-method.patch"):
        assert patching.check(patching.resolve_patch(name), site).status == patching.APPLICABLE
    assert drift(site).clean


def test_html_report_renders_in_a_real_browser_with_every_image(full_report):
    """Debian's chromium + chromedriver (installed by `make test`) open each exported HTML page."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, "chromium and chromedriver are missing: run `make test` (it installs them)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run"):
        options.add_argument(flag)
    outputs, _ = full_report
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        for page in outputs.html:
            browser.get(page.as_uri())
            images = browser.execute_script(
                "return Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, i.src.slice(0, 40)])")
            title = browser.execute_script("return document.body.innerText.slice(0, 200)")
            assert images, f"{page.name} shows no figure"
            broken = [src for ok, src in images if not ok]
            assert broken == [], f"{page.name}: broken images {broken}"
            assert title.strip(), f"{page.name} rendered empty"
    finally:
        browser.quit()
