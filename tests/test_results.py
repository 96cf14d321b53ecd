"""helpers.results: atomic records, reuse on rerun, provenance, refusing foreign folders."""

import json

import pytest

from helpers import results

HARDWARE = {"cpu_model": "test CPU", "usable_cores": 2, "gpus": []}


@pytest.fixture
def store(tmp_path):
    return results.ResultStore("test-run", root=tmp_path, hardware=HARDWARE)


def test_measure_writes_a_record_with_provenance(store):
    record = store.measure({"kind": "demo", "x": 1}, lambda: {"seconds": 0.5})
    assert record["result"] == {"seconds": 0.5} and record["provenance_id"] == store.provenance_id
    assert json.loads(store.path({"kind": "demo", "x": 1}).read_text()) == record
    provenance = json.loads((store.folder / "provenance" / f"{store.provenance_id}.json").read_text())
    assert provenance["hardware"] == HARDWARE


def test_rerun_reuses_finished_records(store, tmp_path):
    calls = []
    measure = lambda: calls.append(1) or {"value": len(calls)}  # noqa: E731
    first = store.measure({"kind": "demo", "x": 2}, measure)
    again = results.ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    assert again.measure({"kind": "demo", "x": 2}, measure) == first
    assert calls == [1]
    store.measure({"kind": "demo", "x": 3}, measure)
    assert calls == [1, 1]


def test_other_hardware_measures_again(store, tmp_path):
    store.measure({"kind": "demo"}, lambda: {"value": 1})
    other = results.ResultStore("test-run", root=tmp_path, hardware={**HARDWARE, "usable_cores": 4})
    assert other.get({"kind": "demo"}) is None
    assert other.measure({"kind": "demo"}, lambda: {"value": 2})["result"] == {"value": 2}
    assert len(other.records("demo")) == 2


def test_failed_measurement_leaves_no_record(store):
    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.measure({"kind": "demo"}, fail)
    assert store.get({"kind": "demo"}) is None
    assert not list(store.folder.rglob("*.tmp"))


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "record.json"
    results.write_json_atomically(path, {"value": 1})
    with pytest.raises(TypeError):
        results.write_json_atomically(path, {"value": object()})
    assert json.loads(path.read_text()) == {"value": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_config_needs_a_kind_and_json(store):
    with pytest.raises(ValueError, match="kind"):
        store.measure({"x": 1}, dict)
    with pytest.raises(TypeError):
        store.measure({"kind": "demo", "x": object()}, dict)


def test_folder_of_another_schema_is_refused_untouched(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "store.json").write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(results.ResultsError, match="schema version 0"):
        results.ResultStore("old", root=tmp_path, hardware=HARDWARE)
    assert [p.name for p in folder.iterdir()] == ["store.json"]


@pytest.mark.parametrize("name", ["", "../escape", ".hidden"])
def test_bad_run_names_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match="plain folder name"):
        results.ResultStore(name, root=tmp_path, hardware=HARDWARE)


def test_frame_is_tidy(store):
    for size in (10, 20):
        store.measure({"kind": "demo", "batch_size": size}, lambda s=size: {"seconds": s / 10, "all": [1]})
    frame = store.frame("demo").sort_values("batch_size")
    assert frame["batch_size"].tolist() == [10, 20] and frame["seconds"].tolist() == [1.0, 2.0]
    assert "all" not in frame.columns and (frame["provenance_id"] == store.provenance_id).all()
