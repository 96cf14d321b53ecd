"""The cost model (chapter 5): what a result costs, when buying beats renting, how the loss falls, and
what k devices would buy.

Four parts, each usable on its own:

1. money: rent-or-buy break-even and the dollars of an epoch or of a result, in exact arithmetic
   (``fractions.Fraction``) so that the seed's figures can be checked digit for digit;
2. the Optimus loss model L(k) = 1/(β0·k + β1) + β2 (Peng et al., "Optimus", EuroSys 2018), fitted by
   non-negative least squares, to say how many steps a target loss needs;
3. a time-per-step model, compute + communication, calibrated on single-process measurements and
   validated on multi-rank measurements that the fit never saw;
4. a recommendation for 1–8 GPUs over PCIe or NVLink from vendor link figures (predictions, labelled so).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cache

import numpy as np
import pandas as pd
import torch
from scipy.optimize import minimize_scalar, nnls

from helpers.collectives import benchmark_frame, fit_alpha_beta, ring_all_reduce_seconds, stored_benchmark
from helpers.dataparallel import bytes_per_step, chunk_sizes, stored_dataparallel_timing
from helpers.hardware import usable_cores
from helpers.models import build_model, parameter_count
from helpers.results import ResultStore
from helpers.train import stored_step_timing

SECONDS_PER_HOUR = 3600
MIB = 2**20

# ---------------------------------------------------------------------------------------------------------
# 1. Money, exactly
# ---------------------------------------------------------------------------------------------------------


def exact(value) -> Fraction:
    """``value`` as a Fraction: ints, Fractions, Decimals and decimal strings exactly ("1.46" is 73/50).

    A float is read by its shortest decimal representation (0.45 becomes 9/20, not the binary double
    nearest to it): prices are typed in decimal, and that is the number the user meant.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Fraction(repr(value))
    if isinstance(value, int | Fraction | Decimal | str):
        return Fraction(value)
    raise TypeError(f"cannot read {value!r} as an exact number")


def decimal_expansion(value: Fraction, digits: int = 3) -> str:
    """``digits`` decimals of ``value``, truncated, with "…" when the expansion goes on (8/3 → "2.666…").

    Thousands are separated by commas; a terminating expansion is printed exactly (3/2 → "1.5").
    """
    value = exact(value)
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, rest = divmod(value.numerator, value.denominator)
    decimals = []
    for _ in range(digits):
        if rest == 0:
            break
        digit, rest = divmod(rest * 10, value.denominator)
        decimals.append(str(digit))
    text = f"{sign}{whole:,}" + ("." + "".join(decimals) if decimals else "")
    return text + ("…" if rest else "")


def mixed_number(value: Fraction) -> str:
    """``value`` as a whole number and a proper fraction: 16000/3 → "5,333 1/3"."""
    value = exact(value)
    sign = "-" if value < 0 else ""
    whole, rest = divmod(abs(value.numerator), value.denominator)
    if rest == 0:
        return f"{sign}{whole:,}"
    return f"{sign}{whole:,} {rest}/{value.denominator}" if whole else f"{sign}{rest}/{value.denominator}"


@dataclass(frozen=True)
class BreakEven:
    """Rent-or-buy break-even; every field is exact (Fractions), ``hours_float``/``years_float`` are not."""

    machine_price: Fraction
    hourly_price: Fraction
    performance_adjustment: Fraction
    hours_per_year: Fraction
    effective_price: Fraction
    hours: Fraction
    years: Fraction

    @property
    def hours_float(self) -> float:
        return float(self.hours)

    @property
    def years_float(self) -> float:
        return float(self.years)


def break_even(machine_price, hourly_price, performance_adjustment=0, hours_per_year=2000) -> BreakEven:
    """Hours of rented use that cost as much as buying the machine, and the full-time years they make.

    The performance adjustment follows the seed's "the same, adjusted by −30%": the machine's price is
    scaled by the performance difference, effective price = price × (1 + adjustment). A bought machine
    30% slower than the rented one is worth 30% less per hour of work, so −0.3 turns $8,000 into $5,600.
    hours = effective price / hourly price; years = hours / hours_per_year (2,000 h: a full-time year).
    Pass prices as strings or ints for exact results ("1.50", 8000).
    """
    price, hourly, adjustment, per_year = map(
        exact, (machine_price, hourly_price, performance_adjustment, hours_per_year)
    )
    if price <= 0 or hourly <= 0 or per_year <= 0:
        raise ValueError("machine_price, hourly_price and hours_per_year must be positive")
    if adjustment <= -1:
        raise ValueError(f"performance_adjustment must be above -1 (-100%), not {performance_adjustment!r}")
    effective = price * (1 + adjustment)
    hours = effective / hourly
    return BreakEven(price, hourly, adjustment, per_year, effective, hours, hours / per_year)


def money(value) -> str:
    """Dollars with cents when the amount is whole cents ($1.50, $8,000.00), else a truncated expansion."""
    value = exact(value)
    if (value * 100).denominator == 1:
        return f"${Decimal(value.numerator) / Decimal(value.denominator):,.2f}"
    return "$" + decimal_expansion(value, 4)


