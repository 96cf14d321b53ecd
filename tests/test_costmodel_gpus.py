"""helpers.costmodel.gpus: exact FLOPs and bytes per layer, the roofline, and every assumption sourced."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers.costmodel import gpus
from helpers.models import build_model


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


UNIT = gpus.GPU("unit", fp32_flops=1e12, memory_bandwidth=1e11, memory_bytes=1, source="", date="")
IDEAL = gpus.Scenario(matmul=1, conv=1, memory=1, op_seconds=0)


def test_roofline_arithmetic_on_a_made_up_gpu():
    step = gpus.roofline_step("LinearNet", 1000, UNIT, IDEAL)
    costs = gpus.layer_costs("LinearNet")
    expected = sum(
        max(row.flops_per_sample * 1000 / 1e12, (row.bytes_per_sample * 1000 + row.fixed_bytes) / 1e11)
        for row in costs.itertuples()
    )
    adam = 28 * 12_102_220 / 1e11  # 28 bytes per parameter
    assert step["step_seconds"] == pytest.approx(expected + adam)
    assert step["optimizer_seconds"] == pytest.approx(adam)


def test_a_step_of_small_kernels_lasts_as_long_as_the_host_issues_them():
    # 21 layer kernels forward and backward, 4 loss ops, 12 Adam ops (worked out by hand from the layers)
    assert gpus.ops_per_step("LinearNet") == 7 + 14 + 4 + 12 == 37
    assert gpus.ops_per_step("ConvNet") == 12 + 21 + 4 + 12 == 49
    fast = gpus.GPU("fast", fp32_flops=1e30, memory_bandwidth=1e30, memory_bytes=1, source="", date="")
    step = gpus.roofline_step("ConvNet", 1, fast, gpus.Scenario(op_seconds=1.0))
    assert step["step_seconds"] == pytest.approx(49.0) and step["bound_by"] == "host"
    # the host runs ahead of a slow device: the step is the device's work, the ops' time hidden but the first
    slow = gpus.roofline_step(
        "ConvNet", 100, UNIT, gpus.Scenario(matmul=1, conv=1, memory=1, op_seconds=1e-9)
    )
    ideal = gpus.roofline_step("ConvNet", 100, UNIT, IDEAL)
    assert (
        slow["step_seconds"] == pytest.approx(ideal["step_seconds"], rel=1e-6)
        and slow["bound_by"] == "compute"
    )


def test_convolutions_use_the_fp32_peak_because_tf32_is_off():
    with_tf32 = gpus.GPU("unit", 1e12, 1e11, 1, "", "", tf32_flops=1e15)
    assert gpus.roofline_step("ConvNet", 10, with_tf32, IDEAL) == gpus.roofline_step(
        "ConvNet", 10, UNIT, IDEAL
    )
    # every convolution and matrix-product row of the layer table, forward and backward, at 1 TFLOP/s
    arithmetic = gpus.arithmetic_seconds("ConvNet", 1, UNIT, IDEAL)
    matmul_and_conv = (
        240_620_050 * 2
        + 900_390_030
        + 1_800_690_030
        + 30_040_010
        + 60_070_010
        + 400_100
        + 800_100
        + 2_010
        + 4_010
    )
    assert arithmetic == pytest.approx(matmul_and_conv / 1e12)


def test_the_fixed_cost_every_gpu_repeats():
    # 37 ops at 10 µs, and Adam's 28 B x 12,102,220 parameters at 70 % of 3,350 GB/s
    h100 = gpus.GPUS["H100 SXM 80 GB"]
    assert gpus.fixed_step_seconds("LinearNet", h100) == pytest.approx(37e-5 + 338_862_160 / (0.7 * 3350e9))


def test_the_band_spans_every_corner_and_names_each_input():
    found = gpus.scenarios()
    assert len(found) == 1 + 2 * 5 + 2**5  # central, each input alone at both ends, every corner
    labels = [label for label, _ in found]
    assert labels[0] == "central" and "per-op host overhead: high" in labels
    corners = [scenario for label, scenario in found if label == "corner"]
    assert gpus.Scenario(matmul=0.2, conv=0.1, memory=0.5, op_seconds=20e-6, link="low") in corners
    assert len(gpus.scenarios(gpus.MEASURED_INPUTS)) == 1 + 2 * 3 + 2**3
    band = gpus.roofline_band("ConvNet", 100, gpus.GPUS["H100 SXM 80 GB"])
    assert band["step_seconds_low"] < band["step_seconds"] < band["step_seconds_high"]


def test_link_figures_follow_the_spec_and_their_sources():
    assert gpus.pcie_peak(8e9) == pytest.approx(15.754e9, rel=1e-4)
    assert gpus.LINKS["PCIe 5.0 x16"].bus_bandwidth == 28e9
    assert gpus.LINKS["PCIe 3.0 x16, host bridge"].bus_bandwidth == pytest.approx(
        28e9 / gpus.pcie_peak(32e9) * gpus.pcie_peak(8e9)
    )
    assert gpus.LINKS["NVLink 4 (H100 SXM)"].bus("high") == 480e9  # NVLink SHARP
    for link in gpus.LINKS.values():
        assert link.bus("low") <= link.bus() <= link.bus("high") <= link.peak_bytes_per_second * 1.1
    table = gpus.assumptions_table()
    assert len(table) == 4 + len(gpus.GPUS) + len(gpus.LINKS)
    assert table["source"].str.len().min() > 10 and table["date"].str.len().min() >= 4


def test_gpu_figures_are_the_datasheets():
    assert (
        gpus.GPUS["H100 SXM 80 GB"].fp32_flops == 67e12 and gpus.GPUS["H100 PCIe 80 GB"].fp32_flops == 51e12
    )
    assert gpus.GPUS["V100 SXM2 16 GB"].fp32_flops == 15.7e12
    assert gpus.GPUS["GTX 1080 Ti"].fp32_flops == 3584 * 2 * 1582e6
    for gpu in gpus.GPUS.values():
        assert "datasheet" in gpu.source  # NVIDIA's, or a statement that there is none


def test_a_layer_without_a_formula_is_refused(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Tanh())
    monkeypatch.setattr(gpus, "build_model", lambda name: model)
    with pytest.raises(ValueError, match="no cost formula for layer 1: Tanh"):
        gpus.layer_costs("anything")


def test_driver_names_map_to_the_gpu_table():
    assert gpus.gpu_key("NVIDIA H100 80GB HBM3") == "H100 SXM 80 GB"
    assert gpus.gpu_key("NVIDIA H100 PCIe") == "H100 PCIe 80 GB"
    assert gpus.gpu_key("NVIDIA H100 NVL") is None  # another board, not in the table
    assert gpus.gpu_key("NVIDIA H200") == "H200 SXM 141 GB"
    assert gpus.gpu_key("NVIDIA A100-SXM4-40GB") == "A100 SXM 40 GB"
    assert gpus.gpu_key("NVIDIA A100-SXM4-80GB") == "A100 SXM 80 GB"
    assert gpus.gpu_key("NVIDIA A100 80GB PCIe") == "A100 PCIe 80 GB"
    assert gpus.gpu_key("NVIDIA L4") == "L4" and gpus.gpu_key("NVIDIA L40S") == "L40S"
    assert gpus.gpu_key("NVIDIA GeForce GTX 1080 Ti") == "GTX 1080 Ti"
    assert gpus.gpu_key("Tesla T4") is None
    assert gpus.gradient_bytes("LinearNet") == 48_408_880


def test_convolutions_backward_arithmetic_from_the_layer_shapes():
    """ConvNet's multiply-adds per sample, forward: 1x200x50x12001 + 50x100x30x3001 + 30x50x10x1001 =
    120,010,000 + 450,150,000 + 15,015,000 = 585,175,000. Backward: every weight gradient (585,175,000)
    and the input gradients of layers 2 and 3 (465,165,000), not of layer 1 (its input is the waveform)."""
    assert gpus.expected_backward_forward_ratio("ConvNet") == pytest.approx(1_050_340_000 / 585_175_000)
    assert round(gpus.expected_backward_forward_ratio("ConvNet"), 2) == 1.79
    # LinearNet: 12,000x1,000 + 1,000x100 + 100x10 + 10x10 forward; backward without layer 1's input gradient
    forward = 12_000_000 + 100_000 + 1_000 + 100
    assert gpus.expected_backward_forward_ratio("LinearNet", "matmul") == pytest.approx(
        (forward + forward - 12_000_000) / forward
    )
