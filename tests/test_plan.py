"""helpers.plan: every launch of a profile, validated and timed on a described machine before it is rented."""

import pytest

from helpers import notebook_parameters, plan, study
from helpers.hardware import Machine
from helpers.launch import Request


def test_the_estimate_is_the_arithmetic_it_says():
    machine = Machine(0, cores=2)
    # LinearNet on the CPU: 72,605,... FLOPs per sample; one process with both cores at 30 GFLOP/s each
    item = plan.Item("x", "y", "LinearNet", 10, 4, "cpu")
    flops = plan.training_flops_per_sample("LinearNet")
    assert plan.step_seconds(item, machine) == pytest.approx(flops * 10 / 60e9)
    assert plan.estimate(item, machine) == pytest.approx(4 * flops * 10 / 60e9)
    # two Gloo ranks, one core each, plus a ring all-reduce of 48,408,880 gradient bytes at 1 GB/s
    config = {"backend": "gloo", "device": "cpu", "global_batch_size": 20}
    pair = plan.Item("x", "y", "LinearNet", 10, 4, "cpu", Request("helpers.ddp", 2, config))
    per_step = flops * 10 / 30e9 + 1.0 * 48_408_880 / 1e9
    assert plan.estimate(pair, machine) == pytest.approx(12 + 4 * per_step)  # 12 s to start the launch
    # a benchmark: all_reduce of 1 MB and 2 MB on 4 ranks, 3 + 2 iterations, at 1 GB/s, capped by its budget
    bench = {"backend": "gloo", "operations": ["all_reduce"], "sizes_bytes": [10**6, 2 * 10**6],
             "chunks": [1],
             "iterations": 3, "warmup_iterations": 2, "time_budget_seconds": None}  # fmt: skip
    assert plan.benchmark_seconds(bench, 4) == pytest.approx(5 * 1.5 * 3e6 / 1e9)
    assert plan.benchmark_seconds({**bench, "time_budget_seconds": 0.01}, 4) == 0.01


def test_notebook_defaults_are_what_the_parameters_cell_assigns():
    defaults = notebook_parameters.notebook_defaults(study.notebooks_dir() / "04_collectives.ipynb")
    assert defaults["message_bytes"] == [2**p for p in range(10, 23, 2)]  # a comprehension, evaluated
    assert set(defaults) == notebook_parameters.declared_parameters(
        study.notebooks_dir() / "04_collectives.ipynb"
    )
    money = notebook_parameters.notebook_defaults(study.notebooks_dir() / "05_cost_model.ipynb")
    assert (money["seed_machine_price"], money["seed_hourly_price"]) == ("8000", "1.50")  # a tuple assignment


def test_plan_on_the_command_line(capsys):
    arguments = ["--profile", "gpu", "--plan", "--gpus", "4", "--gpu-name", "NVIDIA A100-SXM4-40GB"]
    assert study.main(arguments) == 0
    printed = capsys.readouterr().out
    assert "Plan on 4x NVIDIA A100-SXM4-40GB (40 GiB), 16 cores (described)" in printed
    assert "Nothing refused." in printed and "Estimated minutes per chapter:" in printed
    with pytest.raises(SystemExit):
        study.main(["--profile", "gpu", "--plan", "--gpu-name", "NVIDIA A100-SXM4-40GB"])  # how many?
    assert "--gpu-name needs --gpus" in capsys.readouterr().err


def test_text_tables_keep_their_cells_whole_and_left_aligned():
    import pandas as pd

    text = plan.text_table(pd.DataFrame({"what": ["a long cell", "b"], "s": [1.5, 20.0]}))
    assert text.splitlines() == [
        "what         s",
        "-----------  ----",
        "a long cell  1.5",
        "b            20.0",
    ]


def test_the_nine_minute_budget_is_flagged_only_where_a_device_command_binds():
    steps = plan.Item("06_scaling", "a long experiment", None, None, 0, "cpu", seconds=600)
    assert "over the 9-minute budget" not in plan.describe_plan([steps], Machine(0, cores=2))
    assert "06_scaling: 10.5 (over the 9-minute budget" in plan.describe_plan(
        [steps], Machine.described_as(1, "NVIDIA H100 80GB HBM3")
    )
