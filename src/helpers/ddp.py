"""DistributedDataParallel training worker, one process per rank, started by torchrun (chapter 3).

``python -m torch.distributed.run --nproc-per-node K -m helpers.ddp --config C --output DIR`` is how
practitioners run it; ``helpers.launch`` does exactly that with a free rendezvous port, a wall-clock
limit and clean-up. Each rank reads its settings from the JSON file ``C`` and writes
``DIR/rank<r>.json`` (atomically) with its traffic and, on rank 0, the training history. A rank that
fails writes ``DIR/rank<r>.error`` first, so that the launcher can name it.

A DDP communication hook records the bytes of every gradient bucket that is all-reduced; for float32
gradients their sum per step is exactly the model's parameter bytes.
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
from torch.utils.data import DataLoader, DistributedSampler

from helpers.data import load_fsdd, take
from helpers.dataparallel import SAMPLE_BYTES
from helpers.launch import launch
from helpers.models import build_model, parameter_bytes
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


def ring_bytes_per_rank(gradient_bytes: int, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``gradient_bytes``: 2(k-1)/k of them."""
    return 2 * (world_size - 1) / world_size * gradient_bytes


def train_rank(config: dict, output: Path) -> None:
    """Train with DDP on this rank and write ``rank<r>.json``."""
    rank, world_size, device = prepare_rank(config)
    with process_group(config, device):
        if config.get("fail_rank") == rank:
            raise RuntimeError(f"rank {rank} fails on purpose (fail_rank={rank})")
        fsdd = load_fsdd(download=False)
        train_set = take(fsdd.split("train"), config.get("train_samples"), config["seed"])
        test_set = to_device(take(fsdd.split("test"), config.get("test_samples"), config["seed"]), device)
        per_rank_batch = config["global_batch_size"] // world_size
        sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, seed=config["seed"])
        loader = DataLoader(train_set, batch_size=per_rank_batch, sampler=sampler)
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
            loss_sum, seen = torch.zeros((), device=device), 0
            for inputs, targets in loader:
                inputs, targets = inputs.to(device), targets.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(ddp(inputs), targets)
                traffic.next_step()
                loss.backward()
                optimizer.step()
                loss_sum += loss.detach() * len(targets)
                seen += len(targets)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dist.barrier()
            seconds = time.perf_counter() - started
            row = {"epoch": epoch + 1, "train_loss": loss_sum.item() / seen, "epoch_seconds": seconds}
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
        "bucket_cap_mb": 25, "compression": None, "timeout_seconds": 60,
    }  # fmt: skip
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown DDP setting(s): {', '.join(unknown)}")
    return {**config, **settings}


def summarize_run(results: list[dict]) -> dict:
    """What a chapter plots of one launch: last-epoch time, losses, accuracy and traffic per rank."""
    first = results[0]
    last = first["history"][-1]
    steps = len(first["bucket_bytes_per_step"])
    all_reduced = sum(sum(step) for step in first["bucket_bytes_per_step"])
    return {
        "world_size": first["world_size"],
        "epoch_seconds": last["epoch_seconds"],
        "method": f"wall time of epoch {last['epoch']} between barriers (epoch 1 includes warm-up)",
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


def stored_ddp_run(store, world_size: int, time_limit_seconds: float = 900, **settings) -> dict:
    """Launch ``world_size`` ranks through the results store (a finished identical run is reused)."""
    config = {"kind": "ddp_run", "world_size": world_size, **ddp_config(**settings)}
    worker = {k: v for k, v in config.items() if k not in ("kind", "world_size")}
    return store.measure(
        config, lambda: summarize_run(launch(worker, world_size, time_limit_seconds=time_limit_seconds))
    )


def traffic_per_epoch(model_names: list[str], batch_sizes: list[int], train_clips: int, world_size: int):
    """The seed's table, exactly: per epoch the input bytes stay, the all-reduced bytes fall with the steps.

    One all-reduce of all gradient bytes per step (float32, no compression); ``world_size`` ranks each
    send their ring share of it.
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
                    "input bytes": train_clips * SAMPLE_BYTES,
                    "all-reduced bytes": steps * gradient_bytes,
                    f"ring bytes sent per rank (k={world_size})": round(
                        steps * ring_bytes_per_rank(gradient_bytes, world_size)
                    ),
                }
            )
    return pd.DataFrame(rows)


def runs_frame(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """One row per launch: the varied settings next to the summary (without the per-epoch history)."""
    return pd.DataFrame(
        [
            {**settings, **{k: v for k, v in record["result"].items() if k != "history"}}
            for settings, record in runs
        ]
    )


def parity_summary(parity: pd.DataFrame) -> dict:
    """Largest test-accuracy gap between the most ranks and one process over seeds, against the noise.

    The noise is the standard deviation over seeds of the one-process accuracy: a gap within about
    two of them is run-to-run variation, not a difference made by the ranks.
    """
    table = parity.pivot(index="seed", columns="ranks", values="test_accuracy")
    gap = (table[table.columns.max()] - table[1]).abs().max()
    noise = table[1].std()
    return {"table": table, "largest_gap": float(gap), "one_process_std": float(noise)}


if __name__ == "__main__":
    sys.exit(main())
