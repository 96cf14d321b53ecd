"""DistributedDataParallel training worker, one process per rank, started by torchrun (chapter 3).

``python -m torch.distributed.run --nproc-per-node K -m helpers.ddp --config C --output DIR`` is how
practitioners run it; ``helpers.launch`` does the same through ``helpers.torchrun`` (torchrun, ended
without Python's teardown) with a free rendezvous port, a wall-clock limit and clean-up. Each rank reads
its settings from the JSON file ``C`` and writes ``DIR/rank<r>.json`` (atomically) with its traffic and,
on rank 0, the training history. A rank that fails writes ``DIR/rank<r>.error`` first, so that the
launcher can name it.

A DDP communication hook records the bytes of every gradient bucket that is all-reduced (for float32
gradients their sum per step is exactly the model's parameter bytes) and how long each bucket's
all-reduce takes (``TrafficRecorder``). ``GlobalBatchSampler`` hands each rank its slice of the batches one
process would take, so k ranks and one process follow the same loss trajectory, step by step, up to float
rounding. Every step is timed; the first ``warmup_steps`` of a launch are its warm-up, the rest its timed
steps. A chapter compares configurations across several launches (``run_sweeps``), never within one.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path
from typing import NoReturn

import pandas as pd
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from helpers.data import SPLIT_SIZES, load_fsdd, take
from helpers.dataparallel import SAMPLE_BYTES
from helpers.launch import launch, main_backend
from helpers.models import build_model, parameter_bytes
from helpers.results import measured_in_rounds
from helpers.stats import plural, spread
from helpers.train import evaluate, make_optimizer, to_device
from helpers.worker import prepare_rank, process_group, worker_main, write_rank_result

COMPRESSION_HOOKS = {
    None: default_hooks.allreduce_hook,
    "fp16": default_hooks.fp16_compress_hook,
    "bf16": default_hooks.bf16_compress_hook,
}


class TrafficRecorder:
    """State of the recording hook: per training step, the bytes each all-reduced bucket travels as and
    the seconds its all-reduce takes.

    With ``compression`` ("fp16" or "bf16") the bucket travels as 2-byte floats, and that is what is
    recorded. A bucket's seconds run from the hook's call (DDP hands over the bucket: its gradients are
    computed) to the moment its averaged gradient is ready. On the CPU that is wall time until the
    all-reduce's future completes. On a GPU (``cuda``) the future can complete before the kernels do, so
    two CUDA events on the bucket's device are timed instead: one recorded on the current stream when the
    hook is called, one on the stream the future's callback runs on, which waits for the all-reduce's
    kernels (where a backend's future does not, that stream's earlier work counts too: an upper bound);
    ``settle`` reads them once the step has been synchronised. Either way the time includes waiting for
    the other ranks to hand over the same bucket and, with compression, the conversions to 2-byte floats
    and back. ``marks`` keeps each bucket's hand-over and ready times (seconds, on one clock per step), so
    that a step's all-reduce can be read as the time some bucket is in flight (``in_flight_seconds``).
    """

    def __init__(self, compression: str | None = None, cuda: bool = False) -> None:
        if compression not in COMPRESSION_HOOKS:
            raise ValueError(f"compression must be None, 'fp16' or 'bf16', not {compression!r}")
        self.compression, self.cuda = compression, cuda
        self.step = -1
        self.buckets: list[list[int]] = []
        self.seconds: list[list[float | None]] = []
        self.marks: list[list[tuple[float, float] | None]] = []
        self._pending: list[tuple] = []

    def next_step(self) -> None:
        """Called before each backward pass."""
        self.step += 1
        self.buckets.append([])
        self.seconds.append([])
        self.marks.append([])

    def start(self, nbytes: int, device: torch.device | None = None) -> tuple[int, int, object]:
        """A bucket of ``nbytes`` on ``device`` is handed over: its place (step, index) and its clock."""
        index = len(self.buckets[self.step])
        self.buckets[self.step].append(nbytes)
        self.seconds[self.step].append(None)
        self.marks[self.step].append(None)
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(device))
            return self.step, index, (event, device)
        return self.step, index, time.perf_counter()

    def finish(self, step: int, index: int, clock) -> None:
        """The bucket's average is ready (called from the all-reduce future's callback, which may run in
        another thread: the end event goes on that thread's current stream of the bucket's device)."""
        if self.cuda:
            start, device = clock
            end = torch.cuda.Event(enable_timing=True)
            end.record(torch.cuda.current_stream(device))
            self._pending.append((step, index, start, end))
        else:
            now = time.perf_counter()
            self.seconds[step][index] = now - clock
            self.marks[step][index] = (clock, now)

    def settle(self) -> None:
        """Turn recorded CUDA events into seconds; call after the device has been synchronised. Marks are
        measured from the step's first hand-over."""
        firsts = {}
        for step, index, start, end in self._pending:
            self.seconds[step][index] = start.elapsed_time(end) / 1000
            first = firsts.setdefault(step, start)
            self.marks[step][index] = (first.elapsed_time(start) / 1000, first.elapsed_time(end) / 1000)
        self._pending.clear()


