"""helpers.costmodel.validate: the four models profiled per batch through the store (reused on a rerun,
stopped by its limit with what it finished kept); the step model's inputs recovered from steps it made
itself, each model predicted from the others, the goals counted by hand; bad input is one line."""

import dataclasses
import functools
import math

import pandas as pd
import pytest

from helpers.advise import counting, measure
from helpers.advise.examples import EXAMPLES
from helpers.costmodel import specs, validate
from helpers.costmodel.specs import GPUS
from helpers.costmodel.stepmodel import StepInputs, conv_seconds, layer_ops, predict_step
from helpers.results import ResultStore

H200 = GPUS["H200 SXM 141 GB"]


@pytest.fixture(scope="module")
def mel_cnn():
    """Chapter 7's MelCNN as the sweep counts it: the smallest of the four to profile on a CPU."""
    return validate.counted_models(["MelCNN"])


def test_the_four_models_are_the_books_two_and_chapter_sevens_two():
    names = [c.label for c in validate.counted_models().values()]
    assert names == ["LinearNet", "ConvNet", "MelCNN", "WaveTransformer"]


def test_every_batch_and_seed_is_profiled_once_and_reused(tmp_path, mel_cnn):
    store = ResultStore("scratch", root=tmp_path)
    first = measure.profile_sweep(store, mel_cnn, [3, 2, 3], repeats=2)
    runs = [(r["config"]["batch_size"], r["config"]["seed"]) for r in first]
    assert runs == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert {r["kind"] for r in first} == {validate.PROFILE_KIND}
    again = measure.profile_sweep(store, mel_cnn, [2, 3], repeats=2, time_limit_seconds=-1.0)
    assert again == []  # the limit is checked before each run: nothing, not even a reused record
    reused = measure.profile_sweep(store, mel_cnn, [2, 3], repeats=2)
    assert [r["measured_at"] for r in reused] == [r["measured_at"] for r in first]
    frame = validate.profile_frame(first)
    assert list(frame.columns) == ["machine", "model", "batch", "seed", "step_seconds", "layers_host_seconds",
                                   "optimizer_host_seconds", "kernel_seconds",
                                   "conv_kernel_seconds"]  # fmt: skip
    assert set(frame["model"]) == {"MelCNN [0e882f44]"} and (frame["kernel_seconds"] == 0.0).all()  # no GPU
    assert (frame["conv_kernel_seconds"] == 0.0).all()
    phases = {phase["phase"]: phase["host_seconds"] for phase in first[0]["result"]["phases"]}
    assert frame["layers_host_seconds"][0] == phases["forward"] + phases["backward"]
    observed = validate.observed_steps(frame)
    assert list(observed["batch"]) == [2, 3] and list(observed["runs"]) == [2, 2]
    assert (observed["step_low"] <= observed["step_seconds"]).all()


def test_the_command_refuses_an_empty_store_and_skips_a_machine_without_a_gpu(
    tmp_path, monkeypatch, capsys, mel_cnn
):
    monkeypatch.setattr(validate, "ResultStore", functools.partial(ResultStore, root=tmp_path))
    monkeypatch.setattr(validate, "results_dir", lambda: tmp_path)
    assert validate.main(["--results-run", "scratch"]) == 2
    assert "holds no advise_step_profile records" in capsys.readouterr().err
    store = ResultStore("scratch", root=tmp_path)
    measure.profile_sweep(store, mel_cnn, [2, 4], repeats=1)
    assert validate.main(["--results-run", "scratch"]) == 0
    assert capsys.readouterr().out == (
        f"machine {store.provenance_id}: no GPU the roofline knows, or fewer than three models: skipped\n"
    )


