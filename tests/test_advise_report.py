"""helpers.advise.report: the tables chapter 7 shows count as chapter 5 does; its sentences are built from
how many held-out points there are and from the machine that measured them."""

from helpers.advise import counting, report
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
