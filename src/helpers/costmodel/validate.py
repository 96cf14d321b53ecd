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

from helpers.advise import counting, measure
from helpers.advise.examples import EXAMPLES
from helpers.costmodel import gpus
from helpers.costmodel.specs import GPUS, gpu_key
from helpers.costmodel.stepmodel import StepInputs, layer_ops, predict_step
from helpers.data import CLIP_SAMPLES
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


def profile_frame(records: list[dict]) -> pd.DataFrame:
    """One row per profiled run: machine, model (its counted name), batch, seed, the unprofiled step's
    median (device clock on a GPU, host otherwise), the host's issue time of the layers (forward and
    backward phases) and of the optimizer's step, and the profiled kernels' time, in seconds."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        steps = sorted(result["step_seconds_all"])
        host = {phase["phase"]: phase["host_seconds"] for phase in result["phases"]}
        rows.append({
            "machine": record["provenance_id"],
            "model": config["model"],
            "batch": config["batch_size"],
            "seed": config["seed"],
            "step_seconds": steps[(len(steps) - 1) // 2],
            "layers_host_seconds": host["forward"] + host["backward"],
            "optimizer_host_seconds": host["optimizer"],
            "kernel_seconds": result["device_seconds"] or 0.0,
        })  # fmt: skip
    return pd.DataFrame(rows)


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
HALF_FLOPS = (1e5, 1e6, 1e7, 3e7, 1e8, 3e8, 1e9)
MEMORY_FRACTIONS = (0.3, 0.5, 0.7, 0.9)
KERNEL_FLOORS = (2e-6, 3e-6, 4e-6, 6e-6)


def log_error(predicted: float, measured: float) -> float:
    """|ln(predicted / measured)|: the same for twice as slow as for twice as fast."""
    return abs(math.log(predicted / measured))


def fit_device(observed: pd.DataFrame, gpu) -> tuple[float, float, float, float]:
    """(peak_fraction, half_flops, memory, kernel_seconds) whose predicted kernel time has the least
    median ``log_error`` against the profiled kernels' time over every row of ``observed``."""

    def error(point) -> float:
        inputs = StepInputs(0.0, 0.0, *point)
        return statistics.median(
            log_error(predict_step(row.model, int(row.batch), gpu, inputs)["device_seconds"],
                      row.kernel_seconds)
            for row in observed.itertuples()
        )  # fmt: skip

    grid = itertools.product(PEAK_FRACTIONS, HALF_FLOPS, MEMORY_FRACTIONS, KERNEL_FLOORS)
    return min(grid, key=error)


def calibrate(observed: pd.DataFrame, gpu) -> dict:
    """The step model's inputs from the models in ``observed``: the host per layer op and per optimizer
    step, their medians over the rows (``central``) and their lowest and highest (``host_corners``), and
    the device curve fitted on all of them together (``central``) and on each model alone (``device_fits``,
    how far the models disagree). What a band of the prediction spans."""
    per_op = observed["layers_host_seconds"] / observed["model"].map(layer_ops)
    optimizer = observed["optimizer_host_seconds"]
    device = fit_device(observed, gpu)
    alone = {fit_device(rows, gpu) for _, rows in observed.groupby("model")}
    corners = [(op, opt) for op in (per_op.min(), per_op.max()) for opt in (optimizer.min(), optimizer.max())]
    return {
        "central": StepInputs(float(per_op.median()), float(optimizer.median()), *device),
        "host_corners": corners,
        "device_fits": sorted(alone | {device}),
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


def leave_one_out(observed: pd.DataFrame, gpu) -> pd.DataFrame:
    """Every measured step of one machine (``observed_steps`` rows) with chapter 5's roofline at its central
    values (what this model replaces), its in-sample prediction (calibrated on every model) and its
    out-of-sample one (calibrated on the other models), each as a ratio predicted / measured, with the
    out-of-sample band, its width (high / low) and whether it holds the measured step."""
    everything = calibrate(observed, gpu)
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
    out-of-sample ratios within ``GOAL_RATIOS``, the median absolute error (|ratio - 1|), the share of
    bands holding the measured step and the median band width; in-sample's median error and the roofline's
    (chapter 5's central values) beside them."""
    shown = table[table["batch"] >= GOAL_BATCH]

    def summary(rows: pd.DataFrame) -> dict:
        ratio = rows["out_of_sample_ratio"]
        return {
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


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.costmodel.validate", description=__doc__)
    parser.add_argument("--measure", action="store_true", help="profile the four models here first")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="batches to profile")
    parser.add_argument("--repeats", type=int, default=3, help="independent runs (seeds) per batch")
    parser.add_argument("--results-run", help="folder of data/results (default: gpu)")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds the profiling may take")
    return parser.parse_args(argv)


def machine_gpu(store: ResultStore, machine: str):
    """The datasheet GPU of a machine whose records the store holds, or None where none is known."""
    listed = ResultStore(store.folder.name, root=store.folder.parent, records_of=machine).hardware.get("gpus")
    key = gpu_key(listed[0]["name"]) if listed else None
    return GPUS.get(key) if key else None


def main(argv=None) -> int:
    args = arguments(argv)
    try:
        batches = counting.parse_shape(args.batches, "--batches", "16,32,64")
    except counting.AdviseError as error:
        print(f"validate: error: {error}", file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    run = args.results_run or "gpu"
    store = ResultStore(run)
    models = counted_models()  # registers the examples' costs under their counted names
    if args.measure:
        measure.profile_sweep(store, models, batches, device=device, repeats=args.repeats,
                              time_limit_seconds=args.time_limit)  # fmt: skip
    current, names = store.code_version(PROFILE_KIND), {c.name for c in models.values()}
    records = [r for r in store.records(PROFILE_KIND, all_machines=True)
               if r["code_version"] == current and r["config"]["model"] in names]  # fmt: skip
    if not records:
        print(f"validate: error: data/results/{run} holds no {PROFILE_KIND} records of the current code "
              "and models: run with --measure on a GPU machine", file=sys.stderr)  # fmt: skip
        return 2
    observed = observed_steps(profile_frame(records))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        for machine, rows in observed.groupby("machine"):
            gpu = machine_gpu(store, machine)
            if gpu is None or rows["model"].nunique() < 3:
                print(f"machine {machine}: no GPU the roofline knows, or fewer than three models: skipped")
                continue
            table = leave_one_out(rows, gpu)
            print(f"machine {machine} ({gpu.name}): leave one model out, step per batch\n")
            print(table_view(table).to_string())
            print(f"\ngoals (batches of {GOAL_BATCH} and more):\n")
            print(goal_summary(table).round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
