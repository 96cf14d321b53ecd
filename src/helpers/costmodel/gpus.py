"""A training step on a GPU we do not have, from first principles, with its uncertainty (chapter 5).

Every layer of the two models does a known amount of arithmetic and moves a known number of bytes,
forward and backward, computed here from its shapes (exact integers, asserted in the tests against
``torch.utils.flop_counter``). A kernel's device time is the longer of its arithmetic at an achieved
fraction of the GPU's FP32 peak and its memory traffic at an achieved fraction of the peak bandwidth.
The host issues one eager PyTorch op after another, each costing a fixed host time; a kernel starts when
it has been issued and the previous kernel has finished, so a step of many small kernels is as long as
the host's issuing (the per-op floor) and a step of large ones as long as the device's work.

Three inputs are not known for a GPU we have not run on, and each is a range (``Range``): the achieved
fraction of peak per layer kind, the host time per op and the all-reduce bandwidth a link achieves.
Every prediction is computed for the corners of those ranges (``scenarios``) and shown as a band; a
measured single-GPU step replaces the roofline wherever the study has one (``costmodel.recommend``).

Conventions (stated once, used everywhere):

- a multiply-add is 2 FLOPs; a bias add, an activation or a comparison is 1 per element;
- bytes are float32 (4) except max-pooling's saved indices (int64, 8): each kernel reads its inputs and
  writes its outputs once (weights once per kernel, whatever the batch);
- the first layer computes no gradient for its input (the waveform needs none);
- the study runs float32 with TF32 off in every process (``helpers.worker.set_tf32(False)``), so
  convolutions and matrix products get the FP32 peak. (PyTorch's default would run cuDNN's float32
  convolutions on TF32 tensor cores; the study measures what it predicts, so it does not.)
- the inputs sit on the GPU already (the study's timed steps keep the training set there);
- the loss (10 logits per sample) costs its ops and no device time; Adam is one fused pass reading the
  parameter, its gradient and two moments and writing three of them: 28 bytes per parameter.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, replace

import pandas as pd
import torch
from torch import nn

from helpers.data import CLIP_SAMPLES
from helpers.models import build_model, parameter_count

FLOAT_BYTES = 4
INDEX_BYTES = 8  # max-pooling keeps the position of each maximum for backward, as int64
ADAM_BYTES_PER_PARAMETER = 7 * FLOAT_BYTES  # read p, g, m, v; write p, m, v
ADAM_OPS = 12  # multi-tensor Adam: about a dozen list-wide ops per step (an assumption, inside the band)
LOSS_OPS = 4  # log-softmax and NLL, forward and backward
READ_ON = "2026-11-24"  # when the sources below were read


@dataclass(frozen=True)
class Range:
    """An input the predictions are unsure of: low, central and high values, with source and date."""

    name: str
    low: float
    central: float
    high: float
    unit: str
    source: str
    date: str


COMPUTE_EFFICIENCY = {
    "matmul": Range(
        "achieved fraction of FP32 peak, matrix products", 0.2, 0.5, 0.8, "",
        "assumption: cuBLAS SGEMM reaches 70-90% of FP32 peak on large square products; ours have 10 to "
        "600 rows, so lower", READ_ON,
    ),
    "conv": Range(
        "achieved fraction of FP32 peak, convolutions", 0.1, 0.3, 0.6, "",
        "assumption: cuDNN on a Conv1d with 1 input channel and 200 taps, or 30-50 channels, uses the "
        "units poorly; 0.6 is a good large GEMM", READ_ON,
    ),
}  # fmt: skip
MEMORY_EFFICIENCY = Range(
    "achieved fraction of peak memory bandwidth", 0.5, 0.7, 0.9, "",
    "assumption: streaming kernels reach 70-90% of the datasheet's bandwidth, small ones less", READ_ON,
)  # fmt: skip
OP_OVERHEAD = Range(
    "host time per eager PyTorch op", 5e-6, 10e-6, 20e-6, "s",
    "a bare CUDA launch is 3-5 µs (NVIDIA developer forum; susun-blog.com, RTX 5070 Ti); Python, "
    "autograd and the ATen dispatcher make it 5-25 µs per op (jiahuanglin.xyz, 'From PyTorch op to "
    "kernel launch', undated, read 2026-11-24)", READ_ON,
)  # fmt: skip


@dataclass(frozen=True)
class GPU:
    """Datasheet figures of one GPU: FP32 peak, memory bandwidth and size, and where they were read."""

    name: str
    fp32_flops: float  # FP32 (CUDA-core) peak, FLOP/s: what float32 training with TF32 off uses
    memory_bandwidth: float  # bytes/s
    memory_bytes: int
    source: str
    date: str
    tf32_flops: float | None = None  # dense TF32 tensor-core peak: PyTorch's default for convolutions


GB = 10**9
H100_SHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (SXM and PCIe columns; NVIDIA's table as copied by hpctech.co.jp)"
)
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
GPUS = {
    "GTX 1080 Ti": GPU(
        "GTX 1080 Ti", 3584 * 2 * 1582e6, 484 * GB, 11 * GB,
        "no datasheet for GeForce cards: NVIDIA's GTX 1080 Ti specifications (3,584 CUDA cores, 1,582 MHz "
        "boost, 11 GB GDDR5X at 11 Gbps on 352 bits = 484 GB/s), FP32 = 2 x cores x boost clock; as "
        "reported by vortez.net and tomshardware.com (2017-03-01)", "2017-03-01",
    ),
    "V100 SXM2 16 GB": GPU(
        "V100 SXM2 16 GB", 15.7e12, 900 * GB, 16 * GB,
        "NVIDIA Tesla V100 datasheet: SXM2 FP32 15.7 TFLOPS, 16 GB HBM2 at 900 GB/s, NVLink 300 GB/s", "2017",
    ),
    "A100 SXM 40 GB": GPU(
        "A100 SXM 40 GB", 19.5e12, 1555 * GB, 40 * GB,
        f"{A100_SHEET}: FP32 19.5 TFLOPS; 40 GB HBM2 at 1,555 GB/s (the 2020 edition's 40 GB column)",
        "2020", tf32_flops=156e12,
    ),
    "A100 SXM 80 GB": GPU(
        "A100 SXM 80 GB", 19.5e12, 2039 * GB, 80 * GB,
        f"{A100_SHEET}: FP32 19.5 TFLOPS; 80 GB HBM2e at 2,039 GB/s; NVLink 600 GB/s", "2021",
        tf32_flops=156e12,
    ),
    "A100 PCIe 80 GB": GPU(
        "A100 PCIe 80 GB", 19.5e12, 1935 * GB, 80 * GB,
        f"{A100_SHEET}: FP32 19.5 TFLOPS; 80 GB HBM2e at 1,935 GB/s; PCIe Gen4 64 GB/s", "2021",
        tf32_flops=156e12,
    ),
    "H100 SXM 80 GB": GPU(
        "H100 SXM 80 GB", 67e12, 3350 * GB, 80 * GB,
        f"{H100_SHEET}: FP32 67 TFLOPS; 80 GB HBM3 at 3,350 GB/s; NVLink 900 GB/s", "2022",
        tf32_flops=494.5e12,
    ),
    "H100 PCIe 80 GB": GPU(
        "H100 PCIe 80 GB", 51e12, 2000 * GB, 80 * GB,
        f"{H100_SHEET}: FP32 51 TFLOPS; 80 GB HBM2e at 2,000 GB/s; PCIe Gen5 128 GB/s", "2022",
        tf32_flops=378e12,
    ),
    "H200 SXM 141 GB": GPU(
        "H200 SXM 141 GB", 67e12, 4800 * GB, 141 * GB,
        "NVIDIA H200 Tensor Core GPU datasheet: the H100's GH100 compute (FP32 67 TFLOPS) with 141 GB of "
        "HBM3e at 4.8 TB/s (announced 2023-11-13; no NVIDIA copy in the searchable index, figures as quoted "
        "by aiwiki.ai, updated 2026-06-21)", "2023-11-13", tf32_flops=494.5e12,
    ),
    "L4": GPU(
        "L4", 30.3e12, 300 * GB, 24 * GB,
        "NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3 TFLOPS; 24 GB GDDR6 at 300 GB/s; PCIe Gen4 x16 "
        "(figures as listed by fpsbench.com and pcpartdb.com: 30.29 TFLOPS, 300.1 GB/s)", "2023-03-21",
        tf32_flops=60e12,
    ),
    "L40S": GPU(
        "L40S", 91.6e12, 864 * GB, 48 * GB,
        "NVIDIA L40S datasheet: FP32 91.6 TFLOPS; 48 GB GDDR6 at 864 GB/s; PCIe Gen4 x16, no NVLink (copy of "
        "NVIDIA's table at mullet.se and itcreations.com)", "2023-08",
        tf32_flops=183e12,
    ),
}  # fmt: skip

# How drivers name these GPUs (torch.cuda.get_device_properties(i).name): the first rule whose words all
# appear in the name wins; None for an H100 NVL (a different board) and for GPUs not in the table.
DRIVER_NAMES = (
    (("H200",), "H200 SXM 141 GB"), (("H100", "NVL"), None), (("H100", "PCIE"), "H100 PCIe 80 GB"),
    (("H100",), "H100 SXM 80 GB"), (("A100", "PCIE"), "A100 PCIe 80 GB"),
    (("A100", "40GB"), "A100 SXM 40 GB"), (("A100",), "A100 SXM 80 GB"), (("V100",), "V100 SXM2 16 GB"),
    (("L40S",), "L40S"), (("L4",), "L4"), (("1080", "TI"), "GTX 1080 Ti"),
)  # fmt: skip


def gpu_key(driver_name: str) -> str | None:
    """The ``GPUS`` entry of a GPU as its driver names it ("NVIDIA H100 80GB HBM3" → "H100 SXM 80 GB").

    An A100 PCIe 40 GB is read as the 80 GB card (the same FP32 peak, 20 % less bandwidth)."""
    words = set(re.split(r"[\s\-_]+", driver_name.upper()))
    return next((key for tokens, key in DRIVER_NAMES if set(tokens) <= words), None)


@dataclass(frozen=True)
class Link:
    """How GPUs are joined: the spec's peak per direction, and the all-reduce bus bandwidth achieved on it.

    ``bus_bandwidth`` is the central value of nccl-tests' busbw for a ring all-reduce on such a link
    (bytes/s), with ``bus_bandwidth_low`` and ``bus_bandwidth_high`` bounding what a rented machine may
    achieve; ``alpha_seconds`` is the latency of one ring step (a published small-message all-reduce time
    divided by its 2(k−1) steps).
    """

    name: str
    peak_bytes_per_second: float
    bus_bandwidth: float
    bus_bandwidth_low: float
    bus_bandwidth_high: float
    alpha_seconds: float
    basis: str
    source: str
    date: str

    def bus(self, level: str = "central") -> float:
        """The all-reduce bus bandwidth at ``level`` ("low", "central" or "high")."""
        return {"low": self.bus_bandwidth_low, "central": self.bus_bandwidth,
                "high": self.bus_bandwidth_high}[level]  # fmt: skip


def pcie_peak(transfers_per_second: float) -> float:
    """Bytes/s per direction of a x16 PCIe link at ``transfers_per_second`` per lane (128b/130b)."""
    return transfers_per_second * 16 * 128 / 130 / 8


# nccl-tests on 8 RTX 5090s over PCIe 5.0: busbw 28 GB/s (NCCL issue 1639, 2025-03-14), 44% of peak
PCIE_MEASURED_FRACTION = 28e9 / pcie_peak(32e9)
PCIE_RANGE = (0.3, 0.8)  # fraction of peak: host bridges and switches below, a clean switch above
NVLINK_RANGE = (0.6, 0.85)  # fraction of peak: NCCL's protocol overhead is about 20 % (nccl-tests 212)
PCIE_ALPHA = 42.14e-6 / 14  # 8 B all-reduce on 8 RTX 4090s over PCIe: 42.14 µs (NCCL issue 1530)
NVLINK_ALPHA = 33.7e-6 / 14  # ring all-reduce latency on 8 A100s, one channel: 33.7 µs (nccl-tests 123)


def _pcie(name: str, rate: float, source: str, date: str) -> Link:
    peak = pcie_peak(rate)
    return Link(name, peak, PCIE_MEASURED_FRACTION * peak, PCIE_RANGE[0] * peak, PCIE_RANGE[1] * peak,
                PCIE_ALPHA,
                f"central: {PCIE_MEASURED_FRACTION:.0%} of peak, the fraction nccl-tests measured "
                f"on 8 GPUs over PCIe 5.0 (NCCL issue 1639); band {PCIE_RANGE[0]:.0%}-{PCIE_RANGE[1]:.0%} "
                "of peak (assumption)", source, date)  # fmt: skip


LINKS = {
    "PCIe 3.0 x16, host bridge": _pcie(
        "PCIe 3.0 x16, host bridge", 8e9,
        "PCI-SIG PCIe 3.0: 8 GT/s per lane, 128b/130b; the seed's GPUs meet at the host bridge (PHB)", "2010",
    ),
    "PCIe 4.0 x16": _pcie("PCIe 4.0 x16", 16e9, "PCI-SIG PCIe 4.0: 16 GT/s per lane, 128b/130b", "2017"),
    "PCIe 5.0 x16": _pcie(
        "PCIe 5.0 x16", 32e9,
        "PCI-SIG PCIe 5.0; github.com/NVIDIA/nccl/issues/1639 (8x RTX 5090: busbw 28 GB/s, 2025-03-14)",
        "2025-03-14",
    ),
    "NVLink 2 (V100 SXM2)": Link(
        "NVLink 2 (V100 SXM2)", 150e9, 0.67 * 150e9, NVLINK_RANGE[0] * 150e9, NVLINK_RANGE[1] * 150e9,
        NVLINK_ALPHA,
        "no published busbw found for 8 V100s: central 67 % of peak, the fraction measured on A100 NVLink; "
        f"band {NVLINK_RANGE[0]:.0%}-{NVLINK_RANGE[1]:.0%} of peak (assumption); p3's 8 GPUs form a hybrid "
        "cube-mesh, not a switch",
        "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s both ways per GPU (150 GB/s each way)", "2017",
    ),
    "NVLink 3 (A100 SXM)": Link(
        "NVLink 3 (A100 SXM)", 300e9, 200e9, NVLINK_RANGE[0] * 300e9, NVLINK_RANGE[1] * 300e9, NVLINK_ALPHA,
        "measured: nccl-tests all-reduce busbw about 200 GB/s on 8 A100 SXM4 80 GB over NVSwitch; band "
        f"{NVLINK_RANGE[0]:.0%}-{NVLINK_RANGE[1]:.0%} of peak (assumption)",
        "github.com/NVIDIA/nccl-tests/issues/149 (2023-06-27); A100 datasheet: NVLink 600 GB/s both ways",
        "2023-06-27",
    ),
    "NVLink 4 (H100 SXM)": Link(
        "NVLink 4 (H100 SXM)", 450e9, 370e9, NVLINK_RANGE[0] * 450e9, 480e9, NVLINK_ALPHA,
        "measured: nccl-tests ring all-reduce busbw 370 GB/s on 8 H100 SXM; 480 GB/s with NVLink SHARP (the "
        f"band's top); band's bottom {NVLINK_RANGE[0]:.0%} of peak (assumption)",
        "github.com/NVIDIA/nccl-tests/issues/212 (NVIDIA's NCCL lead, 2024-05-06); H100 datasheet: NVLink "
        "900 GB/s both ways per GPU", "2024-05-06",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """One value of every uncertain input: one point of a prediction's band.

    ``link`` is "low", "central" or "high" on each link's busbw range; ``measured`` picks the line through
    the fastest, median or slowest measured steps where a GPU was measured (``costmodel.recommend``).
    """

    matmul: float = COMPUTE_EFFICIENCY["matmul"].central
    conv: float = COMPUTE_EFFICIENCY["conv"].central
    memory: float = MEMORY_EFFICIENCY.central
    op_seconds: float = OP_OVERHEAD.central
    link: str = "central"
    measured: str = "central"


CENTRAL = Scenario()
# Each uncertain input: the Scenario field it sets, its low and high values, and what measures it.
GPU_CHECK = "`make gpu-check` (its LinearNet step at batch 8 is nearly all per-op time)"
SWEEP = "the `gpu` profile's single-GPU sweep (chapter 1, `make study PROFILE=gpu`)"
INPUTS = {
    "matrix-product efficiency": ("matmul", COMPUTE_EFFICIENCY["matmul"].low,
                                  COMPUTE_EFFICIENCY["matmul"].high, SWEEP),
    "convolution efficiency": ("conv", COMPUTE_EFFICIENCY["conv"].low, COMPUTE_EFFICIENCY["conv"].high,
                               SWEEP),
    "memory-bandwidth fraction": ("memory", MEMORY_EFFICIENCY.low, MEMORY_EFFICIENCY.high, SWEEP),
    "per-op host overhead": ("op_seconds", OP_OVERHEAD.low, OP_OVERHEAD.high, GPU_CHECK),
    "achieved link bandwidth": ("link", "low", "high",
                                "chapter 4's all-reduce benchmark on the rented machine "
                                "(`make study PROFILE=gpu`)"),
    "spread of the measured steps": ("measured", "low", "high", "more timed steps (the `gpu` profile)"),
}  # fmt: skip
ROOFLINE_INPUTS = tuple(name for name in INPUTS if name != "spread of the measured steps")
MEASURED_INPUTS = ("spread of the measured steps", "per-op host overhead", "achieved link bandwidth")


def scenarios(inputs=ROOFLINE_INPUTS) -> list[tuple[str, Scenario]]:
    """(label, scenario) pairs spanning ``inputs``: the central values, each input alone at its low and
    high end (labelled "<input>: low/high", for naming what a verdict depends on), and every corner."""
    found = [("central", CENTRAL)]
    for name in inputs:
        field, low, high, _ = INPUTS[name]
        found += [(f"{name}: low", replace(CENTRAL, **{field: low})),
                  (f"{name}: high", replace(CENTRAL, **{field: high}))]  # fmt: skip
    ends = [(INPUTS[name][0], INPUTS[name][1:3]) for name in inputs]
    for values in itertools.product(*(pair for _, pair in ends)):
        corner = replace(CENTRAL, **{field: value for (field, _), value in zip(ends, values, strict=True)})
        found.append(("corner", corner))
    return found


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
def _parameters(model_name: str) -> int:
    return parameter_count(build_model(model_name))


@functools.cache
def gradient_bytes(model_name: str) -> int:
    """Bytes of the model's float32 gradient: what an all-reduce moves per step."""
    return _parameters(model_name) * FLOAT_BYTES


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
    """Host ops of one training step: every layer's kernels, forward and backward, the loss and Adam."""
    return int(_layer_costs(model_name)["kernels"].sum()) + LOSS_OPS + ADAM_OPS


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
    efficiency = {"matmul": scenario.matmul, "conv": scenario.conv, "elementwise": 1.0}
    bandwidth = gpu.memory_bandwidth * scenario.memory

    def item(row) -> tuple:
        phase, kind, flops, sample_bytes, fixed_bytes, kernels = row
        compute = flops * batch / (gpu.fp32_flops * efficiency[kind])
        memory = (sample_bytes * batch + fixed_bytes) / bandwidth
        return (phase, max(compute, memory), kernels, "compute" if compute >= memory else "memory")

    forward, backward = _issue_order(model_name)
    loss = [("forward", 0.0, LOSS_OPS // 2, "memory"), ("backward", 0.0, LOSS_OPS - LOSS_OPS // 2, "memory")]
    adam = ADAM_BYTES_PER_PARAMETER * _parameters(model_name) / bandwidth
    tail = [("optimizer", adam, ADAM_OPS, "memory")] if optimizer else []
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
    rate = {"matmul": gpu.fp32_flops * scenario.matmul, "conv": gpu.fp32_flops * scenario.conv}
    forward, backward = _issue_order(model_name)
    return sum(row[2] * batch / rate[row[1]] for row in forward + backward if row[1] in rate)


def fixed_step_seconds(model_name: str, gpu: GPU, scenario: Scenario = CENTRAL) -> float:
    """What every GPU repeats each step whatever its batch: the host's ops and the optimizer's pass."""
    adam = ADAM_BYTES_PER_PARAMETER * _parameters(model_name) / (gpu.memory_bandwidth * scenario.memory)
    return ops_per_step(model_name) * scenario.op_seconds + adam


def roofline_band(model_name: str, batch: int, gpu: GPU) -> dict:
    """The roofline's step at the central values and its lowest and highest over every scenario."""
    steps = [roofline_step(model_name, batch, gpu, scenario)["step_seconds"] for _, scenario in scenarios()]
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


def assumptions_table() -> pd.DataFrame:
    """Every figure the GPU predictions rest on, with its source and date: the uncertain inputs with
    their ranges, each GPU's datasheet peaks and each link's bandwidths and latency."""
    rows = [
        {"input": r.name, "low": r.low, "central": r.central, "high": r.high, "unit": r.unit,
         "source": r.source, "date": r.date}
        for r in (*COMPUTE_EFFICIENCY.values(), MEMORY_EFFICIENCY, OP_OVERHEAD)
    ]  # fmt: skip
    for gpu in GPUS.values():
        rows.append({"input": f"{gpu.name}: FP32 peak (TFLOP/s); memory (GB/s)", "low": None,
                     "central": f"{gpu.fp32_flops / 1e12:.1f}; {gpu.memory_bandwidth / 1e9:,.0f}",
                     "high": None,
                     "unit": "", "source": gpu.source, "date": gpu.date})  # fmt: skip
    for link in LINKS.values():
        peak = link.peak_bytes_per_second / 1e9
        rows.append({"input": f"{link.name}: all-reduce busbw (GB/s); peak {peak:.1f} "
                              f"GB/s, α {link.alpha_seconds * 1e6:.1f} µs",
                     "low": round(link.bus_bandwidth_low / 1e9, 1),
                     "central": round(link.bus_bandwidth / 1e9, 1),
                     "high": round(link.bus_bandwidth_high / 1e9, 1), "unit": "GB/s",
                     "source": f"{link.basis}. {link.source}", "date": link.date})  # fmt: skip
    return pd.DataFrame(rows)
