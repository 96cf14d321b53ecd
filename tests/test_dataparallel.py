"""helpers.dataparallel: one step equals single-device training, and moves exactly the counted bytes."""

import pytest
import torch

from helpers import data, dataparallel, models, results, train


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
    assert "2 replicas" in dataparallel.explain_replicas(timing, timing, shared=True)


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
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert dataparallel.replica_devices("cuda", 4) == (["cuda:0", "cuda:1", "cuda:2", "cuda:3"], False)
    assert dataparallel.replica_devices("cuda", 2, gpus=1) == (["cuda:0", "cuda:0"], True)
    assert dataparallel.replica_devices("cuda", 5) == (["cuda:0"] * 5, True)  # more replicas than GPUs


def test_fit_recovers_a_known_line():
    fit = dataparallel.fit_seconds_per_byte([0, 1e6, 2e6, 4e6], [0.001, 0.002, 0.003, 0.005])
    assert fit["seconds_per_byte"] == pytest.approx(1e-9)
    assert fit["intercept_seconds"] == pytest.approx(0.001)
    assert fit["bytes_per_second"] == pytest.approx(1e9) and fit["r_squared"] == pytest.approx(1.0)


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


def fake_timing(model: str, replicas: int, batch: int, steps: list[float]) -> dict:
    phases = dict.fromkeys(dataparallel.PHASES, 0.01)
    return {"config": {"model": model, "batch_size": batch},
            "result": {"replicas": replicas, "step_seconds_all": steps, "steps_per_epoch": 10,
                       "phase_seconds": phases, "step_seconds": sorted(steps)[len(steps) // 2],
                       "bytes_per_step": {"reduce_gradients": 8},
                       "communication_to_compute": 0.5}}  # fmt: skip


def test_frames_of_timing_records():
    records = [fake_timing("ConvNet", 1, 20, [1.0, 1.2, 1.1]), fake_timing("ConvNet", 2, 20, [2.0, 2.2, 2.1])]
    steps = dataparallel.steps_frame(records)
    assert len(steps) == 6 and steps["epoch_seconds"].tolist()[:3] == [10.0, 12.0, 11.0]
    phases = dataparallel.phase_frame(records)
    assert len(phases) == 2 * len(dataparallel.PHASES)
    assert set(phases.query("phase == 'reduce_gradients'")["bytes"]) == {8}
    assert set(phases.query("phase == 'forward'")["kind"]) == {"compute"}
    compare = dataparallel.torch_comparison([fake_timing("ConvNet", 2, 20, [1.5, 1.5, 1.5])], records)
    assert compare.iloc[0].tolist() == ["1,500.0", "2,100.0"]
    assert list(compare.columns) == ["torch.nn.DataParallel step (ms)", "rebuilt step (ms)"]


def explained(single_compute: float, multi_compute: float, shared: bool) -> str:
    single = {"replicas": 1, "step_seconds_all": [1.0, 1.1, 1.2], "compute_seconds": single_compute,
              "transfer_seconds": 0.0, "communication_to_compute": 0.0}  # fmt: skip
    multi = {"replicas": 4, "step_seconds_all": [3.0, 3.1, 3.2], "compute_seconds": multi_compute,
             "transfer_seconds": 0.5, "communication_to_compute": 0.5 / multi_compute}  # fmt: skip
    return dataparallel.explain_replicas(single, multi, shared)


def test_a_compute_choke_that_runs_slower_says_why():
    """4 replicas: 0.5 s moving data against 2.5 s computing (0.2x: a compute choke), yet the step is
    slower (1.1 s over 3.1 s = 0.35x, interval 1.0/3.2 to 1.2/3.0), because computing took 2.5x as long."""
    said = explained(1.0, 2.5, shared=True)
    assert "moving data took 500 ms per step and computing 2,500 ms, 0.2× as long: a compute choke" in said
    assert "slower, 0.35× (0.31–0.40×)" in said
    assert "Computing alone took 2.50× as long as with one replica (1,000 ms)" in said
    assert "every replica runs the whole model on the same cores" in said
    assert "idle" in explained(1.0, 0.5, shared=True) and "idle" not in explained(1.0, 0.5, shared=False)
    assert explained(1.0, 1.0, shared=True).endswith("(1,000 ms).")
    # 0.5 s moving against 0.4 s computing: the label turns
    assert "a network choke" in explained(1.0, 0.4, shared=False)


def test_transfer_points_and_fits_per_group_of_phases():
    records = [fake_timing("LinearNet", 1, 20, [1.0])]
    for replicas, megabytes in ((2, 1), (4, 3)):
        record = fake_timing("LinearNet", replicas, 20, [1.0])
        moved = megabytes * 10**6
        record["result"]["bytes_per_step"] = {
            "broadcast_parameters": moved, "reduce_gradients": moved, "scatter_inputs": 1000
        }  # fmt: skip
        record["result"]["phase_seconds"] = dict.fromkeys(dataparallel.PHASES, 0.0) | {
            "broadcast_parameters": megabytes * 1e-4, "reduce_gradients": megabytes * 5e-4}  # fmt: skip
        records.append(record)
    points = dataparallel.transfer_points(records)
    assert len(points) == 2 * 3 and set(points["replicas"]) == {2, 4}  # no point for one replica
    every = points[points["phases"] == "all transfer phases"].set_index("replicas")
    assert every.loc[4, "bytes"] == 6_001_000 and every.loc[4, "seconds"] == pytest.approx(18e-4)
    fits = dataparallel.transfer_fits(points)
    # 1e-4 s per MB is 10 GB/s, 5e-4 s per MB is 2 GB/s
    assert fits["broadcast parameters"]["bytes_per_second"] == pytest.approx(10e9)
    assert fits["reduce gradients"]["bytes_per_second"] == pytest.approx(2e9)
    # each configuration's own speed: none moves 10 MB, so both count; above 3 MB only the 4-replica one
    assert dataparallel.phase_speeds(points)["reduce gradients"] == pytest.approx((2e9, 2e9))
    speeds = dataparallel.phase_speeds(points, min_bytes=3e6)["all transfer phases"]
    assert speeds == pytest.approx((6_001_000 / 18e-4, 6_001_000 / 18e-4))


def test_readable_byte_tables():
    moved = dataparallel.moved_table({"scatter_inputs": 96_000, "broadcast_parameters": 48_408_880})
    expected = {"scatter inputs": "96,000", "broadcast parameters": "48,408,880"}
    assert moved["bytes moved"].to_dict() == expected
    table = dataparallel.bytes_table(["LinearNet"], [2], samples=2000, batch_size=20)
    # the seed's example: 100 steps of 48,408,880 bytes out and back, 1,000 clips of 48,000 bytes scattered
    assert table[("LinearNet", "2 replicas")].to_dict() == {
        "scatter inputs": "48.0", "broadcast parameters": "4,840.9", "gather outputs": "0.0",
        "scatter output gradients": "0.0", "reduce gradients": "4,840.9", "total": "9,729.9",
    }  # fmt: skip


def test_one_replica_against_chapter_one_reuses_its_records(fsdd, tmp_path):
    store = results.ResultStore("test-dataparallel", root=tmp_path, hardware={"cpu_model": "test"})
    train_set = data.take(fsdd.split("train"), 20)
    train.stored_step_timing(store, "LinearNet", train_set, batch_size=10, timed_steps=1, optimizer="adam",
                             lr=1e-3, device="cpu", seed=0)  # fmt: skip  # chapter 1's record
    records = [fake_timing("LinearNet", 1, 10, [0.1, 0.2, 0.3]), fake_timing("LinearNet", 2, 10, [0.1])]
    found = dataparallel.against_chapter_one(store, records, train_set, device="cpu", timed_steps=1, seed=0)
    assert found["reused"] and len(found["table"]) == 1 and sum(found["verdicts"].values()) == 1
    assert found["table"].iloc[0]["one replica's step (ms)"] == "200 (100–300, 3 steps)"
    records.append(fake_timing("LinearNet", 1, 20, [0.1, 0.2]))  # batch 20: no chapter-1 record yet
    assert not dataparallel.against_chapter_one(store, records, train_set, device="cpu", timed_steps=1,
                                                seed=0)["reused"]  # fmt: skip


def test_epoch_bytes_table_adds_up():
    table = dataparallel.epoch_bytes_table(["LinearNet"], [2], [2000], 20)
    assert table.iloc[0]["total"] == 9_729_856_000  # the seed's example, as in the test above


def test_balance_batch_is_where_inputs_weigh_as_much_as_parameters_and_gradients():
    sample_bytes = 8 * 376_200 * 2 // 100  # chosen so that the balance falls on batch 100 for ConvNet
    assert dataparallel.balance_batch("ConvNet", 2, sample_bytes) == 100
    epoch = dataparallel.bytes_per_epoch(
        models.build_model("ConvNet"), samples=1000, batch_size=100, replicas=2, sample_bytes=sample_bytes
    )
    assert epoch["scatter_inputs"] == epoch["broadcast_parameters"] + epoch["reduce_gradients"]
    assert dataparallel.balance_batch("ConvNet", 4) == 2 * dataparallel.balance_batch("ConvNet", 2)
