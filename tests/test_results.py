"""helpers.results: atomic records, reuse on rerun, provenance, refusing foreign folders."""

import datetime
import json

import pytest
import torch
from torch.utils.data import TensorDataset

from helpers import hardware, measurements, results, train
from helpers.worker import set_tf32

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
    assert len(other.records("demo")) == 1 and len(other.records("demo", all_machines=True)) == 2


def test_a_new_kernel_build_is_the_same_machine(tmp_path):
    booted = {**HARDWARE, "memory_bytes": 25_276_514_304, "platform": "Linux 6.18.44-fc-v595 x86_64"}
    first = results.ResultStore("reboot", root=tmp_path, hardware=booted)
    record = first.measure({"kind": "demo"}, lambda: {"value": 1})
    # the same virtual machine after a reboot: another kernel build, 12 KiB less memory
    rebooted = {**booted, "memory_bytes": 25_276_502_016, "platform": "Linux 6.18.44-fc-v669 x86_64"}
    again = results.ResultStore("reboot", root=tmp_path, hardware=rebooted)
    assert again.provenance_id == first.provenance_id != results.short_hash(rebooted)
    assert again.get({"kind": "demo"}) == record and again.records("demo") == [record]
    # a GiB of memory more, or another processor, is another machine
    for other in ({"memory_bytes": booted["memory_bytes"] + 2**30}, {"cpu_model": "other CPU"}):
        elsewhere = results.ResultStore("reboot", root=tmp_path, hardware={**rebooted, **other})
        assert elsewhere.provenance_id == results.short_hash({**rebooted, **other})
        assert elsewhere.get({"kind": "demo"}) is None


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


def test_records_of_other_machines_and_code_are_kept_but_not_shown_or_reused(tmp_path):
    old = results.ResultStore("run", root=tmp_path, hardware=HARDWARE, code="old code")
    old.measure({"kind": "demo"}, lambda: {"value": 1})
    new = results.ResultStore("run", root=tmp_path, hardware=HARDWARE, code="new code")
    assert new.get({"kind": "demo"}) is None and new.records() == []
    assert new.measure({"kind": "demo"}, lambda: {"value": 2})["result"] == {"value": 2}
    elsewhere = results.ResultStore(
        "run", root=tmp_path, hardware={**HARDWARE, "cpu_model": "x"}, code="new code"
    )
    assert elsewhere.records() == []
    assert sorted(r["result"]["value"] for r in elsewhere.records(all_machines=True)) == [1, 2]
    assert new.records("demo")[0]["code_version"] == "new code"


def test_records_measured_apart_are_hours_apart_and_interleaved_ones_are_not():
    def at(*times):
        return [{"measured_at": f"2026-11-26T{t}:00+00:00"} for t in times]

    assert results.hours_apart(at("15:42", "15:50"), at("20:53", "20:54")) == pytest.approx(5 + 3 / 60)
    assert results.hours_apart(at("20:53"), at("15:42", "15:50")) == pytest.approx(5 + 3 / 60)  # either order
    assert results.hours_apart(at("15:42", "15:50"), at("15:46")) == 0  # alternating rounds overlap
    assert results.hours_apart(at("15:42"), [{"config": {}}]) == 0  # a record without its time: unknown


def test_an_unreadable_record_is_set_aside_and_measured_again(store):
    store.measure({"kind": "demo"}, lambda: {"value": 1})
    path = store.path({"kind": "demo"})
    path.write_text('{"kind": "demo", "result": {"val')  # cut off mid-write by a full disk
    with pytest.warns(UserWarning, match="unreadable record .* moved to"):
        assert store.records() == []
    assert (path.parent / "unreadable" / path.name).exists() and not path.exists()
    assert store.measure({"kind": "demo"}, lambda: {"value": 2})["result"] == {"value": 2}


def test_reading_writes_nothing(tmp_path):
    store = results.ResultStore("readonly", root=tmp_path, hardware=HARDWARE)
    store.records()
    assert not (store.folder / "provenance").exists()  # a reader leaves no trace of its machine


def test_the_ledger_counts_what_each_measurement_did(store, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger"
    monkeypatch.setenv(results.LEDGER_VARIABLE, str(ledger))
    first = store.measure({"kind": "demo"}, lambda: {"value": 1})
    store.measure({"kind": "demo"}, lambda: {"value": 1})
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["measured", "reused"]
    assert all(
        line["config"] == {"kind": "demo"} and line["measured_at"] == first["measured_at"] for line in lines
    )


def test_reading_another_machines_records_measures_nothing(tmp_path, monkeypatch):
    gpu = {**HARDWARE, "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 2**30,
                                 "compute_capability": "9.0"}]}  # fmt: skip
    measured = results.ResultStore("gpu", root=tmp_path, hardware=gpu).measure(
        {"kind": "demo"}, lambda: {"v": 1}
    )
    monkeypatch.setenv(hardware.RECORDS_OF, measured["provenance_id"])
    monkeypatch.setenv(results.CHAPTER_VARIABLE, "03_some_chapter")
    reader = results.ResultStore("gpu", root=tmp_path)
    assert reader.records_of == measured["provenance_id"] and reader.hardware == gpu
    assert reader.measure({"kind": "demo"}, lambda: pytest.fail("nothing is measured")) == measured
    with pytest.raises(
        results.MissingRecord,
        match=r'03_some_chapter: machine \w+ has no demo record of {"kind":"demo","x":2}',
    ):
        reader.measure({"kind": "demo", "x": 2}, lambda: pytest.fail("nothing is measured"))
    assert len(list((tmp_path / "gpu" / "records").glob("*.json"))) == 1
    with pytest.raises(results.ResultsError, match="holds no records of machine"):
        results.ResultStore("cpu", root=tmp_path)


