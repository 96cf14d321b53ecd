"""A training step on a GPU we do not have, from first principles, with its uncertainty (chapter 5).

Every layer of the two models does a known amount of arithmetic and moves a known number of bytes,
forward and backward, computed here from its shapes (exact integers, asserted in the tests against
``torch.utils.flop_counter``). A kernel's device time is the longer of its arithmetic at an achieved
fraction of the GPU's FP32 peak and its memory traffic at an achieved fraction of the peak bandwidth.
The host issues one eager PyTorch op after another, each costing a fixed host time; a kernel starts when
it has been issued and the previous kernel has finished, so a step of many small kernels is as long as
the host's issuing (the per-op floor) and a step of large ones as long as the device's work.

What is not known for a GPU we have not run on is a range (``costmodel.specs``): every prediction is
computed for the corners of those ranges (``specs.scenarios``) and shown as a band; a measured
single-GPU step replaces the roofline wherever the study has one (``costmodel.recommend``).

Conventions (stated once, used everywhere):

- a multiply-add is 2 FLOPs; a bias add, an activation or a comparison is 1 per element;
- bytes are float32 (4) except max-pooling's saved indices (int64, 8): each kernel reads its inputs and
  writes its outputs once (weights once per kernel, whatever the batch);
- the first layer computes no gradient for its input (the waveform needs none);
- the study runs float32 with TF32 off in every process (``helpers.worker.set_tf32(False)``), so
  convolutions and matrix products get the FP32 peak. (PyTorch's default would run cuDNN's float32
  convolutions on TF32 tensor cores; the study measures what it predicts, so it does not.)
- the inputs sit on the GPU already (the study's timed steps keep the training set there);
- the loss (10 logits per sample) costs its ops and no device time; Adam is priced as the study runs it
  (``optimizer_as_run``): PyTorch's default foreach Adam on CUDA, 8 list-wide host ops whose 7 kernels
  make 18 passes of 4 bytes over every parameter (72 bytes per parameter), where a fused Adam would make 7
  (28 bytes: read the parameter, its gradient and both moments, write three of them).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn

from helpers.costmodel.specs import CENTRAL, GPU, GPUS, SINGLE_GPU_INPUTS, Scenario, scenarios
from helpers.data import CLIP_SAMPLES
from helpers.ddp import gradient_sizes_in_backward_order
from helpers.models import build_model, parameter_count
from helpers.optimizer_timing import ADAM_PASSES

FLOAT_BYTES = 4
INDEX_BYTES = 8  # max-pooling keeps the position of each maximum for backward, as int64
# How a model's costs name Adam (``ModelCosts``, and so the digests of registered models' names): its least
# traffic, one fused pass (read p, g, m, v; write p, m, v), and a dozen ops. What runs is priced by
# ``optimizer_as_run``.
ADAM_BYTES_PER_PARAMETER = 7 * FLOAT_BYTES
ADAM_OPS = 12
FOREACH_ADAM_BYTES = ADAM_PASSES["foreach"] * FLOAT_BYTES  # 18 passes of a float32: 72 bytes
FOREACH_ADAM_KERNELS = 7  # lerp_, mul_, addcmul_, sqrt, div_, add_, addcdiv_ over the parameter list
FOREACH_ADAM_OPS = 8  # those seven and the step counters' add_: what the H200's profiles record
LOSS_OPS = 4  # log-softmax and NLL, forward and backward
SGD_BYTES_PER_PARAMETER = 3 * FLOAT_BYTES  # plain SGD: read p and g, write p
SGD_OPS = 2  # foreach SGD: scale the gradients, add them
LAYER_COLUMNS = ("layer", "kind", "phase", "flops_per_sample", "multiply_add_flops_per_sample",
                 "bytes_per_sample", "fixed_bytes", "kernels")  # fmt: skip


@dataclass(frozen=True)
class ModelCosts:
    """A model the roofline knows by name other than the book's two: its layers' rows (``LAYER_COLUMNS``,
    as ``layer_costs`` gives them), its parameters, its gradients' sizes in the order backward produces
    them, its optimizer's least bytes per parameter and ops per step (Adam's as one fused pass, 28 B and 12
    ops: these name it in the digests of registered names, and ``optimizer_as_run`` prices what runs), and
    whether its products and convolutions run in bfloat16 (``helpers.advise`` counts a reader's model into
    one). ``optimizer`` names the optimizer; it is left out of the repr, so the digests stay as they were."""

    layers: tuple[tuple, ...]
    parameters: int
    gradient_sizes: tuple[int, ...]
    optimizer_bytes_per_parameter: int = ADAM_BYTES_PER_PARAMETER
    optimizer_ops: int = ADAM_OPS
    loss_ops: int = LOSS_OPS
    bf16: bool = False
    optimizer: str = field(default="adam", repr=False)


REGISTERED: dict[str, ModelCosts] = {}


def register(name: str, costs: ModelCosts) -> str:
    """Let every function of the roofline and of ``recommend`` take ``name`` for a model of these costs;
    a name already registered with other costs is refused (answers are cached by name)."""
    if name in REGISTERED and REGISTERED[name] != costs:
        raise ValueError(f"{name!r} is already registered with other costs: register them under a new name")
    if name in ("LinearNet", "ConvNet"):
        raise ValueError(
            f"{name!r} is one of the book's models: register a reader's model under another name"
        )
    REGISTERED[name] = costs
    return name


def shown_name(name: str) -> str:
    """A registered name as a reader reads it: "MelCNN [0e882f44]" (the digest of what was counted, which
    tells two shapes of one model apart in the registry) is "MelCNN"."""
    return re.sub(r" \[[0-9a-f]{8}\]$", "", name)


def loss_ops(model_name: str) -> int:
    """Host ops of the loss, forward and backward (log-softmax and NLL for the book's models)."""
    costs = REGISTERED.get(model_name)
    return LOSS_OPS if costs is None else costs.loss_ops


def optimizer_as_run(model_name: str) -> tuple[int, int, int]:
    """(bytes per parameter, kernels, host ops) of the optimizer's step as the study runs it on a GPU:
    PyTorch's default foreach Adam for Adam (what ``torch.optim.Adam`` picks on CUDA tensors), the model's
    own pass otherwise (plain SGD: one kernel per op)."""
    costs = REGISTERED.get(model_name)
    if costs is None or costs.optimizer == "adam":
        return FOREACH_ADAM_BYTES, FOREACH_ADAM_KERNELS, FOREACH_ADAM_OPS
    return costs.optimizer_bytes_per_parameter, costs.optimizer_ops, costs.optimizer_ops


def product_flops(gpu: GPU, model_name: str) -> float:
    """The peak a model's products and convolutions run at on ``gpu``: FP32 (the study keeps TF32 off), or
    the dense bfloat16 tensor-core peak for a model registered as bf16 (refused on a GPU without one)."""
    costs = REGISTERED.get(model_name)
    if costs is None or not costs.bf16:
        return gpu.fp32_flops
    if gpu.bf16_flops is None:
        raise ValueError(f"the {gpu.name} has no bfloat16 tensor cores")
    return gpu.bf16_flops


def layer_shapes(model: nn.Module) -> list[tuple[str, nn.Module, tuple, tuple]]:
    """(name, module, input shape, output shape) of every leaf layer for one sample, in forward order."""
    found = []
    hooks = [
        module.register_forward_hook(
            lambda module, inputs, output, name=name: found.append(
                (name, module, tuple(inputs[0].shape[1:]), tuple(output.shape[1:]))
            )
        )
        for name, module in model.named_modules()
        if not list(module.children())
    ]
    with torch.no_grad():
        model(torch.zeros(1, 1, CLIP_SAMPLES))
    for hook in hooks:
        hook.remove()
    return found


def _elements(shape: tuple) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def layer_costs(model_name: str) -> pd.DataFrame:
    """A copy of ``_layer_costs(model_name)`` (computed once per model)."""
    return _layer_costs(model_name).copy()


@functools.cache
def _layer_costs(model_name: str) -> pd.DataFrame:
    if model_name in REGISTERED:
        return pd.DataFrame(list(REGISTERED[model_name].layers), columns=list(LAYER_COLUMNS))
    return _book_layer_costs(model_name)


def _book_layer_costs(model_name: str) -> pd.DataFrame:
    """Per layer and phase: FLOPs and bytes per sample, the batch-independent bytes (weights), kernels.

    Columns: ``layer``, ``kind`` ("matmul", "conv" or "elementwise"), ``phase`` ("forward",
    "backward"), ``flops_per_sample`` (``multiply_add_flops_per_sample`` of them in matrix products and
    convolutions: what ``torch.utils.flop_counter`` counts), ``bytes_per_sample``, ``fixed_bytes``,
    ``kernels``; all exact integers, by the conventions of the module docstring. Views (Flatten) cost
    nothing and are left out.
    """
    rows = []

    def add(label, kind, phase, flops, sample_bytes, fixed_bytes=0, kernels=1, multiply_adds=0) -> None:
        rows.append({"layer": label, "kind": kind, "phase": phase, "flops_per_sample": flops,
                     "multiply_add_flops_per_sample": multiply_adds, "bytes_per_sample": sample_bytes,
                     "fixed_bytes": fixed_bytes, "kernels": kernels})  # fmt: skip

    first = True  # until a layer with parameters: its input (the waveform) needs no gradient
    for index, (_, module, shape_in, shape_out) in enumerate(layer_shapes(build_model(model_name))):
        n_in, n_out = _elements(shape_in), _elements(shape_out)
        label = f"{index}: {type(module).__name__}"
        if isinstance(module, nn.Linear | nn.Conv1d):
            if isinstance(module, nn.Linear):
                kind, macs = "matmul", module.in_features * module.out_features
            else:
                kind = "conv"
                macs = module.in_channels * module.kernel_size[0] * module.out_channels * shape_out[-1]
            weights, kernel = module.weight.numel() + module.bias.numel(), module.weight.numel()
            forward, backward = 2 * macs, 2 * macs + (0 if first else 2 * macs)  # dW, and dx but first
            add(label, kind, "forward", forward + n_out, FLOAT_BYTES * (n_in + n_out), FLOAT_BYTES * weights,
                multiply_adds=forward)  # fmt: skip
            add(
                label, kind, "backward", backward + n_out,  # db: one add per output element
                FLOAT_BYTES * (n_out + n_in + (0 if first else n_in)),  # read dy and x, write dx
                FLOAT_BYTES * (weights + (0 if first else kernel)),  # write dW, db; read W for dx
                2 + (0 if first else 1), multiply_adds=backward,
            )  # fmt: skip
            first = False
        elif isinstance(module, nn.MaxPool1d):
            pooled = FLOAT_BYTES * (n_in + n_out) + INDEX_BYTES * n_out
            add(label, "elementwise", "forward", n_in, pooled)
            add(label, "elementwise", "backward", n_out, pooled)
        elif isinstance(module, nn.ReLU | nn.Sigmoid):
            add(label, "elementwise", "forward", n_out, FLOAT_BYTES * 2 * n_out)
            add(label, "elementwise", "backward", n_out, FLOAT_BYTES * 3 * n_out)  # read dy and y, write dx
        elif not isinstance(module, nn.Flatten):
            raise ValueError(f"no cost formula for layer {label}")
    return pd.DataFrame(rows)


@functools.cache
def parameters_of(model_name: str) -> int:
    """Trainable parameters of one of the book's models or of a registered one."""
    if model_name in REGISTERED:
        return REGISTERED[model_name].parameters
    return parameter_count(build_model(model_name))


def gradient_sizes(model_name: str) -> list[int]:
    """Bytes of each parameter's gradient in the order backward produces them: what DDP buckets."""
    return list(_gradient_sizes(model_name))


@functools.cache
def _gradient_sizes(model_name: str) -> tuple[int, ...]:
    """``gradient_sizes``, computed once per model (a band prices the same model thousands of times)."""
    if model_name in REGISTERED:
        return tuple(REGISTERED[model_name].gradient_sizes)
    return tuple(gradient_sizes_in_backward_order(model_name))


@functools.cache
def gradient_bytes(model_name: str) -> int:
    """Bytes of the model's float32 gradient: what an all-reduce moves per step."""
    return sum(gradient_sizes(model_name))


def expected_backward_forward_ratio(model_name: str, kind: str = "conv") -> float:
    """Multiply-adds of the backward pass of the layers of ``kind`` ("conv" or "matmul") over those of
    their forward pass, counted from the layers' shapes (``layer_costs``): a weight gradient for every
    layer, an input gradient for every layer but the first (its input needs none). Chapter 1 sets the
    profiler's measured ratio beside it."""
    costs = layer_costs(model_name)
    rows = costs[costs["kind"] == kind].groupby("phase")["multiply_add_flops_per_sample"].sum()
    return float(rows["backward"] / rows["forward"])


def training_flops_per_sample(model_name: str) -> int:
    """Forward and backward FLOPs of one sample, every layer (the F of the chapter's rule)."""
    return int(layer_costs(model_name)["flops_per_sample"].sum())


@functools.cache
def ops_per_step(model_name: str) -> int:
    """Host ops of one training step: every layer's kernels, forward and backward, the loss and the
    optimizer's step as it runs (``optimizer_as_run``)."""
    return (
        int(_layer_costs(model_name)["kernels"].sum())
        + loss_ops(model_name)
        + optimizer_as_run(model_name)[2]
    )


@functools.cache
def _issue_order(model_name: str) -> tuple:
    """The step's layers in the order the host issues them: forward, then backward in reverse, as
    (phase, kind, FLOPs per sample, bytes per sample, fixed bytes, kernels)."""
    costs = _layer_costs(model_name)
    rows = [(r.phase, r.kind, r.flops_per_sample, r.bytes_per_sample, r.fixed_bytes, r.kernels)
            for r in costs.itertuples()]  # fmt: skip
    forward = [row for row in rows if row[0] == "forward"]
    backward = [row for row in rows if row[0] == "backward"][::-1]
    return tuple(forward), tuple(backward)


def _step_work(model_name: str, batch: int, gpu: GPU, scenario: Scenario, optimizer: bool) -> list[tuple]:
    """The step's work in issue order: (phase, device seconds, ops, what bounds the device time)."""
    peak = {"matmul": product_flops(gpu, model_name), "conv": product_flops(gpu, model_name),
            "elementwise": gpu.fp32_flops}  # fmt: skip
    efficiency = {"matmul": scenario.matmul, "conv": scenario.conv, "elementwise": 1.0}
    bandwidth = gpu.memory_bandwidth * scenario.memory

    def item(row) -> tuple:
        phase, kind, flops, sample_bytes, fixed_bytes, kernels = row
        compute = flops * batch / (peak[kind] * efficiency[kind])
        memory = (sample_bytes * batch + fixed_bytes) / bandwidth
        return (phase, max(compute, memory), kernels, "compute" if compute >= memory else "memory")

    forward, backward = _issue_order(model_name)
    losses = loss_ops(model_name)
    optimizer_bytes, _, optimizer_ops = optimizer_as_run(model_name)
    loss = [("forward", 0.0, losses // 2, "memory"), ("backward", 0.0, losses - losses // 2, "memory")]
    update = optimizer_bytes * parameters_of(model_name) / bandwidth
    tail = [("optimizer", update, optimizer_ops, "memory")] if optimizer else []
    return [item(row) for row in forward] + loss + [item(row) for row in backward] + tail


def roofline_step(
    model_name: str, batch: int, gpu: GPU, scenario: Scenario = CENTRAL, *, optimizer: bool = True
) -> dict:
    """Predicted seconds of one training step at ``batch`` samples on ``gpu``, by phase, for one
    ``scenario`` of the uncertain inputs (the central values by default).

    The host issues the step's ops one after another, ``scenario.op_seconds`` each; a kernel runs when it
    has been issued and the previous one has finished, for max(FLOPs / achieved FLOP/s, bytes / achieved
    bandwidth) (a layer's time split evenly over its kernels). The step ends when the last kernel does
    (``loss.item()`` waits for it). Returns forward, backward and optimizer seconds, their sum, and
    whether arithmetic, memory traffic or the host's issuing ("host": the device idles most) bound it.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    return dict(_roofline_step(model_name, batch, gpu, scenario, optimizer))


@functools.cache
def _roofline_step(model_name: str, batch: int, gpu: GPU, scenario: Scenario, optimizer: bool) -> dict:
    """``roofline_step``, computed once per argument (bands evaluate the same steps many times)."""
    work = _step_work(model_name, batch, gpu, scenario, optimizer)
    host = device = 0.0
    ends = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    busy = {"compute": 0.0, "memory": 0.0}
    for phase, seconds, ops, bound in work:
        for _ in range(ops):
            host += scenario.op_seconds
            device = max(device, host) + seconds / ops
        ends[phase] = device
        busy[bound] += seconds
    ends["backward"] = max(ends["backward"], ends["forward"])
    ends["optimizer"] = max(ends["optimizer"], ends["backward"])
    idle = device - busy["compute"] - busy["memory"]
    bound_by = max({**busy, "host": idle}.items(), key=lambda pair: pair[1])[0]
    return {
        "forward_seconds": ends["forward"],
        "backward_seconds": ends["backward"] - ends["forward"],
        "optimizer_seconds": ends["optimizer"] - ends["backward"],
        "step_seconds": device,
        "bound_by": bound_by,
    }


def arithmetic_seconds(model_name: str, batch: int, gpu: GPU, scenario: Scenario = CENTRAL) -> float:
    """Seconds of the step's convolutions and matrix products alone at the scenario's efficiencies: the
    part of a step that grows with the batch and that more GPUs divide."""
    peak = product_flops(gpu, model_name)
    rate = {"matmul": peak * scenario.matmul, "conv": peak * scenario.conv}
    forward, backward = _issue_order(model_name)
    return sum(row[2] * batch / rate[row[1]] for row in forward + backward if row[1] in rate)


def fixed_step_seconds(model_name: str, gpu: GPU, scenario: Scenario = CENTRAL) -> float:
    """What every GPU repeats each step whatever its batch: the host's ops and the optimizer's pass."""
    update = (
        optimizer_as_run(model_name)[0] * parameters_of(model_name) / (gpu.memory_bandwidth * scenario.memory)
    )
    return ops_per_step(model_name) * scenario.op_seconds + update


def roofline_band(model_name: str, batch: int, gpu: GPU) -> dict:
    """The roofline's step at the central values and its lowest and highest over every scenario."""
    steps = [
        roofline_step(model_name, batch, gpu, scenario)["step_seconds"]
        for _, scenario in scenarios(SINGLE_GPU_INPUTS)
    ]
    central = roofline_step(model_name, batch, gpu)
    return {**central, "step_seconds_low": min(steps), "step_seconds_high": max(steps)}


def roofline_table(models, gpu_names, batches) -> pd.DataFrame:
    """The roofline's single-GPU step for each model, GPU and batch: central, lowest and highest over the
    band, and what bounds the central step."""
    return pd.DataFrame(
        [
            {"model": model, "gpu": name, "batch": batch, **roofline_band(model, batch, GPUS[name])}
            for model in models
            for name in gpu_names
            for batch in batches
        ]
    )


def roofline_error(measured: pd.DataFrame) -> pd.DataFrame:
    """Each measured single-GPU step next to the roofline's band, the central prediction's error (%) and
    whether the measurement falls inside the band."""
    bands = [roofline_band(row.model, int(row.batch), GPUS[row.gpu]) for row in measured.itertuples()]
    frame = measured.assign(roofline_seconds=[b["step_seconds"] for b in bands],
                            roofline_low=[b["step_seconds_low"] for b in bands],
                            roofline_high=[b["step_seconds_high"] for b in bands])  # fmt: skip
    frame["error_percent"] = (frame["roofline_seconds"] - frame["step_seconds"]) / frame["step_seconds"] * 100
    frame["within_band"] = frame["step_seconds"].between(frame["roofline_low"], frame["roofline_high"])
    return frame
