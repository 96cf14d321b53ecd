"""Seaborn figures on tidy frames; every title names the hardware its numbers came from (chapters 1-2)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from helpers.data import CLIP_SAMPLES, FSDD, SAMPLE_RATE

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")
# Repeated measurements are drawn as their median, with a band or bar from the fastest to the slowest.
SPREAD = {"estimator": "median", "errorbar": ("pi", 100)}


def plain_log_axes(axis: plt.Axes, xticks: list) -> None:
    """Log-log axes labelled with plain numbers (10, 20, 50 rather than 2 x 10^1), ticks at ``xticks``."""
    axis.set(xscale="log", yscale="log")
    axis.set_xticks(xticks)
    axis.xaxis.set_major_formatter(PLAIN)
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.yaxis.set_major_formatter(PLAIN)
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.tick_params(axis="x", labelrotation=90)


def setup_style() -> None:
    """One look for every figure of the book."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def titled(figure: plt.Figure, what: str, hardware: str | None = None) -> plt.Figure:
    """Give ``figure`` a title saying what it shows and, for measurements, on which hardware."""
    figure.suptitle(what if hardware is None else f"{what}\n{hardware}", fontsize=11)
    figure.tight_layout()
    return figure


def titled_grid(grid: sns.FacetGrid, what: str, hardware: str) -> plt.Figure:
    """``titled`` for a seaborn grid, with its legend moved right of the panels so it hides no data."""
    figure = titled(grid.figure, what, hardware)
    if grid.legend is not None:
        sns.move_legend(grid, "upper left", bbox_to_anchor=(1.0, 0.85), frameon=False)
    return figure


def plot_waveforms(dataset: FSDD, speaker: str = "george", take: int = 0) -> plt.Figure:
    """One recording of each digit by one speaker, as padded to 12,000 samples."""
    figure, axes = plt.subplots(2, 5, figsize=(12, 4), sharex=True, sharey=True)
    speaker_index = dataset.speaker_names.index(speaker)
    seconds = [i / SAMPLE_RATE for i in range(CLIP_SAMPLES)]
    chosen = (dataset.speakers == speaker_index) & (dataset.takes == take)
    for digit, axis in enumerate(axes.flat):
        row = int(((dataset.digits == digit) & chosen).nonzero()[0, 0])
        axis.plot(seconds, dataset.waveforms[row, 0].numpy(), linewidth=0.5)
        axis.set_title(f"digit {digit}")
    for axis in axes[1]:
        axis.set_xlabel("seconds")
    return titled(figure, f"FSDD: speaker {speaker}, take {take}, padded to {CLIP_SAMPLES:,} samples")


def plot_lengths(clips: pd.DataFrame) -> plt.Figure:
    """Distribution of recording lengths, with the 1.5 s cut used by the models."""
    figure, axis = plt.subplots(figsize=(8, 3.5))
    sns.histplot(data=clips, x="seconds", hue="speaker", multiple="stack", bins=60, ax=axis)
    axis.axvline(CLIP_SAMPLES / SAMPLE_RATE, color="black", linestyle="--")
    axis.annotate(" 12,000 samples = 1.5 s", (CLIP_SAMPLES / SAMPLE_RATE, axis.get_ylim()[1] * 0.9))
    return titled(figure, "Length of the 3,000 FSDD recordings")


def plot_training(history: pd.DataFrame, hardware: str) -> plt.Figure:
    """Loss and accuracy per epoch, train and test, one column per model."""
    long = history.melt(
        id_vars=["model", "epoch"],
        value_vars=["train_loss", "test_loss", "train_accuracy", "test_accuracy"],
        var_name="series",
    )
    long["metric"] = long["series"].str.split("_").str[1]
    long["split"] = long["series"].str.split("_").str[0]
    grid = sns.relplot(
        data=long,
        x="epoch",
        y="value",
        hue="split",
        row="metric",
        col="model",
        kind="line",
        marker="o",
        height=2.8,
        aspect=1.4,
        facet_kws={"sharey": "row"},
    )
    grid.set_titles("{col_name}: {row_name}")
    grid.set_axis_labels("epoch", "")
    for axis in grid.axes.flat:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    return titled_grid(grid, "Training curves (train figures are running means over each epoch)", hardware)


