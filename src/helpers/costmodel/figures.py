"""Chapter 5's figures: the loss fits, the time model against held-out runs, and the GPU predictions, each
drawn with its band (shaded or as bars: lowest to highest over the uncertain inputs) and titled
PREDICTIONS where nothing was measured. Every figure fits the book's column (``plotting.COLUMN_INCHES``):
several panels go into a grid, legends under the panels."""

from __future__ import annotations

import math
import textwrap

import pandas as pd
from matplotlib import pyplot as plt

from helpers.costmodel.configurations import BY_NAME, CONFIGURATIONS
from helpers.costmodel.gpus import shown_name
from helpers.costmodel.prose import METHOD_NAMES
from helpers.plotting import (
    COLUMN_INCHES,
    legend_below,
    log_ticks,
    panel_grid,
    plain_log_axes,
    plotted_handles,
    titled,
)
from helpers.train import counted


def _errors(frame: pd.DataFrame, column: str) -> list:
    """Error-bar lengths from ``column`` down to ``column``_low and up to ``column``_high."""
    return [frame[column] - frame[f"{column}_low"], frame[f"{column}_high"] - frame[column]]


def _band_lines(
    axis: plt.Axes,
    frame: pd.DataFrame,
    x: str,
    y: str,
    hue: str,
    looks: dict | None = None,
    alpha: float = 0.15,
    shaded=None,
) -> None:
    """One line per ``hue`` value through the central ``y``, shaded between ``y``_low and ``y``_high; its
    colour, line style and marker from ``looks`` (``{value: (colour, style, marker)}``), else the palette's
    colours in turn; ``alpha``: the bands' opacity (lighter where many overlap); ``shaded``: the values
    whose band is drawn (default: every one)."""
    for index, (name, rows) in enumerate(frame.groupby(hue, sort=False)):
        rows = rows.sort_values(x)
        colour, style, marker = (looks or {}).get(name, (f"C{index}", "-", "o"))
        axis.plot(rows[x], rows[y], marker=marker, markersize=3, color=colour, linestyle=style, label=name)
        if shaded is None or name in shaded:
            axis.fill_between(rows[x], rows[f"{y}_low"], rows[f"{y}_high"], color=colour, alpha=alpha,
                              linewidth=0)  # fmt: skip


# A machine drawn by what it is: its GPU's colour, and a line of its GPU count's look.
COUNT_LOOKS = {1: ("-", "o"), 2: ("-.", "D"), 4: ("--", "s"), 8: (":", "^")}
GPU_COLOURS = tuple(dict.fromkeys(config.gpu for config in CONFIGURATIONS))  # a GPU's colour in every figure
GPU_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # a GPU's marker where one line is drawn per GPU


def _gpu_numbers(gpus) -> dict[str, int]:
    """``{gpu: number}``: chapter 5's table of machines numbers the GPU kinds, so that a GPU keeps its
    colour in every figure whichever GPUs it draws; a GPU not in that table comes after its kinds."""
    numbered = list(dict.fromkeys([*GPU_COLOURS, *gpus]))
    return {gpu: numbered.index(gpu) for gpu in gpus}


def gpu_looks(gpus) -> dict[str, tuple[str, str, str]]:
    """``{gpu: (colour, line style, marker)}`` for figures with one line per GPU: its colour as in
    ``machine_looks``, and a marker of its own, so that two GPUs of like colours still differ."""
    return {
        gpu: (f"C{number % 10}", "-", GPU_MARKERS[number % len(GPU_MARKERS)])
        for gpu, number in _gpu_numbers(dict.fromkeys(gpus)).items()
    }


