"""The answer's shape: the measured speedup first, numbers given as flags with their provenance, causes that apply
ranked by the modelled speedup each would give back, and for every unknown the evidence that decides it."""

from __future__ import annotations

import pytest

from eagle3lab.bench.diagnostics.evidence import CAUSES, UNKNOWN, YES
from eagle3lab.commands.cli import main
from eagle3lab.costmodel.presets import load_config
from eagle3lab.doctor.run import DoctorInput, argv_inputs, doctor, format_table

DONE_WHEN = ["--accept", "1.9", "--baseline-tok-s", "100", "--spec-tok-s", "90", "--concurrency", "32",
             "--target-config", "llama-3.1-8b-instruct", "--hardware", "h100-sxm", "--tp", "1"]
TREE = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path d --speculative-num-steps 5 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 8 --cuda-graph-max-bs 64")
OVERLAP_LOG = "[2026-01-01 00:00:00] Overlap scheduler is disabled when spec v2 is off or using unsupported spec\n"


def test_the_issues_done_when_command_leads_with_the_speedup_and_ranks(capsys):
    assert main(["doctor", *DONE_WHEN]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("measured speedup: 0.90x at concurrency 32, slower than without")
    assert "given by the user (--spec-tok-s)" in out.splitlines()[0]
    result = doctor(argv_inputs(DONE_WHEN))
    assert sorted(r.cause for r in result.ranking) == sorted(CAUSES)
    low = next(f for f in result.findings if f.cause == "low_acceptance")
    assert low.threshold_provenance == "modelled" and "given by the user (--accept)" in low.evidence
    assert any("auto_choose_speculative_params" in n and "5 steps, topk 4, 8 draft tokens" in n for n in result.notes)
    assert all(r.decide for r in result.ranking if r.applies == UNKNOWN)
    applying = [i for i, r in enumerate(result.ranking) if r.applies == YES]
    assert applying == list(range(len(applying)))  # applying causes come first


def test_modelled_gains_rank_the_applying_causes():
    given = DoctorInput(launch=TREE, server_log=OVERLAP_LOG, concurrency=[32], accept=2.2, hardware="h100-sxm",
                        target_config=load_config("llama-3.1-8b-instruct")[0])
    result = doctor(given)
    ranked = {r.cause: r for r in result.ranking}
    tree, overlap = ranked["draft_tokens_too_many_for_batch"], ranked["overlap_scheduler_off"]
    assert tree.applies == YES and tree.gain is not None and tree.gain > 0 and "as a chain" in tree.how
    assert overlap.applies == YES and overlap.gain is not None and overlap.gain >= 0
    gains = [r.gain for r in result.ranking if r.applies == YES and r.gain is not None]
    assert gains == sorted(gains, reverse=True)
    assert "+" in format_table(result) and "by how much of the gap each explains" in format_table(result)


def test_a_gpu_by_its_datasheet_runs_the_cost_model_with_the_users_numbers():
    args = ["--accept", "1.5", "--concurrency", "8", "--target-config", "qwen3-8b", "--launch", TREE,
            "--gpu-name", "H20", "--gpu-mem-bw", "4.0", "--gpu-memory", "96", "--gpu-bf16-tflops", "148",
            "--gpu-link-bw", "450", "--gpu-interconnect", "nvlink"]
    given = argv_inputs(args)
    assert given.hardware_sheet is not None and given.hardware_sheet.sources["mem_bandwidth"].startswith("given by")
    result = doctor(given)
    low = next(f for f in result.findings if f.cause == "low_acceptance")
    assert low.threshold_provenance == "modelled" and "H20" in low.evidence


def test_an_incomplete_datasheet_names_the_missing_number(capsys):
    assert main(["doctor", "--accept", "2", "--gpu-mem-bw", "4.0"]) == 2
    assert "--gpu-memory" in capsys.readouterr().err


@pytest.mark.parametrize("given, missing", [
    (DoctorInput(accept=2.0, hardware="h100-sxm", concurrency=[8]), "--target-config"),
    (DoctorInput(accept=2.0, hardware="h100-sxm", target_config={"architectures": ["X"]}), "a concurrency"),
])
def test_the_note_names_only_the_missing_requirement(given, missing):
    notes = [n for n in doctor(given).notes if n.startswith("a GPU is given")]
    assert len(notes) == 1 and missing in notes[0] and notes[0].count("--") <= 2


def test_a_logs_running_requests_give_the_cost_model_its_batch():
    log = OVERLAP_LOG + ("[2026-01-01 00:00:01] Decode batch, #running-req: 32, #token: 9000, token usage: 0.10, "
                         "accept len: 1.90, cuda graph: True, gen throughput (token/s): 900.00, #queue-req: 0\n")
    result = doctor(DoctorInput(launch=TREE, server_log=log, hardware="h100-sxm",
                                target_config=load_config("llama-3.1-8b-instruct")[0]))
    assert not any(n.startswith("a GPU is given") for n in result.notes)
    low = next(f for f in result.findings if f.cause == "low_acceptance")
    assert low.threshold_provenance == "modelled" and "batch 32" in low.evidence


GRAPH_LOG = ("[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.10, accept len: "
             "1.90, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 900.00, #queue-req: 0\n"
             "[2026-01-01 00:00:02 TP0] Decode batch, #running-req: 32, #token: 30000, token usage: 0.30, accept len: "
             "1.85, accept rate: 0.46, cuda graph: False, gen throughput (token/s): 1500.00, #queue-req: 0\n") * 3
CHAIN_16 = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.3-70B-Instruct --speculative-algorithm "
            "EAGLE3 --speculative-draft-model-path d --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4 --cuda-graph-max-bs 16 --tp 8")


