"""Seaborn figures on tidy frames; every title names the hardware its numbers came from (chapters 1-2)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.container import BarContainer
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, PercentFormatter

from helpers import batchsize
from helpers.data import CLIP_SAMPLES, FSDD, SAMPLE_RATE
from helpers.launch import placement_words


def plain_number(value: float, _position=None) -> str:
    """A tick label as a plain number: 20, not 2 x 10^1 (a named function, so figures can be copied)."""
    return f"{value:g}"


PLAIN = FuncFormatter(plain_number)
# Repeated measurements are drawn as their median, with a band or bar from the fastest to the slowest.
SPREAD = {"estimator": "median", "errorbar": ("pi", 100)}
COLUMN_INCHES = 7.5  # the book's column: no figure is wider
# No text smaller: a phone shows the column's 7.5 inches about half size, so 9 pt (12.5 px at 100 dpi)
# reads as about 6 px there, the least that can be read when zoomed in.
SMALLEST_POINTS = 9


def plain_log_axes(axis: plt.Axes, xticks: list) -> None:
    """Log-log axes labelled with plain numbers (10, 20, 50 rather than 2 x 10^1), ticks at ``xticks``;
    a tick too close to the last labelled one keeps its mark but not its label (``spaced_labels``)."""
    axis.set(xscale="log", yscale="log")
    axis.set_xticks(xticks, spaced_labels(xticks))
    axis.xaxis.set_minor_formatter(NullFormatter())
    low, high = axis.get_ylim()
    spans_decades = low > 0 and high / low > 300  # 1, 2 and 5 of every decade would crowd the axis
    axis.yaxis.set_major_locator(LogLocator(subs=(1.0,) if spans_decades else (1.0, 2.0, 5.0)))
    axis.yaxis.set_major_formatter(PLAIN)
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.tick_params(axis="x", labelrotation=90)


def spaced_labels(ticks: list, share: float = 1 / 16) -> list[str]:
    """Plain labels for log-spaced ``ticks``, "" for a tick within ``share`` of the ticks' log span of the
    last one labelled: 10 to 600 labels 400 and 600 but not 500, whose label would overlap both."""
    logs = [math.log10(tick) for tick in ticks]
    gap = (max(logs) - min(logs)) * share if len(logs) > 1 else 0.0
    labels, last = [], None
    for tick, at in zip(ticks, logs, strict=True):
        keep = last is None or at - last >= gap
        labels.append(f"{tick:g}" if keep else "")
        last = at if keep else last
    return labels


class InsideTicks(MaxNLocator):
    """Evenly spaced round ticks on a narrow log axis, less any within 3 % of its span (in log terms) of an
    end, where a tick would sit on the frame and its label hang past it."""

    def __call__(self):
        low, high = sorted(self.axis.get_view_interval())
        margin = 0.03 * math.log(high / low)
        ticks = super().__call__()
        return [t for t in ticks if t > 0 and math.log(t / low) > margin and math.log(high / t) > margin]


def log_ticks(axis) -> None:
    """Plain numbers at 1, 2 and 5 of every decade on a log axis; on one spanning less than a factor of
    4 (0.98 to 1.7, say, where 1, 2 and 5 leave one tick), at evenly spaced round numbers inside its ends."""
    low, high = axis.get_view_interval()
    narrow = low > 0 and high / low < 4
    axis.set_major_locator(InsideTicks(nbins=4) if narrow else LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(NullFormatter())


def panel_grid(count: int, columns: int = 2, panel_height: float = 3.0, **options):
    """A figure as wide as the book's column holding ``count`` panels, ``columns`` across (fewer when
    there are fewer panels): the figure and its panels in reading order, the unused ones hidden."""
    columns = max(1, min(columns, count))
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(COLUMN_INCHES, 1.0 + panel_height * rows), squeeze=False, **options
    )
    for axis in axes.flat[count:]:
        axis.set_visible(False)
    return figure, list(axes.flat[:count])


def plotted_handles(axes) -> dict:
    """``{label: artist}`` of what ``axes`` plotted, each label once (an error bar's container, not the
    stand-in line a legend keeps): the handles of a legend shared by several panels, or drawn again."""
    found: dict = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    return found


def legend_below(figure: plt.Figure, handles, labels, title: str | None = None, columns: int = 3) -> None:
    """One legend under every panel, centred, after the layout: it hides no data and widens nothing (at
    most ``columns`` across, fewer where long labels would make it wider than the figure), and the figure
    grows by its rows, so that the panels keep their height."""
    renderer = figure.canvas.get_renderer()
    for across in range(max(1, min(columns, len(labels))), 0, -1):
        legend = figure.legend(handles, labels, loc="lower center", ncol=across, frameon=False,
                               fontsize="small", title=title, title_fontsize="small")  # fmt: skip
        if across == 1 or legend.get_window_extent(renderer).width <= figure.bbox.width:
            break
        legend.remove()
    rows = math.ceil(len(labels) / across) + (1 if title else 0)
    width, height = figure.get_size_inches()
    extra = 0.25 * (rows + 1)  # inches of legend under the panels
    bottom, top = figure.subplotpars.bottom * height, (1 - figure.subplotpars.top) * height
    figure.set_size_inches(width, height + extra)
    figure.subplots_adjust(bottom=(bottom + extra) / (height + extra), top=1 - top / (height + extra))


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
    figure, axes = plt.subplots(2, 5, figsize=(7.5, 3.6), sharex=True, sharey=True)
    speaker_index = dataset.speaker_names.index(speaker)
    seconds = [i / SAMPLE_RATE for i in range(CLIP_SAMPLES)]
    chosen = (dataset.speakers == speaker_index) & (dataset.takes == take)
    for digit, axis in enumerate(axes.flat):
        row = int(((dataset.digits == digit) & chosen).nonzero()[0, 0])
        axis.plot(seconds, dataset.waveforms[row, 0].numpy(), linewidth=0.5)
        axis.set_title(f"digit {digit}", fontsize=9)
        axis.tick_params(labelsize=9)
    for axis in axes[1]:
        axis.set_xlabel("seconds", fontsize=9)
    return titled(figure, f"FSDD: speaker {speaker}, take {take}, padded to {CLIP_SAMPLES:,} samples")


def plot_lengths(clips: pd.DataFrame) -> plt.Figure:
    """Distribution of recording lengths, with the 1.5 s cut used by the models."""
    figure, axis = plt.subplots(figsize=(7.5, 3.2))
    sns.histplot(data=clips, x="seconds", hue="speaker", multiple="stack", bins=60, ax=axis)
    axis.set(xlabel="length of the recording (s)", ylabel="recordings")
    axis.axvline(CLIP_SAMPLES / SAMPLE_RATE, color="black", linestyle="--")
    axis.annotate(" 12,000 samples = 1.5 s", (CLIP_SAMPLES / SAMPLE_RATE, axis.get_ylim()[1] * 0.9))
    return titled(figure, "Length of the 3,000 FSDD recordings")


def plot_training(history: pd.DataFrame, hardware: str) -> plt.Figure:
    """Loss and accuracy per epoch, training (running mean over the epoch) and test, one column per model."""
    long = history.melt(
        id_vars=["model", "epoch"],
        value_vars=["train_loss", "test_loss", "train_accuracy", "test_accuracy"],
        var_name="series",
    )
    parts = long["series"].str.split("_")
    long["metric"] = parts.str[1].map({"loss": "cross-entropy loss", "accuracy": "accuracy"})
    long["clips"] = parts.str[0].map({"train": "training (running mean)", "test": "test (after the epoch)"})
    grid = sns.relplot(
        data=long, x="epoch", y="value", hue="clips", row="metric", col="model", kind="line", marker="o",
        height=2.2, aspect=1.55, facet_kws={"sharey": "row", "legend_out": False},
    )  # fmt: skip
    grid.set_titles("{col_name}: {row_name}")
    grid.set_axis_labels("epoch", "")
    for axis in grid.axes.flat:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    for axis in grid.axes[-1]:
        axis.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    figure = titled(grid.figure, "Training curves", hardware)
    sns.move_legend(grid, "upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False, title="clips:")
    return figure


def plot_sweep(steps: pd.DataFrame, hardware: str) -> plt.Figure:
    """Epoch time and throughput against batch size, one line per model: the median of the timed steps,
    with a band from the fastest to the slowest (``train.steps_frame`` rows)."""
    figure, axes = plt.subplots(1, 2, figsize=(7.5, 3.3))
    for axis, column, label in (
        (axes[0], "epoch_seconds", "seconds per epoch (estimated)"),
        (axes[1], "samples_per_second", "training samples per second"),
    ):
        sns.lineplot(data=steps, x="batch_size", y=column, hue="model", style="model", markers=True,
                     dashes=False, ax=axis, legend=axis is axes[0], **SPREAD)  # fmt: skip
        axis.set(xlabel="batch size", ylabel=label)
        plain_log_axes(axis, sorted(steps["batch_size"].unique()))
    axes[0].legend(frameon=False, fontsize=9)
    repeats = steps.groupby(["model", "batch_size"])["repeat"].count().min()
    return titled(figure, f"Batch-size sweep: median of {repeats} timed steps, band min-max", hardware)


def label_bars(axis: plt.Axes, inside: bool = False) -> None:
    """Each bar's height printed on it, to three significant figures (whole numbers from 1,000): above the
    bar, or ``inside`` it where error bars stand above it."""

    def number(value: float) -> str:
        return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"

    for container in axis.containers:
        if isinstance(container, BarContainer):
            axis.bar_label(container, fmt=number, fontsize=9, padding=0 if inside else 2,
                           label_type="center" if inside else "edge",
                           color="white" if inside else None)  # fmt: skip
    axis.margins(y=0.15)  # room above the tallest bar for its label


def plot_precision(steps: pd.DataFrame, memory: pd.DataFrame, hardware: str) -> plt.Figure:
    """float32 against bf16 autocast, one column of panels per model on linear axes from zero (so that a
    bar twice as tall is twice the time): step time (median, min–max bars) and activation memory kept for
    backward (exact), each bar labelled with its value."""
    models = list(dict.fromkeys(steps["model"]))
    order = [precision for precision in ("float32", "bf16") if precision in set(steps["precision"])]
    figure, axes = plt.subplots(2, len(models), figsize=(COLUMN_INCHES, 5.4), squeeze=False)
    for column, model in enumerate(models):
        timed = steps[steps["model"] == model].assign(milliseconds=lambda f: f["step_seconds"] * 1e3)
        kept = memory[memory["model"] == model]
        top, bottom = axes[0][column], axes[1][column]
        sns.barplot(data=timed, x="precision", y="milliseconds", order=order, hue="precision",
                    hue_order=order, legend=False, ax=top, capsize=0.1, **SPREAD)  # fmt: skip
        sns.barplot(data=kept, x="precision", y="saved_mib_per_sample", order=order, hue="precision",
                    hue_order=order, legend=False, ax=bottom)  # fmt: skip
        top.set(title=f"{model}: one training step", xlabel="", ylabel="ms (median, min–max)")
        bottom.set(title=f"{model}: kept for backward", xlabel="", ylabel="MiB per sample")
        for axis in (top, bottom):
            axis.title.set_size(10)
            label_bars(axis, inside=True)
    return titled(figure, "bf16 autocast against float32", hardware)


def plot_profile(phases: pd.DataFrame, hardware: str) -> plt.Figure:
    """Milliseconds of one training step per phase, host and (on a GPU) device, one panel per model:
    medians of un-profiled steps, each bar labelled with its value; a legend only where there are two
    clocks."""
    long = phases.melt(id_vars=["model", "phase"], value_vars=["host_seconds", "device_seconds"])
    long = long.dropna().assign(milliseconds=lambda f: f["value"].astype(float) * 1e3)
    long["clock"] = long["variable"].map({"host_seconds": "host", "device_seconds": "GPU (CUDA events)"})
    clocks = list(dict.fromkeys(long["clock"]))
    models = list(dict.fromkeys(long["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(COLUMN_INCHES, 3.2), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        rows = long[long["model"] == model]
        two = len(clocks) > 1
        sns.barplot(data=rows, x="phase", y="milliseconds", order=list(dict.fromkeys(rows["phase"])),
                    hue="clock" if two else None, hue_order=clocks if two else None, legend=False,
                    ax=axis)  # fmt: skip
        axis.set(title=model, xlabel="", ylabel="ms per step")
        axis.title.set_size(10)
        label_bars(axis)
    what = "One training step by phase (median of unprofiled steps)"
    if len(clocks) == 1:
        return titled(figure, f"{what}, {clocks[0]} clock", hardware)
    titled(figure, what, hardware)
    handles = [Patch(color=color) for color in sns.color_palette(n_colors=len(clocks))]
    legend_below(figure, handles, clocks, title="clock", columns=len(clocks))
    return figure


def plot_dataparallel_sweep(steps: pd.DataFrame, hardware: str) -> plt.Figure:
    """Estimated epoch time against batch size, one line per replica count, one panel per model: the
    median of the timed steps with a min–max band (``dataparallel.steps_frame`` rows)."""
    grid = sns.relplot(
        data=steps, x="batch_size", y="epoch_seconds", hue="replicas", style="replicas", col="model",
        kind="line", markers=True, dashes=False, palette="viridis", height=3.0, aspect=0.95,
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
    """Milliseconds per phase of one step (``phases``' seconds), stacked, per model and replica count; the
    legend under the panels."""
    models = list(dict.fromkeys(phases["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(7.5, 3.8), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        frame = phases[phases["model"] == model].assign(
            phase=lambda f: f["phase"].str.replace("_", " "), milliseconds=lambda f: f["seconds"] * 1e3
        )
        table = frame.pivot(index="replicas", columns="phase", values="milliseconds")[frame["phase"].unique()]
        table.plot.bar(stacked=True, ax=axis, legend=False, colormap="tab10", width=0.7, rot=0)
        axis.set(title=model, xlabel="replicas", ylabel="ms per step")
    handles, labels = axes[0][0].get_legend_handles_labels()
    batches = sorted(set(phases["batch_size"])) if "batch_size" in phases else []
    at = f" at batch {', '.join(map(str, batches))}" if batches else ""
    titled(figure, f"Where a DataParallel step goes{at}, phase by phase (first at the bottom)", hardware)
    figure.subplots_adjust(bottom=0.4)
    figure.legend(handles, labels, loc="lower center", ncol=3, frameon=False, fontsize=9.5)
    return figure


def plot_time_against_bytes(points: pd.DataFrame, fits: dict, hardware: str, line_holds: float) -> plt.Figure:
    """Seconds against bytes moved per step, one panel per group of transfer phases (``points``: rows of
    ``dataparallel.transfer_points``), each with its fitted line (``fits``: {group: fit}) where the line
    holds (R² at least ``line_holds``); where it does not, the title says so and no line is drawn."""
    groups = list(dict.fromkeys(points["phases"]))
    figure, axes = plt.subplots(1, len(groups), figsize=(7.5, 3.4), squeeze=False, sharey=True)
    for axis, group in zip(axes[0], groups, strict=True):
        rows = points[points["phases"] == group].assign(megabytes=lambda f: f["bytes"] / 1e6)
        sns.scatterplot(data=rows, x="megabytes", y="seconds", hue="model", style="replicas", ax=axis,
                        legend=axis is axes[0][-1])  # fmt: skip
        fit, top = fits[group], rows["bytes"].max()
        speed = f"fit: {fit['bytes_per_second'] / 1e9:.2f} GB/s, R² {fit['r_squared']:.2f}"
        if not math.isfinite(fit["bytes_per_second"]):
            speed = "fit: no positive slope"
        elif fit["r_squared"] < line_holds:
            speed = (
                f"no line: R² {fit['r_squared']:.2f},\ntime does not follow bytes"  # two lines: no overlap
            )
        else:
            line = [fit["intercept_seconds"], fit["intercept_seconds"] + fit["seconds_per_byte"] * top]
            axis.plot([0, top / 1e6], line, color="black", linewidth=1)
        axis.set(xlabel="MB moved per step", ylabel="seconds per step", title=f"{group}\n{speed}")
        axis.title.set_size(9)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    axes[0][-1].get_legend().remove()
    titled(figure, "Time = const x Transfer, phase by phase", hardware)
    figure.subplots_adjust(bottom=0.3)
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, fontsize=9)
    return figure


def plot_bars(frame: pd.DataFrame, x: str, y: str, hue: str, what: str, hardware: str) -> plt.Figure:
    """One bar chart of a measured quantity, titled with what it shows and the hardware: with repeated
    rows per bar, the median and a min–max bar."""
    figure, axis = plt.subplots(figsize=(7, 3.6))
    sns.barplot(data=frame, x=x, y=y, hue=hue, ax=axis, capsize=0.1, legend=hue != x, **SPREAD)
    if hue != x:
        axis.legend(title=hue, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return titled(figure, what, hardware)


def plot_bucket_sweep(launches: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Step time (median launch, band from the fastest to the slowest) and buckets per step against DDP's
    bucket cap (log axis), from one row per launch: "bucket cap (MiB)", "step time (s)", "buckets per
    step"."""
    cap, step, buckets = "bucket cap (MiB)", "step time (s)", "buckets per step"
    figure, (time_axis, bucket_axis) = plt.subplots(1, 2, figsize=(7.5, 3.4))
    sns.lineplot(data=launches, x=cap, y=step, marker="o", ax=time_axis, **SPREAD)
    sns.lineplot(data=launches.drop_duplicates(cap), x=cap, y=buckets, marker="o", ax=bucket_axis)
    caps = sorted(launches[cap].unique())
    for axis in (time_axis, bucket_axis):
        axis.set_xscale("log")
        axis.set_xticks(caps, [f"{value:g}" for value in caps])
        axis.minorticks_off()
    time_axis.set_ylim(bottom=0)  # a difference of a few per cent must not fill the panel
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


def _reference_line(axis: plt.Axes, reference: tuple | None) -> None:
    """The dashed line of ``reference`` = (label, bytes per second), labelled inside the panel."""
    if reference:
        axis.axhline(reference[1] / 1e9, color="black", linestyle="--", linewidth=1)
        axis.annotate(f"{reference[0]}, {reference[1] / 1e9:.3g} GB/s", (0.02, reference[1] / 1e9),
                      xycoords=("axes fraction", "data"), fontsize=9, va="top")  # fmt: skip


# the other collectives' colours (palette numbers): vermilion, purple, sky blue, then the rest, so that no
# two operations are both orange-brown
OPERATION_COLOURS = (3, 4, 9, 2, 7, 8)


def plot_bandwidth(
    frame: pd.DataFrame, what: str, hardware: str, reference: tuple | None = None
) -> plt.Figure:
    """busbw against message size on log-log axes (nccl-tests' definitions; every point is already a
    median): one row of panels per backend/device and rank count, all-reduce implementations on the left,
    the other collectives on the right, each with at most four lines and its own legend underneath, so
    that the figure fits the book's column. ``reference`` = (label, bytes per second) draws the link's
    peak (or the machine's copy speed) in every panel."""
    ok = frame[(frame["status"] == "ok") & (frame["chunks"].fillna(1) == 1)].assign(
        implementation=lambda f: f["label"].str.replace(", S=1", "", regex=False),
        family=lambda f: (
            f["collective"].eq("all_reduce").map({True: "all-reduce", False: "other collectives"})
        ),
    )
    setups = list(ok.groupby(["backend", "device", "world_size"]).groups)
    figure, axes = plt.subplots(
        len(setups), 2, figsize=(COLUMN_INCHES, 2.0 + 2.4 * len(setups)), sharex=True, sharey=True,
        squeeze=False,
    )  # fmt: skip
    names = list(ok["implementation"].unique())
    markers = dict(zip(names, "osD^vP*X" * 2, strict=False))
    # all-reduce's implementations compared: a colour each; the other collectives: a colour per operation,
    # the study's own implementation of one dashed beside torch.distributed's
    palette = sns.color_palette(n_colors=10)
    operations = list(dict.fromkeys(ok.loc[ok["family"] != "all-reduce", "collective"]))
    reduces = list(dict.fromkeys(ok.loc[ok["family"] == "all-reduce", "implementation"]))
    looks = {name: (palette[reduces.index(name) % 10], "-") for name in reduces}
    for name, operation in ok.loc[ok["family"] != "all-reduce", ["implementation", "collective"]].values:
        number = OPERATION_COLOURS[operations.index(operation) % len(OPERATION_COLOURS)]
        looks[name] = (palette[number], "-" if "torch.distributed" in name else "--")
    for row, (backend, device, k) in enumerate(setups):
        for column, family in enumerate(["all-reduce", "other collectives"]):
            axis = axes[row][column]
            shown = ok[(ok["backend"] == backend) & (ok["device"] == device) & (ok["world_size"] == k)
                       & (ok["family"] == family)]  # fmt: skip
            for name, group in shown.groupby("implementation", sort=False):
                group = group.sort_values("bytes")
                colour, style = looks[name]
                axis.plot(group["bytes"], group["busbw_GBps"], marker=markers[name], markersize=4,
                          color=colour, linestyle=style, label=name)  # fmt: skip
            _bytes_axis(axis)
            axis.set_yscale("log")
            axis.yaxis.set_major_formatter(PLAIN)
            axis.set_title(f"{family}\n{placement_words(backend, device)}, {k} ranks", fontsize=9)
            axis.set_xlabel("message size (bytes)" if row == len(setups) - 1 else "")
            axis.set_ylabel("busbw (GB/s, log)" if column == 0 else "")
            _reference_line(axis, reference)
    for axis in axes[-1]:
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False, fontsize="small")
    return titled(figure, what, hardware)


