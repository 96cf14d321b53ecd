"""Plans before launches: every launch and every stretch of training a profile will run on a machine,
validated and timed before anything starts (``python -m helpers.study --profile gpu --plan``).

A GPU profile meets its machine for the first time on a rented GPU, where a refused launch costs rent.
So each chapter's work is listed here from the chapter's own parameters, with the same helpers its
notebook calls to choose backends and rank counts (``launch.run_plan``, ``ddp.chapter_sweeps``,
``scaling.scaling_variations``, ``lightning_ddp.planned_ranks``, ``sharding.runs.placement``), and every
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

from helpers import ddp, lightning_ddp, scaling
from helpers.advise.validate import MODULE as ADVISE
from helpers.collectives.model import BENCHMARK_OPERATIONS, bus_bandwidth_factor
from helpers.collectives.runs import WORKER as COLLECTIVES
from helpers.collectives.runs import check_benchmark_world_sizes, collective_config
from helpers.costmodel.gpus import gradient_bytes, roofline_step, training_flops_per_sample
from helpers.costmodel.specs import GPUS, gpu_key
from helpers.data import SPLIT_SIZES
from helpers.hardware import Machine
from helpers.launch import Request, run_plan
from helpers.launch import main_backend as launch_main_backend
from helpers.models import build_model, held_bytes_per_sample
from helpers.results import canonical_json
from helpers.sharding.memory import per_rank_bytes
from helpers.sharding.runs import WORKER as SHARDING
from helpers.sharding.runs import placement, sharding_config
from helpers.sharding.tasks import STRATEGIES
from helpers.train import WARMUP_STEPS

# What the estimate assumes (none of it measured on the planned machine; gpu-check's rows measure some).
ASSUMPTIONS = {
    "launch start-up, s": (
        12.0,
        "torchrun, interpreter and torch import, communicator, decoded clips read: 5.3 s for one Gloo rank "
        "and 5.7-6.5 s for two measured on this 2-core machine (2026-11-24); a CUDA context and NCCL's "
        "communicator add a few seconds per rank",
    ),
    "chapter start-up, s": (30.0, "papermill's kernel, imports, the decoded data set"),
    "CPU FLOP/s per core": (30e9, "AVX2 float32 at about half its peak"),
    "Gloo bus bandwidth, B/s": (1e9, "TCP over loopback through host memory: 1-2 GB/s in chapter 4 here"),
    "NCCL bus bandwidth, B/s": (5e9, "PCIe 3.0 x16 ring all-reduce, the slowest link the book prices"),
    "memory headroom": (0.9, "CUDA context, allocator fragmentation and cuDNN workspace need the rest"),
}
BUDGET_MINUTES = {"chapter": 9, "one GPU": 25, "four GPUs": 45}  # issue 24: a 30-minute rental


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
    budget = config["time_budget_seconds"]
    return min(seconds, budget) if budget else seconds


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


def _device(parameters: dict, machine: Machine) -> str:
    device = parameters.get("device", "cpu")
    return ("cuda" if machine.gpus else "cpu") if device == "auto" else device


def _samples(value: int | None, split: str = "train") -> int:
    return value or SPLIT_SIZES[split]


def chapter_one(p: dict, machine: Machine) -> list[Item]:
    device, chapter = _device(p, machine), "01_single_device"
    clips = _samples(p["train_samples"])
    items = [
        Item(
            chapter,
            f"training, {m}",
            m,
            p["batch_size"],
            p["epochs"] * math.ceil(clips / p["batch_size"]),
            device,
        )
        for m in ("LinearNet", "ConvNet")
    ]
    items += [
        Item(chapter, f"batch sweep, {m}, batch {b}", m, b, p["sweep_timed_steps"] + WARMUP_STEPS, device)
        for m in p["sweep_models"]
        for b in p["sweep_batch_sizes"]
    ]
    items += [
        Item(
            chapter,
            f"precision, {m}, {dtype}",
            m,
            p["precision_batch_size"],
            p["sweep_timed_steps"] + WARMUP_STEPS,
            device,
            dtype=dtype,
        )
        for m in ("LinearNet", "ConvNet")
        for dtype in ("float32", "bf16")
    ]
    items += [
        Item(chapter, f"profiled steps, {m}", m, p["profile_batch_size"], 7, device)
        for m in ("LinearNet", "ConvNet")
    ]
    return items


def chapter_two(p: dict, machine: Machine) -> list[Item]:
    device, chapter = _device(p, machine), "02_dataparallel_internals"
    return [
        Item(
            chapter,
            f"DataParallel, {m}, {k} replica(s), batch {b}",
            m,
            b,
            (p["timed_steps"] + WARMUP_STEPS) * 2,
            device,
        )
        for m in p["models_to_time"]
        for k in p["replica_counts"]
        for b in p["batch_sizes"]
    ]


def _ddp_item(chapter: str, what: str, settings: dict, ranks: int) -> Item:
    config = ddp.ddp_config(**settings)
    clips = _samples(config["train_samples"])
    steps = config["epochs"] * (clips // config["global_batch_size"])
    return Item(
        chapter,
        what,
        config["model"],
        config["global_batch_size"] // ranks,
        steps,
        config["device"],
        Request("helpers.ddp", ranks, config),
    )


def main_backend(chapter: str, plan, device: str) -> tuple[str | None, list[Item]]:
    """``launch.main_backend`` of a run plan, as the notebooks call it: the backend every section of the
    chapter uses, or None and an item carrying the launcher's refusal."""
    try:
        return launch_main_backend(plan), []
    except ValueError as error:
        return None, [Item(chapter, "every section", None, None, 0, device, refusal=str(error))]


