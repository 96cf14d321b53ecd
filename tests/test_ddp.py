"""helpers.ddp: the traffic recorder and the ring formula (the worker itself runs in tests/test_launch.py)."""

import pandas as pd
import pytest

from helpers import ddp


def test_recorder_groups_buckets_by_step():
    recorder = ddp.TrafficRecorder()
    recorder.next_step()
    recorder.buckets[recorder.step] += [100, 28]
    recorder.next_step()
    assert recorder.buckets == [[100, 28], []]


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
    assert summary["method"].startswith("wall time of epoch 2")
    assert summary["steps_per_epoch"] == 1 and summary["step_seconds_all"] == []


def test_traffic_per_epoch_keeps_inputs_and_halves_all_reduce_as_the_batch_doubles():
    table = ddp.traffic_per_epoch(["ConvNet"], [32, 64, 128], 2700, world_sizes=[2, 4])
    assert table["steps"].tolist() == [85, 43, 22]
    assert table["input bytes (all ranks)"].tolist() == [2700 * 12_000 * 4] * 3
    assert table["all-reduced bytes"].tolist() == [85 * 1_504_800, 43 * 1_504_800, 22 * 1_504_800]
    assert table["ring bytes sent per rank, k=2"].tolist() == table["all-reduced bytes"].tolist()
    assert table["ring bytes sent per rank, k=4"].tolist() == [85 * 2_257_200, 43 * 2_257_200, 22 * 2_257_200]


def test_runs_frame_and_parity_summary():
    record = {"result": {"test_accuracy": 0.5, "history": [1, 2], "step_seconds_all": [1.0, 3.0, 2.0]}}
    assert ddp.runs_frame([({"seed": 3}, record)]).to_dict("records") == [
        {"seed": 3, "test_accuracy": 0.5, "step_median": 2.0, "step_min": 1.0, "step_max": 3.0}
    ]
    parity = pd.DataFrame(
        {"seed": [0, 0, 1, 1], "ranks": [1, 2, 1, 2], "test_accuracy": [0.50, 0.55, 0.70, 0.60]}
    )
    summary = ddp.parity_summary(parity)
    assert summary["largest_gap"] == pytest.approx(0.10)
    assert summary["one_process_std"] == pytest.approx(pd.Series([0.5, 0.7]).std())


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
