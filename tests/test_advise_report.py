"""helpers.advise.report: the tables chapter 7 shows count as chapter 5 does; its sentences are built from
how many held-out points there are and from the machine that measured them."""

import pandas as pd

from helpers.advise import counting, examples, report
from helpers.models import build_model


def test_host_ops_per_step_are_chapter_5_s_layer_kernels_loss_and_adam():
    """LinearNet: 21 layer kernels forward and backward, 4 for log-softmax and NLL, 12 for multi-tensor
    Adam: 37 ops, the number chapter 5's roofline charges its host time for."""
    counted = {name: counting.count_book_model(name) for name in ("LinearNet", "ConvNet")}
    table = report.model_table(counted)
    kernels = int(counted["LinearNet"].layer_table()["kernels"].sum())
    assert kernels == 21
    assert table.loc["LinearNet", "host ops per step (layers, loss, optimizer)"] == 21 + 4 + 12
    assert table.loc["LinearNet", "parameters"] == "12,102,220"
    assert table.loc["ConvNet", "parameters"] == "376,200"


def test_convnet_s_host_ops_are_chapter_5_s_hand_count_and_the_tool_counts_aten_ops():
    """ConvNet by chapter 5's hand count: 33 layer kernels (a convolution's backward counted as its
    kernels) + 4 + 12 = 49. Counted as any model, its 28 ATen ops (each convolution's backward one op)
    + 4 + 12 = 44: the two conventions the chapter's table note names."""
    book = counting.count_book_model("ConvNet")
    tool = counting.count(build_model("ConvNet"), (1, 12_000), label="ConvNet as a module")
    column = "host ops per step (layers, loss, optimizer)"
    assert report.model_table({"ConvNet": book}).loc["ConvNet", column] == 33 + 4 + 12
    assert report.model_table({"counted": tool}).loc["counted", column] == 28 + 4 + 12


def _held_out(*rows) -> pd.DataFrame:
    """``validate.validate``'s rows: (model, ranks, error %, low, high), three launches each."""
    return pd.DataFrame(
        [{"model": m, "ranks": k, "error_percent": e, "error_low": lo, "error_high": hi, "launches": 3}
         for m, k, e, lo, hi in rows]
    )  # fmt: skip


def test_one_held_out_point_is_stated_as_its_error_never_as_a_mean():
    """The GPU edition's one point: its error and its verdict against the 15 % goal, no mean or worst."""
    found = report.held_out_sentences(_held_out(("WaveTransformer", 2, 33.6, 12.8, 48.1)))
    assert (
        "34 % too long" in found["held_out_answer"]
        and "+13 to +48 % over 3 launches" in found["held_out_answer"]
    )
    assert "outside the book's 15 % goal, though its interval reaches inside it" in found["held_out_answer"]
    for text in (found["held_out_answer"], found["held_out_summary"], found["held_out_takeaway"]):
        assert "mean absolute" not in text and "worst" not in text and "every rank count" not in text
    assert found["held_out_takeaway"].endswith("34 % too long: outside the book's 15 % goal.")
    assert found["accuracy_goal"] == f"{report.ACCURACY_GOAL_PERCENT} %" == "15 %"


def test_several_held_out_points_give_their_mean_worst_and_how_many_meet_the_goal():
    """The CPU edition's four multi-rank points (one-rank rows are not held out): mean |error| 22 %."""
    table = _held_out(("MelCNN", 1, -15, -23, -8), ("MelCNN", 2, -16, -29, -8), ("MelCNN", 4, -42, -43, -32),
                      ("WaveTransformer", 2, 23, 18, 33), ("WaveTransformer", 4, -7, -18, -5))  # fmt: skip
    found = report.held_out_sentences(table)
    assert "mean absolute error of 22 % (worst 42 %, `MelCNN` on 4 ranks)" in found["held_out_answer"]
    assert "1 of the 4 is within the book's 15 % goal" in found["held_out_answer"]
    assert "on 1 ranks" not in found["held_out_detail"]
    assert (
        "`MelCNN` on 4 ranks -42 % (-43 to -32 %), outside the book's 15 % goal, its whole interval too"
        in (found["held_out_detail"])
    )
    assert (
        "`WaveTransformer` on 4 ranks -7 % (-18 to -5 %), within the book's 15 % goal, though"
        in (found["held_out_detail"])
    )


def test_the_setting_of_the_held_out_test_comes_from_the_machine_s_record():
    """One H200 and 16 cores: two Gloo ranks share the GPU at 8 threads each and stage the all-reduce
    through host memory (never "more processes than cores"); 2 cores and 4 ranks: more processes."""
    h200 = {"usable_cores": 16, "gpus": [{"name": "NVIDIA H200"}]}
    gpu = report.held_out_setting(h200, "cuda", "gloo", [2], 3, [16])
    assert gpu["held_out_setting"].startswith(
        "Here 2 Gloo ranks share this machine's one NVIDIA H200, each rank at 8 threads of its 16 cores, "
        "and Gloo stages every all-reduce through host memory"
    )
    assert "more processes than cores" not in gpu["held_out_setting"]
    assert gpu["launch_setting"] == "The 2 ranks are then launched 3 times for real with Gloo"
    assert (
        "on this machine's one NVIDIA H200 at every per-rank batch, the host at 16 threads"
        in (gpu["calibration_setting"])
    )
    assert (
        "sharing this machine's one NVIDIA H200" in gpu["held_out_checks"]
        and "CPU" not in gpu["held_out_checks"]
    )
    cpu = report.held_out_setting({"usable_cores": 2, "gpus": []}, "cpu", "gloo", [1, 2, 4], 3, [1, 2])
    assert (
        "up to 4 Gloo ranks share this machine's 2 cores (at 4 ranks, more processes than cores)"
        in (cpu["held_out_setting"])
    )
    assert cpu["launch_setting"].startswith("Each rank count (1, 2 and 4) is then launched 3 times")


def test_the_comparison_and_the_measured_models_say_only_what_this_edition_counted():
    counted = {name: counting.count_book_model(name) for name in ("LinearNet", "ConvNet")}
    counted["WaveTransformer"] = counting.count(
        examples.wave_transformer(), (1, 12_000), label="WaveTransformer"
    )
    text = report.model_comparison(counted, ["WaveTransformer"], ["LinearNet", "ConvNet"])
    assert text.startswith("The new model `WaveTransformer` is smaller than both of the book's on parameters")
    assert "more host ops per step than either (135 against 37 and 49)" in text and "it sits between" in text
    note = report.measured_models_note(["WaveTransformer"], "gpu")
    assert note.startswith(
        "This edition counts and measures `WaveTransformer` alone: `MelCNN` was not measured"
    )
    assert note.endswith("the CPU edition measures it.")
    assert report.measured_models_note(["MelCNN", "WaveTransformer"], "cpu") == (
        "This edition counts and measures both."
    )


def test_one_launch_has_no_interval_to_agree_with():
    table = _held_out(("MelCNN", 2, 38.0, 38.0, 38.0)).assign(launches=1)
    found = report.held_out_sentences(table)
    assert found["held_out_detail"] == "`MelCNN` on 2 ranks +38 %, outside the book's 15 % goal"
    assert "(+38 %, one launch)" in found["held_out_answer"]
    setting = report.held_out_setting({"usable_cores": 2, "gpus": []}, "cpu", "gloo", [2], 1, [1, 2])
    assert setting["interval_setting"] == "from one launch, so without an interval"
    assert setting["launch_setting"] == "The 2 ranks are then launched once for real with Gloo"
    assert "(at 2 ranks, 1 core each)" in setting["held_out_setting"]
