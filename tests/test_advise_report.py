"""helpers.advise.report: the tables chapter 7 shows count as chapter 5 does."""

from helpers.advise import counting, report


def test_host_ops_per_step_are_chapter_5_s_layer_kernels_loss_and_adam():
    """LinearNet: 21 layer kernels forward and backward, 4 for log-softmax and NLL, 12 for multi-tensor
    Adam: 37 ops, the number chapter 5's roofline charges its host time for."""
    counted = {name: counting.count_book_model(name) for name in ("LinearNet", "ConvNet")}
    table = report.model_table(counted)
    kernels = int(counted["LinearNet"].layer_table()["kernels"].sum())
    assert kernels == 21
    assert table.loc["LinearNet", "host ops per step"] == 21 + 4 + 12
    assert table.loc["LinearNet", "parameters"] == "12,102,220"
    assert table.loc["ConvNet", "parameters"] == "376,200"