def test_a_record_carries_the_version_of_the_code_that_measured_it(tmp_path):
    store = results.ResultStore("modules", root=tmp_path, hardware=HARDWARE)
    record = train.stored_step_timing(
        store, "LinearNet", TensorDataset(torch.zeros(4, 1, 12_000), torch.zeros(4, dtype=torch.long)),
        batch_size=2, timed_steps=1, device="cpu",
    )  # fmt: skip
    assert record["module"] == "helpers.train"
    assert record["code_version"] == measurements.code_version("step_timing") == "v1"
    assert store.records() == [record]


def test_a_record_says_whether_float32_ran_on_tf32(store):
    """A single-process measurement records its process's TF32 setting, as every launched rank does."""
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        set_tf32(False)  # as helpers.chapter.start sets it
        assert store.measure({"kind": "demo", "x": 4}, lambda: {"value": 1})["tf32"] is False
        torch.backends.cudnn.allow_tf32 = True  # PyTorch's own default for cuDNN
        assert store.measure({"kind": "demo", "x": 5}, lambda: {"value": 1})["tf32"] is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_a_record_carries_the_machines_speed_when_it_began(store, monkeypatch):
    speed = {"measured_at": "2026-11-27T06:00:00+00:00", "cpu_matmul_gflops": 100.0, "cpu_copy_gbps": 30.0}
    monkeypatch.setattr(results.reference_speed, "current", lambda: speed)
    assert store.measure({"kind": "demo", "x": 9}, lambda: {"value": 1})["reference"] == speed


def paired_round(store, calls):
    """A comparison of two halves, as ``ddp.run_sweeps`` measures one round: 'ddp' then 'dataparallel'."""

    def half(name):
        return lambda: calls.append(name) or {"name": name, "call": len(calls)}

    return [store.measure({"kind": "demo", "half": name}, half(name)) for name in ("ddp", "dataparallel")]


@pytest.mark.parametrize("removed", ["ddp", "dataparallel"])
def test_a_comparison_is_never_half_reused_from_another_speed(tmp_path, monkeypatch, removed):
    # yesterday both halves were measured together on a machine running at half today's speed
    monkeypatch.setattr(results.reference_speed, "current", lambda: {"cpu_matmul_gflops": 50.0})
    yesterday = results.ResultStore("pairs", root=tmp_path, hardware=HARDWARE)
    calls = []
    stored = yesterday.together(lambda: paired_round(yesterday, calls))
    assert calls == ["ddp", "dataparallel"]
    # today one half's records are removed: measuring it alone would set today's speed against yesterday's
    yesterday.path({"kind": "demo", "half": removed}).unlink()
    monkeypatch.setattr(results.reference_speed, "current", lambda: {"cpu_matmul_gflops": 100.0})
    today = results.ResultStore("pairs", root=tmp_path, hardware=HARDWARE)
    calls.clear()
    fresh = today.together(lambda: paired_round(today, calls))
    kept = "dataparallel" if removed == "ddp" else "ddp"
    assert calls == [removed, kept]  # the removed half, then the stale one measured again beside it
    assert [r["reference"]["cpu_matmul_gflops"] for r in stored] == [50.0, 50.0]
    assert [r["reference"]["cpu_matmul_gflops"] for r in fresh] == [100.0, 100.0]
    assert all(today.get(r["config"]) == r for r in fresh)  # what the caller got is what is stored
    # a whole comparison reused, or measured in one go, is measured no further
    calls.clear()
    assert today.together(lambda: paired_round(today, calls)) == fresh and calls == []
    without_together = results.ResultStore("pairs", root=tmp_path, hardware=HARDWARE)
    without_together.path({"kind": "demo", "half": removed}).unlink()
    paired_round(without_together, calls)
    assert calls == [removed]  # outside ``together`` each record stands alone, as before


def test_a_record_measured_twice_in_one_comparison_is_fresh_not_stale(store):
    calls = []

    def body():
        measure = lambda: calls.append(1) or {"value": 1}  # noqa: E731
        return [store.measure({"kind": "demo", "shared": True}, measure) for _ in range(2)]

    store.together(body)
    assert calls == [1]  # the second reads the first: no stale half, no second run
    with pytest.raises(RuntimeError, match="does not nest"):
        store.together(lambda: store.together(lambda: None))


