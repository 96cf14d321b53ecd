"""helpers.costmodel.figures: chapter 5's figures draw each band and fit the book's column."""

import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from test_plotting import HARDWARE, fits_the_column, title

from helpers.costmodel import figures, gpus, recommend, seed
from helpers.costmodel.configurations import BY_NAME, CONFIGURATIONS


def test_the_roofline_draws_a_line_per_gpu_and_the_band_of_the_gpu_measured():
    shown = ["H100 SXM 80 GB", "GTX 1080 Ti", "H200 SXM 141 GB"]
    roofline = gpus.roofline_table(["ConvNet"], shown, [10, 100])
    measured = pd.DataFrame({"model": ["ConvNet"], "gpu": ["H200 SXM 141 GB"], "batch": [10],
                             "step_seconds": [1e-3], "step_min": [8e-4], "step_max": [1.3e-3]})  # fmt: skip
    figure = figures.plot_roofline(roofline, measured)
    axis = figure.axes[0]
    assert "PREDICTIONS" in title(figure) and fits_the_column(figure)
    lines = {line.get_label(): line for line in axis.lines if line.get_label() in shown}
    for gpu in shown:
        assert list(lines[gpu].get_ydata()) == list(roofline[roofline["gpu"] == gpu]["step_seconds"])
    # one look per GPU, its colour the one its machines have in the renter's figures, a marker of its own
    looks = {gpu: (line.get_color(), line.get_marker()) for gpu, line in lines.items()}
    assert looks["H100 SXM 80 GB"][0] == figures.machine_looks(["AWS p5.48xlarge"])["AWS p5.48xlarge"][0]
    assert len({marker for _, marker in looks.values()}) == len({colour for colour, _ in looks.values()}) == 3
    # the band is shaded for the GPU measured, lowest to highest, where its steps are set against it: eight
    # bands overlapping hid one another
    (band,) = [c for c in axis.collections if isinstance(c, PolyCollection)]
    h200 = roofline[roofline["gpu"] == "H200 SXM 141 GB"]
    assert band.get_facecolor()[0][:3] == pytest.approx(to_rgba(looks["H200 SXM 141 GB"][0])[:3])
    assert band.get_paths()[0].vertices[:, 1].min() == pytest.approx(h200["step_seconds_low"].min())
    assert band.get_paths()[0].vertices[:, 1].max() == pytest.approx(h200["step_seconds_high"].max())
    assert "shaded: the band of the H200 SXM 141 GB, against its steps measured" in title(figure)
    assert lines["H200 SXM 141 GB"].get_linewidth() > lines["H100 SXM 80 GB"].get_linewidth()  # on top
    (crosses,) = [
        c for c in axis.containers if c.get_label() == "measured, one H200 SXM 141 GB (fastest–slowest step)"
    ]
    assert list(crosses.lines[0].get_ydata()) == [0.001]
    spread = crosses.lines[2][0].get_segments()[0]  # the bar from the fastest to the slowest step
    assert (spread[0][1], spread[1][1]) == pytest.approx((8e-4, 1.3e-3))
    # with no GPU measured, every GPU's band is shaded
    unchecked = figures.plot_roofline(roofline)
    bands = [c for c in unchecked.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == len(shown) and "shaded: each GPU's band" in title(unchecked)


def test_speedups_and_the_renters_choice_plot_the_bands():
    frame = recommend.scenario_predictions(
        ("ConvNet", "LinearNet"), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (100,)
    )
    summary = recommend.summarize(frame)
    figure = figures.plot_gpu_speedups(summary, "speed-up")
    assert "PREDICTIONS" in title(figure) and fits_the_column(figure)
    convnet = summary.query("model == 'ConvNet' and gpus == 8").iloc[0]
    points = figure.axes[0].containers[0]  # the errorbar of the first panel (ConvNet)
    assert points.lines[0].get_xdata()[0] == pytest.approx(convnet["speedup"])
    bar = points.lines[2][0].get_segments()[0]
    assert (bar[0][0], bar[1][0]) == pytest.approx((convnet["speedup_low"], convnet["speedup_high"]))
    choice = figures.plot_renter_choice(summary, "choice")
    assert fits_the_column(choice)
    band, marker = choice.axes[0].lines[:2]  # ConvNet's eight H100s: the band's segment, then the point
    assert marker.get_xdata()[0] == pytest.approx(convnet["cost_multiplier"])
    assert marker.get_ydata()[0] == pytest.approx(convnet["speedup"]) and convnet["cost_multiplier"] > 1
    # dollars = price ratio / speed-up: the slowest end is the dearest, so the band is one segment
    assert list(band.get_xdata()) == pytest.approx(
        [convnet["cost_multiplier_high"], convnet["cost_multiplier_low"]]
    )
    assert list(band.get_ydata()) == pytest.approx([convnet["speedup_low"], convnet["speedup_high"]])
    assert convnet["cost_multiplier_high"] == pytest.approx(8 / convnet["speedup_low"])  # p5: 8 × one's price
    # every machine priced: each point in its machine's look (its GPU's colour, its count's marker), the
    # same look the time-to-result figure gives it, drawn hollow; one size for a point that stands alone,
    # smaller inside another's ring where two machines are predicted at one point
    machines = [config.name for config in CONFIGURATIONS]
    every = recommend.summarize(recommend.scenario_predictions(("ConvNet",), machines, (100,)))
    shown = every[(every["gpus"] > 1) & every["cost_multiplier"].notna()]
    drawn = figures.plot_renter_choice(every, "every machine").axes[0].lines
    points = {line.get_label(): line for line in drawn if line.get_label() in set(shown["machine"])}
    assert len(points) == len(shown) > 5
    every_machine = figures.machine_looks(machines)
    bands = pd.DataFrame({"machine": list(points), "global_batch": 100, "seconds_to_target": 1.0,
                          "seconds_to_target_low": 0.5, "seconds_to_target_high": 2.0})  # fmt: skip
    lines = {line.get_label(): line for line in figures.plot_time_to_result(bands, "t").axes[0].lines}
    for machine, point in points.items():
        colour, _, marker = every_machine[machine]
        assert (point.get_color(), point.get_marker()) == (
            colour,
            marker,
        ) and point.get_markerfacecolor() == "none"
        assert lines[machine].get_color() == colour  # the other machine figure's colour for it
    assert len({every_machine[m][0] for m in points}) == len(
        {BY_NAME[m].gpu for m in points}
    )  # a GPU, a colour
    alone = [p.get_markersize() for p in points.values()]
    assert max(alone) == figures.RING and alone.count(figures.RING) >= len(points) - 2
    two = pd.concat([shown.iloc[:1], shown.iloc[:1].assign(machine=shown["machine"].iloc[1])])
    nested = [line for line in figures.plot_renter_choice(two, "two").axes[0].lines if line.get_label() in
              set(two["machine"])]  # fmt: skip
    assert [line.get_markersize() for line in nested] == [figures.RING, figures.RING / 1.8]
    # a reader's model is registered with the digest of what was counted; its panel is titled by its name
    counted = figures.plot_renter_choice(summary.replace({"model": {"ConvNet": "ConvNet [0e882f44]"}}), "x")
    assert "ConvNet" in [axis.get_title() for axis in counted.axes]
    assert gpus.shown_name("MelCNN [0e882f44]") == "MelCNN" and gpus.shown_name("Net [v2]") == "Net [v2]"


def test_the_seed_check_and_time_to_result_draw_central_lines_in_bands():
    check = seed.seed_check(("ConvNet",))
    figure = figures.plot_seed_check(check)
    assert "PREDICTIONS" in title(figure) and "GTX 1080 Ti" in title(figure) and fits_the_column(figure)
    four = check[(check["gpus"] == 4) & (check["scenario"] == "central")].sort_values("global_batch")
    line = next(line for line in figure.axes[0].lines if line.get_label() == "4 GPUs")
    assert list(line.get_ydata()) == pytest.approx(list(four["epoch_seconds"]))
    bands = pd.DataFrame({"model": "M", "machine": ["a", "a"], "gpus": 1, "global_batch": [10, 100],
                          "seconds_to_target": [5.0, 2.0], "seconds_to_target_low": [4.0, 1.0],
                          "seconds_to_target_high": [6.0, 3.0]})  # fmt: skip
    figure = figures.plot_time_to_result(bands, "to target")
    assert fits_the_column(figure)
    assert list(figure.axes[0].lines[0].get_ydata()) == [5.0, 2.0] and len(figure.axes[0].collections) == 1
    # every machine chapter 5 prices: no two lines look alike; a GPU's machines share its colour and
    # differ by their count's line, and two GPUs never share a colour
    names = [configuration.name for configuration in CONFIGURATIONS]
    many = pd.concat([bands.assign(machine=name) for name in names])
    lines = figures.plot_time_to_result(many, "to target").axes[0].lines
    looks = {line.get_label(): (line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines}
    assert len(set(looks.values())) == len(looks) == len(names)
    colours = {BY_NAME[name].gpu: looks[name][0] for name in names}
    assert all(looks[name][0] == colours[BY_NAME[name].gpu] for name in names)
    assert len(set(colours.values())) == len(colours)
    assert {looks[name][1] for name in names if BY_NAME[name].gpus == 8} == {":"}


def test_loss_fits_and_step_time_validation_per_method():
    curve = {"curve": "c", "unit": "step", "steps": [1, 2, 3, 4], "losses": [2.0, 1.5, 1.3, 1.2]}
    fits = pd.DataFrame({"fitted_points": [2], "beta0": [1.0], "beta1": [1.0], "beta2": [1.0],
                         "target_loss": [1.3], "fitted_up_to_step": [2.0],
                         "out_of_sample": [True]})  # fmt: skip
    figure = figures.plot_loss_fits([curve] * 7, pd.concat([fits] * 7), "fits", HARDWARE)
    assert "out of sample" in figure.axes[0].get_title() and HARDWARE in title(figure)
    shown = [axis for axis in figure.axes if axis.get_visible()]  # the loss named on the first column's
    assert [axis.get_ylabel() for axis in shown] == ["training loss", ""] * 3 + ["training loss"]
    # seven curves: two panels across, four rows, the unused panel hidden; within the column
    assert sum(axis.get_visible() for axis in figure.axes) == 7 and len(figure.axes) == 8
    assert fits_the_column(figure) and figure.get_size_inches()[1] < 10  # four rows of 2 in, the legend
    # a long curve name wraps inside its panel instead of running into the next panel's title
    long = {**curve, "curve": "ConvNet, chapter 3 DDP on 4 ranks, seed 0, batch 100"}
    wrapped = figures.plot_loss_fits([long] * 3, pd.concat([fits] * 3), "fits", HARDWARE)
    assert all(len(line) <= 36 for line in wrapped.axes[0].get_title().splitlines())
    validated = pd.DataFrame(
        {
            "model": ["A", "A"],
            "method": ["x", "y"],
            "step_seconds": [1.0, 1.0],
            "predicted_seconds": [1.2, 0.9],
            "step_min": [0.9, 0.9],
            "step_max": [1.1, 1.1],
        }
    )
    figure = figures.plot_predicted_against_measured(validated, "per method", HARDWARE)
    assert [axis.get_title() for axis in figure.axes] == ["x", "y"] and fits_the_column(figure)
    assert figure.axes[0].containers[0].lines[0].get_ydata()[0] == 1.2


def test_the_step_model_check_draws_each_models_ratios_and_band():
    from test_costmodel_validate import hand_table

    table = hand_table()
    figure = figures.plot_step_model_check(table, HARDWARE)
    assert [axis.get_title() for axis in figure.axes[:2]] == ["A held out", "B held out"]
    assert fits_the_column(figure) and HARDWARE in title(figure)
    lines = {line.get_label(): line for line in figure.axes[1].lines}
    assert list(lines["step model, out of sample"].get_ydata()) == [1.5, 1.5, 1.5]
    assert list(lines["roofline (chapter 5)"].get_ydata()) == [0.2, 0.2, 0.2]
    band = figure.axes[1].collections[0].get_paths()[0].vertices[:, 1]  # band_low..band_high over measured
    assert band.min() == pytest.approx(0.8) and band.max() == pytest.approx(1.6)
