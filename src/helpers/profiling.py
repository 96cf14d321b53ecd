"""Where the time of one training step goes, from torch.profiler (chapter 1).

On a GPU the profiler sees two clocks: the host enqueuing work and the device executing it. When the
host's total is well below the device's, the host runs ahead and the GPU is the bottleneck; when it is
above, the GPU waits for Python and kernel launches. On a CPU both are the same processor.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before the profiler loads: no GPU probing noise on CPU

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import TensorDataset

from helpers.models import build_model
from helpers.train import make_optimizer, pick_device, to_device, training_step

PHASES = ("forward", "backward", "optimizer")


def profile_training_step(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch_size: int,
    device: str = "auto",
    optimizer: str = "adam",
    lr: float = 1e-3,
    warmup_steps: int = 1,
    top: int = 12,
) -> dict:
    """Profile one training step after warm-up: per-phase and per-operator host and device seconds.

    Returns ``phases`` (forward/backward/optimizer), ``operators`` (the ``top`` operators by self time)
    and the host and device totals, all in seconds.
    """
    target = pick_device(device)
    torch.manual_seed(0)
    model = build_model(model_name).to(target)
    optim = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = to_device(train_set, target).tensors
    inputs, targets = inputs[:batch_size], targets[:batch_size]
    for _ in range(warmup_steps):
        training_step(model, optim, inputs, targets, nn.functional.cross_entropy)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if target.type == "cuda" else [])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=activities) as profiler:
            training_step(model, optim, inputs, targets, nn.functional.cross_entropy)
            if target.type == "cuda":
                torch.cuda.synchronize(target)
    events = profiler.key_averages()
    on_gpu = target.type == "cuda"
    phases = [
        {
            "phase": event.key,
            "host_seconds": event.cpu_time_total / 1e6,
            "device_seconds": event.device_time_total / 1e6 if on_gpu else None,
        }
        for event in events
        if event.key in PHASES
    ]
    operators = sorted(
        (event for event in events if event.key not in PHASES),
        key=lambda event: event.self_device_time_total if on_gpu else event.self_cpu_time_total,
        reverse=True,
    )
    return {
        "device": str(target),
        "batch_size": batch_size,
        "phases": sorted(phases, key=lambda row: PHASES.index(row["phase"])),
        "operators": [
            {
                "operator": event.key,
                "calls": event.count,
                "host_self_seconds": event.self_cpu_time_total / 1e6,
                "device_self_seconds": event.self_device_time_total / 1e6 if on_gpu else None,
            }
            for event in operators[:top]
        ],
        "host_seconds": sum(event.self_cpu_time_total for event in events) / 1e6,
        "device_seconds": (sum(event.self_device_time_total for event in events) / 1e6 if on_gpu else None),
    }


def phase_frame(profiles: dict[str, dict]) -> pd.DataFrame:
    """The phases of ``{model: profile_training_step result}``, one row per model and phase."""
    return pd.concat([pd.DataFrame(p["phases"]).assign(model=name) for name, p in profiles.items()])


def host_device_verdict(result: dict) -> str:
    """One sentence on whether the host runs ahead of the device in a profiled step."""
    host = result["host_seconds"]
    if result["device_seconds"] is None:
        return (
            f"On the CPU the host is the device: the {host * 1e3:.1f} ms of host time are the computation "
            "itself, so there is no queue for the host to run ahead of."
        )
    device = result["device_seconds"]
    if host < device:
        return (
            f"The host spent {host * 1e3:.1f} ms issuing work that kept the GPU busy for "
            f"{device * 1e3:.1f} ms: the host runs ahead and the GPU is the bottleneck."
        )
    return (
        f"The host spent {host * 1e3:.1f} ms against {device * 1e3:.1f} ms of GPU work: the GPU waits "
        "for Python and kernel launches, so larger batches (or fewer, larger kernels) would help."
    )


def operator_table(result: dict, rows: int = 6) -> pd.DataFrame:
    """The ``rows`` costliest operators of a profiled step, self time in milliseconds (the device's column
    only where there is a device apart from the host)."""
    frame = pd.DataFrame(result["operators"]).head(rows)
    frame = frame.dropna(axis=1, how="all")
    times = [column for column in frame if column.endswith("_seconds")]
    frame[times] = frame[times] * 1e3
    return frame.rename(columns={c: c.replace("_self_seconds", " self ms") for c in times})


def backward_forward_ratio(result: dict, operation: str = "convolution") -> float:
    """Self time of the backward operators of ``operation`` over that of its forward operators in a profiled
    step (device time on a GPU). Summed over every operator whose name contains ``operation``: which one
    holds the time depends on the backend (``mkldnn_convolution`` on CPUs, ``cudnn_convolution`` on GPUs)."""
    column = "device_self_seconds" if result["device_seconds"] is not None else "host_self_seconds"
    backward = forward = 0.0
    for row in result["operators"]:
        if operation in row["operator"]:
            if "backward" in row["operator"]:
                backward += row[column] or 0.0
            else:
                forward += row[column] or 0.0
    if not forward:
        raise ValueError(f"no forward {operation} operator among the profiled step's costliest operators")
    return backward / forward