def test_a_round_stopped_while_measured_again_is_finished_by_the_next_run(tmp_path):
    halves = [{"kind": "demo", "half": name} for name in ("ddp", "dataparallel")]
    calls, failing = [], set()

    def round_of(store):
        def half(config):
            def measure():
                if config["half"] in failing:
                    raise RuntimeError("stopped")
                calls.append(config["half"])
                return {"half": config["half"]}

            return store.measure(config, measure)

        return [half(config) for config in halves]

    first = results.ResultStore("stops", root=tmp_path, hardware=HARDWARE)
    first.together(lambda: round_of(first))  # day 1: one round
    first.path(halves[0]).unlink()  # day 2: one half removed; measuring the other again is stopped
    second = results.ResultStore("stops", root=tmp_path, hardware=HARDWARE)
    failing.add("dataparallel")
    calls.clear()
    with pytest.raises(RuntimeError, match="stopped"):
        second.together(lambda: round_of(second))
    assert calls == ["ddp"]
    assert second.measure(halves[1], lambda: {"half": "never"})["result"] == {"half": "dataparallel"}
    # day 3: both halves are on disk, from two rounds (days 1 and 2): both are measured again, together
    failing.clear()
    calls.clear()
    third = results.ResultStore("stops", root=tmp_path, hardware=HARDWARE)
    done = third.together(lambda: round_of(third))
    assert calls == ["ddp", "dataparallel"]
    assert done[0]["measured_with"] == done[1]["measured_with"]
    assert third.measured_at == {record["measured_at"] for record in done}  # the discarded days are gone


def runs_of(store, names, calls):
    """A comparison of the runs ``names``, each measured (and appended to ``calls``) unless stored."""
    return [
        store.measure({"kind": "demo", "run": name}, lambda name=name: calls.append(name) or {"name": name})
        for name in names
    ]


def test_two_comparisons_sharing_a_record_are_measured_once_then_reused_whole(tmp_path):
    # chapter 6: the scaling round's two-rank DDP launch is also the sharding round's baseline
    calls = []

    def study():
        store = results.ResultStore("shared", root=tmp_path, hardware=HARDWARE)
        calls.clear()
        scaling = store.together(lambda: runs_of(store, ["one rank", "two ranks"], calls))
        sharding = store.together(lambda: runs_of(store, ["two ranks", "zero3"], calls))
        return store, scaling, sharding

    store, scaling, sharding = study()
    assert calls == ["one rank", "two ranks", "zero3"]  # the shared launch is measured once
    assert {r["measured_with"] for r in scaling + sharding} == {scaling[0]["measured_with"]}
    assert all(store.get(r["config"]) == r for r in scaling + sharding)  # the stamp the caller got is stored
    study()
    assert calls == []  # the next run reuses both, measuring nothing
    # a later run without one of the sharding round's records: the shared launch, from an earlier run, is
    # measured again beside it; the scaling round, now split, is measured again whole on the run after,
    # which the sharding round joins (its zero3 measured again), and from then on nothing is
    store.path({"kind": "demo", "run": "zero3"}).unlink()
    study()
    assert calls == ["zero3", "two ranks"]
    study()
    assert calls == ["one rank", "two ranks", "zero3"]
    _, scaling, sharding = study()
    assert calls == [] and len({r["measured_with"] for r in scaling + sharding}) == 1


def test_comparisons_sharing_records_with_several_rounds_merge_them_and_hand_out_what_is_stored(tmp_path):
    # A(a, s1) and B(b, s2) measured in one run, then C(s1, s2, c): the three are one round from then on
    calls = []

    layout = [["a", "s1"], ["b", "s2"], ["s1", "s2", "c"]]

    def study():
        store = results.ResultStore("merged", root=tmp_path, hardware=HARDWARE)
        calls.clear()
        return store, [store.together(lambda names=names: runs_of(store, names, calls)) for names in layout]

    store, handed = study()
    assert calls == ["a", "s1", "b", "s2", "c"]
    every = [record for records in handed for record in records]
    assert len({record["measured_with"] for record in every}) == 1
    assert all(store.get(record["config"]) == record for record in every)  # what each caller holds is stored
    study()
    assert calls == []  # reused whole, no round split


def test_a_round_of_this_run_older_than_the_join_window_is_not_joined(tmp_path, monkeypatch):
    # a kernel left open until the next day: its morning round is another day's, so the shared launch is
    # measured again beside the new comparison, as across runs
    monkeypatch.setattr(results, "JOIN_WITHIN", datetime.timedelta(0))
    calls = []
    store = results.ResultStore("late", root=tmp_path, hardware=HARDWARE)
    store.together(lambda: runs_of(store, ["one rank", "two ranks"], calls))
    calls.clear()
    store.together(lambda: runs_of(store, ["two ranks", "zero3"], calls))
    assert calls == ["zero3", "two ranks"]
