"""helpers.dataparallel: one step equals single-device training, and moves exactly the counted bytes."""

import pytest
import torch

from helpers import data, dataparallel, dataparallel_sharing, models, train


@pytest.mark.parametrize(
    ("batch_size", "replicas", "sizes"),
    [(10, 4, [3, 3, 3, 1]), (2, 4, [1, 1]), (7, 3, [3, 3, 1]), (12, 4, [3, 3, 3, 3]), (5, 1, [5])],
)
def test_chunk_sizes_follow_tensor_chunk(batch_size, replicas, sizes):
    assert dataparallel.chunk_sizes(batch_size, replicas) == sizes
    assert [len(c) for c in torch.zeros(batch_size).chunk(replicas)] == sizes


@pytest.mark.parametrize("name", ["LinearNet", "ConvNet"])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("batch_size", [7, 10])
def test_step_equals_single_device_training(name, replicas, batch_size):
    torch.manual_seed(replicas)
    inputs, targets = torch.randn(batch_size, 1, 12000), torch.randint(0, 10, (batch_size,))
    ours = dataparallel.parameters_after_one_step(name, inputs, targets, replicas=["cpu"] * replicas)
    reference = dataparallel.parameters_after_one_step(name, inputs, targets)
    for mine, theirs in zip(ours, reference, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-7)
    torch.manual_seed(0)
    reference_loss = torch.nn.functional.cross_entropy(models.build_model(name)(inputs), targets).item()
    torch.manual_seed(0)
    model = models.build_model(name)
    trainer = dataparallel.DataParallelTrainer(model, ["cpu"] * replicas, optimizer="sgd")
    report = trainer.step(inputs, targets)
    assert report.loss == pytest.approx(reference_loss, rel=1e-6)
    assert report.bytes == dataparallel.bytes_per_step(model, batch_size, replicas)


def test_every_phase_is_timed_on_every_replica_device(monkeypatch):
    timed_on = []

    class RecordingTimer(train.Timer):
        def __init__(self, devices):
            timed_on.append(list(devices))
            super().__init__("cpu")

    monkeypatch.setattr(dataparallel, "Timer", RecordingTimer)
    trainer = dataparallel.DataParallelTrainer(models.LinearNet(), ["cpu", "cpu", "cpu"])
    report = trainer.step(torch.randn(6, 1, 12000), torch.randint(0, 10, (6,)), timed=True)
    assert set(report.seconds) == set(dataparallel.PHASES)
    assert timed_on == [[torch.device("cpu")] * 3] * len(dataparallel.PHASES)


def test_bytes_per_step_by_hand():
    conv = models.ConvNet()
    counted = dataparallel.bytes_per_step(conv, batch_size=10, replicas=4)  # chunks 3, 3, 3, 1
    assert counted == {
        "scatter_inputs": 7 * 48_000,
        "broadcast_parameters": 3 * 376_200 * 4,
        "gather_outputs": 7 * 40,
        "scatter_output_gradients": 7 * 40,
        "reduce_gradients": 3 * 376_200 * 4,
    }
    assert set(dataparallel.bytes_per_step(conv, 10, 1).values()) == {0}


def test_seeds_example_ten_gigabytes_per_epoch():
    # LinearNet on two devices, batch 20, 2,000 clips: 100 steps, 46 MiB of parameters moved twice each.
    counted = dataparallel.bytes_per_epoch(models.LinearNet(), samples=2000, batch_size=20, replicas=2)
    assert (
        counted["broadcast_parameters"] + counted["reduce_gradients"] == 2 * 100 * 48_408_880 == 9_681_776_000
    )
    assert sum(counted.values()) == 9_681_776_000 + 100 * 10 * 48_000 + 2 * 100 * 10 * 40 == 9_729_856_000


def test_epoch_count_matches_a_real_epoch_with_a_short_last_batch(fsdd):
    train_set = data.take(fsdd.split("train"), 25)
    model = models.LinearNet()
    trainer = dataparallel.DataParallelTrainer(model, ["cpu"] * 3)
    inputs, targets = train_set.tensors
    moved = {}
    for index in torch.arange(25).split(10):  # 10, 10, 5
        for phase, count in trainer.step(inputs[index], targets[index]).bytes.items():
            moved[phase] = moved.get(phase, 0) + count
    assert moved == dataparallel.bytes_per_epoch(model, samples=25, batch_size=10, replicas=3)


