"""DistributedDataParallel training worker, one process per rank, started by torchrun (chapter 3).

``python -m torch.distributed.run --nproc-per-node K -m helpers.ddp --config C --output DIR`` is how
practitioners run it; ``helpers.launch`` does exactly that with a free rendezvous port, a wall-clock
limit and clean-up. Each rank reads its settings from the JSON file ``C`` and writes
``DIR/rank<r>.json`` (atomically) with its traffic and, on rank 0, the training history. A rank that
fails writes ``DIR/rank<r>.error`` first, so that the launcher can name it.

A DDP communication hook records the bytes of every gradient bucket that is all-reduced; for float32
gradients their sum per step is exactly the model's parameter bytes. ``GlobalBatchSampler`` hands each rank
its slice of the batches one process would take, so k ranks and one process follow the same loss
trajectory, step by step, up to float rounding. Every step is timed, so each epoch has its spread.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from helpers.data import load_fsdd, take
from helpers.dataparallel import SAMPLE_BYTES
from helpers.launch import launch
from helpers.models import build_model, parameter_bytes
from helpers.stats import spread
from helpers.train import evaluate, make_optimizer, to_device
from helpers.worker import prepare_rank, process_group, worker_main, write_rank_result

COMPRESSION_HOOKS = {
    None: default_hooks.allreduce_hook,
    "fp16": default_hooks.fp16_compress_hook,
    "bf16": default_hooks.bf16_compress_hook,
}


class TrafficRecorder:
    """State of the recording hook: bytes of each all-reduced bucket, grouped by training step.

    With ``compression`` ("fp16" or "bf16") the bucket travels as 2-byte floats, and that is what is
    recorded.
    """

    def __init__(self, compression: str | None = None) -> None:
        if compression not in COMPRESSION_HOOKS:
            raise ValueError(f"compression must be None, 'fp16' or 'bf16', not {compression!r}")
        self.compression = compression
        self.step = -1
        self.buckets: list[list[int]] = []

    def next_step(self) -> None:
        """Called before each backward pass."""
        self.step += 1
        self.buckets.append([])


def recording_allreduce_hook(state: TrafficRecorder, bucket):  # DDP rejects string annotations here
    """Record the bytes the bucket travels as, then all-reduce (average) it with DDP's own hook."""
    buffer = bucket.buffer()
    element_bytes = 2 if state.compression else buffer.element_size()
    state.buckets[state.step].append(buffer.numel() * element_bytes)
    return COMPRESSION_HOOKS[state.compression](None, bucket)


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
    every step's seconds, the global batch loss of every step, and (rank 0) test figures."""
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
        traffic = TrafficRecorder(config.get("compression"))
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
            if rank == 0:
                row["test_loss"], row["test_accuracy"] = evaluate(model, test_set)
            history.append(row)
        if rank == 0:
            _, history[-1]["train_accuracy"] = evaluate(model, to_device(train_set, device))
        gradient_bytes = parameter_bytes(model)
        write_rank_result(
            output, rank, world_size, config, device,
            {"history": history, "bucket_bytes_per_step": traffic.buckets, "gradient_bytes": gradient_bytes},
        )  # fmt: skip


def main() -> int:
    """Entry point for torchrun: ``-m helpers.ddp --config CONFIG.json --output DIR``."""
    return worker_main(train_rank, main.__doc__)


def ddp_config(**settings) -> dict:
    """A worker configuration: the defaults of chapter 3, overridden by ``settings``."""
    config = {
        "backend": "gloo", "device": "cpu", "model": "LinearNet", "seed": 0, "train_samples": None,
        "test_samples": None, "global_batch_size": 50, "epochs": 2, "optimizer": "adam", "lr": 1e-3,
        "bucket_cap_mb": 25, "compression": None, "timeout_seconds": 60, "tf32": False,
    }  # fmt: skip
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown DDP setting(s): {', '.join(unknown)}")
    return {**config, **settings}