def describe_break_even(result: BreakEven, digits: int = 3) -> str:
    """One line with the exact break-even next to its truncated decimal expansion."""
    adjusted = (
        f" adjusted by {decimal_expansion(result.performance_adjustment * 100)}% to "
        f"{money(result.effective_price)}"
        if result.performance_adjustment
        else ""
    )
    return (
        f"{money(result.machine_price)}{adjusted} at {money(result.hourly_price)}/h → "
        f"{mixed_number(result.hours)} h ({decimal_expansion(result.hours, digits)} h) = "
        f"{mixed_number(result.years)} ({decimal_expansion(result.years, digits)}) years of "
        f"{mixed_number(result.hours_per_year)} h"
    )


def break_even_table(
    machine_price, hourly_price, adjustments=(0, "-0.3"), hours_per_year=2000
) -> pd.DataFrame:
    """The seed's comparison: break-even for each performance adjustment, exact and rounded."""
    rows = []
    for adjustment in adjustments:
        result = break_even(machine_price, hourly_price, adjustment, hours_per_year)
        rows.append(
            {
                "performance_adjustment": float(result.performance_adjustment),
                "effective_price": float(result.effective_price),
                "hours_exact": mixed_number(result.hours),
                "hours_rounded": round(result.hours_float),
                "years_exact": mixed_number(result.years),
                "years_rounded": round(result.years_float, 2),
            }
        )
    return pd.DataFrame(rows)


def dollars_per_epoch(epoch_seconds, hourly_price) -> Fraction:
    """epoch seconds × hourly price / 3600, exact (pass strings or ints for exact inputs)."""
    seconds, price = exact(epoch_seconds), exact(hourly_price)
    if seconds < 0 or price < 0:
        raise ValueError("epoch_seconds and hourly_price must not be negative")
    return seconds * price / SECONDS_PER_HOUR


# The seed paper's Table I: seconds per epoch and the hourly price of each setup (its own inputs).
SEED_TABLE_ONE = (("K80", "87", "0.45"), ("2×K80", "55", "0.90"), ("P100", "48", "1.46"))


def table_one(rows=SEED_TABLE_ONE, baseline: str = "K80", as_float: bool = True) -> pd.DataFrame:
    """The seed's Table I recomputed from its inputs: dollars per epoch, speed-up, cost ratios and Δ.

    For each setup against the baseline:

    - ``speedup`` = baseline epoch seconds / epoch seconds;
    - ``price_ratio`` = hourly price / baseline hourly price (the fold increase in cost per hour);
    - ``cost_per_epoch_ratio`` = dollars per epoch / baseline dollars per epoch;
    - ``delta`` (Δ) = speed-up per fold increase in cost = speedup / price_ratio. Algebraically Δ is
      1 / cost_per_epoch_ratio: Δ > 1 means the faster setup is also cheaper per epoch, Δ < 1 that speed
      is bought at a higher price per epoch (Δ = 1: speed-up exactly proportional to the price).

    ``as_float=False`` keeps every number an exact Fraction (what the tests check).
    """
    frame = pd.DataFrame(rows, columns=["setup", "epoch_seconds", "hourly_price"])
    frame["epoch_seconds"] = frame["epoch_seconds"].map(exact)
    frame["hourly_price"] = frame["hourly_price"].map(exact)
    if baseline not in set(frame["setup"]):
        raise ValueError(f"baseline {baseline!r} is not one of the setups {list(frame['setup'])}")
    base = frame.set_index("setup").loc[baseline]
    frame["dollars_per_epoch"] = [
        dollars_per_epoch(s, p) for s, p in zip(frame["epoch_seconds"], frame["hourly_price"], strict=True)
    ]
    frame["speedup"] = base["epoch_seconds"] / frame["epoch_seconds"]
    frame["price_ratio"] = frame["hourly_price"] / base["hourly_price"]
    frame["cost_per_epoch_ratio"] = frame["dollars_per_epoch"] / dollars_per_epoch(*base)
    frame["delta"] = frame["speedup"] / frame["price_ratio"]
    if as_float:
        numeric = frame.columns.drop("setup")
        frame[numeric] = frame[numeric].map(float)
    return frame


def to_target(epochs_to_target, epoch_seconds, hourly_price) -> dict:
    """Seconds, hours and dollars to reach a target accuracy: epochs needed × epoch time × price (exact)."""
    epochs, seconds = exact(epochs_to_target), exact(epoch_seconds)
    if epochs < 0:
        raise ValueError("epochs_to_target must not be negative")
    total = epochs * seconds
    return {
        "seconds": total,
        "hours": total / SECONDS_PER_HOUR,
        "dollars": epochs * dollars_per_epoch(seconds, hourly_price),
    }


def epochs_to_accuracy(history: list[dict], target: float) -> int | None:
    """The first epoch whose test accuracy reaches ``target`` (None when the run never does)."""
    return next((row["epoch"] for row in history if row.get("test_accuracy", 0) >= target), None)


