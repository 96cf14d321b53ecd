"""A GPU training step with the host in it (issue 35): what the H200's profiles say the roofline misses.

The roofline (``costmodel.gpus``) prices each kernel at a fixed fraction of peak and the host at one time
per op for the whole step (its band: the H200 host's measured range); measured on an H200, the host's
time per op differs by model and by phase, and a product of a few million FLOPs reaches a small fraction
of peak. This model keeps the roofline's layers (FLOPs, bytes and kernels of every
layer, forward and backward, in issue order) and replaces what those profiles measured:

- **host**: every layer op costs ``op_seconds`` of host time and the optimizer's step ``optimizer_seconds``
  (foreach Adam: eight list-wide ops whose host time grows with the number of tensors, not their size);
- **device**: a matrix product of F FLOPs per kernel runs at ``peak_fraction`` · F / (F + ``half_flops``) of
  the FP32 peak (small products use the GPU poorly, large ones approach a ceiling), and a convolution on a
  curve of its own (``conv_peak_fraction``, ``conv_half_flops``) where one was fitted: on the H200 with
  TF32 off, cuDNN's float32 convolutions level off near 11 TFLOP/s (MelCNN's 2-D and ConvNet's 1-D alike)
  while matrix products pass 30; any kernel moves its bytes at ``memory`` of the peak bandwidth, and each
  counted kernel takes at least
  ``kernel_seconds`` (the count misses some kernels a layer launches, so this is a floor per counted
  kernel, fitted, not the shortest kernel the GPU runs);
- **optimizer**: as it runs (``gpus.optimizer_as_run``): foreach Adam's seven list-wide kernels make 18
  passes of 4 bytes over every parameter (72 bytes), against fused Adam's 28.

The host issues the ops one after another; a kernel starts when it has been issued and the previous one has
finished, and the step ends when the last kernel does. What is uncertain is an input, calibrated on
measured models and checked on others (``costmodel.validate``).
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.costmodel import gpus
from helpers.costmodel.specs import GPU

PRODUCTS = ("matmul", "conv")


@dataclass(frozen=True)
class StepInputs:
    """The uncertain inputs of one step: host seconds per layer op and per optimizer step, the products'
    efficiency curve (``peak_fraction``, ``half_flops``), the bandwidth fraction, the least kernel time,
    and the convolutions' own curve (None: they share the products')."""

    op_seconds: float
    optimizer_seconds: float
    peak_fraction: float
    half_flops: float
    memory: float
    kernel_seconds: float
    conv_peak_fraction: float | None = None
    conv_half_flops: float | None = None

    def product_efficiency(self, flops: float, kind: str = "matmul") -> float:
        """The fraction of FP32 peak a product (``kind`` "matmul" or "conv") of ``flops`` FLOPs per kernel
        reaches."""
        if kind == "conv" and self.conv_peak_fraction is not None:
            return self.conv_peak_fraction * flops / (flops + self.conv_half_flops)
        return self.peak_fraction * flops / (flops + self.half_flops)


def layer_ops(model_name: str) -> int:
    """Host ops of the layers and the loss in one step (the optimizer's are priced as one step)."""
    forward, backward = gpus._issue_order(model_name)
    return sum(row[5] for row in forward + backward) + gpus.loss_ops(model_name)


def layer_kernels(model_name: str, row: tuple, batch: int, gpu: GPU, inputs: StepInputs) -> list:
    """One layer's kernels (a row of ``gpus._issue_order``) as (host seconds, device seconds): its FLOPs
    and bytes shared evenly, each kernel the longest of its FLOPs at its kind's efficiency, its bytes at
    the bandwidth and the least kernel time."""
    _, kind, flops, sample_bytes, fixed_bytes, kernels = row
    per_kernel = flops * batch / kernels
    rate = gpus.product_flops(gpu, model_name) * (
        inputs.product_efficiency(per_kernel, kind) if kind in PRODUCTS else 1.0
    )
    memory = (sample_bytes * batch + fixed_bytes) / kernels / (gpu.memory_bandwidth * inputs.memory)
    return [(inputs.op_seconds, max(per_kernel / rate, memory, inputs.kernel_seconds))] * kernels


def conv_seconds(model_name: str, batch: int, gpu: GPU, inputs: StepInputs) -> float:
    """The device seconds of a step's convolutions, forward and backward (0 for a model without any):
    what the profiles' convolution operators measure, to fit the convolutions' own curve on."""
    forward, backward = gpus._issue_order(model_name)
    return sum(
        device
        for row in forward + backward
        if row[1] == "conv"
        for _, device in layer_kernels(model_name, row, batch, gpu, inputs)
    )


def kernel_seconds(model_name: str, batch: int, gpu: GPU, inputs: StepInputs) -> list[tuple[float, float]]:
    """Every op of one step in issue order as (host seconds, device seconds): the forward layers, the
    loss, the backward layers (each layer's kernels share its FLOPs and bytes evenly; the loss's ops cost
    the least kernel time), then the optimizer's kernels, each issued after its share of the optimizer's
    host time and making its share of the passes over the parameters."""
    forward, backward = gpus._issue_order(model_name)
    loss = [(inputs.op_seconds, inputs.kernel_seconds)] * gpus.loss_ops(model_name)
    bytes_per_parameter, kernels, _ = gpus.optimizer_as_run(model_name)
    update = bytes_per_parameter * gpus.parameters_of(model_name) / (gpu.memory_bandwidth * inputs.memory)
    step = [(inputs.optimizer_seconds / kernels, max(update / kernels, inputs.kernel_seconds))] * kernels
    return (
        [op for row in forward for op in layer_kernels(model_name, row, batch, gpu, inputs)]
        + loss
        + [op for row in backward for op in layer_kernels(model_name, row, batch, gpu, inputs)]
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
