"""The Optimus loss model (chapter 5): L(k) = 1/(β0·k + β1) + β2 (Peng et al., "Optimus", EuroSys 2018),
fitted by non-negative least squares, to say how many steps a target loss needs, and tested on held-out
curve ends.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar, nnls

from helpers.ddp_results import PARITY_THRESHOLD


def predict_loss(fit: dict, steps) -> np.ndarray:
    """L(k) = 1/(β0·k + β1) + β2 at each step k."""
    k = np.asarray(steps, dtype=float)
    with np.errstate(divide="ignore"):
        return 1 / (fit["beta0"] * k + fit["beta1"]) + fit["beta2"]


def _fit_given_beta2(steps: np.ndarray, losses: np.ndarray, beta2: float) -> tuple[dict, float]:
    """(β0, β1) by weighted NNLS on 1/(L − β2) = β0·k + β1, and the squared error in loss space.

    The rows are weighted by (L − β2)²: a residual ε in 1/(L − β2) is a residual of about ε·(L − β2)² in
    the loss, so the weighted problem approximates least squares on the loss itself.
    """
    gap = losses - beta2
    weights = gap**2
    design = np.column_stack([steps, np.ones_like(steps)]) * weights[:, None]
    (beta0, beta1), _ = nnls(design, weights / gap)
    fit = {"beta0": float(beta0), "beta1": float(beta1), "beta2": float(beta2)}
    error = float(np.sum((predict_loss(fit, steps) - losses) ** 2))
    return fit, error if math.isfinite(error) else math.inf


def fit_loss_curve(steps, losses, grid_points: int = 200) -> dict:
    """β0, β1, β2 ≥ 0 of L(k) = 1/(β0·k + β1) + β2 (Optimus, Peng et al. 2018) by non-negative least squares.

    For fixed β2 the model is linear in (β0, β1) after the transform 1/(L − β2), so: scan β2 over
    ``grid_points`` values in [0, min(loss)), solve each by NNLS (``_fit_given_beta2``), keep the β2 with
    the smallest squared error in loss space, then refine β2 by a bounded 1-D search between the grid
    neighbours of the best value. Returns the βs, the root-mean-square error and the points fitted.
    """
    k = np.asarray(steps, dtype=float)
    loss = np.asarray(losses, dtype=float)
    if k.shape != loss.shape or k.ndim != 1 or len(k) < 3:
        raise ValueError("steps and losses must be 1-D of the same length, with at least 3 points")
    if not np.all(np.isfinite(loss)) or loss.min() <= 0 or k.min() < 0:
        raise ValueError("losses must be finite and positive, steps not negative")
    grid = np.linspace(0.0, loss.min(), grid_points + 1)[:-1]
    errors = [_fit_given_beta2(k, loss, beta2)[1] for beta2 in grid]
    best = int(np.argmin(errors))
    low = grid[max(best - 1, 0)]
    high = grid[best + 1] if best + 1 < len(grid) else loss.min() * (1 - 1e-9)
    refined = minimize_scalar(
        lambda beta2: _fit_given_beta2(k, loss, beta2)[1],
        bounds=(low, high),
        method="bounded",
        options={"xatol": 1e-10 * max(loss.min(), 1.0)},
    )
    candidates = [_fit_given_beta2(k, loss, grid[best]), _fit_given_beta2(k, loss, float(refined.x))]
    fit, error = min(candidates, key=lambda pair: pair[1])
    return {**fit, "rmse": math.sqrt(error / len(k)), "points": len(k)}


def steps_to_loss(fit: dict, target: float) -> float | None:
    """The step k at which L(k) = ``target``: k = (1/(target − β2) − β1)/β0; 0 if the curve starts below.

    None when the model never gets there (target ≤ β2, or β0 = 0 with the start above the target).
    """
    if target <= fit["beta2"]:
        return None
    needed = 1 / (target - fit["beta2"])  # β0·k + β1 must reach this
    if needed <= fit["beta1"]:
        return 0.0
    if fit["beta0"] <= 0:
        return None
    return (needed - fit["beta1"]) / fit["beta0"]


def smoothed(values, window: int) -> np.ndarray:
    """Centred moving average over ``window`` points (shrinking at both ends); window 1 returns a copy."""
    values = np.asarray(values, dtype=float)
    if window < 1:
        raise ValueError("window must be at least 1")
    half = window // 2
    return np.array([values[max(0, i - half) : i + half + 1].mean() for i in range(len(values))])


def held_out_prediction(steps, losses, fit_fraction: float, target: float, window: int = 5) -> dict:
    """Fit on the first ``fit_fraction`` of a curve, predict when it reaches ``target``, compare.

    The measured crossing is the first step at which the curve, smoothed by a centred moving average of
    ``window`` points (``smoothed``), is at or below the target: a raw curve would cross early on a
    noise dip. ``error_steps`` = predicted − measured; ``relative_error`` divides it by the measured step.
    Crossings are not interpolated between points. Either step is None when the curve never gets there.
    """
    if not 0 < fit_fraction <= 1:
        raise ValueError("fit_fraction must be in (0, 1]")
    k = np.asarray(steps, dtype=float)
    loss = np.asarray(losses, dtype=float)
    fitted = max(3, round(fit_fraction * len(k)))
    fit = fit_loss_curve(k[:fitted], loss[:fitted])
    predicted = steps_to_loss(fit, target)
    below = np.nonzero(smoothed(loss, window) <= target)[0]
    measured = float(k[below[0]]) if len(below) else None
    error = predicted - measured if predicted is not None and measured is not None else None
    return {
        "fit": fit,
        "fitted_points": fitted,
        "fitted_up_to_step": float(k[fitted - 1]),
        "target": target,
        "predicted_step": predicted,
        "measured_step": measured,
        "error_steps": error,
        "relative_error": error / measured if error is not None and measured else None,
    }


# what makes two DDP runs one run of the data, and how far apart their losses may lie (bf16 gradients on
# the H200 moved ConvNet's by at most 1.1e-3 relative)
RUN_KEYS = ("seed", "global_batch_size", "train_samples", "epochs", "optimizer", "lr")
SAME_RUN = 1e-2


def loss_curves(stores, min_points: int = 6) -> list[dict]:
    """Measured per-step training-loss curves with at least ``min_points`` points, from the stores'
    records of this machine: the batch losses of chapter 1's trainings, the global batch losses of
    chapter 3's DDP runs (every epoch's steps in a row) and those of chapter 4's synchronous SGD
    (staleness 0). A curve that is an earlier one's up to float32 rounding (every loss within
    ``ddp_results.PARITY_THRESHOLD`` relative: DDP on 1 and k ranks computes the same global batches, by
    design, summed in another order), or a DDP run of the same model, seed, global batch, clips, epochs,
    optimizer and learning rate as an earlier one whose every loss lies within ``SAME_RUN`` of it (its
    gradients in bf16, say: the same batches from the same start, a curve a hair apart) is kept once, its
    other sources listed in ``same_as``: one test per run of the data, not per variant of it."""
    curves = []
    for store in stores:
        for record in store.records():
            kind, config, result = record["kind"], record["config"], record["result"]
            run = None  # what makes two DDP runs one run of the data
            if kind == "training":
                losses, chapter = result.get("step_losses", []), "chapter 1"
            elif kind == "ddp_run":
                losses = [loss for row in result["history"] for loss in row.get("step_losses", [])]
                ranks, compression = config["world_size"], config.get("compression")
                run = tuple(config.get(key) for key in RUN_KEYS)
                chapter = (
                    f"chapter 3 DDP, {ranks} rank{'' if ranks == 1 else 's'}, seed {config.get('seed', 0)}"
                    + (f", {compression} gradients" if compression else "")
                )
            elif kind == "stale_training" and config.get("staleness") == 0:
                losses = [row["batch_loss"] for row in result["history"]]
                chapter = f"chapter 4 SGD, seed {config.get('seed', 0)}"
            else:
                continue
            if len(losses) < min_points:
                continue
            name = f"{config['model']}, {chapter}"
            mine = [c for c in curves if c["model"] == config["model"]]
            same = next(
                (c for c in mine if _same_losses(c["losses"], losses)
                 or (run is not None and c["run"] == run and _same_losses(c["losses"], losses, SAME_RUN))),
                None,
            )  # fmt: skip
            if same is not None:  # another launch of the same settings adds no name
                if name != same["curve"] and name not in same["same_as"]:
                    same["same_as"].append(name)
                continue
            steps = list(range(1, len(losses) + 1))
            curves.append({"curve": name, "model": config["model"], "unit": "step", "steps": steps,
                           "losses": losses, "same_as": [], "run": run})  # fmt: skip
    return curves


def _same_losses(first: list[float], second: list[float], relative: float = PARITY_THRESHOLD) -> bool:
    """The same curve to within ``relative`` (float32 rounding by default): as long, every loss within it."""
    return len(first) == len(second) and all(
        abs(a - b) <= relative * max(abs(a), abs(b)) for a, b in zip(first, second, strict=True)
    )


def loss_predictions(curves: list[dict], fit_fraction: float = 0.5, target_at: float = 0.75) -> pd.DataFrame:
    """Held-out test of the loss model on each curve: fit on its first ``fit_fraction``, predict when it
    reaches the loss its smoothed curve shows at ``target_at`` of its length, compare with where it did.

    ``out_of_sample`` is True wherever the measured crossing lies beyond the fitted points: elsewhere the
    "prediction" restates points the fit has seen, and its error says nothing about the model. A fit that
    never reaches the target there is a tested prediction too, and a failed one (``predicted_step`` None)."""
    rows = []
    for curve in curves:
        window = max(1, min(5, len(curve["losses"]) // 6))
        level = smoothed(curve["losses"], window)[int(target_at * (len(curve["losses"]) - 1))]
        outcome = held_out_prediction(curve["steps"], curve["losses"], fit_fraction, float(level), window)
        kept = {key: outcome[key] for key in ("fitted_up_to_step", "predicted_step", "measured_step",
                                              "relative_error")}  # fmt: skip
        tested = (
            outcome["measured_step"] is not None and outcome["measured_step"] > outcome["fitted_up_to_step"]
        )
        rows.append(
            {"curve": curve["curve"], "same_as": "; ".join(curve.get("same_as", [])), "unit": curve["unit"],
             "points": len(curve["steps"]), "fitted_points": outcome["fitted_points"],
             "target_loss": float(level), **kept, "out_of_sample": tested,
             **{key: outcome["fit"][key] for key in ("beta0", "beta1", "beta2")}}
        )  # fmt: skip
    return pd.DataFrame(rows)


def out_of_sample(predictions: pd.DataFrame) -> pd.DataFrame:
    """The real tests among ``loss_predictions``: one row per curve whose crossing the fit had not seen,
    with its signed error in steps (%): what the same error does to the dollars of a result, which are
    proportional to its steps. A fit that never reaches the target reads "never", its error NaN."""
    tested = predictions[predictions["out_of_sample"]]

    def steps(values: pd.Series) -> pd.Series:  # whole steps, as a step is counted
        return values.map(lambda step: "never" if pd.isna(step) else f"{step:,.0f}")

    error = pd.to_numeric(tested["relative_error"]) * 100
    return pd.DataFrame({"curve": tested["curve"], "also measured as": tested["same_as"],
                         "fitted up to step": steps(tested["fitted_up_to_step"]),
                         "reached at step": steps(tested["measured_step"]),
                         "predicted at step": steps(tested["predicted_step"]),
                         "error (%)": error}).reset_index(drop=True)  # fmt: skip