def measured_run_costs(records: list[dict], hourly_price_per_device, **settings) -> pd.DataFrame:
    """Table I for our own DDP runs: per model, every world size of the runs that match ``settings``
    (e.g. bucket_cap_mb=25, compression=None, seed=0), priced at ``hourly_price_per_device`` × ranks,
    against one rank."""
    frames = []
    for model in sorted({r["config"]["model"] for r in records if r["kind"] == "ddp_run"}):
        runs = {
            r["config"]["world_size"]: r["result"]["epoch_seconds"]
            for r in records
            if r["kind"] == "ddp_run" and r["config"]["model"] == model
            and all(r["config"].get(key) == value for key, value in settings.items())
        }  # fmt: skip
        if 1 not in runs or len(runs) < 2:
            continue
        rows = [
            (f"{model}, {k} rank(s)", exact(seconds), exact(hourly_price_per_device) * k)
            for k, seconds in sorted(runs.items())
        ]
        costs = table_one(rows, baseline=f"{model}, 1 rank(s)")
        frames.append(costs.assign(model=model, ranks=sorted(runs)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---------------------------------------------------------------------------------------------------------
# 2. The Optimus loss model
# ---------------------------------------------------------------------------------------------------------


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


def loss_curves(stores, min_points: int = 6) -> list[dict]:
    """Measured training-loss curves with at least ``min_points`` points, from the stores of chapters 1–4:
    per-epoch training loss of chapter 1's trainings and of DDP runs (chapter 3), and the per-step batch
    loss of chapter 4's synchronous SGD (staleness 0)."""
    sources = {
        "training": ("epoch", "train_loss", "chapter 1"),
        "ddp_run": ("epoch", "train_loss", "chapter 3 DDP"),
        "stale_training": ("step", "batch_loss", "chapter 4 synchronous SGD"),
    }
    curves = []
    for store in stores:
        for record in store.records():
            kind, config = record["kind"], record["config"]
            if kind not in sources or config.get("staleness", 0) != 0:
                continue
            unit, loss, chapter = sources[kind]
            history = record["result"]["history"]
            if len(history) >= min_points:
                curves.append(
                    {
                        "curve": f"{config['model']}, {chapter} ({store.folder.name})",
                        "unit": unit,
                        "steps": [row[unit] for row in history],
                        "losses": [row[loss] for row in history],
                    }
                )
    return curves


def loss_predictions(curves: list[dict], fit_fraction: float = 0.5, target_at: float = 0.75) -> pd.DataFrame:
    """Held-out test of the loss model on each curve: fit on its first ``fit_fraction``, predict when it
    reaches the loss its smoothed curve shows at ``target_at`` of its length, compare with where it did."""
    rows = []
    for curve in curves:
        window = max(1, min(5, len(curve["losses"]) // 6))
        level = smoothed(curve["losses"], window)[int(target_at * (len(curve["losses"]) - 1))]
        outcome = held_out_prediction(curve["steps"], curve["losses"], fit_fraction, float(level), window)
        kept = {key: outcome[key] for key in ("predicted_step", "measured_step", "relative_error")}
        rows.append(
            {"curve": curve["curve"], "unit": curve["unit"], "points": len(curve["steps"]),
             "fitted_points": outcome["fitted_points"], "target_loss": float(level), **kept,
             **{key: outcome["fit"][key] for key in ("beta0", "beta1", "beta2")}}
        )  # fmt: skip
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------
# 3. Time per step: compute + communication
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComputeLine:
    """Seconds of one single-process training step at ``batch`` samples: intercept + per-sample × batch.

    The intercept holds what does not grow with the batch: passes over the weights (forward reads them,
    backward writes their gradient) and the optimizer step; the slope the per-sample arithmetic.
    """

    intercept_seconds: float
    seconds_per_sample: float

    def __call__(self, batch: float) -> float:
        return self.intercept_seconds + self.seconds_per_sample * batch


def fit_line(batch_sizes, step_seconds) -> tuple[ComputeLine, float]:
    """Non-negative line through the points minimising *relative* squared error, and its MAPE in %.

    Rows are divided by the measured time, so that the small batches (milliseconds) count as much as the
    large ones (seconds): what the model is judged on is the percentage error.
    """
    x = np.asarray(batch_sizes, dtype=float)
    y = np.asarray(step_seconds, dtype=float)
    if len(x) < 2 or len(set(x)) < 2:
        raise ValueError("a compute line needs at least two different batch sizes")
    (intercept, slope), _ = nnls(np.column_stack([np.ones_like(x), x]) / y[:, None], np.ones_like(y))
    line = ComputeLine(float(intercept), float(slope))
    mape = float(np.mean(np.abs(line(x) - y) / y) * 100)
    return line, mape


def fit_compute(frame: pd.DataFrame) -> pd.DataFrame:
    """One compute line per model and thread count from single-process step times.

    ``frame`` needs columns ``model``, ``threads``, ``batch_size`` and ``step_seconds`` (for example the
    ``step_timing`` records of chapter 1, ``ResultStore.frame("step_timing")``). Why a line: on these
    models a step is a fixed cost (the weight passes and the Adam update, heavy for LinearNet) plus a cost
    per sample (the convolutions of ConvNet); the measured points scatter around it by more than any
    curvature, so interpolating between them would model the noise. Returns intercept, slope, points and
    the fit's own MAPE (%), indexed by (model, threads).
    """
    missing = {"model", "threads", "batch_size", "step_seconds"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks column(s) {sorted(missing)}")
    rows = []
    for (model, threads), group in frame.groupby(["model", "threads"]):
        line, mape = fit_line(group["batch_size"], group["step_seconds"])
        rows.append(
            {
                "model": model,
                "threads": int(threads),
                "intercept_seconds": line.intercept_seconds,
                "seconds_per_sample": line.seconds_per_sample,
                "points": len(group),
                "fit_mape_percent": mape,
            }
        )
    return pd.DataFrame(rows).set_index(["model", "threads"]).sort_index()


def compute_line(fits: pd.DataFrame, model: str, threads: int) -> ComputeLine:
    """The fitted line of ``model`` at ``threads`` threads; a clear error when it was never calibrated."""
    if (model, threads) not in fits.index:
        raise ValueError(
            f"no compute calibration for {model} at {threads} thread(s); have {list(fits.index)}. "
            "Measure it with costmodel.stored_compute_calibration."
        )
    row = fits.loc[(model, threads)]
    return ComputeLine(float(row["intercept_seconds"]), float(row["seconds_per_sample"]))


@contextlib.contextmanager
def torch_threads(threads: int):
    """Run a block with ``torch.set_num_threads(threads)``, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def stored_compute_calibration(
    store: ResultStore, train_set, models, batch_sizes, threads: int, **settings
) -> list[dict]:
    """Single-process step times at ``threads`` threads through the store (``stored_step_timing`` records).

    A rank of k DDP processes on c cores gets c/k threads; this measures a single process at exactly that
    thread count, on the CPU, for every model and batch size (finished records are reused).
    ``settings`` go to ``stored_step_timing`` (``timed_steps``, ``warmup_steps``, ``seed``…).
    """
    settings.setdefault("device", "cpu")
    with torch_threads(threads):
        return [
            stored_step_timing(store, model, train_set, batch_size=batch_size, **settings)
            for model in models
            for batch_size in batch_sizes
        ]


def fit_optimizer_seconds_per_parameter(records: list[dict]) -> dict[int, float]:
    """Median seconds per parameter of the optimizer phase in single-replica DataParallel records, per
    thread count.

    Adam updates every parameter elementwise (read the gradient and two moments, write three tensors),
    so its time is close to proportional to the parameter count (chapter 2's phase breakdown: about 4 ns
    per parameter on both models on a 2-core CPU).
    """
    ratios: dict[int, list[float]] = {}
    for record in records:
        config = record["config"]
        if record["kind"] == "dataparallel_timing" and len(config["devices"]) == 1:
            seconds = record["result"]["phase_seconds"]["optimizer_step"]
            ratios.setdefault(config["threads"], []).append(
                seconds / _model_facts(config["model"])["parameters"]
            )
    if not ratios:
        raise ValueError("no single-replica dataparallel_timing records to fit the optimizer step on")
    return {threads: float(np.median(values)) for threads, values in sorted(ratios.items())}


@cache
def _model_facts(model: str) -> dict:
    """Parameters, gradient bytes and the gradient bytes of each parameter in backward order."""
    module = build_model(model)
    sizes = [p.numel() * p.element_size() for p in module.parameters() if p.requires_grad]
    return {"module": module, "parameters": parameter_count(module), "gradient_sizes": sizes[::-1]}


def ddp_bucket_bytes(model: str, bucket_cap_mb: float = 25, compression: str | None = None) -> list[float]:
    """Bytes of each gradient bucket DDP all-reduces per step, in the order backward fills them.

    DDP (after its first step rebuilds buckets in gradient-ready order, roughly the reverse of the
    parameter order) adds parameters to a bucket until it holds at least ``bucket_cap_mb`` MiB, then
    starts the next; a parameter larger than the cap closes its bucket alone. With ``compression``
    ("fp16"/"bf16") each 4-byte float travels as 2 bytes. This reproduces chapter 3's recorded bucket
    counts (LinearNet 1 and 2, ConvNet 1 and 3 buckets at 25 and 0.25 MiB).
    """
    cap = bucket_cap_mb * MIB
    buckets, current = [], 0
    for size in _model_facts(model)["gradient_sizes"]:
        current += size
        if current >= cap:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    factor = 0.5 if compression else 1.0
    return [size * factor for size in buckets]


def overlapped_all_reduce_finish(
    backward_seconds: float, bucket_bytes: list[float], all_reduce_seconds
) -> float:
    """When the last bucket's all-reduce ends, counted from the start of backward.

    Bucket j is ready when backward has produced its share of the gradient bytes (gradients assumed to
    come out at a uniform rate in bytes); its all-reduce starts when it is ready and the previous one has
    finished (one communication stream): finish_j = max(ready_j, finish_(j−1)) + all_reduce(bytes_j).
    One bucket: no overlap at all (backward + all-reduce); many small buckets: max(backward, all-reduce)
    plus the last bucket's tail.
    """
    total = sum(bucket_bytes)
    finish, produced = 0.0, 0.0
    for size in bucket_bytes:
        produced += size
        ready = backward_seconds * produced / total
        finish = max(ready, finish) + all_reduce_seconds(size)
    return max(finish, backward_seconds)


@dataclass(frozen=True, eq=False)
class TimeModel:
    """Calibrated inputs of the step-time model (see ``predict_step``).

    compute: ``fit_compute`` output (single-process lines per model and thread count);
    alpha_seconds, seconds_per_byte: α and β of the all-reduce's messages (chapter 4's fit);
    copy_seconds_per_byte: effective seconds per byte of DataParallel's transfers, the slope of chapter 2's
    ``dataparallel.fit_seconds_per_byte`` (a plain memcpy benchmark is a lower bound: the transfer phases
    also zero, allocate and add);
    optimizer_seconds_per_parameter: the optimizer step's time per parameter, one number or one per
    thread count (``fit_optimizer_seconds_per_parameter``); cores: cores of the machine;
    backward_share: backward's share of forward + backward (2/3: backward does about twice the forward's
    arithmetic; chapter 2 measured 0.70–0.74 on the CPU); ranks_share_cores: the ranks run on one
    machine's cores (a CPU study) rather than on a device each.
    """

    compute: pd.DataFrame
    alpha_seconds: float
    seconds_per_byte: float
    copy_seconds_per_byte: float
    optimizer_seconds_per_parameter: float | dict[int, float]
    cores: int
    backward_share: float = 2 / 3
    ranks_share_cores: bool = True

    def optimizer_seconds(self, parameters: int, threads: int) -> float:
        """The optimizer step of ``parameters`` at ``threads`` threads (nearest calibrated thread count)."""
        per_parameter = self.optimizer_seconds_per_parameter
        if isinstance(per_parameter, dict):
            per_parameter = per_parameter[min(per_parameter, key=lambda t: (abs(t - threads), t))]
        return parameters * per_parameter


METHODS = ("dataparallel", "ddp_no_overlap", "ddp_overlap")


def split_step(line: ComputeLine, batch: float, optimizer_seconds: float, backward_share: float) -> dict:
    """Forward, backward and optimizer seconds of one single-process step at ``batch`` samples.

    The optimizer step is taken out of the line (at most its whole intercept); forward and backward share
    the rest as (1 − backward_share) : backward_share.
    """
    optimizer = min(optimizer_seconds, line.intercept_seconds)
    passes = line(batch) - optimizer
    return {
        "forward": passes * (1 - backward_share),
        "backward": passes * backward_share,
        "optimizer": optimizer,
    }


def predict_step(
    method: str,
    model: str,
    global_batch: int,
    world_size: int,
    time_model: TimeModel,
    *,
    threads: int | None = None,
    bucket_cap_mb: float = 25,
    compression: str | None = None,
) -> dict:
    """Predicted seconds of one training step, with its compute and communication parts.

    - ``dataparallel`` (one process, ``world_size`` replicas, ``threads`` = all cores by default):
      Σ over replicas of forward+backward on its chunk, plus one optimizer step, plus the replica copies.
      With a line c(b) = a + s·b this is c(b) + (r − 1)·(a − optimizer): every extra replica repeats the
      fixed weight passes. Copies: ``dataparallel.bytes_per_step`` × ``copy_seconds_per_byte``.
    - ``ddp_no_overlap``: each rank (threads = cores // world_size, the DDP worker's default) computes a
      step on global_batch // world_size samples, then all-reduces every bucket in turn
      (``collectives.ring_all_reduce_seconds`` with α, β per bucket). When the ranks share one machine's
      cores (``ranks_share_cores``), a rank's compute is the larger of two lower bounds: its own line at
      its threads, c_t(b/k), and the whole machine doing every rank's work, c_all(b) + (k − 1)·a_all
      (each rank repeats the fixed weight passes and the optimizer step). On a CPU the second wins
      whenever memory bandwidth, not the core count, limits a step: two 1-thread ranks stream
      LinearNet's weights and Adam state at the same time through one memory system.
    - ``ddp_overlap``: forward + ``overlapped_all_reduce_finish`` (bucketed all-reduce running behind
      backward) + optimizer.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if global_batch <= 0 or world_size <= 0:
        raise ValueError("global_batch and world_size must be positive")
    facts = _model_facts(model)
    if method == "dataparallel":
        threads = threads or time_model.cores
        optimizer_seconds = time_model.optimizer_seconds(facts["parameters"], threads)
        line = compute_line(time_model.compute, model, threads)
        replicas = len(chunk_sizes(global_batch, world_size))
        fixed_passes = max(line.intercept_seconds - optimizer_seconds, 0.0)
        compute = line(global_batch) + (replicas - 1) * fixed_passes
        moved = sum(bytes_per_step(facts["module"], global_batch, world_size).values())
        communication = moved * time_model.copy_seconds_per_byte
        return {
            "method": method, "threads": threads, "per_rank_batch": global_batch / world_size,
            "compute_seconds": compute, "communication_seconds": communication,
            "step_seconds": compute + communication,
        }  # fmt: skip
    threads = threads or max(1, time_model.cores // world_size)
    line = compute_line(time_model.compute, model, threads)
    per_rank_batch = global_batch // world_size
    if per_rank_batch == 0:
        raise ValueError(f"global_batch {global_batch} gives no sample to each of {world_size} ranks")
    compute = line(per_rank_batch)
    if time_model.ranks_share_cores and world_size > 1:
        whole = compute_line(time_model.compute, model, time_model.cores)
        together = whole(per_rank_batch * world_size) + (world_size - 1) * whole.intercept_seconds
        if together > compute:  # the machine, not the rank's threads, is the limit: scale the line
            line = ComputeLine(
                line.intercept_seconds * together / compute, line.seconds_per_sample * together / compute
            )
            compute = together
    buckets = ddp_bucket_bytes(model, bucket_cap_mb, compression)

    def all_reduce(nbytes: float) -> float:
        return ring_all_reduce_seconds(
            nbytes, world_size, time_model.alpha_seconds, time_model.seconds_per_byte
        )

    communication = sum(all_reduce(size) for size in buckets)
    if method == "ddp_no_overlap":
        step = compute + communication
    else:
        optimizer_seconds = time_model.optimizer_seconds(facts["parameters"], threads)
        phases = split_step(line, per_rank_batch, optimizer_seconds, time_model.backward_share)
        finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
        step = phases["forward"] + finish + phases["optimizer"]
    return {
        "method": method, "threads": threads, "per_rank_batch": per_rank_batch, "compute_seconds": compute,
        "communication_seconds": communication, "step_seconds": step,
    }  # fmt: skip


def predict_step_seconds(method: str, model: str, global_batch: int, world_size: int, time_model, **options):
    """``predict_step(...)["step_seconds"]``."""
    return predict_step(method, model, global_batch, world_size, time_model, **options)["step_seconds"]


def measured_frame(records: list[dict], min_ranks: int = 2) -> pd.DataFrame:
    """Multi-rank step times to validate on: ``ddp_run`` (chapter 3) and ``dataparallel_timing`` (chapter 2).

    One row per record with at least ``min_ranks`` ranks or replicas. A DDP run's step time is its
    timed (last) epoch divided by the steps of one epoch (the record's ``steps`` count every epoch);
    DataParallel's is the record's median step.
    """
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        if record["kind"] == "ddp_run" and config["world_size"] >= min_ranks:
            steps_per_epoch = result["steps"] / config["epochs"]
            rows.append(
                {
                    "measurement": record["key"], "kind": "ddp", "model": config["model"],
                    "ranks": config["world_size"], "global_batch": config["global_batch_size"],
                    "threads": result["threads_per_rank"], "bucket_cap_mb": config["bucket_cap_mb"],
                    "compression": config.get("compression"),
                    "step_seconds": result["epoch_seconds"] / steps_per_epoch,
                }
            )  # fmt: skip
        elif record["kind"] == "dataparallel_timing" and len(config["devices"]) >= min_ranks:
            rows.append(
                {
                    "measurement": record["key"], "kind": "dataparallel", "model": config["model"],
                    "ranks": len(config["devices"]), "global_batch": config["batch_size"],
                    "threads": config["threads"], "bucket_cap_mb": None, "compression": None,
                    "step_seconds": result["step_seconds"],
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def predict_measured(measured: pd.DataFrame, time_model: TimeModel) -> pd.DataFrame:
    """Predictions for every row of ``measured_frame``, at the threads each measurement really had.

    DataParallel rows get the ``dataparallel`` method, DDP rows both ``ddp_no_overlap`` and ``ddp_overlap``.
    """
    rows = []
    for row in measured.itertuples():
        methods = ("dataparallel",) if row.kind == "dataparallel" else ("ddp_no_overlap", "ddp_overlap")
        options = {"threads": int(row.threads)}
        if row.kind == "ddp":
            compression = row.compression if isinstance(row.compression, str) else None  # None, not NaN
            options.update(bucket_cap_mb=row.bucket_cap_mb, compression=compression)
        for method in methods:
            parts = predict_step(
                method, row.model, int(row.global_batch), int(row.ranks), time_model, **options
            )
            rows.append(
                {
                    "measurement": row.measurement,
                    "method": method,
                    "predicted_seconds": parts["step_seconds"],
                    "predicted_compute_seconds": parts["compute_seconds"],
                    "predicted_communication_seconds": parts["communication_seconds"],
                }
            )
    return pd.DataFrame(rows)


def validate(predictions: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Absolute percentage error of each prediction and the MAPE of its (model, method) group.

    ``predictions``: columns ``measurement``, ``method``, ``predicted_seconds``; ``measured``: columns
    ``measurement``, ``model``, ``step_seconds``. APE = |predicted − measured| / measured × 100;
    ``mape_percent`` is the mean APE over the rows of the same model and method.
    """
    joined = predictions.merge(measured, on="measurement", how="inner", validate="many_to_one")
    if len(joined) != len(predictions):
        raise ValueError("some predictions name a measurement that is not in the measured frame")
    joined["ape_percent"] = (
        (joined["predicted_seconds"] - joined["step_seconds"]).abs() / joined["step_seconds"] * 100
    )
    joined["mape_percent"] = joined.groupby(["model", "method"])["ape_percent"].transform("mean")
    return joined


def validation_summary(validated: pd.DataFrame) -> pd.DataFrame:
    """Per model and method: the number of measurements, the MAPE and the largest APE (%)."""
    return (
        validated.groupby(["model", "method"])["ape_percent"]
        .agg(points="count", mape_percent="mean", max_ape_percent="max")
        .reset_index()
    )


def copy_seconds_per_byte(megabytes: float = 48, repeats: int = 9, device: str = "cpu") -> dict:
    """Seconds per byte of one single-process copy into a fresh buffer on ``device``, as DataParallel's
    transfers do (``torch.empty_like(x).copy_(x)``: allocation and copy), median of ``repeats`` after one
    warm-up."""
    source = torch.rand(int(megabytes * MIB) // 4, device=device)
    seconds = []
    for _ in range(repeats + 1):
        if source.is_cuda:
            torch.cuda.synchronize(source.device)
        started = time.perf_counter()
        torch.empty_like(source).copy_(source)
        if source.is_cuda:
            torch.cuda.synchronize(source.device)
        seconds.append(time.perf_counter() - started)
    nbytes = source.numel() * 4
    median = float(np.median(seconds[1:]))
    method = f"median of {repeats} copies of {nbytes:,} B into a fresh buffer on {device}, after 1 warm-up"
    return {"bytes": nbytes, "seconds": median, "seconds_per_byte": median / nbytes, "method": method}


def stored_copy_calibration(store: ResultStore, megabytes: float = 48, repeats: int = 9, device: str = "cpu"):
    """``copy_seconds_per_byte`` through the results store."""
    config = {"kind": "copy_calibration", "megabytes": megabytes, "repeats": repeats, "device": device,
              "threads": torch.get_num_threads()}  # fmt: skip
    return store.measure(config, lambda: copy_seconds_per_byte(megabytes, repeats, device))


def all_reduce_alpha_beta(store: ResultStore, backend: str = "gloo", device: str = "cpu") -> dict:
    """α and β of ``dist.all_reduce`` from chapter 4's benchmark records in ``store`` (all sizes, all
    world sizes of two or more ranks); a clear error when chapter 4 has not measured this backend."""
    frames = [
        benchmark_frame(record["result"]).assign(
            backend=record["config"]["backend"], device=record["config"]["device"]
        )
        for record in store.records("collective_benchmark")
    ]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not rows.empty:
        rows = rows.query("operation == 'all_reduce' and status == 'ok' and world_size > 1")
        rows = rows.query("backend == @backend and device == @device")
    if len(rows) < 2:
        raise ValueError(
            f"no all_reduce benchmark of {backend} on {device} with two or more ranks in {store.folder}; "
            "run chapter 4 (helpers.collectives.stored_benchmark) first"
        )
    return fit_alpha_beta(rows.drop(columns=["operation"]))


def calibrate(
    store: ResultStore,
    train_set,
    models,
    batch_sizes,
    world_sizes,
    backend: str = "gloo",
    device: str = "cpu",
    timed_steps: int = 3,
    cores: int | None = None,
) -> tuple[TimeModel, pd.DataFrame]:
    """The time model's inputs from single-device and collective measurements only, and a table of them.

    Compute lines at every thread count a rank gets (cores // k for each k), measured single-process
    through the store; α and β from chapter 4's ``dist.all_reduce`` benchmark; the optimizer's time per
    parameter from chapter 2's single-replica phase times; DataParallel's copies from a single-process
    copy benchmark. Nothing measured with several ranks or replicas enters. With ``device`` "cuda" the
    single-device measurements run on the first GPU (ranks sharing one GPU share it as CPU ranks share
    cores, which the model's shared bound covers).
    """
    cores = cores or usable_cores()
    target = "cuda:0" if device == "cuda" else "cpu"  # where single-device calibrations run
    thread_counts = sorted({max(1, cores // k) for k in world_sizes} | {cores})
    for threads in thread_counts:
        stored_compute_calibration(
            store, train_set, models, batch_sizes, threads, timed_steps=timed_steps, device=target
        )
    timings = pd.DataFrame(
        [
            {**record["config"], **record["result"]}
            for record in store.records("step_timing")
            if record["config"].get("autocast") is None and record["config"]["device"] == target
            and record["config"]["timed_steps"] == timed_steps and record["config"]["model"] in models
        ]
    )  # fmt: skip
    compute = fit_compute(timings)
    try:
        link = all_reduce_alpha_beta(store, backend, device)
    except ValueError:  # chapter 4 did not run into this store: measure the all-reduce alone
        stored_benchmark(store, 2, backend=backend, device=device, operations=["all_reduce"], chunks=[1])
        link = all_reduce_alpha_beta(store, backend, device)
    copy = stored_copy_calibration(store, device=target)["result"]
    for name in models:  # one replica: chapter 2's phase times, single-device (reused when chapter 2 ran)
        stored_dataparallel_timing(
            store, name, train_set, devices=[target], batch_size=max(batch_sizes), timed_steps=timed_steps,
            seed=0,
        )  # fmt: skip
    optimizer = fit_optimizer_seconds_per_parameter(store.records("dataparallel_timing"))
    model = TimeModel(
        compute=compute,
        alpha_seconds=link["alpha_seconds"],
        seconds_per_byte=link["seconds_per_byte"],
        copy_seconds_per_byte=copy["seconds_per_byte"],
        optimizer_seconds_per_parameter=optimizer,
        cores=cores,
    )
    inputs = pd.DataFrame(
        [
            {"input": "all-reduce α (µs per message)", "value": link["alpha_seconds"] * 1e6,
             "from": f"chapter 4: dist.all_reduce benchmark, {backend} on {device}"},
            {"input": "all-reduce bandwidth 1/β (GB/s)", "value": 1e-9 / link["seconds_per_byte"],
             "from": f"chapter 4: dist.all_reduce benchmark, {backend} on {device}"},
            {"input": "copy bandwidth (GB/s)", "value": 1e-9 / copy["seconds_per_byte"],
             "from": "single-process copy benchmark: " + copy["method"]},
            *[{"input": f"optimizer ns per parameter, {threads} thread(s)", "value": value * 1e9,
               "from": "chapter 2: optimizer phase of one replica"} for threads, value in optimizer.items()],
            *[{"input": f"{name}, {threads} thread(s): step seconds", "value": row.intercept_seconds,
               "from": f"+ {row.seconds_per_sample * 1e3:.3f} ms per sample; single-process steps, fit MAPE "
                       f"{row.fit_mape_percent:.1f} %"} for (name, threads), row in compute.iterrows()],
        ]
    )  # fmt: skip
    return model, inputs


# ---------------------------------------------------------------------------------------------------------
# 4. Recommendation for GPUs (predictions)
# ---------------------------------------------------------------------------------------------------------

# Link bandwidths: vendor figures, theoretical peak, per direction (a ring step sends and receives at once).
# Collected 2026-11-22. Real all-reduce bandwidth is lower (NCCL's bus bandwidth typically reaches
# 70–90% of NVLink's peak); PCIe without peer-to-peer goes through host memory and gets less again.
LINKS = {
    "PCIe 4.0 x16": {
        # 16 GT/s per lane × 16 lanes × 128/130 (encoding) / 8 bits
        "bytes_per_second": 16e9 * 16 * 128 / 130 / 8,
        "source": "PCI-SIG, PCI Express Base Specification 4.0 (2017): 16 GT/s per lane, 128b/130b",
    },
    "PCIe 5.0 x16": {
        "bytes_per_second": 32e9 * 16 * 128 / 130 / 8,
        "source": "PCI-SIG, PCI Express Base Specification 5.0 (2019): 32 GT/s per lane, 128b/130b",
    },
    "NVLink 4 (H100 SXM)": {
        "bytes_per_second": 900e9 / 2,
        "source": "NVIDIA H100 Tensor Core GPU datasheet: NVLink 900 GB/s total (both directions)",
    },
}
LINKS_COLLECTED = "2026-11-22"
# Per-message latency of a GPU collective step: an assumption (NCCL's few-microsecond order), not a vendor
# figure; it matters only for small buckets.
GPU_ALPHA_SECONDS = 5e-6


def recommend(
    model: str,
    global_batch: int,
    gpu_counts=range(1, 9),
    links: dict | None = None,
    *,
    gpu_compute: ComputeLine,
    bucket_cap_mb: float = 25,
    alpha_seconds: float = GPU_ALPHA_SECONDS,
    optimizer_seconds: float = 0.0,
    backward_share: float = 2 / 3,
    samples: int = 2700,
    epochs: int = 20,
    hourly_price_per_gpu=None,
    worthwhile_speedup: float = 1.5,
) -> pd.DataFrame:
    """Predicted DDP step and epoch time, speed-up and dollars for 1–8 GPUs over each link. PREDICTIONS.

    ``gpu_compute`` is the single-GPU step time as a function of the per-GPU batch (a ``ComputeLine``,
    from ``fit_compute`` on GPU step timings where they exist); ``optimizer_seconds`` its Adam share.
    Each GPU computes global_batch // k samples; the gradient buckets are all-reduced over a ring with
    β = 1 / the link's per-direction bandwidth, overlapped with backward (as ``ddp_overlap``). Dollars per
    run = k × hourly price × run hours (when a price is given). ``verdict`` per link: "add GPUs" when the
    best speed-up reaches ``worthwhile_speedup``, else "stay on one".
    """
    links = links or LINKS
    rows = []
    for link, spec in links.items():
        seconds_per_byte = 1 / spec["bytes_per_second"]
        for gpus in gpu_counts:
            per_gpu = global_batch // gpus
            if per_gpu == 0:
                continue
            buckets = ddp_bucket_bytes(model, bucket_cap_mb)
            phases = split_step(gpu_compute, per_gpu, optimizer_seconds, backward_share)

            def all_reduce(nbytes: float, k=gpus, beta=seconds_per_byte) -> float:
                return ring_all_reduce_seconds(nbytes, k, alpha_seconds, beta)

            finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
            step = phases["forward"] + finish + phases["optimizer"]
            steps_per_epoch = math.ceil(samples / (per_gpu * gpus))
            run_seconds = step * steps_per_epoch * epochs
            rows.append(
                {
                    "basis": "prediction", "model": model, "link": link, "gpus": gpus,
                    "per_gpu_batch": per_gpu, "compute_seconds": gpu_compute(per_gpu),
                    "all_reduce_seconds": sum(all_reduce(size) for size in buckets), "step_seconds": step,
                    "epoch_seconds": step * steps_per_epoch, "run_hours": run_seconds / SECONDS_PER_HOUR,
                    "dollars_per_run": (
                        gpus * float(exact(hourly_price_per_gpu)) * run_seconds / SECONDS_PER_HOUR
                        if hourly_price_per_gpu is not None else float("nan")
                    ),
                }
            )  # fmt: skip
    frame = pd.DataFrame(rows)
    if 1 not in set(frame["gpus"]):
        raise ValueError("gpu_counts must include 1: speed-ups are relative to one GPU")
    single = frame[frame["gpus"] == 1].set_index("link")["epoch_seconds"]
    frame["speedup"] = frame["link"].map(single) / frame["epoch_seconds"]
    best = frame.groupby("link")["speedup"].transform("max")
    frame["verdict"] = np.where(best >= worthwhile_speedup, "add GPUs", "stay on one")
    frame.attrs["note"] = (
        f"Predictions from vendor peak link bandwidths (collected {LINKS_COLLECTED}), not measurements."
    )
    return frame
