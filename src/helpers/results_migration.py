"""Carry a results folder from schema 1 to schema 2 without losing a record.

Schema 1 keyed a record by the digest of its measuring module's whole source and of every helper module
it imports (``dependencies.module_version``), so any prose or docstring edit there made it stale. Schema 2
keys it by its kind's measurement version (``helpers.measurements``). Carrying a folder over:

- a record that schema 1 still reuses here (its ``code_version`` is its module's digest in this tree) is
  re-keyed under its kind's current version;
- a record that schema 1 had set aside only because code moved or prose changed is recovered when a tree
  it was measured by is given (``--legacy-tree``, a checkout of that commit): its module's digest there
  must equal its ``code_version``, and its kind's measuring code there (``measurements.code_parts``)
  must equal today's, or differ only where a person reviewed the difference and found it computes and
  times the same (``--accept KIND``, as ``python -m helpers.measurements --accept`` does for today's code);
  the report names the parts that differ;
- every other record (and one whose file name is not the hash of its own contents) is left as it is:
  stale, never reused, listed in the report.

Nothing is deleted; a record is rewritten under its new key and its old file removed only after the new
one is on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.dependencies import module_version
from helpers.measurements import Package, code_parts, registry
from helpers.results import SCHEMA_VERSION, read_json, short_hash, write_json_atomically


def legacy_versions(tree: Path, modules: set[str]) -> dict[str, str]:
    """``dependencies.module_version`` of each module as the tree under ``tree/src`` computed it (run by
    that tree's own code, in a child process)."""
    script = (
        "import json, sys\nfrom helpers.dependencies import module_version\n"
        "print(json.dumps({m: module_version(m) for m in json.loads(sys.argv[1])}))"
    )
    environment = {**os.environ, "PYTHONPATH": str(Path(tree) / "src")}
    output = subprocess.run(
        [sys.executable, "-c", script, json.dumps(sorted(modules))],
        env=environment, cwd=tree, capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return json.loads(output)


def roots_in(package: Package, roots: list[str]) -> list[str]:
    """``roots`` as they were in another tree: each function where it is, or the one module defining it."""
    found = []
    for root in roots:
        module, name = root.split(":")
        if name in package.index(module).definitions:
            found.append(root)
            continue
        modules = [
            ".".join(("helpers", *path.relative_to(package.root).with_suffix("").parts)).removesuffix(
                ".__init__"
            )
            for path in sorted(package.root.rglob("*.py"))
        ]
        owners = [m for m in modules if name in package.index(m).definitions]
        if len(owners) != 1:
            raise ValueError(f"{root}: defined in {len(owners)} modules of {package.root}")
        found.append(f"{owners[0]}:{name}")
    return found


def record_key(record: dict, code_version: str) -> str:
    """The key the store gives ``record``'s configuration on its machine under ``code_version``."""
    return short_hash(
        {"config": record["config"], "provenance_id": record["provenance_id"], "code_version": code_version}
    )


def differences(then: list[tuple[str, str]], now: list[tuple[str, str]]) -> list[str]:
    """The parts of a kind's measuring code (``code_parts``) that one tree has and the other lacks."""
    return sorted({what for what, _ in set(then) ^ set(now)})


def migrate(folder: Path, legacy_trees: list[Path] = (), accepted: set[str] = frozenset()) -> dict:
    """Carry ``folder`` (``data/results/<run>``) to schema 2; returns what happened to each record,
    ``{"current": [...], "recovered": [...], "stale": [...]}`` (file names), and ``"differences"``:
    per kind recovered from a legacy tree, the parts of its code that differ from today's."""
    folder = Path(folder)
    marker = folder / "store.json"
    store = read_json(marker) or {}
    if store.get("schema_version") != 1:
        raise ValueError(f"{folder} is schema {store.get('schema_version')}, not 1: nothing to carry over")
    kinds = registry()
    today = {kind: code_parts(entry["roots"]) for kind, entry in kinds.items()}
    paths = sorted((folder / "records").glob("*.json"))
    records = {path: read_json(path) for path in paths}
    modules = {r["module"] for r in records.values() if r and r.get("module")}
    here = {module: module_version(module) for module in modules}
    trees = []
    for tree in legacy_trees:
        package = Package(Path(tree) / "src" / "helpers")
        then = {}
        for kind, entry in kinds.items():
            try:
                then[kind] = code_parts(roots_in(package, entry["roots"]), package)
            except ValueError:  # a kind this tree did not measure
                continue
        trees.append((legacy_versions(Path(tree), modules), then))
    report = {"current": [], "recovered": [], "stale": [], "differences": {}}
    for path, record in records.items():
        if not record or record["kind"] not in kinds:
            report["stale"].append(path.name)
            continue
        kind, version = record["kind"], record.get("code_version")
        if path.name != f"{record_key(record, version)}.json":  # not what the store wrote: never reused
            report["stale"].append(path.name)
            continue
        if version == here.get(record.get("module")):
            outcome = "current"
        elif measured_by := [then[kind] for versions, then in trees
                             if version == versions.get(record.get("module")) and kind in then]:  # fmt: skip
            differ = differences(measured_by[0], today[kind])
            if differ and kind not in accepted:
                report["stale"].append(path.name)
                report["differences"][kind] = differ
                continue
            outcome = "recovered"
            if differ:
                report["differences"][kind] = differ
        else:
            report["stale"].append(path.name)
            continue
        new_version = f"v{kinds[kind]['version']}"
        key = record_key(record, new_version)
        moved = {**record, "key": key, "code_version": new_version, "schema_version": SCHEMA_VERSION,
                 "legacy_code_version": version}  # fmt: skip
        write_json_atomically(folder / "records" / f"{key}.json", moved)
        if path.name != f"{key}.json":
            path.unlink()
        report[outcome].append(f"{key}.json")
    write_json_atomically(marker, {**store, "schema_version": SCHEMA_VERSION, "migrated_from": 1})
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.results_migration data/results/cpu ...``: carry folders to schema 2."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument(
        "--legacy-tree", action="append", type=Path, default=[],
        help="a checkout of a commit that measured records schema 1 had set aside (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--accept", nargs="+", default=[], metavar="KIND",
        help="kinds whose code differences from a legacy tree were reviewed: they compute and time the same",
    )  # fmt: skip
    args = parser.parse_args(argv)
    for folder in args.folders:
        try:
            report = migrate(folder, args.legacy_tree, set(args.accept))
        except ValueError as error:
            parser.error(str(error))
        outcomes = ("current", "recovered", "stale")
        print(f"{folder}: " + ", ".join(f"{len(report[outcome])} {outcome}" for outcome in outcomes))
        for name in report["stale"]:
            print(f"  stale, left as it was: {name}")
        for kind, parts in report["differences"].items():
            state = "accepted" if kind in args.accept else "not accepted (--accept KIND after review)"
            print(f"  {kind}: measuring code differs from the legacy tree's in {', '.join(parts)}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
