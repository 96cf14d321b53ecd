"""Plans before launches: every launch and every stretch of training a profile will run on a machine,
validated and timed before anything starts (``python -m helpers.study --profile gpu --plan``).

A GPU profile meets its machine for the first time on a rented GPU, where a refused launch costs rent.
So each chapter's work is listed from the chapter's own parameters (``helpers.chapter_plans``), and every
launch is checked with the launcher's own ``check_launch`` on the machine the plan is for — this one, or
one described (``--gpus 4 --gpu-name "NVIDIA A100-SXM4-40GB"``, or a recorded ``nvidia-smi`` list).
Each item also gets the arithmetic memory of its busiest device (chapter 6's bytes per rank plus
chapter 1's bytes held per sample), refused when it exceeds the card, and an estimate of its seconds.

The estimate is a budget check, not a measurement: launches cost an assumed start-up, steps cost
chapter 5's central roofline on the GPU (kernels and the host's time per eager op) or an assumed CPU
throughput, plus a ring all-reduce of the gradients at an assumed bus bandwidth. ``ASSUMPTIONS`` names
each figure.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pandas as pd

from helpers.collectives.model import BENCHMARK_OPERATIONS, bus_bandwidth_factor
from helpers.collectives.runs import BENCHMARK_LIMIT_SECONDS, BUDGET_SHARE
from helpers.costmodel.gpus import gradient_bytes, roofline_step, training_flops_per_sample
from helpers.costmodel.specs import GPUS, gpu_key
from helpers.hardware import Machine
from helpers.launch import Request
from helpers.models import build_model, held_bytes_per_sample
from helpers.sharding.memory import per_rank_bytes

# What the estimate assumes (none of it measured on the planned machine; gpu-check's rows measure some).
ASSUMPTIONS = {
    "launch start-up, s": (
        12.0,
        "torchrun, interpreter and torch import, communicator, decoded clips read: 4.0 s for one Gloo rank "
        "and 4.4-4.7 s for two measured on this 2-core machine (2026-11-28); a CUDA context and NCCL's "
        "communicator add a few seconds per rank",
    ),
    "chapter start-up, s": (30.0, "papermill's kernel, imports, the decoded data set"),
    "CPU FLOP/s per core": (30e9, "AVX2 float32 at about half its peak"),
    "Gloo bus bandwidth, B/s": (1e9, "TCP over loopback through host memory: 1-2 GB/s in chapter 4 here"),
    "NCCL bus bandwidth, B/s": (5e9, "PCIe 3.0 x16 ring all-reduce, the slowest link the book prices"),
    "memory headroom": (0.9, "CUDA context, allocator fragmentation and cuDNN workspace need the rest"),
}
BUDGET_MINUTES = {"chapter": 9, "one GPU": 27, "four GPUs": 45}  # a 30-minute rental, 3 of them to start


def assumed(name: str) -> float:
    return ASSUMPTIONS[name][0]


@dataclass
class Item:
    """One launch (``request``) or one stretch of single-process work (``request`` None) of a chapter."""

    chapter: str
    what: str
    model: str | None
    per_rank_batch: int | None
    steps: int  # training steps each rank takes; 0 for collectives
    device: str  # "cuda" or "cpu": where the work runs
    request: Request | None = None
    dtype: str = "float32"
    stage: int = 0  # ZeRO stage of a sharded launch (what each rank holds)
    fixed_seconds: float = 0.0  # time that is not steps (a benchmark's budget, a deadlock's timeout)
    repeats: int = 1
    seconds: float = 0.0
    memory_bytes: int | None = None
    refusal: str | None = None  # what the launcher (or the card's memory) would refuse: a defect
    skipped: str | None = None  # what the chapter leaves out on this machine by design, and says so
    reused: bool = False  # measured by an earlier chapter of the run, read from its record here
    keyed: bool = True  # its request's config is what its record is stored under (helpers.coverage)

    @property
    def ranks(self) -> int:
        return self.request.world_size if self.request else 1


def gpu_spec(machine: Machine):
    """The roofline figures of the planned GPU; an unknown GPU is timed as the slowest in the table."""
    key = gpu_key(machine.gpu_name or "")
    return GPUS[key] if key else min(GPUS.values(), key=lambda gpu: gpu.fp32_flops)


def ranks_per_gpu(item: Item, machine: Machine) -> int:
    if item.device != "cuda" or not machine.gpus:
        return 1
    limit = item.request.config.get("gpus") if item.request else None
    gpus = min(machine.gpus, limit or machine.gpus)
    return math.ceil(item.ranks / gpus)


def step_seconds(item: Item, machine: Machine) -> float:
    """One training step of ``item``: compute (roofline on the GPU, FLOPs at an assumed rate on the CPU)
    and, with several ranks, a ring all-reduce of the gradients at the backend's assumed bus bandwidth."""
    batch = item.per_rank_batch or 1
    if item.device == "cuda":
        # chapter 5's central roofline: its kernels and the host issuing each eager op (about 10 µs)
        compute = roofline_step(item.model, batch, gpu_spec(machine))["step_seconds"] * ranks_per_gpu(
            item, machine
        )
    else:
        threads = max(1, machine.cores // item.ranks)
        compute = training_flops_per_sample(item.model) * batch / (assumed("CPU FLOP/s per core") * threads)
    if item.ranks < 2:
        return compute
    backend = item.request.config["backend"]
    bandwidth = assumed("NCCL bus bandwidth, B/s" if backend == "nccl" else "Gloo bus bandwidth, B/s")
    return compute + bus_bandwidth_factor("all_reduce", item.ranks) * gradient_bytes(item.model) / bandwidth


def benchmark_seconds(config: dict, ranks: int) -> float:
    """A collective benchmark's seconds by the α-β model without α: every operation, size and iteration
    (warm-up included) at the backend's assumed bus bandwidth, the pipelined broadcast once per chunk
    count; never more than the time budget the benchmark stops at."""
    name = "NCCL bus bandwidth, B/s" if config["backend"] == "nccl" else "Gloo bus bandwidth, B/s"
    iterations = config["iterations"] + config["warmup_iterations"]
    seconds = 0.0
    for operation in config["operations"]:
        calls = len(config["chunks"]) if operation == "ring_broadcast" else 1
        factor = bus_bandwidth_factor(BENCHMARK_OPERATIONS[operation][0], ranks)
        seconds += calls * iterations * sum(factor * size / assumed(name) for size in config["sizes_bytes"])
    budget = config["time_budget_seconds"] or BUDGET_SHARE * BENCHMARK_LIMIT_SECONDS
    return min(seconds, budget)


def estimate(item: Item, machine: Machine) -> float:
    """Seconds of ``item``, all its repeats: start-up for a launch, steps, and its fixed time."""
    seconds = item.fixed_seconds + (item.steps * step_seconds(item, machine) if item.model else 0.0)
    if item.request is not None:
        seconds += assumed("launch start-up, s")
    return item.repeats * seconds


@functools.cache
def held_per_sample(model: str) -> int:
    return held_bytes_per_sample(build_model(model))


def device_bytes(item: Item, machine: Machine) -> int | None:
    """The busiest device's bytes by the arithmetic: weights, gradients and Adam's state of its ZeRO stage
    (chapter 6), the bytes held per sample (chapter 1) times the batch, times the ranks sharing it."""
    if item.model is None or item.device != "cuda":
        return None
    state = max(sum(list(row.values())[1:]) for row in per_rank_bytes(item.model, item.stage, item.ranks))
    held = held_per_sample(item.model) * (item.per_rank_batch or 1)
    return (state + held) * ranks_per_gpu(item, machine)


def check(item: Item, machine: Machine) -> None:
    """Fill in the refusal (the launcher's, or memory's), the memory and the estimated seconds."""
    if item.skipped:
        return
    if item.request is not None:
        item.refusal = item.request.refusal(machine)
    item.memory_bytes = device_bytes(item, machine)
    card = machine.gpu_memory_bytes
    if (
        item.refusal is None
        and item.memory_bytes
        and card
        and item.memory_bytes > assumed("memory headroom") * card
    ):
        item.refusal = (
            f"needs {item.memory_bytes / 2**30:.1f} GiB on its busiest GPU by the arithmetic, more than "
            f"{assumed('memory headroom'):.0%} of the {card / 2**30:.0f} GiB card"
        )
    item.seconds = estimate(item, machine)


# ---------------------------------------------------------------------------------------------------------
# Each chapter's work, from its parameters (the notebook's defaults overridden by the profile)


def item_table(items: list[Item]) -> pd.DataFrame:
    """One row per item: chapter, what, ranks, backend, device per rank, batches, dtype, memory, seconds,
    refusal."""
    rows = []
    for item in items:
        config = item.request.config if item.request else {}
        rows.append(
            {
                "chapter": item.chapter,
                "what": item.what,
                "ranks": item.ranks,
                "backend": config.get("backend", "") if item.request else "(in the notebook)",
                "device per rank": item.device,
                "global batch": config.get("global_batch_size", item.per_rank_batch) or "",
                "per-rank batch": item.per_rank_batch or "",
                "dtype": item.dtype,
                "GiB per device": round(item.memory_bytes / 2**30, 2) if item.memory_bytes else "",
                "estimated s": round(item.seconds, 1),
                "refused": item.refusal or "",
            }
        )
    return pd.DataFrame(rows)


def chapter_minutes(items: list[Item]) -> pd.Series:
    """Estimated minutes per chapter, with each chapter's start-up."""
    frame = pd.DataFrame({"chapter": [i.chapter for i in items], "seconds": [i.seconds for i in items]})
    per_chapter = frame.groupby("chapter", sort=False)["seconds"].sum() + assumed("chapter start-up, s")
    return per_chapter / 60


def text_table(frame: pd.DataFrame) -> str:
    """A frame as left-aligned text columns, long cells kept whole (pandas right-aligns and wraps)."""
    cells = [[str(column) for column in frame.columns]] + [
        [str(v) for v in row] for row in frame.itertuples(index=False)
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(frame.columns))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return "\n".join([lines[0], "  ".join("-" * width for width in widths), *lines[1:]])


def assumptions_text() -> str:
    return "\n".join(f"- {name}: {value:g} ({why})" for name, (value, why) in ASSUMPTIONS.items())


def describe_plan(items: list[Item], machine: Machine) -> str:
    """What ``--plan`` prints: every item, refusals with their reasons, minutes per chapter and in all."""
    minutes = chapter_minutes(items)
    refused = [item for item in items if item.refusal]
    # A GPU rental runs one chapter per 10-minute command; on a CPU machine only the profile's limit binds.
    over = [name for name, value in minutes.items() if machine.gpus and value > BUDGET_MINUTES["chapter"]]
    planned = [item for item in items if not item.skipped]
    lines = [f"Plan on {machine.describe()}", "", text_table(item_table(planned).drop(columns="refused")), ""]
    lines += ["Refused before starting:" if refused else "Nothing refused."]
    lines += [f"- {item.chapter}: {item.what}: {item.refusal}" for item in refused]
    skipped = [item for item in items if item.skipped]
    if skipped:
        lines += ["", "Left out on this machine by design (each chapter says so):"]
        lines += [f"- {item.chapter}: {item.what}: {item.skipped}" for item in skipped]
    lines += ["", "Estimated minutes per chapter:"]
    lines += [
        f"- {name}: {value:.1f}"
        + (" (over the 9-minute budget of one device command)" if name in over else "")
        for name, value in minutes.items()
    ]
    lines += [f"- all: {minutes.sum():.1f}", "", "The estimate assumes:", assumptions_text()]
    return "\n".join(lines)