def plot_sweep(steps: pd.DataFrame, hardware: str) -> plt.Figure:
    """Epoch time and throughput against batch size, one line per model: the median of the timed steps,
    with a band from the fastest to the slowest (``train.steps_frame`` rows)."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for axis, column, label in (
        (axes[0], "epoch_seconds", "seconds per epoch (estimated)"),
        (axes[1], "samples_per_second", "training samples per second"),
    ):
        sns.lineplot(data=steps, x="batch_size", y=column, hue="model", style="model", markers=True,
                     dashes=False, ax=axis, **SPREAD)  # fmt: skip
        axis.set(xlabel="batch size", ylabel=label)
        plain_log_axes(axis, sorted(steps["batch_size"].unique()))
    repeats = steps.groupby(["model", "batch_size"])["repeat"].count().min()
    return titled(figure, f"Batch-size sweep: median of {repeats} timed steps, band min-max", hardware)


def plot_precision(steps: pd.DataFrame, memory: pd.DataFrame, hardware: str) -> plt.Figure:
    """float32 against bf16 autocast: step time (median, min–max bars) and activation memory kept for
    backward (exact)."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    sns.barplot(data=steps, x="model", y="step_seconds", hue="precision", ax=axes[0], capsize=0.1, **SPREAD)
    sns.barplot(data=memory, x="model", y="saved_mib_per_sample", hue="precision", ax=axes[1])
    axes[0].set(ylabel="seconds per training step")
    axes[1].set(ylabel="MiB saved for backward per sample")
    return titled(figure, "Mixed precision (bf16 autocast) against float32", hardware)


def plot_profile(phases: pd.DataFrame, hardware: str) -> plt.Figure:
    """Seconds of one training step per phase, host and (on a GPU) device: medians of un-profiled steps."""
    long = phases.melt(id_vars=["model", "phase"], value_vars=["host_seconds", "device_seconds"])
    long = long.dropna()
    long["clock"] = long["variable"].str.replace("_seconds", "")
    grid = sns.catplot(
        data=long, x="phase", y="value", hue="clock", col="model", kind="bar", height=3, sharey=False
    )
    grid.set_titles("{col_name}")
    grid.set_axis_labels("", "seconds")
    return titled_grid(grid, "One training step by phase (median of timed steps)", hardware)


def plot_dataparallel_sweep(steps: pd.DataFrame, hardware: str) -> plt.Figure:
    """Estimated epoch time against batch size, one line per replica count, one panel per model: the
    median of the timed steps with a min–max band (``dataparallel.steps_frame`` rows)."""
    grid = sns.relplot(
        data=steps, x="batch_size", y="epoch_seconds", hue="replicas", style="replicas", col="model",
        kind="line", markers=True, dashes=False, palette="viridis", height=3.4, aspect=1.3,
        facet_kws={"sharey": False}, **SPREAD,
    )  # fmt: skip
    for axis in grid.axes.flat:
        plain_log_axes(axis, sorted(steps["batch_size"].unique()))
    grid.set_axis_labels("batch size", "seconds per epoch (estimated)")
    grid.set_titles("{col_name}")
    repeats = steps.groupby(["model", "replicas", "batch_size"])["repeat"].count().min()
    return titled_grid(
        grid, f"DataParallel from primitives: median of {repeats} steps, band min-max", hardware
    )


