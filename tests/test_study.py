"""helpers.study: bad input refused before work, chapters run in a child with a limit, clean stops."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import nbformat
import psutil
import pytest

from helpers import hardware, study
from helpers.processes import stop_process_tree
from helpers.results import ResultStore


def test_every_profile_plans_every_chapter_with_known_parameters():
    chapters = {path.stem for path in study.notebooks_dir().glob("[0-9][0-9]_*.ipynb")}
    for profile in study.PROFILES:
        planned = study.plan(profile)
        assert {c.name for c in planned} == chapters
        assert all(c.parameters["results_run"] == profile for c in planned)
        assert all(c.output.parent == study.chapters_dir() for c in planned)


def test_unknown_profile_and_chapter_are_refused():
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        study.resolve_profile("fast")
    with pytest.raises(ValueError, match="unknown chapter"):
        study.plan("smoke", ["99_nothing"])


def test_gpu_profile_needs_gpus(monkeypatch):
    monkeypatch.setattr(study, "visible_gpus", lambda: 0)
    with pytest.raises(ValueError, match="needs CUDA devices"):
        study.resolve_profile("gpu")
    assert study.resolve_profile("auto") == "cpu"
    with pytest.raises(ValueError, match="2 GPUs asked for, but 0 are visible"):
        study.plan("cpu", gpus=2)
    monkeypatch.setattr(study, "visible_gpus", lambda: 4)
    monkeypatch.setattr(study, "cuda_problem", lambda: None)
    assert study.resolve_profile("auto") == study.resolve_profile("gpu") == "gpu"
    planned = {chapter.name: chapter.parameters for chapter in study.plan("gpu", gpus=2)}
    assert {name for name, parameters in planned.items() if parameters.get("gpus") == 2} == {
        "02_dataparallel_internals",
        "03_ddp_nccl_vs_gloo",
        "04_collectives",
        "05_cost_model",
        "06_scaling",
    }  # every chapter that declares `gpus`; chapter 1 runs on one device
    assert "gpus" not in planned["01_single_device"]


def test_gpus_that_torch_cannot_use_are_refused_not_replaced_by_the_cpu(monkeypatch):
    # A driver older than torch's CUDA needs: nvidia-smi lists GPUs, torch sees none (issue 24, defect 4).
    problem = "nvidia-smi lists 4 GPU(s) with driver 535.104.05, but torch 2.11.0+cu130 sees none: ..."
    monkeypatch.setattr(study, "cuda_problem", lambda: problem)
    monkeypatch.setattr(study, "visible_gpus", lambda: 0)
    for name in ("auto", "gpu"):
        with pytest.raises(
            ValueError, match=r"driver 535\.104\.05.*\(run `--profile cpu` to use the CPU anyway\)"
        ):
            study.resolve_profile(name)
    assert study.resolve_profile("cpu") == "cpu"  # asked for by name: the CPU it is


def test_a_gpu_study_refuses_before_its_first_chapter_when_its_plan_refuses(monkeypatch):
    from helpers.plan import Item

    monkeypatch.setattr(study, "visible_gpus", lambda: 1)
    monkeypatch.setattr(study, "cuda_problem", lambda: None)
    monkeypatch.setattr(study.Machine, "here", classmethod(lambda cls: study.Machine(1, "GPU", 2**30)))
    refused = Item("03_ddp_nccl_vs_gloo", "DDP scaling", "LinearNet", 50, 1, "cuda", refusal="no room")
    monkeypatch.setattr(study, "planned_items", lambda *args, **kwargs: [refused])
    monkeypatch.setattr(study, "execute", lambda *args: pytest.fail("a chapter started"))
    monkeypatch.setattr(study, "ResultStore", lambda profile: None)  # no results folder in the checkout
    with pytest.raises(
        ValueError, match="the plan refuses, before anything starts:\n03_ddp_nccl_vs_gloo: DDP "
    ):
        study.run("gpu")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A throwaway project root with one tiny chapter whose parameters make it sleep or fail."""
    (tmp_path / "notebooks").mkdir()
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell(
        'results_run = "smoke"\nseconds = 0\nfail = False\nstarted_file = ""'
    )
    parameters.metadata["tags"] = ["parameters"]
    body = (
        "import time\nif started_file:\n    open(started_file, 'w').close()\ntime.sleep(seconds)\nif fail:\n"
        "    raise RuntimeError('failed on purpose')"
    )
    notebook.cells = [parameters, nbformat.v4.new_code_cell(body)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "notebooks" / "01_tiny.ipynb")
    (tmp_path / "notebooks" / "study.yml").write_text(
        "time_limit_minutes: {smoke: 1}\nprofiles:\n  smoke: {}\n  cpu:\n    01_tiny: {fail: true}\n"
    )
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    return tmp_path


