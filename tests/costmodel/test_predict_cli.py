"""``python -m eagle3lab predict``: the JSON shape, the table, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.costmodel.perfmodel import predict_from_config

ARGS = ["predict", "--config", "llama-3.1-8b-instruct", "--hardware", "h100-sxm", "--tp", "1", "--steps", "3",
        "--topk", "1", "--draft-tokens", "4", "--accept", "2.5", "--context", "1024", "--batch", "1,8,64"]


def _with(**changes: str) -> list[str]:
    args = list(ARGS)
    for flag, value in changes.items():
        name = "--" + flag.replace("_", "-")
        if name in args:
            args[args.index(name) + 1] = value
        else:
            args += [name, value]
    return args


def test_json_is_one_object_with_points(capsys):
    assert main(ARGS + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [set(p) for p in data["points"]] == [{"batch", "baseline_tok_s", "eagle3_tok_s", "speedup"}] * 3
    assert [p["batch"] for p in data["points"]] == [1, 8, 64]
    expected = predict_from_config("llama-3.1-8b-instruct", "h100-sxm", 1, 3, 1, 4, 2.5, 1024, [1, 8, 64])
    for got, want in zip(data["points"], expected.points):
        assert got["speedup"] == pytest.approx(want.speedup)
        assert got["speedup"] == pytest.approx(got["eagle3_tok_s"] / got["baseline_tok_s"])
    assert set(data["break_even_accept_length"]) == {"1", "8", "64"}
    assert data["kind"] == "modelled"


def test_baseline_rate_calibrates_the_single_stream_point(capsys):
    assert main(_with(baseline_tok_s="120") + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["points"][0]["baseline_tok_s"] == pytest.approx(120.0, rel=1e-6)
    assert "120" in data["calibration"]


def test_table_names_break_even_and_what_it_means(capsys):
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "baseline tok/s" in out and "EAGLE-3 tok/s" in out
    assert "break-even acceptance:" in out and "modelled, not measured" in out


@pytest.mark.parametrize("change, message", [
    ({"hardware": "a100"}, "unknown hardware 'a100'; known: a100-sxm, b200, gb200, h100-sxm, h200, mi300x, mi325x, "
                           "mi355x, rtx-pro-6000-blackwell"),
    ({"batch": "1,x"}, "--batch expects comma-separated integers"),
    ({"batch": "0"}, "batch sizes >= 1"),
    ({"tp": "two"}, "argument --tp: invalid int value"),
    ({"accept": "9"}, "acceptance length must be in [1, 4]"),
    ({"config": "/no/such/config.json"}, "is not a config.json (or a folder holding one), a stored config"),
    ({"engine": "tgi"}, "argument --engine: invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, change, message):
    with pytest.raises(SystemExit) if "argument" in message else _no_raise():
        code = main(_with(**change))
        assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_config_without_architectures_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 8}))
    assert main(_with(config=str(cfg))) == 2
    err = capsys.readouterr().err.strip()
    assert "no 'architectures' list" in err and len(err.splitlines()) == 1


def test_model_folder_is_accepted(tmp_path, capsys):
    from eagle3lab.costmodel.presets import load_config

    cfg, _ = load_config("qwen3-8b")
    (tmp_path / "Qwen3-8B").mkdir()
    (tmp_path / "Qwen3-8B" / "config.json").write_text(json.dumps(cfg))
    assert main(_with(config=str(tmp_path / "Qwen3-8B")) + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "Qwen3-8B"


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_predict_from_config_takes_any_hardware_and_calibrates_on_a_measured_rate():
    from eagle3lab.costmodel.presets import cpu_hardware
    from eagle3lab.runtime.tinymodel.configs import text_config

    tiny = {**text_config(4), "torch_dtype": "bfloat16"}
    p = predict_from_config(tiny, cpu_hardware(mem_bandwidth=5e9), 1, 3, 1, 4, 1.5, 48, [1, 2, 4],
                            baseline_tok_s=100.0, draft_vocab=1024)
    assert p.points[0].baseline_tok_s == pytest.approx(100.0, rel=1e-6)
    assert p.hardware == "this machine (cpu)"
    for point in p.points:  # acceptance 1.5 per cycle against the cycle's cost in plain steps
        assert point.speedup == pytest.approx(point.eagle3_tok_s / point.baseline_tok_s)
        assert point.speedup == pytest.approx(1.5 / point.break_even_accept_length)


def test_a_drafter_config_replaces_the_default_layout(tmp_path, capsys):
    from eagle3lab.runtime.tinymodel.configs import draft_config

    small = {**draft_config(4), "hidden_size": 4096, "target_hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
             "draft_vocab_size": 32000}
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(small))
    assert main(ARGS + ["--json", "--draft-config", str(path)]) == 0
    with_file = json.loads(capsys.readouterr().out)
    assert main(ARGS + ["--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    # the same layout as the default rule: the same prediction
    assert with_file["points"][0]["speedup"] == pytest.approx(default["points"][0]["speedup"])


@pytest.mark.parametrize("config, tp", [("gpt-oss-120b", "1"), ("glm-4.5-air", "4")])
def test_predict_json_answers_for_gpt_oss_and_glm_moe(capsys, config, tp):
    assert main(_with(config=config, tp=tp) + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == config and len(data["points"]) == 3
    assert all(p["speedup"] == pytest.approx(p["eagle3_tok_s"] / p["baseline_tok_s"]) for p in data["points"])


def test_unsupported_architecture_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["FalconH1ForCausalLM"], "hidden_size": 8}))
    assert main(_with(config=str(cfg))) == 2
    err = capsys.readouterr().err.strip()
    assert "FalconH1ForCausalLM is not modelled" in err and len(err.splitlines()) == 1


def test_dcp_above_1_is_said_to_be_outside_the_model_in_one_note_and_changes_nothing(capsys):
    """DCP is not modelled: --dcp 2 gets the DCP-1 answer and one note saying so, in the table and in the JSON."""
    assert main(_with(tp="2", dcp="2") + ["--json"]) == 0
    with_dcp = json.loads(capsys.readouterr().out)
    assert main(_with(tp="2") + ["--json"]) == 0
    without = json.loads(capsys.readouterr().out)
    dcp_notes = [n for n in with_dcp["notes"] if "DCP 2" in n]
    assert len(dcp_notes) == 1 and "not modelled" in dcp_notes[0]
    assert not [n for n in without["notes"] if "DCP" in n]
    assert with_dcp["points"] == without["points"]
    assert main(_with(tp="2", dcp="2")) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "DCP 2" in line]
    assert len(notes) == 1 and notes[0].startswith("note: decode context parallelism (DCP 2) is not modelled")


def test_dcp_below_1_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(_with(dcp="0"))
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "argument --dcp: 0 is out of range; pass a whole number of GPUs from 1" in line
