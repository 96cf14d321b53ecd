"""helpers.plan: every launch of a profile, validated and timed on a described machine before it is rented."""

import pytest

from helpers import plan, study
from helpers.hardware import Machine
from helpers.launch import Request

GPU_NAMES = {11: "NVIDIA GeForce GTX 1080 Ti", 24: "NVIDIA A10G", 40: "NVIDIA A100-SXM4-40GB",
             80: "NVIDIA H100 80GB HBM3"}  # fmt: skip


def described(gpus: int, gib: int) -> Machine:
    return Machine.described_as(gpus, GPU_NAMES[gib], memory_gib=gib)


@pytest.mark.parametrize("gib", sorted(GPU_NAMES))
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_the_gpu_profile_starts_every_launch_and_fits_its_budget(gpus, gib):
    items = study.planned_items("gpu", None, described(gpus, gib))
    refused = [(item.chapter, item.what, item.refusal) for item in items if item.refusal]
    assert not refused
    minutes = plan.chapter_minutes(items)
    assert list(minutes.index) == list(plan.CHAPTERS)
    assert (minutes <= plan.BUDGET_MINUTES["chapter"]).all(), minutes.to_dict()
    if "H100" in GPU_NAMES[gib] and gpus == 1:  # one H100-class GPU: a 30-minute rental
        assert minutes.sum() <= plan.BUDGET_MINUTES["one GPU"]
    if gpus == 4:
        assert minutes.sum() <= plan.BUDGET_MINUTES["four GPUs"]


def test_on_one_gpu_the_plan_leaves_out_what_the_chapters_say_they_leave_out():
    items = study.planned_items("gpu", None, described(1, 80))
    skipped = sorted((item.chapter, item.what) for item in items if item.skipped)
    assert skipped == [
        ("03_ddp_nccl_vs_gloo", "Lightning"),  # 4 ranks on one GPU: Lightning runs one rank per GPU
        ("04_collectives", "benchmark, nccl, 2 ranks"), ("04_collectives", "benchmark, nccl, 4 ranks"),
    ]  # fmt: skip
    lightning = [item for item in items if item.request and item.request.module == "helpers.lightning_ddp"]
    assert {item.ranks for item in lightning} == {1}  # compared at the one rank Lightning runs on one GPU
    sharded = [item for item in items if item.what.startswith("sharded")]
    assert {(item.request.config["backend"], item.device) for item in sharded} == {("gloo", "cpu")}
    four = [item for item in study.planned_items("gpu", ["06_scaling"], described(4, 80))
            if item.what.startswith("sharded")]  # fmt: skip
    assert {(item.request.config["backend"], item.device) for item in four} == {("nccl", "cuda")}


def test_no_benchmark_of_one_rank_in_the_gpu_profile():
    # One rank moves nothing: a bus bandwidth of 0 and broadcasts "at TB/s" (issue 24, defect 11).
    items = study.planned_items("gpu", ["04_collectives"], described(4, 80))
    benchmarks = [item for item in items if item.what.startswith("benchmark")]
    assert benchmarks and min(item.ranks for item in benchmarks) == 2


def test_a_batch_the_ranks_cannot_split_is_refused_with_the_launcher_s_reason():
    parameters = study.notebook_defaults(study.notebooks_dir() / "03_ddp_nccl_vs_gloo.ipynb")
    items = plan.items_of("03_ddp_nccl_vs_gloo", {**parameters, "world_sizes": [1, 3]}, Machine(0, cores=2))
    reasons = {item.refusal for item in items if item.refusal}
    assert reasons == {"global_batch_size 8 is not divisible by 3 ranks"}


def test_a_batch_that_does_not_fit_the_card_is_refused_before_it_is_rented():
    parameters = study.notebook_defaults(study.notebooks_dir() / "01_single_device.ipynb")
    items = plan.items_of("01_single_device", {**parameters, "sweep_batch_sizes": [2_200]}, described(1, 11))
    refused = [item for item in items if item.refusal]
    # ConvNet: 5,032,848 B held per sample (chapter 1) x 2,200 + 6,019,200 B of weights, gradients and Adam
    assert [item.what for item in refused] == ["batch sweep, ConvNet, batch 2200"]
    assert refused[0].memory_bytes == 5_032_848 * 2_200 + 376_200 * 16 + 10 * 4  # + Adam's 10 step counters
    assert refused[0].refusal.startswith("needs 10.3 GiB on its busiest GPU by the arithmetic, more than 90%")


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
    defaults = study.notebook_defaults(study.notebooks_dir() / "04_collectives.ipynb")
    assert defaults["message_bytes"] == [2**p for p in range(10, 25, 2)]  # a comprehension, evaluated
    assert set(defaults) == study.declared_parameters(study.notebooks_dir() / "04_collectives.ipynb")
    money = study.notebook_defaults(study.notebooks_dir() / "05_cost_model.ipynb")
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
    assert "06_scaling: 10.5 (over the 9-minute budget" in plan.describe_plan([steps], described(1, 80))
