"""helpers.plotting: figures are drawn from tidy frames and their titles name the hardware."""

import math

import pandas as pd
import pytest

from helpers import plotting
from helpers.dataparallel_results import LINE_HOLDS

HARDWARE = "2-core Test CPU, no GPU"


def title(figure):
    return figure._suptitle.get_text()


def line_values(axis) -> list[list[float]]:
    """The y values of every line drawn on ``axis`` with data, rounded: what a reader sees plotted."""
    return [[round(float(y), 6) for y in line.get_ydata()] for line in axis.lines if len(line.get_ydata())]


def bar_heights(axis) -> list[float]:
    return [round(patch.get_height(), 6) for patch in axis.patches if patch.get_height()]


def fits_the_column(figure, inches: float = 7.5) -> bool:
    """The figure with everything drawn around it (legends outside the axes too) fits the book's column."""
    figure.canvas.draw()
    return figure.get_tightbbox().width <= inches + 0.05


def test_sweep_and_precision_titles_name_the_hardware():
    steps = pd.DataFrame(
        {
            "model": ["LinearNet"] * 4 + ["ConvNet"] * 4,
            "batch_size": [10, 10, 20, 20] * 2,
            "repeat": [0, 1] * 4,
            "epoch_seconds": [4.0, 4.2, 2.0, 2.1, 9.0, 9.5, 8.0, 8.1],
            "samples_per_second": [600.0, 590, 1200, 1190, 300, 290, 330, 320],
            "step_seconds": [0.1] * 8,
        }
    )
    figure = plotting.plot_sweep(steps, HARDWARE)
    assert HARDWARE in title(figure) and "median of 2 timed steps, band min-max" in title(figure)
    # the medians of each model's repeats at batches 10 and 20: epoch seconds left, samples/s right
    assert line_values(figure.axes[0])[:2] == [[4.1, 2.05], [9.25, 8.05]]
    assert line_values(figure.axes[1])[:2] == [[595.0, 1195.0], [295.0, 325.0]]
    memory = pd.DataFrame({"model": ["LinearNet"] * 2 + ["ConvNet"] * 2, "precision": ["float32", "bf16"] * 2,
                           "saved_mib_per_sample": [0.05, 0.025, 4.8, 3.1]})  # fmt: skip
    timed = steps.assign(precision=["float32", "bf16"] * 4,
                         step_seconds=[0.1, 0.05, 0.3, 0.07, 1.0, 0.6, 1.2, 0.8])  # fmt: skip
    precision = plotting.plot_precision(timed, memory, HARDWARE)
    assert HARDWARE in title(precision) and fits_the_column(figure) and fits_the_column(precision)
    # linear axes from zero, so that a bar twice as tall is twice as much
    assert all(axis.get_yscale() == "linear" and axis.get_ylim()[0] == 0 for axis in precision.axes)
    # time panels first (LinearNet, ConvNet), then memory: medians in ms, float32 then bf16, each labelled
    # (LinearNet float32 steps 0.1 and 0.3 s: 200 ms; bf16 0.05 and 0.07: 60 ms; ConvNet 1,100 and 700 ms)
    assert [bar_heights(axis) for axis in precision.axes] == [
        [200, 60],
        [1100, 700],
        [0.05, 0.025],
        [4.8, 3.1],
    ]
    assert [[text.get_text() for text in axis.texts] for axis in precision.axes] == [
        ["200", "60"], ["1,100", "700"], ["0.05", "0.025"], ["4.8", "3.1"],
    ]  # fmt: skip
    assert [axis.get_title() for axis in precision.axes[::2]] == [
        "LinearNet: one training step", "LinearNet: kept for backward",
    ]  # fmt: skip


