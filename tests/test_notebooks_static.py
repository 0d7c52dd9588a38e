"""The committed notebooks: paired with their py:percent source, output-free, parameters documented."""


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
