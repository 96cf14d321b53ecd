"""helpers.ddp: the traffic recorder and the ring formula (the worker itself runs in tests/test_launch.py)."""

import pandas as pd
import pytest

from helpers import ddp
from helpers.results import ResultStore


def test_recorder_groups_buckets_by_step_and_times_each():
    recorder = ddp.TrafficRecorder()
    recorder.next_step()
    first = recorder.start(100)
    second = recorder.start(28)
    recorder.finish(*second)  # buckets may finish in any order: each has its place
    recorder.finish(*first)
    recorder.next_step()
    assert recorder.buckets == [[100, 28], []]
    assert [len(step) for step in recorder.seconds] == [2, 0]
    assert all(0 <= seconds < 1 for seconds in recorder.seconds[0])
    assert first[:2] == (0, 0) and second[:2] == (0, 1)


@pytest.mark.parametrize(("world_size", "sent"), [(1, 0), (2, 100), (4, 150), (8, 175)])
def test_ring_all_reduce_sends_two_k_minus_one_over_k(world_size, sent):
    assert ddp.ring_bytes_per_rank(100, world_size) == sent


def test_compression_is_checked_and_unknown_settings_refused():
    with pytest.raises(ValueError, match="compression must be"):
        ddp.TrafficRecorder("int8")
    with pytest.raises(ValueError, match="unknown DDP setting"):
        ddp.ddp_config(batchsize=10)
    assert ddp.ddp_config(model="ConvNet")["model"] == "ConvNet"


def test_summary_of_a_run():
    history = [{"epoch": 1, "epoch_seconds": 9.0, "train_loss": 2.0}, {"epoch": 2, "epoch_seconds": 3.0,
               "train_loss": 1.5, "train_accuracy": 0.5, "test_accuracy": 0.4}]  # fmt: skip
    results = [
        {"world_size": 4, "history": history, "bucket_bytes_per_step": [[60, 40], [60, 40]],
         "gradient_bytes": 100, "threads": 1},
    ]  # fmt: skip
    summary = ddp.summarize_run(results)
    assert summary["epoch_seconds"] == 3.0 and summary["steps"] == 2 and summary["buckets_per_step"] == 2
    assert (
        summary["all_reduced_bytes_per_step"] == 100 and summary["ring_bytes_sent_per_rank_per_step"] == 150
    )
    assert summary["method"].startswith("wall time of each step on rank 0 after the first 0 (warm-up)")
    assert summary["steps_per_epoch"] == 1 and summary["step_seconds_all"] == []
    assert summary["bucket_bytes"] == [60, 40] and summary["allreduce_seconds_all"] == []


def test_warm_up_steps_are_left_out_and_a_step_s_all_reduce_is_its_time_in_flight_on_the_last_rank():
    history = [{"epoch": 1, "epoch_seconds": 1.6, "train_loss": 2.0, "step_seconds": [1.0, 0.6]},
               {"epoch": 2, "epoch_seconds": 0.9, "train_loss": 1.5, "step_seconds": [0.5, 0.4],
                "train_accuracy": 0.5, "test_accuracy": 0.4}]  # fmt: skip
    rank = {"world_size": 2, "history": history, "bucket_bytes_per_step": [[60, 40]] * 4,
            "gradient_bytes": 100, "threads": 1}  # fmt: skip
    # (hand-over, ready) of each of the two buckets, per step; the warm-up step's marks are left out
    early = {
        **rank,
        "bucket_marks_per_step": [
            [(0, 1), (0, 1)],
            [(0.0, 0.3), (0.1, 0.3)],
            [(0.0, 0.25), (0.2, 0.3)],
            [(0.0, 0.2), (0.1, 0.2)],
        ],
    }
    late = {
        **rank,
        "bucket_marks_per_step": [
            [(0, 1), (0, 1)],
            [(0.2, 0.3), (0.25, 0.3)],
            [(0.1, 0.25), (0.28, 0.3)],
            [(0.15, 0.2), (0.19, 0.2)],
        ],
    }
    summary = ddp.summarize_run([early, late], warmup_steps=1)
    assert summary["step_seconds_all"] == [0.6, 0.5, 0.4] and summary["warmup_steps"] == 1
    # time in flight on the rank with the least (the last to hand over): overlapping buckets count once,
    # the gap between them not at all: 0.3 − 0.2; (0.25 − 0.1) + (0.3 − 0.28) = 0.17, not the span's 0.2;
    # 0.2 − 0.15
    assert summary["allreduce_seconds_all"] == pytest.approx([0.1, 0.17, 0.05])
    # exposed: after the last hand-over, when backward has nothing left to compute: 0.05, 0.02, 0.01
    assert summary["exposed_allreduce_seconds_all"] == pytest.approx([0.05, 0.02, 0.01])


