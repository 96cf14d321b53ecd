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


def test_traffic_per_epoch_keeps_inputs_and_halves_all_reduce_as_the_batch_doubles():
    table = ddp.traffic_per_epoch(["ConvNet"], [32, 64, 128], 2700, world_size=2)
    assert table["steps"].tolist() == [85, 43, 22]
    assert table["input bytes"].tolist() == [2700 * 12_000 * 4] * 3
    assert table["all-reduced bytes"].tolist() == [85 * 1_504_800, 43 * 1_504_800, 22 * 1_504_800]
    assert table["ring bytes sent per rank (k=2)"].tolist() == table["all-reduced bytes"].tolist()


def test_runs_frame_and_parity_summary():
    record = {"result": {"test_accuracy": 0.5, "history": [1, 2]}}
    assert ddp.runs_frame([({"seed": 3}, record)]).to_dict("records") == [{"seed": 3, "test_accuracy": 0.5}]
    parity = pd.DataFrame(
        {"seed": [0, 0, 1, 1], "ranks": [1, 2, 1, 2], "test_accuracy": [0.50, 0.55, 0.70, 0.60]}
    )
    summary = ddp.parity_summary(parity)
    assert summary["largest_gap"] == pytest.approx(0.10)
    assert summary["one_process_std"] == pytest.approx(pd.Series([0.5, 0.7]).std())
