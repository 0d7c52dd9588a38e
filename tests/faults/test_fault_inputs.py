"""Impossible input found from outside (issue 43, item 5): ``predict``'s numbers and the profile's YAML and bytes.

Each is one line naming the flag (or key, or file), the value and what to pass, with exit status 2: never a
modelled answer of nan, never a traceback. The commands run in-process (``cli.main``): every case fails while the
arguments or the profile are read, before anything is launched or written; ``nothing_runs`` makes sure of it (a
regression fails the test instead of running notebooks or a preflight on this machine).
"""

from __future__ import annotations

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.commands.predict import MAX_BATCH, MAX_CONTEXT, MAX_STEPS
from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir
from eagle3lab.runtime.profiles import load_profile, parse_override

PREDICT = ["predict", "--config", "llama-3.1-8b-instruct", "--hardware", "h100-sxm", "--tp", "1", "--steps", "3",
           "--topk", "1", "--draft-tokens", "4", "--accept", "2.5", "--context", "1024", "--batch", "1,8"]


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """What each command does once its arguments and profile are read fails the test instead of running."""

    def reached(*args, **kwargs):
        raise AssertionError("the command got past reading its input: it should have refused it")

    for target in ("eagle3lab.commands.run.run_all", "eagle3lab.commands.report.build_report",
                   "eagle3lab.preflight.run_preflight", "eagle3lab.runguard.check_checkout_path"):
        monkeypatch.setattr(target, reached)


def with_flags(base: list[str], **changes: str) -> list[str]:
    """``base`` with each ``--flag value`` replaced (or appended)."""
    args = list(base)
    for flag, value in changes.items():
        name = "--" + flag.replace("_", "-")
        if name in args:
            args[args.index(name) + 1] = value
        else:
            args += [name, value]
    return args


