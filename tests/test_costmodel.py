"""helpers.costmodel: the seed's arithmetic exactly, the loss fit, the step-time formulas, validation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import TensorDataset

from helpers import costmodel
from helpers.collectives import ring_all_reduce_seconds
from helpers.dataparallel import bytes_per_step
from helpers.models import build_model, parameter_bytes, parameter_count
from helpers.results import ResultStore

# ----- money ------------------------------------------------------------------------------------------


def test_exact_reads_decimals_as_typed():
    assert costmodel.exact("1.46") == Fraction(73, 50)
    assert costmodel.exact(0.45) == Fraction(9, 20)  # not the binary double nearest to 0.45
    assert costmodel.exact(8000) == 8000
    with pytest.raises(ValueError):
        costmodel.exact(float("nan"))


def test_break_even_seed_case_exactly():
    result = costmodel.break_even(8000, "1.50")
    assert result.hours == Fraction(16000, 3)  # 5,333 1/3 h
    assert result.years == Fraction(8, 3)  # 2.666… full-time years of 2,000 h
    assert costmodel.mixed_number(result.hours) == "5,333 1/3"
    assert costmodel.decimal_expansion(result.years) == "2.666…"


def test_break_even_with_performance_adjustment_exactly():
    result = costmodel.break_even(8000, "1.50", "-0.3")
    assert result.effective_price == 5600
    assert result.hours == Fraction(11200, 3)  # 3,733 1/3 h
    assert result.years == Fraction(28, 15)  # 1.866… years
    line = costmodel.describe_break_even(result)
    assert "$5,600.00" in line and "3,733 1/3 h" in line and "(1.866…) years" in line


def test_break_even_table_rounds_what_is_exact():
    table = costmodel.break_even_table(8000, "1.50")
    assert list(table["hours_exact"]) == ["5,333 1/3", "3,733 1/3"]
    assert list(table["hours_rounded"]) == [5333, 3733]
    assert list(table["years_rounded"]) == [2.67, 1.87]


@pytest.mark.parametrize(
    "arguments", [(0, "1.5"), (8000, 0), (8000, "1.5", -1), (8000, "1.5", 0, 0)], ids=str
)
def test_break_even_refuses_impossible_inputs(arguments):
    with pytest.raises(ValueError):
        costmodel.break_even(*arguments)


def test_number_formats():
    assert costmodel.decimal_expansion(Fraction(3, 2)) == "1.5"
    assert costmodel.decimal_expansion(Fraction(16000, 3), 2) == "5,333.33…"
    assert costmodel.mixed_number(Fraction(-7, 2)) == "-3 1/2"
    assert costmodel.mixed_number(Fraction(2, 3)) == "2/3"
    assert costmodel.money(Fraction(3, 2)) == "$1.50"


def test_dollars_per_epoch_is_exact():
    assert costmodel.dollars_per_epoch("87", "0.45") == Fraction(87, 8000)  # $0.010875
    assert costmodel.dollars_per_epoch(3600, 2) == 2


def test_table_one_reproduces_the_seed_exactly():
    table = costmodel.table_one(as_float=False).set_index("setup")
    assert list(table["dollars_per_epoch"]) == [Fraction(87, 8000), Fraction(11, 800), Fraction(73, 3750)]
    assert list(table["speedup"]) == [1, Fraction(87, 55), Fraction(29, 16)]
    assert list(table["price_ratio"]) == [1, 2, Fraction(146, 45)]
    assert list(table["delta"]) == [1, Fraction(87, 110), Fraction(1305, 2336)]
    assert all(table["delta"] * table["cost_per_epoch_ratio"] == 1)  # Δ = 1 / cost-per-epoch ratio
    floats = costmodel.table_one()
    assert floats.loc[2, "dollars_per_epoch"] == pytest.approx(0.0194666667)


def test_table_one_needs_its_baseline():
    with pytest.raises(ValueError, match="baseline"):
        costmodel.table_one(baseline="V100")


def test_to_target():
    cost = costmodel.to_target(10, "87", "0.45")
    assert cost == {"seconds": 870, "hours": Fraction(29, 120), "dollars": Fraction(87, 800)}


# ----- the Optimus loss model ---------------------------------------------------------------------------

BETAS = {"beta0": 0.02, "beta1": 0.5, "beta2": 0.3}


def synthetic_curve(noise: float, seed: int = 0, steps: int = 400):
    k = np.arange(1, steps + 1, dtype=float)
    loss = costmodel.predict_loss(BETAS, k)
    return k, loss * (1 + noise * np.random.default_rng(seed).standard_normal(len(k)))


def test_loss_fit_recovers_exact_betas():
    fit = costmodel.fit_loss_curve(*synthetic_curve(noise=0.0))
    for name, value in BETAS.items():
        assert fit[name] == pytest.approx(value, rel=1e-4)
    assert fit["rmse"] < 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_fit_recovers_betas_from_noisy_curves(seed):
    fit = costmodel.fit_loss_curve(*synthetic_curve(noise=0.01, seed=seed))
    assert fit["beta0"] == pytest.approx(BETAS["beta0"], rel=0.05)
    assert fit["beta1"] == pytest.approx(BETAS["beta1"], rel=0.05)
    assert fit["beta2"] == pytest.approx(BETAS["beta2"], abs=0.01)
    assert min(fit["beta0"], fit["beta1"], fit["beta2"]) >= 0


def test_steps_to_loss_inverts_predict_loss():
    for k in (0.0, 10.0, 123.0):
        assert costmodel.steps_to_loss(BETAS, costmodel.predict_loss(BETAS, k)) == pytest.approx(k)
    assert costmodel.steps_to_loss(BETAS, 0.3) is None  # the floor β2 is never reached
    assert costmodel.steps_to_loss(BETAS, 10.0) == 0.0  # above the starting loss: reached at once
    assert costmodel.steps_to_loss({**BETAS, "beta0": 0.0}, 1.0) is None


def test_held_out_prediction_on_a_synthetic_curve():
    steps, losses = synthetic_curve(noise=0.01, seed=3)
    target = float(costmodel.predict_loss(BETAS, 300.0))
    report = costmodel.held_out_prediction(steps, losses, fit_fraction=0.5, target=target)
    assert report["fitted_up_to_step"] == 200
    assert report["measured_step"] == pytest.approx(300, abs=25)
    assert abs(report["relative_error"]) < 0.1


def test_held_out_prediction_reports_a_curve_that_never_gets_there():
    steps, losses = synthetic_curve(noise=0.0)
    report = costmodel.held_out_prediction(steps, losses, fit_fraction=0.5, target=0.31)
    assert report["measured_step"] is None and report["error_steps"] is None
    assert report["predicted_step"] == pytest.approx(1 / 0.01 / 0.02 - 25)


def test_smoothed_is_a_centred_mean():
    assert list(costmodel.smoothed([1, 2, 3, 4, 5], 3)) == [1.5, 2, 3, 4, 4.5]


def test_loss_fit_refuses_bad_curves():
    with pytest.raises(ValueError):
        costmodel.fit_loss_curve([1, 2], [1.0, 0.9])
    with pytest.raises(ValueError):
        costmodel.fit_loss_curve([1, 2, 3], [1.0, 0.0, 0.5])


# ----- compute calibration ------------------------------------------------------------------------------


def test_fit_line_recovers_a_line_and_stays_non_negative():
    line, mape = costmodel.fit_line([10, 20, 50], [0.2, 0.3, 0.6])
    assert line.intercept_seconds == pytest.approx(0.1)
    assert line.seconds_per_sample == pytest.approx(0.01)
    assert mape == pytest.approx(0, abs=1e-9)
    falling, _ = costmodel.fit_line([10, 20], [0.3, 0.2])  # a falling line would need a negative slope
    assert falling.seconds_per_sample == 0


def test_fit_compute_groups_by_model_and_threads():
    frame = pd.DataFrame(
        {
            "model": ["A", "A", "A", "A"],
            "threads": [1, 1, 2, 2],
            "batch_size": [10, 20, 10, 20],
            "step_seconds": [0.2, 0.3, 0.1, 0.15],
        }
    )
    fits = costmodel.fit_compute(frame)
    assert costmodel.compute_line(fits, "A", 1)(30) == pytest.approx(0.4)
    assert costmodel.compute_line(fits, "A", 2)(30) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="stored_compute_calibration"):
        costmodel.compute_line(fits, "A", 4)


def test_stored_compute_calibration_measures_at_the_asked_threads(tmp_path):
    store = ResultStore("calibration", root=tmp_path, hardware={"machine": "test"})
    samples = TensorDataset(torch.randn(8, 1, 12000), torch.randint(0, 10, (8,)))
    before = torch.get_num_threads()
    records = costmodel.stored_compute_calibration(
        store, samples, ["LinearNet"], [2, 4], threads=1, timed_steps=1, warmup_steps=0
    )
    assert torch.get_num_threads() == before
    assert [(r["config"]["threads"], r["config"]["batch_size"]) for r in records] == [(1, 2), (1, 4)]
    assert set(costmodel.fit_compute(store.frame("step_timing")).index) == {("LinearNet", 1)}


def test_optimizer_seconds_per_parameter_from_single_replica_records():
    records = [
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu"], "threads": 2},
            "result": {"phase_seconds": {"optimizer_step": 376200e-9}},
        },
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu"], "threads": 1},
            "result": {"phase_seconds": {"optimizer_step": 376200e-8}},
        },
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu", "cpu"], "threads": 2},
            "result": {"phase_seconds": {"optimizer_step": 1.0}},
        },
    ]
    fitted = costmodel.fit_optimizer_seconds_per_parameter(records)
    assert fitted == pytest.approx({1: 1e-8, 2: 1e-9})
    time_model = synthetic_time_model(optimizer_seconds_per_parameter=fitted)
    assert time_model.optimizer_seconds(100, threads=4) == pytest.approx(1e-7)  # nearest: 2 threads


# ----- communication and the step-time formulas ----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "cap", "buckets"),
    [("LinearNet", 25, 1), ("LinearNet", 0.25, 2), ("ConvNet", 25, 1), ("ConvNet", 0.25, 3)],
)
def test_bucket_counts_match_chapter_three(model, cap, buckets):
    sizes = costmodel.ddp_bucket_bytes(model, cap)
    assert len(sizes) == buckets
    assert sum(sizes) == parameter_bytes(build_model(model))
    assert sum(costmodel.ddp_bucket_bytes(model, cap, "bf16")) == sum(sizes) / 2


def test_overlap_of_buckets_with_backward():
    fast = costmodel.overlapped_all_reduce_finish(1.0, [1, 1, 1, 1], lambda n: 0.1 * n)
    assert fast == pytest.approx(1.1)  # hidden behind backward except the last bucket
    slow = costmodel.overlapped_all_reduce_finish(1.0, [1, 1, 1, 1], lambda n: 1.0 * n)
    assert slow == pytest.approx(4.25)  # the first starts at 0.25, then they queue
    single = costmodel.overlapped_all_reduce_finish(1.0, [4], lambda n: 0.5 * n)
    assert single == pytest.approx(3.0)  # one bucket: no overlap


def synthetic_time_model(**changes) -> costmodel.TimeModel:
    compute = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2,
            "threads": [1, 2],
            "intercept_seconds": [0.2, 0.1],
            "seconds_per_sample": [0.02, 0.01],
        }
    ).set_index(["model", "threads"])
    settings = {
        "compute": compute,
        "alpha_seconds": 1e-3,
        "seconds_per_byte": 1e-9,
        "copy_seconds_per_byte": 2e-10,
        "optimizer_seconds_per_parameter": 1e-7,  # 0.03762 s for ConvNet's 376,200 parameters
        "cores": 2,
    }
    return costmodel.TimeModel(**{**settings, **changes})


def test_dataparallel_step_formula():
    time_model = synthetic_time_model()
    parts = costmodel.predict_step("dataparallel", "ConvNet", 10, 4, time_model)
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    assert parts["compute_seconds"] == pytest.approx(0.1 + 0.01 * 10 + 3 * (0.1 - optimizer))  # 4 chunks
    moved = sum(bytes_per_step(build_model("ConvNet"), 10, 4).values())
    assert parts["communication_seconds"] == pytest.approx(moved * 2e-10)
    assert parts["step_seconds"] == pytest.approx(parts["compute_seconds"] + parts["communication_seconds"])


def test_ddp_step_formulas():
    time_model = synthetic_time_model()
    buckets = costmodel.ddp_bucket_bytes("ConvNet", 0.25)
    all_reduce = sum(ring_all_reduce_seconds(b, 2, 1e-3, 1e-9) for b in buckets)
    plain = costmodel.predict_step("ddp_no_overlap", "ConvNet", 50, 2, time_model, bucket_cap_mb=0.25)
    assert plain["threads"] == 1 and plain["per_rank_batch"] == 25
    assert plain["step_seconds"] == pytest.approx(0.2 + 0.02 * 25 + all_reduce)
    overlapped = costmodel.predict_step("ddp_overlap", "ConvNet", 50, 2, time_model, bucket_cap_mb=0.25)
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    passes = 0.2 + 0.02 * 25 - optimizer
    finish = costmodel.overlapped_all_reduce_finish(
        passes * 2 / 3, buckets, lambda n: ring_all_reduce_seconds(n, 2, 1e-3, 1e-9)
    )
    assert overlapped["step_seconds"] == pytest.approx(passes / 3 + finish + optimizer)
    assert overlapped["step_seconds"] < plain["step_seconds"]
    one = costmodel.predict_step("ddp_overlap", "ConvNet", 50, 1, synthetic_time_model(cores=1))
    assert one["step_seconds"] == pytest.approx(0.2 + 0.02 * 50)  # one rank: nothing to all-reduce


def test_ranks_sharing_cores_cannot_beat_the_whole_machine():
    # The 2-thread line makes two ranks' work together cost 0.3 + 0.01·50 + 0.3 = 1.1 s, more than
    # one rank alone at 1 thread (0.2 + 0.02·25 = 0.7 s): the shared machine is the limit.
    compute = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2,
            "threads": [1, 2],
            "intercept_seconds": [0.2, 0.3],
            "seconds_per_sample": [0.02, 0.01],
        }
    ).set_index(["model", "threads"])
    shared = synthetic_time_model(compute=compute, alpha_seconds=0.0, seconds_per_byte=0.0)
    assert costmodel.predict_step_seconds("ddp_no_overlap", "ConvNet", 50, 2, shared) == pytest.approx(1.1)
    overlapped = costmodel.predict_step_seconds("ddp_overlap", "ConvNet", 50, 2, shared)
    assert overlapped == pytest.approx(1.1)  # free communication: the split does not change the sum
    apart = synthetic_time_model(
        compute=compute, alpha_seconds=0.0, seconds_per_byte=0.0, ranks_share_cores=False
    )
    assert costmodel.predict_step_seconds("ddp_no_overlap", "ConvNet", 50, 2, apart) == pytest.approx(0.7)


def test_predict_step_refuses_what_it_cannot_predict():
    with pytest.raises(ValueError, match="method"):
        costmodel.predict_step("zero", "ConvNet", 50, 2, synthetic_time_model())
    with pytest.raises(ValueError, match="no sample"):
        costmodel.predict_step("ddp_overlap", "ConvNet", 1, 2, synthetic_time_model())
    with pytest.raises(ValueError, match="calibration"):
        costmodel.predict_step("ddp_overlap", "ConvNet", 50, 2, synthetic_time_model(cores=8))


# ----- validation ----------------------------------------------------------------------------------------


def test_validate_mape_arithmetic():
    measured = pd.DataFrame(
        {
            "measurement": ["a", "b", "c", "d"],
            "model": ["M", "M", "M", "N"],
            "step_seconds": [1.0, 2.0, 4.0, 0.5],
        }
    )
    predictions = pd.DataFrame(
        {
            "measurement": ["a", "b", "c", "d", "d"],
            "method": ["x", "x", "x", "x", "y"],
            "predicted_seconds": [1.1, 1.8, 4.0, 0.75, 0.5],
        }
    )
    validated = costmodel.validate(predictions, measured)
    assert list(validated["ape_percent"].round(9)) == [10, 10, 0, 50, 0]
    summary = costmodel.validation_summary(validated).set_index(["model", "method"])
    assert summary.loc[("M", "x"), "mape_percent"] == pytest.approx(20 / 3)
    assert summary.loc[("M", "x"), "max_ape_percent"] == pytest.approx(10)
    assert summary.loc[("N", "x"), "mape_percent"] == pytest.approx(50)
    assert summary.loc[("N", "y"), "points"] == 1
    with pytest.raises(ValueError, match="measurement"):
        costmodel.validate(
            pd.DataFrame({"measurement": ["z"], "method": ["x"], "predicted_seconds": [1.0]}), measured
        )


def test_measured_frame_turns_records_into_step_times():
    records = [
        {
            "key": "k1",
            "kind": "ddp_run",
            "config": {
                "model": "M",
                "world_size": 2,
                "global_batch_size": 50,
                "epochs": 2,
                "bucket_cap_mb": 25,
            },
            "result": {"epoch_seconds": 1.6, "steps": 16, "threads_per_rank": 1},
        },
        {
            "key": "k2",
            "kind": "dataparallel_timing",
            "config": {"model": "M", "devices": ["cpu", "cpu"], "batch_size": 20, "threads": 2},
            "result": {"step_seconds": 0.3},
        },
        {
            "key": "k3",
            "kind": "ddp_run",
            "config": {
                "model": "M",
                "world_size": 1,
                "global_batch_size": 50,
                "epochs": 2,
                "bucket_cap_mb": 25,
            },
            "result": {"epoch_seconds": 1.0, "steps": 16, "threads_per_rank": 2},
        },
    ]
    frame = costmodel.measured_frame(records).set_index("measurement")
    assert list(frame.index) == ["k1", "k2"]  # one rank is not a multi-rank measurement
    assert frame.loc["k1", "step_seconds"] == pytest.approx(0.2)  # 1.6 s over 8 steps of one epoch
    assert frame.loc["k2", "step_seconds"] == 0.3
    assert len(costmodel.measured_frame(records, min_ranks=1)) == 3


# ----- recommendation ----------------------------------------------------------------------------------


def test_recommend_separates_compute_bound_from_communication_bound():
    heavy = costmodel.recommend(
        "ConvNet", 512, gpu_compute=costmodel.ComputeLine(1e-3, 1e-4), hourly_price_per_gpu="2"
    )
    assert set(heavy["verdict"]) == {"add GPUs"}
    assert (heavy["basis"] == "prediction").all()
    one = heavy[heavy["gpus"] == 1].iloc[0]
    assert one["speedup"] == 1 and one["all_reduce_seconds"] == 0
    assert one["dollars_per_run"] == pytest.approx(2 * one["run_hours"])
    light = costmodel.recommend("LinearNet", 50, gpu_compute=costmodel.ComputeLine(1e-3, 1e-6))
    pcie = light[light["link"] == "PCIe 4.0 x16"]
    assert set(pcie["verdict"]) == {"stay on one"}
    nvlink = light[light["link"] == "NVLink 4 (H100 SXM)"].set_index("gpus")
    assert nvlink.loc[2, "all_reduce_seconds"] == pytest.approx(
        ring_all_reduce_seconds(
            parameter_bytes(build_model("LinearNet")), 2, costmodel.GPU_ALPHA_SECONDS, 2 / 900e9
        )
    )


def test_recommend_needs_the_one_gpu_baseline():
    with pytest.raises(ValueError, match="include 1"):
        costmodel.recommend("ConvNet", 64, range(2, 4), gpu_compute=costmodel.ComputeLine(0, 1e-4))


def test_link_table_is_sourced():
    assert costmodel.LINKS["PCIe 4.0 x16"]["bytes_per_second"] == pytest.approx(31.5e9, rel=1e-3)
    assert costmodel.LINKS["PCIe 5.0 x16"]["bytes_per_second"] == pytest.approx(63.0e9, rel=1e-3)
    assert all(link["source"] for link in costmodel.LINKS.values())


# ----- our runs, curves and calibration inputs from the store -------------------------------------------


def ddp_record(model: str, world_size: int, epoch_seconds: float, **config) -> dict:
    return {
        "kind": "ddp_run", "key": f"{model}{world_size}{config}",
        "config": {"model": model, "world_size": world_size, "bucket_cap_mb": 25, "compression": None,
                   **config},
        "result": {"epoch_seconds": epoch_seconds, "history": [{"epoch": 1, "train_loss": 2.0}]},
    }  # fmt: skip


def test_measured_run_costs_price_each_rank_and_compare_with_one():
    records = [
        ddp_record("ConvNet", 1, 36.0), ddp_record("ConvNet", 2, 20.0),
        ddp_record("ConvNet", 2, 99.0, bucket_cap_mb=1),
        ddp_record("LinearNet", 2, 5.0),  # no one-rank run to compare with: left out
    ]  # fmt: skip
    costs = costmodel.measured_run_costs(records, "3.60", bucket_cap_mb=25)
    assert costs["setup"].tolist() == ["ConvNet, 1 rank(s)", "ConvNet, 2 rank(s)"]
    assert costs["ranks"].tolist() == [1, 2]
    assert costs["dollars_per_epoch"].tolist() == [0.036, 0.04]  # 36 s at $3.60/h; 20 s at $7.20/h
    assert costs["speedup"].tolist() == [1.0, 1.8] and costs["delta"].tolist() == [1.0, 0.9]


def test_epochs_to_accuracy():
    history = [{"epoch": 1, "test_accuracy": 0.3}, {"epoch": 2, "test_accuracy": 0.61}, {"epoch": 3}]
    assert costmodel.epochs_to_accuracy(history, 0.6) == 2
    assert costmodel.epochs_to_accuracy(history, 0.9) is None


def test_loss_curves_and_their_held_out_predictions(tmp_path):
    store = ResultStore("curves", root=tmp_path, hardware={"cpu_model": "test"})
    truth = {"beta0": 0.05, "beta1": 0.5, "beta2": 0.4}
    steps = np.arange(1, 41)
    losses = costmodel.predict_loss(truth, steps)
    history = [{"step": int(k), "batch_loss": float(v)} for k, v in zip(steps, losses, strict=True)]
    store.measure(
        {"kind": "stale_training", "model": "ConvNet", "staleness": 0}, lambda: {"history": history}
    )
    store.measure(
        {"kind": "stale_training", "model": "ConvNet", "staleness": 4}, lambda: {"history": history}
    )
    short = [{"epoch": 1, "train_loss": 2.0}, {"epoch": 2, "train_loss": 1.5}]
    store.measure({"kind": "training", "model": "LinearNet"}, lambda: {"history": short})
    curves = costmodel.loss_curves([store])
    # the stale curve and the short one are left out
    assert [c["curve"] for c in curves] == ["ConvNet, chapter 4 synchronous SGD (curves)"]
    predictions = costmodel.loss_predictions(curves, fit_fraction=0.5, target_at=0.75)
    row = predictions.iloc[0]
    assert row["fitted_points"] == 20 and row["measured_step"] == 30
    assert row["predicted_step"] == pytest.approx(30, abs=1)  # a noiseless curve of the model's own shape
    assert (row["beta0"], row["beta1"], row["beta2"]) == pytest.approx((0.05, 0.5, 0.4), rel=1e-3)


def test_alpha_beta_must_come_from_chapter_four(tmp_path):
    store = ResultStore("empty", root=tmp_path, hardware={"cpu_model": "test"})
    with pytest.raises(ValueError, match="no all_reduce benchmark of gloo on cpu"):
        costmodel.all_reduce_alpha_beta(store)
    rows = [
        {"operation": "all_reduce", "status": "ok", "world_size": 2, "bytes": n, "label": "x",
         "collective": "all_reduce",
         "seconds": ring_all_reduce_seconds(n, 2, 1e-4, 2e-9), "algbw_bytes_per_second": 1.0,
         "busbw_bytes_per_second": 1.0}
        for n in (1024, 2**20, 2**24)
    ]  # fmt: skip
    store.measure(
        {"kind": "collective_benchmark", "backend": "gloo", "device": "cpu"}, lambda: {"rows": rows}
    )
    fit = costmodel.all_reduce_alpha_beta(store)
    assert (fit["alpha_seconds"], fit["seconds_per_byte"]) == pytest.approx((1e-4, 2e-9), rel=1e-6)


def test_copy_benchmark_reports_its_method():
    copy = costmodel.copy_seconds_per_byte(megabytes=1, repeats=3)
    assert copy["bytes"] == 2**20 and copy["seconds_per_byte"] == copy["seconds"] / 2**20
    assert copy["method"].startswith("median of 3 copies of 1,048,576 B")
