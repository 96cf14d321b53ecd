"""Seaborn figures on tidy frames; every title names the hardware its numbers came from (chapter 1)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from helpers.data import CLIP_SAMPLES, FSDD, SAMPLE_RATE

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


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
        axis.set(xscale="log", yscale="log", xlabel="batch size", ylabel=label)
        axis.set_xticks(sorted(sweep["batch_size"].unique()))
        axis.xaxis.set_major_formatter(PLAIN)
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(PLAIN)
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.tick_params(axis="x", labelrotation=90)
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
