"""Launches as users write them: the flags of the release they ran (sglang's own flag table, read from each
release's wheel), docker run, Kubernetes manifests, nested shells, and SpecForge's bench_eagle3.py launcher."""

from __future__ import annotations

import json

from eagle3lab.doctor import flag_table
from eagle3lab.doctor.launch import parse_command, parse_launch
from eagle3lab.doctor.run import DoctorInput, doctor


def test_the_flag_table_holds_every_release_it_names():
    table = json.loads(flag_table.TABLE.read_text(encoding="utf-8"))
    assert "0.4.3" in table["releases"] and "0.5.9" in table["releases"]
    draft = flag_table.resolve("--speculative-draft")
    assert draft is not None and draft.option == "--speculative-draft-model-path" and "0.4.10" in draft.releases
    assert "0.5.9" not in draft.releases  # ambiguous there: --speculative-draft-model-revision came in
    assert flag_table.resolve("--spec") is None  # ambiguous in every release


def test_an_older_releases_abbreviation_is_read_as_that_release_reads_it():
    """sglang#4655-style 0.4.x command: '--speculative-draft' (unambiguous before 0.5) is ambiguous to 0.5.9."""
    old = ("python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B-Instruct --speculative-algo EAGLE "
           "--speculative-draft lmsys/sglang-EAGLE-LLaMA3-Instruct-8B --speculative-num-steps 5 "
           "--speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.7")
    parsed = parse_command(old)
    assert parsed.parser == "tolerant fallback"
    assert parsed.args["speculative_draft_model_path"] == "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"
    assert parsed.args["speculative_num_draft_tokens"] == 64 and parsed.args["speculative_algorithm"] == "EAGLE"
    assert any("--speculative-draft read as --speculative-draft-model-path, as sglang 0.4" in n for n in parsed.notes)


def test_docker_run_keeps_its_environment_and_reads_the_servers_flags():
    text = ("$ docker run --gpus all --shm-size 32g -p 30000:30000 -e SGLANG_ENABLE_SPEC_V2=1 --ipc=host \\\n"
            "    lmsysorg/sglang:v0.5.4 python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B \\\n"
            "    --speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \\\n"
            "    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --tp 2\n")
    parsed = parse_launch(text)
    spec = parsed.speculative
    assert spec is not None and spec.origin == "docker run" and spec.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert spec.args["tp_size"] == 2 and spec.args["speculative_num_steps"] == 3 and "argument parser" in spec.parser
    result = doctor(DoctorInput(launch=text, concurrency=[8]))
    launch_notes = [n for n in result.notes if n.startswith("launch: ")]
    assert len(launch_notes) == 1 and "docker run, environment SGLANG_ENABLE_SPEC_V2=1" in launch_notes[0]


def test_a_kubernetes_manifest_with_command_args_and_env():
    manifest = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: sglang
        image: lmsysorg/sglang:latest
        command: ["python3", "-m", "sglang.launch_server"]
        args: ["--model-path", "openai/gpt-oss-120b", "--tp", "8", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "lmsys/EAGLE3-gpt-oss-120b-bf16", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--cuda-graph-max-bs", "16"]
        env:
        - name: SGLANG_ENABLE_SPEC_V2
          value: "1"
"""
    spec = parse_launch(manifest).speculative
    assert spec is not None and spec.origin == "Kubernetes manifest" and spec.env["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert spec.args["tp_size"] == 8 and spec.args["cuda_graph_max_bs"] == 16


def test_a_command_nested_in_shells_is_unwrapped():
    text = ("bash -c \"sh -c 'SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server --model-path m "
            "--speculative-algorithm EAGLE3 --speculative-num-steps 2'\"")
    spec = parse_launch(text).speculative
    assert spec is not None and spec.args["speculative_num_steps"] == 2 and spec.env == {"SGLANG_ENABLE_SPEC_V2": "1"}


def test_specforges_benchmark_launcher_is_read_as_the_servers_it_launches():
    """sgl-project/SpecForge benchmarks/bench_eagle3.py: one server per --config-list entry, launched with
    --cuda-graph-max-bs and --max-running-requests equal to the batch size and only the flags it forwards."""
    text = ("python bench_eagle3.py --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 "
            "--speculative-draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B --port 30000 "
            "--config-list 8,0,0,0 8,5,8,32 --benchmark-list mtbench:20 --dtype bfloat16 --tp-size 1 "
            "--cuda-graph-max-bs 64")
    parsed = parse_launch(text)
    spec, base = parsed.speculative, parsed.baseline
    assert spec is not None and base is not None
    assert spec.origin == "SpecForge bench_eagle3.py config 8,5,8,32"
    assert spec.args["speculative_num_draft_tokens"] == 32 and spec.args["speculative_eagle_topk"] == 8
    assert spec.args["cuda_graph_max_bs"] == 8 and spec.args["max_running_requests"] == 8  # its own, not 64
    assert not base.speculative and base.args["cuda_graph_max_bs"] == 8
    result = doctor(DoctorInput(launch=text, concurrency=[8]))
    tree = next(f for f in result.findings if f.cause == "draft_tokens_too_many_for_batch")
    assert "8 x 32 = 256 tokens" in tree.evidence
