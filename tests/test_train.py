"""helpers.train: seeded training that learns, step timing with its method, bad input refused."""

import math

import pandas as pd
import pytest
import torch

from helpers import data, hardware, results, stats, train


@pytest.fixture(scope="module")
def small(fsdd):
    return data.take(fsdd.split("train"), 120, seed=0), data.take(fsdd.split("test"), 60, seed=0)


def test_short_training_run_lowers_the_loss(small):
    run = train.train("LinearNet", *small, epochs=4, batch_size=20, lr=1e-3, device="cpu", progress=False)
    losses = [row["train_loss"] for row in run.history]
    assert losses[-1] < losses[0]
    assert [row["epoch"] for row in run.history] == [1, 2, 3, 4]
    assert run.method == "each epoch in full, after 3 warm-up steps on a copy of the model"


def test_training_is_reproducible_with_a_seed(small):
    settings = dict(epochs=2, batch_size=30, device="cpu", progress=False, seed=3)
    first = train.train("LinearNet", *small, **settings).history
    second = train.train("LinearNet", *small, **settings).history
    assert [r["train_loss"] for r in first] == [r["train_loss"] for r in second]
    assert [r["test_accuracy"] for r in first] == [r["test_accuracy"] for r in second]


def test_step_timing_reports_its_method(small):
    timing = train.time_training_steps("LinearNet", small[0], batch_size=50, timed_steps=3, device="cpu")
    assert timing["steps_per_epoch"] == 3  # ceil(120 / 50)
    assert timing["epoch_seconds"] == timing["step_seconds"] * 3
    assert len(timing["step_seconds_all"]) == 3
    assert timing["method"].startswith("median of 3 timed steps x 3 steps per epoch")


@pytest.mark.parametrize("batch_size", [0, -5, 2.5])
def test_bad_batch_size_is_refused(small, batch_size):
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        train.train("LinearNet", *small, epochs=1, batch_size=batch_size)


def test_batch_larger_than_data_is_refused(small):
    with pytest.raises(ValueError, match="exceeds the 120 training samples"):
        train.time_training_steps("ConvNet", small[0], batch_size=121)


def test_devices_and_optimizers_are_checked():
    assert train.pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not 'tpu'"):
        train.pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device is visible"):
            train.pick_device("cuda")
    with pytest.raises(ValueError, match="optimizer must be one of"):
        train.make_optimizer("lbfgs", torch.nn.Linear(1, 1).parameters(), 0.1)


