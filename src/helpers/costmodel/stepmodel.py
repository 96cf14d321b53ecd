"""A GPU training step with the host in it (issue 35): what the H200's profiles say the roofline misses.

The roofline (``costmodel.gpus``) prices each kernel at a fixed fraction of peak and the host at an
assumed 5-20 µs per op, and it prices fused Adam; measured on an H200, the host spends tens of
microseconds per counted op, Adam is PyTorch's default foreach Adam, and a product of a few million FLOPs
reaches a small fraction of peak. This model keeps the roofline's layers (FLOPs, bytes and kernels of every
layer, forward and backward, in issue order) and replaces what those profiles measured:

- **host**: every layer op costs ``op_seconds`` of host time and the optimizer's step ``optimizer_seconds``
  (foreach Adam: eight list-wide ops whose host time grows with the number of tensors, not their size);
- **device**: a product or convolution of F FLOPs per kernel runs at ``peak_fraction`` · F / (F +
  ``half_flops``) of the FP32 peak (small products use the GPU poorly, large ones approach a ceiling), any
  kernel moves its bytes at ``memory`` of the peak bandwidth, and each counted kernel takes at least
  ``kernel_seconds`` (the count misses some kernels a layer launches, so this is a floor per counted
  kernel, fitted, not the shortest kernel the GPU runs);
- **optimizer**: foreach Adam's seven list-wide kernels make ``ADAM_PASSES["foreach"]`` passes of 4 bytes
  over every parameter (72 bytes), against fused Adam's 28.

The host issues the ops one after another; a kernel starts when it has been issued and the previous one has
finished, and the step ends when the last kernel does. What is uncertain is an input, calibrated on
measured models and checked on others (``costmodel.validate``).
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.costmodel import gpus
from helpers.costmodel.specs import GPU
from helpers.optimizer_timing import ADAM_PASSES

FOREACH_ADAM_BYTES = ADAM_PASSES["foreach"] * gpus.FLOAT_BYTES  # 18 passes of a float32: 72 bytes
FOREACH_ADAM_KERNELS = 7  # lerp_, mul_, addcmul_, sqrt, div_, add_, addcdiv_ over the parameter list
FOREACH_ADAM_OPS = 8  # those seven and the step counters' add_: what the H200's profiles record
PRODUCTS = ("matmul", "conv")


@dataclass(frozen=True)
class StepInputs:
    """The uncertain inputs of one step: host seconds per layer op and per optimizer step, the products'
    efficiency curve (``peak_fraction``, ``half_flops``), the bandwidth fraction, the least kernel time."""

    op_seconds: float
    optimizer_seconds: float
    peak_fraction: float
    half_flops: float
    memory: float
    kernel_seconds: float

    def product_efficiency(self, flops: float) -> float:
        """The fraction of FP32 peak a product of ``flops`` FLOPs per kernel reaches."""
        return self.peak_fraction * flops / (flops + self.half_flops)


def layer_ops(model_name: str) -> int:
    """Host ops of the layers and the loss in one step (the optimizer's are priced as one step)."""
    forward, backward = gpus._issue_order(model_name)
    return sum(row[5] for row in forward + backward) + gpus._optimizer(model_name)[2]


def optimizer_pass(model_name: str) -> tuple[int, int]:
    """(bytes per parameter, kernels) of the optimizer's step as it runs: foreach Adam's for Adam (what
    ``torch.optim.Adam`` picks on CUDA tensors by default), the model's own otherwise (plain SGD)."""
    bytes_per_parameter, ops, _ = gpus._optimizer(model_name)
    if bytes_per_parameter == gpus.ADAM_BYTES_PER_PARAMETER:
        return FOREACH_ADAM_BYTES, FOREACH_ADAM_KERNELS
    return bytes_per_parameter, ops


def kernel_seconds(model_name: str, batch: int, gpu: GPU, inputs: StepInputs) -> list[tuple[float, float]]:
    """Every op of one step in issue order as (host seconds, device seconds): the forward layers, the
    loss, the backward layers (each layer's kernels share its FLOPs and bytes evenly; the loss's ops cost
    the least kernel time), then the optimizer's kernels, each issued after its share of the optimizer's
    host time and making its share of the passes over the parameters."""
    forward, backward = gpus._issue_order(model_name)
    bandwidth = gpu.memory_bandwidth * inputs.memory

    def layer(row) -> list[tuple[float, float]]:
        _, kind, flops, sample_bytes, fixed_bytes, kernels = row
        per_kernel = flops * batch / kernels
        rate = gpus.product_flops(gpu, model_name) * (
            inputs.product_efficiency(per_kernel) if kind in PRODUCTS else 1.0
        )
        memory = (sample_bytes * batch + fixed_bytes) / kernels / bandwidth
        return [(inputs.op_seconds, max(per_kernel / rate, memory, inputs.kernel_seconds))] * kernels

    loss = [(inputs.op_seconds, inputs.kernel_seconds)] * gpus._optimizer(model_name)[2]
    bytes_per_parameter, kernels = optimizer_pass(model_name)
    update = bytes_per_parameter * gpus.parameters_of(model_name) / bandwidth
    step = [(inputs.optimizer_seconds / kernels, max(update / kernels, inputs.kernel_seconds))] * kernels
    return (
        [op for row in forward for op in layer(row)]
        + loss
        + [op for row in backward for op in layer(row)]
        + step
    )


def predict_step(model_name: str, batch: int, gpu: GPU, inputs: StepInputs) -> dict[str, float]:
    """One step's seconds (``step_seconds``), its host's issue time (``host_seconds``) and its kernels'
    time (``device_seconds``), issuing the ops of ``kernel_seconds`` in order."""
    host = device = busy = 0.0
    for host_cost, device_cost in kernel_seconds(model_name, batch, gpu, inputs):
        host += host_cost
        device = max(device, host) + device_cost
        busy += device_cost
    return {"step_seconds": device, "host_seconds": host, "device_seconds": busy}
