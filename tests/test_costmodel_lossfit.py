"""helpers.costmodel.lossfit: the Optimus fit recovers known curves and is tested on held-out ends."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.costmodel import lossfit
from helpers.results import ResultStore

# ----- the Optimus loss model ---------------------------------------------------------------------------

BETAS = {"beta0": 0.02, "beta1": 0.5, "beta2": 0.3}


def synthetic_curve(noise: float, seed: int = 0, steps: int = 400):
    k = np.arange(1, steps + 1, dtype=float)
    loss = lossfit.predict_loss(BETAS, k)
    return k, loss * (1 + noise * np.random.default_rng(seed).standard_normal(len(k)))


def test_loss_fit_recovers_exact_betas():
    fit = lossfit.fit_loss_curve(*synthetic_curve(noise=0.0))
    for name, value in BETAS.items():
        assert fit[name] == pytest.approx(value, rel=1e-4)
    assert fit["rmse"] < 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_fit_recovers_betas_from_noisy_curves(seed):
    fit = lossfit.fit_loss_curve(*synthetic_curve(noise=0.01, seed=seed))
    assert fit["beta0"] == pytest.approx(BETAS["beta0"], rel=0.05)
    assert fit["beta1"] == pytest.approx(BETAS["beta1"], rel=0.05)
    assert fit["beta2"] == pytest.approx(BETAS["beta2"], abs=0.01)
    assert min(fit["beta0"], fit["beta1"], fit["beta2"]) >= 0


def test_steps_to_loss_inverts_predict_loss():
    for k in (0.0, 10.0, 123.0):
        assert lossfit.steps_to_loss(BETAS, lossfit.predict_loss(BETAS, k)) == pytest.approx(k)
    assert lossfit.steps_to_loss(BETAS, 0.3) is None  # the floor β2 is never reached
    assert lossfit.steps_to_loss(BETAS, 10.0) == 0.0  # above the starting loss: reached at once
    assert lossfit.steps_to_loss({**BETAS, "beta0": 0.0}, 1.0) is None


def test_held_out_prediction_on_a_synthetic_curve():
    steps, losses = synthetic_curve(noise=0.01, seed=3)
    target = float(lossfit.predict_loss(BETAS, 300.0))
    report = lossfit.held_out_prediction(steps, losses, fit_fraction=0.5, target=target)
    assert report["fitted_up_to_step"] == 200
    assert report["measured_step"] == pytest.approx(300, abs=25)
    assert abs(report["relative_error"]) < 0.1


def test_held_out_prediction_reports_a_curve_that_never_gets_there():
    steps, losses = synthetic_curve(noise=0.0)
    report = lossfit.held_out_prediction(steps, losses, fit_fraction=0.5, target=0.31)
    assert report["measured_step"] is None and report["error_steps"] is None
    assert report["predicted_step"] == pytest.approx(1 / 0.01 / 0.02 - 25)


def test_smoothed_is_a_centred_mean():
    assert list(lossfit.smoothed([1, 2, 3, 4, 5], 3)) == [1.5, 2, 3, 4, 4.5]


def test_loss_fit_refuses_bad_curves():
    with pytest.raises(ValueError):
        lossfit.fit_loss_curve([1, 2], [1.0, 0.9])
    with pytest.raises(ValueError):
        lossfit.fit_loss_curve([1, 2, 3], [1.0, 0.0, 0.5])


def test_loss_curves_and_their_held_out_predictions(tmp_path):
    store = ResultStore("curves", root=tmp_path, hardware={"cpu_model": "test"})
    truth = {"beta0": 0.05, "beta1": 0.5, "beta2": 0.4}
    steps = np.arange(1, 41)
    losses = lossfit.predict_loss(truth, steps)
    history = [{"step": int(k), "batch_loss": float(v)} for k, v in zip(steps, losses, strict=True)]
    store.measure(
        {"kind": "stale_training", "model": "ConvNet", "staleness": 0}, lambda: {"history": history}
    )
    store.measure(
        {"kind": "stale_training", "model": "ConvNet", "staleness": 4}, lambda: {"history": history}
    )
    short = [{"epoch": 1, "train_loss": 2.0}, {"epoch": 2, "train_loss": 1.5}]
    store.measure(
        {"kind": "training", "model": "LinearNet"}, lambda: {"history": short, "step_losses": [2.0]}
    )
    ddp_history = [{"step_losses": [2.3, 2.2, 2.1]}, {"step_losses": [2.0, 1.9, 1.8]}]
    store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": 2}, lambda: {"history": ddp_history})
    curves = {c["curve"]: c for c in lossfit.loss_curves([store])}
    # the stale curve and the short one are left out; DDP's epochs join into one curve of steps
    assert sorted(curves) == ["ConvNet, chapter 3 DDP, 2 ranks, seed 0", "ConvNet, chapter 4 SGD, seed 0"]
    ddp_curve = curves["ConvNet, chapter 3 DDP, 2 ranks, seed 0"]
    assert ddp_curve["losses"] == [2.3, 2.2, 2.1, 2.0, 1.9, 1.8] and ddp_curve["steps"] == [1, 2, 3, 4, 5, 6]
    curves = [curves["ConvNet, chapter 4 SGD, seed 0"]]
    predictions = lossfit.loss_predictions(curves, fit_fraction=0.5, target_at=0.75)
    row = predictions.iloc[0]
    assert row["fitted_points"] == 20 and row["measured_step"] == 30
    assert row["predicted_step"] == pytest.approx(30, abs=1)  # a noiseless curve of the model's own shape
    assert (row["beta0"], row["beta1"], row["beta2"]) == pytest.approx((0.05, 0.5, 0.4), rel=1e-3)


def test_a_repeated_curve_counts_once_and_only_unseen_crossings_are_tests(tmp_path):
    store = ResultStore("curves", root=tmp_path, hardware={"cpu_model": "test"})
    ddp_history = [{"step_losses": [2.3, 2.2, 2.1]}, {"step_losses": [2.0, 1.9, 1.8]}]
    for ranks in (1, 2):  # DDP on one and two ranks computes the same global batches
        for launch in (0, 1):  # and another launch of the same settings is the same curve, named once
            store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": ranks, "launch": launch},
                          lambda: {"history": ddp_history})  # fmt: skip
    # the same batches with bf16 gradients: a curve a hair apart, the same run of the data
    nudged = [{"step_losses": [loss * 1.01 for loss in row["step_losses"]]} for row in ddp_history]
    store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": 2, "compression": "bf16"},
                  lambda: {"history": nudged})  # fmt: skip
    # another seed is another run of the data: a curve of its own
    other = [{"step_losses": [loss * 0.9 for loss in row["step_losses"]]} for row in ddp_history]
    store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": 2, "seed": 1},
                  lambda: {"history": other})  # fmt: skip
    runs = {frozenset([c["curve"], *c["same_as"]]) for c in lossfit.loss_curves([store])}
    assert runs == {
        frozenset([*(f"ConvNet, chapter 3 DDP, {k} rank{'' if k == 1 else 's'}, seed 0" for k in (1, 2)),
                   "ConvNet, chapter 3 DDP, 2 ranks, seed 0, bf16 gradients"]),
        frozenset(["ConvNet, chapter 3 DDP, 2 ranks, seed 1"]),
    }  # fmt: skip
    curves = [c for c in lossfit.loss_curves([store]) if "seed 0" in c["curve"]]
    assert len(curves[0]["same_as"]) == 2 and curves[0]["curve"] not in curves[0]["same_as"]  # each once
    # the same settings but a curve 5 % away is not a hair apart, and another learning rate is another run
    apart = [{"step_losses": [loss * 1.05 for loss in row["step_losses"]]} for row in ddp_history]
    store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": 4}, lambda: {"history": apart})
    near = [{"step_losses": [loss * 0.999 for loss in row["step_losses"]]} for row in ddp_history]
    store.measure({"kind": "ddp_run", "model": "ConvNet", "world_size": 4, "lr": 0.01},
                  lambda: {"history": near})  # fmt: skip
    assert len(lossfit.loss_curves([store])) == 4
    truth = {"beta0": 0.05, "beta1": 0.5, "beta2": 0.4}
    steps = list(range(1, 41))
    clean = {
        "curve": "clean",
        "unit": "step",
        "steps": steps,
        "losses": list(lossfit.predict_loss(truth, steps)),
    }
    predictions = lossfit.loss_predictions([clean, curves[0]], fit_fraction=0.5, target_at=0.75)
    # the clean curve crosses at step 30, after its 20 fitted points: a test; the six-point DDP curve's
    # target is reached at step 4 or 5, inside or next to its 3 fitted points, and is not counted unless after
    assert predictions.loc[0, "out_of_sample"]
    tested = lossfit.out_of_sample(predictions)
    assert tested["curve"].tolist()[0] == "clean" and "error (%)" in tested
    assert tested["fitted up to step"].iloc[0] == "20"  # whole steps, as text
    for row in predictions.itertuples():
        assert row.out_of_sample == (row.measured_step > row.fitted_up_to_step)  # "never" included
