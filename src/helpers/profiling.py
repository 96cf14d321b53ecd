"""Where the time of one training step goes, from torch.profiler and CUDA events (chapter 1).

On a GPU there are two clocks: the host enqueuing work and the device executing it. When the host's
total is well below the device's, the host runs ahead and the GPU is the bottleneck; when it is above,
the GPU waits for Python and kernel launches. On a CPU both are the same processor.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import warnings

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before the profiler loads: no GPU probing noise on CPU

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import TensorDataset

from helpers.models import build_model
from helpers.phase_clock import PHASES, PhaseClock
from helpers.stats import (
    MATTERS,
    Spread,
    apart_digits,
    shown_ratio,
    signed,
    significant,
    speedup,
    spread,
)
from helpers.train import (
    WARMUP_STEPS,
    check_positive,
    counted,
    make_optimizer,
    milliseconds,
    pick_device,
    to_device,
    training_step,
)

PROFILED_STEPS = 5  # each under its own profiler: what a profile says comes with its spread over steps
# a profile's bf16 change within 10 % of the timed one (log ratios) shows where the timed change lies
PROFILE_AGREES = 0.10
TIMES = ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total")


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
    profiled_steps: int = PROFILED_STEPS,
    top: int = 12,
    autocast_dtype: torch.dtype | None = None,
) -> dict:
    """Where the time of one training step goes, after ``warmup_steps`` warm-up steps (under autocast to
    ``autocast_dtype`` if given).

    ``phases`` (forward, backward, optimizer): medians over ``timed_steps`` steps run without the profiler,
    host seconds and, on a GPU, device seconds from CUDA events (``PhaseClock``; None on a CPU). Without
    the profiler because it adds host work to every operator and kernel launch, and because its
    "backward" range on the main thread misses the kernels that autograd's device thread launches.
    Then ``profiled_steps`` steps, each under its own torch.profiler: ``profiled``, each step's ``events``
    (its ``key_averages`` rows) with its ``host_seconds`` and ``device_seconds`` totals
    (``summarize_events``; the host total includes the profiler's own overhead), so that what a profile
    says comes with its spread over steps (``across_steps``); ``events``, ``operators`` and the totals at
    the top level are the median step's (by the GPU's total on a GPU, the host's on a CPU).
    ``step_seconds_all``: each unprofiled step's phases added up (device seconds on a GPU), to set the
    profiled steps against. ``load_average``: the machine's 1-minute load average before and after.
    """
    check_positive(batch_size=batch_size, timed_steps=timed_steps, profiled_steps=profiled_steps)
    if batch_size > len(train_set):
        raise ValueError(f"batch_size {batch_size} exceeds the {len(train_set)} training samples")
    target = pick_device(device)
    torch.manual_seed(0)
    model = build_model(model_name).to(target)
    optim = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = to_device(train_set, target).tensors
    arguments = (model, optim, inputs[:batch_size], targets[:batch_size], nn.functional.cross_entropy,
                 autocast_dtype)  # fmt: skip
    return profile_step(arguments, target, warmup_steps=warmup_steps, timed_steps=timed_steps,
                        profiled_steps=profiled_steps, top=top)  # fmt: skip


def profile_step(
    batch: tuple,
    target: torch.device,
    *,
    warmup_steps: int = WARMUP_STEPS,
    timed_steps: int = 5,
    profiled_steps: int = PROFILED_STEPS,
    top: int = 12,
) -> dict:
    """``profile_training_step``'s measurement of one ``train.training_step`` on ``target``, whatever the
    model: ``batch`` is that function's arguments (model, optimizer, inputs, targets, loss, autocast dtype),
    already on ``target``. Chapter 7's models (``advise.measure``) are profiled by the same code."""
    check_positive(timed_steps=timed_steps, profiled_steps=profiled_steps)
    on_gpu = target.type == "cuda"
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    batch_size = len(batch[2])
    autocast_dtype = batch[5]
    for _ in range(warmup_steps):
        training_step(*batch)
    timed = []
    for _ in range(timed_steps):
        clock = PhaseClock(target)
        training_step(*batch, phase=clock)
        timed.append(clock.seconds())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    profiled = []
    for _ in range(profiled_steps):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events")
            with profile(activities=activities) as profiler:  # leaving it synchronises the GPU
                training_step(*batch)
        rows = event_rows(profiler.key_averages())
        totals = summarize_events(rows, gpu=on_gpu, top=top)
        profiled.append({"events": rows, **totals})
    total = "device_seconds" if on_gpu else "host_seconds"
    typical = sorted(profiled, key=lambda step: step[total])[(len(profiled) - 1) // 2]
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
        f"operators and totals come from {counted(profiled_steps, 'step')} each under torch.profiler, all "
        f"after {counted(warmup_steps, 'warm-up step')}",
        "phases": phases,
        **{key: typical[key] for key in ("operators", "host_seconds", "device_seconds", "events")},
        "profiled": [
            {key: step[key] for key in ("events", "host_seconds", "device_seconds")} for step in profiled
        ],
        "load_average": [load_before, os.getloadavg()[0] if hasattr(os, "getloadavg") else None],
    }


def stored_step_profile(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """``profile_training_step`` through the results store (``autocast`` is ``"bf16"`` or None): a profile
    is a measurement of the machine that ran it, so a chapter executed from that machine's records shows
    its profile, not one of the machine reading them."""
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    autocast = settings.pop("autocast", None)
    config = {"kind": "step_profile", "model": model_name, "train_samples": len(train_set),
              "threads": torch.get_num_threads(), "autocast": autocast, **settings}  # fmt: skip
    dtype = torch.bfloat16 if autocast == "bf16" else None
    return store.measure(
        config, lambda: profile_training_step(model_name, train_set, autocast_dtype=dtype, **settings)
    )


def phase_frame(profiles: dict[str, dict]) -> pd.DataFrame:
    """The phases of ``{model: profile_training_step result}``, one row per model and phase."""
    return pd.concat([pd.DataFrame(p["phases"]).assign(model=name) for name, p in profiles.items()])


def across_steps(result: dict, measure) -> Spread:
    """The ``Spread`` of ``measure(step)`` over the profiled steps of a ``profile_training_step`` result
    (``measure`` takes a step's ``events``, ``host_seconds`` and ``device_seconds``, as the result holds
    them for its median step): step-to-step jitter within one run, not the spread of independent runs."""
    return spread(measure(step) for step in result["profiled"])


def operator_seconds(step: dict) -> dict[str, float]:
    """Self seconds of each host operator of one profiled step (annotations and ``PROFILER_ROWS`` left out):
    the device time of the kernels it launched on a GPU, its host self time on a CPU."""
    column = "self_device_time_total" if step["device_seconds"] is not None else "self_cpu_time_total"
    return {row["key"]: row[column] / 1e6 for row in step["events"]
            if row["device_type"] == "CPU" and not row["is_user_annotation"]
            and row["key"] not in PROFILER_ROWS}  # fmt: skip


def median_operators(result: dict) -> pd.DataFrame:
    """Every operator's self seconds over the profiled steps (``operator_seconds``; 0 in a step where it did
    not run): ``median``, ``low`` and ``high`` per operator, costliest median first, with its ``calls`` per
    step. What the chapter reads of a profile comes from these medians, so a table and a sentence agree."""
    per_step = pd.DataFrame([operator_seconds(step) for step in result["profiled"]]).fillna(0.0)
    calls = {row["key"]: row["count"] for row in result["events"]}
    frame = pd.DataFrame({"median": per_step.median(), "low": per_step.min(), "high": per_step.max()})
    frame["calls"] = [calls.get(name, 0) for name in frame.index]
    return frame.sort_values("median", ascending=False).rename_axis("operator")


def median_seconds(result: dict) -> dict[str, float]:
    """``{operator: median self seconds}`` over the profiled steps (``median_operators``)."""
    return median_operators(result)["median"].to_dict()


def median_categories(result: dict) -> dict[str, float]:
    """``operator_categories`` of the operators' medians, against the median step total."""
    return operator_categories(median_seconds(result), median_total(result))


def median_total(result: dict) -> float:
    """The median over the profiled steps of each step's total (``step_total``)."""
    return statistics.median(step_total(step) for step in result["profiled"])


def host_device_verdict(result: dict) -> str:
    """One sentence on whether the host runs ahead of the device: the unprofiled steps' host time (their
    phases' medians, without the profiler's own overhead) against the profiled steps' kernel time."""
    host = sum(row["host_seconds"] for row in result["phases"])
    if result["device_seconds"] is None:
        return (
            f"On the CPU the host is the device: the {host * 1e3:.1f} ms of host time are the computation "
            "itself, so there is no queue for the host to run ahead of."
        )
    device = median_total(result)
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
    """The ``rows`` costliest operators of the profiled steps (``median_operators``): calls per step, the
    median self time in milliseconds and its range over the steps (on a GPU, of the kernels each launched),
    to two significant digits, so that a 40 µs operator reads 0.040, not 0.0."""
    frame = median_operators(result).head(rows)
    clock = "on the GPU" if result["device_seconds"] is not None else "on the host"
    steps = len(result["profiled"])
    return pd.DataFrame({
        "calls per step": frame["calls"],
        f"self time {clock} (ms), median": (frame["median"] * 1e3).map(lambda ms: significant(ms, 2)),
        f"range over {steps} steps (ms)": [f"{significant(low * 1e3, 2)}–{significant(high * 1e3, 2)}"
                                           for low, high in zip(frame["low"], frame["high"], strict=True)],
    })  # fmt: skip


DISPATCHERS = ("aten::convolution", "aten::_convolution")  # pick the backend's convolution and call it


def backward_forward_ratio(seconds: dict[str, float], operation: str = "convolution") -> float:
    """Self time of the backward operators of ``operation`` over that of its forward operators, from
    ``{operator: seconds}`` (``operator_seconds`` of a step, or the medians of ``median_operators``).
    Summed over every operator whose name contains ``operation``: which one holds the time depends on the
    backend (``mkldnn_convolution`` on CPUs, ``cudnn_convolution`` on GPUs); the operators that only
    dispatch to it (``DISPATCHERS``) are left out, as the operator table leaves them out of its top rows."""
    timed = {name: t for name, t in seconds.items() if operation in name and name not in DISPATCHERS}
    backward = sum(t for name, t in timed.items() if "backward" in name)
    forward = sum(t for name, t in timed.items() if "backward" not in name)
    if not forward:
        raise ValueError(f"no forward {operation} operator in the profiled step")
    return backward / forward


def backward_forward(result: dict, operation: str = "convolution") -> Spread:
    """``backward_forward_ratio`` of the profiled steps: the ratio of the operators' medians (what the
    operator table gives), with the range of each step's own ratio."""
    each = across_steps(result, lambda step: backward_forward_ratio(operator_seconds(step), operation))
    return dataclasses.replace(each, median=backward_forward_ratio(median_seconds(result), operation))


def ratio_text(measured: Spread, of: str = "") -> str:
    """``2.58× (2.41–2.66× over 5 steps of one run)``, ``of`` following the median's ×; the median and its
    interval with the decimals that keep two different ends apart (``stats.apart_digits``: 3.822×
    (3.820–3.825×), not 3.82× (3.82–3.82×))."""
    digits = apart_digits(measured.low, measured.high)
    interval = f"{measured.low:.{digits}f}–{measured.high:.{digits}f}×"
    return f"{measured.median:.{digits}f}×{of} ({interval} over {measured.count} steps of one run)"


def backward_sentence(measured: Spread, expected: float) -> str:
    """What the backward/forward time ratio of the profiled steps (``backward_forward``) says against the
    ratio of the arithmetic."""
    relative = expected / measured.median
    pace = f"ran {relative:.2f}× as fast as" if relative >= 1 else f"took {1 / relative:.2f}× as long as"
    took = ratio_text(measured, " the forward's time")
    return (
        f"the backward convolutions took {took} for {expected:.2f}× their multiply-adds, so per "
        f"multiply-add they {pace} the forward ones"
    )


def profile_sentence(result: dict, swept: dict | None = None) -> str:
    """The profiled steps against the unprofiled steps that timed its phases, and, where the batch-size
    sweep timed the same batch (``swept``: its ``step_timing`` record), those against the sweep's steps,
    another run: whether the two runs' ranges overlap, else by how much they differ, with no verdict (a
    ``speedup`` interval holds within one run only) and no cause that was not measured.

    On a CPU the profiled steps' host time is set against the unprofiled steps' (the profiler's own cost);
    on a GPU their kernels' summed time against the unprofiled steps' CUDA-event spans: the share of the
    step the GPU computes, the rest being the GPU waiting for the host to issue work."""
    unprofiled = spread(result["step_seconds_all"])
    if result["device_seconds"] is None:
        profiled = [step["host_seconds"] for step in result["profiled"]]
        text = (
            f"the steps under the profiler took {milliseconds(profiled)}, the unprofiled steps "
            f"{milliseconds(result['step_seconds_all'])}"
        )
        cost = speedup(profiled, result["step_seconds_all"])  # above 1: the profiled steps took longer
        if cost["verdict"] == "no measurable difference":
            text += ": no measurable difference, so the profiler's own bookkeeping does not show"
        elif cost["verdict"] == "not resolved":
            text += ": the two spread too widely to tell whether the profiler's own bookkeeping adds time"
        elif cost["speedup"] > 1:
            text += (
                f": the profiled steps took {cost['speedup']:.2f}× the unprofiled median "
                f"({cost['low']:.2f}–{cost['high']:.2f}×), the profiler's own bookkeeping and whatever "
                "else the machine ran then"
            )
        else:
            text += (
                ": the profiled steps, which ran after the unprofiled ones, took "
                f"{cost['speedup']:.2f}× their median ({cost['low']:.2f}–{cost['high']:.2f}×), so the gap is "
                "no bookkeeping of the profiler's but a change between the earlier and the later steps of "
                "this run"
            )
    else:
        kernels = across_steps(result, lambda step: step["device_seconds"])
        busy, spans = kernels.median / unprofiled.median, milliseconds(result["step_seconds_all"])
        summed = f"{significant(kernels.median * 1e3)} ms ({significant(kernels.low * 1e3)}–"
        summed += f"{significant(kernels.high * 1e3)}, {kernels.count} steps)"
        text = (
            f"the kernels of a profiled step summed to {summed} of GPU time, while the unprofiled steps "
            f"spanned {spans} on CUDA events: the GPU computed for {busy:.0%} of the step"
            + (", and waited for the host to issue work for the rest" if busy < 1 - MATTERS else "")
        )
    if swept:
        swept_steps = swept["result"]["step_seconds_all"]
        there = spread(swept_steps)
        text += f". The batch-size sweep, another run, timed this batch at {milliseconds(swept_steps)}"
        if there.low <= unprofiled.high and unprofiled.low <= there.high:
            text += ": the unprofiled steps' range overlaps the sweep's"
        else:
            gap = unprofiled.median / there.median - 1
            left_out = "the sweep's zeroing of gradients and batch indexing"
            text += f": the unprofiled steps here took {abs(gap):.0%} {'longer' if gap > 0 else 'less'}"
            if gap > 0:
                text += (f", although they leave out {left_out}: a drift between runs that one run cannot "
                         "explain, so compare step times within one run")  # fmt: skip
            else:
                text += (
                    f", and they leave out {left_out}: that work and drift between runs cannot be told apart"
                )
    return text + "."


CATEGORIES = (
    ("convolutions", lambda name: "convolution" in name),
    ("matrix products", lambda name: name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul")),
    ("conversions and copies", lambda name: name in ("aten::to", "aten::_to_copy", "aten::copy_")),
)


def operator_categories(seconds: dict[str, float], total: float) -> dict[str, float]:
    """Seconds by kind of operator (``CATEGORIES``) of ``{operator: seconds}`` (``operator_seconds`` of a
    step, or the medians of ``median_operators``); "everything else" is the rest of ``total``, the step's
    (``step_total``: the phases' host wall time, or the GPU's kernel time)."""
    totals = dict.fromkeys([name for name, _ in CATEGORIES], 0.0)
    for operator, time in seconds.items():
        category = next((name for name, test in CATEGORIES if test(operator)), None)
        if category:
            totals[category] += time
    totals["everything else"] = max(total - sum(totals.values()), 0.0)
    return totals


def category_shares(result: dict) -> dict[str, Spread]:
    """Each kind of operator's share of a profiled step: the operators' medians over the median step total
    (what the operator table and the step times give), with the range of each step's own share."""
    medians, total = median_categories(result), median_total(result)
    shares = {}
    for name, _ in CATEGORIES:
        each = across_steps(
            result,
            lambda step, name=name: (
                operator_categories(operator_seconds(step), step_total(step))[name] / step_total(step)
            ),
        )
        shares[name] = dataclasses.replace(each, median=medians[name] / total)
    return shares


def step_total(step: dict) -> float:
    """A profiled step's total: the GPU's kernel time on a GPU, the phases' host wall time on a CPU."""
    return step["device_seconds"] if step["device_seconds"] is not None else step["host_seconds"]


def share_text(share: Spread, on_gpu: bool) -> str:
    """``93% of a profiled step (92–94% over 5 steps of one run)``; on a GPU, of its kernel time. The
    percentages get the decimals that keep two different ends apart (94.1–94.3%, not 94%–94%)."""
    of = "a profiled step's GPU kernel time" if on_gpu else "a profiled step"
    digits = apart_digits(share.low * 100, share.high * 100, digits=0)
    return (
        f"{share.median:.{digits}%} of {of} ({share.low:.{digits}%}–{share.high:.{digits}%} over "
        f"{share.count} steps of one run)"
    )


PRECISION_STEPS = 5  # profiled steps per model and precision, as many as the timed steps


def precision_profiles(
    store,
    names,
    train_set: TensorDataset,
    batch_size: int,
    device: str = "auto",
    profiled_steps: int = PRECISION_STEPS,
) -> pd.DataFrame:
    """Each model in float32 and under bf16 autocast, by kind of operator (``operator_categories`` of the
    operators' medians over ``profiled_steps`` profiled steps, through the store): one row per model,
    precision and category, in seconds."""
    rows = []
    for name in names:
        for precision, autocast in (("float32", None), ("bf16", "bf16")):
            result = stored_step_profile(store, name, train_set, batch_size=batch_size, device=device,
                                         timed_steps=1, profiled_steps=profiled_steps,
                                         autocast=autocast)["result"]  # fmt: skip
            medians = median_categories(result)
            rows += [{"model": name, "precision": precision, "category": category, "seconds": seconds,
                      "profiled_steps": profiled_steps}
                     for category, seconds in medians.items()]  # fmt: skip
    return pd.DataFrame(rows)


def precision_profile_table(profiles: pd.DataFrame) -> pd.DataFrame:
    """``precision_profiles`` to read: milliseconds per kind of operator (rows) and model and precision
    (columns), medians over the profiled steps, with the sum of the medians as the step's total."""
    table = profiles.pivot_table(
        index="category", columns=["model", "precision"], values="seconds", sort=False
    )
    table.loc["the whole step (sum)"] = table.sum()
    steps = int(profiles["profiled_steps"].iloc[0])
    return (
        (table * 1e3)
        .map(significant)  # the prose's three digits: a 0.076 ms conversion reads 0.0760, not 0.1
        .rename_axis(index=f"ms of a step, median of {steps} profiled steps")
    )


def explain_precision(profiles: pd.DataFrame, model: str, timed: dict | None = None) -> str:
    """Where ``model``'s bf16 step gains or loses time against float32 (``precision_profiles``): its main
    arithmetic (convolutions if it has any, else matrix products), the conversions, everything else, and
    which kind of operator holds most of the difference. Where, not how much: the timed steps measure the
    difference (``timed``: their ``stats.speedup`` of bf16 over float32). A profile whose totals' ratio lies
    outside the timed interval is said not to reproduce it: to come close where its change is the timed
    one's to within ``PROFILE_AGREES`` (as logarithms of the ratios, so that 4.01× against 3.80× is 104 %
    and 1.01× against 1.08× only 13 %), and not to explain it otherwise. Plain text, to be glued."""
    rows = profiles[profiles["model"] == model].pivot(index="category", columns="precision", values="seconds")
    main = "convolutions" if rows.loc["convolutions", "float32"] > 0 else "matrix products"
    extra = rows["bf16"] - rows["float32"]
    main_ms = {precision: significant(rows.loc[main, precision] * 1e3) for precision in ("bf16", "float32")}
    rest_ms = {p: significant(rows.loc["everything else", p] * 1e3) for p in ("bf16", "float32")}
    conversions = extra["conversions and copies"] * 1e3
    converted = f"{'added' if conversions >= 0 else 'saved'} {significant(abs(conversions))} ms"
    text = (
        f"{model}'s {main} took {main_ms['bf16']} ms in bf16 against {main_ms['float32']} ms in float32, "
        f"conversions and copies {converted}, and everything else took {rest_ms['bf16']} ms against "
        f"{rest_ms['float32']} ms"
    )
    largest = extra.abs().idxmax()
    change = extra[largest] * 1e3
    what = {main: f"the {main}", "conversions and copies": "the conversions and copies"}.get(largest, largest)
    text += f": in the profiled steps the largest change is in {what} ({signed(change)} ms)"
    if timed is None:
        return text
    totals = rows.sum()
    ratio = totals["float32"] / totals["bf16"]

    def read(speedup: float, verbs: tuple[str, str]) -> str:  # bf16's ratio, said with its direction
        faster, slower = verbs
        return (f"bf16 {faster}{speedup:.2f}× as fast" if speedup >= 1
                else f"bf16 {slower}{1 / speedup:.2f}× as long")  # fmt: skip

    said = (f"the profiled totals ({significant(totals['float32'] * 1e3)} ms in float32, "
            f"{significant(totals['bf16'] * 1e3)} ms in bf16: {read(ratio, ('', 'taking '))})")  # fmt: skip
    _, low, high = shown_ratio(timed)
    resolved = ", not resolved" if timed.get("verdict") == "not resolved" else ""
    interval = f"in which {read(timed['speedup'], ('ran ', 'took '))} ({low:.2f}–{high:.2f}×{resolved})"
    if timed["low"] <= ratio <= timed["high"]:
        return text + f"; {said} agree with the timed steps, {interval}"
    share = math.log(ratio) / math.log(timed["speedup"]) if timed["speedup"] != 1 else math.inf
    if abs(share - 1) <= PROFILE_AGREES:
        return (
            text + f"; {said} lie outside the timed steps' interval, {interval}, but their change is "
            f"{share * 100:.0f} % of the timed one (as logarithms of the ratios): close enough to show "
            "where the difference lies"
        )
    return (
        text
        + f"; but {said} do not reproduce the timed steps, {interval}, so this profile does not explain it"
    )
