"""helpers.results_migration: schema 1 to 2 without losing a record, and every committed record current."""

import json
import shutil
from pathlib import Path

import pytest

from helpers import dependencies, measurements, results
from helpers.paths import results_dir
from helpers.results_migration import main, migrate, record_key

HARDWARE = {"cpu_model": "test CPU", "usable_cores": 2, "gpus": []}
SOURCES = Path(measurements.__file__).parent


def legacy_record(folder: Path, config: dict, module: str, version: str) -> Path:
    """A record as schema 1 wrote it: keyed by its module's legacy code version."""
    provenance = results.short_hash(HARDWARE)
    key = results.short_hash({"config": config, "provenance_id": provenance, "code_version": version})
    record = {"schema_version": 1, "key": key, "kind": config["kind"], "config": config,
              "result": {"seconds": 1.0}, "provenance_id": provenance, "module": module,
              "code_version": version, "measured_at": "2026-11-26T00:00:00+00:00"}  # fmt: skip
    results.write_json_atomically(folder / "records" / f"{key}.json", record)
    return folder / "records" / f"{key}.json"


@pytest.fixture
def legacy_folder(tmp_path) -> Path:
    folder = tmp_path / "cpu"
    results.write_json_atomically(folder / "store.json", {"schema_version": 1, "created": "then"})
    results.write_json_atomically(
        folder / "provenance" / f"{results.short_hash(HARDWARE)}.json",
        {"provenance_id": results.short_hash(HARDWARE), "first_seen": "then", "hardware": HARDWARE},
    )
    return folder


def test_a_folder_of_schema_one_is_refused_with_the_way_to_carry_it_over(legacy_folder):
    with pytest.raises(results.ResultsError, match="helpers.results_migration"):
        results.ResultStore("cpu", root=legacy_folder.parent, hardware=HARDWARE)


def test_records_schema_one_reused_are_reused_after_it(legacy_folder):
    config = {"kind": "copy_calibration", "megabytes": 1, "repeats": 3, "device": "cpu", "to": "cpu",
              "fresh": True, "threads": 2}  # fmt: skip
    current = dependencies.module_version("helpers.dataparallel")
    legacy_record(legacy_folder, config, "helpers.dataparallel", current)
    stale = legacy_record(legacy_folder, {**config, "repeats": 5}, "helpers.dataparallel", "0123456789abcdef")
    corrupt = legacy_record(legacy_folder, {**config, "repeats": 7}, "helpers.dataparallel", current)
    corrupt.rename(corrupt.with_name("0000000000000000.json"))  # its name is not its contents' hash
    report = migrate(legacy_folder)
    assert (len(report["current"]), len(report["recovered"]), len(report["stale"])) == (1, 0, 2)
    store = results.ResultStore("cpu", root=legacy_folder.parent, hardware=HARDWARE)
    record = store.get(config)
    assert record["code_version"] == "v1" and record["result"] == {"seconds": 1.0}
    assert store.measure(config, lambda: pytest.fail("a carried record must be reused")) == record
    assert stale.exists() and store.records("copy_calibration") == [record]
    with pytest.raises(ValueError, match="not 1"):
        migrate(legacy_folder)  # carried once: a second run changes nothing


def test_a_record_set_aside_by_an_edit_is_recovered_from_the_tree_that_measured_it(legacy_folder, tmp_path):
    """Schema 1 staled a record when a comment changed; the tree it was measured by proves the measuring
    code is the same, so it is recovered, unless that code differs and nobody accepted the difference."""
    tree = tmp_path / "then"
    shutil.copytree(SOURCES, tree / "src" / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    module = tree / "src" / "helpers" / "dataparallel.py"
    module.write_text("# an older comment\n" + module.read_text())
    then_version = dependencies_in(tree, "helpers.dataparallel")
    assert then_version != dependencies.module_version("helpers.dataparallel")
    config = {"kind": "copy_calibration", "megabytes": 2, "repeats": 3, "device": "cpu", "to": "cpu",
              "fresh": False, "threads": 2}  # fmt: skip
    legacy_record(legacy_folder, config, "helpers.dataparallel", then_version)
    assert main([str(legacy_folder), "--legacy-tree", str(tree)]) == 0
    store = results.ResultStore("cpu", root=legacy_folder.parent, hardware=HARDWARE)
    assert store.get(config)["legacy_code_version"] == then_version

    other = tmp_path / "other" / "cpu"  # the same record, measured by code that copied differently
    shutil.copytree(legacy_folder.parent / "cpu" / "provenance", other / "provenance")
    results.write_json_atomically(other / "store.json", {"schema_version": 1})
    copying = module.read_text().replace("float(np.median(seconds[1:]))", "float(min(seconds[1:]))")
    module.write_text(copying)
    legacy_record(other, config, "helpers.dataparallel", dependencies_in(tree, "helpers.dataparallel"))
    report = migrate(other, [tree])
    assert len(report["stale"]) == 1 and report["differences"] == {
        "copy_calibration": ["copy_seconds_per_byte (FunctionDef)"]
    }


def dependencies_in(tree: Path, module: str) -> str:
    from helpers.results_migration import legacy_versions

    return legacy_versions(tree, {module})[module]


@pytest.mark.parametrize("run", ["cpu", "gpu"])
def test_every_committed_record_is_current(run):
    """The migration kept every record (cpu 228, gpu 219 with the H200's 47 adopted), and nothing since has
    staled one by accident: raising a kind's version means removing its stale records knowingly."""
    folder = results_dir() / run
    assert json.loads((folder / "store.json").read_text())["schema_version"] == results.SCHEMA_VERSION
    records = [json.loads(path.read_text()) for path in sorted((folder / "records").glob("*.json"))]
    assert records
    stale = [
        f"{r['key']} ({r['kind']})"
        for r in records
        if r["code_version"] != measurements.code_version(r["kind"])
        or r["key"] != record_key(r, r["code_version"])
    ]
    assert not stale, f"stale records in {folder}: {', '.join(stale)}"
