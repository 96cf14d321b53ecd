"""python -m helpers.advise: one command on a model in a reader's file or one of the book's; bad input is
one line and exit 2; --json round-trips; --measure and --validate measure here, within their limits."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from helpers.advise import __main__ as cli
from helpers.advise import counting, measure, validate
from helpers.costmodel import timemodel
from helpers.results import ResultStore

TINY = """from torch import nn


def build():
    return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
"""


@pytest.fixture
def in_a_project(tmp_path, monkeypatch):
    """The reader's directory: a model file, and the results folder the command measures into."""
    (tmp_path / "my_models.py").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_models", None)  # another test's my_models.py, imported from its own folder
    yield tmp_path
    sys.modules.pop("my_models", None)


def test_the_command_advises_on_a_model_in_a_file_and_writes_its_json(in_a_project, capsys):
    assert cli.main(["my_models:build", "--input-shape", "6", "--batch", "16", "--gpus", "1,4",
                     "--optimizer", "sgd", "--json", "advice.json"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert (
        printed.startswith("my_models:build: 38 parameters")  # no registry digest for the reader
        and "38 parameters" in printed
        and "AWS g6.12xlarge" in printed
    )
    found = json.loads((in_a_project / "advice.json").read_text())
    assert found["counted"]["training_flops_per_sample"] == {"value": 144, "origin": "counted"}
    assert found["global_batch"] == 16 and found["optimizer"] == "sgd" and found["measured"] == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["my_models:build", "--batch", "16"], "--input-shape is needed for a model of your own"),
        (["my_models:build", "--input-shape", "6", "--batch", "10", "--gpus", "4"],
         "a global batch of 10 does not divide over 4 GPUs"),
        (["ConvNet", "--batch", "16", "--gpus", "0"], "--gpus '0' needs positive integers"),
        (["ConvNet", "--batch", "16", "--gpus", "four"], "--gpus 'four' is not comma-separated integers (for "
         "example 1,4,8)"),
        (["my_models:build", "--input-shape", "7", "--batch", "16"],
         "the forward pass rejects input shape (N, 7)"),
        (["nowhere:build", "--input-shape", "6", "--batch", "16"], "cannot import 'nowhere'"),
        (["ConvNet", "--batch", "16", "--dtype", "fp16"], "dtype 'fp16' is not one of float32, bf16"),
        (["ConvNet", "--batch", "16", "--samples-per-epoch", "8"],
         "an epoch of 8 samples is smaller than the global batch of 16"),
        (["ConvNet", "--batch", "4096", "--gpus", "1,8"],
         "a global batch of 4096 is larger than the default epoch, FSDD's training split of 2,700 clips"),
        (["ConvNet", "--batch", "16", "--hour-value", "-1"],
         "--hour-value needs dollars of zero or more, not -1"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_nothing_runs(in_a_project, capsys, arguments, message):
    assert cli.main(arguments) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"advise: error: {message}") and error.count("\n") == 1


def test_the_book_s_model_by_name_as_a_process(in_a_project):
    """The command as a reader types it, in a fresh process: under 10 s of work on this machine."""
    command = [sys.executable, "-m", "helpers.advise", "ConvNet", "--batch", "64", "--gpus", "1,8"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ConvNet: 376,200 parameters") and "Verdicts:" in done.stdout
    assert "an epoch of 2,700 samples (FSDD's training split, the default" in done.stdout
    seconds = float(done.stdout.rstrip().rsplit("(", 1)[1].split(" s)")[0])
    assert seconds < 10


def test_measuring_here_gives_lines_across_runs_and_stops_at_its_limit(in_a_project):
    store = ResultStore("advise-test", root=in_a_project / "results")
    counted = counting.count(counting.load_model("my_models:build"), (6,), label="tiny measured")
    steps = measure.measure_steps(store, "my_models:build", counted, [2, 8], thread_counts=[1], repeats=2,
                                  timed_steps=2)  # fmt: skip
    assert len(steps) == 4 and set(steps["batch_size"]) == {2, 8} and set(steps["seed"]) == {0, 1}
    assert (steps[["forward_seconds", "backward_seconds", "optimizer_seconds"]] > 0).all().all()
    again = measure.measure_steps(store, "my_models:build", counted, [2, 8], thread_counts=[1], repeats=2,
                                  timed_steps=2)  # fmt: skip
    assert again["step_seconds_all"].tolist() == steps["step_seconds_all"].tolist()  # reused, not re-timed
    with pytest.raises(counting.AdviseError, match="passed its 0 s limit; what it measured is stored"):
        measure.measure_steps(
            store, "my_models:build", counted, [3, 5], thread_counts=[1], time_limit_seconds=0
        )


@pytest.mark.usefixtures("no_leftovers")
def test_validate_launches_real_ddp_on_two_gloo_ranks_and_compares(in_a_project):
    store = ResultStore("advise-test", root=in_a_project / "results")
    counted = counting.count(counting.load_model("my_models:build"), (6,), label="tiny validated")
    steps = measure.measure_steps(store, "my_models:build", counted, [4, 8], repeats=2, timed_steps=2)
    model_time = measure.time_model(store, steps, counted.parameters)
    table = validate.validate(store, "my_models:build", counted, 8, [2], model_time, launches=1,
                              timed_steps=2, time_limit_seconds=120)  # fmt: skip
    row = table.iloc[0]
    assert (row["ranks"], row["launches"], row["global_batch"]) == (2, 1, 8)
    medians = timemodel.stored_all_reduce_alpha_beta(store)["medians"]  # chapter 4's other fit: the band
    assert model_time.other_links == ((medians["alpha_seconds"], medians["seconds_per_byte"]),)
    slower_link = replace(
        model_time, alpha_seconds=medians["alpha_seconds"], seconds_per_byte=medians["seconds_per_byte"]
    )
    other = timemodel.predict_step_seconds("ddp_overlap", counted.name, 8, 2, slower_link)
    assert (row["predicted_low_seconds"], row["predicted_high_seconds"]) == (
        min(row["predicted_seconds"], other),
        max(row["predicted_seconds"], other),
    )
    assert row["measured_seconds"] > 0 and row["predicted_seconds"] > 0
    assert row["error_percent"] == pytest.approx(
        (row["predicted_seconds"] / row["measured_seconds"] - 1) * 100
    )
    launches = store.records("advise_validation")
    assert len(launches) == 1 and launches[0]["config"]["world_size"] == 2


def test_a_gpu_the_study_profiled_the_model_on_is_priced_from_those_steps(capsys):
    assert cli.main(["helpers.advise.examples:wave_transformer", "--input-shape", "1,12000", "--batch", "64",
                     "--gpus", "1,8"]) == 0  # fmt: skip
    rows = {}
    for line in capsys.readouterr().out.splitlines():  # each machine's first row: the DDP table's
        rows.setdefault(line.split("  ")[0], line)
    assert rows["AWS p5en.48xlarge"].rstrip().endswith("measured")  # eight H200s: the H200's profiles
    assert rows["AWS p5.48xlarge"].rstrip().endswith("roofline")  # eight H100s: never profiled


def test_the_value_of_an_hour_adds_each_machine_s_total_cost(capsys):
    """Issue 37, 1: --hour-value prices the renter's waiting; a batch that splits over no count: a note."""
    assert cli.main(["ConvNet", "--batch", "96", "--gpus", "1,8", "--hour-value", "1"]) == 0
    printed = capsys.readouterr().out
    section = printed.split("What waiting costs")[1]
    assert "break-even value of your hour ($)" in section and "at $1 an hour" in section
    assert "AWS p5.48xlarge" in section and "AWS p4d.24xlarge" not in section  # no one-GPU A100 offer
    assert cli.main(["ConvNet", "--batch", "100", "--gpus", "1,8"]) == 0  # 100 does not split over 8
    assert "none: no multi-GPU machine is priced at this batch" in capsys.readouterr().out
