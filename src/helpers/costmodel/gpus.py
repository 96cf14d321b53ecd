"""A training step on a GPU we do not have, from first principles (chapter 5).

Every layer of the two models does a known amount of arithmetic and moves a known number of bytes,
forward and backward, computed here from its shapes (exact integers, asserted in the tests against
``torch.utils.flop_counter``). On a roofline a kernel takes the longer of its arithmetic at the GPU's
achievable FLOP/s and its memory traffic at the achievable bandwidth, and never less than the time the
host needs to launch it. The GPUs' figures are their datasheets'; what fraction of a peak real kernels
reach is an assumption, named and printed where it is used, and replaced by measurement wherever the
study has measured the GPU.

Conventions (stated once, used everywhere):

- a multiply-add is 2 FLOPs; a bias add, an activation or a comparison is 1 per element;
- bytes are float32 (4) except max-pooling's saved indices (int64, 8): each kernel reads its inputs and
  writes its outputs once (weights once per kernel, whatever the batch);
- the first layer computes no gradient for its input (the waveform needs none);
- on Ampere and newer GPUs PyTorch runs float32 convolutions on TF32 tensor cores by default
  (``torch.backends.cudnn.allow_tf32`` is True) and float32 matrix products on the FP32 units
  (``torch.backends.cuda.matmul.allow_tf32`` is False): each layer gets the peak it really uses;
- the loss (10 logits per sample) is left out; Adam is one fused pass reading the parameter, its
  gradient and two moments and writing three of them: 28 bytes per parameter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from helpers.data import CLIP_SAMPLES
from helpers.models import build_model, parameter_count

FLOAT_BYTES = 4
INDEX_BYTES = 8  # max-pooling keeps the position of each maximum for backward, as int64
ADAM_BYTES_PER_PARAMETER = 7 * FLOAT_BYTES  # read p, g, m, v; write p, m, v
ADAM_KERNELS = 12  # multi-tensor Adam: about a dozen list-wide launches per step (assumption)
LOSS_KERNELS = 4  # log-softmax and NLL, forward and backward


@dataclass(frozen=True)
class Assumption:
    """A number the predictions rest on that no measurement of ours gave: its value, source and date."""

    name: str
    value: float
    unit: str
    source: str
    date: str


# What real kernels reach of a peak, and what launching one costs. Assumptions, shown where used.
ACHIEVED_COMPUTE = Assumption(
    "achieved fraction of peak FLOP/s (matmul, convolution)", 0.6, "",
    "assumption: large cuBLAS/cuDNN kernels reach 60-80% of peak; these layers are small", "2026-11-23",
)  # fmt: skip
ACHIEVED_MEMORY = Assumption(
    "achieved fraction of peak memory bandwidth", 0.7, "",
    "assumption: streaming kernels reach 70-90% of datasheet bandwidth", "2026-11-23",
)  # fmt: skip
KERNEL_LAUNCH = Assumption(
    "host time to launch one kernel", 5e-6, "s",
    "NVIDIA developer forum (about 3 µs for an empty kernel); susun-blog.com (4-6 µs measured on an "
    "RTX 5070 Ti); read 2026-11-23", "2026-11-23",
)  # fmt: skip


@dataclass(frozen=True)
class GPU:
    """Datasheet figures of one GPU: peaks of the units float32 training uses, memory, source."""

    name: str
    fp32_flops: float  # FP32 (CUDA-core) peak, FLOP/s
    tf32_flops: float | None  # dense TF32 tensor-core peak (Ampere and newer), FLOP/s
    memory_bandwidth: float  # bytes/s
    memory_bytes: int
    source: str
    date: str

    def conv_flops(self) -> float:
        """The peak a float32 convolution gets by PyTorch's default: TF32 where it exists."""
        return self.tf32_flops or self.fp32_flops