def gradient_sizes_in_backward_order(model: str) -> list[int]:
    """Bytes of each parameter's gradient, in the order backward produces them (the reverse of the
    parameters'): the order DDP fills its buckets in."""
    sizes = [p.numel() * p.element_size() for p in build_model(model).parameters() if p.requires_grad]
    return sizes[::-1]


def ddp_bucket_bytes(
    model: str | list[int], bucket_cap_mb: float = 25, compression: str | None = None
) -> list[float]:
    """Bytes of each gradient bucket DDP all-reduces per step, in the order backward fills them, for one
    of the book's models by name or for any model given by its gradient sizes in backward order
    (``gradient_sizes_in_backward_order``; ``helpers.advise`` passes a reader's model so).

    DDP (after its first step rebuilds buckets in gradient-ready order, roughly the reverse of the
    parameter order) adds parameters to a bucket until it holds at least ``bucket_cap_mb`` MiB, then
    starts the next; a parameter larger than the cap closes its bucket alone. (This is DDP with
    ``bucket_cap_mb`` given, as the book's workers give it; left at its default, None, DDP also caps its
    first bucket at 1 MiB.) With ``compression``
    ("fp16"/"bf16") each 4-byte float travels as 2 bytes. This reproduces chapter 3's recorded bucket
    counts (LinearNet 1 and 2, ConvNet 1 and 3 buckets at 25 and 0.25 MiB).
    """
    cap = bucket_cap_mb * 2**20
    buckets, current = [], 0
    sizes = gradient_sizes_in_backward_order(model) if isinstance(model, str) else model
    for size in sizes:
        current += size
        if current >= cap:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    factor = 0.5 if compression else 1.0
    return [size * factor for size in buckets]


def recording_allreduce_hook(state: TrafficRecorder, bucket):  # DDP rejects string annotations here
    """Record the bucket's bytes and time its all-reduce (average), done by DDP's own hook."""
    buffer = bucket.buffer()
    element_bytes = 2 if state.compression else buffer.element_size()
    step, index, clock = state.start(buffer.numel() * element_bytes, buffer.device)

    def finished(future):
        state.finish(step, index, clock)
        return future.value()

    return COMPRESSION_HOOKS[state.compression](None, bucket).then(finished)


