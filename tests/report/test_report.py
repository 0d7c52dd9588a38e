"""The main job end to end (notebooks 01 -> 02 -> 03 through papermill on the cpu profile) and its report."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.notebook, pytest.mark.server]


def sidecar(root: Path, name: str) -> dict:
    return json.loads((root / "artifacts" / name).read_text())


def test_report_command_writes_notebooks_html_and_report(full_report):
    outputs, root = full_report
    assert [p.name for p in outputs.executed] == [
        "01_crash_repro.cpu.ipynb", "02_interface_trace.cpu.ipynb", "03_patch_and_bench.cpu.ipynb"]
    assert len(outputs.html) == 6 and any(p.name.endswith(".nocode.html") for p in outputs.html)
    text = outputs.report_md.read_text()
    for tag in ("[measured]", "[reported]", "[modelled]"):
        assert tag in text
    assert "has not run" not in text and "No benchmark" not in text
    assert "'KimiK25ForConditionalGeneration' object has no attribute 'set_eagle3_layers_to_capture'" in text


def test_report_images_all_exist(full_report):
    outputs, root = full_report
    links = re.findall(r"!\[[^\]]*\]\(figures/([^)]+)\)", outputs.report_md.read_text())
    assert links, "the report shows figures"
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
    assert data["cross_check"]["ratio"] > 0


def test_installed_sglang_is_pristine_after_the_report(full_report):
    from eagle3lab.fix import patching

    for name in ("kimi_k25-eagle3-delegation.patch", "kimi_k25-one-method.patch"):
        assert patching.check(patching.resolve_patch(name)).status == patching.APPLICABLE


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