GB = 10**9
GPUS = {
    "GTX 1080 Ti": GPU(
        "GTX 1080 Ti", 3584 * 2 * 1582e6, None, 484 * GB, 11 * GB,
        "3,584 CUDA cores at 1,582 MHz boost (vortez.net review); 11 GB GDDR5X at 484 GB/s "
        "(tomshardware.com, 2017-03-01)", "2017-03-01",
    ),
    "V100 SXM2 16 GB": GPU(
        "V100 SXM2 16 GB", 15.7e12, None, 900 * GB, 16 * GB,
        "NVIDIA Tesla V100 datasheet: FP32 15.7 TFLOPS, 900 GB/s HBM2", "2017",
    ),
    "A100 SXM 80 GB": GPU(
        "A100 SXM 80 GB", 19.5e12, 156e12, 2039 * GB, 80 * GB,
        "NVIDIA A100 datasheet: FP32 19.5, TF32 156 (dense) TFLOPS; 80 GB HBM2e at 2,039 GB/s "
        "(thundercompute.com, updated 2026-05-21)", "2026-05-21",
    ),
    "H100 SXM 80 GB": GPU(
        "H100 SXM 80 GB", 67e12, 494.5e12, 3350 * GB, 80 * GB,
        "NVIDIA H100 datasheet: FP32 67, TF32 989 with sparsity (494.5 dense) TFLOPS; 80 GB HBM3 at "
        "3,350 GB/s (hpctech.co.jp's copy of NVIDIA's table)", "2022",
    ),
    "H200 SXM 141 GB": GPU(
        "H200 SXM 141 GB", 67e12, 494.5e12, 4800 * GB, 141 * GB,
        "the H100's GH100 die and compute with 141 GB of HBM3e at 4.8 TB/s (NVIDIA, announced 2023-11-13; "
        "aiwiki.ai, updated 2026-06-21)", "2023-11-13",
    ),
}  # fmt: skip

# How drivers name these GPUs (torch.cuda.get_device_properties(i).name), first match wins. An H100 PCIe
# is read as the SXM part: the same die with less bandwidth, so its predictions are optimistic.
DRIVER_NAMES = (("H200", "H200 SXM 141 GB"), ("H100", "H100 SXM 80 GB"), ("A100", "A100 SXM 80 GB"),
                ("V100", "V100 SXM2 16 GB"), ("1080 Ti", "GTX 1080 Ti"))  # fmt: skip


def gpu_key(driver_name: str) -> str | None:
    """The ``GPUS`` entry of a GPU as its driver names it ("NVIDIA H100 80GB HBM3" → "H100 SXM 80 GB")."""
    return next((key for token, key in DRIVER_NAMES if token in driver_name), None)


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


def training_flops_per_sample(model_name: str) -> int:
    """Forward and backward FLOPs of one sample, every layer (the F of the chapter's rule)."""
    return int(layer_costs(model_name)["flops_per_sample"].sum())