def plot_model_against_measured(frame: pd.DataFrame, what: str, hardware: str) -> plt.Figure:
    """Measured seconds (points) and the α-β model's prediction (lines) against message size, log-log:
    one panel per backend/device and rank count (two across), one colour per implementation, one legend
    under the panels. Where the rows keep their iterations (``seconds_all``) the filled points are each
    size's lower quartile, what the model is fitted to, and open rings its median; else the points are
    ``seconds``."""
    rows = frame.dropna(subset=["model_seconds"]).assign(
        implementation=lambda f: f["label"].str.extract(r"\((.*)\)", expand=False).fillna(f["label"])
    )
    quartiles = "seconds_all" in rows
    if quartiles:
        rows = rows.assign(fitted=rows["seconds_all"].map(lambda times: float(np.percentile(times, 25))))
    setups = list(rows.groupby(["backend", "device", "world_size"]).groups)
    columns = 2 if len(setups) > 1 else 1
    grid = max(1, math.ceil(len(setups) / columns))
    figure, axes = plt.subplots(
        grid, columns, figsize=(COLUMN_INCHES, 1.6 + 2.8 * grid), sharex=True, sharey=True, squeeze=False
    )
    names = list(rows["implementation"].unique())
    colours = dict(zip(names, sns.color_palette(n_colors=len(names)), strict=True))
    for axis, (backend, device, k) in zip(axes.flat, setups, strict=False):
        shown = rows[(rows["backend"] == backend) & (rows["device"] == device) & (rows["world_size"] == k)]
        for name, group in shown.groupby("implementation", sort=False):
            group = group.sort_values("bytes")
            points = group["fitted"] if quartiles else group["seconds"]
            axis.plot(group["bytes"], points, "o", markersize=4, color=colours[name], label=name)
            if quartiles:
                axis.plot(group["bytes"], group["seconds"], "o", markersize=5, markerfacecolor="none",
                          color=colours[name], alpha=0.6)  # fmt: skip
            axis.plot(group["bytes"], group["model_seconds"], "-", linewidth=1, color=colours[name])
        _bytes_axis(axis)
        axis.set_yscale("log")
        axis.set_title(f"{placement_words(backend, device)}, {k} ranks", fontsize=9)
        axis.set_ylabel("seconds (log)")
    for axis in axes.flat[len(setups) :]:
        axis.set_visible(False)
    figure = titled(figure, what, hardware)
    figure.subplots_adjust(bottom=figure.subplotpars.bottom + 0.7 / figure.get_size_inches()[1])
    key = (
        "filled: lower quartile of the iterations (fitted) · open: median · lines: α-β model"
        if quartiles
        else "points: measured · lines: α-β model"
    )
    figure.legend(
        *axes.flat[0].get_legend_handles_labels(), loc="lower center", ncol=len(names), frameon=False,
        fontsize="small", title=key, title_fontsize="small",
    )  # fmt: skip
    return figure