def plot_phase_breakdown(phases: pd.DataFrame, hardware: str) -> plt.Figure:
    """Seconds per phase of one step, stacked, per model and replica count."""
    figure, axes = plt.subplots(1, phases["model"].nunique(), figsize=(11, 3.8))
    for axis, (model, frame) in zip(axes, phases.groupby("model", sort=False), strict=True):
        table = frame.pivot(index="replicas", columns="phase", values="seconds")[frame["phase"].unique()]
        table.plot.bar(stacked=True, ax=axis, legend=axis is axes[-1], colormap="tab10", width=0.7)
        axis.set(title=model, xlabel="replicas", ylabel="seconds per step")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return titled(figure, "Where a DataParallel step goes, phase by phase", hardware)


def plot_time_against_bytes(points: pd.DataFrame, fit: dict, hardware: str) -> plt.Figure:
    """Transfer seconds per step against bytes moved per step, with the fitted line."""
    points = points.assign(megabytes_per_step=points["bytes_per_step"] / 1e6)
    figure, axis = plt.subplots(figsize=(7, 4))
    sns.scatterplot(
        data=points, x="megabytes_per_step", y="transfer_seconds", hue="model", style="replicas", ax=axis
    )
    top = points["bytes_per_step"].max()
    axis.plot(
        [0, top / 1e6], [fit["intercept_seconds"], fit["intercept_seconds"] + fit["seconds_per_byte"] * top],
        color="black", linewidth=1,
        label=f"fit: {fit['bytes_per_second'] / 1e9:.2f} GB/s, R² {fit['r_squared']:.2f}",
    )  # fmt: skip
    axis.set(xlabel="MB moved between replicas per step", ylabel="seconds in transfer phases")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, "Time = const x Transfer", hardware)


