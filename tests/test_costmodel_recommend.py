"""helpers.costmodel.recommend: GPU predictions per link, the decision map, and the seed's verdicts."""

import math

import pytest

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel import gpus, money, recommend, timemodel
from helpers.dataparallel import SAMPLE_BYTES
from helpers.models import build_model, parameter_bytes
from helpers.results import ResultStore

LINK = gpus.Link("test link", 1e10, 1e10, 1e-5, "made up", "", "")


def flat(seconds: float):
    """A GPU whose every step takes ``seconds`` per sample, split 1 : 2 : 0 over the three phases."""
    return lambda batch: {
        "forward": seconds * batch / 3,
        "backward": 2 * seconds * batch / 3,
        "optimizer": 0.0,
    }


def test_dataparallel_step_by_hand():
    step = recommend.predict_gpu_step("dataparallel", "ConvNet", 10, 4, flat(1e-3), LINK, launch_seconds=0)
    gradient = parameter_bytes(build_model("ConvNet"))
    ring = 3 * 1e-5 + gradient / 1e10  # broadcast, and again for the reduce
    moved = 7 * (SAMPLE_BYTES + 80) / 1e10  # chunks 3, 3, 3, 1: seven samples leave GPU 0 and come back
    assert step["step_seconds"] == pytest.approx(3e-3 + 2 * ring + moved)
    assert step["communication_seconds"] == pytest.approx(2 * ring + moved)
    one = recommend.predict_gpu_step("dataparallel", "ConvNet", 10, 1, flat(1e-3), LINK)
    assert one["step_seconds"] == pytest.approx(1e-2) and one["communication_seconds"] == 0


def test_ddp_step_hides_the_all_reduce_behind_backward():
    step = recommend.predict_gpu_step("ddp_overlap", "LinearNet", 800, 8, flat(1e-3), LINK)
    buckets = timemodel.ddp_bucket_bytes("LinearNet", 25)
    expected = sum(ring_all_reduce_seconds(b, 8, 1e-5, 1e-10) for b in buckets)
    assert step["communication_seconds"] == pytest.approx(expected)
    assert step["step_seconds"] == pytest.approx(0.1 / 3 + max(0.2 / 3, 0) + expected)  # one bucket
    with pytest.raises(ValueError, match="no sample"):
        recommend.predict_gpu_step("ddp_overlap", "LinearNet", 4, 8, flat(1e-3), LINK)


def test_predictions_price_each_gpu_with_its_own_rate():
    frame = recommend.predictions(("ConvNet",), ("H100 SXM 80 GB", "GTX 1080 Ti"), ("PCIe 4.0 x16",),
                                  (100,), (1, 2), ("ddp_overlap",), samples=1000, epochs=2)  # fmt: skip
    h100 = frame[frame["gpu"] == "H100 SXM 80 GB"].set_index("gpus")
    rate = float(money.hourly_price_per_gpu("H100 SXM 80 GB"))
    assert rate == 55.04 / 8
    assert h100.loc[2, "dollars_per_run"] == pytest.approx(2 * rate * h100.loc[2, "epoch_seconds"] * 2 / 3600)
    assert h100.loc[2, "epoch_seconds"] == pytest.approx(h100.loc[2, "step_seconds"] * math.ceil(1000 / 100))
    assert h100.loc[1, "speedup"] == 1 and h100.loc[2, "efficiency"] == h100.loc[2, "speedup"] / 2
    assert (frame["basis"] == "roofline").all()
    assert frame[frame["gpu"] == "GTX 1080 Ti"]["dollars_per_run"].isna().all()  # no cloud rents one
    measured = {("ConvNet", "H100 SXM 80 GB"): flat(1e-4)}
    again = recommend.predictions(("ConvNet",), ("H100 SXM 80 GB",), ("PCIe 4.0 x16",), (100,), (1,),
                                  ("ddp_overlap",), measured=measured)  # fmt: skip
    assert again["basis"].tolist() == ["measured"] and again["step_seconds"].iloc[0] == pytest.approx(1e-2)


def test_decisions():
    frame = recommend.predictions(("ConvNet", "LinearNet"), ("A100 SXM 80 GB",), ("NVLink 4 (H100 SXM)",),
                                  (20, 600), (1, 4), ("ddp_overlap",))  # fmt: skip
    frame = frame.assign(decision=recommend.decide(frame, min_speedup=1.5))
    assert set(frame["decision"].cat.categories) == set(recommend.DECISIONS)
    assert (frame.loc[frame["gpus"] == 1, "decision"] == "faster, below the threshold").all()  # speed-up 1
    big = frame.query("model == 'ConvNet' and global_batch == 600 and gpus == 4").iloc[0]
    assert big["speedup"] > 3 and big["decision"] == "faster, dearer per result"


