"""helpers.coverage: manifests of what chapters read, what a machine lacks, and steps that fit a rental."""

import json
import shutil
from pathlib import Path

import pytest

from helpers import coverage, hardware, study
from helpers.launch import Request
from helpers.plan import Item
from helpers.results import ResultStore

GPU = {"index": 0, "name": "NVIDIA H200", "memory_bytes": 2**37, "compute_capability": "9.0"}
H200 = {"cpu_model": "Xeon", "usable_cores": 16, "memory_bytes": 2**37, "platform": "Linux", "gpus": [GPU]}
DDP = {"backend": "gloo", "device": "cuda", "model": "LinearNet", "global_batch_size": 100}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    hardware.stored_fingerprint.cache_clear()
    yield ResultStore("gpu", hardware=H200)
    hardware.stored_fingerprint.cache_clear()


def test_a_manifest_names_each_record_once_and_what_is_gone(store):
    first = store.measure({"kind": "demo", "x": 1}, lambda: {"v": 1})
    second = store.measure({"kind": "demo", "x": 2}, lambda: {"v": 2})
    entries = [{"kind": "demo", "config": record["config"]} for record in (first, second, first)]
    coverage.write_manifest("03_x", {"epochs": 1}, "gpu", store.provenance_id, entries)
    assert coverage.missing_records("03_x", {"epochs": 2}, "gpu", store.provenance_id) is None  # others
    assert coverage.missing_records("03_x", {"epochs": 1}, "gpu", store.provenance_id) == []
    store.path(second["config"]).unlink()
    assert coverage.missing_records("03_x", {"epochs": 1}, "gpu", store.provenance_id) == [
        '03_x: demo {"kind":"demo","x":2}'
    ]


def test_missing_launches_are_counted_and_unkeyed_work_grouped(store):
    request = Request("helpers.ddp", 2, DDP)
    launched = Item("03_x", "DDP, 2 ranks", "LinearNet", 50, 10, "cuda", request, repeats=3, seconds=60)
    single = Item("03_x", "DataParallel, LinearNet, 2 replicas", "LinearNet", 100, 10, "cuda", seconds=30.0)
    (config,) = coverage.record_configs(Item(**{**vars(launched), "repeats": 1}))
    assert config == {"kind": "ddp_run", "launch": 0, "world_size": 2, **DDP}
    store.measure(config, lambda: {"step_seconds": 0.01})  # launch 0 of 3 is recorded
    chapter = study.Chapter("03_x", None, None, {"epochs": 1})
    (work,) = coverage.missing_work([chapter], [launched, single], "gpu", store.provenance_id)
    assert work["missing"] == [
        "03_x: DDP, 2 ranks: 2 of 3 launches",
        "03_x: 1 single-process item (DataParallel), not keyed by the plan and never read here with these "
        "parameters: the chapter reuses those recorded",
    ]
    assert work["seconds"] == 40.0 + 30.0 + 30.0  # two launches' share, the unkeyed work, start-up


def test_work_is_packed_into_steps_of_at_most_nine_minutes():
    work = [{"chapter": "01_a", "seconds": 300}, {"chapter": "02_b", "seconds": 200},
            {"chapter": "03_c", "seconds": 1200}, {"chapter": "04_d", "seconds": 60}]  # fmt: skip
    steps = coverage.steps(work, "gpu")
    assert [(s["chapters"], s["repeat"]) for s in steps] == [
        (["01_a", "02_b"], 1),
        (["03_c"], 3),
        (["04_d"], 1),
    ]
    assert steps[0]["command"] == (
        "python -m helpers.study --profile gpu --chapters 01_a 02_b --time-limit-minutes 9"
    )
    text = coverage.describe_missing([{**w, "missing": [f"{w['chapter']}: x"]} for w in work], "gpu", "m")
    assert "2. ~20.0 min, run 3 times: python -m helpers.study --profile gpu --chapters 03_c" in text
    assert coverage.describe_missing([], "gpu", "m").endswith("nothing to measure.")


def test_the_h200_lacks_nothing_of_the_gpu_profile(capsys):
    """The committed records and manifests: every chapter of the gpu profile executes from the H200's
    records (chapter 6's, the last to land, included)."""
    assert study.main(["--profile", "gpu", "--plan", "--missing", "--from-records", "1fcc455750dea9a9"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert not [line for line in printed if line.startswith("- ")]  # no chapter lacks a record


def test_a_launch_today_s_plan_adds_is_missing_even_where_a_manifest_was_complete(tmp_path, monkeypatch):
    """A chapter's manifest names what it read when it last ran; a launch the code asks for since (chapter
    3's NCCL rank on one GPU) is missing all the same, before anything starts."""
    from helpers import coverage
    from helpers.launch import Request
    from helpers.plan import Item

    monkeypatch.setattr(coverage, "missing_records", lambda *args: [])  # a complete manifest
    store = type("Store", (), {"get": staticmethod(lambda config: None)})()
    monkeypatch.setattr(coverage, "machine_store", lambda profile, machine: store)
    chapter = type("Chapter", (), {"name": "03_ddp_nccl_vs_gloo", "parameters": {}})()
    item = Item("03_ddp_nccl_vs_gloo", "DDP scaling: LinearNet, backend nccl, ranks 1", "LinearNet", 100, 27,
                "cuda", Request("helpers.ddp", 1, {"backend": "nccl"}), repeats=3, seconds=30.0)  # fmt: skip
    work = coverage.missing_work([chapter], [item], "gpu", "machine")
    assert work[0]["missing"] == [
        "03_ddp_nccl_vs_gloo: DDP scaling: LinearNet, backend nccl, ranks 1: 3 of 3 launches"
    ]


def test_a_chapter_whose_records_are_gone_is_refused_naming_each_launch_it_lacks(
    tmp_path, monkeypatch, capsys
):
    """The H200's records without chapter 6's manifest and sharded launches (as when its run was stopped
    part-way): the plan's launches name each record that execution from those records would lack, before
    anything starts."""
    root = Path(__file__).parents[1]
    shutil.copytree(root / "notebooks", tmp_path / "notebooks")
    results = tmp_path / "data" / "results" / "gpu"
    shutil.copytree(root / "data" / "results" / "gpu", results)
    (results / "manifests" / "1fcc455750dea9a9" / "06_scaling.json").unlink()
    for path in (results / "records").glob("*.json"):
        if json.loads(path.read_text())["kind"] == "sharding_run":
            path.unlink()
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    with pytest.raises(SystemExit):
        study.main(["--profile", "gpu", "--from-records", "1fcc455750dea9a9", "--chapters", "06_scaling"])
    said = capsys.readouterr().err
    assert "lacks records the chapters need (nothing started)" in said
    assert '06_scaling: sharding_run {"backend":"gloo","device":"cpu"' in said


def test_every_committed_manifest_was_written_with_its_profile_s_current_parameters():
    # a parameter added to study.yml or a notebook must be written into the committed manifests too, or the
    # check that a chapter executed from records misses none of them is silently skipped (manifest: None)
    checked = 0
    for profile in ("cpu", "gpu"):
        for folder in sorted((coverage.results_dir() / profile / "manifests").iterdir()):
            for planned in study.plan(profile):
                if coverage.manifest_path(profile, folder.name, planned.name).exists():
                    found = coverage.manifest(planned.name, planned.parameters, profile, folder.name)
                    assert found is not None, (profile, folder.name, planned.name)
                    checked += 1
    assert checked >= 13  # the GPU edition's seven chapters and the CPU edition's six, at least
