"""helpers.ddp_results: chapter 3's comparisons across launches, the all-reduce's bounds and the learning
check, on hand-made launch records whose figures are worked out by hand."""

import math

import pytest
import torch

from helpers import ddp_results


def record(steps, allreduce=(), buckets=(100,), world_size=2, cap=25, accuracy=0.5, losses=(2.0, 1.0)):
    """A stored DDP launch as ``ddp.stored_ddp_run`` returns it, with only what these tests read."""
    return {
        "config": {"bucket_cap_mb": cap},
        "result": {"step_seconds_all": list(steps), "allreduce_seconds_all": list(allreduce),
                   "bucket_bytes": list(buckets), "world_size": world_size, "threads_per_rank": 1,
                   "train_accuracy": accuracy, "history": [{"step_losses": list(losses)}]},
    }  # fmt: skip


def launches(variation: dict, medians, **fields):
    """One (variation, record) pair per launch, each launch's steps centred on its median."""
    return [
        ({**variation, "launch": n}, record([m * 0.9, m, m * 1.2], **fields)) for n, m in enumerate(medians)
    ]


def test_medians_of_launch_medians_and_a_comparison_across_launches():
    runs = launches({"ranks": 1}, [1.0, 1.1, 0.9]) + launches({"ranks": 2}, [0.5, 0.55, 0.45])
    change = ddp_results.compare(runs, {"ranks": 1}, {"ranks": 2})
    assert change["speedup"] == pytest.approx(2.0) and change["verdict"] == "faster"
    assert change["baseline_seconds"] == 1.0 and change["candidate_seconds"] == 0.5
    assert change["launches"] == (3, 3)
    with pytest.raises(ValueError, match="no launch of"):
        ddp_results.compare(runs, {"ranks": 1}, {"ranks": 4})


def test_the_alpha_beta_all_reduce_of_buckets_one_after_the_other():
    fit = {"alpha_seconds": 1e-4, "seconds_per_byte": 1e-9}
    # two ranks: each bucket 2(k-1)(α + nβ/k) = 2α + nβ: 2e-4 + 400e-9, then 2e-4 + 4,000e-9
    assert ddp_results.modelled_allreduce_seconds([400, 4000], 2, fit) == pytest.approx(4.044e-4)
    assert ddp_results.modelled_allreduce_seconds([400], 1, fit) == 0


def compression_runs(candidate_medians):
    none = launches({"compression": None}, [0.30, 0.31, 0.29], allreduce=[0.05] * 3, buckets=[48_408_880])
    bf16 = launches({"compression": "bf16"}, candidate_medians, allreduce=[0.03] * 3, buckets=[24_204_440])
    return none + bf16


def test_compression_saves_at_most_the_all_reduce_it_changes():
    fit = {"alpha_seconds": 0.0, "seconds_per_byte": 1e-9}
    bound = ddp_results.communication_bound(
        compression_runs([0.28, 0.29, 0.27]), {"compression": None}, {"compression": "bf16"}, fit
    )
    # α-β, two ranks: 48,408,880 B x 1 ns = 48.4 ms, halved to 24.2 ms; the hook timed 50 and 30 ms
    assert bound["model_seconds"] == pytest.approx([0.04840888, 0.02420444])
    assert bound["expected_seconds"] == pytest.approx(0.02420444)
    assert bound["hook_seconds"] == pytest.approx([0.05, 0.03])
    assert bound["most_saved"] == pytest.approx(0.05) and bound["most_lost"] == pytest.approx(0.03)
    assert bound["saved_seconds"] == pytest.approx(0.30 - 0.28) and bound["buckets"] == [1, 1]
    sentence = ddp_results.bound_sentence("bf16 against none", bound)
    assert sentence.startswith("bf16 against none: ") and "It saved 20.0 ms per step" in sentence
    assert sentence.endswith("takes 50.0 ms, the most it could save.")
    table = ddp_results.bound_table({"bf16": bound})
    assert table.loc["all-reduce, timed in the hook (ms)", "bf16"] == "50.0 → 30.0"
    assert table.loc["most it can save (ms)", "bf16"] == "50.0"
    slower = ddp_results.communication_bound(
        compression_runs([0.40, 0.41, 0.39]), {"compression": None}, {"compression": "bf16"}, fit
    )  # 100 ms lost against a 30 ms all-reduce (the α-β model's 24.2 ms is smaller)
    assert ddp_results.bound_sentence("bf16", slower).endswith(
        "It cost 100 ms more per step; its own all-reduce takes 30.0 ms, the most it could cost, so the "
        "measured difference, larger than that, is not the all-reduce's doing."
    )