def test_training_and_profile_figures(fsdd):
    history = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2 + ["LinearNet"] * 2,
            "epoch": [1, 2] * 2,
            "train_loss": [2.3, 2.0] * 2,
            "test_loss": [2.3, 2.1] * 2,
            "train_accuracy": [0.1, 0.3] * 2,
            "test_accuracy": [0.1, 0.2] * 2,
        }
    )
    training = plotting.plot_training(history, HARDWARE)
    assert HARDWARE in title(training) and fits_the_column(training)
    # panels: loss row (ConvNet, LinearNet), then accuracy; each a training and a test line over 2 epochs
    assert line_values(training.axes[0])[:2] == [[2.3, 2.0], [2.3, 2.1]]
    assert line_values(training.axes[3])[:2] == [[0.1, 0.3], [0.1, 0.2]]
    waveforms = plotting.plot_waveforms(fsdd)
    assert len(waveforms.axes) == 10 and fits_the_column(waveforms)
    # panel d draws george's take 0 of digit d, all 12,000 samples as the models see them
    george = fsdd.speaker_names.index("george")
    for digit in (0, 9):
        row = int(((fsdd.digits == digit) & (fsdd.speakers == george) & (fsdd.takes == 0)).nonzero()[0, 0])
        drawn = waveforms.axes[digit].lines[0].get_ydata()
        assert len(drawn) == 12_000 and (drawn == fsdd.waveforms[row, 0].numpy()).all()
    lengths = plotting.plot_lengths(fsdd.to_frame())
    assert "3,000" in title(lengths) and fits_the_column(lengths)
    assert sum(patch.get_height() for patch in lengths.axes[0].patches) == 3000  # every recording, stacked


def test_profile_figure_labels_its_bars_and_names_its_clock():
    phases = pd.DataFrame(
        {"model": ["ConvNet"] * 3, "phase": ["forward", "backward", "optimizer"], "host_seconds": [1, 2, 0.1]}
    ).assign(device_seconds=None)
    phases = pd.concat([phases, phases.assign(model="LinearNet")])
    profile = plotting.plot_profile(phases, HARDWARE)
    assert HARDWARE in title(profile) and fits_the_column(profile)
    assert "host clock" in title(profile) and not profile.legends  # one clock: named, no legend
    assert all(axis.get_legend() is None for axis in profile.axes)
    assert [bar_heights(axis) for axis in profile.axes] == [[1000, 2000, 100]] * 2  # host ms per phase
    assert [text.get_text() for text in profile.axes[0].texts] == ["1,000", "2,000", "100"]
    assert [label.get_text() for label in profile.axes[0].get_xticklabels()] == [
        "forward", "backward", "optimizer",
    ]  # fmt: skip
    on_gpu = plotting.plot_profile(phases.assign(device_seconds=[0.5, 1.5, 0.01] * 2), HARDWARE)
    assert fits_the_column(on_gpu) and bar_heights(on_gpu.axes[0]) == [1000, 2000, 100, 500, 1500, 10]
    assert [text.get_text() for text in on_gpu.legends[0].get_texts()] == ["host", "GPU (CUDA events)"]


