"""Measurement versions: what keeps a record valid while the code around it improves.

A record is reused while three things are unchanged: its configuration (hashed into its key by value), the
machine (its provenance id) and the code that measures. The code enters as an explicit version per kind of
measurement, kept in ``measurements.json`` beside this module: editing prose, plots, tables, docstrings or
comments, or moving a helper to another module, leaves every record valid, and raising a kind's version
makes its records stale, so that they are measured again where they are needed. A GPU measured for fifteen
minutes stays in the book while its chapters are rewritten on a CPU.

A version is only as good as the discipline of raising it, so each kind also names the functions its
measurement starts from (``roots``: the ``stored_*`` function that builds its configuration and calls the
store), and ``code_digest`` hashes the code they reach: every definition they refer to, followed through
the helpers package (a worker that a launcher starts by module name brings its ``__main__`` block), with
docstrings, comments, annotations and formatting left out, and every reference written as the referenced
definition's own name, so that moving a helper to another module changes nothing. The store's own
bookkeeping (``NOT_FOLLOWED``) cannot change a measured value and is not followed. ``measurements.json``
keeps, with each version, the digest a person last reviewed; ``tests/test_measurements.py`` fails when the
code a kind runs no longer has it, until someone decides:

- what is computed or timed changed: ``python -m helpers.measurements --bump KIND`` (its records go stale);
- it did not (a refactor, a rename, a branch no measured configuration takes):
  ``python -m helpers.measurements --accept KIND`` (its records stay valid).
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from helpers.dependencies import PACKAGE, module_file

REGISTRY = PACKAGE / "measurements.json"
# Code that stores, describes or keys measurements but cannot change a measured value.
NOT_FOLLOWED = frozenset(
    {"helpers.results", "helpers.paths", "helpers.dependencies", "helpers.measurements", "helpers.provenance"}
)
WORKER = re.compile(r"helpers(\.\w+)+")  # a module started by name in another process
FACTORY = re.compile(r"(helpers(?:\.\w+)+):(\w+)")  # a "module:callable" spec


def is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def is_main_block(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":``"""
    test = getattr(statement, "test", None)
    return (
        isinstance(statement, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def assigned_names(statement: ast.stmt) -> list[str] | None:
    """The names a module-level assignment binds, or None when it binds something else (an item, an
    attribute: a side effect)."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    names = []
    for target in targets:
        parts = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(part, ast.Name) for part in parts):
            return None
        names += [part.id for part in parts]
    return names


@dataclass
class ModuleIndex:
    """One module's top-level names: definitions, imports, side effects and its ``__main__`` block."""

    name: str
    definitions: dict[str, ast.AST] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local: (module, attribute)
    effects: list[ast.stmt] = field(default_factory=list)
    main: list[ast.stmt] = field(default_factory=list)


class Package:
    """The ``helpers`` package under ``root`` (this one, or an old tree's for a migration), read as text."""

    def __init__(self, root: Path = PACKAGE) -> None:
        self.root = Path(root)
        self._indices: dict[str, ModuleIndex] = {}

    def source(self, module: str) -> Path | None:
        """The file of a ``helpers`` module or package, or None for anything else."""
        return module_file(self.root, module)

    def index(self, module: str) -> ModuleIndex:
        if module not in self._indices:
            self._indices[module] = self._read(module)
        return self._indices[module]

    def _read(self, module: str) -> ModuleIndex:
        path = self.source(module)
        index = ModuleIndex(module)
        package = module if path and path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for statement in ast.parse(path.read_text()).body if path else []:
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        index.imports[alias.asname] = (alias.name, None)
                    else:  # `import helpers.models` binds `helpers`
                        top = alias.name.split(".")[0]
                        index.imports[top] = (top, None)
            elif isinstance(statement, ast.ImportFrom):
                base = statement.module or ""
                if statement.level:  # relative: from the package of this module
                    up = package.split(".")[: len(package.split(".")) - statement.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for alias in statement.names:
                    index.imports[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                index.definitions[statement.name] = statement
            elif isinstance(statement, ast.Assign | ast.AnnAssign) and assigned_names(statement):
                for name in assigned_names(statement):
                    index.definitions[name] = statement
            elif is_main_block(statement):
                index.main.append(statement)
            elif not is_docstring(statement):
                index.effects.append(statement)
        return index

    # -- resolving a name to what it names: ("def", module, name), ("module", module) or None --------------

    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> tuple | None:
        if (module, name) in seen:
            return None
        index = self.index(module)
        if name in index.definitions:
            return ("def", module, name)
        if name not in index.imports:
            return None
        target, attribute = index.imports[name]
        if attribute is None:
            return ("module", target) if self.source(target) else None
        return self.member(("module", target), attribute, seen | {(module, name)})

    def member(self, owner: tuple | None, attribute: str, seen: frozenset = frozenset()) -> tuple | None:
        """``owner.attribute`` where ``owner`` is a module: a submodule, or a name the module binds."""
        if owner is None or owner[0] != "module":
            return None
        if self.source(f"{owner[1]}.{attribute}"):
            return ("module", f"{owner[1]}.{attribute}")
        return self.resolve(owner[1], attribute, seen) if self.source(owner[1]) else None

    def reference(self, module: str, node: ast.AST) -> tuple | None:
        """What a Name or an Attribute chain (``models.build_model``) in ``module`` refers to."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self.resolve(module, node.id)
        if isinstance(node, ast.Attribute):
            owner = self.reference(module, node.value)
            if owner is not None and owner[0] == "module":
                return self.member(owner, node.attr)
        return None

    def string_reference(self, value: str) -> tuple | None:
        """A worker started by module name, or a ``module:callable`` factory."""
        if WORKER.fullmatch(value) and self.source(value):
            return ("main", value)
        if (found := FACTORY.fullmatch(value)) and self.source(found[1]):
            return self.resolve(found[1], found[2])
        return None


class Canonical(ast.NodeTransformer):
    """A definition's code as it behaves: no docstrings or annotations, and every reference to a helper
    written as that helper's own name, wherever it lives and however it was imported."""

    def __init__(self, package: Package, module: str, found: set) -> None:
        self.package, self.module, self.found = package, module, found

    def _named(self, node: ast.AST, target: tuple) -> ast.AST:
        if target[0] == "def":
            self.found.add(target)
            return ast.Name(id=target[2], ctx=ast.Load())
        return ast.Name(id=f"module {target[1]}", ctx=ast.Load())

    def visit_Name(self, node: ast.Name) -> ast.AST:
        target = self.package.reference(self.module, node)
        return self._named(node, target) if target else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        target = self.package.reference(self.module, node)
        if target and target[1] not in NOT_FOLLOWED:
            return self._named(node, target)
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and (target := self.package.string_reference(node.value)):
            self.found.add(target)
        return node

    def _body(self, node):
        self.generic_visit(node)
        if node.body and is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
        return node

    def visit_FunctionDef(self, node):
        node.returns = None
        for argument in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                         node.args.vararg, node.args.kwarg]:  # fmt: skip
            if argument is not None:
                argument.annotation = None
        return self._body(node)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = _body


def _dump(package: Package, module: str, node: ast.AST, found: set) -> str:
    copied = copy.deepcopy(node)  # the index keeps the original
    return ast.dump(Canonical(package, module, found).visit(copied), annotate_fields=False)


def code_parts(roots: list[str], package: Package | None = None) -> list[tuple[str, str]]:
    """``(what, canonical code)`` of everything ``roots`` ("module:function") reach, sorted."""
    package = package or Package()
    todo = []
    for root in roots:
        module, name = root.split(":")
        if name not in package.index(module).definitions:
            raise ValueError(f"measurement root {root} does not exist: update measurements.json")
        todo.append(("def", module, name))
    parts, seen, touched = [], set(), set()
    while todo:
        target = todo.pop()
        if target in seen or target[1] in NOT_FOLLOWED:
            continue
        seen.add(target)
        module = target[1]
        index = package.index(module)
        found: set = set()
        if target[0] == "def":
            node = index.definitions[target[2]]
            parts.append((f"{target[2]} ({type(node).__name__})", _dump(package, module, node, found)))
        else:  # a worker: what running the module as __main__ adds
            code = "\n".join(_dump(package, module, statement, found) for statement in index.main)
            parts.append((f"{module} run as a worker", code))
        touched.add(module)
        todo += sorted(found - seen)
    owners = {".".join(m.split(".")[:depth]) for m in touched for depth in range(1, m.count(".") + 2)}
    for owner in owners:  # what importing each module (and its packages) does besides defining names
        effects = [_dump(package, owner, statement, set()) for statement in package.index(owner).effects]
        if effects:
            parts.append((f"importing {owner}", "\n".join(effects)))
    return sorted(parts)


def code_digest(roots: list[str], package: Package | None = None) -> str:
    """First 16 hex digits of the sha256 of ``code_parts(roots)``."""
    digest = hashlib.sha256()
    for what, code in code_parts(roots, package):
        digest.update(f"{what}\0{code}\0".encode())
    return digest.hexdigest()[:16]


@functools.cache
def registry() -> dict[str, dict]:
    """``measurements.json``: per kind, its version, roots and reviewed digest."""
    return json.loads(REGISTRY.read_text())


def code_version(kind: str) -> str:
    """The code version a record of ``kind`` is stored under and must still have to be reused: ``v<n>``
    from the registry (``unregistered`` for a kind the study does not measure: a test's)."""
    entry = registry().get(kind)
    return f"v{entry['version']}" if entry else "unregistered"


def write_registry(entries: dict[str, dict]) -> None:
    REGISTRY.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    registry.cache_clear()


def changed() -> dict[str, tuple[str, str]]:
    """Kinds whose code no longer has its reviewed digest: ``{kind: (reviewed, now)}``."""
    package = Package()
    found = {}
    for kind, entry in registry().items():
        now = code_digest(entry["roots"], package)
        if now != entry["digest"]:
            found[kind] = (entry["digest"], now)
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.measurements``: each kind's version and whether its code changed since review."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--accept", nargs="+", metavar="KIND", help="the change computes and times the same")
    parser.add_argument("--bump", nargs="+", metavar="KIND", help="the change alters what is measured")
    args = parser.parse_args(argv)
    entries = {kind: dict(entry) for kind, entry in registry().items()}
    for kind in [*(args.accept or []), *(args.bump or [])]:
        if kind not in entries:
            parser.error(f"unknown kind {kind!r}; known: {', '.join(sorted(entries))}")
    package = Package()
    for kind in args.accept or []:
        entries[kind]["digest"] = code_digest(entries[kind]["roots"], package)
    for kind in args.bump or []:
        entries[kind].update(version=entries[kind]["version"] + 1,
                             digest=code_digest(entries[kind]["roots"], package))  # fmt: skip
    if args.accept or args.bump:
        write_registry(entries)
    pending = changed()
    for kind, entry in sorted(registry().items()):
        state = "code changed since review: --accept or --bump" if kind in pending else "reviewed"
        print(f"{kind:28} v{entry['version']}  {state}")
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main())
