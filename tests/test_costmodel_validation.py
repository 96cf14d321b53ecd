"""helpers.costmodel.validation: the time model against multi-rank runs it never saw, each method's error on
its own."""

import math

import pandas as pd
import pytest
from test_costmodel_timemodel import synthetic_time_model

from helpers.costmodel import prose, validation
from helpers.models import build_model, parameter_count


def test_dataparallel_replicas_side_by_side_on_the_cores():
    time_model = synthetic_time_model()
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    # 2 replicas on 2 cores: 1 thread each, the largest chunk of 10 is 5: 0.2 + 0.02 x 5
    assert validation.replicas_side_by_side(time_model, "ConvNet", 10, 2) == pytest.approx(0.3)
    # 4 replicas on 2 cores: 1 thread each, two deep; chunks of 3: two passes without the optimizer, plus it
    expected = 2 * (0.2 + 0.02 * 3 - optimizer) + optimizer
    assert validation.replicas_side_by_side(time_model, "ConvNet", 10, 4) == pytest.approx(expected)
    assert math.isnan(validation.replicas_side_by_side(synthetic_time_model(cores=8), "ConvNet", 10, 2))


def test_validate_mape_arithmetic():
    measured = pd.DataFrame(
        {
            "measurement": ["a", "b", "c", "d"],
            "model": ["M", "M", "M", "N"],
            "step_seconds": [1.0, 2.0, 4.0, 0.5],
            "ranks": [2, 2, 4, 2],  # a and b: one configuration measured twice
            "global_batch": [10, 10, 10, 10],
            "bucket_cap_mb": [None, None, None, 25.0],  # DataParallel has none: missing values count too
        }
    )
    predictions = pd.DataFrame(
        {
            "measurement": ["a", "b", "c", "d", "d"],
            "method": ["x", "x", "x", "x", "y"],
            "predicted_seconds": [1.1, 1.8, 4.0, 0.75, 0.5],
        }
    )
    validated = validation.validate(predictions, measured)
    assert list(validated["ape_percent"].round(9)) == [10, 10, 0, 50, 0]
    summary = validation.validation_summary(validated).set_index(["model", "method"])
    assert summary.loc[("M", "x"), "mape_percent"] == pytest.approx(20 / 3)
    assert summary.loc[("M", "x"), "max_ape_percent"] == pytest.approx(10)
    assert summary.loc[("N", "x"), "mape_percent"] == pytest.approx(50)
    assert summary.loc[("N", "y"), "points"] == 1
    assert summary.loc[("M", "x"), "points"] == 3 and summary.loc[("M", "x"), "configurations"] == 2
    # signed errors +10, -10, 0: mean 0, one prediction of three above its measurement
    assert summary.loc[("M", "x"), "mean_error_percent"] == pytest.approx(0)
    assert (
        summary.loc[("M", "x"), "predictions_above"] == 1
        and summary.loc[("N", "x"), "predictions_above"] == 1
    )
    assert "within_measured_range" not in summary  # these measurements carry no spread
    ranged = measured.assign(step_min=[0.9, 1.9, 3.0, 0.4], step_max=[1.2, 2.1, 5.0, 0.6])
    spread_summary = validation.validation_summary(validation.validate(predictions, ranged))
    spread_summary = spread_summary.set_index(["model", "method"])
    assert spread_summary.loc[("M", "x"), "within_measured_range"] == 2  # 1.8 lies below b's 1.9
    assert spread_summary.loc[("M", "x"), "measured_range_percent"] == pytest.approx(30)  # 30, 10, 50 %
    assert spread_summary.loc[("M", "x"), "min_ape_percent"] == 0
    with pytest.raises(ValueError, match="measurement"):
        validation.validate(
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
            "result": {"step_seconds_all": [0.25, 0.2, 0.19], "threads_per_rank": 1},
        },
        {
            "key": "k2",
            "kind": "dataparallel_timing",
            "config": {"model": "M", "devices": ["cpu", "cpu"], "batch_size": 20, "threads": 2},
            "result": {"step_seconds_all": [0.3, 0.3, 0.4]},
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
            "result": {"step_seconds_all": [0.1], "threads_per_rank": 2},
        },
    ]
    frame = validation.measured_frame(records).set_index("measurement")
    assert list(frame.index) == ["k1", "k2"]  # one rank is not a multi-rank measurement
    assert frame.loc["k1", ["step_seconds", "step_min", "step_max"]].tolist() == [0.2, 0.19, 0.25]
    assert frame.loc["k2", "step_seconds"] == 0.3 and frame.loc["k2", "step_max"] == 0.4
    assert len(validation.measured_frame(records, min_ranks=1)) == 3