def test_dataparallel_figures_name_the_hardware():
    sweep = pd.DataFrame(
        {
            "model": ["LinearNet", "ConvNet"] * 2,
            "replicas": [1, 1, 2, 2],
            "batch_size": [20, 50, 20, 50],
            "repeat": [0, 0, 0, 0],
            "epoch_seconds": [10.0, 4.0, 19.0, 7.0],
            "transfer_seconds": [0.0, 0.0, 0.02, 0.02],
            "bytes_per_step": [0, 0, 96_000_000, 97_000_000],
        }
    )
    dataparallel_sweep = plotting.plot_dataparallel_sweep(sweep, HARDWARE)
    assert HARDWARE in title(dataparallel_sweep) and fits_the_column(dataparallel_sweep)
    plotted = sorted(
        value for axis in dataparallel_sweep.axes for line in line_values(axis) for value in line
    )
    assert {4.0, 7.0, 10.0, 19.0} <= set(plotted)  # every epoch time is drawn
    phases = pd.DataFrame(
        {"model": ["LinearNet", "LinearNet", "ConvNet", "ConvNet"], "replicas": [1, 2, 1, 2],
         "phase": ["scatter_inputs", "reduce_gradients"] * 2, "seconds": [0.1, 0.2, 1.0, 1.1],
         "batch_size": 30}
    )  # fmt: skip
    breakdown = plotting.plot_phase_breakdown(phases, HARDWARE)
    assert HARDWARE in title(breakdown) and fits_the_column(breakdown)
    assert "step goes at batch 30, phase by phase (first at the bottom)" in title(breakdown)
    heights = sorted(height for axis in breakdown.axes for height in bar_heights(axis))
    assert heights == pytest.approx([100, 200, 1000, 1100])  # in ms
    assert {axis.get_ylabel() for axis in breakdown.axes} == {"ms per step"}
    legend = [text.get_text() for text in breakdown.legends[0].get_texts()]
    assert legend == ["scatter inputs", "reduce gradients"]
    fit = {"intercept_seconds": 0.0, "seconds_per_byte": 2e-10, "bytes_per_second": 5e9, "r_squared": 0.99}
    points = pd.DataFrame({"phases": ["broadcast parameters"] * 2 + ["reduce gradients"] * 2,
                           "model": "LinearNet", "replicas": [2, 4] * 2, "bytes": [1e6, 3e6] * 2,
                           "seconds": [2e-4, 6e-4, 5e-4, 15e-4]})  # fmt: skip
    fits = {"broadcast parameters": fit, "reduce gradients": dict(fit, bytes_per_second=2e9)}
    against = plotting.plot_time_against_bytes(points, fits, HARDWARE, LINE_HOLDS)
    assert "Time = const x Transfer" in title(against) and fits_the_column(against)
    assert [axis.get_title().split("\n")[1] for axis in against.axes] == [
        "fit: 5.00 GB/s, R² 0.99", "fit: 2.00 GB/s, R² 0.99",
    ]  # fmt: skip

    def fitted_lines(figure):  # the black fit line of each panel (the legend's markers are lines too)
        return [sum(line.get_color() == "black" for line in axis.lines) for axis in figure.axes]

    assert fitted_lines(against) == [1, 1]
    loose = plotting.plot_time_against_bytes(points, {**fits, "reduce gradients": dict(fit, r_squared=0.02)},
                                             HARDWARE, LINE_HOLDS)  # fmt: skip
    assert loose.axes[1].get_title().endswith("no line: R² 0.02,\ntime does not follow bytes")
    assert fitted_lines(loose) == [1, 0]


def test_bar_chart_names_the_hardware():
    frame = pd.DataFrame({"model": ["LinearNet"] * 4, "ranks": [1, 1, 2, 2], "seconds": [0.4, 0.5, 1.1, 1.0]})
    bars = plotting.plot_bars(frame, "model", "seconds", "ranks", "DDP", HARDWARE)
    assert HARDWARE in title(bars) and bar_heights(bars.axes[0]) == [0.45, 1.05]  # medians per rank count
    # each bar's min-max line (caps and stem, NaN-separated) runs from the fastest to the slowest repeat
    spans = [(min(y for y in line.get_ydata() if y == y), max(y for y in line.get_ydata() if y == y))
             for line in bars.axes[0].lines]  # fmt: skip
    assert spans == [(0.4, 0.5), (1.0, 1.1)]
    assert (
        plotting.plot_bars(frame, "ranks", "seconds", "ranks", "DDP", HARDWARE).axes[0].get_legend() is None
    )


