"""helpers.study: bad input refused before work, chapters run in a child with a limit, clean stops."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from subprocess import TimeoutExpired
from types import SimpleNamespace

import nbformat
import psutil
import pytest

from helpers import coverage, durations, hardware, notebook_parameters, study
from helpers.hardware import Machine
from helpers.processes import stop_process_tree
from helpers.results import ResultStore


def test_every_profile_plans_every_chapter_with_known_parameters():
    chapters = {path.stem for path in study.notebooks_dir().glob("[0-9][0-9]_*.ipynb")}
    for profile in study.PROFILES:
        planned = study.plan(profile)
        assert {c.name for c in planned} == chapters
        assert all(c.parameters["results_run"] == profile for c in planned)
        assert all(c.output.parent == study.chapters_dir(profile) for c in planned)


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


def write_chapter(path: Path, parameters: str, body: str) -> None:
    """A chapter notebook: a ``parameters`` cell and one code cell."""
    path.parent.mkdir(exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(parameters)
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [cell, nbformat.v4.new_code_cell(body)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)


def make_project(root: Path) -> Path:
    """A project root with one tiny chapter whose parameters make it sleep, fail or say it started."""
    write_chapter(
        root / "notebooks" / "01_tiny.ipynb",
        'results_run = "smoke"\nseconds = 0\nfail = False\nstarted_file = ""',
        "import time\nif started_file:\n    open(started_file, 'w').close()\ntime.sleep(seconds)\nif fail:\n"
        "    raise RuntimeError('failed on purpose')",
    )
    (root / "notebooks" / "study.yml").write_text(
        "time_limit_minutes: {smoke: 1}\nprofiles:\n  smoke: {}\n  cpu:\n    01_tiny: {fail: true}\n"
    )
    return root


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A throwaway project root with the tiny chapter, not yet run."""
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    return make_project(tmp_path)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """A project whose smoke study ran once, and that run's summary: shared, so never written to."""
    root = make_project(tmp_path_factory.mktemp("executed"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUDY_ROOT", str(root))
        summary = study.run("smoke")
    return root, summary


@pytest.fixture
def executed_project(executed, tmp_path, monkeypatch):
    """A private copy of the executed project, for a test that runs more in it (the executed chapter's
    fingerprint names no path: it is current in the copy too)."""
    root = shutil.copytree(executed[0], tmp_path / "project")
    monkeypatch.setenv("STUDY_ROOT", str(root))
    return root


def test_study_yaml_with_unknown_chapter_or_parameter_is_refused(project):
    config = project / "notebooks" / "study.yml"
    config.write_text("profiles:\n  cpu:\n    07_missing: {epochs: 1}\n")
    with pytest.raises(ValueError, match="unknown chapters: 07_missing"):
        study.plan("cpu")
    config.write_text("profiles:\n  cpu:\n    01_tiny: {epochs: 1}\n")
    with pytest.raises(ValueError, match="01_tiny has no parameter"):
        study.plan("cpu")


def test_chapters_run_in_the_order_study_yml_gives_and_a_missing_one_is_refused(project):
    tiny = project / "notebooks" / "01_tiny.ipynb"
    shutil.copy(tiny, project / "notebooks" / "02_tiny.ipynb")
    config = project / "notebooks" / "study.yml"
    config.write_text("run_order: [02_tiny, 01_tiny]\nprofiles:\n  smoke: {}\n")
    assert [chapter.name for chapter in study.plan("smoke")] == ["02_tiny", "01_tiny"]
    config.write_text("run_order: [02_tiny]\nprofiles:\n  smoke: {}\n")
    with pytest.raises(ValueError, match="run_order must name every chapter once, not 02_tiny; the chapters"):
        study.plan("smoke")


def test_the_study_runs_every_chapter_after_those_it_reads():
    order = [chapter.name for chapter in study.plan("cpu", machine=Machine.described_as(0, "", memory_gib=0))]
    assert order.index("04_collectives") < order.index("03_ddp_nccl_vs_gloo")  # chapter 4's all-reduce
    assert order.index("06_scaling") < order.index("05_cost_model")  # its steps to a target
    assert order.index("07_your_model") < order.index("05_cost_model")  # its DDP runs are ddp_run records


def test_run_executes_then_skips_a_current_chapter(executed, executed_project):
    root, first = executed
    assert first["status"].tolist() == ["finished"]
    notebook = nbformat.read(root / "book" / "chapters" / "smoke" / "01_tiny.ipynb", as_version=4)
    assert notebook.metadata["study"]["profile"] == "smoke"
    assert not [p for p in (root / "book" / "chapters" / "smoke").iterdir() if "partial" in p.name]
    assert study.run("smoke")["status"].tolist() == ["skipped (current)"]
    written = executed_project / "book" / "chapters" / "smoke"
    assert not [p for p in written.iterdir() if "partial" in p.name]


def test_command_line_prints_the_summary_and_the_cost(executed_project, capsys):
    assert study.main(["--profile", "smoke", "--price-per-hour", "36"]) == 0
    printed = capsys.readouterr().out
    assert "01_tiny skipped (current)" in " ".join(printed.split()) and "cost at $36.00/h: $0.00" in printed
    assert study.main(["--profile", "cpu"]) == 1  # the failing chapter
    assert "01_tiny failed" in " ".join(capsys.readouterr().out.split())
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
    assert not (project / "book" / "chapters" / "smoke" / "01_tiny.ipynb").exists()


def test_failed_chapter_keeps_the_old_output_and_its_traceback(executed_project):
    output = executed_project / "book" / "chapters" / "cpu" / "01_tiny.ipynb"
    output.parent.mkdir()
    shutil.copy(output.parent.parent / "smoke" / output.name, output)  # an earlier cpu edition
    before = output.read_bytes()
    summary = study.run("cpu")
    assert summary["status"].tolist() == ["failed"]
    assert output.read_bytes() == before
    assert "failed on purpose" in (output.parent / "01_tiny.failed.ipynb").read_text()


def wait_for(path: Path, process, seconds: float = 120) -> None:
    """Until ``path`` exists (a file the chapter writes when its cell runs), ``process`` has ended, or
    ``seconds`` have passed, however busy the machine is."""
    deadline = time.monotonic() + seconds
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` alive now. Checked at once, not after a wait: a kernel whose papermill
    was killed ends by itself within a second or two (it polls its parent), which would hide a stop
    that missed it."""
    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


def test_chapter_over_its_limit_is_stopped_with_its_kernel(project, monkeypatch):
    started = project / "chapter-started"
    chapter = study.plan("smoke")[0]
    parameters = {**chapter.parameters, "seconds": 120, "started_file": str(started)}
    slow = replace(chapter, parameters=parameters, time_limit_seconds=2)
    family, commands = [], []

    class Papermill(subprocess.Popen):
        """The chapter's child, whose limit counts from the moment the chapter's cell runs (however long
        its kernel took to start); its process tree is noted then."""

        def wait(self, timeout=None):
            if timeout is not None and not family:
                wait_for(started, self)
                family.extend([psutil.Process(self.pid), *psutil.Process(self.pid).children(recursive=True)])
                commands.extend(" ".join(member.cmdline()) for member in family)
            return super().wait(timeout)

    monkeypatch.setattr(study, "subprocess", SimpleNamespace(Popen=Papermill, TimeoutExpired=TimeoutExpired))
    with pytest.raises(study.StudyError, match="exceeded its 0m02s limit"):
        study.execute(slow, "smoke")
    assert started.exists(), "the chapter never started"
    assert any("ipykernel" in command for command in commands)  # the kernel ran when the limit passed
    assert not still_running(family)  # papermill and its kernel stopped, not left to end by themselves
    assert not slow.output.exists()
    assert not [p for p in slow.output.parent.iterdir() if "partial" in p.name]


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
        wait_for(started, runner)
        assert started.exists(), "the chapter never started"
        family = psutil.Process(runner.pid).children(recursive=True)
        runner.send_signal(signum)
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 130, err[-2000:]
        assert "rerun to resume" in err and "interrupted" in out
        assert not still_running(family)
        assert not list((project / "book" / "chapters").rglob("*.ipynb"))
    finally:
        stop_process_tree(runner)


def handlers() -> tuple:
    """This process's handlers of SIGINT and SIGTERM."""
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def callers_handler(signum, frame):
    """A SIGTERM handler of the caller's own, which the study must give back."""


@pytest.fixture
def inherited():
    """SIGINT ignored, as a shell without job control starts `cmd &`, and a SIGTERM handler of the
    caller's: what the study finds (the suite's own handlers come back afterwards)."""
    suite = handlers()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, callers_handler)
    yield signal.SIG_IGN, callers_handler
    signal.signal(signal.SIGINT, suite[0])
    signal.signal(signal.SIGTERM, suite[1])


def test_signals_stop_the_study_from_its_first_check_to_its_provenance_page_then_are_given_back(
    project, monkeypatch, inherited
):
    seen = {}

    def noting(moment, function):
        def noted(*args, **kwargs):
            seen[moment] = handlers()
            return function(*args, **kwargs)

        return noted

    monkeypatch.setattr(study, "resolve_profile", noting("resolve", study.resolve_profile))
    monkeypatch.setattr(study, "execute", noting("chapter", lambda chapter, profile: 0.0))
    monkeypatch.setattr(study, "publish", noting("provenance", lambda: None))
    assert study.run("smoke")["status"].tolist()[0] == "finished"
    assert seen == dict.fromkeys(["resolve", "chapter", "provenance"], (study._interrupt, study._interrupt))
    assert handlers() == inherited  # SIG_IGN too: restored, not replaced by the default
    with pytest.raises(ValueError, match="unknown profile"):  # refused at the first check: still restored
        study.run("fast")
    assert handlers() == inherited


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", ["plan", "publish"])
def test_a_signal_while_planning_or_writing_the_provenance_page_interrupts_the_study(
    project, monkeypatch, capsys, inherited, signum, moment
):
    def signalled(*args, **kwargs):
        signal.raise_signal(signum)
        time.sleep(10)  # interrupted at once by the study's handler; ignored or handled elsewhere
        pytest.fail(f"{signum.name} did not interrupt the study")

    monkeypatch.setattr(study, moment, signalled)
    monkeypatch.setattr(study, "execute", lambda chapter, profile: 0.0)
    assert study.main(["--profile", "smoke"]) == 130
    assert "study interrupted" in capsys.readouterr().err
    assert handlers() == inherited


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


def test_another_machine_or_changed_helpers_make_a_chapter_stale(executed_project, monkeypatch):
    chapter = study.plan("smoke")[0]
    assert chapter.is_current()
    other = {**hardware.fingerprint(), "cpu_model": "another CPU"}
    monkeypatch.setattr(durations, "fingerprint", lambda: other)  # the machine id chapters are keyed by
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
    assert notebook_parameters.declared_parameters(tmp_path / "n.ipynb") == {"a", "b", "width", "c", "x", "y"}


def test_the_estimate_comes_from_the_last_fresh_run(executed_project):
    runs = durations.read_durations("smoke")[durations.machine_id("smoke")]["01_tiny"]  # nothing stored
    assert runs["fresh"] == runs["last"] and runs["last"]["reused"] == 0
    entries = [{"event": "reused", "kind": "step_timing"}, {"event": "measured", "kind": "training"}]
    durations.record_duration("smoke", "01_tiny", 999.0, entries)  # a resumed run: reused a record
    seconds, fresh = durations.estimate_seconds("smoke", ["01_tiny"])
    assert fresh and seconds == runs["fresh"]["seconds"]  # not the resumed run's 999 s
    assert durations.estimate_seconds("smoke", ["02_never_ran"]) == (None, False)


def test_the_injected_parameters_are_folded_away_in_the_book(executed):
    notebook = nbformat.read(executed[0] / "book" / "chapters" / "smoke" / "01_tiny.ipynb", as_version=4)
    tagged = [cell.metadata.get("tags", []) for cell in notebook.cells]
    assert ["parameters", "hide-cell"] in tagged and ["injected-parameters", "hide-cell"] in tagged
    labels = {cell.metadata["tags"][0]: cell.metadata["mystnb"]["code_prompt_show"]
              for cell in notebook.cells if "hide-cell" in cell.metadata.get("tags", [])}  # fmt: skip
    assert labels == {"parameters": "Show the chapter's default parameters",
                      "injected-parameters": "Show the parameters this edition ran with"}  # fmt: skip


H200 = {
    "cpu_model": "Test Xeon", "cpu_cores": 16, "usable_cores": 16, "memory_bytes": 2**37,
    "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 140 * 2**30, "compute_capability": "9.0"}],
    "gpu_topology": None, "driver": "580.1", "cuda": "13.0", "nccl": "2.28.9", "torch": "2.11.0+cu130",
    "python": "3.12.3", "platform": "Linux x86_64",
}  # fmt: skip


@pytest.fixture
def records_project(tmp_path, monkeypatch):
    """A project whose one chapter reads a record, with an H200's record of it stored and no GPU here."""
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    write_chapter(
        tmp_path / "notebooks" / "01_reader.ipynb",
        'results_run = "smoke"\nsize = 1',
        "from helpers import hardware, train\nfrom helpers.results import ResultStore\n"
        "store = ResultStore(results_run)\n"
        "record = store.measure({'kind': 'demo', 'size': size}, lambda: {'value': size})\n"
        "device = train.pick_device('auto')\n"
        "print(f\"gpus {hardware.gpu_count()} device {device} value {record['result']['value']}\")",
    )
    (tmp_path / "notebooks" / "study.yml").write_text(
        "time_limit_minutes: {gpu: 2}\nprofiles:\n  smoke: {}\n  gpu:\n    01_reader: {size: 2}\n"
    )
    record = ResultStore("gpu", hardware=H200).measure({"kind": "demo", "size": 2}, lambda: {"value": 2})
    hardware.stored_fingerprint.cache_clear()
    yield tmp_path, record
    hardware.stored_fingerprint.cache_clear()


def test_a_chapter_executes_from_another_machines_records_measuring_nothing(records_project):
    root, record = records_project
    machine = record["provenance_id"]
    summary = study.run("gpu", records_of=machine)  # this machine has no GPU; the H200 had one
    assert summary["status"].tolist() == ["finished"]
    output = root / "book" / "chapters" / "gpu" / "01_reader.ipynb"
    executed = nbformat.read(output, as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "gpus 1 device cuda:0 value 2\n"  # the H200's answers
    metadata = executed.metadata["study"]
    assert metadata["records_of"] == machine and metadata["hardware"] == H200
    assert metadata["executed_on"] == hardware.fingerprint()
    assert metadata["measured_between"] == [record["measured_at"]] * 2
    assert len(list((root / "data" / "results" / "gpu" / "records").glob("*.json"))) == 1  # none added
    timed = durations.read_durations("gpu").get(durations.machine_id("gpu"), {})
    assert "01_reader" not in timed  # nothing timed
    manifest = coverage.manifest_path("gpu", machine, "01_reader")
    assert json.loads(manifest.read_text())["records"] == [{"kind": "demo", "config": record["config"]}]

    Path(record_path := ResultStore("gpu", hardware=H200).path(record["config"])).unlink()
    before = output.read_bytes()
    with pytest.raises(ValueError, match=r'lacks records .*\n01_reader: demo {"kind":"demo","size":2}'):
        study.run("gpu", records_of=machine, force=True)  # refused before starting: the manifest names it
    manifest.unlink()  # no manifest: the chapter stops at the record it lacks, named, and writes nothing
    assert study.run("gpu", records_of=machine, force=True)["status"].tolist() == ["failed"]
    assert output.read_bytes() == before and not record_path.exists()
    failed = (output.parent / "01_reader.failed.ipynb").read_text()
    assert "01_reader: machine" in failed and "has no demo record" in failed


def test_a_gpu_plan_without_a_gpu_asks_for_the_machine_to_plan_for(capsys):
    if Machine.here().gpus:
        pytest.skip("a GPU is visible: the plan is of this machine")
    with pytest.raises(SystemExit):
        study.main(["--profile", "gpu", "--plan", "--gpus", "4"])
    assert 'no GPU is visible here: describe the machine to plan for, e.g. --gpu-name "NVIDIA H100 80GB' in (
        capsys.readouterr().err
    )


def test_a_chapter_stays_current_across_a_kernel_update(project, monkeypatch):
    # The chapter fingerprint names the machine as the results store does (issue 40, item 3): a new
    # kernel release or a few KiB of memory more is the same machine, whose records the store reuses.
    chapter = study.plan("smoke")[0]
    ResultStore("smoke").measure({"kind": "step_timing"}, lambda: {"seconds": 1})  # the machine is stored
    before, run_id = chapter.fingerprint(), durations.machine_id("smoke")
    booted = {**hardware.fingerprint(), "platform": "Linux 9.9.9-another-build x86_64"}
    monkeypatch.setattr(durations, "fingerprint", lambda: booted)
    assert durations.machine_id("smoke") == run_id and chapter.fingerprint() == before
    other = {**booted, "cpu_model": "another CPU"}
    monkeypatch.setattr(durations, "fingerprint", lambda: other)
    assert durations.machine_id("smoke") != run_id and chapter.fingerprint() != before