def machine_looks(machines) -> dict[str, tuple[str, str, str]]:
    """``{machine: (colour, line style, marker)}``: its GPU's colour (``gpu_looks``), and a line style and
    marker per GPU count, so that 15 machines read without a colour repeated for two different GPUs, and
    two machines of one GPU differ by their count's line (a machine not in chapter 5's tables is a kind of
    its own, of one GPU)."""
    kinds = {m: (BY_NAME[m].gpu, BY_NAME[m].gpus) if m in BY_NAME else (m, 1) for m in machines}
    numbers = _gpu_numbers(dict.fromkeys(gpu for gpu, _ in kinds.values()))
    return {
        m: (f"C{numbers[gpu] % 10}", *COUNT_LOOKS.get(count, ("-", "o"))) for m, (gpu, count) in kinds.items()
    }


def _shared_legend(figure: plt.Figure, axes, title: str | None = None, columns: int = 3) -> None:
    """The legend of every panel's labelled artists, once, under the panels."""
    found = plotted_handles(axes)
    legend_below(figure, list(found.values()), list(found), title, columns)


def plot_loss_fits(curves: list[dict], predictions: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Each measured loss curve (points; filled where the fit saw them) with the Optimus curve fitted to its
    first part (line), the target loss (dashed) and where the fit stops (dotted), two panels across so that
    their titles keep apart at the book's smallest text; each panel says whether its test is out of sample
    (the target crossed after the fitted points)."""
    across = 2
    figure, axes = panel_grid(len(curves), columns=across, panel_height=2.0)
    for axis, curve, row in zip(axes, curves, predictions.itertuples(), strict=True):
        steps = pd.Series(curve["steps"], dtype=float)
        axis.plot(
            steps, curve["losses"], "o", markersize=2, fillstyle="none", color="grey", label="not fitted"
        )
        axis.plot(steps[: row.fitted_points], curve["losses"][: row.fitted_points], "o", markersize=2,
                  color="C0", label="fitted")  # fmt: skip
        axis.plot(steps, 1 / (row.beta0 * steps + row.beta1) + row.beta2, color="C1", label="Optimus fit")
        axis.axhline(row.target_loss, color="black", linestyle="--", linewidth=0.8, label="target")
        axis.axvline(row.fitted_up_to_step, color="grey", linestyle=":", linewidth=0.8, label="end of fit")
        test = "out of sample" if row.out_of_sample else "not a test"
        axis.set_title(f"{textwrap.fill(curve['curve'], 36)}\n({test})", fontsize=9)  # no title runs on
        axis.set_xlabel(curve["unit"], fontsize=9)
        axis.tick_params(labelsize=9)
    for axis in axes[::across]:  # the first column's
        axis.set_ylabel("training loss", fontsize=9)
    figure = titled(figure, what, hardware)
    _shared_legend(figure, axes[:1], columns=5)
    return figure


def plot_predicted_against_measured(validated: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Predicted against measured step seconds, one panel per method (each judged on its own), two across,
    colour per model, the measured fastest-slowest steps as horizontal bars, the prediction's band over
    the link's fits (``predicted_low_seconds``–``predicted_high_seconds``, where given) as vertical ones,
    and the line y = x."""
    methods = list(dict.fromkeys(validated["method"]))
    figure, axes = panel_grid(len(methods), columns=2, panel_height=3.0, sharex=True, sharey=True)
    low = (
        min(
            validated["step_seconds"].min(),
            validated.filter(["predicted_seconds", "predicted_low_seconds"]).min().min(),
        )
        * 0.8
    )
    high = (
        max(
            validated["step_seconds"].max(),
            validated.filter(["predicted_seconds", "predicted_high_seconds"]).max().max(),
        )
        * 1.25
    )
    models = list(dict.fromkeys(validated["model"]))
    for axis, method in zip(axes, methods, strict=True):
        for index, model in enumerate(models):
            rows = validated[(validated["method"] == method) & (validated["model"] == model)]
            errors = None
            if "step_min" in rows:  # the measured fastest and slowest steps
                errors = [rows["step_seconds"] - rows["step_min"], rows["step_max"] - rows["step_seconds"]]
            band = None
            if "predicted_low_seconds" in rows:  # the prediction over the link's fits
                band = [rows["predicted_seconds"] - rows["predicted_low_seconds"],
                        rows["predicted_high_seconds"] - rows["predicted_seconds"]]  # fmt: skip
            axis.errorbar(rows["step_seconds"], rows["predicted_seconds"], xerr=errors, yerr=band, fmt="o",
                          capsize=2, color=f"C{index}", label=shown_name(model))  # fmt: skip
        axis.plot([low, high], [low, high], color="black", linewidth=1, label="prediction = measurement")
        axis.set(xscale="log", yscale="log", xlabel="measured seconds per step",
                 ylabel="predicted seconds per step")  # fmt: skip
        axis.set_title(METHOD_NAMES.get(method, method), fontsize=9)
        log_ticks(axis.xaxis)
        log_ticks(axis.yaxis)
    figure = titled(figure, what, hardware)
    _shared_legend(figure, axes)
    return figure


def plot_roofline(predicted: pd.DataFrame, measured: pd.DataFrame | None = None) -> plt.Figure:
    """Predicted single-GPU step time against batch, one line per GPU (``gpu_looks``), one panel per model
    (log-log), two across; measured GPU steps as crosses where the study has them. The band (lowest to
    highest over the uncertain inputs) is shaded for the GPUs measured, where the crosses are set against
    it, and their lines drawn on top and thicker; for every GPU when none was: eight overlapping bands hide
    one another (the chapter's table gives every GPU's at two batches)."""
    models = list(dict.fromkeys(predicted["model"]))
    checked = measured is not None and len(measured) > 0
    shaded = set(measured["gpu"]) if checked else None
    looks = gpu_looks(dict.fromkeys(predicted["gpu"]))
    figure, axes = panel_grid(len(models), columns=2, panel_height=3.0)
    for axis, model in zip(axes, models, strict=True):
        rows = predicted[predicted["model"] == model]
        _band_lines(axis, rows, "batch", "step_seconds", "gpu", looks, alpha=0.2, shaded=shaded)
        for line in axis.lines if checked else ():  # the GPU measured on top, thicker: others may coincide
            if line.get_label() in shaded:
                line.set(linewidth=2.5, zorder=3)
        for gpu, points in measured[measured["model"] == model].groupby("gpu", sort=False) if checked else ():
            spread = [
                points["step_seconds"] - points["step_min"],
                points["step_max"] - points["step_seconds"],
            ]
            axis.errorbar(points["batch"], points["step_seconds"], yerr=spread, fmt="kX", markersize=7,
                          capsize=2, label=f"measured, one {gpu} (fastest–slowest step)")  # fmt: skip
        plain_log_axes(axis, sorted(predicted["batch"].unique()))
        axis.set(xlabel="batch per GPU", ylabel="seconds per step", title=shown_name(model))
    if checked:
        gpus = " and ".join(sorted(shaded))
        what = f"PREDICTIONS; shaded: the band of the {gpus}, against its steps measured"
    else:
        what = "PREDICTIONS; shaded: each GPU's band"
    figure = titled(figure, "One training step on one GPU: the roofline (float32, TF32 off)", what)
    _shared_legend(figure, axes)
    return figure


def plot_gpu_speedups(summary: pd.DataFrame, what: str) -> plt.Figure:
    """Predicted speed-up of each multi-GPU machine over one GPU of its kind, with its band (bars: lowest
    to highest over the uncertain inputs), one panel per model, stacked; a tick marks perfect scaling (k)."""
    frame = summary[summary["gpus"] > 1]
    models = list(dict.fromkeys(frame["model"]))
    machines = list(dict.fromkeys(frame["machine"]))
    figure, axes = panel_grid(len(models), columns=1, panel_height=0.3 * len(machines) + 0.9, sharex=True)
    for axis, model in zip(axes, models, strict=True):
        rows = frame[frame["model"] == model].set_index("machine").reindex(machines).reset_index()
        axis.errorbar(rows["speedup"], rows.index, xerr=_errors(rows, "speedup"), fmt="o", capsize=3,
                      label="predicted, with its band")  # fmt: skip
        axis.plot(rows["gpus"], rows.index, "|", color="grey", markersize=12, label="perfect scaling (k)")
        axis.axvline(1, color="grey", linewidth=0.8)
        axis.set(xscale="log", title=shown_name(model))
        log_ticks(axis.xaxis)
        axis.set_yticks(range(len(machines)), machines, fontsize=9)
        axis.invert_yaxis()
    axes[-1].set_xlabel("speed-up over one GPU (×)")
    figure = titled(figure, what, "PREDICTIONS")
    _shared_legend(figure, axes[:1])
    return figure


NEAR, RING = 0.05, 9  # points within 5 % on both axes nest; a lone point's marker size (pt)


def plot_renter_choice(summary: pd.DataFrame, what: str) -> plt.Figure:
    """What a renter decides: each multi-GPU machine's speed-up against what its result costs over the
    one-GPU offer, one panel per model, two across, log-log; right of x = 1 is dearer, above y = 1 faster.
    The band is a segment, not a cross: a result's dollars are the price ratio ÷ the speed-up, so its
    slowest end is its dearest (a cross would draw pairs no input gives). Each machine keeps its look from
    ``machine_looks`` (its GPU's colour, its count's marker), drawn hollow; a machine predicted where one
    already drawn lies (within ``NEAR`` on both axes) is drawn smaller, inside it, as a nested ring: one
    size for every point that stands alone, so that size says nothing but "here are two"."""
    frame = summary[(summary["gpus"] > 1) & summary["cost_multiplier"].notna()]
    models = list(dict.fromkeys(frame["model"]))
    looks = machine_looks(dict.fromkeys(frame["machine"]))
    figure, axes = panel_grid(len(models), columns=2, panel_height=3.1)
    for axis, model in zip(axes, models, strict=True):
        drawn: list[tuple[float, float]] = []
        for row in frame[frame["model"] == model].itertuples():
            color, _, marker = looks[row.machine]
            point = (row.cost_multiplier, row.speedup)
            apart = [max(abs(math.log(a / b)) for a, b in zip(point, other, strict=True)) for other in drawn]
            near = sum(distance < math.log(1 + NEAR) for distance in apart)
            drawn.append(point)
            slowest, fastest = (
                (row.cost_multiplier_high, row.speedup_low),
                (row.cost_multiplier_low, row.speedup_high),
            )
            axis.plot(*zip(slowest, fastest, strict=True), color=color, linewidth=2.5, alpha=0.35)
            size = RING / (1 + 0.8 * near)
            axis.plot(*point, marker, color=color, markersize=size, markerfacecolor="none",
                      markeredgewidth=1.5, label=row.machine)  # fmt: skip
        axis.axhline(1, color="grey", linewidth=0.8)
        axis.axvline(1, color="grey", linewidth=0.8)
        axis.set(xscale="log", yscale="log", title=shown_name(model),
                 xlabel="$ per result over one GPU's (×)", ylabel="speed-up over one GPU (×)")  # fmt: skip
        log_ticks(axis.xaxis)
        log_ticks(axis.yaxis)
    figure = titled(figure, what, "PREDICTIONS")
    _shared_legend(figure, axes)
    for handle in figure.legends[-1].legend_handles:  # a machine's key at one size
        handle.set_markersize(RING)
    return figure


def plot_time_to_result(bands: pd.DataFrame, what: str) -> plt.Figure:
    """Seconds to the target against the global batch, one line per machine with its band, log-log; each
    machine coloured by its GPU and drawn in its GPU count's line (``machine_looks``)."""
    figure, axis = plt.subplots(figsize=(COLUMN_INCHES, 4.0))
    looks = machine_looks(dict.fromkeys(bands["machine"]))
    _band_lines(axis, bands, "global_batch", "seconds_to_target", "machine", looks, alpha=0.06)
    plain_log_axes(axis, sorted(bands["global_batch"].unique()))
    axis.set(xlabel="global batch (at most the 2,700 training clips)", ylabel="seconds to the target loss")
    figure = titled(figure, what, "PREDICTIONS")
    _shared_legend(figure, [axis])
    return figure


def plot_seed_check(check: pd.DataFrame) -> plt.Figure:
    """The seed's experiment predicted: epoch time against batch size for 1-4 GPUs with their bands, one
    panel per model, two across (``check``: one row per scenario, as ``seed.seed_check`` gives)."""
    keys = ["model", "gpus", "global_batch"]
    central = check[check["scenario"] == "central"].set_index(keys)["epoch_seconds"]
    grouped = check.groupby(keys)["epoch_seconds"]
    frame = pd.DataFrame({"epoch_seconds": central, "epoch_seconds_low": grouped.min(),
                          "epoch_seconds_high": grouped.max()}).reset_index()  # fmt: skip
    frame["GPUs"] = frame["gpus"].map(lambda k: counted(k, "GPU"))
    models = list(dict.fromkeys(frame["model"]))
    figure, axes = panel_grid(len(models), columns=2, panel_height=3.0)
    for axis, model in zip(axes, models, strict=True):
        _band_lines(axis, frame[frame["model"] == model], "global_batch", "epoch_seconds", "GPUs")
        plain_log_axes(axis, sorted(frame["global_batch"].unique()))
        axis.set(xlabel="batch size", ylabel="seconds per 2,000-clip epoch", title=shown_name(model))
        axis.tick_params(axis="x", labelsize=9)
    hardware = f"{check['machine'].iloc[0]}, {check['link'].iloc[0]}, DataParallel: PREDICTIONS"
    figure = titled(figure, "The seed's experiment, predicted with its band", hardware)
    _shared_legend(figure, axes[:1], columns=4)
    return figure


def plot_step_model_check(table: pd.DataFrame, hardware: str, goal_batch: int = 32) -> plt.Figure:
    """Predicted over measured step against batch, one panel per model (``validate.leave_one_out``): the
    roofline at its central values, the step model in sample and out of sample with its band (shaded),
    the line of a perfect prediction, the 0.8-1.25 goal (grey) and the batches below ``goal_batch``, which
    the goals leave out (lighter)."""
    models = list(dict.fromkeys(table["model"]))
    figure, axes = panel_grid(len(models), columns=2, panel_height=2.6, sharex=True, sharey=True)
    for axis, model in zip(axes, models, strict=True):
        rows = table[table["model"] == model].sort_values("batch")
        measured = rows["measured_seconds"]
        axis.axhspan(0.8, 1.25, color="0.9", label="goal: 0.8–1.25×")
        axis.axhline(1.0, color="black", linewidth=1)
        axis.fill_between(rows["batch"], rows["band_low"] / measured, rows["band_high"] / measured, alpha=0.2,
                          color="C2", label="out of sample: band")  # fmt: skip
        axis.plot(rows["batch"], rows["roofline_ratio"], "s--", color="C3", label="roofline (chapter 5)")
        axis.plot(rows["batch"], rows["in_sample_ratio"], "o:", color="C0", label="step model, in sample")
        axis.plot(rows["batch"], rows["out_of_sample_ratio"], "o-", color="C2",
                  label="step model, out of sample")  # fmt: skip
        below = [batch for batch in rows["batch"] if batch < goal_batch]
        if below:
            axis.axvspan(min(below) / 1.2, max(below) * 1.2, color="0.95", zorder=0,
                         label=f"batches below {goal_batch}, outside the goals")  # fmt: skip
        plain_log_axes(axis, sorted(rows["batch"].unique()))
        axis.tick_params(axis="x", labelrotation=0)
        axis.set_yscale("log")
        log_ticks(axis.yaxis)
        axis.set(ylabel="predicted / measured", title=f"{model} held out")
    for axis in axes[-2:]:
        axis.set_xlabel("batch")
    figure = titled(figure, "One training step on one GPU: predicted over measured", hardware)
    _shared_legend(figure, axes)
    return figure