def plot_broadcast_pipelining(rows: pd.DataFrame, best: float, what: str, hardware: str) -> plt.Figure:
    """Ring broadcast time against the number of chunks S: measured medians (with a bar from the fastest
    to the slowest iteration where the rows keep them, ``seconds_all``), the formula's line and its best
    chunk count S* (``collectives.model.optimal_chunks``), labelled as the whole number it rounds to."""
    figure, axis = plt.subplots(figsize=(6.5, 3.4))
    rows = rows.sort_values("chunks")
    if "seconds_all" in rows:
        low = rows["seconds"] - rows["seconds_all"].map(min)
        high = rows["seconds_all"].map(max) - rows["seconds"]
        axis.errorbar(rows["chunks"], rows["seconds"], yerr=[low, high], fmt="o", capsize=3,
                      label="measured: median, fastest–slowest iteration")  # fmt: skip
    else:
        axis.plot(rows["chunks"], rows["seconds"], "o", label="measured")
    axis.plot(
        rows["chunks"], rows["model_seconds"], "-", color="black", linewidth=1, label="(S+k−2)(α + Nβ/S)"
    )
    axis.axvline(best, color="grey", linestyle=":", label=f"S* ≈ {best:.0f}")
    axis.set(xscale="log", xlabel="chunks S", ylabel="seconds")
    axis.set_xticks(rows["chunks"].unique(), [f"{c:g}" for c in rows["chunks"].unique()])
    axis.minorticks_off()
    axis.legend(frameon=False, fontsize="small")
    return titled(figure, what, hardware)