class GlobalBatchSampler:
    """Rank r's share of each global batch of a seeded shuffle, as a DataLoader ``batch_sampler``.

    Epoch e shuffles the clips with seed + e; global batch s is that permutation's clips
    [s·B, (s+1)·B), and rank r takes its r-th slice of B/k. Together the k ranks see exactly the batches
    that one process with batch B sees, in the same order, and DDP's average of their mean gradients is
    that process's mean gradient. A last, partial global batch is dropped: every rank takes the same
    number of steps. (``DistributedSampler`` instead deals clips round-robin from the permutation, so its
    global batches differ from one process's.)
    """

    def __init__(self, samples: int, global_batch: int, world_size: int, rank: int, seed: int) -> None:
        if global_batch % world_size or global_batch > samples:
            raise ValueError(
                f"a global batch of {global_batch} must divide over {world_size} ranks "
                f"and fit in {samples} clips"
            )
        self.samples, self.global_batch, self.seed, self.epoch = samples, global_batch, seed, 0
        self.per_rank = global_batch // world_size
        self.offset = rank * self.per_rank

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.samples // self.global_batch

    def __iter__(self):
        order = torch.randperm(self.samples, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        for start in range(0, len(self) * self.global_batch, self.global_batch):
            yield order[start + self.offset : start + self.offset + self.per_rank].tolist()


def ring_bytes_per_rank(gradient_bytes: int, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``gradient_bytes``: 2(k-1)/k of them."""
    return 2 * (world_size - 1) / world_size * gradient_bytes


def train_rank(config: dict, output: Path) -> None:
    """Train with DDP on this rank and write ``rank<r>.json``: per epoch its wall time between barriers,
    every step's seconds, the global batch loss of every step, each bucket's bytes and all-reduce seconds,
    and (rank 0, after the last epoch) test and training figures."""
    rank, world_size, device = prepare_rank(config)
    with process_group(config, device, output):
        if config.get("fail_rank") == rank:
            raise RuntimeError(f"rank {rank} fails on purpose (fail_rank={rank})")
        fsdd = load_fsdd(download=False)
        train_set = take(fsdd.split("train"), config.get("train_samples"), config["seed"])
        test_set = to_device(take(fsdd.split("test"), config.get("test_samples"), config["seed"]), device)
        sampler = GlobalBatchSampler(
            len(train_set), config["global_batch_size"], world_size, rank, config["seed"]
        )
        loader = DataLoader(train_set, batch_sampler=sampler)
        torch.manual_seed(config["seed"])
        model = build_model(config["model"]).to(device)
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=config["bucket_cap_mb"],
        )
        traffic = TrafficRecorder(config.get("compression"), cuda=device.type == "cuda")
        ddp.register_comm_hook(traffic, recording_allreduce_hook)
        optimizer = make_optimizer(config["optimizer"], ddp.parameters(), config["lr"])
        history = []
        for epoch in range(config["epochs"]):
            sampler.set_epoch(epoch)
            dist.barrier()
            started = time.perf_counter()
            step_seconds, losses, last = [], [], started
            for inputs, targets in loader:
                inputs, targets = inputs.to(device), targets.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(ddp(inputs), targets)
                traffic.next_step()
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                now = time.perf_counter()
                step_seconds.append(now - last)  # the data's loading included, as in the epoch
                traffic.settle()
                last = now
            dist.barrier()
            seconds = time.perf_counter() - started
            global_losses = torch.stack(losses)  # each rank's mean over its slice; equal slices:
            dist.all_reduce(global_losses)  # the global batch's mean is the mean of the ranks' means
            global_losses = (global_losses / world_size).tolist()
            row = {
                "epoch": epoch + 1,
                "train_loss": sum(global_losses) / len(global_losses),
                "epoch_seconds": seconds,
                "step_seconds": step_seconds,
                "step_losses": global_losses,
            }
            history.append(row)
        if rank == 0:  # once, after training: an evaluation per epoch would lengthen every launch
            history[-1]["test_loss"], history[-1]["test_accuracy"] = evaluate(model, test_set)
            _, history[-1]["train_accuracy"] = evaluate(model, to_device(train_set, device))
        write_rank_result(
            output, rank, world_size, config, device,
            {"history": history, "bucket_bytes_per_step": traffic.buckets,
             "bucket_seconds_per_step": traffic.seconds, "bucket_marks_per_step": traffic.marks,
             "gradient_bytes": parameter_bytes(model)},
        )  # fmt: skip


def main() -> NoReturn:
    """Entry point for torchrun: ``-m helpers.ddp --config CONFIG.json --output DIR``."""
    return worker_main(train_rank, main.__doc__)


def ddp_config(**settings) -> dict:
    """A worker configuration: the defaults of chapter 3, overridden by ``settings``.

    ``warmup_steps`` is not the worker's business: it is how many of a launch's first steps its summary
    leaves untimed (``summarize_run``), and part of the record's configuration so that it is never mixed up.
    """
    config = {
        "backend": "gloo", "device": "cpu", "model": "LinearNet", "seed": 0, "train_samples": None,
        "test_samples": None, "global_batch_size": 50, "epochs": 2, "optimizer": "adam", "lr": 1e-3,
        "bucket_cap_mb": 25, "compression": None, "timeout_seconds": 60, "tf32": False, "warmup_steps": 5,
    }  # fmt: skip
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown DDP setting(s): {', '.join(unknown)}")
    return {**config, **settings}


def planned_steps(config: dict, training_clips: int = SPLIT_SIZES["train"]) -> int:
    """Training steps of a launch with ``config``: whole global batches per epoch, times the epochs."""
    clips = config["train_samples"] or training_clips
    return config["epochs"] * (clips // config["global_batch_size"])


def check_timed_steps(config: dict) -> None:
    """ValueError unless a launch with ``config`` times at least one step after its warm-up."""
    steps = planned_steps(config)
    if not 0 <= config["warmup_steps"] < steps:
        raise ValueError(
            f"warmup_steps {config['warmup_steps']} leaves no timed step of the {steps} steps that "
            f"{config['epochs']} {plural(config['epochs'], 'epoch')} of "
            f"{config['train_samples'] or SPLIT_SIZES['train']} clips "
            f"in global batches of {config['global_batch_size']} take"
        )


def in_flight_seconds(marks: list[tuple[float, float]]) -> float:
    """How long at least one of these (hand-over, ready) intervals was open: their union's length. A
    step's buckets are handed over one by one as backward produces them, so the span from the first to the
    last would count the backward computation between them as all-reduce."""
    total, reached = 0.0, -math.inf
    for start, end in sorted(marks):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def summarize_run(results: list[dict], warmup_steps: int = 0) -> dict:
    """What a chapter reads of one launch: the steps after the first ``warmup_steps`` (the timed ones),
    the all-reduce's seconds of each timed step, the last epoch's time, losses, accuracy and traffic.

    A timed step's all-reduce is the time at least one of its buckets is in flight, from hand-over to
    ready (``in_flight_seconds``: buckets that overlap counted once, the gaps between them not at all),
    the shortest over the ranks: a rank that hands over early waits for the last one, whose time is the
    all-reduce's own (``allreduce_seconds_all``). What of it no computation hides is the part after the
    last hand-over, when backward has produced every gradient (``exposed_allreduce_seconds_all``).
    ``steps`` counts every step of every epoch (``steps_per_epoch`` one epoch's).
    """
    first = results[0]
    last = first["history"][-1]
    every_step = [seconds for row in first["history"] for seconds in row.get("step_seconds", [])]
    steps = len(first["bucket_bytes_per_step"])
    all_reduced = sum(sum(step) for step in first["bucket_bytes_per_step"])
    marks = [result.get("bucket_marks_per_step") for result in results]
    allreduce, exposed = [], []
    if every_step and all(marks):
        for step in range(warmup_steps, steps):
            per_rank = [ranks[step] for ranks in marks if all(ranks[step])]
            if per_rank:
                allreduce.append(min(in_flight_seconds(r) for r in per_rank))
                exposed.append(min(max(e for _, e in r) - max(s for s, _ in r) for r in per_rank))
    return {
        "world_size": first["world_size"],
        "epoch_seconds": last["epoch_seconds"],
        "step_seconds_all": every_step[warmup_steps:],
        "allreduce_seconds_all": allreduce,
        "exposed_allreduce_seconds_all": exposed,
        "warmup_steps": warmup_steps,
        "steps_per_epoch": steps // len(first["history"]),
        "method": f"wall time of each step on rank 0 after the first {warmup_steps} (warm-up), the data's "
        f"loading included; the epoch's: epoch {last['epoch']} between barriers",
        "train_loss": last["train_loss"],
        "train_accuracy": last.get("train_accuracy"),
        "test_accuracy": last["test_accuracy"],
        "history": first["history"],
        "steps": steps,
        "bucket_bytes": first["bucket_bytes_per_step"][-1],
        "all_reduced_bytes_per_step": all_reduced / steps,
        "buckets_per_step": len(first["bucket_bytes_per_step"][-1]),
        "ring_bytes_sent_per_rank_per_step": ring_bytes_per_rank(all_reduced / steps, first["world_size"]),
        "gradient_bytes": first["gradient_bytes"],
        "threads_per_rank": first["threads"],
    }


def stored_ddp_run(
    store, world_size: int, time_limit_seconds: float = 900, launch_number: int | str = 0, **settings
) -> dict:
    """Launch ``world_size`` ranks through the results store (a finished identical run is reused).

    ``launch_number`` numbers independent launches of the same settings: each is a record of its own, so
    that a comparison rests on several start-ups, placements and neighbours, not on one
    (``stats.launch_speedup``).
    """
    config = {"kind": "ddp_run", "world_size": world_size, "launch": launch_number, **ddp_config(**settings)}
    check_timed_steps(config)
    worker = {k: v for k, v in config.items() if k not in ("kind", "world_size", "launch")}
    return store.measure(
        config,
        lambda: summarize_run(
            launch(worker, world_size, time_limit_seconds=time_limit_seconds), config["warmup_steps"]
        ),
    )


def traffic_per_epoch(
    model_names: list[str], batch_sizes: list[int], train_clips: int, world_sizes: list[int]
) -> pd.DataFrame:
    """The seed's table, exactly: per epoch the input bytes stay, the all-reduced bytes fall with the steps.

    One all-reduce of all gradient bytes per step (float32, no compression); with k of ``world_sizes``
    ranks, each rank sends its ring share of it, 2(k-1)/k of the bytes.
    """
    rows = []
    for name in model_names:
        gradient_bytes = parameter_bytes(build_model(name))
        for batch in batch_sizes:
            steps = -(-train_clips // batch)
            rows.append(
                {
                    "model": name,
                    "batch size": batch,
                    "steps": steps,
                    "input bytes (all ranks)": train_clips * SAMPLE_BYTES,
                    "all-reduced bytes": steps * gradient_bytes,
                    **{
                        f"ring bytes sent per rank, k={k}": round(
                            steps * ring_bytes_per_rank(gradient_bytes, k)
                        )
                        for k in world_sizes
                    },
                }
            )
    return pd.DataFrame(rows)


def runs_frame(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """One row per launch: the varied settings next to the summary (without the per-epoch history), and
    the median, min and max of the timed epoch's steps."""
    rows = []
    for settings, record in runs:
        result = record["result"]
        row = {**settings, **{k: v for k, v in result.items() if k not in ("history", "step_seconds_all")}}
        if result.get("step_seconds_all"):
            timing = spread(result["step_seconds_all"])
            row.update(step_median=timing.median, step_min=timing.low, step_max=timing.high)
        rows.append(row)
    return pd.DataFrame(rows)


def sweep(
    store, base: dict, variations: list[dict], description: str = "DDP runs", launches: int = 1
) -> list[tuple[dict, dict]]:
    """``stored_ddp_run`` for each of ``variations`` (settings over ``base``; ``ranks`` picks the world
    size), ``launches`` times each. The launches alternate — every variation once, then every variation
    again — so that a slow spell of the machine falls on all of them, not on one. Returns (variation with
    its ``launch`` number, record) pairs, which ``runs_frame`` tabulates, ``step_times`` unrolls into steps
    and ``launch_steps`` groups by launch."""
    sweeps = {"runs": {"variations": variations, "launches": launches}}
    return run_sweeps(store, base, sweeps, description)["runs"]


def median_of_medians(launches: list[list[float]]) -> float:
    """The median over launches of each launch's median: what ``stats.launch_speedup`` compares."""
    return statistics.median(statistics.median(values) for values in launches)


def launch_steps(runs: list[tuple[dict, dict]], **match) -> list[list[float]]:
    """The timed steps of every launch among ``runs`` whose variation has the settings in ``match``, one
    list per launch (what ``stats.launch_speedup`` compares)."""
    return [record["result"]["step_seconds_all"] for _, record in matching(runs, **match)]


def matching(runs: list[tuple[dict, dict]], **match) -> list[tuple[dict, dict]]:
    """The (variation, record) pairs of ``runs`` whose variation has the settings in ``match``."""
    return [
        (variation, record)
        for variation, record in runs
        if all(variation.get(key) == value for key, value in match.items())
    ]


PARITY_MODEL = "ConvNet"  # the model that learns in a few steps: accuracy and rounding are checked on it


def chapter_sweeps(
    models, plan: pd.DataFrame, bucket_caps_mb, compressions, parity_seeds, launches: int = 3
) -> dict[str, dict]:
    """Chapter 3's launches, section by section: ``{section: {"variations": [...], "launches": n}}``, each
    variation a set of ``stored_ddp_run`` settings (with ``ranks``) over the chapter's common ones.

    Timing comparisons repeat every variation ``launches`` times: ``scaling`` (every model on every backend
    and rank count the ``launch.run_plan`` lets run; one rank on the main backend, the one-process baseline
    every backend's ranks are held against, and on a backend that can start no more than one, so that on one
    GPU, where NCCL needs a GPU per rank, NCCL's one rank beside Gloo's is measured), ``buckets`` (ConvNet,
    each cap: its gradients split into several buckets) and ``compression`` (LinearNet, each hook: its
    all-reduce is the large one). The checks of what is learned launch each seed once: ``parity`` (ConvNet,
    each seed, on one rank and the most) and ``rounding`` (ConvNet, each seed, each compression, on the most).
    All but ``scaling`` run at the plan's largest rank count. The notebook runs these (``run_sweeps``), and
    ``helpers.plan`` validates and times the same launches (``launch_order``) before anything starts.
    """
    size = int(plan["ranks"].max())
    one = main_backend(plan)  # refuses, with the reasons, when no backend runs the most ranks
    runnable = plan.query("runs")
    most = runnable.groupby("backend")["ranks"].max()
    pairs = [
        (b, int(k))
        for b, k in runnable[["backend", "ranks"]].itertuples(index=False)
        if k > 1 or b == one or most[b] == 1
    ]
    scaling = [{"model": m, "backend": b, "ranks": k} for m in models for b, k in pairs]
    buckets = [{"model": "ConvNet", "bucket_cap_mb": cap, "ranks": size} for cap in bucket_caps_mb]
    compression = [{"model": "LinearNet", "compression": c, "ranks": size} for c in compressions]
    parity = [{"model": PARITY_MODEL, "seed": s, "ranks": k} for s in parity_seeds for k in (1, size)]
    rounding = [
        {"model": PARITY_MODEL, "seed": s, "compression": c, "ranks": size}
        for s in parity_seeds
        for c in compressions
        if c is not None
    ]
    return {
        "scaling": {"variations": scaling, "launches": launches},
        "buckets": {"variations": buckets, "launches": launches},
        "compression": {"variations": compression, "launches": launches},
        "parity": {"variations": parity, "launches": 1},
        "rounding": {"variations": rounding, "launches": 1},
    }


def launch_order(sweeps: dict[str, dict]) -> list[tuple[str, dict, int]]:
    """Every launch of ``sweeps`` as (section, variation, launch number), in the order ``run_sweeps`` makes
    them: launch 0 of every variation of every section, then launch 1 of the sections that repeat, and so
    on, so that a slow spell of the machine falls on every configuration, not on one. (The store measures
    a launch once: a variation that another section already launched with the same number is reused.)"""
    rounds = max((sweep["launches"] for sweep in sweeps.values()), default=0)
    return [
        (section, variation, number)
        for number in range(rounds)
        for section, sweep in sweeps.items()
        if number < sweep["launches"]
        for variation in sweep["variations"]
    ]


def run_sweeps(
    store, base: dict, sweeps: dict[str, dict], description: str = "DDP launches", alongside=None
) -> dict[str, list[tuple[dict, dict]]]:
    """Every launch of ``sweeps`` (``chapter_sweeps``) over the ``base`` settings, in ``launch_order``;
    per section its (variation with its ``launch`` number, record) pairs. ``alongside(n)``, when given,
    runs at the end of round n: what is compared with launch n of these configurations (DataParallel
    timed in-process, a Lightning launch) is measured in the same round, minutes from it, not after all.
    Each round is one ``store.together``: a round half reused from another day is measured again."""
    order = launch_order(sweeps)

    def launch(entry: tuple[str, dict, int]) -> dict:
        _, variation, number = entry
        settings = {**base, **variation}
        return stored_ddp_run(store, settings.pop("ranks"), launch_number=number, **settings)

    records = measured_in_rounds(store, order, lambda entry: entry[2], launch, description, alongside)
    runs: dict[str, list[tuple[dict, dict]]] = {section: [] for section in sweeps}
    for (section, variation, number), record in zip(order, records, strict=True):
        runs[section].append(({**variation, "launch": number}, record))
    return runs


def step_times(records: list[tuple[dict, dict]]) -> pd.DataFrame:
    """Every timed step of DDP runs, one row each, with the run's varied settings: for spread figures."""
    return pd.DataFrame(
        [
            {**settings, "repeat": repeat, "step_seconds": seconds}
            for settings, record in records
            for repeat, seconds in enumerate(record["result"]["step_seconds_all"])
        ]
    )


def loss_parity(one: dict, many: dict) -> dict:
    """How far k ranks' per-step global losses are from one process's (same seed, global batch, data):
    the largest absolute and relative difference over every step of every epoch."""
    ours = [loss for row in many["result"]["history"] for loss in row["step_losses"]]
    reference = [loss for row in one["result"]["history"] for loss in row["step_losses"]]
    if len(ours) != len(reference):
        raise ValueError(f"{len(ours)} steps against {len(reference)}: not the same run")
    gaps = [abs(a - b) for a, b in zip(ours, reference, strict=True)]
    return {
        "steps": len(gaps),
        "largest_abs_difference": max(gaps),
        "largest_rel_difference": max(g / abs(b) for g, b in zip(gaps, reference, strict=True)),
    }


if __name__ == "__main__":
    sys.exit(main())