def test_study_yaml_with_unknown_chapter_or_parameter_is_refused(project):
    config = project / "notebooks" / "study.yml"
    config.write_text("profiles:\n  cpu:\n    07_missing: {epochs: 1}\n")
    with pytest.raises(ValueError, match="unknown chapters: 07_missing"):
        study.plan("cpu")
    config.write_text("profiles:\n  cpu:\n    01_tiny: {epochs: 1}\n")
    with pytest.raises(ValueError, match="01_tiny has no parameter"):
        study.plan("cpu")


def test_run_executes_then_skips_a_current_chapter(project):
    first = study.run("smoke")
    assert first["status"].tolist() == ["finished"]
    executed = nbformat.read(project / "book" / "chapters" / "01_tiny.ipynb", as_version=4)
    assert executed.metadata["study"]["profile"] == "smoke"
    assert study.run("smoke")["status"].tolist() == ["skipped (current)"]
    assert not [p for p in (project / "book" / "chapters").iterdir() if "partial" in p.name]


def test_command_line_prints_the_summary_and_the_cost(project, capsys):
    assert study.main(["--profile", "smoke"]) == 0
    assert "01_tiny finished" in " ".join(capsys.readouterr().out.split())
    assert study.main(["--profile", "smoke", "--price-per-hour", "36"]) == 0
    printed = capsys.readouterr().out
    assert "skipped (current)" in printed and "cost at $36.00/h: $0.00" in printed
    assert study.main(["--profile", "cpu"]) == 1  # the failing chapter
    with pytest.raises(SystemExit):
        study.main(["--profile", "smoke", "--price-per-hour", "-1"])
    assert "must not be negative" in capsys.readouterr().err


def test_results_folder_of_another_version_is_refused_before_any_work(project, capsys):
    folder = project / "data" / "results" / "smoke"
    folder.mkdir(parents=True)
    (folder / "store.json").write_text('{"schema_version": 0}')
    with pytest.raises(SystemExit):
        study.main(["--profile", "smoke"])
    assert "schema version 0" in capsys.readouterr().err
    assert not (project / "book" / "chapters" / "01_tiny.ipynb").exists()


def test_failed_chapter_keeps_the_old_output_and_its_traceback(project):
    study.run("smoke")
    output = project / "book" / "chapters" / "01_tiny.ipynb"
    before = output.read_bytes()
    summary = study.run("cpu")
    assert summary["status"].tolist() == ["failed"]
    assert output.read_bytes() == before
    assert "failed on purpose" in (project / "book" / "chapters" / "01_tiny.failed.ipynb").read_text()


