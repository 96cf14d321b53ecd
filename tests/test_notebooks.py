"""Conventions every chapter notebook keeps (nbval itself runs them: see the README's test command)."""

import nbformat
import pytest

from helpers.study import notebooks_dir

NOTEBOOKS = sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_parameterised_executed_and_clean(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    tags = [cell.metadata.get("tags", []) for cell in code]
    assert "parameters" in tags[0], "the first code cell must be papermill's parameters cell"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    assert all(cell.execution_count for cell in code), "committed with the outputs of its defaults"
    assert not [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert any("NBVAL_CHECK_OUTPUT" in cell.source for cell in code), "exact cells are nbval-checked"
    assert "def " not in "".join(cell.source for cell in code), "logic belongs in src/helpers"
