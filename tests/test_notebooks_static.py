"""The committed notebooks: paired with their py:percent source, output-free, parameters documented, and thin (no
def, class or loop in any notebook; notebook 03 at most 100 code lines, importing only eagle3lab.notebook and
eagle3lab.sidecars): a notebook step is one call into eagle3lab.notebook, where the logic is typed and tested."""

import ast

import jupytext
import nbformat
import papermill
import pytest

from eagle3lab.paths import REPO_ROOT
from eagle3lab.runbook import KERNEL_NAME, NOTEBOOKS

NOTEBOOK_DIR = REPO_ROOT / "notebooks"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_ipynb_matches_its_py_percent_source(name):
    source = jupytext.read(NOTEBOOK_DIR / f"{name}.py")
    committed = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in source.cells], "run `make notebooks`"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_has_no_outputs_and_uses_the_project_kernel(name):
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    assert all(not c.get("outputs") and not c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    assert nb.metadata["kernelspec"]["name"] == KERNEL_NAME


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_parameter_is_typed_and_documented(name):
    parameters = papermill.inspect_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"))
    assert "profile" in parameters
    undocumented = [p for p, info in parameters.items() if not info["help"] or info["inferred_type_name"] == "None"]
    assert undocumented == []


# --- thin notebooks: each step one call into eagle3lab.notebook, kept so by these rules ---------------------------

# what a notebook may not hold: its logic belongs in eagle3lab.notebook, where it is typed, linted and tested
NOT_IN_A_NOTEBOOK = {ast.FunctionDef: "def", ast.AsyncFunctionDef: "async def", ast.Lambda: "lambda",
                     ast.ClassDef: "class", ast.For: "for loop", ast.AsyncFor: "async for loop", ast.While: "while loop"}
THIN_NOTEBOOK = "03_patch_and_bench"
THIN_MAX_CODE_LINES = 100
THIN_IMPORTS_FROM = ("eagle3lab.notebook", "eagle3lab.sidecars")


def code_cells(source_text: str, fmt: str) -> list[str]:
    return [cell.source for cell in jupytext.reads(source_text, fmt=fmt).cells if cell.cell_type == "code"]


def forbidden(cells: list[str]) -> list[str]:
    """Each def, class and loop in the cells, as 'cell N line M: what'."""
    return [f"cell {n} line {node.lineno}: {NOT_IN_A_NOTEBOOK[type(node)]}"
            for n, source in enumerate(cells) for node in ast.walk(ast.parse(source))
            if type(node) in NOT_IN_A_NOTEBOOK]


def code_lines(cells: list[str]) -> int:
    """Lines that hold code: neither blank nor comment-only."""
    return sum(1 for source in cells for line in source.splitlines()
               if line.strip() and not line.strip().startswith("#"))


def imported_modules(cells: list[str]) -> list[str]:
    """Every module a cell imports from, as written (``from eagle3lab.notebook import show`` gives
    ``eagle3lab.notebook``)."""
    out = []
    for source in cells:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                out.append("." * node.level + (node.module or ""))
            elif isinstance(node, ast.Import):
                out.extend(alias.name for alias in node.names)
    return out


def foreign_imports(modules: list[str]) -> list[str]:
    return [m for m in modules if not any(m == ok or m.startswith(ok + ".") for ok in THIN_IMPORTS_FROM)]


@pytest.mark.parametrize("path", sorted(NOTEBOOK_DIR.glob("*.py")) + sorted(NOTEBOOK_DIR.glob("*.ipynb")),
                         ids=lambda p: p.name)
def test_notebook_holds_no_def_class_or_loop(path):
    cells = code_cells(path.read_text(encoding="utf-8"), "ipynb" if path.suffix == ".ipynb" else "py:percent")
    assert forbidden(cells) == [], f"{path.name}: move it into a function of eagle3lab.notebook"


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_notebook_03_is_thin(suffix):
    path = NOTEBOOK_DIR / f"{THIN_NOTEBOOK}{suffix}"
    cells = code_cells(path.read_text(encoding="utf-8"), "ipynb" if suffix == ".ipynb" else "py:percent")
    assert code_lines(cells) <= THIN_MAX_CODE_LINES
    assert foreign_imports(imported_modules(cells)) == []


@pytest.mark.parametrize("added, caught", [
    ("def helper():\n    return 1", "def"), ("class Helper:\n    pass", "class"),
    ("for x in range(3):\n    print(x)", "for loop"), ("while False:\n    pass", "while loop"),
    ("f = lambda x: x", "lambda")])
def test_the_rules_catch_a_def_class_or_loop_added_to_notebook_03(added, caught):
    text = (NOTEBOOK_DIR / f"{THIN_NOTEBOOK}.py").read_text(encoding="utf-8") + f"\n# %%\n{added}\n"
    (problem,) = forbidden(code_cells(text, "py:percent"))
    assert problem.endswith(f": {caught}")


def test_the_rules_catch_an_import_from_below_eagle3lab_notebook_and_too_many_lines():
    cells = ["from eagle3lab.notebook import show\nfrom eagle3lab.bench import acceptance\nimport os"]
    assert foreign_imports(imported_modules(cells)) == ["eagle3lab.bench", "os"]
    assert foreign_imports(["eagle3lab.notebook.show", "eagle3lab.sidecars", "eagle3lab.notebookish"]) == \
        ["eagle3lab.notebookish"]
    assert code_lines(["x = 1\n\n# a comment\ny = 2  # kept"] * 51) == 102
