"""Seaborn figures on tidy frames; every title names the hardware its numbers came from (chapters 1-2)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from helpers.data import CLIP_SAMPLES, FSDD, SAMPLE_RATE

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


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


def plot_sweep(sweep: pd.DataFrame, hardware: str) -> plt.Figure:
    """Epoch time and throughput against batch size, one line per model."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for axis, column, label in (
        (axes[0], "epoch_seconds", "seconds per epoch (estimated)"),
        (axes[1], "samples_per_second", "training samples per second"),
    ):
        sns.lineplot(data=sweep, x="batch_size", y=column, hue="model", marker="o", ax=axis)
        axis.set(xlabel="batch size", ylabel=label)
        plain_log_axes(axis, sorted(sweep["batch_size"].unique()))
    method = sweep["method"].iloc[0].split(" x ")[0] + " x steps per epoch"
    return titled(figure, f"Batch-size sweep ({method})", hardware)


def plot_precision(precision: pd.DataFrame, hardware: str) -> plt.Figure:
    """float32 against bf16 autocast: step time and activation memory kept for backward."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    sns.barplot(data=precision, x="model", y="step_seconds", hue="precision", ax=axes[0])
    sns.barplot(data=precision, x="model", y="saved_mib_per_sample", hue="precision", ax=axes[1])
    axes[0].set(ylabel="seconds per training step")
    axes[1].set(ylabel="MiB saved for backward per sample")
    return titled(figure, "Mixed precision (bf16 autocast) against float32", hardware)


def plot_profile(phases: pd.DataFrame, hardware: str) -> plt.Figure:
    """Seconds of one training step per phase, host and (on a GPU) device."""
    long = phases.melt(id_vars=["model", "phase"], value_vars=["host_seconds", "device_seconds"])
    long = long.dropna()
    long["clock"] = long["variable"].str.replace("_seconds", "")
    grid = sns.catplot(
        data=long, x="phase", y="value", hue="clock", col="model", kind="bar", height=3, sharey=False
    )
    grid.set_titles("{col_name}")
    grid.set_axis_labels("", "seconds")
    return titled_grid(grid, "One training step under torch.profiler", hardware)


def plot_dataparallel_sweep(sweep: pd.DataFrame, hardware: str) -> plt.Figure:
    """Estimated epoch time against batch size, one line per replica count, one panel per model."""
    grid = sns.relplot(
        data=sweep, x="batch_size", y="epoch_seconds", hue="replicas", col="model", kind="line",
        marker="o", palette="viridis", height=3.4, aspect=1.3, facet_kws={"sharey": False},
    )  # fmt: skip
    for axis in grid.axes.flat:
        plain_log_axes(axis, sorted(sweep["batch_size"].unique()))
    grid.set_axis_labels("batch size", "seconds per epoch (estimated)")
    grid.set_titles("{col_name}")
    method = sweep["method"].iloc[0].split(" x ")[0]
    return titled_grid(grid, f"DataParallel from primitives ({method} x steps per epoch)", hardware)


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
    """One bar chart of a measured quantity, titled with what it shows and the hardware."""
    figure, axis = plt.subplots(figsize=(7, 3.6))
    sns.barplot(data=frame, x=x, y=y, hue=hue, ax=axis)
    axis.legend(title=hue, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_bucket_sweep(sweep: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Epoch time and buckets per step against DDP's ``bucket_cap_mb`` (log axis), one line per model."""
    figure, (time_axis, bucket_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(data=sweep, x="bucket_cap_mb", y="epoch_seconds", hue="model", marker="o", ax=time_axis)
    sns.lineplot(data=sweep, x="bucket_cap_mb", y="buckets_per_step", hue="model", marker="o", ax=bucket_axis)
    caps = sorted(sweep["bucket_cap_mb"].unique())
    for axis in (time_axis, bucket_axis):
        axis.set_xscale("log")
        axis.set_xticks(caps, [f"{cap:g}" for cap in caps])
        axis.minorticks_off()
        axis.set_xlabel("bucket_cap_mb")
    time_axis.set(ylabel="seconds per epoch (log)", yscale="log")
    time_axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    time_axis.yaxis.set_major_formatter(PLAIN)
    time_axis.yaxis.set_minor_formatter(NullFormatter())
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


def plot_bandwidth(frame: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """busbw against message size, one line per implementation and backend, dashes per number of ranks
    (nccl-tests' definitions; every point is already a median, so no error band)."""
    ok = frame[frame["status"] == "ok"].assign(
        setup=lambda f: f["label"] + " · " + f["backend"] + "/" + f["device"], ranks=lambda f: f["world_size"]
    )
    grid = sns.relplot(
        data=ok, x="bytes", y="busbw_GBps", hue="setup", style="ranks", col="collective", col_wrap=2,
        kind="line", marker="o", errorbar=None, height=3.2, aspect=1.3, facet_kws={"sharey": False},
    )  # fmt: skip
    for axis in grid.axes.flat:
        _bytes_axis(axis)
        axis.set_ylabel("busbw (GB/s)")
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


def plot_broadcast_pipelining(rows: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Ring broadcast time against the number of chunks S: measured points and the formula's line."""
    figure, axis = plt.subplots(figsize=(7, 3.8))
    rows = rows.sort_values("chunks")
    axis.plot(rows["chunks"], rows["seconds"], "o", label="measured")
    axis.plot(
        rows["chunks"], rows["model_seconds"], "-", color="black", linewidth=1, label="(S+k−2)(α + Nβ/S)"
    )
    axis.set(xscale="log", xlabel="chunks S", ylabel="seconds")
    axis.set_xticks(rows["chunks"].unique(), [f"{c:g}" for c in rows["chunks"].unique()])
    axis.minorticks_off()
    axis.legend(frameon=False)
    return titled(figure, what, hardware)


def plot_stale_training(history: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Batch loss and test accuracy against step, one line per staleness (0 = synchronous SGD)."""
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    smoothed = history.assign(
        batch_loss=history.groupby("staleness")["batch_loss"].transform(
            lambda s: s.rolling(5, min_periods=1).mean()
        )
    )
    sns.lineplot(data=smoothed, x="step", y="batch_loss", hue="staleness", palette="viridis", ax=loss_axis)
    tested = history.dropna(subset=["test_accuracy"])
    sns.lineplot(
        data=tested,
        x="step",
        y="test_accuracy",
        hue="staleness",
        palette="viridis",
        marker="o",
        ax=accuracy_axis,
    )
    loss_axis.set_ylabel("training batch loss (mean of 5)")
    accuracy_axis.set_ylabel("test accuracy")
    return titled(figure, what, hardware)


def plot_predicted_against_measured(validated: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Predicted against measured step seconds, one marker per method and colour per model, with y = x."""
    figure, axis = plt.subplots(figsize=(6.5, 4.6))
    sns.scatterplot(
        data=validated, x="step_seconds", y="predicted_seconds", hue="model", style="method", ax=axis
    )
    low = min(validated["step_seconds"].min(), validated["predicted_seconds"].min()) * 0.8
    high = max(validated["step_seconds"].max(), validated["predicted_seconds"].max()) * 1.25
    axis.plot([low, high], [low, high], color="black", linewidth=1, label="prediction = measurement")
    axis.set(
        xscale="log", yscale="log", xlabel="measured seconds per step", ylabel="predicted seconds per step"
    )
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
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
    first part (line) and the target loss (dashed)."""
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
        axis.set(title=curve["curve"], xlabel=curve["unit"], ylabel="training loss")
        axis.title.set_size(9)
    axes[0][0].legend(frameon=False)
    return titled(figure, what, hardware)
