"""Notebook 03's run object (notebook.patch_bench_run) and its benchmark, turned off (notebook.benchmark).

The notebook itself runs only end to end (the notebook tests, minutes of servers); these check, without a server,
that every call it makes names a function that exists, and that a disabled benchmark reads as nothing measured.
"""

import ast

import jupytext
import pytest

from eagle3lab.notebook import benchmark, model_validation, params, patch_bench_run, show
from eagle3lab.notebook.patch_and_bench.relaunched_pairs import Relaunched
from eagle3lab.paths import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "03_patch_and_bench.py"
# the names notebook 03 calls through, and what each stands for
NAMES = {"run": patch_bench_run.PatchBenchRun, "nb03": patch_bench_run, "nbvalidation": model_validation,
         "nbparams": params, "show": show}


def calls(source: str) -> list[tuple[str, str]]:
    """Every ``name.attribute(...)`` call of the notebook's code cells."""
    cells = [c.source for c in jupytext.reads(source, fmt="py:percent").cells if c.cell_type == "code"]
    return [(node.func.value.id, node.func.attr) for cell in cells for node in ast.walk(ast.parse(cell))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)]


def test_every_call_of_notebook_03_names_a_function_that_exists():
    found = calls(NOTEBOOK.read_text(encoding="utf-8"))
    assert len(found) > 40  # each step of the notebook is one such call
    missing = [f"{name}.{attr}" for name, attr in found if name in NAMES and not callable(getattr(NAMES[name], attr, None))]
    assert missing == []
    assert {name for name, _ in found if name not in NAMES} == {"model_validation"}  # the view's own methods


def test_the_check_catches_a_misspelt_step():
    text = NOTEBOOK.read_text(encoding="utf-8") + "\n# %%\nrun.relaunch_chian()\n"
    assert ("run", "relaunch_chian") in calls(text)
    assert not hasattr(patch_bench_run.PatchBenchRun, "relaunch_chian")


def test_a_disabled_benchmark_measures_nothing_and_reads_as_empty():
    off = benchmark.NoBenchmark()
    off.measure([], None, cross_check=True)  # type: ignore[arg-type]  # nothing is touched
    assert not off.enabled and off.report is None and off.crosscheck is None and not off.eagle3_measured()
    assert off.relaunched(None, True) == Relaunched(None, [])
    assert off.cycle_components(None) is None and off.lossless() is None and off.layer_mismatch() is None
    assert off.acceptance_records() == off.offline_vs_served() == off.speedup() == off.arm_rows() == []
    assert off.figures() == {} and off.report_path() is None
    off.expect_acceptance_consistent()


def test_an_enabled_benchmark_read_before_it_measured_says_so_in_one_line():
    on = benchmark.Benchmark(None)  # type: ignore[arg-type]  # no setting is read before measure()
    assert on.enabled and not on.eagle3_measured() and on.report is None
    assert on.relaunched(None, True) == Relaunched(None, [])  # no EAGLE-3 point: not relaunched
    with pytest.raises(RuntimeError, match="run the benchmark cell"):
        on.speedup()