def plot_stale_training(
    history: pd.DataFrame, evaluated_on: str, target_loss: float, what: str, hardware: str
) -> plt.Figure:
    """Left: the loss on the evaluated clips against the step, one thin line per run (colour: staleness τ,
    0 = synchronous training), the target dashed. Right: the steps each seed took to the target per τ (seeds
    side by side), with their median; a run that missed the target within its steps is drawn at its last
    step as an ×."""
    figure, (loss_axis, steps_axis) = plt.subplots(1, 2, figsize=(COLUMN_INCHES, 3.4), width_ratios=(3, 2))
    evaluated = history.dropna(subset=["eval_loss"])
    stalenesses = sorted(evaluated["staleness"].unique())
    colours = dict(zip(stalenesses, sns.color_palette("viridis", n_colors=len(stalenesses)), strict=True))
    for (tau, _), run in evaluated.groupby(["staleness", "seed"]):
        loss_axis.plot(run["step"], run["eval_loss"], color=colours[tau], linewidth=1, alpha=0.8)
    loss_axis.axhline(target_loss, color="black", linestyle="--", linewidth=1)
    loss_axis.set(xlabel="step", ylabel=f"loss on the {evaluated_on} clips")
    for position, tau in enumerate(stalenesses):
        runs = evaluated[evaluated["staleness"] == tau].groupby("seed")
        reached = runs.apply(
            lambda r: r.loc[r["eval_loss"] <= target_loss, "step"].min(), include_groups=False
        )
        last = runs["step"].max()
        hit, missed = reached.dropna(), last[reached.isna()]
        shift = {seed: (i - (len(last) - 1) / 2) * 0.1 for i, seed in enumerate(last.index)}  # seeds apart
        steps_axis.plot([position + shift[s] for s in hit.index], hit, "o", color=colours[tau])
        steps_axis.plot([position + shift[s] for s in missed.index], missed, "x", color=colours[tau])
        if len(hit):
            steps_axis.plot(
                [position - 0.25, position + 0.25], [hit.median()] * 2, color="black", linewidth=1
            )
    steps_axis.set_xticks(range(len(stalenesses)), [f"τ = {tau}" for tau in stalenesses])
    steps_axis.set(xlim=(-0.6, len(stalenesses) - 0.4), ylabel=f"steps to loss ≤ {target_loss:g}")
    loss_axis.legend(
        [*(plt.Line2D([], [], color=colours[tau]) for tau in stalenesses),
         plt.Line2D([], [], color="black", linestyle="--", linewidth=1)],
        [*(f"τ = {tau}" for tau in stalenesses), "target"], frameon=False, fontsize="small",
        title="staleness",
    )  # fmt: skip
    return titled(figure, what, hardware)