def chapter_three(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "03_ddp_nccl_vs_gloo", p["device"]
    world_sizes = p["world_sizes"]
    plan = run_plan(p["backends"], device, world_sizes, p["gpus"], machine)
    backend, refused = main_backend(chapter, plan, device)
    if refused:
        return refused
    common = {
        "backend": backend,
        "device": device,
        "train_samples": p["train_samples"],
        "test_samples": p["test_samples"],
        "epochs": p["epochs"],
        "global_batch_size": p["global_batch_size"],
        "warmup_steps": p["warmup_steps"],  # new: part of every ddp_run record's config
        "gpus": p["gpus"],
    }
    sweeps = ddp.chapter_sweeps(
        p["models_to_time"], plan, p["bucket_caps_mb"], p["compressions"], p["parity_seeds"], p["launches"]
    )  # {section: {"variations": [...], "launches": n}}; "traffic" is gone (3.3 reads launch 0 of these)
    items = []
    for section, sweep in sweeps.items():  # scaling first: its items carry the most repeats, and
        for variation in sweep["variations"]:  # items_of keeps the first of identical configurations
            settings = {**common, **variation}
            ranks = settings.pop("ranks")
            label = ", ".join(f"{k} {v}" for k, v in variation.items() if k != "model")
            item = _ddp_item(chapter, f"DDP {section}: {settings['model']}, {label}", settings, ranks)
            item.repeats = sweep["launches"]  # ddp.launch_order lists the same launches one by one
            items.append(item)
    size = int(plan["ranks"].max())
    if size > 1:  # 3.6: chapter 4's α-β fit (timemodel.stored_all_reduce_alpha_beta); before chapter 4 runs,
        config = collective_config(  # a two-rank all-reduce benchmark of the chapter's backend
            "benchmark", backend=backend, device=device, operations=["all_reduce"], chunks=[1]
        )
        items.append(
            Item(
                chapter,
                f"all-reduce benchmark, {backend} (reused from chapter 4 if it ran)",
                None,
                None,
                0,
                device,
                Request(COLLECTIVES, 2, config),
                fixed_seconds=30,
            )
        )
    lightning_size, skipped = (
        lightning_ddp.planned_ranks(world_sizes, common, machine) if p["lightning"] else (None, [])
    )
    items += [Item(chapter, "Lightning", None, None, 0, device, skipped=reason) for reason in skipped]
    for model in p["lightning_models"] if lightning_size else []:  # was models_to_time
        item = _ddp_item(
            chapter,
            f"Lightning, {model}, {lightning_size} rank(s)",
            {**common, "model": model},
            lightning_size,
        )
        item.request = Request(lightning_ddp.MODULE, lightning_size, item.request.config)
        item.repeats = p["launches"]  # compare() launches by hand and Lightning `launches` times each
        items.append(item)
    single = "cuda" if device == "cuda" else "cpu"
    items += [  # ddp_results.dataparallel_against_ddp: `launches` timings, each warmup_steps + 5 steps
        Item(
            chapter,
            f"DataParallel, {m}, {size} replicas",
            m,
            p["global_batch_size"],
            p["warmup_steps"] + 5,
            single,
            repeats=p["launches"],
        )
        for m in p["models_to_time"]
    ]
    return items


def chapter_four(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "04_collectives", p["device"]
    check_benchmark_world_sizes(p["benchmark_world_sizes"])  # the link is fitted on two ranks
    settings = {"device": device, **({"gpus": p["gpus"]} if p["gpus"] is not None else {})}
    sizes = sorted({p["semantics_world_size"], *p["verify_world_sizes"], *p["benchmark_world_sizes"]})
    backend, refused = main_backend(
        chapter, run_plan(p["backends"], device, sizes, p["gpus"], machine), device
    )
    if refused:
        return refused

    def task(what: str, name: str, ranks: int, fixed: float = 0.0, **extra) -> Item:
        config = collective_config(name, **{"backend": backend, **settings, **extra})
        return Item(
            chapter, what, None, None, 0, device, Request(COLLECTIVES, ranks, config), fixed_seconds=fixed
        )

    items = [
        task("semantics", "semantics", p["semantics_world_size"]),
        task(
            "deadlock demonstration",
            "deadlock",
            2,
            p["deadlock_timeout_seconds"],
            timeout_seconds=p["deadlock_timeout_seconds"],
        ),
    ]
    items += [task(f"exactness, {k} ranks", "verify", k) for k in p["verify_world_sizes"]]
    for name in ("gloo", "nccl"):  # runs.probe_support: two ranks, or the one a single GPU allows NCCL
        for where in ("cpu", "cuda"):
            probe = run_plan([name], where, [2, 1], p["gpus"], machine).query("runs")
            if len(probe):
                ranks = int(probe["ranks"].iloc[0])
                items.append(
                    task(f"support probe, {name} on {where}", "semantics", ranks, backend=name, device=where)
                )
    bench = run_plan(p["backends"], device, p["benchmark_world_sizes"], p["gpus"], machine)
    for row in bench.itertuples():
        config = collective_config(
            "benchmark",
            backend=row.backend,
            **settings,
            sizes_bytes=p["message_bytes"],
            chunks=p["broadcast_chunks"],
            iterations=p["iterations"],
            time_budget_seconds=p["benchmark_budget_seconds"] or 0.75 * 600,
        )
        item = Item(
            chapter,
            f"benchmark, {row.backend}, {row.ranks} ranks",
            None,
            None,
            0,
            device,
            Request(COLLECTIVES, row.ranks, config),
            fixed_seconds=benchmark_seconds(config, row.ranks),
        )
        if not row.runs:  # the chapter lists what its plan cannot run, with the reason
            item.request, item.skipped = None, row.reason
        items.append(item)
    items += [  # each stops at its target loss: stale_steps is an upper bound
        Item(chapter, f"staleness {tau}, seed {seed}", p["stale_model"], p["stale_batch_size"],
             p["stale_steps"], "cpu")
        for seed in p["stale_seeds"]
        for tau in p["stalenesses"]
    ]  # fmt: skip
    return items


def chapter_five(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "05_cost_model", p["device"]
    backend = run_plan(p["backends"], device, [2], p["gpus"], machine).query("runs")["backend"]
    items = [
        Item(
            chapter,
            f"calibration, {m}, batch {b}, run {r + 1}",
            m,
            b,
            p["timed_steps"] + WARMUP_STEPS,
            device,
        )
        for m in p["models_to_model"]
        for b in p["calibration_batch_sizes"]
        for r in range(p["calibration_repeats"])
    ]
    if backend.empty:
        items.append(
            Item(chapter, "all-reduce benchmark", None, None, 0, device, refusal="no backend runs 2 ranks")
        )
        return items
    config = collective_config(
        "benchmark", backend=backend.iloc[0], device=device, operations=["all_reduce"], chunks=[1]
    )
    items.append(
        Item(
            chapter,
            f"all-reduce benchmark, {backend.iloc[0]} (reused from chapter 4 if it ran)",
            None,
            None,
            0,
            device,
            Request(COLLECTIVES, 2, config),
            fixed_seconds=30,
        )
    )
    return items


def chapter_six(p: dict, machine: Machine) -> list[Item]:
    chapter, device, launches = "06_scaling", p["device"], p["launches"]
    backend, items = main_backend(
        chapter, run_plan(p["backends"], device, p["world_sizes"], p["gpus"], machine), device
    )
    variations = scaling.scaling_variations(p["world_sizes"], p["global_batch_size"], p["per_rank_batch"])
    for model in p["scaling_models"] if backend else []:  # each launched `launches` times, alternating
        for variation in variations:
            ranks, batch = variation["ranks"], variation["global_batch_size"]
            config = sharding_config(backend=backend, device=device, gpus=p["gpus"], model=model,
                                     strategy="ddp", global_batch_size=batch, steps=p["scaling_steps"],
                                     train_samples=p["train_samples"])  # fmt: skip
            what = f"{variation['scaling']} scaling, {model}, {ranks} rank(s)"
            items.append(Item(chapter, what, model, batch // ranks, p["scaling_steps"], device,
                              Request(SHARDING, ranks, config), repeats=launches))  # fmt: skip
    k = max(p["world_sizes"])
    for optimizer in ("sgd", "adam"):  # exact, so one launch each
        config = sharding_config(
            model="LinearNet",
            global_batch_size=p["global_batch_size"],
            steps=p["scaling_steps"],
            train_samples=p["train_samples"],
            optimizer=optimizer,
        )
        what = f"accumulation parity, {optimizer}"
        items.append(Item(chapter, what, "LinearNet", p["global_batch_size"] // k, p["scaling_steps"], "cpu",
                          Request(SHARDING, k, config)))  # fmt: skip
    single = "cuda" if device == "cuda" else "cpu"
    items += [Item(chapter, f"accumulation, {m}, {n} micro-batches", m, p["global_batch_size"],
                   p["scaling_steps"], single, repeats=launches)
              for m in p["scaling_models"] for n in sorted({1, *p["world_sizes"]})]  # fmt: skip
    seeds, rules = len(p["critical_seeds"]), len(p["learning_rate_rules"])
    smallest = min(p["critical_batch_sizes"])
    for batch in p["critical_batch_sizes"]:  # the smallest batch has one learning rate: one run per seed
        runs = seeds if batch == smallest else seeds * rules
        items.append(Item(chapter, f"steps to loss {p['target_loss']}, batch {batch}, {runs} runs",
                          p["critical_model"], batch, p["max_steps"], "cpu", repeats=runs))  # fmt: skip
    steps = max(p["noise_checkpoints"]) + p["noise_samples"] * len(p["noise_checkpoints"])
    items.append(Item(chapter, "noise scale", p["critical_model"], p["noise_batch"], steps, "cpu"))
    where = placement(p["backends"], device, p["sharding_world_size"], p["gpus"], machine)
    ranks = p["sharding_world_size"]
    for model in p["sharding_models"]:
        for stage in p["zero_stages"]:
            strategy = next(name for name, value in STRATEGIES.items() if value == stage)
            config = sharding_config(**where["settings"], model=model, strategy=strategy,
                                     global_batch_size=p["global_batch_size"], steps=p["scaling_steps"],
                                     train_samples=p["train_samples"], gpus=p["gpus"])  # fmt: skip
            items.append(Item(chapter, f"sharded, {model}, {strategy}, {ranks} ranks", model,
                              p["global_batch_size"] // ranks, p["scaling_steps"], config["device"],
                              Request(SHARDING, ranks, config), stage=stage, repeats=launches))  # fmt: skip
    return items


# chapter 7 on this 2-core machine: counting a held-out model 1.6-2.7 s; one batch timed (8 steps) and a
# DDP launch's steps of the small models well under a second each: rounded up
COUNT_SECONDS, TIMING_SECONDS = 5.0, 2.0


def chapter_seven(p: dict, machine: Machine) -> list[Item]:
    """Counting and timing each held-out model (single-process work), then its DDP launches: each rank
    count ``launches`` times, through ``helpers.advise.validate``'s worker with the launcher's rules."""

    chapter, device = "07_your_model", _device(p, machine)
    items = []
    for spec in p["held_out_specs"]:
        name = spec.rsplit(":", 1)[-1]
        timings = len({p["global_batch"] // k for k in p["world_sizes"]}) * p["calibration_repeats"]
        items.append(Item(chapter, f"count and time {name}", None, None, 0, device,
                          fixed_seconds=COUNT_SECONDS + TIMING_SECONDS * timings))  # fmt: skip
        for k in p["world_sizes"]:
            config = {"spec": spec, "global_batch_size": p["global_batch"], "backend": p["backend"],
                      "device": device, "input_shape": [1, 12_000], "dtype": "float32", "optimizer": "adam",
                      "bucket_cap_mb": 25, "warmup_steps": WARMUP_STEPS, "timed_steps": p["timed_steps"],
                      "timeout_seconds": 60}  # fmt: skip
            items.append(Item(chapter, f"DDP of {name}, {k} rank(s)", None, p["global_batch"] // k, 0, device,
                              Request(ADVISE, k, config), fixed_seconds=TIMING_SECONDS,
                              repeats=p["launches"]))  # fmt: skip
    return items


CHAPTERS = {
    "01_single_device": chapter_one,
    "02_dataparallel_internals": chapter_two,
    "03_ddp_nccl_vs_gloo": chapter_three,
    "04_collectives": chapter_four,
    "05_cost_model": chapter_five,
    "06_scaling": chapter_six,
    "07_your_model": chapter_seven,
}


def items_of(chapter: str, parameters: dict, machine: Machine) -> list[Item]:
    """Every item of ``chapter`` with these parameters on ``machine``, checked and timed."""
    if chapter not in CHAPTERS:
        raise ValueError(f"no plan for chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    items, seen = [], set()
    for item in CHAPTERS[chapter](parameters, machine):
        if item.request is not None:  # the store measures a configuration once; later sections reuse it
            key = (item.request.module, item.request.world_size, canonical_json(item.request.config))
            if key in seen:
                continue
            seen.add(key)
        check(item, machine)
        items.append(item)
    return items


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
