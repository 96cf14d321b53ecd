"""helpers.models: the seed's two models, exactly."""

import pytest
import torch

from helpers import models


def test_parameter_counts_and_bytes():
    linear, conv = models.LinearNet(), models.ConvNet()
    assert models.parameter_count(linear) == 12_102_220
    assert models.parameter_count(conv) == 376_200
    assert models.parameter_bytes(linear) == 12_102_220 * 4
    assert round(models.parameter_bytes(linear) / models.MIB, 2) == 46.17
    assert round(models.parameter_bytes(conv) / models.MIB, 2) == 1.44


def test_convnet_layer_output_lengths():
    shapes = [row["output_shape"] for row in models.layer_table(models.ConvNet())]
    assert [shape[-1] for shape in shapes[:9]] == [12001, 12001, 3000, 3001, 3001, 1000, 1001, 1001, 200]
    assert shapes[9:] == [[2000], [100], [100], [10]]


def test_linearnet_layer_outputs():
    shapes = [row["output_shape"] for row in models.layer_table(models.LinearNet())]
    assert shapes == [[12000], [1000], [1000], [100], [100], [10], [10], [10]]


@pytest.mark.parametrize("name", ["LinearNet", "ConvNet"])
def test_forward_gives_ten_logits(name):
    assert models.build_model(name)(torch.zeros(3, 1, 12000)).shape == (3, 10)


def test_activation_bytes_in_the_seeds_accounting():
    # ConvNet: outputs of every layer but the Flatten view, x 2 (forward + backward) x 4 bytes.
    conv_elements = 2 * 600_050 + 150_000 + 2 * 90_030 + 30_000 + 2 * 10_010 + 2_000 + 100 + 100 + 10
    assert models.activation_bytes_per_sample(models.ConvNet()) == conv_elements * 8 == 12_659_120
    assert round(12_659_120 / models.MIB, 2) == 12.07  # the seed's "12 MB per training instance"
    assert models.activation_bytes_per_sample(models.LinearNet()) == (1000 + 1000 + 100 + 100 + 30) * 8


@pytest.fixture(scope="module")
def convnet_bf16_saved() -> tuple[int, int]:
    """ConvNet's saved bytes under bf16 autocast, measured once for the tests that read them: a bf16
    convolution is emulated on CPUs without bf16 units (about 10 s here on 2 cores)."""
    return models.saved_bytes_per_sample(models.ConvNet(), torch.bfloat16)


def test_saved_tensor_bytes_match_what_autograd_must_keep(convnet_bf16_saved):
    # ConvNet float32, per sample: the input (12,000 floats), each ReLU output (shared with the pooling
    # that reads it), each pooling's int64 indices and float output, and the sigmoid's output.
    expected = (
        12_000 * 4
        + 600_050 * 4 + 150_000 * 8 + 150_000 * 4
        + 90_030 * 4 + 30_000 * 8 + 30_000 * 4
        + 10_010 * 4 + 2_000 * 8 + 2_000 * 4
        + 100 * 4
    )  # fmt: skip
    assert models.saved_bytes_per_sample(models.ConvNet()) == (expected, 0)
    per_sample, fixed = convnet_bf16_saved
    assert per_sample < expected and fixed > 0  # bf16 activations, plus bf16 copies of weights


def test_largest_batch_arithmetic():
    conv = models.ConvNet()
    static = 376_200 * 4 * 4  # weights, gradients, two Adam states
    per_sample = 12_659_120
    assert models.largest_batch(conv, 16 * 2**30) == (16 * 2**30 - static) // per_sample == 1356
    assert models.largest_batch(conv, 10**6) == 0
    assert (
        models.largest_batch(conv, 16 * 2**30, optimizer_states=0, activation_bytes=10**6)
        == (16 * 2**30 - 376_200 * 8) // 10**6
    )


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="known: LinearNet, ConvNet"):
        models.build_model("ResNet")


def test_size_and_largest_batch_tables():
    sizes = models.size_table()
    assert (
        sizes.loc["LinearNet", "parameters"] == 12_102_220
        and sizes.loc["ConvNet", "parameter bytes"] == 1_504_800
    )
    assert sizes.loc["ConvNet", "activation bytes per sample (seed)"] == 12_659_120
    assert sizes.loc["ConvNet", "saved for backward, bytes per sample"] == 5_032_760
    table = models.largest_batch_table([11]).set_index("model")
    conv = models.build_model("ConvNet")
    assert table.loc["ConvNet", "largest batch (seed's accounting)"] == models.largest_batch(conv, 11 * 2**30)
    assert table.loc["ConvNet", "largest batch (measured)"] == (11 * 2**30 - 4 * 1_504_800) // 5_032_760


def test_bytes_held_after_the_forward_pass_count_each_storage_once():
    # What a GPU's allocator holds per sample once forward and loss are done: what autograd keeps (the
    # input among it: the first layer keeps it), plus the logits (40 B), log-softmax's output (40 B) and
    # the int64 target (8 B). The input is not counted twice.
    assert models.held_bytes_per_sample(models.LinearNet()) == 48_000 + 4_000 + 400 + 40 + 40 + 40 + 8
    assert models.held_bytes_per_sample(models.ConvNet()) == 5_032_760 + 40 + 40 + 8


def test_autocast_keeps_the_weight_copies_that_backward_needs(convnet_bf16_saved):
    """A matrix product keeps its weight only for its input's gradient: LinearNet's first layer (input: the
    waveform) keeps no bf16 copy; a convolution keeps its weight always. The copies kept are exactly the
    batch-independent bytes that ``saved_bytes_per_sample`` measures under bf16."""
    assert models.kept_weight_copies(models.LinearNet()) == ["3: Linear", "5: Linear", "7: Linear"]
    linear_copies = (100_000 + 1_000 + 100) * 2  # bf16 bytes of the weights of layers 3, 5 and 7
    conv_copies = (10_000 + 150_000 + 15_000 + 200_000 + 1_000) * 2  # every weight, no bias
    assert models.saved_bytes_per_sample(models.LinearNet(), torch.bfloat16)[1] == linear_copies == 202_200
    assert convnet_bf16_saved[1] == conv_copies == 752_000
    table = models.weight_copy_table()  # ConvNet's copies read from it: bf16 convolutions are slow on CPUs
    kept = table["copy kept for backward"] == "yes"
    assert table[kept].loc["ConvNet"].index.tolist() == [
        "0: Conv1d", "3: Conv1d", "6: Conv1d", "10: Linear", "12: Linear",
    ]  # fmt: skip
    assert table.loc[("LinearNet", "1: Linear")].tolist() == ["12,000,000", "no", "0"]
    assert table.loc[("ConvNet", "3: Conv1d")].tolist() == ["150,000", "yes", "300,000"]


def test_largest_batch_table_to_read():
    table = models.largest_batch_table([11], readable=True)
    assert table.index.name == "device memory (GiB)"
    # (11 GiB - 4 x 1,504,800 bytes) // 5,032,760 bytes = 2,345
    assert table.loc[11, ("ConvNet", "measured")] == "2,345"
    assert list(table.columns.get_level_values(0)) == ["LinearNet", "LinearNet", "ConvNet", "ConvNet"]