def test_a_saving_larger_than_the_whole_all_reduce_is_not_the_all_reduce_s_doing():
    fit = {"alpha_seconds": 0.0, "seconds_per_byte": 1e-9}
    bound = ddp_results.communication_bound(
        compression_runs([0.10, 0.11, 0.09]), {"compression": None}, {"compression": "bf16"}, fit
    )
    assert bound["saved_low"] > bound["most_saved"]  # 200 ms saved against a 50 ms all-reduce
    assert ddp_results.bound_sentence("bf16", bound).endswith("is not the all-reduce's doing.")


def test_chapter_bounds_compare_each_setting_with_the_default():
    fit = {"alpha_seconds": 0.0, "seconds_per_byte": 1e-9}
    caps = launches({"model": "ConvNet", "bucket_cap_mb": 25}, [1.0] * 3, allreduce=[0.002] * 3) + launches(
        {"model": "ConvNet", "bucket_cap_mb": 0.25}, [1.0] * 3, allreduce=[0.003] * 3, buckets=[60, 40]
    )
    compressed = [({**v, "model": "LinearNet"}, r) for v, r in compression_runs([0.3] * 3)]
    bounds = ddp_results.chapter_bounds({"buckets": caps, "compression": compressed}, fit)
    assert list(bounds) == ["bf16 against none, LinearNet", "0.25 MiB buckets against 25 MiB, ConvNet"]
    assert bounds["0.25 MiB buckets against 25 MiB, ConvNet"]["buckets"] == [1, 2]


def test_the_buckets_ddp_formed_are_listed_in_all_reduce_order():
    runs = [
        ({"model": "LinearNet", "ranks": 2, "launch": 0},
         record([0.1], buckets=[404_880, 48_004_000], cap=0.25)),
        ({"model": "LinearNet", "ranks": 2, "launch": 1}, record([0.1], buckets=[1], cap=0.25)),
        ({"model": "LinearNet", "ranks": 1, "launch": 0}, record([0.1], buckets=[2], cap=0.25)),
    ]  # fmt: skip
    table = ddp_results.bucket_table(runs, ranks=2)
    assert table.to_dict("records") == [
        {"buckets per step": 2, "bucket bytes, in all-reduce order": "404,880 + 48,004,000",
         "bytes per step": "48,408,880"}
    ]  # fmt: skip
    assert table.index.tolist() == [("LinearNet", "0.25")]


def test_the_scaling_table_compares_each_rank_count_with_one_rank():
    runs = launches({"model": "ConvNet", "backend": "gloo", "ranks": 1}, [2.0, 2.1, 1.9]) + launches(
        {"model": "ConvNet", "backend": "gloo", "ranks": 2}, [1.0, 1.05, 0.95], allreduce=[0.004] * 3
    )
    table, changes = ddp_results.scaling_table(runs)
    assert table["step time (s)"].tolist() == ["2.00", "1.00"]
    assert table["all-reduce (ms)"].tolist() == ["–", "4.00"]
    assert table["against one rank"].iloc[1].startswith("faster, 2.00×")
    assert changes["ConvNet", "gloo", 2]["speedup"] == pytest.approx(2.0)


