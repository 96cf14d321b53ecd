"""helpers.sharding.memory: each device's bytes under DDP and ZeRO 1–3, exactly."""

import pytest
from torch import nn

from helpers.models import build_model, parameter_count
from helpers.sharding import memory

LINEAR = 12_102_220
CONV = 376_200


def test_parameter_shapes_count_the_book_s_parameters():
    for name, count in (("LinearNet", LINEAR), ("ConvNet", CONV)):
        assert sum(memory.numel(shape) for shape in memory.parameter_shapes(name)) == count
        assert count == parameter_count(build_model(name))


@pytest.mark.parametrize(
    ("rows", "parts", "expected"),
    [(10, 4, [3, 3, 3, 1]), (1, 2, [1, 0]), (8, 2, [4, 4]), (5, 4, [2, 2, 1, 0])],
)
def test_chunk_rows_cut_as_torch_chunk_cuts(rows, parts, expected):
    import torch

    assert memory.chunk_rows(rows, parts) == expected
    pieces = [len(piece) for piece in torch.arange(rows).chunk(parts)]
    assert pieces == [n for n in expected if n]  # torch.chunk leaves out the empty pieces


def test_zero_partition_is_largest_first_to_the_least_loaded_rank():
    # sizes 9, 9, 5, 3, 1 in turn: 9→0, 9→1, 5→0 (tie: lowest rank), 3→1, 1→1
    assert memory.zero_partition([5, 9, 1, 9, 3], 2) == [[1, 0], [3, 4, 2]]


@pytest.mark.parametrize("name", ["LinearNet", "ConvNet"])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_shards_add_up_to_the_whole(name, world_size):
    total = sum(memory.numel(shape) for shape in memory.parameter_shapes(name))
    tensors = len(memory.parameter_shapes(name))
    ddp = memory.per_rank_bytes(name, 0, world_size)
    assert all(row == {**ddp[0], "rank": row["rank"]} for row in ddp)
    assert ddp[0]["optimizer"] == total * 8 + tensors * 4
    zero1 = memory.per_rank_bytes(name, 1, world_size)
    assert sum(row["optimizer"] for row in zero1) == total * 8 + tensors * 4
    assert all(row["parameters"] == row["gradients"] == total * 4 for row in zero1)
    zero3 = memory.per_rank_bytes(name, 3, world_size)
    assert sum(row["parameters"] for row in zero3) == sum(row["gradients"] for row in zero3) == total * 4
    assert sum(row["optimizer"] for row in zero3) == total * 8 + world_size * tensors * 4
    zero2 = memory.per_rank_bytes(name, 2, world_size)
    assert [row["gradients"] for row in zero2] == [row["gradients"] for row in zero3]
    assert all(row["parameters"] == total * 4 for row in zero2)


def test_the_zero_paper_s_bytes_per_parameter():
    assert memory.bytes_per_parameter(0, 4)["total"] == 16
    assert memory.bytes_per_parameter(1, 4)["total"] == 4 + 4 + 2
    assert memory.bytes_per_parameter(2, 4)["total"] == 4 + 1 + 2
    assert memory.bytes_per_parameter(3, 4)["total"] == 1 + 1 + 2


def test_a_stage_outside_zero_to_three_is_refused():
    for stage in (-1, 4, "3"):
        with pytest.raises(ValueError, match="ZeRO stage must be one of"):
            memory.per_rank_bytes("LinearNet", stage, 2)


def test_device_table_adds_activations_of_the_batch():
    table = memory.device_table(["ConvNet"], 4, 10).set_index("stage")
    assert list(table.index) == [0, 1, 2, 3]
    row = table.loc[0]
    assert row["parameters"] == CONV * 4 and row["total"] == CONV * 16 + 10 * 4 + row["activations"]
    assert table["total"].is_monotonic_decreasing


