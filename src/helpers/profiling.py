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
from helpers.stats import describe_speedup, speedup, spread
from helpers.train import (
    WARMUP_STEPS,
    check_positive,
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
    clocks = "host clock and CUDA events" if on_gpu else "host clock"
    return {
        "device": str(target),
        "batch_size": batch_size,
        "autocast": str(autocast_dtype).removeprefix("torch.") if autocast_dtype else None,
        "step_seconds_all": [sum(step[name][1 if on_gpu else 0] for name in PHASES) for step in timed],
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


def profile_sentence(result: dict, swept_steps: list[float] | None = None) -> str:
    """One profiled step against the unprofiled steps that timed its phases, and, where the batch-size
    sweep timed the same batch (``swept_steps``), those against the sweep's steps."""
    profiled = result["host_seconds"] if result["device_seconds"] is None else result["device_seconds"]
    unprofiled = spread(result["step_seconds_all"])
    text = (
        f"one step under the profiler took {profiled * 1e3:,.0f} ms, the unprofiled steps "
        f"{milliseconds(result['step_seconds_all'])}"
    )
    if unprofiled.low <= profiled <= unprofiled.high:
        text += ": the profiled step lies inside their range, so the profiler's own bookkeeping does not show"
    else:
        text += (
            f": the profiled step took {profiled / unprofiled.median:.2f}× their median, the profiler's own "
            "bookkeeping and whatever else the machine ran in that second"
        )
    if swept_steps:
        change = speedup(swept_steps, result["step_seconds_all"])
        swept = milliseconds(swept_steps)
        text += (
            f". The batch-size sweep timed this batch at {swept}; the unprofiled steps against those: "
            f"{describe_speedup(change)}"
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


def explain_precision(profiles: pd.DataFrame, model: str) -> str:
    """Where ``model``'s bf16 step gains or loses time against float32 (``precision_profiles``): its main
    arithmetic (convolutions if it has any, else matrix products), the conversions, and which kind of
    operator holds most of the difference. Plain text (no markup), to be glued into a sentence."""
    rows = profiles[profiles["model"] == model].pivot(index="category", columns="precision", values="seconds")
    main = "convolutions" if rows.loc["convolutions", "float32"] > 0 else "matrix products"
    extra = rows["bf16"] - rows["float32"]
    text = (
        f"{model}'s {main} took {rows.loc[main, 'bf16'] * 1e3:,.0f} ms in bf16 against "
        f"{rows.loc[main, 'float32'] * 1e3:,.0f} ms in float32, and conversions and copies added "
        f"{extra['conversions and copies'] * 1e3:,.0f} ms"
    )
    if extra.sum() <= 0:
        return text + f": the bf16 step was {-extra.sum() * 1e3:,.0f} ms shorter"
    largest = extra.idxmax()
    cause = {main: f"in the bf16 {main} themselves, not in the conversions",
             "conversions and copies": f"in the conversions, not in the {main}",
             "everything else": "in the other operators (pooling, activations, the optimizer), not in the "
             f"{main} or the conversions"}.get(largest, f"in the {largest}")  # fmt: skip
    return text + f": of the {extra.sum() * 1e3:,.0f} ms that the bf16 step took longer, the most is {cause}"


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
    """Adam's optimizer phase in each implementation torch offers on the device, against torch's default
    there: ``table`` (to read), ``speedups`` (``helpers.stats.speedup`` against the default), ``default``
    and ``unavailable`` ({implementation: torch's refusal}) where the device lacks one."""
    default = default_adam_implementation(pick_device(settings.get("device", "auto")))
    timed, unavailable = {}, {}
    for name in ADAM_IMPLEMENTATIONS:
        try:
            record = stored_optimizer_timing(store, model_name, train_set, implementation=name, **settings)
        except (RuntimeError, ValueError) as refusal:
            unavailable[name] = str(refusal).splitlines()[0]
            continue
        timed[name] = record["result"]["optimizer_seconds_all"]
    speedups = {name: speedup(timed[default], steps) for name, steps in timed.items() if name != default}
    table = pd.DataFrame(
        [
            {"implementation": name + (" (torch's default here)" if name == default else ""),
             "optimizer phase (ms)": milliseconds(steps, unit=""),
             "against the default": describe_speedup(speedups[name]) if name in speedups else "—"}
            for name, steps in timed.items()
        ]
    ).set_index("implementation")  # fmt: skip
    return {"default": default, "table": table, "speedups": speedups, "unavailable": unavailable}


def explain_adam(comparison: dict, fresh: dict, reused: dict) -> str:
    """What ``optimizer_comparison`` says about the default Adam, next to the speed of a copy into a fresh
    buffer and into a reused one (``dataparallel.copy_seconds_per_byte`` results)."""
    fresh_speed, reused_speed = 1 / fresh["seconds_per_byte"] / 1e9, 1 / reused["seconds_per_byte"] / 1e9
    text = (
        f"a copy of {fresh['bytes'] / 1e6:,.0f} MB ran at {fresh_speed:.1f} GB/s into a fresh buffer and at "
        f"{reused_speed:.1f} GB/s into a reused one"
    )
    fused = comparison["speedups"].get("fused")
    if fused is None:
        return text + f"; fused Adam is not available here ({comparison['unavailable'].get('fused', '')})"
    if fused["verdict"] == "faster":
        saved = 1 - 1 / fused["speedup"]
        return text + (
            f". Fused Adam does the same arithmetic in one pass without temporary tensors; against the "
            f"default: {describe_speedup(fused)}, {saved:.0%} less time. That much of the default's "
            "optimizer phase is writing temporaries, not Adam's arithmetic"
        )
    return text + (
        f". Fused Adam against the default: {describe_speedup(fused)}, so the temporaries are not where the "
        "optimizer's time goes here"
    )