def plot_efficiency(table: pd.DataFrame, what: str, hardware: str, ceiling: str = "k") -> plt.Figure:
    """Speed-up against ranks, strong and weak scaling side by side, one line per model through the
    medians of its launches with bars over the interval over launches (``scaling.efficiency_table``), and
    the best the ranks can reach (``ceiling``, ``scaling.ranks_setting``): S(k) = k with a device each,
    S(k) = 1 where they share one."""
    kinds = [kind for kind in ("strong", "weak") if kind in set(table["scaling"])]
    width = 3.2 * len(kinds) + 1.1  # the legend sits right of the panels: 7.5 in for two
    figure, axes = plt.subplots(1, len(kinds), figsize=(width, 3.4), squeeze=False, sharey=True)
    for axis, kind in zip(axes[0], kinds, strict=True):
        part = table[table["scaling"] == kind]
        for (model, rows), marker in zip(part.groupby("model"), "os^", strict=False):
            rows = rows.sort_values("ranks")
            errors = [rows["speedup"] - rows["speedup_low"], rows["speedup_high"] - rows["speedup"]]
            axis.errorbar(rows["ranks"], rows["speedup"], yerr=errors, marker=marker, capsize=3, label=model)
        ranks = sorted(part["ranks"].unique())
        if ceiling == "k":
            axis.plot(ranks, ranks, color="black", linewidth=1, linestyle="--", label="ideal: S(k) = k")
        else:
            axis.plot(ranks, [1] * len(ranks), color="black", linewidth=1, linestyle="--",
                      label="one shared device: S(k) = 1")  # fmt: skip
        axis.set(xlabel="ranks k", ylabel="speed-up S(k)", title=f"{kind} scaling", xticks=ranks)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return titled(figure, what, hardware)