def test_largest_batch_and_widest_linear_net_fit_and_one_more_does_not():
    budget = 11 * 10**9
    batch = memory.largest_batch("ConvNet", 0, 1, budget)
    state = sum(list(memory.per_rank_bytes("ConvNet", 0, 1)[0].values())[1:])
    per_sample = memory.device_table(["ConvNet"], 1, 1).iloc[0]["activations"]
    assert state + batch * per_sample <= budget < state + (batch + 1) * per_sample
    assert memory.linear_net_parameters(1000) == LINEAR
    width = memory.widest_linear_net(3, 4, budget)
    assert memory.linear_net_parameters(width) * 4 <= budget < memory.linear_net_parameters(width + 1) * 4
    assert memory.widest_linear_net(0, 4, budget) < width


def test_stage3_peak_holds_the_largest_layer_whole():
    # LinearNet's first layer: a 1,000 × 12,000 weight and 1,000 biases, gathered whole with its gradient
    assert memory.layer_parameters("LinearNet") == [12_001_000, 100_100, 1_010, 110]
    peak = memory.stage3_peak("LinearNet", 4, 32)
    activations = 52_440 * 32  # what autograd saves per LinearNet sample, 32 samples
    # DDP: 16 bytes per parameter and 8 step counters of 4 bytes, then the activations
    assert peak["ddp"] == 16 * LINEAR + 8 * 4 + activations == 195_313_632
    # stage 3, rank 0 holds ⌈rows/4⌉ rows of each tensor: 250·12,000 + 250 + 25·1,000 + 25 + 3·100 + 3
    # + 3·10 + 3 = 3,025,611 elements: 4 bytes of weight, 4 of gradient, 8 of Adam, and 8 step counters
    assert peak["stage3_counted"] == 3_025_611 * 16 + 8 * 4 + activations == 50_087_888
    assert peak["gathered_layer"] == 2 * 4 * 12_001_000 == 96_008_000
    assert peak["stage3_peak"] == 146_095_888
    assert peak["fraction"] == pytest.approx(146_095_888 / 195_313_632)  # 0.748: about 75 %, not 25 %


def test_views_name_their_units():
    view = memory.device_view(memory.device_table(["LinearNet"], 4, 32))
    assert list(view.columns) == ["weights (MiB)", "gradients (MiB)", "Adam state (MiB)",
                                  "activations (MiB)", "total (MiB)"]  # fmt: skip
    assert view.loc[("LinearNet", 0), "weights (MiB)"] == round(LINEAR * 4 / 2**20, 1)  # 46.2
    fits = memory.fit_view(memory.fit_table(["ConvNet"], {"test GPU": 10**9}, 4))
    assert list(fits.columns) == ["ConvNet, largest batch", "widest LinearNet (first-layer units)"]
    assert all("," in value for value in fits["widest LinearNet (first-layer units)"])  # thousands


def test_any_model_as_a_module_and_plain_sgd_by_hand():
    """A nested model given as a module: Linear(10, 20) (220 parameters) inside a block, Linear(20, 5)
    (105). Two ranks, plain SGD (no state): stage 0 keeps 325 × 4 = 1,300 B of weights and of gradients;
    stage 3 shards each along its first dimension: rank 0 gets 10 of 20 rows of the first weight (100), 10
    of its 20 biases, 3 of 5 rows of the second (60) and 3 of its 5 biases: 173 elements, 692 B."""
    model = nn.Sequential(nn.Sequential(nn.Linear(10, 20), nn.ReLU()), nn.Linear(20, 5))
    assert memory.layer_parameters(model) == [220, 105]
    ddp = memory.per_rank_bytes(model, 0, 2, optimizer="sgd")[0]
    assert (ddp["parameters"], ddp["gradients"], ddp["optimizer"]) == (1_300, 1_300, 0)
    sharded = memory.per_rank_bytes(model, 3, 2, optimizer="sgd")[0]
    assert (sharded["parameters"], sharded["gradients"], sharded["optimizer"]) == (692, 692, 0)
    # Adam on the same shards: 8 bytes of state per element and a 4-byte step per tensor (4 tensors)
    assert memory.per_rank_bytes(model, 3, 2)[0]["optimizer"] == 173 * 8 + 4 * 4
    # 10,000 B free beside stage 0's 2,600 B of SGD state, at 1,000 B a sample: 7 samples
    assert memory.largest_batch(model, 0, 2, 10_000, per_sample=1_000, optimizer="sgd") == 7