def test_collective_figures_name_the_hardware():
    frame = pd.DataFrame(
        {
            "label": ["all_reduce (dist)"] * 2 + ["broadcast (ring, S=1)", "broadcast (ring, S=4)"],
            "operation": ["all_reduce", "all_reduce", "ring_broadcast", "ring_broadcast"],
            "collective": ["all_reduce", "all_reduce", "broadcast", "broadcast"],
            "backend": "gloo", "device": "cpu", "status": "ok", "chunks": [None, None, 1, 4], "world_size": 2,
            "bytes": [1024, 2**20, 2**20, 2**20], "seconds": [1e-4, 1e-3, 1e-3, 2e-3],
            "busbw_GBps": [0.01, 1.0, 1.0, 0.5], "model_seconds": [1.1e-4, 0.9e-3, 1.2e-3, 1.8e-3],
        }
    )  # fmt: skip
    three = frame.assign(world_size=3)
    figure = plotting.plot_bandwidth(pd.concat([frame, three]), "Bus bandwidth", HARDWARE, ("a copy", 5e9))
    assert HARDWARE in title(figure)
    # the book's column: 7.5 in at most; a row per rank count, all-reduce left, other collectives right
    assert figure.get_size_inches()[0] <= 7.5 and len(figure.axes) == 4
    assert figure.axes[0].get_yscale() == "log" and figure.axes[0].lines[-1].get_linestyle() == "--"
    # the all-reduce's bus bandwidth as measured (GB/s), and the copy's 5 GB/s as the dashed reference
    assert list(figure.axes[0].lines[0].get_ydata()) == [0.01, 1.0]
    assert set(figure.axes[0].lines[-1].get_ydata()) == {5.0}
    legends = [axis.get_legend() for axis in figure.axes if axis.get_legend()]
    assert [[t.get_text() for t in legend.texts] for legend in legends] == [
        ["all_reduce (dist)"],
        ["broadcast (ring)"],
    ]
    modelled = plotting.plot_model_against_measured(pd.concat([frame[:2], three[:2]]), "α-β", HARDWARE)
    assert HARDWARE in title(modelled) and modelled.get_size_inches()[0] <= 7.5
    assert [axis.get_title() for axis in modelled.axes] == [
        "Gloo with CPU tensors, 2 ranks",
        "Gloo with CPU tensors, 3 ranks",
    ]
    assert figure.axes[1].get_title() == "other collectives\nGloo with CPU tensors, 2 ranks"
    # the other collectives: a colour per operation, the study's own implementation dashed beside torch's
    torchs = frame[2:3].assign(label="broadcast (torch.distributed)", operation="broadcast")
    right = plotting.plot_bandwidth(pd.concat([frame, torchs]), "Bus bandwidth", HARDWARE).axes[1]
    looks = {line.get_label(): (line.get_color(), line.get_linestyle()) for line in right.lines}
    assert looks["broadcast (torch.distributed)"] == (looks["broadcast (ring)"][0], "-")
    assert looks["broadcast (ring)"][1] == "--"
    pipelined = plotting.plot_broadcast_pipelining(frame[2:], 2.6, "pipelining", HARDWARE)
    assert HARDWARE in title(pipelined) and "S* ≈ 3" in [  # a chunk count is a whole number
        t.get_text() for t in pipelined.axes[0].get_legend().texts
    ]
    # with every iteration kept: filled points at each size's lower quartile (what the line is fitted to),
    # open rings at its median; the pipelining figure's bars from the fastest to the slowest iteration
    kept = frame.assign(seconds_all=[[1e-4, 1e-4, 3e-4, 3e-4], [1e-3] * 4, [1e-3, 2e-3], [2e-3, 4e-3]])
    kept = kept.assign(seconds=[2e-4, 1e-3, 1.5e-3, 3e-3])
    quartiles = plotting.plot_model_against_measured(kept[:2], "α-β", HARDWARE)
    drawn = quartiles.axes[0].lines
    assert list(drawn[0].get_ydata()) == [1e-4, 1e-3] and list(drawn[1].get_ydata()) == [2e-4, 1e-3]
    assert drawn[1].get_markerfacecolor() == "none"
    assert quartiles.legends[0].get_title().get_text().startswith("filled: lower quartile of the iterations")
    spread = plotting.plot_broadcast_pipelining(kept[2:], 2.6, "pipelining", HARDWARE)
    bars = spread.axes[0].containers[0]  # the error bars: 1.5 ms (1-2 ms) at S = 1, 3 ms (2-4 ms) at S = 4
    assert [list(segment[:, 1]) for segment in bars.lines[2][0].get_segments()] == [
        [1e-3, 2e-3],
        [2e-3, 4e-3],
    ]
    history = pd.DataFrame(
        {"step": [5, 10, 5, 10, 5, 10], "staleness": [0, 0, 4, 4, 4, 4], "seed": [0, 0, 0, 0, 1, 1],
         "eval_loss": [2.1, 1.9, 2.2, 2.1, 2.0, 1.95]}
    )  # fmt: skip
    stale = plotting.plot_stale_training(history, "training", 2.0, "stale", HARDWARE)
    assert HARDWARE in title(stale) and stale.get_size_inches()[0] <= 7.5
    steps_axis = stale.axes[1]
    # τ = 0 reached 2.0 at step 10, τ = 4 with seed 1 at step 5; seed 0 missed it (an × at its last step)
    assert [list(line.get_ydata()) for line in steps_axis.lines] == [[10], [], [10, 10], [5], [10], [5, 5]]
    launches = pd.DataFrame(
        {"bucket cap (MiB)": [0.25, 0.25, 25, 25], "step time (s)": [2.0, 2.1, 1.5, 1.6],
         "buckets per step": [2, 2, 1, 1]}
    )  # fmt: skip
    figure = plotting.plot_bucket_sweep(launches, "buckets", HARDWARE)
    assert HARDWARE in title(figure) and figure.get_figwidth() <= 7.5  # the book's column
    assert [axis.get_xlabel() for axis in figure.axes] == ["bucket cap (MiB)"] * 2
    assert [axis.get_ylabel() for axis in figure.axes] == ["step time (s)", "buckets per step"]
    # the median launch per cap (2.05 s at 0.25 MiB, 1.55 s at 25 MiB), and the buckets each cap makes
    assert [round(y, 6) for y in figure.axes[0].lines[0].get_ydata()] == [2.05, 1.55]
    assert list(figure.axes[1].lines[0].get_ydata()) == [2, 1]