def test_validation_rows_are_those_of_the_backend_and_device_the_model_was_fitted_to():
    # On a GPU machine chapter 5 fits one backend's all-reduce (NCCL where it runs) and must validate
    # against that backend's DDP runs only: chapter 3 stores NCCL and Gloo runs side by side.
    def ddp(key, backend, device):
        config = {"model": "M", "world_size": 2, "global_batch_size": 50, "bucket_cap_mb": 25,
                  "backend": backend, "device": device}  # fmt: skip
        return {"key": key, "kind": "ddp_run", "config": config,
                "result": {"step_seconds_all": [0.1], "threads_per_rank": 8}}  # fmt: skip

    records = [
        ddp("nccl", "nccl", "cuda"), ddp("gloo-cuda", "gloo", "cuda"), ddp("gloo-cpu", "gloo", "cpu"),
        {"key": "dp-cuda", "kind": "dataparallel_timing", "result": {"step_seconds_all": [0.1]},
         "config": {"model": "M", "devices": ["cuda:0", "cuda:1"], "batch_size": 20, "threads": 8}},
    ]  # fmt: skip
    picked = validation.measured_frame(records, backend="nccl", device="cuda")["measurement"].tolist()
    assert picked == ["nccl", "dp-cuda"]
    assert validation.measured_frame(records, backend="gloo", device="cpu")["measurement"].tolist() == [
        "gloo-cpu"
    ]


def test_launches_of_one_configuration_are_one_measurement_with_their_spread():
    def launch(number, steps):
        config = {"model": "M", "world_size": 2, "global_batch_size": 50, "bucket_cap_mb": 25,
                  "backend": "gloo", "device": "cpu", "launch": number}  # fmt: skip
        return {"key": f"k{number}", "kind": "ddp_run", "config": config,
                "result": {"step_seconds_all": steps, "threads_per_rank": 1}}  # fmt: skip

    records = [launch(0, [0.30, 0.20, 0.25]), launch(1, [0.40, 0.35, 0.45]), launch(2, [0.21, 0.22, 0.20])]
    frame = validation.measured_frame(records)
    # launch medians 0.25, 0.40, 0.21: their median, and the fastest and slowest launch
    assert frame[["launches", "step_seconds", "step_min", "step_max"]].values.tolist() == [
        [3, 0.25, 0.21, 0.40]
    ]
    one = validation.measured_frame(records[:1])  # one launch: the spread of its steps
    assert one[["launches", "step_seconds", "step_min", "step_max"]].values.tolist() == [
        [1, 0.25, 0.20, 0.30]
    ]


