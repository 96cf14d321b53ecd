"""What a chapter notebook declares, read without running it: the names and values of its parameters
cell (what papermill overrides and the study runner checks), and the helper modules its code imports (the
code an executed copy depends on).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from helpers.dependencies import imported_helpers


def notebook_helpers(source: Path) -> frozenset[str]:
    """The helper modules a notebook's code cells import (their closure is what it runs)."""
    notebook = nbformat.read(source, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    return frozenset(imported_helpers(code)) or frozenset({"helpers"})


def _assignments(source: Path):
    """(target, value) nodes of a notebook's ``parameters`` cell: plain, tuple and annotated assignments."""
    notebook = nbformat.read(source, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    for statement in ast.parse(cell.source).body:
        if isinstance(statement, ast.Assign):
            yield from ((target, statement.value) for target in statement.targets)
        elif isinstance(statement, ast.AnnAssign):
            yield statement.target, statement.value


def declared_parameters(source: Path) -> set[str]:
    """Names a notebook's ``parameters`` cell assigns: plain, tuple (``a, b = …``) and annotated names."""
    return {
        node.id
        for target, _ in _assignments(source)
        for node in ast.walk(target)
        if isinstance(node, ast.Name)
    }


def notebook_defaults(source: Path) -> dict:
    """The values a notebook's ``parameters`` cell assigns (what the smoke profile runs): the cell is
    executed on its own, as papermill's kernel would before the injected parameters."""
    notebook = nbformat.read(source, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(compile(cell.source, f"{source.name} parameters", "exec"), namespace)  # the study's own notebooks
    return {name: namespace[name] for name in declared_parameters(source)}
