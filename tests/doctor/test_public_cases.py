"""Public threads (sglang, EAGLE, vLLM-based trackers) where a slow or useless EAGLE speculation had a stated cause:
doctor, given what the thread posted (kept verbatim under ``cases/<slug>/`` with the URL and provenance), must find
that cause among the findings that apply."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eagle3lab.doctor.run import DoctorInput, doctor
from eagle3lab.bench.diagnostics.evidence import CAUSES, YES
from eagle3lab.costmodel.presets import load_config

CASES = Path(__file__).parent / "cases"


def case_input(folder: Path) -> tuple[dict, DoctorInput]:
    case = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))
    args = case.get("args") or {}

    def text(name: str):
        path = folder / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def config(name: str, stored: str | None):
        if (folder / name).is_file():
            return load_config(folder / name)[0]
        return load_config(stored)[0] if stored else None

    concurrency = [int(c) for c in str(args["concurrency"]).split(",")] if args.get("concurrency") else None
    return case, DoctorInput(launch=text("launch.txt"), server_log=text("server.log"), bench=text("bench.txt"),
                             concurrency=concurrency, hardware=args.get("hardware"), gpus=args.get("gpus"),
                             drafter_config=config("drafter_config.json", args.get("drafter_config")),
                             target_config=config("target_config.json", args.get("target_config")),
                             input_len=args.get("input_len"), output_len=args.get("output_len"),
                             temperature=args.get("temperature"))


FOLDERS = sorted(p for p in CASES.iterdir() if (p / "case.yaml").is_file())


def test_there_are_public_cases_with_urls_and_known_tags():
    assert len(FOLDERS) >= 8
    for folder in FOLDERS:
        case = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))
        assert case["url"].startswith("https://github.com/"), folder.name
        assert case["stated_cause"] in CAUSES, folder.name
        assert case["excerpt"] and case["provenance"], folder.name


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_stated_cause_is_among_the_findings_that_apply(folder):
    case, given = case_input(folder)
    result = doctor(given)
    applying = {f.cause: f for f in result.findings if f.applies == YES}
    assert case["stated_cause"] in applying, (case["url"], [f.line() for f in result.findings], result.notes)
    assert len(result.findings) == len(CAUSES)