def test_batches_cover_every_index_once():
    parts = train.batches(10, 4, torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [4, 4, 2]
    assert sorted(torch.cat(parts).tolist()) == list(range(10))


def test_stored_training_is_reused(small, tmp_path):
    store = results.ResultStore("test-train", root=tmp_path)
    settings = dict(epochs=1, batch_size=60, device="cpu", progress=False)
    first = train.stored_training(store, "LinearNet", *small, **settings)
    again = train.stored_training(store, "LinearNet", *small, **settings)
    assert again == first and len(store.records("training")) == 1
    assert first["config"]["train_samples"] == 120 and first["config"]["threads"] >= 1


def test_stored_step_timing_checks_autocast(small, tmp_path):
    store = results.ResultStore("test-train", root=tmp_path)
    with pytest.raises(ValueError, match="autocast"):
        train.stored_step_timing(store, "LinearNet", small[0], batch_size=10, autocast="fp8")
    record = train.stored_step_timing(
        store, "LinearNet", small[0], batch_size=10, timed_steps=1, autocast="bf16"
    )
    assert record["config"]["autocast"] == "bf16" and record["result"]["steps_per_epoch"] == 12


def test_a_timer_over_several_gpus_synchronises_every_one(monkeypatch):
    synchronised = []
    monkeypatch.setattr(torch.cuda, "synchronize", synchronised.append)
    devices = [torch.device("cuda:0"), torch.device("cuda:1"), torch.device("cuda:0"), torch.device("cpu")]
    with train.Timer(devices) as timer:
        assert synchronised == [torch.device("cuda:0"), torch.device("cuda:1")]  # at the start
    assert synchronised == [torch.device("cuda:0"), torch.device("cuda:1")] * 2  # and at the end
    assert timer.seconds >= 0
    with train.Timer("cpu") as cpu_timer:
        pass
    assert cpu_timer.seconds >= 0 and len(synchronised) == 4  # the CPU needs no synchronising


def fake_step_record(model: str, batch: int, steps: list[float], **config) -> dict:
    return {"config": {"kind": "step_timing", "model": model, "batch_size": batch, **config},
            "result": {"step_seconds_all": steps, "steps_per_epoch": 3, "method": "median of 3"}}  # fmt: skip


def test_steps_frame_and_spread_table():
    steps = train.steps_frame([fake_step_record("LinearNet", 10, [0.1, 0.3, 0.2])])
    assert steps["epoch_seconds"].tolist() == pytest.approx([0.3, 0.9, 0.6])
    assert steps["samples_per_second"].tolist() == pytest.approx([100, 10 / 0.3, 50])
    table = train.spread_table(steps, ["model"]).iloc[0]
    assert (table["median"], table["min"], table["max"], table["repeats"]) == pytest.approx(
        (0.6, 0.3, 0.9, 3)
    )
    history = train.history_frame({"A": {"result": {"history": [{"epoch": 1}, {"epoch": 2}]}}})
    assert history["model"].tolist() == ["A", "A"]


def test_bf16_twice_as_fast_is_faster_and_one_as_fast_is_no_measurable_difference(monkeypatch):
    seconds = {None: [0.20, 0.21, 0.22], "bf16": [0.10, 0.105, 0.11]}
    monkeypatch.setattr(train, "stored_step_timing", lambda store, name, train_set, autocast, **settings:
                        fake_step_record(name, 10, seconds[autocast]))  # fmt: skip
    found = train.precision_comparison(None, ["LinearNet"], None, 10)["speedups"]["LinearNet"]
    assert found["speedup"] == pytest.approx(2.0) and found["verdict"] == "faster"
    assert (found["low"], found["high"]) == pytest.approx((0.20 / 0.11, 0.22 / 0.10))
    seconds["bf16"] = [0.205, 0.21, 0.215]
    found = train.precision_comparison(None, ["LinearNet"], None, 10)["speedups"]["LinearNet"]
    assert found["verdict"] == "no measurable difference"


def test_training_keeps_every_step_loss(small):
    run = train.train("LinearNet", *small, epochs=2, batch_size=40, device="cpu", progress=False)
    assert len(run.step_losses) == 2 * 3  # 120 clips in batches of 40, twice
    mean_first = sum(run.step_losses[:3]) / 3
    assert mean_first == pytest.approx(run.history[0]["train_loss"], rel=1e-5)


def test_precision_comparison(small, tmp_path):
    store = results.ResultStore("precision", root=tmp_path, hardware={"cpu_model": "test"})
    found = train.precision_comparison(store, ["LinearNet"], small[0], 4, timed_steps=2, device="cpu")
    assert set(found["steps"]["precision"]) == {"float32", "bf16"} and len(found["steps"]) == 4
    memory = found["memory"].set_index("precision")["saved_mib_per_sample"]
    assert memory["bf16"] < memory["float32"]
    # the speed-up is float32's steps over bf16's, from the records just timed
    float32, bf16 = (found["steps"].query(f"precision == '{p}'")["step_seconds"] for p in ("float32", "bf16"))
    assert found["speedups"]["LinearNet"] == stats.speedup(float32.tolist(), bf16.tolist())
    table = train.precision_memory_table(found["memory"])
    assert table.loc[("LinearNet", "float32"), "kept for backward per sample (MiB)"] == "0.050"  # 52,440 B
    assert table.loc[("LinearNet", "bf16"), "kept whatever the batch (MiB)"] == "0.193"  # 202,200 B


def test_cuda_devices_are_named_with_their_index(monkeypatch):
    """train.pick_device (defect 12): "auto" and "cuda" name the same record device, "cuda:0"."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert str(train.pick_device("auto")) == str(train.pick_device("cuda")) == "cuda:0"
    assert str(train.pick_device("cuda:1")) == "cuda:1"
    assert str(train.pick_device("cpu")) == "cpu"


def test_a_chapter_read_from_a_gpu_machines_records_picks_its_gpu(monkeypatch):
    """Executed from an H200's records on a machine without CUDA, "auto" is that machine's cuda:0, as its
    records name the device."""
    h200 = {"gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 2**30, "compute_capability": "9.0"}],
            "usable_cores": 16, "cpu_model": "a Xeon"}  # fmt: skip
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(hardware.RECORDS_OF, "h200")
    monkeypatch.setattr(hardware, "stored_fingerprint", lambda identifier: h200)
    assert str(train.pick_device("auto")) == "cuda:0" and hardware.gpu_count() == 1
    assert hardware.usable_cores() == 16 and hardware.gpu_name() == "NVIDIA H200"
    assert hardware.bf16_units("cuda:0") == "this GPU has bf16 tensor cores"
    assert hardware.Machine.here().gpus == 1 and hardware.peer_access() == []
    # its CPU is another processor than this one: its flags were not kept, so nothing is claimed of them
    monkeypatch.setattr(hardware, "cpu_model", lambda: "this machine's processor")
    unknown = "whether the recorded machine's CPU (a Xeon) has bf16 units was not recorded"
    assert hardware.bf16_units("cpu") == unknown


def test_chance_is_a_binomial_standard_error_away():
    """38 of 300 test clips right (12.7 %) against guessing one of ten digits: p = 0.1, the standard error
    sqrt(0.1 x 0.9 / 300) = sqrt(0.0003) = 0.017321, so 0.026667 / 0.017321 = 1.54 standard errors."""
    found = train.against_chance(38 / 300, 300)
    assert found["chance"] == 0.1 and found["standard_error"] == pytest.approx(math.sqrt(0.0003))
    assert found["standard_errors_above"] == pytest.approx(1.5396, abs=1e-4)
    assert found["verdict"] == "not distinguishable from chance"
    assert found["position"] == "1.5 standard errors above"
    assert train.against_chance(27 / 300, 300)["position"] == "0.6 standard errors below"  # -0.01 / 0.0173
    # 131 of 300 (43.7 %): (0.43667 - 0.1) / 0.017321 = 19.4 standard errors
    assert train.against_chance(131 / 300, 300)["verdict"] == "above chance"
    assert train.against_chance(0.1 + 2 * math.sqrt(0.0003), 300)["verdict"] == "above chance"


def test_tables_to_read():
    history = pd.DataFrame({"model": ["A", "A"], "epoch": [1, 2], "train_accuracy": [0.1, 0.25],
                            "test_accuracy": [0.1, 0.12666], "epoch_seconds": [3.0, 1234.56]})  # fmt: skip
    final = train.final_table(history).loc["A"]
    assert final.tolist() == [2, "25.0", "12.7", "1,230"]  # three significant digits: a GPU's 0.0843 s too
    assert train.final_table(history.assign(epoch_seconds=[1.0, 0.08432])).loc["A"].iloc[-1] == "0.0843"
    steps = train.steps_frame([fake_step_record("A", 10, [0.1, 0.3, 0.2]), fake_step_record("A", 20, [0.05])])
    table = train.sweep_table(steps)
    assert table.index.names == ["model", "batch size"]
    # steps of 0.1, 0.2, 0.3 s; 3 steps per epoch: epochs of 0.3, 0.6 and 0.9 s, to three digits
    assert table.loc[("A", 10)].tolist() == ["200", "0.600", "0.300–0.900", 3]
    assert train.milliseconds([0.1, 0.3, 0.2]) == "200 ms (100–300, 3 steps)"
    assert train.milliseconds([0.0123, 0.034, 0.0456], unit="") == "34.0 (12.3–45.6, 3 steps)"


def test_batch_effect_is_the_largest_batch_against_the_smallest():
    steps = train.steps_frame([fake_step_record("A", 10, [0.4, 0.5]), fake_step_record("A", 20, [0.1, 0.2]),
                               fake_step_record("A", 50, [0.1, 0.1])])  # fmt: skip
    effect = train.batch_effects(steps)["A"]
    assert effect["speedup"] == pytest.approx(0.45 / 0.1) and effect["verdict"] == "faster"


def test_optimizer_options_reach_the_constructor():
    optimizer = train.make_optimizer("adam", torch.nn.Linear(2, 2).parameters(), 0.1, foreach=False)
    assert optimizer.defaults["foreach"] is False and optimizer.defaults["lr"] == 0.1


def test_training_batches_are_reshuffled_every_epoch():
    chosen = train.epoch_batches(10, 6, seed=0, count=4)  # one full batch per epoch of 10
    assert len(chosen) == 4 and all(len(index) == 6 for index in chosen)
    assert len({tuple(index.tolist()) for index in chosen}) == 4  # a new shuffle each epoch
    assert len(set(torch.cat(chosen).tolist())) > 6  # more clips than one cycled batch would ever see
    again = train.epoch_batches(10, 6, seed=0, count=4)
    assert all(a.equal(b) for a, b in zip(chosen, again, strict=True))
    with pytest.raises(ValueError, match="exceeds the 10"):
        train.epoch_batches(10, 11, seed=0, count=1)


def test_counts_read_as_words_and_the_load_is_the_highest_reading():
    assert train.counted(3, "warm-up step") == "3 warm-up steps"
    assert train.counted(1, "warm-up step") == "1 warm-up step"
    assert train.counted(1200, "clip") == "1,200 clips"
    assert [train.counted(2, noun) for noun in ("batch", "epoch", "pass", "box")] == [
        "2 batches", "2 epochs", "2 passes", "2 boxes"
    ]  # fmt: skip
    assert train.highest_load({"load_average": [1.2, 3.4]}) == 3.4
    assert train.highest_load({"load_average": [None, 0.7]}) == 0.7
    assert train.highest_load({"load_average": [None, None]}) is None
    assert train.highest_load({}) is None  # records written before loads were kept


def test_the_batch_effect_is_explained_as_far_as_its_verdict_goes():
    def said(verdict: str) -> str:
        change = {"speedup": 1.0, "low": 0.9, "high": 1.1, "verdict": verdict, "launches": None}
        return train.explain_batch_effect("ConvNet", change, 10, 100, 376_200)

    # two causes, not told apart by an epoch's time: the same sentence must hold for either model
    assert said("faster") == (
        "ConvNet's epoch is shorter at batch 100: two causes, which this timing does not separate. What a "
        "step costs whatever its batch (the optimizer's pass over all 376,200 parameters, starting every "
        "operator) is paid 10 times less often per epoch, and larger operators can keep the device busier"
    )
    assert said("slower").startswith("ConvNet's epoch is longer at batch 100 than at batch 10:")
    assert said("no measurable difference").startswith("ConvNet's epoch takes as long at batch 100 as at")
    assert "amortise" in said("no measurable difference") and "amortise" not in said("slower")
    assert said("not resolved") == (
        "ConvNet's timed steps spread too widely to tell whether a larger batch shortens its epoch"
    )


def test_nothing_kept_reads_as_zero():
    memory = pd.DataFrame({"model": ["A", "A"], "precision": ["float32", "bf16"],
                           "saved_mib_per_sample": [0.05, 0.025],
                           "saved_mib_fixed": [0.0, 202_200 / 2**20]})  # fmt: skip
    table = train.precision_memory_table(memory)
    assert table["kept whatever the batch (MiB)"].tolist() == ["0", "0.193"]  # 202,200 B = 0.1928 MiB
    assert table["kept for backward per sample (MiB)"].tolist() == ["0.050", "0.025"]