def plot_steps_to_target(table: pd.DataFrame, fits: dict, what: str, hardware: str) -> plt.Figure:
    """Steps to the target against the global batch, log-log: per learning-rate rule the median over
    seeds a line, min-max over seeds shaded, the fitted S(B) = S_min (1 + B_knee/B) dashed in its colour
    (the knee of that fixed recipe, not McCandlish's B_crit, which tunes the rate at every batch)."""
    figure, axis = plt.subplots(figsize=(7, 3.8))
    reached = table.dropna(subset=["steps"])
    sns.lineplot(data=reached, x="global_batch", y="steps", hue="rule", style="rule", markers=True,
                 dashes=False, ax=axis, **SPREAD)  # fmt: skip
    batches = sorted(table["global_batch"].unique())
    rules = list(pd.unique(reached["rule"]))  # seaborn's hue order, so each fit takes its rule's colour
    colours = sns.color_palette(n_colors=len(rules))
    for rule, fit in fits.items():
        if 0 < fit["b_crit"] < float("inf") and rule in rules:
            curve = [fit["s_min"] * (1 + fit["b_crit"] / b) for b in batches]
            knee = rf"$B_{{\mathrm{{knee}}}}$ = {fit['b_crit']:.0f}"
            axis.plot(batches, curve, linestyle="--", linewidth=1, color=colours[rules.index(rule)],
                      label=f"fit ({rule} rate): {knee}")  # fmt: skip
    plain_log_axes(axis, batches)
    axis.set(xlabel="global batch B", ylabel="steps to the target loss")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return titled(figure, what, hardware)