def test_chapter_over_its_limit_is_stopped_with_its_kernel(project):
    chapter = study.plan("smoke")[0]
    slow = replace(chapter, parameters={**chapter.parameters, "seconds": 120}, time_limit_seconds=8)
    started = time.monotonic()
    with pytest.raises(study.StudyError, match="exceeded its 0m08s limit"):
        study.execute(slow, "smoke")
    assert time.monotonic() - started < 40
    assert not slow.output.exists()
    assert not [p for p in psutil.Process().children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_study_and_leaves_no_process_or_partial_file(project, signum):
    # The runner starts as a shell without job control starts `cmd &`: with SIGINT ignored. It must
    # stop on SIGINT all the same (it installs its own handlers), whatever started this test suite.
    started = project / "chapter-started"
    config = project / "notebooks" / "study.yml"
    config.write_text(f"profiles:\n  cpu:\n    01_tiny: {{seconds: 120, started_file: '{started}'}}\n")
    runner = subprocess.Popen(
        [sys.executable, "-m", "helpers.study", "--profile", "cpu"],
        env={**os.environ, "STUDY_ROOT": str(project)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and runner.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), "the chapter never started"
        family = psutil.Process(runner.pid).children(recursive=True)
        runner.send_signal(signum)
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 130, err[-2000:]
        assert "rerun to resume" in err and "interrupted" in out
        _, alive = psutil.wait_procs(family, timeout=10)
        assert not alive
        assert not list((project / "book" / "chapters").glob("*.ipynb"))
    finally:
        stop_process_tree(runner)


def test_second_study_in_the_same_checkout_is_refused(project):
    with study.study_lock(), pytest.raises(ValueError, match="another study is running"), study.study_lock():
        pass


def test_fingerprint_follows_notebook_parameters_and_read_records(project):
    chapter = study.plan("smoke")[0]
    changed = replace(chapter, parameters={**chapter.parameters, "seconds": 1})
    assert chapter.fingerprint() != changed.fingerprint()
    reader = replace(chapter, reads=["training"])
    before = reader.fingerprint()
    store = ResultStore("smoke")
    store.measure({"kind": "step_timing"}, lambda: {"seconds": 1})
    assert reader.fingerprint() == before
    store.measure({"kind": "training"}, lambda: {"seconds": 1})
    assert reader.fingerprint() != before


def test_a_chapter_that_reads_what_a_later_one_writes_runs_again_in_the_same_study(project):
    # Chapter 5 reads chapter 6's steps to a target: one `make study` must leave both current.
    writer = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('results_run = "smoke"')
    parameters.metadata["tags"] = ["parameters"]
    body = (
        "from helpers.results import ResultStore\nResultStore(results_run).measure({'kind': 'written'}, dict)"
    )
    writer.cells = [parameters, nbformat.v4.new_code_cell(body)]
    writer.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(writer, project / "notebooks" / "02_writer.ipynb")
    (project / "notebooks" / "study.yml").write_text("reads: {01_tiny: [written]}\nprofiles:\n  smoke: {}\n")
    summary = study.run("smoke")
    assert summary[["chapter", "status"]].values.tolist() == [
        ["01_tiny", "finished"], ["02_writer", "finished"], ["01_tiny", "finished again (its inputs changed)"]
    ]  # fmt: skip
    assert study.run("smoke")["status"].tolist() == ["skipped (current)"] * 2


def test_new_gpu_records_make_the_cost_model_chapter_stale(project):
    # Chapter 5 reads the GPU step times of data/results/gpu (any machine's) beside its own run's records:
    # a gpu run that lands must make its cpu edition stale, or the new GPU numbers are never shown.
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('results_run = "cpu"\ngpu_results_run = "gpu"')
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [cell]
    source = project / "notebooks" / "05_reader.ipynb"
    nbformat.write(notebook, source)
    chapter = study.Chapter("05_reader", source, project / "out.ipynb", {"results_run": "cpu"}, ["training"])
    before = chapter.fingerprint()
    ResultStore("gpu", hardware={"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}).measure(
        {"kind": "step_timing", "device": "cuda:0"}, lambda: {"step_seconds_all": [0.01]}
    )
    assert chapter.fingerprint() != before


def test_another_machine_or_changed_helpers_make_a_chapter_stale(project, monkeypatch):
    study.run("smoke")
    chapter = study.plan("smoke")[0]
    assert chapter.is_current()
    other = {**hardware.fingerprint(), "cpu_model": "another CPU"}
    monkeypatch.setattr(study, "fingerprint", lambda: other)
    assert not chapter.is_current()  # executed on the original hardware: not current on this one
    assert study.run("smoke")["status"].tolist() == ["finished"]  # so it really reruns
    assert chapter.is_current()
    monkeypatch.setattr(study, "code_version", lambda modules: "a fixed helper")
    assert not chapter.is_current()


def test_parameters_are_read_with_the_python_parser(tmp_path):
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('a, b = 1, 2\nwidth: int = 3\n(c) = [4]\nx = y = "z"  # two names\n')
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [cell]
    nbformat.write(notebook, tmp_path / "n.ipynb")
    assert study.declared_parameters(tmp_path / "n.ipynb") == {"a", "b", "width", "c", "x", "y"}


def test_the_estimate_comes_from_the_last_fresh_run(project):
    study.run("smoke")  # this chapter stores nothing: a fresh run
    durations = study.read_durations("smoke")[study.machine_id()]["01_tiny"]
    assert durations["fresh"] == durations["last"] and durations["last"]["reused"] == 0
    ledger = project / "ledger"
    ledger.write_text("reused step_timing\nmeasured training\n")
    study.record_duration("smoke", "01_tiny", 999.0, ledger)  # a resumed run: reused a record
    seconds, fresh = study.estimate_seconds("smoke", ["01_tiny"])
    assert fresh and seconds == durations["fresh"]["seconds"]  # not the resumed run's 999 s
    assert study.estimate_seconds("smoke", ["02_never_ran"]) == (None, False)


def test_the_injected_parameters_are_folded_away_in_the_book(project):
    study.run("smoke")
    executed = nbformat.read(project / "book" / "chapters" / "01_tiny.ipynb", as_version=4)
    tagged = [cell.metadata.get("tags", []) for cell in executed.cells]
    assert ["parameters", "hide-cell"] in tagged and ["injected-parameters", "hide-cell"] in tagged
