"""Any GPU by its datasheet (issue 36, item 4): a spec string becomes the model's Hardware, predict answers for a
GB200-like and an MI300X-like GPU, and says what it understood and where the point lies outside what was compared."""

from __future__ import annotations

import json
import re

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.costmodel.gpus import HARDWARE, hardware_preset, parse_gpu_spec
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.errors import PerfModelError

GB200_LIKE = "name=GB200-like,hbm=8000,bf16=2500,fp8=5000,mem=186,link=nvlink:900,count=8"
MI300X_LIKE = "name=MI300X-like,hbm=5300,bf16=1307,fp8=2615,mem=192,link=xgmi:448,count=8"


def test_a_spec_string_is_read_in_datasheet_units():
    hw, count = parse_gpu_spec(GB200_LIKE)
    assert (hw.name, count) == ("GB200-like", 8)
    assert hw.mem_bandwidth == pytest.approx(8e12) and hw.memory_bytes == pytest.approx(186e9)
    assert hw.peak_bf16_flops == pytest.approx(2.5e15) and hw.peak_fp8_flops == pytest.approx(5e15)
    assert (hw.interconnect, hw.link_bandwidth) == ("nvlink", pytest.approx(900e9))
    assert all("given by the user" in hw.sources[k] for k in ("mem_bandwidth", "peak_bf16_flops", "link_bandwidth"))
    assert hardware_preset(GB200_LIKE).mem_bandwidth == hw.mem_bandwidth  # the shared entry point (doctor) takes it


@pytest.mark.parametrize("spec, words", [
    ("hbm=8000,mem=186", "needs bf16=<dense BF16 tensor TFLOP/s>"),
    ("hbm=8000,bf16=x,mem=186", "bf16='x' is not a number"),
    ("hbm=8000,bf16=2500,mem=186,link=infiniband:400", "must be <kind>:<GB/s per direction>"),
    ("hbm=8000,bf16=2500,mem=186,speed=9", "'speed=9' is not one of"),
])
def test_a_bad_spec_is_one_clear_error(spec, words):
    with pytest.raises(PerfModelError) as err:
        parse_gpu_spec(spec)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("spec", [GB200_LIKE, MI300X_LIKE])
def test_predict_answers_for_a_gb200_like_and_an_mi300x_like_gpu(spec):
    p = predict_from_config("deepseek-v3", spec, 8, 3, 1, 4, 2.5, 2048, [1, 16, 64], engine="vllm-0.19")
    assert all(pt.speedup > 0 and pt.baseline_tok_s > 0 for pt in p.points)
    name = spec.split(",")[0].split("=")[1]
    assert any(name in line and "GB/s memory" in line for line in p.understood)
    assert any("36.6B active" in line and "61 layers" in line and "fp8" in line for line in p.understood)
    assert any(f"no published point on {name}" in n for n in p.notes)
    # faster memory and links make the same deployment's plain decode faster
    tenth = re.sub(r"hbm=([0-9.]+)", lambda m: f"hbm={float(m.group(1)) / 10:g}", spec)
    slow = predict_from_config("deepseek-v3", tenth, 8, 3, 1, 4, 2.5, 2048, [1], engine="vllm-0.19")
    assert slow.points[0].baseline_tok_s < p.points[0].baseline_tok_s


def test_the_presets_are_shortcuts_for_datasheet_numbers():
    assert {"gb200", "mi300x", "mi325x", "mi355x"} <= set(HARDWARE)
    preset = hardware_preset("mi300x")
    assert (preset.interconnect, preset.collectives) == ("xgmi", "xgmi-mi300x")
    spec, _ = parse_gpu_spec("hbm=5300,bf16=1307.4,fp8=2614.9,mem=192,link=xgmi:448")
    assert spec.mem_bandwidth == preset.mem_bandwidth and spec.link_bandwidth == preset.link_bandwidth


@pytest.mark.parametrize("spec", [GB200_LIKE, MI300X_LIKE])
def test_the_cli_takes_a_gpu_by_datasheet_and_echoes_what_it_understood(capsys, spec):
    args = ["predict", "--config", "qwen3-235b-a22b", "--gpu", spec, "--steps", "3", "--topk", "1",
            "--draft-tokens", "4", "--accept", "2.4", "--context", "2048", "--batch", "1,32", "--engine", "vllm-0.19"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "understood: model: qwen3-235b-a22b" in out and "235.1B parameters" in out and "94 layers" in out
    assert "understood: GPU: 8x" in out and "outside the validated conditions" in out
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tp"] == 8 and data["understood"] and len(data["points"]) == 2


def test_the_cli_says_dcp_is_not_modelled(capsys):
    args = ["predict", "--config", "kimi-k2.5", "--hardware", "rtx-pro-6000-blackwell", "--tp", "8", "--steps", "3",
            "--topk", "1", "--draft-tokens", "4", "--accept", "2.2", "--context", "0", "--batch", "1", "--dcp", "8"]
    assert main(args) == 0
    assert "decode context parallelism (DCP 8) is not modelled" in capsys.readouterr().out


def test_hardware_and_gpu_are_exclusive_and_a_spec_without_count_needs_tp(capsys):
    base = ["predict", "--config", "qwen3-8b", "--steps", "3", "--topk", "1", "--draft-tokens", "4", "--accept", "2",
            "--context", "512", "--batch", "1"]
    with pytest.raises(SystemExit):
        main(base + ["--hardware", "h200", "--gpu", "hbm=1,bf16=1,mem=1"])
    capsys.readouterr()
    assert main(base + ["--gpu", "hbm=4000,bf16=148,fp8=296,mem=96"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--tp is required" in err and len(err.splitlines()) == 1
