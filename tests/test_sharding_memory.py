"""helpers.sharding.memory: each device's bytes under DDP and ZeRO 1–3, exactly."""

import pytest

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
