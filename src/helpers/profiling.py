"""Where the time of one training step goes, from torch.profiler and CUDA events (chapter 1).

On a GPU there are two clocks: the host enqueuing work and the device executing it. When the host's
total is well below the device's, the host runs ahead and the GPU is the bottleneck; when it is above,
the GPU waits for Python and kernel launches. On a CPU both are the same processor.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import warnings

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before the profiler loads: no GPU probing noise on CPU

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import TensorDataset

from helpers.models import build_model
from helpers.train import check_positive, make_optimizer, pick_device, to_device, training_step

PHASES = ("forward", "backward", "optimizer")
TIMES = ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total")


class PhaseClock:
    """Times the phases of one ``train.training_step`` (pass it as ``phase``): the host clock around each
    phase and, on a GPU, a pair of CUDA events recorded on the current stream.

    Autograd runs a GPU's backward on its own device thread, but enqueues each backward kernel on the
    stream of its forward operation (the current stream here), and ``loss.backward()`` returns only once
    they are enqueued, so the events on that stream bracket the backward's kernels too. An event pair
    measures the phase's span on the GPU: its kernels and any gaps while the GPU waits for the host.
    """

    def __init__(self, device: torch.device) -> None:
        self.gpu = device if device.type == "cuda" else None
        self._marks: dict[str, tuple] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        events = None
        if self.gpu is not None:
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record(torch.cuda.current_stream(self.gpu))
        start = time.perf_counter()
        yield
        host = time.perf_counter() - start
        if events is not None:
            events[1].record(torch.cuda.current_stream(self.gpu))
        self._marks[name] = (host, events)

    def seconds(self) -> dict[str, tuple[float, float | None]]:
        """``{phase: (host seconds, device seconds or None)}``, read after the GPU has finished."""
        if self.gpu is not None:
            torch.cuda.synchronize(self.gpu)
        return {
            name: (host, events[0].elapsed_time(events[1]) / 1e3 if events else None)
            for name, (host, events) in self._marks.items()
        }


def event_rows(events) -> list[dict]:
    """``profiler.key_averages()`` as plain rows (JSON-ready, times in microseconds as torch keeps them).

    ``device_type`` is ``"CPU"`` for host events (operators, runtime calls such as ``cudaLaunchKernel``,
    ``record_function`` ranges) and ``"CUDA"`` for what ran on the GPU (kernels, memcpy, memset, and the
    GPU-side copies of ``record_function`` ranges, which are user annotations too).
    """
    return [
        {
            "key": event.key,
            "count": event.count,
            "device_type": event.device_type.name,
            "is_user_annotation": bool(getattr(event, "is_user_annotation", False)),
            **{time_field: float(getattr(event, time_field)) for time_field in TIMES},
        }
        for event in events
    ]


def summarize_events(rows: list[dict], *, gpu: bool, top: int = 12) -> dict:
    """The host and device totals and the costliest operators of one profiled step (``event_rows``).

    ``device_seconds``: the device-side rows that are not user annotations (kernels, memcpy, memset), each
    GPU microsecond once. Summing every row's self device time would count it two or three times: a host
    operator's self device time repeats the kernels it launched, and the GPU-side copy of a
    ``record_function`` range repeats the span of the kernels under it.
    ``host_seconds``: the wall time of the three phase ranges on the main thread (their host rows'
    ``cpu_time_total``), each host microsecond once. Summing every host row's self time would count a
    GPU's backward twice (the main thread's "backward" waits while autograd's device thread runs the
    backward operators, rows of their own) and add the synchronisation that closes the profile.
    ``operators``: host rows other than annotations, by the device time of the kernels each launched itself
    (torch gives a kernel to the innermost operator that launched it) on a GPU, by host self time on a CPU.
    """
    host = [row for row in rows if row["device_type"] == "CPU"]
    phases = {row["key"]: row for row in host if row["is_user_annotation"] and row["key"] in PHASES}
    if missing := [name for name in PHASES if name not in phases]:
        raise ValueError(f"the profiled step has no {missing} range: was it run through train.training_step?")
    device_side = [row for row in rows if row["device_type"] != "CPU" and not row["is_user_annotation"]]
    operators = sorted(
        (row for row in host if not row["is_user_annotation"]),
        key=lambda row: (
            (row["self_device_time_total"], row["self_cpu_time_total"]) if gpu else row["self_cpu_time_total"]
        ),
        reverse=True,
    )
    return {
        "operators": [
            {
                "operator": row["key"],
                "calls": row["count"],
                "host_self_seconds": row["self_cpu_time_total"] / 1e6,
                "device_self_seconds": row["self_device_time_total"] / 1e6 if gpu else None,
            }
            for row in operators[:top]
        ],
        "host_seconds": sum(phases[name]["cpu_time_total"] for name in PHASES) / 1e6,
        "device_seconds": sum(row["self_device_time_total"] for row in device_side) / 1e6 if gpu else None,
    }


def profile_training_step(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch_size: int,
    device: str = "auto",
    optimizer: str = "adam",
    lr: float = 1e-3,
    warmup_steps: int = 1,
    timed_steps: int = 5,
    top: int = 12,
) -> dict:
    """Where the time of one training step goes, after ``warmup_steps`` warm-up steps.

    ``phases`` (forward, backward, optimizer): medians over ``timed_steps`` steps run without the profiler,
    host seconds and, on a GPU, device seconds from CUDA events (``PhaseClock``; None on a CPU). Without
    the profiler because it adds host work to every operator and kernel launch, and because its
    "backward" range on the main thread misses the kernels that autograd's device thread launches.
    Then one step under torch.profiler: ``events`` (its ``key_averages`` rows, kept so that a record
    holds the whole table), ``operators`` and the ``host_seconds`` and ``device_seconds`` totals
    (``summarize_events``; the host total includes the profiler's own overhead).
    """
    check_positive(batch_size=batch_size, timed_steps=timed_steps)
    if batch_size > len(train_set):
        raise ValueError(f"batch_size {batch_size} exceeds the {len(train_set)} training samples")
    target = pick_device(device)
    on_gpu = target.type == "cuda"
    torch.manual_seed(0)
    model = build_model(model_name).to(target)
    optim = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = to_device(train_set, target).tensors
    batch = (model, optim, inputs[:batch_size], targets[:batch_size], nn.functional.cross_entropy)
    for _ in range(warmup_steps):
        training_step(*batch)
    timed = []
    for _ in range(timed_steps):
        clock = PhaseClock(target)
        training_step(*batch, phase=clock)
        timed.append(clock.seconds())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=activities) as profiler:  # leaving it synchronises the GPU
            training_step(*batch)
    rows = event_rows(profiler.key_averages())
    phases = [
        {
            "phase": name,
            "host_seconds": statistics.median(step[name][0] for step in timed),
            "device_seconds": statistics.median(step[name][1] for step in timed) if on_gpu else None,
        }
        for name in PHASES
    ]
    clocks = "host clock and CUDA events" if on_gpu else "host clock"
    return {
        "device": str(target),
        "batch_size": batch_size,
        "method": f"phases: median of {timed_steps} unprofiled steps ({clocks}); operators and totals: one "
        f"step under torch.profiler; after {warmup_steps} warm-up step(s)",
        "phases": phases,
        **summarize_events(rows, gpu=on_gpu, top=top),
        "events": rows,
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
