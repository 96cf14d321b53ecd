"""helpers.chapter_plans: each chapter's launches from its parameters, refused or timed before a rental."""

import pytest

from helpers import chapter_plans, notebook_parameters, plan, study
from helpers.hardware import Machine

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
    assert sorted(minutes.index) == sorted(chapter_plans.CHAPTERS)
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
    parameters = notebook_parameters.notebook_defaults(study.notebooks_dir() / "03_ddp_nccl_vs_gloo.ipynb")
    items = chapter_plans.items_of(
        "03_ddp_nccl_vs_gloo", {**parameters, "world_sizes": [1, 3]}, Machine(0, cores=2)
    )
    reasons = {item.refusal for item in items if item.refusal}
    assert reasons == {"global_batch_size 8 is not divisible by 3 ranks"}


def test_a_batch_that_does_not_fit_the_card_is_refused_before_it_is_rented():
    parameters = notebook_parameters.notebook_defaults(study.notebooks_dir() / "01_single_device.ipynb")
    items = chapter_plans.items_of(
        "01_single_device", {**parameters, "sweep_batch_sizes": [2_200]}, described(1, 11)
    )
    refused = [item for item in items if item.refusal]
    # ConvNet: 5,032,848 B held per sample (chapter 1) x 2,200 + 6,019,200 B of weights, gradients and Adam
    assert [item.what for item in refused] == ["batch sweep, ConvNet, batch 2200"]
    assert refused[0].memory_bytes == 5_032_848 * 2_200 + 376_200 * 16 + 10 * 4  # + Adam's 10 step counters
    assert refused[0].refusal.startswith("needs 10.3 GiB on its busiest GPU by the arithmetic, more than 90%")


def test_an_all_reduce_a_chapter_run_before_measured_is_not_planned_again():
    items = study.planned_items("gpu", None, described(4, 80))
    reused = [item for item in items if "reused" in item.what]
    assert {(item.chapter, item.what, item.seconds) for item in reused} == {
        ("03_ddp_nccl_vs_gloo", "all-reduce benchmark, nccl: chapter 4's, reused", 0.0),
        ("05_cost_model", "all-reduce benchmark, nccl: chapter 4's, reused", 0.0),
    }
    alone = study.planned_items("gpu", ["03_ddp_nccl_vs_gloo"], described(4, 80))
    (benchmark,) = [item for item in alone if item.what.startswith("all-reduce benchmark")]
    assert benchmark.what == "all-reduce benchmark, nccl, 2 ranks" and benchmark.seconds > 0
    # on one GPU chapter 4 benchmarks Gloo only (NCCL needs a GPU per rank), and so does chapter 3
    one = study.planned_items("gpu", ["04_collectives", "03_ddp_nccl_vs_gloo"], described(1, 80))
    assert [item.what for item in one if item.what.startswith("all-reduce benchmark")] == [
        "all-reduce benchmark, gloo: chapter 4's, reused"
    ]


def test_the_minutes_the_docs_quote_are_the_plan_s():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    one = round(plan.chapter_minutes(study.planned_items("gpu", None, described(1, 80))).sum())
    four = study.planned_items("gpu", None, Machine.described_as(4, "NVIDIA A100-SXM4-40GB"))
    text = " ".join((root / "book" / "reproduce.md").read_text().split())
    assert re.search(
        r"rental \(about (\d+) minutes, no chapter over 9\); on four A100s, about (\d+) minutes", text
    ).groups() == (str(one), str(round(plan.chapter_minutes(four).sum())))
    readme = " ".join((root / "README.md").read_text().split())
    assert f"estimates the minutes per chapter (about {one} on one H100-class GPU" in readme


def _multi_rank_backends(items, chapter: str, module_prefix: str) -> set[str]:
    return {
        item.request.config["backend"]
        for item in items
        if item.chapter == chapter and item.request and item.request.world_size > 1
        and item.request.module.startswith(module_prefix) and not (item.skipped or item.refusal)
    }  # fmt: skip


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
def test_chapter_five_models_the_backend_chapters_three_and_six_ran_their_ranks_on(gpus):
    # On 2-3 GPUs NCCL runs two ranks but not chapter 3's four: a model fitted to NCCL would have no
    # chapter 3 runs to be validated against (issue 24, audit of defect 8).
    items = study.planned_items("gpu", None, described(gpus, 80))
    (fit,) = [item for item in items if item.chapter == "05_cost_model" and "all-reduce" in item.what]
    backend = fit.request.config["backend"]
    assert _multi_rank_backends(items, "03_ddp_nccl_vs_gloo", "helpers.ddp") >= {backend}
    assert _multi_rank_backends(items, "06_scaling", "helpers.sharding") >= {backend}
    assert backend == ("nccl" if gpus >= 4 else "gloo")
