"""Which helper modules a chapter depends on, and a digest of their code.

A chapter's executed copy is current only while the code it runs is: judged by ``code_version`` of the
helper modules its notebook imports and every helper module they import, directly or not (read from the
sources with ``ast``, nothing is imported), so a fix in ``helpers.collectives.p2p`` reruns chapter 4 and
not chapter 1. Records are keyed more finely, by the version of the code that measures their kind
(``helpers.measurements``); ``module_version`` is how schema 1 keyed them, kept for
``helpers.results_migration``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Code that stores and describes measurements but cannot change a measured value (the machine enters a
# record's key through its provenance id): a record does not go stale when only these change.
BOOKKEEPING = frozenset({"helpers.results", "helpers.hardware", "helpers.paths", "helpers.dependencies"})


def module_file(package: Path, module: str) -> Path | None:
    """The file of a ``helpers`` module or package in the ``helpers`` folder ``package`` (None for anything
    else)."""
    parts = module.split(".")
    if parts[0] != "helpers" or not all(part.isidentifier() for part in parts):
        return None
    candidate = package.joinpath(*parts[1:])
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if path.is_file():
            return path
    return None


def source_file(module: str) -> Path | None:
    """The file of a ``helpers`` module or package of this package (None for anything else)."""
    return module_file(PACKAGE, module)


def imported_helpers(source: str) -> set[str]:
    """The ``helpers`` modules a piece of Python source imports (``from helpers import a`` counts
    ``helpers.a`` when that is a module, else ``helpers`` itself), and those it names in a string
    (``"helpers.collectives.tasks"``): the worker modules a launcher starts in other processes."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("helpers.")
        ):
            found.add(node.value)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("helpers")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("helpers"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if source_file(name) else node.module)
    return {name for name in found if source_file(name)}


@functools.cache
def closure(modules: frozenset[str], skip: frozenset[str] = frozenset()) -> frozenset[str]:
    """``modules`` and every helper module they import, transitively (packages' ``__init__`` included),
    leaving out the modules in ``skip`` and what only they import."""
    seen, todo = set(), list(modules)
    while todo:
        module = todo.pop()
        path = source_file(module)
        if module in seen or module in skip or path is None:
            continue
        seen.add(module)
        todo += imported_helpers(path.read_text())
        if "." in module:
            todo.append(module.rsplit(".", 1)[0])  # a submodule runs its package's __init__ first
    return frozenset(seen)


@functools.cache
def code_version(modules: frozenset[str] = frozenset({"helpers"}), skip: frozenset[str] = frozenset()) -> str:
    """First 16 hex digits of the sha256 of the sources of ``modules``' closure without ``skip`` (every
    ``.py`` file of the package for the package alone)."""
    if modules == frozenset({"helpers"}):
        paths = sorted(PACKAGE.rglob("*.py"))
    else:
        paths = sorted(source_file(module) for module in closure(modules, skip))
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def module_version(module: str | None) -> str:
    """The version of the code a record measured by ``module`` depends on: ``code_version`` of its
    closure without ``BOOKKEEPING``; the whole package's for code outside it (tests)."""
    if module and source_file(module):
        return code_version(frozenset({module}), BOOKKEEPING)
    return code_version()
