"""The drafter training figure: drawn from the stored history only, labelled with profile, date and provenance."""

from __future__ import annotations

import pytest
from matplotlib import pyplot as plt

from eagle3lab.errors import TinyModelError
from eagle3lab.report.plots.training import draw_training_figure, moving_average, plot_training


def history(steps: int = 40, evals: tuple[int, ...] = (20, 40)) -> dict:
    curve = [{"step": s, "loss": 7.0 - s / 10, "loss_per_step": [7.0 - s / 10, 7.1 - s / 12, 7.2 - s / 14]}
             for s in range(1, steps + 1)]
    scored = [{"step": s, "heldout": {"accuracy_per_step": [s / 100, s / 120, s / 140],
                                      "acceptance": {"mean_accept_length": 1 + s / 40, "requests": 8}}}
              for s in evals]
    return {"train_curve": curve, "evals": scored, "date": "2026-11-30T20:00:00+00:00",
            "provenance": "measured here (offline simulation)", "aux_layer_ids": [1, 2, 4], "num_layers": 6,
            "recipe": {"train_prompts": 64, "optimizer_steps": steps, "batch_size": 8, "threads": 1},
            "train_time": {"cpu_s": 12.5, "wall_s": 30.1}}


def test_moving_average_is_trailing_and_starts_with_what_exists():
    assert moving_average([2.0, 4.0, 6.0, 8.0], 2) == [2.0, 3.0, 5.0, 7.0]
    assert moving_average([1.0], 5) == [1.0]


def test_figure_draws_every_step_and_names_its_source():
    fig = plot_training(history(), "cpu")
    left, right, twin = fig.axes
    assert len(left.get_lines()) == 6  # raw + smoothed loss per draft step
    assert [len(line.get_xdata()) for line in right.get_lines()] == [2, 2, 2]
    assert list(twin.get_lines()[0].get_ydata()) == [1.5, 2.0]
    title = fig._suptitle.get_text()
    assert "profile 'cpu'" in title and "2026-11-30" in title and "measured here" in title
    footer = " ".join(t.get_text() for t in fig.texts)
    assert "[1, 2, 4]" in footer and "12.5 s CPU" in footer
    plt.close(fig)


def test_figure_is_written_atomically(tmp_path):
    path = draw_training_figure(history(), "cpu", out_dir=tmp_path)
    assert path == tmp_path / "drafter_training_cpu.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_history_without_curves_is_one_line():
    broken = history()
    broken["train_curve"] = []
    with pytest.raises(TinyModelError) as err:
        plot_training(broken, "cpu")
    assert (err.value.problem, err.value.value) == ("incomplete_history", ["train_curve", "evals"])
    assert "\n" not in str(err.value)