def test_graphs_off_above_the_captured_sizes_is_one_cause_not_two():
    """The issue's own case: 'cuda graph: False' only at 32 running requests, above --cuda-graph-max-bs 16."""
    result = doctor(DoctorInput(launch=CHAIN_16, server_log=GRAPH_LOG))
    found = {f.cause: f for f in result.findings}
    assert found["cuda_graph_bs_below_concurrency"].applies == YES
    graphs = found["no_cuda_graph"]
    assert graphs.applies == "no" and "cuda_graph_bs_below_concurrency" in graphs.evidence
    launch_flags = ("--disable-cuda-graph",)
    for f in result.findings:
        if f.applies == YES:
            assert not any(flag in f.fix and flag not in CHAIN_16 for flag in launch_flags), f


def test_sglangs_defaults_stand_in_for_flags_no_launch_names():
    """The done-when command: no launch, so steps/topk/draft tokens are the installed sglang's defaults for the
    target (traced from its source); a tree at 32 streams is then a finding with its modelled gain."""
    result = doctor(argv_inputs(DONE_WHEN))
    tree = next(f for f in result.findings if f.cause == "draft_tokens_too_many_for_batch")
    assert tree.applies == YES and "32 x 8 = 256 tokens" in tree.evidence
    ranked = next(r for r in result.ranking if r.cause == "draft_tokens_too_many_for_batch")
    assert ranked.gain is not None and ranked.gain > 0 and result.ranking[0].cause == ranked.cause


def test_the_launchs_environment_decides_the_overlap_scheduler():
    env = "SGLANG_ENABLE_SPEC_V2=1 " + CHAIN_16
    found = {f.cause: f for f in doctor(DoctorInput(launch=env)).findings}
    assert found["overlap_scheduler_off"].applies == "no" and "SGLANG_ENABLE_SPEC_V2=1" in \
        found["overlap_scheduler_off"].evidence
    found = {f.cause: f for f in doctor(DoctorInput(launch=CHAIN_16)).findings}
    assert found["overlap_scheduler_off"].applies == UNKNOWN
