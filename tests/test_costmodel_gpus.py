"""helpers.costmodel.gpus: exact FLOPs and bytes per layer, the roofline, and every assumption sourced."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers.costmodel import gpus, specs
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


UNIT = specs.GPU("unit", fp32_flops=1e12, memory_bandwidth=1e11, memory_bytes=1, source="", date="")
IDEAL = specs.Scenario(matmul=1, conv=1, memory=1, op_seconds=0)


def test_adam_s_pass_over_linear_net_on_a_made_up_gpu():
    # foreach Adam, as the study runs it: 72 bytes of every one of 12,102,220 parameters (871,359,840 B) at
    # 100 GB/s: 8.7135984 ms, however large the batch (fused Adam's 28 bytes would be 3.3886216 ms)
    for batch in (1, 1000):
        step = gpus.roofline_step("LinearNet", batch, UNIT, IDEAL)
        assert step["optimizer_seconds"] == pytest.approx(8.7135984e-3)


def test_a_step_of_small_kernels_lasts_as_long_as_the_host_issues_them():
    # layer kernels forward and backward, 4 loss ops, foreach Adam's 8 (worked out by hand from the layers)
    assert gpus.ops_per_step("LinearNet") == 7 + 14 + 4 + 8 == 33
    assert gpus.ops_per_step("ConvNet") == 12 + 21 + 4 + 8 == 45
    fast = specs.GPU("fast", fp32_flops=1e30, memory_bandwidth=1e30, memory_bytes=1, source="", date="")
    step = gpus.roofline_step("ConvNet", 1, fast, specs.Scenario(op_seconds=1.0))
    assert step["step_seconds"] == pytest.approx(45.0) and step["bound_by"] == "host"
    # the host runs ahead of a slow device: the step is the device's work, the ops' time hidden but the first
    slow = gpus.roofline_step(
        "ConvNet", 100, UNIT, specs.Scenario(matmul=1, conv=1, memory=1, op_seconds=1e-9)
    )
    ideal = gpus.roofline_step("ConvNet", 100, UNIT, IDEAL)
    assert (
        slow["step_seconds"] == pytest.approx(ideal["step_seconds"], rel=1e-6)
        and slow["bound_by"] == "compute"
    )


def test_convolutions_use_the_fp32_peak_because_tf32_is_off():
    with_tf32 = specs.GPU("unit", 1e12, 1e11, 1, "", "", tf32_flops=1e15)
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
    # 33 ops at the H200 host's median 66.6 µs, and foreach Adam's 72 B x 12,102,220 parameters at 70 % of
    # 3,350 GB/s
    h100 = specs.GPUS["H100 SXM 80 GB"]
    expected = 33 * 66.6e-6 + 871_359_840 / (0.7 * 3350e9)
    assert gpus.fixed_step_seconds("LinearNet", h100) == pytest.approx(expected)


def test_the_band_spans_every_corner_and_names_each_input():
    found = specs.scenarios()
    assert len(found) == 1 + 2 * 6 + 2**6  # central, each input alone at both ends, every corner
    labels = [label for label, _ in found]
    assert labels[0] == "central" and "per-op host overhead: high" in labels
    corners = {scenario: label for label, scenario in found if label.startswith(specs.CORNER)}
    lowest = specs.Scenario(matmul=0.2, conv=0.1, memory=0.5, op_seconds=4.37e-5, link="low", shard=0.5)
    # a corner's label names each input's end, so that a verdict can say which inputs a crossing needs
    assert corners[lowest] == "corner: " + "; ".join(f"{name} low" for name in specs.ROOFLINE_INPUTS)
    assert len(specs.scenarios(specs.MEASURED_INPUTS)) == 1 + 2 * 3 + 2**3
    band = gpus.roofline_band("ConvNet", 100, specs.GPUS["H100 SXM 80 GB"])
    assert band["step_seconds_low"] < band["step_seconds"] < band["step_seconds_high"]


def test_a_layer_without_a_formula_is_refused(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Tanh())
    monkeypatch.setattr(gpus, "build_model", lambda name: model)
    with pytest.raises(ValueError, match="no cost formula for layer 1: Tanh"):
        gpus.layer_costs("anything")


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


def test_the_gradient_is_every_parameter_in_float32():
    assert gpus.gradient_bytes("LinearNet") == 12_102_220 * 4 == 48_408_880


def tiny_costs(**options) -> gpus.ModelCosts:
    """One matrix product: forward 2,000,000 FLOPs and 100 B per sample, 4,000 B of weights, 1 kernel;
    backward twice the FLOPs, 200 B per sample, 8,000 B, 2 kernels; 1,000 parameters, plain SGD."""
    rows = (("0: Linear", "matmul", "forward", 2_000_000, 2_000_000, 100, 4_000, 1),
            ("0: Linear", "matmul", "backward", 4_000_000, 4_000_000, 200, 8_000, 2))  # fmt: skip
    return gpus.ModelCosts(
        rows, 1_000, (4_000,), gpus.SGD_BYTES_PER_PARAMETER, gpus.SGD_OPS, optimizer="sgd", **options
    )


def test_a_registered_model_is_priced_by_the_same_roofline_by_hand():
    name = gpus.register("tiny (test)", tiny_costs())
    # batch 10 on 1 TFLOP/s and 100 GB/s, every efficiency 1, no host time: forward max(2e7 / 1e12,
    # 5,000 B / 1e11) = 2e-5 s; backward max(4e7 / 1e12, 10,000 B / 1e11) = 4e-5 s; SGD reads the weight and
    # the gradient and writes the weight: 12 B × 1,000 / 1e11 = 1.2e-7 s
    step = gpus.roofline_step(name, 10, UNIT, IDEAL)
    assert step["forward_seconds"] == pytest.approx(2e-5) and step["backward_seconds"] == pytest.approx(4e-5)
    assert step["optimizer_seconds"] == pytest.approx(1.2e-7) and step["bound_by"] == "compute"
    assert gpus.gradient_bytes(name) == 4_000 and gpus.ops_per_step(name) == 3 + 4 + 2  # layers, loss, SGD
    with pytest.raises(ValueError, match="already registered with other costs"):
        gpus.register(name, tiny_costs(loss_ops=5))
    with pytest.raises(ValueError, match="one of the book's models"):
        gpus.register("ConvNet", tiny_costs())


def test_a_bf16_model_runs_its_products_at_the_bf16_peak_where_there_is_one():
    name = gpus.register("tiny bf16 (test)", tiny_costs(bf16=True))
    with_bf16 = specs.GPU("unit", 1e12, 1e11, 1, "", "", bf16_flops=1e13)
    assert gpus.roofline_step(name, 10, with_bf16, IDEAL)["forward_seconds"] == pytest.approx(2e-6)
    with pytest.raises(ValueError, match="has no bfloat16 tensor cores"):
        gpus.roofline_step(name, 10, UNIT, IDEAL)


def test_convnet_on_an_a100_by_hand():
    """ConvNet, batch 100, A100 SXM 80 GB (19.5 TFLOP/s FP32, 2,039 GB/s), every fraction 1, no host time.
    The convolutions and the first product are compute-bound: 3,273,630,380 FLOPs a sample, × 100 /
    19.5e12 = 16.787848 ms; the activations, pools and the last product are memory-bound: 2,397,392,080 B
    at batch 100 / 2,039e9 = 1.175769 ms; foreach Adam makes 18 passes of 4 B over each of 376,200
    parameters: 27,086,400 B, 13.284 µs. Nothing overlaps on one stream: 17.976901 ms."""
    step = gpus.roofline_step("ConvNet", 100, specs.GPUS["A100 SXM 80 GB"], IDEAL)
    assert step["step_seconds"] == pytest.approx(16.787848e-3 + 1.175769e-3 + 27_086_400 / 2039e9, rel=1e-6)
    assert step["bound_by"] == "compute"
