"""helpers.costmodel.gpus: exact FLOPs and bytes per layer, the roofline, and every assumption sourced."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers.costmodel import gpus
from helpers.models import build_model, parameter_count


@pytest.mark.parametrize("name", ["LinearNet", "ConvNet"])
def test_multiply_adds_equal_what_torch_counts_forward_and_backward(name):
    batch = 3
    model = build_model(name)
    with FlopCounterMode(display=False) as counter:
        logits = model(torch.zeros(batch, 1, 12_000))
        torch.nn.functional.cross_entropy(logits, torch.zeros(batch, dtype=torch.long)).backward()
    costs = gpus.layer_costs(name)
    assert int(costs["multiply_add_flops_per_sample"].sum()) * batch == counter.get_total_flops()


def test_linear_net_by_hand():
    costs = gpus.layer_costs("LinearNet").set_index(["layer", "phase"])
    first = costs.loc[("1: Linear", "forward")]
    assert first["flops_per_sample"] == 2 * 12_000 * 1_000 + 1_000  # multiply-adds and bias
    assert first["bytes_per_sample"] == 4 * (12_000 + 1_000) and first["fixed_bytes"] == 4 * 12_001_000
    backward = costs.loc[("1: Linear", "backward")]
    assert backward["flops_per_sample"] == 2 * 12_000_000 + 1_000  # no gradient for the waveform
    assert backward["kernels"] == 2
    second = costs.loc[("3: Linear", "backward")]
    assert second["flops_per_sample"] == 4 * 1_000 * 100 + 100 and second["kernels"] == 3
    assert (
        gpus.training_flops_per_sample("LinearNet") == 48_611_060
    )  # forward 24,204,430 + backward 24,406,630


def test_conv_net_by_hand():
    costs = gpus.layer_costs("ConvNet").set_index(["layer", "phase"])
    conv = costs.loc[("3: Conv1d", "forward")]
    assert conv["multiply_add_flops_per_sample"] == 2 * 50 * 100 * 30 * 3_001  # 3,000 + 2·50 − 100 + 1
    pool = costs.loc[("2: MaxPool1d", "forward")]
    assert pool["bytes_per_sample"] == 4 * (50 * 12_001 + 50 * 3_000) + 8 * 50 * 3_000  # int64 indices
    assert "9: Flatten" not in {layer for layer, _ in costs.index}
    assert gpus.training_flops_per_sample("ConvNet") == 3_275_918_870


def test_roofline_arithmetic_on_a_made_up_gpu():
    unit = gpus.GPU("unit", fp32_flops=1e12, tf32_flops=None, memory_bandwidth=1e11, memory_bytes=1,
                    source="", date="")  # fmt: skip
    step = gpus.roofline_step(
        "LinearNet", 1000, unit, compute_fraction=1, memory_fraction=1, launch_seconds=0
    )
    costs = gpus.layer_costs("LinearNet")
    expected = sum(
        max(row.flops_per_sample * 1000 / 1e12, (row.bytes_per_sample * 1000 + row.fixed_bytes) / 1e11)
        for row in costs.itertuples()
    )
    adam = 28 * parameter_count(build_model("LinearNet")) / 1e11
    assert step["step_seconds"] == pytest.approx(expected + adam)
    assert step["optimizer_seconds"] == pytest.approx(adam)
    launches = gpus.roofline_step("ConvNet", 1, unit, launch_seconds=1.0)
    kernels = gpus.layer_costs("ConvNet")["kernels"].sum() + gpus.LOSS_KERNELS + gpus.ADAM_KERNELS
    assert launches["step_seconds"] == pytest.approx(kernels) and launches["bound_by"] == "launch"


def test_convolutions_use_tf32_where_it_exists():
    assert gpus.GPUS["A100 SXM 80 GB"].conv_flops() == 156e12
    assert gpus.GPUS["GTX 1080 Ti"].conv_flops() == gpus.GPUS["GTX 1080 Ti"].fp32_flops == 3584 * 2 * 1582e6


def test_link_figures_follow_the_spec_and_their_sources():
    assert gpus.pcie_peak(8e9) == pytest.approx(15.754e9, rel=1e-4)
    assert gpus.LINKS["PCIe 5.0 x16"].bus_bandwidth == 28e9
    assert gpus.LINKS["PCIe 3.0 x16, host bridge"].bus_bandwidth == pytest.approx(
        28e9 / gpus.pcie_peak(32e9) * gpus.pcie_peak(8e9)
    )
    table = gpus.assumptions_table()
    assert len(table) == 3 + len(gpus.GPUS) + len(gpus.LINKS)
    assert table["source"].str.len().min() > 10 and table["date"].str.len().min() >= 4


def test_a_layer_without_a_formula_is_refused(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Tanh())
    monkeypatch.setattr(gpus, "build_model", lambda name: model)
    with pytest.raises(ValueError, match="no cost formula for layer 1: Tanh"):
        gpus.layer_costs("anything")


def test_driver_names_map_to_the_gpu_table():
    assert gpus.gpu_key("NVIDIA H100 80GB HBM3") == "H100 SXM 80 GB"
    assert gpus.gpu_key("NVIDIA H200") == "H200 SXM 141 GB"
    assert gpus.gpu_key("NVIDIA GeForce GTX 1080 Ti") == "GTX 1080 Ti"
    assert gpus.gpu_key("Tesla T4") is None
    assert gpus.gradient_bytes("LinearNet") == 48_408_880