def test_an_unresolved_noise_scale_is_a_lower_bound_joined_to_nothing():
    points = pd.DataFrame({"step": [0, 100, 200, 300], "loss": [2.4, 2.2, 2.0, 1.9], "samples": 256,
                           "b_simple": [57.6, float("inf"), 106.3, 300.0], "b_low": math.nan,
                           "b_high": math.nan})  # fmt: skip
    figure = plotting.plot_noise_scale(points, "noise", "this machine", target_loss=2.2)
    noise_axis = figure.axes[0]
    # n = 256 clips resolve 57.6 and 106.3; the infinite and the 300 are lower bounds on the dashed n line
    assert [line.get_ydata()[0] for line in noise_axis.lines if line.get_linestyle() == "--"] == [256]
    bounds = [c for c in noise_axis.collections if c.get_label().startswith("not resolved")]
    assert len(bounds) == 1 and bounds[0].get_offsets().tolist() == [[100.0, 256.0], [300.0, 256.0]]
    # the resolved line breaks at the unresolved step: no segment joins 0 to 200 through step 100
    label = r"$B_{\mathrm{simple}}$, resolved"
    resolved = next(line for line in noise_axis.lines if line.get_label() == label)
    values = resolved.get_ydata().tolist()
    assert values[0] == 57.6 and values[2] == 106.3 and math.isnan(values[1]) and math.isnan(values[3])
    assert "this machine" in figure._suptitle.get_text()
    assert figure.get_size_inches()[0] <= 7.5  # the book's column
    assert not [c for c in noise_axis.collections if c.get_label().startswith("5–95")]  # none measured


def test_a_noise_interval_is_a_bar_to_the_panel_top_where_it_is_unbounded():
    points = pd.DataFrame({"step": [0, 200], "loss": [2.4, 2.2], "samples": 2700, "b_simple": [60.0, 500.0],
                           "b_low": [50.0, 300.0], "b_high": [75.0, float("inf")]})  # fmt: skip
    figure = plotting.plot_noise_scale(points, "noise", "this machine", target_loss=2.25)
    noise_axis, loss_axis = figure.axes
    bars = next(c for c in noise_axis.containers if c.get_label() == "5–95 % bootstrap interval")
    top = noise_axis.get_ylim()[1]
    segments = [segment.tolist() for segment in bars.lines[2][0].get_segments()]
    assert segments == [[[0, 50], [0, 75]], [[200, 300], [200, top]]]
    # nothing unresolved here, so no lower-bound marker in the legend; the target is on the loss panel
    assert not [c for c in noise_axis.collections if c.get_label().startswith("not resolved")]
    assert [line.get_ydata()[0] for line in loss_axis.lines if line.get_linestyle() == ":"] == [2.25]


