"""helpers.plotting: figures are drawn from tidy frames and their titles name the hardware."""

import pandas as pd

from helpers import plotting
from helpers.costmodel import recommend

HARDWARE = "2-core Test CPU, no GPU"


def title(figure):
    return figure._suptitle.get_text()


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
    memory = pd.DataFrame({"model": ["ConvNet"] * 2, "precision": ["float32", "bf16"],
                           "saved_mib_per_sample": [4.8, 3.1]})  # fmt: skip
    timed = steps.assign(precision=["float32", "bf16"] * 4)
    assert HARDWARE in title(plotting.plot_precision(timed, memory, HARDWARE))


def test_training_and_profile_figures(fsdd):
    history = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2,
            "epoch": [1, 2],
            "train_loss": [2.3, 2.0],
            "test_loss": [2.3, 2.1],
            "train_accuracy": [0.1, 0.3],
            "test_accuracy": [0.1, 0.2],
        }
    )
    assert HARDWARE in title(plotting.plot_training(history, HARDWARE))
    phases = pd.DataFrame(
        {"model": ["ConvNet"] * 3, "phase": ["forward", "backward", "optimizer"], "host_seconds": [1, 2, 0.1]}
    ).assign(device_seconds=None)
    assert HARDWARE in title(plotting.plot_profile(phases, HARDWARE))
    assert len(plotting.plot_waveforms(fsdd).axes) == 10
    assert "3,000" in title(plotting.plot_lengths(fsdd.to_frame()))


def test_dataparallel_figures_name_the_hardware():
    sweep = pd.DataFrame(
        {
            "model": ["LinearNet"] * 4,
            "replicas": [1, 1, 2, 2],
            "batch_size": [20, 50, 20, 50],
            "repeat": [0, 0, 0, 0],
            "epoch_seconds": [10.0, 4.0, 19.0, 7.0],
            "transfer_seconds": [0.0, 0.0, 0.02, 0.02],
            "bytes_per_step": [0, 0, 96_000_000, 97_000_000],
        }
    )
    assert HARDWARE in title(plotting.plot_dataparallel_sweep(sweep, HARDWARE))
    phases = pd.DataFrame(
        {"model": ["LinearNet", "LinearNet", "ConvNet", "ConvNet"], "replicas": [1, 2, 1, 2],
         "phase": ["forward"] * 4, "seconds": [0.1, 0.2, 1.0, 1.1]}
    )  # fmt: skip
    assert HARDWARE in title(plotting.plot_phase_breakdown(phases, HARDWARE))
    fit = {"intercept_seconds": 0.0, "seconds_per_byte": 2e-10, "bytes_per_second": 5e9, "r_squared": 0.99}
    assert "Time = const x Transfer" in title(plotting.plot_time_against_bytes(sweep[2:], fit, HARDWARE))


def test_bar_chart_names_the_hardware():
    frame = pd.DataFrame({"model": ["LinearNet"] * 4, "ranks": [1, 1, 2, 2], "seconds": [0.4, 0.5, 1.1, 1.0]})
    assert HARDWARE in title(plotting.plot_bars(frame, "model", "seconds", "ranks", "DDP", HARDWARE))
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
    figure = plotting.plot_bandwidth(frame, "Bus bandwidth", HARDWARE, ("a copy", 5e9))
    assert HARDWARE in title(figure)
    assert figure.axes[0].get_yscale() == "log" and figure.axes[0].lines[-1].get_linestyle() == "--"
    assert HARDWARE in title(plotting.plot_model_against_measured(frame[:2], "α-β", HARDWARE))
    pipelined = plotting.plot_broadcast_pipelining(frame[2:], 2.5, "pipelining", HARDWARE)
    assert HARDWARE in title(pipelined) and "S* = 2.5" in [
        t.get_text() for t in pipelined.axes[0].get_legend().texts
    ]
    history = pd.DataFrame(
        {"step": [1, 2, 1, 2], "staleness": [0, 0, 4, 4], "batch_loss": [2.3, 2.2, 2.3, 2.4],
         "eval_accuracy": [None, 0.2, None, 0.1]}
    )  # fmt: skip
    assert HARDWARE in title(plotting.plot_stale_training(history, "training", "stale", HARDWARE))
    steps = pd.DataFrame(
        {"bucket_cap_mb": [0.25, 0.25, 25, 25], "step_seconds": [2.0, 2.1, 1.5, 1.6],
         "buckets_per_step": [2, 2, 1, 1]}
    )  # fmt: skip
    assert HARDWARE in title(plotting.plot_bucket_sweep(steps, "buckets", HARDWARE))


def test_gpu_predictions_are_titled_as_predictions():
    roofline = recommend.roofline_table(["ConvNet"], ["H100 SXM 80 GB", "GTX 1080 Ti"], [10, 100])
    measured = pd.DataFrame({"model": ["ConvNet"], "batch": [10], "step_seconds": [0.001]})
    assert "PREDICTIONS" in title(plotting.plot_roofline(roofline, measured))
    links = ("PCIe 4.0 x16", "PCIe 5.0 x16")
    frame = recommend.predictions(("ConvNet", "LinearNet"), ("H100 SXM 80 GB",), links, (10, 100), (1, 2))
    assert "PREDICTIONS" in title(plotting.plot_gpu_speedups(frame, "speed-up"))
    decided = frame.query("method == 'ddp_overlap'").assign(decision=lambda f: recommend.decide(f))
    figure = plotting.plot_decision_map(decided, recommend.DECISIONS, "map")
    assert "PREDICTIONS" in title(figure) and len(figure.axes) == 4
    assert "PREDICTIONS" in title(plotting.plot_seed_check(recommend.seed_check(("ConvNet",))))


def test_an_unresolved_noise_scale_is_marked_not_dropped():
    points = pd.DataFrame({"step": [0, 100, 200, 300], "loss": [2.4, 2.2, 2.0, 1.9],
                           "b_simple": [57.6, float("inf"), 106.3, 300.0]})  # fmt: skip
    figure = plotting.plot_noise_scale(points, "noise", "this machine", samples=256)
    noise_axis = figure.axes[0]
    assert [line.get_xdata()[0] for line in noise_axis.lines if line.get_linestyle() == ":"] == [100]
    assert any(text.get_text().strip() == "∞" for text in noise_axis.texts)
    # n = 256 clips resolve 57.6 and 106.3; the finite 300 is drawn hollow above the dashed n line
    assert [line.get_ydata()[0] for line in noise_axis.lines if line.get_linestyle() == "--"] == [256]
    hollow = [c for c in noise_axis.collections if c.get_label().startswith("not resolved")]
    assert len(hollow) == 1 and hollow[0].get_offsets().tolist() == [[300.0, 300.0]]
    assert "this machine" in figure._suptitle.get_text()
