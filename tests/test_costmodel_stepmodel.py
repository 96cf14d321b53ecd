"""helpers.costmodel.stepmodel: a GPU step with the host in it, priced by hand on a made-up GPU; the Adam it
prices is the Adam the study runs (foreach), as the training code builds it and the H200's profiles saw."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from helpers import train
from helpers.costmodel import gpus, specs, stepmodel
from helpers.optimizer_timing import ADAM_PASSES

UNIT = specs.GPU("unit", fp32_flops=1e12, memory_bandwidth=1e11, memory_bytes=1, source="", date="")
RECORDS = Path(__file__).parents[1] / "data" / "results" / "gpu" / "records"


def tiny() -> str:
    """One matrix product: forward 2,000,000 FLOPs and 100 B per sample, 4,000 B of weights, 1 kernel;
    backward twice the FLOPs, 200 B per sample, 8,000 B, 2 kernels; 1,000 parameters, plain SGD."""
    rows = (("0: Linear", "matmul", "forward", 2_000_000, 2_000_000, 100, 4_000, 1),
            ("0: Linear", "matmul", "backward", 4_000_000, 4_000_000, 200, 8_000, 2))  # fmt: skip
    costs = gpus.ModelCosts(
        rows, 1_000, (4_000,), gpus.SGD_BYTES_PER_PARAMETER, gpus.SGD_OPS, optimizer="sgd"
    )
    return gpus.register("tiny (stepmodel test)", costs)


def test_a_step_is_issued_op_by_op_and_priced_by_hand():
    inputs = stepmodel.StepInputs(op_seconds=1e-5, optimizer_seconds=3e-5, peak_fraction=1.0,
                                  half_flops=2e7, memory=1.0, kernel_seconds=1e-6)  # fmt: skip
    name = tiny()
    # batch 10: each product kernel does 2e7 FLOPs (forward's one, backward's two of 4e7), so it runs at
    # 2e7 / (2e7 + 2e7) = half the peak: 4e-5 s, far above its bytes (5e-8 s); the 4 loss ops take the
    # least kernel time, 1e-6 s; SGD's 2 kernels each move half of 12 B x 1,000 / 1e11 = 1.2e-7 s, below
    # the least kernel time, and each is issued after half the optimizer's 3e-5 s of host time
    ops = stepmodel.kernel_seconds(name, 10, UNIT, inputs)
    expected = [(1e-5, 4e-5)] + [(1e-5, 1e-6)] * 4 + [(1e-5, 4e-5)] * 2 + [(1.5e-5, 1e-6)] * 2
    assert [value for op in ops for value in op] == pytest.approx([value for op in expected for value in op])
    assert stepmodel.layer_ops(name) == 1 + 4 + 2
    # host: 1e-5 per op, issued at 1, 2, ..., 7 e-5 s, the optimizer at 1.0e-4; device: the forward
    # kernel ends at 5e-5, the loss's at 5.4e-5, backward's start when issued (6e-5) and end at 1.0e-4
    # and 1.4e-4, the optimizer's (issued at 8.5e-5 and 1.0e-4) at 1.41e-4 and 1.42e-4
    step = stepmodel.predict_step(name, 10, UNIT, inputs)
    assert step["step_seconds"] == pytest.approx(1.42e-4) and step["host_seconds"] == pytest.approx(1.0e-4)
    assert step["device_seconds"] == pytest.approx(4e-5 + 4e-6 + 8e-5 + 2e-6)


def tiny_conv() -> str:
    """One convolution and one matrix product, each forward 2,000,000 FLOPs per sample in 1 kernel and
    backward 4,000,000 in 2, with 100 B and 200 B per sample; 1,000 parameters, plain SGD."""
    rows = tuple((name, kind, phase, flops, flops, per_sample, 0, kernels)
                 for name, kind in (("0: Conv1d", "conv"), ("1: Linear", "matmul"))
                 for phase, flops, per_sample, kernels in (("forward", 2_000_000, 100, 1),
                                                           ("backward", 4_000_000, 200, 2)))  # fmt: skip
    costs = gpus.ModelCosts(
        rows, 1_000, (4_000,), gpus.SGD_BYTES_PER_PARAMETER, gpus.SGD_OPS, optimizer="sgd"
    )
    return gpus.register("tiny conv (stepmodel test)", costs)


def test_convolutions_run_on_their_own_curve_where_one_is_given():
    shared = stepmodel.StepInputs(1e-5, 3e-5, peak_fraction=1.0, half_flops=2e7, memory=1.0, kernel_seconds=0)
    own = stepmodel.StepInputs(1e-5, 3e-5, 1.0, 2e7, 1.0, 0, conv_peak_fraction=0.25, conv_half_flops=2e7)
    name = tiny_conv()
    # batch 10: every kernel does 2e7 FLOPs; a product at half the peak takes 4e-5 s, a convolution on its
    # own curve at 0.25 x 1/2 = 1/8 of the peak 1.6e-4 s; the step's three convolution kernels are
    # forward's one and backward's two
    assert stepmodel.conv_seconds(name, 10, UNIT, shared) == pytest.approx(3 * 4e-5)
    assert stepmodel.conv_seconds(name, 10, UNIT, own) == pytest.approx(3 * 1.6e-4)
    assert stepmodel.conv_seconds(tiny(), 10, UNIT, own) == 0  # no convolution
    products = stepmodel.predict_step(name, 10, UNIT, shared)["device_seconds"]
    assert stepmodel.predict_step(name, 10, UNIT, own)["device_seconds"] == pytest.approx(
        products + 3 * (1.6e-4 - 4e-5)
    )  # the matrix product's kernels are priced as before
    assert own.product_efficiency(2e7, "conv") == pytest.approx(0.125)
    assert own.product_efficiency(2e7, "matmul") == shared.product_efficiency(2e7, "conv") == 0.5


def test_a_host_bound_step_is_its_host_and_a_device_bound_one_its_kernels():
    slow_host = stepmodel.StepInputs(1e-3, 1e-3, 1.0, 1.0, 1.0, 0.0)
    step = stepmodel.predict_step(tiny(), 10, UNIT, slow_host)
    assert step["step_seconds"] == pytest.approx(8e-3 + 6e-8)  # every kernel waits for its op
    assert slow_host.product_efficiency(1.0) == pytest.approx(0.5)


def test_adam_is_priced_as_it_runs_foreach_72_bytes_a_parameter():
    # (bytes per parameter, kernels, host ops): the roofline and the step model price the same pass
    assert gpus.FOREACH_ADAM_BYTES == 72 == ADAM_PASSES["foreach"] * 4
    assert gpus.optimizer_as_run("LinearNet") == (72, 7, 8)
    assert gpus.optimizer_as_run(tiny()) == (gpus.SGD_BYTES_PER_PARAMETER, gpus.SGD_OPS, gpus.SGD_OPS)
    # the training code builds torch's Adam without choosing an implementation: torch picks foreach for
    # CUDA tensors (fused only when asked for), and that is what the model prices
    optimizer = train.make_optimizer("adam", nn.Linear(2, 2).parameters(), 1e-3)
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["fused"] is None and optimizer.defaults["foreach"] is None


def test_the_h200_profiles_ran_foreach_adam_eight_list_wide_ops_a_step():
    profiles = [record for path in sorted(RECORDS.glob("*.json"))
                if (record := json.loads(path.read_text()))["kind"] == "advise_step_profile"]  # fmt: skip
    assert len(profiles) >= 4
    for record in profiles:
        events = record["result"]["events"]
        calls = {row["key"]: row["count"] for row in events if row["device_type"] == "CPU"}
        foreach = {key: count for key, count in calls.items() if key.startswith("aten::_foreach_")}
        assert sum(foreach.values()) == gpus.FOREACH_ADAM_OPS, record["key"]
        assert not any("fused_adam" in key for key in calls), record["key"]