def test_chapter_six_figures_fit_the_column_and_say_what_they_show():
    efficiency = pd.DataFrame({"model": ["M", "M"], "scaling": ["strong", "strong"], "ranks": [1, 2],
                               "speedup": [1.0, 1.6], "speedup_low": [0.9, 1.46],
                               "speedup_high": [1.1, 1.75]})  # fmt: skip
    figure = plotting.plot_efficiency(efficiency, "speed-up", HARDWARE)
    assert figure.get_size_inches()[0] <= 7.5 and HARDWARE in title(figure)
    bars = figure.axes[0].containers[0].lines[2][0].get_segments()[1]  # the k = 2 bar: its interval
    assert [y for _, y in bars] == pytest.approx([1.46, 1.75])
    assert "ideal: S(k) = k" in figure.axes[0].get_legend_handles_labels()[1]
    shared = plotting.plot_efficiency(efficiency, "speed-up", HARDWARE, ceiling="one")
    line = next(line for line in shared.axes[0].lines if line.get_label() == "one shared device: S(k) = 1")
    assert list(line.get_ydata()) == [1, 1]
    steps = pd.DataFrame({"rule": ["fixed"] * 3, "seed": [0] * 3, "global_batch": [8, 32, 128],
                          "steps": [525.0, 190.0, 90.0]})  # fmt: skip
    fits = {"fixed": {"s_min": 63.0, "b_crit": 59.4, "e_min": 3719.0}}
    figure = plotting.plot_steps_to_target(steps, fits, "steps", HARDWARE)
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert r"fit (fixed rate): $B_{\mathrm{knee}}$ = 59" in labels and figure.get_size_inches()[0] <= 7.5
    from helpers.sharding import memory

    figure = plotting.plot_memory(memory.device_table(["LinearNet", "ConvNet"], 4, 32), "bytes")
    labels = figure.axes[-1].get_legend_handles_labels()[1]
    assert labels == ["weights", "gradients", "Adam state", "activations"]
    assert figure.get_size_inches()[0] <= 7.5


def test_crowded_log_ticks_keep_their_marks_and_drop_a_label():
    # the seed's sweep, 10 to 600: 1/16 of its 1.78 decades is 0.111; 500 lies 0.097 past 400, 600 0.176
    seed = [10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600]
    shown = ["10", "20", "30", "50", "70", "100", "150", "200", "300", "400", "", "600"]
    assert plotting.spaced_labels(seed) == shown
    assert plotting.spaced_labels([8, 32, 128, 256]) == ["8", "32", "128", "256"]


def test_a_narrow_log_axis_keeps_several_labelled_ticks():
    """Chapter 7's WaveTransformer panel spanned 0.98 to 1.7 on a log axis: ticks at 1, 2 and 5 of each
    decade left it one label, "1"; a wide axis keeps 1, 2 and 5."""
    import matplotlib.pyplot as plt

    figure, (narrow, wide) = plt.subplots(1, 2)
    narrow.plot([1, 2], [1.0, 1.5])
    narrow.set_ylim(1.0, 1.5)  # ends on round ticks, as chapter 7's 0.0125
    wide.plot([1, 2], [0.5, 60])
    for axis in (narrow, wide):
        axis.set_yscale("log")
        plotting.log_ticks(axis.yaxis)
    figure.canvas.draw()

    def shown(axis):
        low, high = axis.get_ylim()
        return [
            t.get_text()
            for t in axis.get_yticklabels()
            if t.get_text() and low <= t.get_position()[1] <= high
        ]

    assert len(shown(narrow)) >= 3
    low, high = narrow.get_ylim()  # none on the frame, where its gridline doubles the edge
    assert all(low * 1.01 < tick < high / 1.01 for tick in narrow.get_yticks() if low <= tick <= high)
    assert shown(wide) == ["0.5", "1", "2", "5", "10", "20", "50"]
    plt.close(figure)