def plot_bars(frame: pd.DataFrame, x: str, y: str, hue: str, what: str, hardware: str) -> plt.Figure:
    """One bar chart of a measured quantity, titled with what it shows and the hardware: with repeated
    rows per bar, the median and a min–max bar."""
    figure, axis = plt.subplots(figsize=(7, 3.6))
    sns.barplot(data=frame, x=x, y=y, hue=hue, ax=axis, capsize=0.1, legend=hue != x, **SPREAD)
    if hue != x:
        axis.legend(title=hue, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_bucket_sweep(steps: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Step time (median, min–max band) and buckets per step against DDP's ``bucket_cap_mb`` (log axis)."""
    figure, (time_axis, bucket_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(data=steps, x="bucket_cap_mb", y="step_seconds", marker="o", ax=time_axis, **SPREAD)
    counts = steps.drop_duplicates("bucket_cap_mb")
    sns.lineplot(data=counts, x="bucket_cap_mb", y="buckets_per_step", marker="o", ax=bucket_axis)
    caps = sorted(steps["bucket_cap_mb"].unique())
    for axis in (time_axis, bucket_axis):
        axis.set_xscale("log")
        axis.set_xticks(caps, [f"{cap:g}" for cap in caps])
        axis.minorticks_off()
        axis.set_xlabel("bucket_cap_mb")
    time_axis.set(ylabel="seconds per step")
    bucket_axis.set_ylabel("buckets per step")
    bucket_axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    return titled(figure, what, hardware)


def _bytes_axis(axis: plt.Axes) -> None:
    """A log x axis of message sizes labelled 1K, 1M, 64M (binary units, as nccl-tests prints)."""
    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_formatter(
        FuncFormatter(
            lambda value, _: next(
                f"{value / 2**p:g}{u}" for p, u in ((30, "G"), (20, "M"), (10, "K"), (0, "")) if value >= 2**p
            )
        )
    )
    axis.set_xlabel("message size (bytes)")


def plot_bandwidth(
    frame: pd.DataFrame, what: str, hardware: str, reference: tuple | None = None
) -> plt.Figure:
    """busbw against message size on log-log axes, one panel per number of ranks, one line (colour and
    marker) per implementation and backend (nccl-tests' definitions; every point is already a median).
    ``reference`` = (label, bytes per second) draws the link's peak (or the machine's copy speed)."""
    ok = frame[(frame["status"] == "ok") & (frame["chunks"].fillna(1) == 1)].assign(
        setup=lambda f: f["label"].str.replace(", S=1", "") + " · " + f["backend"] + "/" + f["device"],
        ranks=lambda f: f["world_size"].astype(str) + " ranks",
    )
    grid = sns.relplot(
        data=ok, x="bytes", y="busbw_GBps", hue="setup", style="setup", col="ranks", kind="line",
        markers=True, dashes=False, errorbar=None, height=3.6, aspect=1.2,
    )  # fmt: skip
    for axis in grid.axes.flat:
        _bytes_axis(axis)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(PLAIN)
        axis.set_ylabel("busbw (GB/s, log)")
        if reference:
            axis.axhline(reference[1] / 1e9, color="black", linestyle="--", linewidth=1)
            axis.annotate(f" {reference[0]}", (axis.get_xlim()[0], reference[1] / 1e9), fontsize=8,
                          va="bottom")  # fmt: skip
    grid.set_titles("{col_name}")
    return titled_grid(grid, what, hardware)


def plot_model_against_measured(frame: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Measured seconds (points) and the α-β model's prediction (lines) against message size, log-log."""
    rows = frame.dropna(subset=["model_seconds"]).assign(
        setup=lambda f: f["label"] + " · " + f["backend"] + "/" + f["device"]
    )
    figure, axis = plt.subplots(figsize=(8, 4.2))
    sns.scatterplot(data=rows, x="bytes", y="seconds", hue="setup", ax=axis)
    palette = dict(
        zip(rows["setup"].unique(), sns.color_palette(n_colors=rows["setup"].nunique()), strict=True)
    )
    for setup, group in rows.groupby("setup"):
        group = group.sort_values("bytes")
        axis.plot(group["bytes"], group["model_seconds"], color=palette[setup], linewidth=1)
    _bytes_axis(axis)
    axis.set_yscale("log")
    axis.set_ylabel("seconds (points: measured, lines: α-β model)")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_broadcast_pipelining(rows: pd.DataFrame, best: float, what: str, hardware: str) -> plt.Figure:
    """Ring broadcast time against the number of chunks S: measured points, the formula's line and its
    best chunk count S* (``collectives.model.optimal_chunks``)."""
    figure, axis = plt.subplots(figsize=(7, 3.8))
    rows = rows.sort_values("chunks")
    axis.plot(rows["chunks"], rows["seconds"], "o", label="measured")
    axis.plot(
        rows["chunks"], rows["model_seconds"], "-", color="black", linewidth=1, label="(S+k−2)(α + Nβ/S)"
    )
    axis.axvline(best, color="grey", linestyle=":", label=f"S* = {best:.1f}")
    axis.set(xscale="log", xlabel="chunks S", ylabel="seconds")
    axis.set_xticks(rows["chunks"].unique(), [f"{c:g}" for c in rows["chunks"].unique()])
    axis.minorticks_off()
    axis.legend(frameon=False)
    return titled(figure, what, hardware)


def plot_stale_training(history: pd.DataFrame, evaluated_on: str, what: str, hardware: str) -> plt.Figure:
    """Batch loss and accuracy against step, one line per staleness (0 = synchronous SGD)."""
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    smoothed = history.assign(
        batch_loss=history.groupby("staleness")["batch_loss"].transform(
            lambda s: s.rolling(5, min_periods=1).mean()
        )
    )
    sns.lineplot(data=smoothed, x="step", y="batch_loss", hue="staleness", style="staleness",
                 palette="viridis", ax=loss_axis)  # fmt: skip
    evaluated = history.dropna(subset=["eval_accuracy"])
    sns.lineplot(data=evaluated, x="step", y="eval_accuracy", hue="staleness", style="staleness",
                 palette="viridis", markers=True, ax=accuracy_axis)  # fmt: skip
    loss_axis.set_ylabel("training batch loss (mean of 5)")
    accuracy_axis.set_ylabel(f"accuracy on the {evaluated_on} clips")
    return titled(figure, what, hardware)


def plot_predicted_against_measured(validated: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Predicted against measured step seconds, one panel per method (each judged on its own), colour per
    model, the measured fastest-slowest steps as horizontal bars, and the line y = x."""
    methods = list(dict.fromkeys(validated["method"]))
    figure, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 4), squeeze=False,
                                sharex=True, sharey=True)  # fmt: skip
    low = min(validated["step_seconds"].min(), validated["predicted_seconds"].min()) * 0.8
    high = max(validated["step_seconds"].max(), validated["predicted_seconds"].max()) * 1.25
    models = list(dict.fromkeys(validated["model"]))
    for axis, method in zip(axes[0], methods, strict=True):
        for index, model in enumerate(models):
            rows = validated[(validated["method"] == method) & (validated["model"] == model)]
            if "step_min" in rows:
                errors = [rows["step_seconds"] - rows["step_min"], rows["step_max"] - rows["step_seconds"]]
            else:
                errors = None
            axis.errorbar(rows["step_seconds"], rows["predicted_seconds"], xerr=errors, fmt="o", capsize=2,
                          color=f"C{index}", label=model)  # fmt: skip
        axis.plot([low, high], [low, high], color="black", linewidth=1, label="prediction = measurement")
        axis.set(xscale="log", yscale="log", title=method, xlabel="measured seconds per step")
        _log_ticks(axis.xaxis)
        _log_ticks(axis.yaxis)
    axes[0][0].set_ylabel("predicted seconds per step")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_recommendation(
    predicted: pd.DataFrame, measured: pd.DataFrame, what: str, hardware: str
) -> plt.Figure:
    """Predicted speed-up against GPU count per link and model (lines), measured speed-ups as points."""
    grid = sns.relplot(
        data=predicted, x="gpus", y="speedup", hue="link", col="model", kind="line", marker="o",
        height=3.4, aspect=1.1, facet_kws={"sharey": False},
    )  # fmt: skip
    for axis in grid.axes.flat:
        model = axis.get_title().split(" = ")[-1]
        points = measured[measured["model"] == model]
        if len(points):
            axis.plot(points["gpus"], points["speedup"], "kX", markersize=9, label="measured here")
        axis.axhline(1, color="grey", linewidth=0.8)
        axis.set(xlabel="GPUs (predicted) / ranks (measured: ×)", ylabel="speed-up over one")
    return titled_grid(grid, what, hardware)


def plot_loss_fits(curves: list[dict], predictions: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Each measured loss curve (points; filled where the fit saw them) with the Optimus curve fitted to its
    first part (line), the target loss (dashed) and where the fit stops (dotted); each panel says whether
    its test is out of sample (the target crossed after the fitted points) or says nothing."""
    figure, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6), squeeze=False)
    for axis, curve, row in zip(axes[0], curves, predictions.itertuples(), strict=True):
        steps = pd.Series(curve["steps"], dtype=float)
        axis.plot(steps, curve["losses"], "o", markersize=3, fillstyle="none", color="grey")
        axis.plot(
            steps[: row.fitted_points], curve["losses"][: row.fitted_points], "o", markersize=3, color="C0"
        )
        axis.plot(
            steps, 1 / (row.beta0 * steps + row.beta1) + row.beta2, color="C1", label="fit on filled points"
        )
        axis.axhline(row.target_loss, color="black", linestyle="--", linewidth=0.8, label="target")
        axis.axvline(row.fitted_up_to_step, color="grey", linestyle=":", linewidth=0.8, label="end of fit")
        test = "out of sample" if row.out_of_sample else "not a test"
        axis.set(title=f"{curve['curve']}\n({test})", xlabel=curve["unit"], ylabel="training loss")
        axis.title.set_size(9)
    axes[0][0].legend(frameon=False)
    return titled(figure, what, hardware)


def _band_lines(axis: plt.Axes, frame: pd.DataFrame, x: str, y: str, hue: str) -> None:
    """One line per ``hue`` value through the central ``y``, shaded between ``y``_low and ``y``_high."""
    for index, (name, rows) in enumerate(frame.groupby(hue, sort=False)):
        rows = rows.sort_values(x)
        axis.plot(rows[x], rows[y], marker="o", markersize=3, color=f"C{index}", label=name)
        axis.fill_between(rows[x], rows[f"{y}_low"], rows[f"{y}_high"], color=f"C{index}", alpha=0.15,
                          linewidth=0)  # fmt: skip


def plot_roofline(predicted: pd.DataFrame, measured: pd.DataFrame | None = None) -> plt.Figure:
    """Predicted single-GPU step time against batch, one line per GPU with its band (shaded: lowest to
    highest over the uncertain inputs), one panel per model (log-log); measured GPU steps as crosses
    where the study has them. Predictions: titled as such."""
    frame = predicted
    models = list(dict.fromkeys(frame["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 4), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        _band_lines(axis, frame[frame["model"] == model], "batch", "step_seconds", "gpu")
        if measured is not None and len(measured):
            points = measured[measured["model"] == model]
            axis.plot(points["batch"], points["step_seconds"], "kX", markersize=8, label="measured")
        plain_log_axes(axis, sorted(frame["batch"].unique()))
        axis.set(xlabel="batch per GPU", ylabel="seconds per step", title=model)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return titled(
        figure, "One training step on one GPU: the roofline's band (float32, TF32 off)", "PREDICTIONS"
    )


def _errors(frame: pd.DataFrame, column: str) -> list:
    return [frame[column] - frame[f"{column}_low"], frame[f"{column}_high"] - frame[column]]


def _log_ticks(axis) -> None:
    """Plain numbers at 1, 2 and 5 of every decade on a log axis."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(NullFormatter())


def plot_gpu_speedups(summary: pd.DataFrame, what: str) -> plt.Figure:
    """Predicted speed-up of each multi-GPU machine over one GPU of its kind, with its band (bars: lowest
    to highest over the uncertain inputs), one panel per model; a tick marks perfect scaling (k)."""
    frame = summary[summary["gpus"] > 1]
    models = list(dict.fromkeys(frame["model"]))
    machines = list(dict.fromkeys(frame["machine"]))
    figure, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models) + 2, 0.42 * len(machines) + 1.6),
                                squeeze=False, sharey=True)  # fmt: skip
    for axis, model in zip(axes[0], models, strict=True):
        rows = frame[frame["model"] == model].set_index("machine").reindex(machines).reset_index()
        axis.errorbar(rows["speedup"], rows.index, xerr=_errors(rows, "speedup"), fmt="o", capsize=3,
                      label="predicted, with band")  # fmt: skip
        axis.plot(rows["gpus"], rows.index, "|", color="grey", markersize=12, label="perfect scaling")
        axis.axvline(1, color="grey", linewidth=0.8)
        axis.set(xscale="log", title=model, xlabel="speed-up over one GPU (×)")
        _log_ticks(axis.xaxis)
        axis.set_yticks(range(len(machines)), machines)
        axis.invert_yaxis()
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, "PREDICTIONS")


def plot_renter_choice(summary: pd.DataFrame, what: str) -> plt.Figure:
    """What a renter decides: each multi-GPU machine's speed-up against what its result costs over the
    one-GPU offer (both with their bands), one panel per model, log-log; right of x = 1 is dearer, above
    y = 1 faster."""
    frame = summary[(summary["gpus"] > 1) & summary["cost_multiplier"].notna()]
    models = list(dict.fromkeys(frame["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(5.6 * len(models), 4.6), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        rows = frame[frame["model"] == model]
        for index, row in enumerate(rows.itertuples()):
            one = rows.loc[[row.Index]]
            axis.errorbar(one["cost_multiplier"], one["speedup"], xerr=_errors(one, "cost_multiplier"),
                          yerr=_errors(one, "speedup"), fmt="o", capsize=2, color=f"C{index % 10}",
                          label=row.machine)  # fmt: skip
        axis.axhline(1, color="grey", linewidth=0.8)
        axis.axvline(1, color="grey", linewidth=0.8)
        axis.set(xscale="log", yscale="log", title=model, xlabel="dollars per result over one GPU's (×)",
                 ylabel="speed-up over one GPU (×)")  # fmt: skip
        _log_ticks(axis.xaxis)
        _log_ticks(axis.yaxis)
        axis.legend(fontsize="x-small", frameon=False)
    return titled(figure, what, "PREDICTIONS")


def plot_time_to_result(bands: pd.DataFrame, what: str) -> plt.Figure:
    """Seconds to the target against the global batch, one line per machine with its band, log-log."""
    figure, axis = plt.subplots(figsize=(7.5, 4.4))
    _band_lines(axis, bands, "global_batch", "seconds_to_target", "machine")
    plain_log_axes(axis, sorted(bands["global_batch"].unique()))
    axis.set(xlabel="global batch (at most the 2,700 training clips)", ylabel="seconds to the target loss")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return titled(figure, what, "PREDICTIONS")


def plot_seed_check(check: pd.DataFrame) -> plt.Figure:
    """The seed's experiment predicted: epoch time against batch size for 1-4 GPUs with their bands, one
    panel per model (``check``: one row per scenario, as ``recommend.seed_check`` gives)."""
    keys = ["model", "gpus", "global_batch"]
    central = check[check["scenario"] == "central"].set_index(keys)["epoch_seconds"]
    grouped = check.groupby(keys)["epoch_seconds"]
    frame = pd.DataFrame({"epoch_seconds": central, "epoch_seconds_low": grouped.min(),
                          "epoch_seconds_high": grouped.max()}).reset_index()  # fmt: skip
    frame["GPUs"] = frame["gpus"].map(lambda k: f"{k} GPU(s)")
    models = list(dict.fromkeys(frame["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 4), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        _band_lines(axis, frame[frame["model"] == model], "global_batch", "epoch_seconds", "GPUs")
        plain_log_axes(axis, sorted(frame["global_batch"].unique()))
        axis.set(xlabel="batch size", ylabel="seconds per epoch of 2,000 clips", title=model)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    hardware = f"{check['machine'].iloc[0]}, {check['link'].iloc[0]}, DataParallel: PREDICTIONS"
    return titled(figure, "The seed's experiment, predicted with its band", hardware)


def plot_efficiency(table: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Speed-up against ranks, strong and weak scaling side by side, one line per model with bars from
    the slowest to the fastest pairing (``scaling.efficiency_table``), and the ideal S(k) = k."""
    kinds = [kind for kind in ("strong", "weak") if kind in set(table["scaling"])]
    figure, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.8), squeeze=False, sharey=True)
    for axis, kind in zip(axes[0], kinds, strict=True):
        part = table[table["scaling"] == kind]
        for (model, rows), marker in zip(part.groupby("model"), "os^", strict=False):
            rows = rows.sort_values("ranks")
            errors = [rows["speedup"] - rows["speedup_low"], rows["speedup_high"] - rows["speedup"]]
            axis.errorbar(rows["ranks"], rows["speedup"], yerr=errors, marker=marker, capsize=3, label=model)
        ranks = sorted(part["ranks"].unique())
        axis.plot(ranks, ranks, color="black", linewidth=1, linestyle="--", label="ideal: S(k) = k")
        axis.set(xlabel="ranks k", ylabel="speed-up S(k)", title=f"{kind} scaling", xticks=ranks)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_steps_to_target(table: pd.DataFrame, fits: dict, what: str, hardware: str) -> plt.Figure:
    """Steps to the target against the global batch, log-log: per learning-rate rule the median over
    seeds a line, min-max over seeds shaded, the fitted S(B) = S_min (1 + B_crit/B) dashed in its colour."""
    figure, axis = plt.subplots(figsize=(7, 4.2))
    reached = table.dropna(subset=["steps"])
    sns.lineplot(data=reached, x="global_batch", y="steps", hue="rule", style="rule", markers=True,
                 dashes=False, ax=axis, **SPREAD)  # fmt: skip
    batches = sorted(table["global_batch"].unique())
    rules = list(pd.unique(reached["rule"]))  # seaborn's hue order, so each fit takes its rule's colour
    colours = sns.color_palette(n_colors=len(rules))
    for rule, fit in fits.items():
        if 0 < fit["b_crit"] < float("inf") and rule in rules:
            curve = [fit["s_min"] * (1 + fit["b_crit"] / b) for b in batches]
            axis.plot(batches, curve, linestyle="--", linewidth=1, color=colours[rules.index(rule)],
                      label=f"fit ({rule}): B_crit = {fit['b_crit']:.0f}")  # fmt: skip
    plain_log_axes(axis, batches)
    axis.set(xlabel="global batch B", ylabel="steps to the target loss")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_noise_scale(points: pd.DataFrame, what: str, hardware: str, samples: int) -> plt.Figure:
    """The gradient noise scale B_simple and the training loss against the training step.

    ``samples`` clips can resolve a noise scale below ``samples`` only: a dashed line marks that limit,
    a point on or above it is drawn hollow, and an infinite one (the mean gradient lost in the noise)
    is a dotted "∞" line at its step.
    """
    figure, (noise_axis, loss_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    finite = points["b_simple"].map(math.isfinite)
    sns.lineplot(data=points[finite], x="step", y="b_simple", marker="o", ax=noise_axis)
    unresolved = points[finite & (points["b_simple"] >= samples)]
    noise_axis.scatter(unresolved["step"], unresolved["b_simple"], s=90, facecolors="white",
                       edgecolors="C0", zorder=3, label="not resolved (B_simple ≥ n)")  # fmt: skip
    noise_axis.axhline(samples, linestyle="--", color="grey", label=f"n = {samples} clips")
    for step in points.loc[~finite, "step"]:
        noise_axis.axvline(step, linestyle=":", color="grey")
        noise_axis.text(step, 0.92, " ∞", transform=noise_axis.get_xaxis_transform(), color="grey")
    noise_axis.set(ylabel="B_simple = tr(Σ) / |G|² (samples)", yscale="log")
    noise_axis.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # 50, 100, 200: within one decade
    noise_axis.yaxis.set_major_formatter(PLAIN)
    noise_axis.yaxis.set_minor_formatter(NullFormatter())
    noise_axis.legend(frameon=False, fontsize="small")
    sns.lineplot(data=points, x="step", y="loss", marker="o", ax=loss_axis)
    loss_axis.set(ylabel="loss on the training clips")
    return titled(figure, what, hardware)


def plot_memory(table: pd.DataFrame, what: str) -> plt.Figure:
    """Bytes on the busiest device per ZeRO stage, stacked by what they hold, one panel per model
    (``sharding.memory.device_table``); arithmetic, so no hardware in the title."""
    parts = ["parameters", "gradients", "optimizer", "activations"]
    models = list(dict.fromkeys(table["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.6), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        rows = table[table["model"] == model].set_index("stage")[parts] / 2**20
        rows.plot.bar(stacked=True, ax=axis, legend=False, rot=0)
        axis.set(xlabel="ZeRO stage (0 = DDP)", ylabel="MiB on the busiest device", title=model)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what)
