"""``python -m helpers.costmodel.validate``: the GPU step model checked model by model (issue 35).

For every GPU machine whose profiles the results folder holds, ``costmodel.stepmodel``'s uncertain inputs
are calibrated on all but one of the four profiled models and the held-out model's step predicted at every
batch: leave one model out, so every out-of-sample prediction comes from models other than the one it
predicts. The table sets each measured step (median over runs) beside its in-sample prediction (calibrated
on all four) and its out-of-sample one with its band, as ratios predicted / measured; the summary gives,
per model, what the issue's goals ask (batches of 32 and more: ratios within 0.8-1.25, the median absolute
error, bands that hold the measured step, and how wide they are). It runs from the committed records in
seconds.

``--measure`` first profiles one training step of each of the four models (the book's LinearNet and ConvNet,
chapter 7's MelCNN and WaveTransformer) at every batch of ``--batches``, three seeds each, on this machine's
first device, into the results store: each phase on the host's and the device's clocks, and every operator's
host and device time. Everything finished is stored, so a rerun on the same machine and code measures only
what is missing, and a time limit loses nothing.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys

import pandas as pd
import torch

from helpers import stats
from helpers.advise import counting, measure
from helpers.advise.examples import EXAMPLES
from helpers.costmodel import gpus, recommend
from helpers.costmodel.specs import GPUS, gpu_key
from helpers.costmodel.stepmodel import StepInputs, conv_seconds, layer_ops, predict_step
from helpers.data import CLIP_SAMPLES
from helpers.hardware import describe
from helpers.paths import results_dir
from helpers.results import ResultStore

BOOK_MODELS = ("LinearNet", "ConvNet")
BATCHES = (8, 16, 32, 64, 128, 256, 512)
PROFILE_KIND = "advise_step_profile"


def counted_models(names=(*BOOK_MODELS, *EXAMPLES)) -> dict[str, counting.Counted]:
    """``{spec: Counted}`` of the book's models as chapter 5 counts them and of chapter 7's examples."""
    found = {}
    for name in names:
        if name in BOOK_MODELS:
            found[name] = counting.count_book_model(name)
        else:
            spec = EXAMPLES[name]
            found[spec] = counting.count(counting.load_model(spec), (1, CLIP_SAMPLES), label=name)
    return found


def run_step(record: dict) -> float:
    """A profiled run's step: the median of its unprofiled steps (the lower of two middle ones)."""
    steps = sorted(record["result"]["step_seconds_all"])
    return steps[(len(steps) - 1) // 2]


def datasheet_gpu(hardware: dict) -> str | None:
    """The key in ``specs.GPUS``'s naming of a machine's first GPU (``specs.gpu_key``); None without one."""
    listed = hardware.get("gpus")
    return gpu_key(listed[0]["name"]) if listed else None


def profile_frame(records: list[dict]) -> pd.DataFrame:
    """One row per profiled run: machine, model (its counted name), batch, seed, the unprofiled step's
    median (device clock on a GPU, host otherwise), the host's issue time of the layers (forward and
    backward phases) and of the optimizer's step, the profiled kernels' time, and the part of it in
    convolutions (cuDNN's forward and backward operators), in seconds."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        host = {phase["phase"]: phase["host_seconds"] for phase in result["phases"]}
        rows.append({
            "machine": record["provenance_id"],
            "model": config["model"],
            "batch": config["batch_size"],
            "seed": config["seed"],
            "step_seconds": run_step(record),
            "layers_host_seconds": host["forward"] + host["backward"],
            "optimizer_host_seconds": host["optimizer"],
            "kernel_seconds": result["device_seconds"] or 0.0,
            "conv_kernel_seconds": sum(
                op.get("device_self_seconds") or 0.0
                for op in result.get("operators", [])
                if op["operator"] in CONV_OPERATORS
            ),
        })  # fmt: skip
    return pd.DataFrame(rows)


def host_seconds_per_op(runs: pd.DataFrame) -> pd.Series:
    """Per ``profile_frame`` row, the host's issue time of the whole step (layers, loss and optimizer) over
    the roofline's ops per step (``gpus.ops_per_step``): the roofline's one host time per op, measured.
    ``specs.OP_OVERHEAD`` is its lowest, median and highest over the H200 machine's profiles."""
    host = runs["layers_host_seconds"] + runs["optimizer_host_seconds"]
    return host / runs["model"].map(gpus.ops_per_step)


def observed_steps(runs: pd.DataFrame) -> pd.DataFrame:
    """``profile_frame`` per machine, model and batch: the medians over runs, and the fastest and slowest
    run's step (``step_low``, ``step_high``)."""
    grouped = runs.groupby(["machine", "model", "batch"])
    frame = grouped.median(numeric_only=True).drop(columns="seed")
    frame["step_low"] = grouped["step_seconds"].min()
    frame["step_high"] = grouped["step_seconds"].max()
    frame["runs"] = grouped.size()
    return frame.reset_index()


# The device curve is fitted on a grid: coarse on purpose, since three models cannot pin it finer
PEAK_FRACTIONS = (0.3, 0.5, 0.7, 0.9)
# The convolutions' curve is fitted on their own operators' time alone, which is cheap to evaluate, so its
# grid is fine: a coarse one put the fit at a corner (a flat curve below every rate measured)
CONV_PEAK_FRACTIONS = tuple(round(0.05 + 0.01 * step, 2) for step in range(86))  # 0.05 to 0.90
CONV_OPERATORS = ("aten::cudnn_convolution", "aten::convolution_backward")
HALF_FLOPS = (1e5, 1e6, 1e7, 3e7, 1e8, 3e8, 1e9)
CONV_HALF_FLOPS = (1e3, 1e4, *HALF_FLOPS)
MEMORY_FRACTIONS = (0.3, 0.5, 0.7, 0.9)
KERNEL_FLOORS = (2e-6, 3e-6, 4e-6, 6e-6)


def log_error(predicted: float, measured: float) -> float:
    """|ln(predicted / measured)|: the same for twice as slow as for twice as fast."""
    return abs(math.log(predicted / measured))


def fit_conv(observed: pd.DataFrame, gpu) -> tuple[float, float] | None:
    """(conv_peak_fraction, conv_half_flops) whose predicted convolution time has the least median
    ``log_error`` against the profiled convolution operators' time, over the rows of models with
    convolutions; None when no model in ``observed`` has any (convolutions then share the products')."""
    rows = [row for row in observed.itertuples() if row.conv_kernel_seconds > 0]
    if not rows:
        return None

    def error(point) -> float:
        inputs = StepInputs(0.0, 0.0, 1.0, 1.0, 1.0, 0.0, *point)
        return statistics.median(
            log_error(conv_seconds(row.model, int(row.batch), gpu, inputs), row.conv_kernel_seconds)
            for row in rows
        )

    return min(itertools.product(CONV_PEAK_FRACTIONS, CONV_HALF_FLOPS), key=error)


def fit_device(observed: pd.DataFrame, gpu, conv: tuple[float, float] | None = None) -> tuple:
    """(peak_fraction, half_flops, memory, kernel_seconds, conv_peak_fraction, conv_half_flops) whose
    predicted kernel time has the least median ``log_error`` against the profiled kernels' time over every
    row of ``observed``: the convolutions' curve first, from their own operators (``fit_conv``; ``conv``
    where ``observed`` has none), the rest with it fixed."""
    conv = fit_conv(observed, gpu) or conv or (None, None)
    rows = [(row.model, int(row.batch), row.kernel_seconds) for row in observed.itertuples()]  # read once

    def error(point) -> float:
        inputs = StepInputs(0.0, 0.0, *point, *conv)
        return statistics.median(
            log_error(predict_step(model, batch, gpu, inputs)["device_seconds"], kernel_seconds)
            for model, batch, kernel_seconds in rows
        )

    grid = itertools.product(PEAK_FRACTIONS, HALF_FLOPS, MEMORY_FRACTIONS, KERNEL_FLOORS)
    return (*min(grid, key=error), *conv)


def calibrate(observed: pd.DataFrame, gpu) -> dict:
    """The step model's inputs from the models in ``observed``: the host per layer op and per optimizer
    step, their medians over the rows (``central``) and their lowest and highest (``host_corners``), and
    the device curves fitted on all of them together (``central``) and on each model alone (``device_fits``,
    how far the models disagree; a model without convolutions keeps the joint convolution curve). What a
    band of the prediction spans."""
    per_op = observed["layers_host_seconds"] / observed["model"].map(layer_ops)
    optimizer = observed["optimizer_host_seconds"]
    device = fit_device(observed, gpu)  # the convolutions' curve fitted once, on every model
    conv = device[4:] if device[4] is not None else None
    alone = {fit_device(rows, gpu, conv) for _, rows in observed.groupby("model")}
    corners = [(op, opt) for op in (per_op.min(), per_op.max()) for opt in (optimizer.min(), optimizer.max())]
    return {
        "central": StepInputs(float(per_op.median()), float(optimizer.median()), *device),
        "host_corners": corners,
        "device_fits": sorted(alone | {device}, key=str),
    }


def predicted(model: str, batch: int, gpu, calibration: dict) -> dict[str, float]:
    """The central step of ``calibration`` and its band: the least and most over its host corners and
    device fits."""
    central = predict_step(model, batch, gpu, calibration["central"])["step_seconds"]
    band = [
        predict_step(model, batch, gpu, StepInputs(op, opt, *device))["step_seconds"]
        for op, opt in calibration["host_corners"]
        for device in calibration["device_fits"]
    ]
    return {"predicted": central, "low": min(band), "high": max(band)}


def leave_one_out(observed: pd.DataFrame, gpu, everything: dict | None = None) -> pd.DataFrame:
    """Every measured step of one machine (``observed_steps`` rows) with chapter 5's roofline at its central
    values (what this model replaces), its in-sample prediction (calibrated on every model: ``everything``,
    when already calibrated) and its out-of-sample one (calibrated on the other models), each as a ratio
    predicted / measured, with the out-of-sample band, its width (high / low) and whether it holds the
    measured step."""
    everything = everything or calibrate(observed, gpu)
    rows = []
    for model, held in observed.groupby("model", sort=False):
        others = calibrate(observed[observed["model"] != model], gpu)
        for row in held.itertuples():
            inside = predict_step(model, int(row.batch), gpu, everything["central"])["step_seconds"]
            outside = predicted(model, int(row.batch), gpu, others)
            rows.append({
                "model": model.split(" [")[0],
                "batch": int(row.batch),
                "measured_seconds": row.step_seconds,
                "roofline_ratio": gpus.roofline_step(model, int(row.batch), gpu)["step_seconds"]
                / row.step_seconds,
                "in_sample_ratio": inside / row.step_seconds,
                "out_of_sample_seconds": outside["predicted"],
                "out_of_sample_ratio": outside["predicted"] / row.step_seconds,
                "band_low": outside["low"],
                "band_high": outside["high"],
                "band_width": outside["high"] / outside["low"],
                "inside_band": outside["low"] <= row.step_seconds <= outside["high"],
            })  # fmt: skip
    return pd.DataFrame(rows)


GOAL_BATCH = 32  # the goals are set for batches of 32 and more
GOAL_RATIOS = (0.8, 1.25)


def goal_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and over all (``leave_one_out`` rows at batches of ``GOAL_BATCH`` and more): the share of
    out-of-sample ratios within ``GOAL_RATIOS``, the median absolute error (|ratio - 1|, the issue's goal),
    the share of bands holding the measured step and the median band width; in-sample's and the roofline's
    (chapter 5's central values) beside them; and each one's median fold error, exp(median |ln ratio|),
    which weighs four times too fast as four times too slow (a percentage cannot pass 100 % below)."""
    shown = table[table["batch"] >= GOAL_BATCH]

    def fold(ratios: pd.Series) -> float:
        return float(math.exp(ratios.map(lambda ratio: log_error(ratio, 1.0)).median()))

    def summary(rows: pd.DataFrame) -> dict:
        ratio = rows["out_of_sample_ratio"]
        return {
            "fold, roofline": fold(rows["roofline_ratio"]),
            "fold, in sample": fold(rows["in_sample_ratio"]),
            "fold, out of sample": fold(ratio),
            "points": len(rows),
            "within 0.8-1.25": float(ratio.between(*GOAL_RATIOS).mean()),
            "median error, out of sample": float((ratio - 1).abs().median()),
            "median error, in sample": float((rows["in_sample_ratio"] - 1).abs().median()),
            "median error, roofline": float((rows["roofline_ratio"] - 1).abs().median()),
            "inside band": float(rows["inside_band"].mean()),
            "median band width": float(rows["band_width"].median()),
        }

    found = {model: summary(rows) for model, rows in shown.groupby("model", sort=False)}
    found["all"] = summary(shown)
    return pd.DataFrame(found).T


def table_view(table: pd.DataFrame) -> pd.DataFrame:
    """``leave_one_out`` as a reader reads it: milliseconds and ratios, rounded, human columns."""
    return pd.DataFrame({
        "model": table["model"], "batch": table["batch"],
        "measured (ms)": (table["measured_seconds"] * 1e3).round(2),
        "roofline, predicted / measured": table["roofline_ratio"].round(2),
        "in sample, predicted / measured": table["in_sample_ratio"].round(2),
        "out of sample (ms)": (table["out_of_sample_seconds"] * 1e3).round(2),
        "out of sample, predicted / measured": table["out_of_sample_ratio"].round(2),
        "band (ms)": [f"{lo * 1e3:.2f}–{hi * 1e3:.2f}"
                      for lo, hi in zip(table["band_low"], table["band_high"], strict=True)],
        "band width": table["band_width"].round(2).map("{:.2f}×".format),
        "measured inside": table["inside_band"].map({True: "yes", False: "no"}),
    }).set_index(["model", "batch"])  # fmt: skip


def machine_validation(store: ResultStore, observed: pd.DataFrame) -> dict | None:
    """``leave_one_out`` of the ``observed_steps`` rows of the machine whose records ``store`` reads, with
    its ``goal_summary``, its GPU (``gpu``), its hardware as a title line (``hardware``), the host time
    per layer op its models show (``op_seconds``: lowest and highest over its rows), the share of the FP32
    peak the convolutions' curve levels off at (``conv_peak_fraction``; None where no model has any) and the
    models with convolutions (``convolving``); None where the
    roofline knows no GPU of the machine or fewer than three models were profiled (two calibrate nothing
    out of sample)."""
    gpu = GPUS.get(datasheet_gpu(store.hardware) or "")
    if gpu is None or observed["model"].nunique() < 3:
        return None
    everything = calibrate(observed, gpu)
    table = leave_one_out(observed, gpu, everything)
    per_op = observed["layers_host_seconds"] / observed["model"].map(layer_ops)
    conv_fraction = everything["central"].conv_peak_fraction
    convolving = observed[observed["conv_kernel_seconds"] > 0]["model"].str.split(" [", regex=False).str[0]
    return {"machine": store.provenance_id, "gpu": gpu, "hardware": describe(store.hardware),
            "table": table, "summary": goal_summary(table),
            "op_seconds": (float(per_op.min()), float(per_op.max())),
            "conv_peak_fraction": conv_fraction, "convolving": sorted(set(convolving))}  # fmt: skip


def profiled_machines(run: str = "gpu") -> dict[str, tuple[ResultStore, list[dict]]]:
    """``{machine: (its store, its current profiles of the four models)}`` for every machine of the
    results folder ``run`` that has any (each machine's own store: its identity, not this one's)."""
    names = {c.name for c in counted_models().values()}  # registers the examples' costs
    found = {}
    for path in sorted((results_dir() / run / "provenance").glob("*.json")):
        store = ResultStore(run, records_of=path.stem)
        records = [r for r in store.records(PROFILE_KIND) if r["config"]["model"] in names]
        if records:
            found[path.stem] = (store, records)
    return found


def stored_validations(run: str = "gpu") -> list[dict]:
    """``machine_validation`` of every machine of ``profiled_machines`` it can check (none: [])."""
    checked = (machine_validation(store, observed_steps(profile_frame(records)))
               for store, records in profiled_machines(run).values())  # fmt: skip
    return [validation for validation in checked if validation is not None]


def summary_view(summary: pd.DataFrame) -> pd.DataFrame:
    """``goal_summary`` as the chapter shows it, short columns (the prose says what they are): median fold
    errors, shares and the median band width over the points at batches of ``GOAL_BATCH`` and more."""

    def times(value: float) -> str:
        return f"{value:.2f}×"

    return pd.DataFrame({
        "points": summary["points"].astype(int),
        "roofline, off by": summary["fold, roofline"].map(times),
        "in sample, off by": summary["fold, in sample"].map(times),
        "out of sample, off by": summary["fold, out of sample"].map(times),
        "share within 0.8–1.25×": summary["within 0.8-1.25"].map(stats.whole_percent),
        "share its band holds": summary["inside band"].map(stats.whole_percent),
        "band width": summary["median band width"].map("{:.1f}×".format),
    }).rename_axis("model held out")  # fmt: skip


NO_PROFILES = {
    "step_model_check": "No GPU profiles of the four models are stored yet: run "
    "python -m helpers.costmodel.validate --measure on a GPU machine to add them."
}


NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def costs_digest(name: str) -> str:
    """The digest of a counted model's costs in its name ("WaveTransformer [f7b43c15]"), or the name of
    one of the book's models (counted by hand, no digest)."""
    return name.split(" [")[-1].rstrip("]")


def stored_gpu_computes(counted: counting.Counted, run: str = "gpu") -> dict:
    """Measured lines (``recommend.measured_computes``) through this model's profiled single-GPU steps on
    every GPU the roofline knows whose profiles ``run`` holds: the study's own measurements of a model it
    profiled (chapter 7's, the book's) replace the roofline for that GPU in ``advise``, as ``--measure``
    does on the machine it runs on. Matched by the digest of its counted costs (whatever it is called),
    dtype and optimizer; {} where none is stored."""
    rows = []
    for store, records in profiled_machines(run).values():
        key = datasheet_gpu(store.hardware)
        if key not in GPUS:
            continue
        for record in records:
            config = record["config"]
            if (costs_digest(config["model"]), config["dtype"], config["optimizer"]) != (
                costs_digest(counted.name), counted.dtype, counted.optimizer,
            ):  # fmt: skip
                continue
            rows.append({"model": counted.name, "gpu": key, "batch": config["batch_size"],
                         "step": run_step(record)})  # fmt: skip
    if not rows:
        return {}
    grouped = pd.DataFrame(rows).groupby(["model", "gpu", "batch"])["step"]
    frame = grouped.agg(step_seconds="median", step_min="min", step_max="max").reset_index()
    return recommend.measured_computes(frame)


def validation_sentences(validation: dict) -> dict[str, str]:
    """What a ``machine_validation`` says, for chapter 5's prose, ratios first (a percentage of a step
    predicted four times too fast saturates near -100 %): ``step_model_check``. A model missed out of
    sample and by more than 1.5 times in sample too is one the model's form cannot fit; the prose says
    which, from the errors, and no cause beyond them."""
    summary, table = validation["summary"], validation["table"]
    shown = table[table["batch"] >= GOAL_BATCH]
    every = summary.loc["all"]
    models = len(summary) - 1  # its last row is "all"
    others = "model" if models == 2 else f"{NUMBER_WORDS.get(models - 1, models - 1)} models"
    every_model = "both" if models == 2 else f"all {NUMBER_WORDS.get(models, models)}"
    within = int(shown["out_of_sample_ratio"].between(*GOAL_RATIOS).sum())
    inside = int(shown["inside_band"].sum())
    error = summary["median error, out of sample"]
    good = [f"`{m}`" for m in error.index[:-1] if error[m] <= 0.15]
    missed = [f"`{m}`" for m in error.index[:-1] if error[m] > 0.15]
    goal = (
        f"within 15 % for {stats.listed(good)}"
        + (f" and above it for {stats.listed(missed)}" if missed else "")
        if good
        else "above 15 % for every model"
    )
    text = (
        f"On the H200, at the batches of {GOAL_BATCH} and more that the study measured, the roofline's "
        f"central step is a median {shown['roofline_ratio'].median():.2f}× the measured one, off by a median "
        f"factor of {every['fold, roofline']:.1f} (in sample for its host time per op, which comes from "
        f"these very profiles). The step model, calibrated on the other {others}, predicts a median "
        f"{shown['out_of_sample_ratio'].median():.2f}× the measured step, off by a median factor of "
        f"{every['fold, out of sample']:.2f} (the larger over the smaller), a median error of "
        f"{stats.whole_percent(every['median error, out of sample'])} (|predicted − measured| ÷ measured); "
        f"calibrated on {every_model} instead, it is off by {every['fold, in sample']:.2f}. {within} of "
        f"{len(shown)} points fall within 0.8–1.25×. Its "
        f"median error is {goal}."
        f"{stats.PARAGRAPH_BREAK}The step model's band, the spread of its predictions over the calibration "
        "models' host times and device fits (a range, not a confidence interval), holds the measured step at "
        f"{inside} of the {len(shown)} points, at a median width (highest ÷ lowest) of "
        f"{every['median band width']:.1f}×."
    )
    unfit = [m for m in error.index[:-1] if summary.loc[m, "fold, in sample"] > 1.5]
    for model in unfit:
        text += (
            f" `{model}` is off by a factor of {summary.loc[model, 'fold, in sample']:.2f} even calibrated "
            f"on {every_model}: one efficiency curve per kind of product and one host time per op cannot fit "
            "it and the others at once."
        )
    fraction, convolving = validation["conv_peak_fraction"], validation["convolving"]
    if fraction is not None:
        fitted_on = stats.listed(f"`{m}`" for m in convolving)
        text += (
            f"{stats.PARAGRAPH_BREAK}Convolutions get an efficiency curve of their own (the share of the "
            "FP32 peak a kernel reaches, rising with its FLOPs and levelling off), fitted on the time of the "
            f"profiled convolution operators of {fitted_on}: it levels off at "
            f"{fraction * validation['gpu'].fp32_flops / 1e12:.1f} TFLOP/s ({stats.whole_percent(fraction)} "
            "of the peak) for these models' float32 convolutions as cuDNN ran them."
        )
        if len(convolving) == 2:
            text += (
                " With two such models, each one held out takes its convolution curve from the other alone, "
                "which gives no range"
            )
            for model in convolving:
                points = int(summary.loc[model, "points"])
                held = round(summary.loc[model, "inside band"] * points)
                if held < points / 2:
                    count = "none" if held == 0 else str(held)
                    text += f"; `{model}`'s band holds the measured step at {count} of its {points} points"
            text += "."
    return {"step_model_check": text}


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.costmodel.validate", description=__doc__)
    parser.add_argument("--measure", action="store_true", help="profile the four models here first")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="batches to profile")
    parser.add_argument("--repeats", type=int, default=3, help="independent runs (seeds) per batch")
    parser.add_argument("--results-run", help="folder of data/results (default: gpu)")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds the profiling may take")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    try:
        batches = counting.parse_shape(args.batches, "--batches", "16,32,64")
    except counting.AdviseError as error:
        print(f"validate: error: {error}", file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    run = args.results_run or "gpu"
    if args.measure:
        measure.profile_sweep(ResultStore(run), counted_models(), batches, device=device,
                              repeats=args.repeats, time_limit_seconds=args.time_limit)  # fmt: skip
    machines = profiled_machines(run)
    if not machines:
        print(f"validate: error: data/results/{run} holds no {PROFILE_KIND} records of the current code "
              "and models: run with --measure on a GPU machine", file=sys.stderr)  # fmt: skip
        return 2
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        for machine, (store, records) in machines.items():
            validation = machine_validation(store, observed_steps(profile_frame(records)))
            if validation is None:
                print(f"machine {machine}: no GPU the roofline knows, or fewer than three models: skipped")
                continue
            print(f"machine {machine} ({validation['gpu'].name}): leave one model out, step per batch\n")
            print(table_view(validation["table"]).to_string())
            print(f"\ngoals (batches of {GOAL_BATCH} and more):\n")
            print(validation["summary"].round(2).to_string())
        from helpers.costmodel import sharing  # it builds on this module: imported where it is used

        for store, check in sharing.stored_checks(run):
            print(f"\nmachine {store.provenance_id}: Gloo ranks sharing its one GPU, two rules\n")
            print(sharing.check_view(check).to_string())
            print("\n" + sharing.check_sentence(check))
    return 0


if __name__ == "__main__":
    sys.exit(main())