def refusal(capsys, argv: list[str]) -> str:
    """The one line ``eagle3lab argv`` prints on stderr, asserted to end with exit status 2 and no traceback."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's errors (one line, from commands.common.one_line_errors)
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("eagle3lab"), lines
    return lines[0]


# ---------------------------------------------------------------------------------------------------------
# (4) predict: every number finite, in range, and a TP the model's heads allow


@pytest.mark.parametrize("flag, value, expected", [
    ("context", "nan", f"argument --context: nan is not a usable value; pass a finite number of tokens from 0 to "
                       f"{MAX_CONTEXT:,}"),
    ("context", "inf", "argument --context: inf is not a usable value"),
    ("context", "-1", "argument --context: -1 is not a usable value"),
    ("context", "1e12", "argument --context: 1e12 is not a usable value"),
    ("accept", "nan", "argument --accept: nan is not a usable value"),
    ("accept", "inf", "argument --accept: inf is not a usable value"),
    ("steps", "1000000", f"argument --steps: 1000000 is out of range; pass a whole number of draft steps from 1 to "
                         f"{MAX_STEPS}"),
    ("steps", "0", "argument --steps: 0 is out of range"),
    ("topk", "99999999999999999999999", "argument --topk: 99999999999999999999999 is out of range"),
    ("draft_tokens", "1e3", "argument --draft-tokens: invalid int value: '1e3'; pass a whole number"),
    ("tp", "99999999999999999999", "argument --tp: 99999999999999999999 is out of range; pass a whole number of "
                                   "GPUs from 1 to 1,024"),
    ("tp", "0", "argument --tp: 0 is out of range"),
    ("dcp", "99999999999999999", "argument --dcp: 99999999999999999 is out of range"),
    ("baseline_tok_s", "inf", "argument --baseline-tok-s: inf is not a usable value; pass a finite number of tok/s "
                              "above 0"),
    ("baseline_tok_s", "nan", "argument --baseline-tok-s: nan is not a usable value"),
    ("baseline_tok_s", "0", "argument --baseline-tok-s: 0 is not a usable value"),
])
def test_predict_refuses_numbers_it_cannot_model(capsys, flag, value, expected):
    assert expected in refusal(capsys, with_flags(PREDICT, **{flag: value}))


@pytest.mark.parametrize("flag, value, expected", [
    ("batch", "99999999999999999999999999999", f"--batch: 99999999999999999999999999999 is above the largest batch "
                                               f"modelled ({MAX_BATCH:,} requests"),
    ("batch", f"1,{MAX_BATCH + 1}", f"pass batch sizes from 1 to {MAX_BATCH:,}"),
    ("baseline_curve", "1:inf", "--baseline-curve: '1:inf' needs a batch >= 1 and a finite rate > 0"),
    ("baseline_curve", "1:60,99999999999999999999:2000", f"--baseline-curve: a batch above {MAX_BATCH:,}"),
    ("pcie_custom_allreduce", "1.2.3", "--pcie-custom-allreduce expects a size such as 56KB, got '1.2.3'"),
    ("pcie_custom_allreduce", "9" * 400, "is above 1,024 MB"),
    ("pcie_custom_allreduce", "56KB,\u00b2", "ROWS must be an integer from 0 to"),
])
def test_predict_refuses_lists_and_sizes_it_cannot_model(capsys, flag, value, expected):
    assert expected in refusal(capsys, with_flags(PREDICT, **{flag: value}))


@pytest.mark.parametrize("config, tp, expected", [
    ("llama-3.1-8b-instruct", "7", "--tp 7 cannot split the 32 attention heads and 8 KV heads of "
                                   "llama-3.1-8b-instruct evenly (the engine refuses such a launch); pass --tp one of "
                                   "1, 2, 4, 8, 16, 32"),
    ("llama-3.1-8b-instruct", "64", "--tp 64 cannot split the 32 attention heads"),
    ("kimi-k2.5", "3", "--tp 3 cannot split the 64 attention heads of kimi-k2.5 evenly"),
])
def test_predict_refuses_a_tp_the_heads_cannot_split(capsys, config, tp, expected):
    assert expected in refusal(capsys, with_flags(PREDICT, config=config, tp=tp))


@pytest.mark.parametrize("gpu, expected", [
    ("hbm=3350,bf16=989,mem=80,count=inf", "--gpu: count must be a finite number > 0"),
    ("hbm=3350,bf16=989,mem=80,count=1.5", "--gpu: count='1.5' must be a whole number of GPUs"),
    ("hbm=inf,bf16=989,mem=80,count=1", "--gpu: hbm must be a finite number > 0"),
    ("hbm=3350,bf16=989,mem=80,count=1e30", "--gpu count=1000000000000000019884624838656 is out of range"),
    ("hbm=3350,bf16=989,mem=80,count=7", "--tp 7 cannot split the 32 attention heads"),
])
def test_predict_refuses_a_gpu_spec_it_cannot_model(capsys, gpu, expected):
    argv = [a for i, a in enumerate(PREDICT) if a not in ("--hardware", "--tp") and
            PREDICT[i - 1] not in ("--hardware", "--tp")]
    assert expected in refusal(capsys, argv + ["--gpu", gpu])


def test_predict_still_answers_valid_input(capsys):
    assert main(with_flags(PREDICT, tp="8", context="0", baseline_tok_s="120")) == 0
    assert "break-even acceptance:" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------
# (5) profiles: tags that are not plain data, malformed YAML, bytes that are not UTF-8


@pytest.mark.parametrize("command", [["run", "--notebooks", "01"], ["report", "--no-run"], ["preflight"], ["setup"]])
def test_a_python_tag_in_set_is_one_line_and_runs_nothing(capsys, tmp_path, command):
    marker = tmp_path / "executed"
    line = refusal(capsys, [*command, "--profile", "cpu", "--set",
                            f"port=!!python/object/apply:os.system ['touch {marker}']"])
    assert line.startswith("eagle3lab: --set port: not valid YAML (the tag '!!python/object/apply:os.system' is "
                           "not plain data"), line
    assert not marker.exists()


@pytest.mark.parametrize("pair, expected", [
    ("port=[1, 2", "--set port: not valid YAML (expected ',' or ']'"),
    ("bench_concurrency={a: 1, a: 2}", "--set bench_concurrency: not valid YAML (duplicate key 'a'"),
    ("port=\udcff", "--set port: the value is not UTF-8 text"),
    ("=3", "--set expects key=value, got '=3'"),
    ("ready_timeout_s=.inf", "override: key 'ready_timeout_s': Input should be a finite number"),
    ("checkpoint_read_mb_s=.nan", "override: key 'checkpoint_read_mb_s': Input should be a finite number"),
])
def test_a_malformed_set_is_one_line(capsys, pair, expected):
    assert expected in refusal(capsys, ["preflight", "--profile", "cpu", "--set", pair])


def test_parse_override_names_the_key_and_keeps_plain_data():
    assert parse_override("bench_concurrency", "[1, 2]") == [1, 2]
    with pytest.raises(ProfileError) as err:
        parse_override("port", "!!python/name:os.system")
    assert (err.value.key, err.value.problem, err.value.source) == ("port", "yaml", "override")


def test_a_profile_of_non_utf8_bytes_is_one_line(capsys, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes((params_dir() / "cpu.yaml").read_bytes() + "host: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    lines = path.read_bytes().count(b"\n")
    assert (err.value.problem, err.value.line, err.value.source) == ("encoding", lines, str(path))
    assert f"{path}:{lines}: not UTF-8 text (byte 0xe9" in str(err.value)
    assert refusal(capsys, ["preflight", "--profile", str(path)]) == f"eagle3lab: {err.value}"


def test_a_python_tag_in_a_profile_file_is_named_as_not_plain_data(capsys, tmp_path):
    marker = tmp_path / "executed"
    path = tmp_path / "tagged.yaml"
    path.write_text((params_dir() / "cpu.yaml").read_text().replace(
        "name: cpu", f"name: !!python/object/apply:os.system ['touch {marker}']"))
    line = refusal(capsys, ["preflight", "--profile", str(path)])
    assert f"{path}:" in line and "the tag '!!python/object/apply:os.system' is not plain data" in line
    assert not marker.exists()