def test_bad_batches_are_one_line_before_any_work(capsys):
    assert validate.main(["--batches", "16,x"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


TRUE_INPUTS = StepInputs(op_seconds=5e-5, optimizer_seconds=4e-4, peak_fraction=0.5, half_flops=1e7,
                         memory=0.7, kernel_seconds=3e-6, conv_peak_fraction=0.15,
                         conv_half_flops=1e8)  # fmt: skip


def synthetic(models=("LinearNet", "ConvNet"), batches=(16, 256), inputs=TRUE_INPUTS) -> pd.DataFrame:
    """``observed_steps`` rows made by the step model itself from ``inputs`` on the H200's datasheet."""
    rows = []
    for model in models:
        for batch in batches:
            step = predict_step(model, batch, H200, inputs)
            rows.append({"machine": "m", "model": model, "batch": batch, "step_seconds": step["step_seconds"],
                         "layers_host_seconds": layer_ops(model) * inputs.op_seconds,
                         "optimizer_host_seconds": inputs.optimizer_seconds,
                         "kernel_seconds": step["device_seconds"], "step_low": step["step_seconds"],
                         "conv_kernel_seconds": conv_seconds(model, batch, H200, inputs),
                         "step_high": step["step_seconds"], "runs": 1})  # fmt: skip
    return pd.DataFrame(rows)


def test_calibration_recovers_the_inputs_that_made_the_steps():
    calibration = validate.calibrate(synthetic(), H200)
    central = calibration["central"]
    assert central.op_seconds == pytest.approx(5e-5) and central.optimizer_seconds == pytest.approx(4e-4)
    corners = [value for corner in calibration["host_corners"] for value in corner]
    assert corners == pytest.approx([5e-5, 4e-4] * 4)  # one host time per op: no spread
    for row in synthetic().itertuples():  # the fitted device curves reproduce every kernel time
        fitted = predict_step(row.model, row.batch, H200, central)["device_seconds"]
        assert fitted == pytest.approx(row.kernel_seconds)
    # the convolutions' own curve, from ConvNet's convolution operators alone
    assert (central.conv_peak_fraction, central.conv_half_flops) == (0.15, 1e8)
    assert validate.fit_conv(synthetic(models=("LinearNet",)), H200) is None  # no convolution to fit on


def test_leave_one_out_predicts_each_model_from_the_others():
    shared = dataclasses.replace(TRUE_INPUTS, conv_peak_fraction=None, conv_half_flops=None)
    table = validate.leave_one_out(synthetic(inputs=shared), H200)
    assert list(table["model"]) == ["LinearNet", "LinearNet", "ConvNet", "ConvNet"]
    assert table["in_sample_ratio"].to_numpy() == pytest.approx(1.0)
    assert table["out_of_sample_ratio"].to_numpy() == pytest.approx(1.0)  # the same inputs made both
    assert table["inside_band"].all() and (table["band_width"] >= 1).all()
    # convolutions on a slower curve of their own: in sample it is fitted; held out, with no other model
    # that convolves, ConvNet's convolutions can only be priced as products, and come out too fast
    table = validate.leave_one_out(synthetic(), H200)
    assert table["in_sample_ratio"].to_numpy() == pytest.approx(1.0)
    held_out = table[table["model"] == "ConvNet"]["out_of_sample_ratio"]
    assert (held_out < 0.9).all()


def test_the_goals_are_counted_from_batch_32_per_model_and_over_all():
    table = pd.DataFrame({
        "model": ["A", "A", "A", "B"], "batch": [16, 32, 64, 32],
        "in_sample_ratio": [9.0, 1.1, 0.9, 1.0], "out_of_sample_ratio": [9.0, 1.3, 0.9, 1.0],
        "roofline_ratio": [9.0, 0.5, 0.3, 0.2],
        "inside_band": [False, True, False, True], "band_width": [9.0, 2.0, 3.0, 1.5],
    })  # fmt: skip
    summary = validate.goal_summary(table)
    # A at batches 32 and 64: out of sample 1.3 and 0.9 (|ln| 0.262 and 0.105), in sample 1.1 and 0.9,
    # roofline 0.5 and 0.3 (|ln| 0.693 and 1.204)
    assert summary.loc["A"].to_dict() == pytest.approx({
        "fold, roofline": math.exp((0.6931 + 1.2040) / 2), "fold, in sample": math.exp((0.0953 + 0.1054) / 2),
        "fold, out of sample": math.exp((0.2624 + 0.1054) / 2),
        "points": 2, "within 0.8-1.25": 0.5, "median error, out of sample": 0.2,
        "median error, in sample": 0.1, "median error, roofline": 0.6, "inside band": 0.5,
        "median band width": 2.5,
    }, rel=1e-3)  # fmt: skip
    assert summary.loc["all", "points"] == 3
    assert summary.loc["all", "median error, out of sample"] == pytest.approx(0.1)  # of 0.3, 0.1 and 0


def test_the_command_prints_the_h200_table_from_the_committed_records(capsys):
    assert validate.main([]) == 0
    out = capsys.readouterr().out
    assert "(H200 SXM 141 GB): leave one model out" in out
    for model in ("LinearNet", "ConvNet", "MelCNN", "WaveTransformer"):
        assert model in out
    assert "out of sample, predicted / measured" in out and "goals (batches of 32 and more)" in out


def test_the_roofline_s_host_band_is_the_h200_host_s_measured_time_per_op():
    # the band chapter 5 prices every GPU's host with is what the committed profiles measure, to three
    # significant digits: lowest, median and highest over the H200 machine's 84 runs
    _, records = validate.profiled_machines()[specs.OP_MEASURED_ON]
    runs = validate.profile_frame(records)
    per_op = validate.host_seconds_per_op(runs)
    assert len(runs) == 84 and runs["model"].nunique() == 4
    measured = [float(f"{value:.3g}") for value in (per_op.min(), per_op.median(), per_op.max())]
    assert measured == [specs.OP_OVERHEAD.low, specs.OP_OVERHEAD.central, specs.OP_OVERHEAD.high]
    # by hand for one run: its step's host time over LinearNet's 33 ops (7 + 14 layer kernels, 4 loss ops,
    # foreach Adam's 8)
    first = runs.iloc[0]
    ops = {"LinearNet": 33, "ConvNet": 45}.get(first["model"])
    if ops is not None:
        host = first["layers_host_seconds"] + first["optimizer_host_seconds"]
        assert per_op.iloc[0] == pytest.approx(host / ops)


def hand_table() -> pd.DataFrame:
    """Two models at batches 16, 32 and 64: A predicted well out of sample, B 1.5x too slow."""
    return pd.DataFrame({
        "model": ["A"] * 3 + ["B"] * 3, "batch": [16, 32, 64] * 2,
        "measured_seconds": [1.0] * 6, "roofline_ratio": [0.2, 0.25, 0.3, 0.2, 0.2, 0.2],
        "in_sample_ratio": [1.0, 1.0, 1.1, 1.2, 1.6, 1.7],
        "out_of_sample_ratio": [1.0, 1.05, 1.1, 1.5, 1.5, 1.5],
        "band_low": [0.8] * 6, "band_high": [1.6] * 6, "band_width": [2.0] * 6,
        "inside_band": [True, True, True, True, True, True],
    })  # fmt: skip


def test_the_chapter_reads_the_check_as_ratios_first():
    table = hand_table()
    validation = {"table": table, "summary": validate.goal_summary(table), "conv_peak_fraction": None,
                  "convolving": [], "gpu": H200}  # fmt: skip
    text = validate.validation_sentences(validation)["step_model_check"]
    # batches 32 and 64 only. Roofline ratios 0.25, 0.3, 0.2, 0.2: median 0.225, |ln| 1.386, 1.204, 1.609,
    # 1.609, median 1.498, a factor of 4.47. Out of sample 1.05, 1.1, 1.5, 1.5: median 1.3, |ln| median
    # (0.0953 + 0.405) / 2, a factor of 1.28, errors 0.05, 0.1, 0.5, 0.5 (median 30 %), 2 of 4 within
    # 0.8-1.25. In sample 1.0, 1.1, 1.6, 1.7: |ln| median (0.0953 + 0.470) / 2, a factor of 1.33; B's alone
    # (0.470 + 0.531) / 2, a factor of 1.65, past 1.5: its form cannot fit it
    assert text == (
        "On the H200, at the batches of 32 and more that the study measured, the roofline's central step is "
        "a median 0.23× the measured one, off by a median factor of 4.5 (in sample for its host time per op, "
        "which comes from these very profiles). The step model, calibrated on the other model, predicts a "
        "median 1.30× the measured step, off by a median factor of 1.28 (the larger over the smaller), a "
        "median error of 30 % (|predicted − measured| ÷ measured); calibrated on both instead, it is off by "
        "1.33. 2 of 4 points fall within 0.8–1.25×. Its median error is within 15 % for `A` and "
        "above it for `B`.\n\nThe step model's band, the spread of its predictions over the calibration "
        "models' host times and device fits (a range, not a confidence interval), holds the measured step at "
        "4 of the 4 points, at a median width (highest ÷ lowest) of 2.0×. `B` is off by a factor of 1.65 "
        "even calibrated on both: one efficiency curve per kind of product and one host time per op cannot "
        "fit it and the others at once."
    )
    # convolutions on a curve of their own (17 % of the H200's 67 TFLOP/s: 11.39), with A and B the only
    # models that convolve
    validation.update(conv_peak_fraction=0.17, convolving=["A", "B"])
    text = validate.validation_sentences(validation)["step_model_check"]
    assert text.endswith(
        "Convolutions get an efficiency curve of their own (the share of the FP32 peak a kernel reaches, "
        "rising with its FLOPs and levelling off), fitted on the time of the profiled convolution operators "
        "of `A` and `B`: it levels off at 11.4 TFLOP/s (17 % of the peak) for these models' float32 "
        "convolutions as cuDNN ran them. With two such models, each one held out takes its convolution "
        "curve from the other alone, which gives no range."
    )  # both bands hold their points (4 of 4): nothing to add
    validation["summary"].loc["B", "inside band"] = 0.0
    text = validate.validation_sentences(validation)["step_model_check"]
    assert text.endswith("which gives no range; `B`'s band holds the measured step at none of its 2 points.")
    view = validate.summary_view(validation["summary"])
    assert view.loc["B", "out of sample, off by"] == "1.50×" and view.loc["all", "points"] == 4
    assert view.loc["A", "share within 0.8–1.25×"] == "100 %"


def test_advise_prices_a_gpu_the_study_profiled_the_model_on_from_those_steps():
    (wave,) = validate.counted_models(["WaveTransformer"]).values()
    computes = validate.stored_gpu_computes(wave)
    assert list(computes) == [(wave.name, "H200 SXM 141 GB")]
    assert set(computes[(wave.name, "H200 SXM 141 GB")]) == {"low", "central", "high"}
    renamed = counting.count(counting.load_model(EXAMPLES["WaveTransformer"]), (1, 12000), label="mine")
    assert list(validate.stored_gpu_computes(renamed)) == [(renamed.name, "H200 SXM 141 GB")]  # same costs
    bf16 = counting.count(counting.load_model(EXAMPLES["WaveTransformer"]), (1, 12000), "bf16", label="b")
    assert validate.stored_gpu_computes(bf16) == {}  # profiled in float32 only
    assert validate.costs_digest("LinearNet") == "LinearNet"