def summarize_run(results: list[dict]) -> dict:
    """What a chapter plots of one launch: last-epoch time and its steps' times, losses, accuracy and
    traffic per rank. ``steps`` counts every epoch's steps (``steps_per_epoch`` one epoch's)."""
    first = results[0]
    last = first["history"][-1]
    steps = len(first["bucket_bytes_per_step"])
    all_reduced = sum(sum(step) for step in first["bucket_bytes_per_step"])
    return {
        "world_size": first["world_size"],
        "epoch_seconds": last["epoch_seconds"],
        "step_seconds_all": last.get("step_seconds", []),
        "steps_per_epoch": steps // len(first["history"]),
        "method": f"wall time of epoch {last['epoch']} between barriers, and of each of its steps "
        "(epoch 1 includes warm-up)",
        "train_loss": last["train_loss"],
        "train_accuracy": last.get("train_accuracy"),
        "test_accuracy": last["test_accuracy"],
        "history": first["history"],
        "steps": steps,
        "all_reduced_bytes_per_step": all_reduced / steps,
        "buckets_per_step": len(first["bucket_bytes_per_step"][-1]),
        "ring_bytes_sent_per_rank_per_step": ring_bytes_per_rank(all_reduced / steps, first["world_size"]),
        "gradient_bytes": first["gradient_bytes"],
        "threads_per_rank": first["threads"],
    }


def stored_ddp_run(
    store, world_size: int, time_limit_seconds: float = 900, launch_number: int = 0, **settings
) -> dict:
    """Launch ``world_size`` ranks through the results store (a finished identical run is reused).

    ``launch_number`` numbers independent launches of the same settings: each is a record of its own, so
    that a comparison rests on several start-ups, placements and neighbours, not on one
    (``stats.launch_speedup``).
    """
    config = {"kind": "ddp_run", "world_size": world_size, "launch": launch_number, **ddp_config(**settings)}
    worker = {k: v for k, v in config.items() if k not in ("kind", "world_size", "launch")}
    return store.measure(
        config, lambda: summarize_run(launch(worker, world_size, time_limit_seconds=time_limit_seconds))
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
    size), ``launches`` times each: the one loop every DDP comparison of chapter 3 is. The launches
    alternate — every variation once, then every variation again — so that a slow spell of the machine
    falls on all of them, not on one. Returns (variation with its ``launch`` number, record) pairs, which
    ``runs_frame`` tabulates, ``step_times`` unrolls into steps and ``launch_steps`` groups by launch."""
    runs = []
    order = [(number, variation) for number in range(launches) for variation in variations]
    for number, variation in tqdm(order, desc=description):
        settings = {**base, **variation}
        ranks = settings.pop("ranks")
        record = stored_ddp_run(store, ranks, launch_number=number, **settings)
        runs.append(({**variation, "launch": number}, record))
    return runs


def launch_steps(runs: list[tuple[dict, dict]], **match) -> list[list[float]]:
    """The timed steps of every launch among ``runs`` whose variation has the settings in ``match``, one
    list per launch (what ``stats.launch_speedup`` compares)."""
    return [
        record["result"]["step_seconds_all"]
        for variation, record in runs
        if all(variation.get(key) == value for key, value in match.items())
    ]


def chapter_sweeps(models, plan: pd.DataFrame, bucket_caps_mb, compressions, parity_seeds) -> dict:
    """Chapter 3's launches, section by section, as ``sweep`` variations over its common settings:
    ``scaling`` (every model on every backend and rank count the ``launch.run_plan`` lets run),
    ``buckets`` (ConvNet, each cap), ``compression`` (LinearNet, each hook) and ``parity`` (LinearNet, each
    seed, one rank and the most); the last three at the plan's largest rank count. The notebook runs
    these, and ``helpers.plan`` validates and times the same list before anything starts."""
    size = int(plan["ranks"].max())
    runnable = list(plan.query("runs")[["backend", "ranks"]].itertuples(index=False))
    return {
        "scaling": [{"model": m, "backend": b, "ranks": int(k)} for m in models for b, k in runnable],
        "buckets": [{"model": "ConvNet", "bucket_cap_mb": cap, "ranks": size} for cap in bucket_caps_mb],
        "compression": [{"model": "LinearNet", "compression": c, "ranks": size} for c in compressions],
        "parity": [{"model": "LinearNet", "seed": s, "ranks": k} for s in parity_seeds for k in (1, size)],
    }


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


def parity_summary(parity: pd.DataFrame, column: str = "test_accuracy") -> dict:
    """Largest ``column`` gap between the most ranks and one process over seeds, against the noise.

    The noise is the standard deviation over seeds of the one-process figure: a gap within about two of
    them is run-to-run variation, not a difference made by the ranks.
    """
    table = parity.pivot(index="seed", columns="ranks", values=column)
    gap = (table[table.columns.max()] - table[1]).abs().max()
    noise = table[1].std()
    return {"table": table, "largest_gap": float(gap), "one_process_std": float(noise)}


if __name__ == "__main__":
    sys.exit(main())