def test_the_seeds_verdicts():
    check = recommend.seed_check()
    assert set(check["gpus"]) == {1, 2, 3, 4} and set(check["global_batch"]) == set(
        recommend.SEED_BATCH_SIZES
    )
    assert (check["gpu"] == "GTX 1080 Ti").all() and (check["method"] == "dataparallel").all()
    assert recommend.seed_verdicts(check) == {"LinearNet": "slower", "ConvNet": "faster"}


def test_hiding_batch_is_the_smallest_that_hides_the_all_reduce():
    gpu, link = gpus.GPUS["A100 SXM 80 GB"], gpus.LINKS["PCIe 4.0 x16"]
    batch = recommend.hiding_batch("LinearNet", gpu, link)
    compute = recommend.roofline_compute("LinearNet", gpu)
    needed = ring_all_reduce_seconds(parameter_bytes(build_model("LinearNet")), 8, link.alpha_seconds,
                                     1 / link.bus_bandwidth)  # fmt: skip
    assert compute(batch)["backward"] >= needed > compute(batch - 1)["backward"]
    assert recommend.hiding_batch("LinearNet", gpu, link, largest=8) is None


def test_gpu_step_timings_of_a_gpu_run_replace_the_roofline(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    hardware = {"cpu_model": "x", "usable_cores": 16, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    store = ResultStore("gpu", hardware=hardware)
    for batch, seconds in ((10, [1e-3, 1.2e-3, 1.1e-3]), (100, [4e-3, 4e-3, 5e-3])):
        config = {"kind": "step_timing", "model": "ConvNet", "batch_size": batch, "device": "cuda:0",
                  "autocast": None}  # fmt: skip
        store.measure(config, lambda s=seconds: {"step_seconds_all": s})
    store.measure({"kind": "step_timing", "model": "ConvNet", "batch_size": 10, "device": "cpu"},
                  lambda: {"step_seconds_all": [1.0]})  # fmt: skip
    measured = recommend.gpu_step_timings("gpu").sort_values("batch")
    assert measured["gpu"].tolist() == ["H100 SXM 80 GB"] * 2 and measured["batch"].tolist() == [10, 100]
    assert measured["step_seconds"].tolist() == [1.1e-3, 4e-3] and measured["step_max"].tolist() == [
        1.2e-3,
        5e-3,
    ]
    errors = recommend.roofline_error(measured)
    predicted = gpus.roofline_step("ConvNet", 10, gpus.GPUS["H100 SXM 80 GB"])["step_seconds"]
    assert errors["error_percent"].iloc[0] == pytest.approx((predicted - 1.1e-3) / 1.1e-3 * 100)
    computes = recommend.measured_computes(measured)
    line = computes[("ConvNet", "H100 SXM 80 GB")]
    assert sum(line(10).values()) == pytest.approx(1.1e-3, rel=0.05)  # the line through the two medians
    assert recommend.gpu_step_timings("nothing").empty


def test_an_epoch_on_named_gpus_and_the_cost_of_a_result():
    epoch = recommend.predicted_epoch_seconds("ConvNet", 50, 2, "H100 SXM 80 GB", "PCIe 5.0 x16", 2700)
    step = recommend.predict_gpu_step("ddp_overlap", "ConvNet", 50, 2,
                                      recommend.roofline_compute("ConvNet", gpus.GPUS["H100 SXM 80 GB"]),
                                      gpus.LINKS["PCIe 5.0 x16"])["step_seconds"]  # fmt: skip
    assert epoch == pytest.approx(step * 54)
    costs = money.cost_to_target(3, [
        {"setup": "a", "basis": "measured", "epoch_seconds": 120, "hourly_price": None},
        {"setup": "b", "basis": "predicted", "epoch_seconds": "36", "hourly_price": "2"},
    ]).set_index("setup")  # fmt: skip
    assert costs.loc["a", "hours"] == pytest.approx(0.1) and math.isnan(costs.loc["a", "dollars"])
    assert costs.loc["b", "hours"] == pytest.approx(0.03) and costs.loc["b", "dollars"] == pytest.approx(0.06)
