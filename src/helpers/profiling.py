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

from helpers.ddp import significant
from helpers.models import MIB, MMAP_THRESHOLD_MAX, build_model, parameter_sizes
from helpers.stats import MATTERS, describe_speedup, speedup, spread
from helpers.train import (
    WARMUP_STEPS,
    check_positive,
    counted,
    make_optimizer,
    milliseconds,
    pick_device,
    step_batches,
    to_device,
    training_step,
)

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


PROFILER_ROWS = (
    "Activity Buffer Request",
)  # CUPTI fetching its trace buffers: the profiler's, not the step's


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
    ``operators``: host rows other than annotations and the profiler's own (``PROFILER_ROWS``), by the
    device time of the kernels each launched itself
    (torch gives a kernel to the innermost operator that launched it) on a GPU, by host self time on a CPU.
    """
    host = [row for row in rows if row["device_type"] == "CPU"]
    phases = {row["key"]: row for row in host if row["is_user_annotation"] and row["key"] in PHASES}
    if missing := [name for name in PHASES if name not in phases]:
        raise ValueError(f"the profiled step has no {missing} range: was it run through train.training_step?")
    device_side = [row for row in rows if row["device_type"] != "CPU" and not row["is_user_annotation"]]
    operators = sorted(
        (row for row in host if not row["is_user_annotation"] and row["key"] not in PROFILER_ROWS),
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
    warmup_steps: int = WARMUP_STEPS,
    timed_steps: int = 5,
    top: int = 12,
    autocast_dtype: torch.dtype | None = None,
) -> dict:
    """Where the time of one training step goes, after ``warmup_steps`` warm-up steps (under autocast to
    ``autocast_dtype`` if given).

    ``phases`` (forward, backward, optimizer): medians over ``timed_steps`` steps run without the profiler,
    host seconds and, on a GPU, device seconds from CUDA events (``PhaseClock``; None on a CPU). Without
    the profiler because it adds host work to every operator and kernel launch, and because its
    "backward" range on the main thread misses the kernels that autograd's device thread launches.
    Then one step under torch.profiler: ``events`` (its ``key_averages`` rows, kept so that a record
    holds the whole table), ``operators`` and the ``host_seconds`` and ``device_seconds`` totals
    (``summarize_events``; the host total includes the profiler's own overhead). ``step_seconds_all``: each
    unprofiled step's phases added up (device seconds on a GPU), to set the profiled step against.
    ``load_average``: the machine's 1-minute load average before and after, as a stored record keeps it.
    """
    check_positive(batch_size=batch_size, timed_steps=timed_steps)
    if batch_size > len(train_set):
        raise ValueError(f"batch_size {batch_size} exceeds the {len(train_set)} training samples")
    target = pick_device(device)
    on_gpu = target.type == "cuda"
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    torch.manual_seed(0)
    model = build_model(model_name).to(target)
    optim = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = to_device(train_set, target).tensors
    batch = (model, optim, inputs[:batch_size], targets[:batch_size], nn.functional.cross_entropy,
             autocast_dtype)  # fmt: skip
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
    clocks = "the host clock and CUDA events" if on_gpu else "the host clock"
    return {
        "device": str(target),
        "batch_size": batch_size,
        "autocast": str(autocast_dtype).removeprefix("torch.") if autocast_dtype else None,
        "step_seconds_all": [sum(step[name][1 if on_gpu else 0] for name in PHASES) for step in timed],
        "method": f"each phase is the median of {timed_steps} unprofiled steps on {clocks}, and the "
        "operators and totals come from one step under torch.profiler, all after "
        f"{counted(warmup_steps, 'warm-up step')}",
        "phases": phases,
        **summarize_events(rows, gpu=on_gpu, top=top),
        "events": rows,
        "load_average": [load_before, os.getloadavg()[0] if hasattr(os, "getloadavg") else None],
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
    frame = pd.DataFrame(result["operators"]).head(rows).dropna(axis=1, how="all")
    names = {
        "host_self_seconds": "self time on the host (ms)",
        "device_self_seconds": "self time on the GPU (ms)",
    }
    for column in [c for c in names if c in frame]:
        frame[column] = (frame[column] * 1e3).map("{:,.1f}".format)
    return frame.rename(columns=names).set_index("operator")


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


def backward_sentence(measured: float, expected: float) -> str:
    """What a measured backward/forward time ratio says against the ratio of the arithmetic."""
    relative = expected / measured
    pace = "faster" if relative > 1 else "slower"
    return (
        f"the backward convolutions took {measured:.2f}× the forward's time for {expected:.2f}× its "
        f"multiply-adds, so per multiply-add they ran {relative:.2f}× as fast as the forward ones ({pace})"
    )


def profile_sentence(result: dict, swept: dict | None = None) -> str:
    """One profiled step against the unprofiled steps that timed its phases, and, where the batch-size
    sweep timed the same batch (``swept``: its ``step_timing`` record), those against the sweep's steps:
    a difference is what the two steps do not share (the sweep's step also zeroes gradients and indexes
    its batch), a difference inside ``MATTERS`` is agreement, and a spread too wide to tell is said as such.

    On a CPU the profiled step's host time is set against the unprofiled steps' (the profiler's own cost);
    on a GPU its kernels' summed time against the unprofiled steps' CUDA-event spans: the share of the step
    the GPU computes, the rest being the GPU waiting for the host to issue work."""
    unprofiled = spread(result["step_seconds_all"])
    if result["device_seconds"] is None:
        profiled = result["host_seconds"]
        text = (
            f"one step under the profiler took {significant(profiled * 1e3)} ms, the unprofiled steps "
            f"{milliseconds(result['step_seconds_all'])}"
        )
        if unprofiled.low <= profiled <= unprofiled.high:
            text += (
                ": the profiled step lies inside their range, so the profiler's own bookkeeping does not show"
            )
        else:
            text += (
                f": the profiled step took {profiled / unprofiled.median:.2f}× their median, the "
                "profiler's own bookkeeping and whatever else the machine ran in that second"
            )
    else:
        busy, spans = result["device_seconds"] / unprofiled.median, milliseconds(result["step_seconds_all"])
        text = (
            f"the kernels of one profiled step summed to {significant(result['device_seconds'] * 1e3)} ms of "
            f"GPU time, while the unprofiled steps spanned {spans} on CUDA events: the GPU computed for "
            f"{busy:.0%} of the step"
            + (", and waited for the host to issue work for the rest" if busy < 1 - MATTERS else "")
        )
    if swept:
        swept_steps = swept["result"]["step_seconds_all"]
        change = speedup(swept_steps, result["step_seconds_all"])
        text += (
            f". The batch-size sweep timed this batch at {milliseconds(swept_steps)}; the unprofiled steps "
            f"against those: {describe_speedup(change)}"
        )
        within = change["low"] >= 1 / (1 + MATTERS) and change["high"] <= 1 + MATTERS
        if change["verdict"] == "not resolved":
            text += f". These few steps spread too widely to say whether the two agree within {MATTERS:.0%}"
        elif within and change["verdict"] in ("faster", "slower"):
            gap = abs(change["speedup"] - 1)
            text += f". The two agree within {MATTERS:.0%}, though measurably apart by {gap:.0%}"
        elif change["verdict"] == "faster":  # the sweep's step over the phases': the sweep's took longer
            text += (
                ". The two timings differ: the unprofiled step here is the sum of its three timed phases, "
                "without the zeroing of gradients and the batch indexing that the sweep's step includes"
            )
        elif change["verdict"] == "slower":
            text += (
                f". The two timings differ by {abs(1 / change['speedup'] - 1):.0%}, though the unprofiled "
                "step here leaves out work the sweep's step includes (the zeroing of gradients, the batch "
                "indexing): the same work timed in two runs minutes apart differs by that much here"
            )
    return text + "."


CATEGORIES = (
    ("convolutions", lambda name: "convolution" in name),
    ("matrix products", lambda name: name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul")),
    ("conversions and copies", lambda name: name in ("aten::to", "aten::_to_copy", "aten::copy_")),
)


def operator_categories(result: dict) -> dict[str, float]:
    """Seconds of a profiled step by kind of operator (``CATEGORIES``), from its whole operator table: host
    self time on a CPU, the time of the kernels each operator launched on a GPU; "everything else" is the
    rest of the step's total (the phases' host wall time, or the GPU's kernel time)."""
    gpu = result["device_seconds"] is not None
    column = "self_device_time_total" if gpu else "self_cpu_time_total"
    totals = dict.fromkeys([name for name, _ in CATEGORIES], 0.0)
    for row in result["events"]:
        if row["device_type"] == "CPU" and not row["is_user_annotation"]:
            category = next((name for name, test in CATEGORIES if test(row["key"])), None)
            if category:
                totals[category] += row[column] / 1e6
    step = result["device_seconds"] if gpu else result["host_seconds"]
    totals["everything else"] = max(step - sum(totals.values()), 0.0)
    return totals


def precision_profiles(
    names, train_set: TensorDataset, batch_size: int, device: str = "auto"
) -> pd.DataFrame:
    """One profiled step of each model in float32 and under bf16 autocast, by kind of operator
    (``operator_categories``): one row per model, precision and category, in seconds."""
    rows = []
    for name in names:
        for precision, dtype in (("float32", None), ("bf16", torch.bfloat16)):
            result = profile_training_step(name, train_set, batch_size=batch_size, device=device,
                                           timed_steps=1, autocast_dtype=dtype)  # fmt: skip
            rows += [{"model": name, "precision": precision, "category": category, "seconds": seconds}
                     for category, seconds in operator_categories(result).items()]  # fmt: skip
    return pd.DataFrame(rows)


def precision_profile_table(profiles: pd.DataFrame) -> pd.DataFrame:
    """``precision_profiles`` to read: milliseconds per kind of operator (rows) and model and precision
    (columns), with the step's total."""
    table = profiles.pivot_table(
        index="category", columns=["model", "precision"], values="seconds", sort=False
    )
    table.loc["the whole step"] = table.sum()
    return (table * 1e3).map("{:,.1f}".format).rename_axis(index="milliseconds of one step")


def whole_ms(seconds: float) -> str:
    """Seconds as whole milliseconds, "under 1" for what would round to 0 ("added 0 ms" reads as none)."""
    return "under 1" if abs(seconds) < 0.5e-3 else f"{seconds * 1e3:,.0f}"


def explain_precision(profiles: pd.DataFrame, model: str) -> str:
    """Where ``model``'s bf16 step gains or loses time against float32 (``precision_profiles``): its main
    arithmetic (convolutions if it has any, else matrix products), the conversions, everything else (the
    optimizer's update runs in float32 either way: the work there barely changes, so its change shows how
    noisy one profiled step's attribution is), and which kind of operator holds most of the difference.
    Plain text (no markup), to be glued into a sentence."""
    rows = profiles[profiles["model"] == model].pivot(index="category", columns="precision", values="seconds")
    main = "convolutions" if rows.loc["convolutions", "float32"] > 0 else "matrix products"
    extra = rows["bf16"] - rows["float32"]
    main_ms = {precision: significant(rows.loc[main, precision] * 1e3) for precision in ("bf16", "float32")}
    rest_ms = {p: significant(rows.loc["everything else", p] * 1e3) for p in ("bf16", "float32")}
    text = (
        f"{model}'s {main} took {main_ms['bf16']} ms in bf16 against {main_ms['float32']} ms in float32, "
        f"conversions and copies added {whole_ms(extra['conversions and copies'])} ms, and everything else "
        f"(the optimizer's update, in float32 either way, and the other operators) took {rest_ms['bf16']} "
        f"ms against {rest_ms['float32']} ms"
    )
    if extra.sum() <= 0:
        text += f": the bf16 step was {significant(-extra.sum() * 1e3)} ms shorter"
    else:
        largest = extra.idxmax()
        cause = {main: f"in the bf16 {main} themselves, not in the conversions",
                 "conversions and copies": f"in the conversions, not in the {main}",
                 "everything else": "in the other operators (pooling, activations, the optimizer), not in "
                 f"the {main} or the conversions"}.get(largest, f"in the {largest}")  # fmt: skip
        longer = significant(extra.sum() * 1e3)
        text += f": of the {longer} ms that the bf16 step took longer, the most is {cause}"
    return text + (
        "; one profiled step each: work that bf16 does not change (everything else) moving by as much "
        "is this attribution's noise, and the timed steps above, not these, measure the difference"
    )


# Adam's three implementations in torch.optim, by the option that selects each.
ADAM_IMPLEMENTATIONS = {
    "for-loop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def default_adam_implementation(device) -> str:
    """What ``torch.optim.Adam`` runs when given no option: ``foreach`` on CUDA tensors, else the for-loop."""
    return "foreach" if torch.device(device).type == "cuda" else "for-loop"


def time_optimizer_phase(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch_size: int,
    implementation: str,
    timed_steps: int = 5,
    warmup_steps: int = WARMUP_STEPS,
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "auto",
) -> dict:
    """Adam's update (the optimizer phase) and the whole step, timed over ``timed_steps`` training steps with
    one of ``ADAM_IMPLEMENTATIONS`` (``PhaseClock``: CUDA events on a GPU), after ``warmup_steps``.

    The for-loop updates one tensor at a time and writes intermediate results (``sqrt``, ``div``) into new
    tensors; foreach does the same over lists of tensors; fused makes one pass per parameter without them.
    """
    if implementation not in ADAM_IMPLEMENTATIONS:
        raise ValueError(
            f"implementation must be one of {list(ADAM_IMPLEMENTATIONS)}, not {implementation!r}"
        )
    check_positive(timed_steps=timed_steps)
    target = pick_device(device)
    torch.manual_seed(seed)
    model = build_model(model_name).to(target)
    optim = make_optimizer("adam", model.parameters(), lr, **ADAM_IMPLEMENTATIONS[implementation])
    inputs, targets = to_device(train_set, target).tensors
    clock_index = 1 if target.type == "cuda" else 0
    optimizer_seconds, step_seconds = [], []
    for step, index in enumerate(step_batches(len(train_set), batch_size, seed, warmup_steps + timed_steps)):
        clock = PhaseClock(target)
        index = index.to(target)
        training_step(model, optim, inputs[index], targets[index], nn.functional.cross_entropy, phase=clock)
        if step >= warmup_steps:
            seconds = clock.seconds()
            optimizer_seconds.append(seconds["optimizer"][clock_index])
            step_seconds.append(sum(seconds[name][clock_index] for name in PHASES))
    return {
        "implementation": implementation,
        "optimizer_seconds": statistics.median(optimizer_seconds),
        "optimizer_seconds_all": optimizer_seconds,
        "step_seconds_all": step_seconds,
        "method": f"median of {timed_steps} timed steps' optimizer phase, after {warmup_steps} warm-up "
        "step(s)",
    }


def stored_optimizer_timing(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """``time_optimizer_phase`` through the results store."""
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    config = {"kind": "optimizer_timing", "model": model_name, "train_samples": len(train_set),
              "threads": torch.get_num_threads(), **settings}  # fmt: skip
    return store.measure(config, lambda: time_optimizer_phase(model_name, train_set, **settings))


def optimizer_comparison(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """Adam's optimizer phase and whole step in each implementation torch offers on the device, against
    torch's default there: ``table`` (to read), ``speedups`` and ``step_speedups`` (``helpers.stats.speedup``
    of the phase and of the whole step against the default), the timed ``optimizer_seconds`` and
    ``step_seconds`` per implementation, ``default``, ``device``, the model's ``parameter_bytes`` (per
    tensor) and ``unavailable`` ({implementation: torch's refusal}) where the device lacks one."""
    device = str(pick_device(settings.get("device", "auto")))
    default = default_adam_implementation(device)
    optimizer, steps, unavailable = {}, {}, {}
    for name in ADAM_IMPLEMENTATIONS:
        try:
            record = stored_optimizer_timing(store, model_name, train_set, implementation=name, **settings)
        except (RuntimeError, ValueError) as refusal:
            unavailable[name] = str(refusal).splitlines()[0]
            continue
        optimizer[name] = record["result"]["optimizer_seconds_all"]
        steps[name] = record["result"]["step_seconds_all"]
    others = [name for name in optimizer if name != default]
    speedups = {name: speedup(optimizer[default], optimizer[name]) for name in others}
    step_speedups = {name: speedup(steps[default], steps[name]) for name in others}
    table = pd.DataFrame(
        [
            {"implementation": name + (" (torch's default here)" if name == default else ""),
             "optimizer phase (ms)": milliseconds(optimizer[name], unit=""),
             "against the default": describe_speedup(speedups[name]) if name in speedups else "—",
             "whole step (ms)": milliseconds(steps[name], unit=""),
             "whole step against the default": (
                 describe_speedup(step_speedups[name]) if name in step_speedups else "—")}
            for name in optimizer
        ]
    ).set_index("implementation")  # fmt: skip
    return {"default": default, "device": device, "table": table, "speedups": speedups,
            "step_speedups": step_speedups, "optimizer_seconds": optimizer, "step_seconds": steps,
            "parameter_bytes": parameter_sizes(build_model(model_name)),
            "unavailable": unavailable}  # fmt: skip


def optimizer_share(comparison: dict) -> dict:
    """The default Adam's optimizer phase against its whole step, both from the same timed steps of
    ``optimizer_comparison``: the medians in seconds and ``share``, the ratio of the medians."""
    default = comparison["default"]
    phase = statistics.median(comparison["optimizer_seconds"][default])
    step = statistics.median(comparison["step_seconds"][default])
    return {"optimizer_seconds": phase, "step_seconds": step, "share": phase / step}


# Tensor-sized reads and writes per parameter in one Adam update (torch.optim.adam without weight decay
# or amsgrad). The for-loop: lerp_ 3 (reads the first moment and the gradient, writes the moment), mul_
# 2, addcmul_ 3, sqrt 2, div 2, add_ 2, addcdiv_ 4; fused: reads the parameter, its gradient and both
# moments, writes the parameter and both moments.
ADAM_PASSES = {"for-loop": 18, "fused": 7}
ADAM_TEMPORARIES = 2  # the for-loop's sqrt and div each write a new tensor the size of the parameter


def adam_memory_account(comparison: dict, fresh: dict, reused: dict) -> dict:
    """The for-loop Adam's optimizer phase counted as memory traffic, from the speed of a plain copy into
    a fresh and into a reused buffer (``dataparallel.copy_seconds_per_byte`` results), in seconds:

    ``passes``: its ``ADAM_PASSES`` over every parameter's bytes at the reused-buffer speed (a copy makes
    two passes over its bytes, a read and a write); ``first_touch``: what fresh pages add to its
    ``ADAM_TEMPORARIES`` temporaries, counted for parameters of ``models.MMAP_THRESHOLD_MAX`` or more (those
    temporaries get fresh pages every step; smaller ones reuse freed memory); ``fused_passes``: fused Adam's
    passes; ``measured`` and ``fused_measured``: the medians of ``optimizer_comparison``."""
    sizes = comparison["parameter_bytes"]
    per_pass = reused["seconds_per_byte"] / 2
    fresh_extra = max(fresh["seconds_per_byte"] - reused["seconds_per_byte"], 0.0)
    large = sum(size for size in sizes if size >= MMAP_THRESHOLD_MAX)
    timed = comparison["optimizer_seconds"]
    return {
        "passes": ADAM_PASSES["for-loop"] * sum(sizes) * per_pass,
        "first_touch": ADAM_TEMPORARIES * large * fresh_extra,
        "fresh_bytes": ADAM_TEMPORARIES * large,
        "fused_passes": ADAM_PASSES["fused"] * sum(sizes) * per_pass,
        "measured": statistics.median(timed["for-loop"]),
        "fused_measured": statistics.median(timed["fused"]) if "fused" in timed else None,
    }


def explain_adam(comparison: dict, fresh: dict, reused: dict) -> str:
    """What ``optimizer_comparison`` says about fused Adam against the default and, where the default is
    the for-loop, the default's phase counted as memory traffic (``adam_memory_account``, from a copy into a
    fresh and into a reused buffer: ``dataparallel.copy_seconds_per_byte`` results) against the measured
    time, and how much of the measured time that count accounts for. Plain text."""
    fused = comparison["speedups"].get("fused")
    if fused is None:
        return f"fused Adam is not available here ({comparison['unavailable'].get('fused', '')})"
    if fused["verdict"] != "faster":
        return (
            f"fused Adam against the default: {describe_speedup(fused)}, so fewer passes over memory and no "
            "temporaries did not shorten the optimizer phase here"
        )
    text = (
        f"fused Adam against the default: {describe_speedup(fused)}, {1 - 1 / fused['speedup']:.0%} less "
        "time in the optimizer phase"
    )
    if comparison["default"] != "for-loop" or "fused" not in comparison["optimizer_seconds"]:
        return text + (
            f": it makes {ADAM_PASSES['fused']} tensor-sized reads and writes per parameter where the "
            f"for-loop makes {ADAM_PASSES['for-loop']}, and writes no temporaries"
        )
    found = adam_memory_account(comparison, fresh, reused)
    counted_seconds = found["passes"] + found["first_touch"]
    coverage = counted_seconds / found["measured"]
    text += (
        f". Counted from the two copies, the default's {found['measured'] * 1e3:.1f} ms hold about "
        f"{found['first_touch'] * 1e3:.1f} ms ({found['first_touch'] / found['measured']:.0%}) of first "
        f"writes to fresh pages (its sqrt and div write {found['fresh_bytes'] / MIB:,.0f} MiB of new "
        f"tensors every step) and about {found['passes'] * 1e3:.1f} ms for its {ADAM_PASSES['for-loop']} "
        "tensor-sized reads and writes of every parameter at the reused-buffer speed (a copy is one read "
        "and one write, so each pass takes half a copy's time); fused Adam makes "
        f"{ADAM_PASSES['fused']} such passes (about {found['fused_passes'] * 1e3:.1f} ms; measured "
        f"{found['fused_measured'] * 1e3:.1f} ms) and writes no temporaries"
    )
    if 1 / (1 + 2 * MATTERS) <= coverage <= 1 + 2 * MATTERS:
        return text + (
            f". The count comes to {coverage:.0%} of the measured phase: memory traffic, not Adam's "
            "arithmetic, is the optimizer's time"
        )
    if coverage > 1:
        return text + (
            f". The count comes to {coverage:.0%} of the measured phase: the plain copies' speeds do not "
            "carry over to Adam's passes here, so the count does not say where its time goes"
        )
    return text + (
        f". The count comes to {coverage:.0%} of the measured phase, so memory traffic alone does not "
        "account for the optimizer's time here"
    )