def test_each_measurement_is_predicted_at_the_threads_it_had_by_hand():
    """The synthetic time model (ConvNet: 0.2 + 0.02 b s on one thread, 0.1 + 0.01 b on two; α 1 ms,
    β 1 ns/B, copies 0.2 ns/B, Adam 0.1 µs a parameter: 37.62 ms for 376,200).

    DDP, 2 ranks, global batch 20, 1 thread each: 0.2 + 0.02 × 10 = 0.4 s of compute (the two ranks on
    two cores, 0.1 + 0.01 × 20 + 0.1 = 0.4 s, bind no harder). One 1,504,800 B bucket: 2 × (1 ms + 752,400
    ns) = 3.5048 ms, after backward either way: 0.4035048 s with and without overlap.

    DataParallel, 2 replicas, batch 20, 2 threads: 0.1 + 0.01 × 20 plus the second replica's weight passes
    (0.1 − 0.03762): 0.36238 s; it moves 10 inputs (480,000 B), the weights out and the gradient back
    (2 × 1,504,800 B) and 10 logits each way (800 B): 3,490,400 B × 0.2 ns = 0.69808 ms."""
    measured = pd.DataFrame({
        "measurement": ["ddp", "dp"], "kind": ["ddp", "dataparallel"], "model": ["ConvNet", "ConvNet"],
        "ranks": [2, 2], "global_batch": [20, 20], "threads": [1, 2], "bucket_cap_mb": [25, None],
        "compression": [None, None],
    })  # fmt: skip
    found = validation.predict_measured(measured, synthetic_time_model()).set_index(["measurement", "method"])
    seconds = found["predicted_seconds"]
    assert seconds[("ddp", "ddp_no_overlap")] == pytest.approx(0.4035048)
    assert seconds[("ddp", "ddp_overlap")] == pytest.approx(0.4035048)
    assert found.loc[("ddp", "ddp_overlap"), "predicted_communication_seconds"] == pytest.approx(3.5048e-3)
    assert seconds[("dp", "dataparallel")] == pytest.approx(0.36238 + 0.69808e-3)
    assert set(found.index) == {("ddp", "ddp_no_overlap"), ("ddp", "ddp_overlap"), ("dp", "dataparallel")}


def test_a_prediction_carries_the_band_of_the_link_s_fits_by_hand():
    """The example above with a second link fit, α 3 ms and β 2 ns/B (chapter 4's fit to medians): the DDP
    bucket's all-reduce is 2 × (3 ms + 752,400 B × 2 ns) = 9.0096 ms, so the step's band reaches 0.4090096 s;
    DataParallel has no all-reduce, so its band is its prediction."""
    measured = pd.DataFrame({
        "measurement": ["ddp", "dp"], "kind": ["ddp", "dataparallel"], "model": ["ConvNet", "ConvNet"],
        "ranks": [2, 2], "global_batch": [20, 20], "threads": [1, 2], "bucket_cap_mb": [25, None],
        "compression": [None, None],
    })  # fmt: skip
    time_model = synthetic_time_model(other_links=((3e-3, 2e-9),))
    found = validation.predict_measured(measured, time_model).set_index(["measurement", "method"])
    ddp = found.loc[("ddp", "ddp_overlap")]
    assert ddp["predicted_seconds"] == ddp["predicted_low_seconds"] == pytest.approx(0.4035048)
    assert ddp["predicted_high_seconds"] == pytest.approx(0.4090096)
    dp = found.loc[("dp", "dataparallel")]
    assert dp["predicted_low_seconds"] == dp["predicted_seconds"] == dp["predicted_high_seconds"]
    steps = pd.DataFrame({"measurement": ["ddp", "dp"], "model": "ConvNet", "step_seconds": [0.405, 0.4],
                          "step_min": [0.40, 0.39], "step_max": [0.41, 0.41]})  # fmt: skip
    validated = validation.validate(validation.predict_measured(measured, time_model), steps)
    summary = validation.validation_summary(validated).set_index("method")
    assert summary.loc["ddp_overlap", "link_band_percent"] == pytest.approx(5.5048e-3 / 0.4035048 * 100)
    assert summary.loc["dataparallel", "link_band_percent"] == 0
    assert prose.link_band_note(validated) == (
        "Chapter 4's link fitted to each size's median instead of its lower quartile moves the DDP "
        "predictions by up to 1.4 % (median 1.4 %); the band between the two fits holds the measured step of "
        "the one overlapped-DDP measurement. The errors above are the lower-quartile fit's, the one the "
        "model uses."
    )
    # every prediction above its measurement, the band above the prediction: it cannot explain the error
    above = validated.assign(step_seconds=0.35)
    assert prose.link_band_note(above).endswith(
        "the link's uncertainty only widens these errors and cannot explain them. The errors above are the "
        "lower-quartile fit's, the one the model uses."
    )
    assert "does not hold the measured step of the one overlapped-DDP measurement" in prose.link_band_note(
        above
    )
    small = validated.assign(predicted_high_seconds=validated["predicted_seconds"] * 1.005)
    assert prose.link_band_note(small).endswith(  # 0.005 × 0.4035 s against a 0.405 s step: 0.5 points
        "by 1 % or more, nor any error above by more than 0.5 percentage points."
    )