def test_k_ranks_agree_with_one_process_step_by_step_in_the_table():
    runs = [
        ({"model": "ConvNet", "ranks": 1, "launch": 0}, record([1.0], losses=(2.0, 1.0))),
        ({"model": "ConvNet", "ranks": 2, "launch": 0}, record([1.0], losses=(2.0, 1.00001))),
    ]
    table = ddp_results.exact_parity_table(runs, 2)
    assert table.loc["ConvNet"].to_dict() == {
        "ranks": 2, "steps compared": 2, "within 1e-4 (relative)": True,
        "largest relative difference": "1.0e-05",
    }  # fmt: skip


def test_chance_is_the_commonest_digit_s_share():
    assert ddp_results.commonest_digit_share(torch.tensor([1, 1, 2, 3])) == 0.5


def test_the_learning_check_holds_the_gaps_against_the_seeds_spread():
    parity = [
        ({"seed": 0, "ranks": 1}, record([1.0], accuracy=0.50)),
        ({"seed": 0, "ranks": 2}, record([1.0], accuracy=0.50)),
        ({"seed": 1, "ranks": 1}, record([1.0], accuracy=0.70)),
        ({"seed": 1, "ranks": 2}, record([1.0], accuracy=0.675)),
    ]
    rounding = [
        ({"seed": 0, "compression": "bf16"}, record([1.0], accuracy=0.45, losses=(2.0, 1.01))),
        ({"seed": 1, "compression": "bf16"}, record([1.0], accuracy=0.70, losses=(2.0, 1.0))),
    ]
    check = ddp_results.learning_check(parity, rounding, {0: 0.25, 1: 0.30}, 2)
    assert check["ranks_gap"] == pytest.approx(0.025) and check["rounding_gap"] == pytest.approx(0.05)
    assert check["noise"] == pytest.approx(0.1414, abs=1e-4)  # stdev of 0.5 and 0.7: 0.2 / sqrt(2)
    assert check["rounding_loss"] == pytest.approx(0.01)
    assert check["learns"] and check["lowest_margin"] == pytest.approx(0.25)  # 0.50 - 0.25
    assert check["table"].loc[0, "bf16 loss difference (relative)"] == "1.0e-02"
    sentence = ddp_results.learning_sentence(check, 2, "ConvNet")
    assert "at most 0.025, and with compressed gradients by at most 0.050" in sentence
    assert sentence.endswith("against a seed-to-seed spread of 0.141.")
    near_chance = ddp_results.learning_check(parity[:2], [], {0: 0.45}, 2)
    assert not near_chance["learns"] and math.isnan(near_chance["noise"])
    assert "too little for accuracy to show anything" in ddp_results.learning_sentence(
        near_chance, 2, "ConvNet"
    )


def test_a_launch_frame_says_each_setup_in_words():
    runs = [({"model": "ConvNet", "backend": "gloo", "ranks": 1, "compression": None, "launch": 0},
             record([1.0, 3.0, 2.0]))]  # fmt: skip
    frame = ddp_results.launch_frame(runs, "model", setup=("backend", "ranks"))
    assert frame.to_dict("records") == [
        {"model": "ConvNet", "setup": "gloo, 1 rank", "launch": 0, "step time (s)": 2.0}
    ]
    assert ddp_results.launch_frame(runs, "compression")["compression"].tolist() == ["none"]


def test_the_warm_up_table_sets_the_first_steps_beside_the_timed_ones():
    def run(launch, steps):
        rec = record(steps[3:])
        rec["result"].update(warmup_steps=3, history=[{"step_seconds": steps}])
        return {"model": "LinearNet", "backend": "gloo", "ranks": 1, "launch": launch}, rec

    runs = [run(0, [0.9, 0.4, 0.3, 0.2, 0.2, 0.2]), run(1, [0.7, 0.5, 0.3, 0.25, 0.2, 0.2])]
    table = ddp_results.warmup_table(runs)
    # first steps 0.9 and 0.7; warm-up medians 0.35 and 0.4; timed medians 0.2 and 0.2
    assert table.loc[("LinearNet", "gloo", 1)].tolist() == ["0.800", "0.375", "0.200"]
