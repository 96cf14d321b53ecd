"""helpers.measurements: a record stays valid through prose and moves, and the guard catches changed code."""

import ast
import json
import textwrap
from pathlib import Path

import pytest

from helpers import measurements, results
from helpers.paths import results_dir

SOURCES = Path(measurements.__file__).parent


def test_no_measuring_code_changed_since_its_version_was_reviewed():
    pending = measurements.changed()
    assert not pending, (
        "the code these kinds measure with changed since review: "
        + ", ".join(sorted(pending))
        + ". If what is computed or timed changed: python -m helpers.measurements --bump KIND (its records "
        "go stale, the GPU's included); if not: python -m helpers.measurements --accept KIND"
    )


def kinds_measured(source: str) -> set[str]:
    """The kinds the functions of ``source`` measure: the ``"kind"`` of a dict built in a function that
    calls ``<store>.measure``, and the kind every collective task passes to ``runs._stored``."""
    found = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
        for call in calls:
            if getattr(call.func, "id", None) == "_stored" and isinstance(call.args[1], ast.Constant):
                found.add(call.args[1].value)
        if not any(getattr(call.func, "attr", None) == "measure" for call in calls):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Dict):
                pairs = zip(node.keys, node.values, strict=True)
                found |= {
                    value.value
                    for key, value in pairs
                    if getattr(key, "value", None) == "kind" and isinstance(value, ast.Constant)
                }
    return found


def test_every_kind_the_study_measures_is_registered():
    literals = set().union(*(kinds_measured(path.read_text()) for path in SOURCES.rglob("*.py")))
    assert "ddp_run" in literals and "collective_benchmark" in literals  # the scan finds both forms
    stored = {
        json.loads(path.read_text())["kind"]
        for run in ("cpu", "gpu")
        for path in (results_dir() / run / "records").glob("*.json")
    }
    assert literals | stored <= set(measurements.registry())
    for kind, entry in measurements.registry().items():
        assert entry["version"] >= 1 and entry["roots"], kind


def write_package(root: Path, files: dict[str, str]) -> measurements.Package:
    package = root / "helpers"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    return measurements.Package(package)


TIMING = '''
    """Timing helpers."""
    import time

    REPEATS = 5

    def time_it(function):
        """Median of REPEATS calls."""
        # a comment
        runs = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            function()
            runs.append(time.perf_counter() - started)
        return sorted(runs)[len(runs) // 2]

    def explain(seconds):
        return f"it took {seconds:.3f} s"
    '''
STORED = '''
    from helpers import timing

    WORKER = "helpers.worker"

    def stored_timing(store, size: int) -> dict:
        """Through the store."""
        return store.measure({"kind": "demo", "size": size}, lambda: {"s": timing.time_it(lambda: size)})
    '''
WORKER = """
    def run():
        return 1

    if __name__ == "__main__":
        run()
    """


def digest(tmp_path, **files):
    package = write_package(tmp_path, {"timing.py": TIMING, "stored.py": STORED, **files})
    return measurements.code_digest(["helpers.stored:stored_timing"], package)


def test_prose_docstrings_comments_and_annotations_leave_the_digest(tmp_path):
    before = digest(tmp_path / "a")
    edited = (
        TIMING.replace('"""Median of REPEATS calls."""', '"""The median, of REPEATS calls."""')
        .replace("# a comment", "# another comment, longer")
        .replace('f"it took {seconds:.3f} s"', '"prose that nothing measured reads"')
    )
    assert digest(tmp_path / "b", **{"timing.py": edited}) == before
    annotated = STORED.replace("size: int) -> dict:", "size):")
    assert digest(tmp_path / "c", **{"stored.py": annotated}) == before


def test_a_change_to_what_is_timed_changes_the_digest(tmp_path):
    before = digest(tmp_path / "a")
    assert digest(tmp_path / "b", **{"timing.py": TIMING.replace("REPEATS = 5", "REPEATS = 3")}) != before
    slower = TIMING.replace("function()\n", "function()\n            function()\n")
    assert digest(tmp_path / "c", **{"timing.py": slower}) != before


def test_moving_a_helper_to_another_module_leaves_the_digest(tmp_path):
    before = digest(tmp_path / "a")
    moved = {
        "timing.py": "",
        "clock.py": TIMING,
        "stored.py": STORED.replace(
            "from helpers import timing", "from helpers.clock import time_it"
        ).replace("timing.time_it", "time_it"),
    }
    assert digest(tmp_path / "b", **moved) == before


def test_a_worker_started_by_name_is_followed_into_its_main_block(tmp_path):
    started = STORED.replace('"s": timing.time_it(lambda: size)', '"s": WORKER')
    before = digest(tmp_path / "a", **{"stored.py": started, "worker.py": WORKER})
    changed = WORKER.replace("return 1", "return 2")
    assert digest(tmp_path / "b", **{"stored.py": started, "worker.py": changed}) != before


def test_a_record_is_valid_until_its_kind_is_bumped(tmp_path, monkeypatch):
    registry = {"demo": {"version": 1, "roots": ["helpers.train:stored_training"], "digest": "x"}}
    monkeypatch.setattr(measurements, "registry", lambda: registry)
    store = results.ResultStore("run", root=tmp_path, hardware={"cpu_model": "test"})
    first = store.measure({"kind": "demo"}, lambda: {"value": 1})
    assert first["code_version"] == "v1" and store.records("demo") == [first]
    registry["demo"]["version"] = 2  # what `--bump demo` writes
    assert store.get({"kind": "demo"}) is None and store.records("demo") == []
    assert store.measure({"kind": "demo"}, lambda: {"value": 2})["result"] == {"value": 2}
    assert len(store.records("demo", all_machines=True)) == 2  # the stale record is kept, not reused


def test_accept_and_bump_rewrite_the_registry(tmp_path, monkeypatch, capsys):
    path = tmp_path / "measurements.json"
    path.write_text(json.dumps({"training": {"version": 1, "roots": ["helpers.train:stored_training"],
                                             "digest": "stale"}}))  # fmt: skip
    monkeypatch.setattr(measurements, "REGISTRY", path)
    measurements.registry.cache_clear()
    try:
        assert measurements.main([]) == 1 and "code changed since review" in capsys.readouterr().out
        assert measurements.main(["--accept", "training"]) == 0
        entry = json.loads(path.read_text())["training"]
        assert entry["version"] == 1 and entry["digest"] == measurements.code_digest(entry["roots"])
        assert measurements.main(["--bump", "training"]) == 0
        assert json.loads(path.read_text())["training"]["version"] == 2
        with pytest.raises(SystemExit):
            measurements.main(["--accept", "no_such_kind"])
    finally:
        measurements.registry.cache_clear()