def plot_noise_scale(points: pd.DataFrame, what: str, hardware: str, target_loss: float) -> plt.Figure:
    """The gradient noise scale B_simple (above) and the training loss (below, with the target dotted)
    against the training step (``batchsize.noise_points``), stacked so each panel keeps the column's width.

    Its n clips resolve a noise scale below n only: a dashed line marks that limit. A resolved estimate is
    a point, joined to a resolved neighbour, with its bootstrap interval as a capped bar where one was
    measured (to the top of the panel where the draws bound it from below only); an unresolved one (at
    least n, or infinite: the mean gradient lost in the noise) is a lower-bound marker (▲) on the limit,
    joined to nothing, since its value is not known.
    """
    figure, (noise_axis, loss_axis) = plt.subplots(2, 1, figsize=(6.4, 5.8), sharex=True)
    samples = int(points["samples"].max())
    ok = batchsize.resolved(points)
    # NaN breaks the line: resolved points are joined only to resolved neighbours
    noise_axis.plot(points["step"], points["b_simple"].where(ok), marker="o", markersize=4, color="C0",
                    label=r"$B_{\mathrm{simple}}$, resolved", zorder=3)  # fmt: skip
    unresolved = points[~ok]
    if not unresolved.empty:
        bound = r"not resolved: $B_{\mathrm{simple}} > n$ (lower bound)"
        noise_axis.scatter(unresolved["step"], [samples] * len(unresolved), marker="^", s=70, color="C0",
                           zorder=3, label=bound)  # fmt: skip
    noise_axis.axhline(samples, linestyle="--", color="grey", label=f"n = {samples:,} clips")
    noise_axis.set(ylabel=r"$B_{\mathrm{simple}} = \mathrm{tr}(\Sigma)/|G|^2$", yscale="log")
    noise_axis.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # 50, 100, 200: within one decade
    noise_axis.yaxis.set_major_formatter(PLAIN)
    noise_axis.yaxis.set_minor_formatter(NullFormatter())
    bounds = pd.concat([points["b_low"][ok], points["b_high"][ok]])  # the bars drawn: resolved points
    values = [samples, *points["b_simple"].where(ok).dropna(), *bounds[bounds.map(math.isfinite)]]
    # room above the limit n and every point for the legend, which covers none of them
    top = 12 * max(values)
    noise_axis.set_ylim(min(values) / 2, top)
    bars = points[ok & points["b_low"].notna()]
    if not bars.empty:
        middle, high = bars["b_simple"], bars["b_high"].clip(upper=top)
        noise_axis.errorbar(bars["step"], middle, yerr=[middle - bars["b_low"], high - middle], fmt="none",
                            ecolor="C1", elinewidth=1.5, capsize=5, zorder=2,
                            label="5–95 % bootstrap interval")  # fmt: skip
    noise_axis.legend(frameon=True, framealpha=0.95, edgecolor="none", fontsize="small", loc="upper left")
    sns.lineplot(data=points, x="step", y="loss", marker="o", ax=loss_axis)
    loss_axis.axhline(target_loss, linestyle=":", color="grey", label=f"target loss {target_loss:g}")
    loss_axis.legend(frameon=False, fontsize="small", loc="upper right")
    loss_axis.set(xlabel="step", ylabel="loss on the training clips")
    return titled(figure, what, hardware)


def plot_memory(table: pd.DataFrame, what: str) -> plt.Figure:
    """Bytes on the busiest device per ZeRO stage, stacked by what they hold, one panel per model
    (``sharding.memory.device_table``); arithmetic, so no hardware in the title."""
    parts = ["parameters", "gradients", "optimizer", "activations"]
    models = list(dict.fromkeys(table["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(3.1 * len(models) + 1.2, 3.4), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        rows = table[table["model"] == model].set_index("stage")[parts] / 2**20
        rows = rows.rename(columns={"parameters": "weights", "optimizer": "Adam state"})
        rows.plot.bar(stacked=True, ax=axis, legend=False, rot=0)
        axis.set(xlabel="ZeRO stage (0 = DDP)", ylabel="MiB on the busiest device", title=model)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return titled(figure, what)