def test_time_in_flight_counts_overlaps_once_and_gaps_not_at_all():
    # three buckets of a 500 ms backward: two overlapping early (10-40 and 30-50 ms), one at the end
    # (480-500 ms): 40 + 20 ms in flight, where first hand-over to last ready spans 490 ms
    assert ddp.in_flight_seconds([(0.48, 0.5), (0.01, 0.04), (0.03, 0.05)]) == pytest.approx(0.06)
    assert ddp.in_flight_seconds([(0.0, 0.3), (0.1, 0.2)]) == pytest.approx(0.3)  # one inside another
    assert ddp.in_flight_seconds([]) == 0.0


def test_a_warm_up_that_leaves_nothing_to_time_is_refused():
    config = ddp.ddp_config(train_samples=40, global_batch_size=20, epochs=2, warmup_steps=3)
    assert ddp.planned_steps(config) == 4  # 40 // 20 = 2 steps per epoch, 2 epochs
    ddp.check_timed_steps(config)
    with pytest.raises(
        ValueError, match="warmup_steps 4 leaves no timed step of the 4 steps that 2 epochs of 40"
    ):
        ddp.check_timed_steps({**config, "warmup_steps": 4})
    with pytest.raises(ValueError, match="of the 2 steps that 1 epoch of 40 clips"):
        ddp.check_timed_steps({**config, "epochs": 1, "warmup_steps": 2})
    assert ddp.planned_steps(ddp.ddp_config(train_samples=None)) == 2 * (2700 // 50)


def test_traffic_per_epoch_keeps_inputs_and_halves_all_reduce_as_the_batch_doubles():
    table = ddp.traffic_per_epoch(["ConvNet"], [32, 64, 128], 2700, world_sizes=[2, 4])
    assert table["steps"].tolist() == [85, 43, 22]
    assert table["input bytes (all ranks)"].tolist() == [2700 * 12_000 * 4] * 3
    assert table["all-reduced bytes"].tolist() == [85 * 1_504_800, 43 * 1_504_800, 22 * 1_504_800]
    assert table["ring bytes sent per rank, k=2"].tolist() == table["all-reduced bytes"].tolist()
    assert table["ring bytes sent per rank, k=4"].tolist() == [85 * 2_257_200, 43 * 2_257_200, 22 * 2_257_200]


def test_runs_frame():
    record = {"result": {"test_accuracy": 0.5, "history": [1, 2], "step_seconds_all": [1.0, 3.0, 2.0]}}
    assert ddp.runs_frame([({"seed": 3}, record)]).to_dict("records") == [
        {"seed": 3, "test_accuracy": 0.5, "step_median": 2.0, "step_min": 1.0, "step_max": 3.0}
    ]


PLAN = pd.DataFrame({"backend": ["gloo", "gloo"], "ranks": [1, 2], "runs": [True, True]})


def test_the_chapter_s_launches_alternate_and_the_checks_launch_each_seed_once():
    sweeps = ddp.chapter_sweeps(["LinearNet", "ConvNet"], PLAN, [0.25, 25], [None, "bf16"], [0, 1], 2)
    assert {section: (len(s["variations"]), s["launches"]) for section, s in sweeps.items()} == {
        "scaling": (4, 2), "buckets": (2, 2), "compression": (2, 2), "parity": (4, 1), "rounding": (2, 1)
    }  # fmt: skip
    assert sweeps["rounding"]["variations"][1] == {
        "model": "ConvNet", "seed": 1, "compression": "bf16", "ranks": 2
    }  # fmt: skip
    order = ddp.launch_order(sweeps)
    assert len(order) == 4 * 2 + 2 * 2 + 2 * 2 + 4 + 2  # 22 launches asked for
    assert [number for _, _, number in order] == [0] * 14 + [1] * 8  # every launch 0 first
    assert order[14] == ("scaling", {"model": "LinearNet", "backend": "gloo", "ranks": 1}, 1)


def test_on_one_gpu_nccl_s_one_rank_is_launched_beside_gloo_s_and_gloo_runs_the_rest():
    one_gpu = pd.DataFrame({"backend": ["nccl", "nccl", "gloo", "gloo"], "ranks": [1, 4, 1, 4],
                            "runs": [True, False, True, True]})  # fmt: skip
    sweeps = ddp.chapter_sweeps(["LinearNet"], one_gpu, [25], [None], [0], 3)
    assert sweeps["scaling"]["variations"] == [
        {"model": "LinearNet", "backend": "nccl", "ranks": 1},
        {"model": "LinearNet", "backend": "gloo", "ranks": 1},
        {"model": "LinearNet", "backend": "gloo", "ranks": 4},
    ]
    nowhere = one_gpu.assign(runs=[True, False, True, False])  # no backend runs 4 ranks: refused
    with pytest.raises(ValueError, match="no backend can run 4 ranks"):
        ddp.chapter_sweeps(["LinearNet"], nowhere, [25], [None], [0], 3)


def test_a_launch_that_two_sections_ask_for_is_measured_once(tmp_path, monkeypatch):
    launched = []

    def fake_launch(config, world_size, **options):
        launched.append((config["model"], world_size, config["bucket_cap_mb"], config["compression"]))
        history = [{"epoch": 1, "epoch_seconds": 1.0, "train_loss": 2.0, "test_accuracy": 0.1,
                    "step_seconds": [0.2] * 8, "step_losses": [2.0] * 8}]  # fmt: skip
        rank = {"world_size": world_size, "history": history, "bucket_bytes_per_step": [[100]] * 8,
                "bucket_seconds_per_step": [[0.01]] * 8, "bucket_marks_per_step": [[(0.0, 0.01)]] * 8,
                "gradient_bytes": 100, "threads": 1}  # fmt: skip
        return [rank] * world_size

    monkeypatch.setattr(ddp, "launch", fake_launch)
    store = ResultStore("test", root=tmp_path, hardware={"machine": "test"})
    sweeps = ddp.chapter_sweeps(["LinearNet", "ConvNet"], PLAN, [0.25, 25], [None, "bf16"], [0], 2)
    base = {"backend": "gloo", "train_samples": 16, "global_batch_size": 8, "epochs": 4, "warmup_steps": 2}
    rounds = []  # what runs alongside: after every launch of its round, before the next round's first
    runs = ddp.run_sweeps(
        store, base, sweeps, alongside=lambda number: rounds.append((number, len(launched)))
    )
    assert rounds == [(0, 4 + 1 + 1 + 1), (1, 4 + 1 + 1 + 1 + 4 + 1 + 1)]
    # scaling 4 x 2, ConvNet at 0.25 MiB x 2, LinearNet with bf16 x 2, ConvNet with bf16 for seed 0: the
    # 25 MiB buckets, uncompressed LinearNet and seed 0's parity runs are scaling's launches again
    assert len(launched) == 8 + 2 + 2 + 1
    assert [len(pairs) for pairs in runs.values()] == [8, 4, 4, 2, 1]
    assert runs["buckets"][3][0] == {"model": "ConvNet", "bucket_cap_mb": 25, "ranks": 2, "launch": 1}
    assert runs["buckets"][3][1] is not None and runs["buckets"][3][1] == runs["scaling"][7][1]
    assert runs["scaling"][0][1]["result"]["step_seconds_all"] == [0.2] * 6  # after 2 warm-up steps
    assert ddp.launch_steps(runs["compression"], compression="bf16") == [[0.2] * 6] * 2
    # a round's launch removed (another day, another speed): that round is launched again whole, beside
    # it, and what runs alongside runs again; round 0 is reused untouched
    store.path(runs["scaling"][7][1]["config"]).unlink()
    launched.clear()
    rounds.clear()
    tomorrow = ResultStore("test", root=tmp_path, hardware={"machine": "test"})  # the next run
    again = ddp.run_sweeps(tomorrow, base, sweeps, alongside=lambda n: rounds.append((n, len(launched))))
    assert len(launched) == 6 and rounds == [(0, 0), (1, 1), (1, 6)]
    assert again["scaling"][:4] == runs["scaling"][:4] and again["scaling"][7][1] == tomorrow.get(
        runs["scaling"][7][1]["config"]
    )


@pytest.mark.parametrize("world_size", [1, 2, 5])
def test_the_ranks_together_take_one_process_s_batches(world_size):
    one = ddp.GlobalBatchSampler(23, 10, 1, 0, seed=4)
    ranks = [ddp.GlobalBatchSampler(23, 10, world_size, rank, seed=4) for rank in range(world_size)]
    for epoch in (0, 1):
        for sampler in (one, *ranks):
            sampler.set_epoch(epoch)
        together = [[clip for part in parts for clip in part] for parts in zip(*ranks, strict=True)]
        assert together == list(one) and len(together) == len(one) == 2  # the last 3 clips are dropped
    one.set_epoch(0)
    first_epoch = list(one)
    one.set_epoch(1)
    assert list(one) != first_epoch  # each epoch its own shuffle
    with pytest.raises(ValueError, match="must divide over 3 ranks"):
        ddp.GlobalBatchSampler(23, 10, 3, 0, seed=0)


def test_loss_parity_compares_every_step():
    def run(*losses):
        return {"result": {"history": [{"step_losses": list(losses)}]}}

    parity = ddp.loss_parity(run(2.0, 1.0), run(2.0, 1.001))
    assert parity == {"steps": 2, "largest_abs_difference": pytest.approx(0.001),
                      "largest_rel_difference": pytest.approx(0.001)}  # fmt: skip
    with pytest.raises(ValueError, match="not the same run"):
        ddp.loss_parity(run(2.0), run(2.0, 1.0))


def test_a_comparison_of_launches_counts_each_launch_by_its_median():
    assert ddp.median_of_medians([[1, 2, 3], [4, 5, 6], [0.5]]) == 2  # medians 2, 5 and 0.5


@pytest.mark.parametrize(
    ("model", "cap", "buckets"),
    [
        # DDP fills buckets in reverse registration order and closes one at the first tensor that takes
        # it to the cap (0.25 MiB = 262,144 B). ConvNet: fc2 (40 + 4,000) and fc1 (400 + 800,000) =
        # 804,440; conv3 (40 + 60,000) and conv2 (120 + 600,000) = 660,160; conv1 (200 + 40,000) = 40,200.
        ("ConvNet", 0.25, [804_440, 660_160, 40_200]),
        # LinearNet: the last three layers (440 + 4,040 + 400,400 = 404,880), then fc1 (4,000 + 48,000,000)
        ("LinearNet", 0.25, [404_880, 48_004_000]),
        ("LinearNet", 25, [48_408_880]),  # one bucket: the 48 MB weight alone passes 25 MiB
        ("ConvNet", 25, [1_504_800]),
    ],
)
def test_buckets_are_ddp_s_by_hand(model, cap, buckets):
    assert ddp.ddp_bucket_bytes(model, cap) == buckets
    assert ddp.ddp_bucket_bytes(model, cap, "bf16") == [size / 2 for size in buckets]


def test_buckets_of_any_model_from_its_gradient_sizes():
    """A model given by its gradient sizes in backward order: 300 kB closes the first 0.25 MiB bucket
    (262,144 B) alone; 100 kB + 200 kB close the second; 50 kB is left for the last."""
    assert ddp.ddp_bucket_bytes([300_000, 100_000, 200_000, 50_000], 0.25) == [300_000, 300_000, 50_000]