def test_timed_steps_report_phases_ratio_and_method(fsdd):
    timing = dataparallel.time_dataparallel_steps(
        "LinearNet", data.take(fsdd.split("train"), 40), devices=["cpu", "cpu"], batch_size=20, timed_steps=2
    )
    assert set(timing["phase_seconds"]) == set(dataparallel.PHASES)
    assert timing["bytes_per_step"] == dataparallel.bytes_per_step(models.LinearNet(), 20, 2)
    assert timing["communication_to_compute"] == timing["transfer_seconds"] / timing["compute_seconds"]
    assert timing["steps_per_epoch"] == 2 and timing["method"].startswith("median of 2 timed steps")
    assert "2 replicas" in dataparallel_sharing.explain_replicas(timing, timing, shared=True)


def test_bad_devices_are_refused():
    with pytest.raises(ValueError, match="at least one device"):
        dataparallel.DataParallelTrainer(models.LinearNet(), [])
    with pytest.raises(ValueError, match="not 'gpu'"):
        dataparallel.DataParallelTrainer(models.LinearNet(), ["gpu"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_matches_torch_data_parallel_on_cuda():
    gpus = list(range(min(torch.cuda.device_count(), 2)))
    inputs, targets = torch.randn(9, 1, 12000), torch.randint(0, 10, (9,))
    ours = dataparallel.parameters_after_one_step(
        "ConvNet", inputs, targets, replicas=[f"cuda:{g}" for g in gpus]
    )
    theirs = dataparallel.parameters_after_one_step("ConvNet", inputs, targets, device_ids=gpus)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6)


def test_replicas_share_the_device_unless_enough_gpus_may_be_used(monkeypatch):
    assert dataparallel.replica_devices("cpu", 1) == (["cpu"], False)
    assert dataparallel.replica_devices("cpu", 3) == (["cpu", "cpu", "cpu"], True)
    # The CUDA branch on a machine that claims four GPUs (no tensor is made, so none is needed)
    monkeypatch.setattr(dataparallel, "pick_device", lambda device: torch.device("cuda", 0))
    monkeypatch.setattr(dataparallel, "gpu_count", lambda: 4)  # hardware.gpu_count: the GPUs in view
    assert dataparallel.replica_devices("cuda", 4) == (["cuda:0", "cuda:1", "cuda:2", "cuda:3"], False)
    assert dataparallel.replica_devices("cuda", 2, gpus=1) == (["cuda:0", "cuda:0"], True)
    assert dataparallel.replica_devices("cuda", 5) == (["cuda:0"] * 5, True)  # more replicas than GPUs


def test_torch_data_parallel_timing_is_refused_without_cuda(fsdd, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a GPU machine checks the refusal too
    with pytest.raises(ValueError, match="needs CUDA devices"):
        dataparallel.time_torch_dataparallel_steps(
            "ConvNet", fsdd.split("train"), device_ids=[0], batch_size=10
        )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_data_parallel_timing_on_cuda(fsdd):
    timing = dataparallel.time_torch_dataparallel_steps(
        "ConvNet", data.take(fsdd.split("train"), 40), device_ids=[0], batch_size=20, timed_steps=2
    )
    assert timing["replicas"] == 1 and timing["epoch_seconds"] == timing["step_seconds"] * 2
    assert timing["method"].startswith("median of 2 timed steps")


def test_copy_benchmark_reports_its_method():
    copy = dataparallel.copy_seconds_per_byte(megabytes=1, repeats=3)
    assert copy["bytes"] == 2**20 and copy["seconds_per_byte"] == copy["seconds"] / 2**20
    assert copy["method"].startswith("median of 3 copies of 1,048,576 B")


def test_peer_copy_benchmark_names_both_ends():
    copy = dataparallel.copy_seconds_per_byte(megabytes=1, repeats=2, device="cpu", to="cpu")
    assert copy["method"] == "median of 2 copies of 1,048,576 B into a fresh buffer on cpu, after 1 warm-up"


def test_balance_batch_is_where_inputs_weigh_as_much_as_parameters_and_gradients():
    sample_bytes = 8 * 376_200 * 2 // 100  # chosen so that the balance falls on batch 100 for ConvNet
    assert dataparallel.balance_batch("ConvNet", 2, sample_bytes) == 101  # equal at 100, heavier from 101
    epoch = dataparallel.bytes_per_epoch(
        models.build_model("ConvNet"), samples=1000, batch_size=100, replicas=2, sample_bytes=sample_bytes
    )
    assert epoch["scatter_inputs"] == epoch["broadcast_parameters"] + epoch["reduce_gradients"]
    # raw waveforms (48,000 B a clip): 8 x 376,200 x 2 / 48,000 = 125.4, so from 126; on four 250.8, from 251
    assert dataparallel.balance_batch("ConvNet", 2) == 126 and dataparallel.balance_batch("ConvNet", 4) == 251