def roofline_step(
    model_name: str,
    batch: int,
    gpu: GPU,
    *,
    compute_fraction: float = ACHIEVED_COMPUTE.value,
    memory_fraction: float = ACHIEVED_MEMORY.value,
    launch_seconds: float = KERNEL_LAUNCH.value,
    optimizer: bool = True,
) -> dict:
    """Predicted seconds of one training step at ``batch`` samples on ``gpu``, by phase.

    Each layer's pass takes max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth), and at least
    its kernels' launch time; the loss adds its launches; Adam streams 28 bytes per parameter.
    Returns forward, backward and optimizer seconds, their sum, and whether arithmetic, memory or
    launches bound the most time.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    costs = _layer_costs(model_name)
    peaks = {"matmul": gpu.fp32_flops, "conv": gpu.conv_flops(), "elementwise": gpu.fp32_flops}
    seconds = {"forward": LOSS_KERNELS / 2 * launch_seconds, "backward": LOSS_KERNELS / 2 * launch_seconds}
    bound = {"compute": 0.0, "memory": 0.0, "launch": 0.0}
    bandwidth = gpu.memory_bandwidth * memory_fraction
    for row in costs.itertuples():
        times = {
            "compute": row.flops_per_sample * batch / (peaks[row.kind] * compute_fraction),
            "memory": (row.bytes_per_sample * batch + row.fixed_bytes) / bandwidth,
            "launch": row.kernels * launch_seconds,
        }
        limit = max(times, key=times.get)
        seconds[row.phase] += times[limit]
        bound[limit] += times[limit]
    parameters = _parameters(model_name)
    adam = ADAM_BYTES_PER_PARAMETER * parameters / bandwidth
    seconds["optimizer"] = max(adam, ADAM_KERNELS * launch_seconds) if optimizer else 0.0
    return {
        **{f"{phase}_seconds": value for phase, value in seconds.items()},
        "step_seconds": sum(seconds.values()),
        "bound_by": max(bound, key=bound.get),
    }


@dataclass(frozen=True)
class Link:
    """How GPUs are joined: the spec's peak per direction, and what an all-reduce achieves on it.

    ``bus_bandwidth`` is nccl-tests' busbw of a ring all-reduce on such a link (bytes/s): measured and
    published where such a figure was found, else the stated fraction of peak. ``alpha_seconds`` is the
    latency of one ring step: a published small-message all-reduce time divided by its 2(k−1) steps.
    """

    name: str
    peak_bytes_per_second: float
    bus_bandwidth: float
    alpha_seconds: float
    basis: str
    source: str
    date: str


def pcie_peak(transfers_per_second: float) -> float:
    """Bytes/s per direction of a x16 PCIe link at ``transfers_per_second`` per lane (128b/130b)."""
    return transfers_per_second * 16 * 128 / 130 / 8


# nccl-tests on 8 RTX 5090s over PCIe 5.0: busbw 28 GB/s (NCCL issue 1639, 2025-03-14), 44% of peak
PCIE_MEASURED_FRACTION = 28e9 / pcie_peak(32e9)
PCIE_ALPHA = 42.14e-6 / 14  # 8 B all-reduce on 8 RTX 4090s over PCIe: 42.14 µs (NCCL issue 1530)
NVLINK_ALPHA = 33.7e-6 / 14  # ring all-reduce latency on 8 A100s, one channel: 33.7 µs (nccl-tests 123)
LINKS = {
    "PCIe 3.0 x16, host bridge": Link(
        "PCIe 3.0 x16, host bridge", pcie_peak(8e9), PCIE_MEASURED_FRACTION * pcie_peak(8e9), PCIE_ALPHA,
        f"assumed: {PCIE_MEASURED_FRACTION:.0%} of peak, the fraction measured on PCIe 5.0",
        "PCI-SIG PCIe 3.0 spec: 8 GT/s per lane, 128b/130b; the seed's GPUs meet at the host bridge (PHB)",
        "2010",
    ),
    "PCIe 4.0 x16": Link(
        "PCIe 4.0 x16", pcie_peak(16e9), PCIE_MEASURED_FRACTION * pcie_peak(16e9), PCIE_ALPHA,
        f"assumed: {PCIE_MEASURED_FRACTION:.0%} of peak, the fraction measured on PCIe 5.0",
        "PCI-SIG PCIe 4.0 spec: 16 GT/s per lane, 128b/130b", "2017",
    ),
    "PCIe 5.0 x16": Link(
        "PCIe 5.0 x16", pcie_peak(32e9), 28e9, PCIE_ALPHA,
        "measured: nccl-tests all-reduce busbw on 8 GPUs over PCIe 5.0",
        "github.com/NVIDIA/nccl/issues/1639 (8x RTX 5090: busbw 28 GB/s); PCI-SIG PCIe 5.0 spec",
        "2025-03-14",
    ),
    "NVLink 4 (H100 SXM)": Link(
        "NVLink 4 (H100 SXM)", 450e9, 370e9, NVLINK_ALPHA,
        "measured: nccl-tests ring all-reduce busbw on 8 H100 SXM (480 GB/s with NVLink SHARP)",
        "github.com/NVIDIA/nccl-tests/issues/212 (NVIDIA's NCCL lead); NVIDIA: 900 GB/s both ways per GPU",
        "2024-05-06",
    ),
}  # fmt: skip


def assumptions_table() -> pd.DataFrame:
    """Every figure the GPU predictions rest on, with its source and date: the roofline's fractions and
    launch time, each GPU's peaks and each link's bandwidth and latency."""
    rows = [
        {"parameter": a.name, "value": a.value, "unit": a.unit, "source": a.source, "date": a.date}
        for a in (ACHIEVED_COMPUTE, ACHIEVED_MEMORY, KERNEL_LAUNCH)
    ]
    for gpu in GPUS.values():
        peaks = f"FP32 {gpu.fp32_flops / 1e12:.1f}" + (
            f", TF32 {gpu.tf32_flops / 1e12:.1f}" if gpu.tf32_flops else ""
        )
        rows.append({"parameter": f"{gpu.name}: peak TFLOP/s; memory GB/s",
                     "value": f"{peaks}; {gpu.memory_bandwidth / 1e9:,.0f}", "unit": "",
                     "source": gpu.source, "date": gpu.date})  # fmt: skip
    for link in LINKS.values():
        rows.append({"parameter": f"{link.name}: peak; all-reduce busbw (GB/s); α (µs)",
                     "value": f"{link.peak_bytes_per_second / 1e9:.1f}; {link.bus_bandwidth / 1e9:.1f}; "
                              f"{link.alpha_seconds * 1e6:.1f}",
                     "unit": "", "source": f"{link.basis}. {link.source}", "date": link.date})  # fmt: skip
    return pd.DataFrame(rows)
