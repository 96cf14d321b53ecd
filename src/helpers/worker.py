"""The rank side of every torchrun worker: threads, device, process group, result files (chapter 3).

Each worker module (``helpers.ddp``, ``helpers.lightning_ddp``, ``helpers.collectives.tasks``) runs in
one process per rank, started by ``helpers.launch``. This module holds what they share: which cores and
which GPU a rank takes, the process group with its short timeout (NCCL groups initialised eagerly), the
atomically written ``rank<r>.json`` and the ``rank<r>.error`` that names a failing rank first.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

from helpers.hardware import gpu_count, usable_cores
from helpers.processes import end_process
from helpers.results import write_json_atomically

MAX_TIMEOUT_SECONDS = 120  # every process group times out within 2 minutes
ALL_RANKS_HERE = "all_ranks_on_this_machine"  # config key set by helpers.launch for simulated nodes


def visible_gpus() -> int:
    """CUDA devices torch can see (0 without CUDA); the recorded machine's (``hardware.gpu_count``)."""
    return gpu_count()


def usable_gpus(gpus: int | None = None) -> int:
    """The GPUs a launch may use: every visible one, or at most ``gpus`` of them."""
    visible = visible_gpus()
    return visible if gpus is None else min(gpus, visible)


def ranks_on_this_machine(world_size: int, local_world_size: int, all_ranks_here: bool) -> int:
    """How many ranks share this machine: all of them when the launch's "nodes" are simulated here."""
    return world_size if all_ranks_here else local_world_size


def gpu_index(rank: int, local_rank: int, gpus: int, all_ranks_here: bool) -> int:
    """The GPU a rank takes: its number among the ranks of this machine, modulo the usable GPUs.

    On separate machines that number is the local rank. When every "node" of a launch runs on this
    machine (``helpers.launch`` with ``nodes`` > 1), local ranks repeat from node to node, so the
    global rank counts instead; otherwise node 1's local rank 0 would take node 0's GPU 0, and NCCL
    refuses two ranks on one GPU. With at least as many GPUs as ranks (what NCCL needs, and what
    ``helpers.launch.check_request`` enforces) no two ranks share a GPU; with fewer (Gloo only) the
    ranks are dealt round-robin, at most one more on any GPU than on another.
    """
    if gpus < 1:
        raise ValueError("no usable GPU to place a rank on")
    return (rank if all_ranks_here else local_rank) % gpus


def set_tf32(enabled: bool) -> None:
    """Let float32 matrix products and cuDNN convolutions run on TF32 tensor cores, or keep them float32.

    PyTorch's defaults differ (matmul off, cuDNN on since 1.12) and are set per process, so every rank
    applies the study's one explicit setting: without it a GPU rank's convolutions round to TF32's 10-bit
    mantissa (about 1e-3 relative on Ampere and newer) while the CPU and the parent stay float32.
    """
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def tf32_in_use() -> bool:
    """Whether this process lets float32 matrix products or convolutions round to TF32 (recorded)."""
    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)


def pinned_cores(index: int, sharing: int, available) -> list[int] | None:
    """The cores the ``index``-th of ``sharing`` ranks on this machine is pinned to: an equal share of
    ``available`` (consecutive, disjoint), or None when there are more ranks than cores to share."""
    cores = sorted(available)
    if not 0 <= index < sharing or sharing > len(cores):
        return None
    share = len(cores) // sharing
    return cores[index * share : (index + 1) * share]


def prepare_rank(config: dict) -> tuple[int, int, torch.device]:
    """Inside a worker: this rank's (rank, world_size, device), with its share of the cores as threads.

    The ranks on this machine share its cores equally (``config["threads"]`` overrides). With
    ``config["pin_cores"]`` each rank is also pinned to its own share (``pinned_cores``, by its number
    among the ranks here), so that the scheduler cannot stack two ranks on one core while another idles;
    with more ranks than cores nothing is pinned. With ``device`` "cuda" the rank takes ``gpu_index``'s
    GPU of the ``usable_gpus(config["gpus"])``. TF32 is ``config["tf32"]`` (default off: float32
    arithmetic, as on the CPU), in every rank.
    """
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank, local_world_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    here = bool(config.get(ALL_RANKS_HERE))
    sharing = ranks_on_this_machine(world_size, local_world_size, here)
    threads = config.get("threads") or max(1, usable_cores() // sharing)
    if config.get("pin_cores") and hasattr(os, "sched_setaffinity"):  # before any thread starts
        cores = pinned_cores(rank if here else local_rank, sharing, os.sched_getaffinity(0))
        if cores:
            os.sched_setaffinity(0, cores)
    torch.set_num_threads(threads)
    set_tf32(bool(config.get("tf32", False)))
    if config["device"] != "cuda":
        return rank, world_size, torch.device("cpu")
    device = torch.device("cuda", gpu_index(rank, local_rank, usable_gpus(config.get("gpus")), here))
    torch.cuda.set_device(device)
    return rank, world_size, device


def group_timeout(config: dict) -> datetime.timedelta:
    """The process group's timeout: ``config["timeout_seconds"]`` (default 60 s), at most 2 minutes."""
    return datetime.timedelta(seconds=min(config.get("timeout_seconds", 60), MAX_TIMEOUT_SECONDS))


@contextlib.contextmanager
def process_group(config: dict, device: torch.device, output: Path):
    """Join the default process group of ``config["backend"]`` with its short timeout; always leave it.

    NCCL groups are bound to the rank's GPU (``device_id``): the communicator is created at once, by
    every rank together, and batched send/receive (``dist.batch_isend_irecv``) reuses it instead of
    creating a two-rank communicator per pair of peers on first use, which blocks until both peers
    arrive (PyTorch pull request 160342, 2025-08-11, describes the two kinds of communicator).

    On an error the rank writes ``output/rank<r>.error`` first and then aborts its group instead of
    destroying it: ``destroy_process_group`` can block while the peers sit in a collective that this rank
    will never join, and the launcher must learn which rank failed before the peers' echoes arrive.
    """
    bound = device if config["backend"] == "nccl" else None
    dist.init_process_group(config["backend"], timeout=group_timeout(config), device_id=bound)
    try:
        yield
    except BaseException:
        write_rank_error(output)
        leave_after_error()
        raise
    dist.destroy_process_group()


def leave_after_error() -> None:
    """Leave the process group without waiting for peers: NCCL's communicators are aborted (what its
    watchdog would do after the timeout), other backends' groups destroyed (Gloo's never block)."""
    if not dist.is_initialized():
        return
    if dist.get_backend() == "nccl":
        from torch.distributed.distributed_c10d import _abort_process_group  # the abort torch documents

        _abort_process_group()
    else:
        dist.destroy_process_group()


def write_rank_error(output: Path) -> None:
    """``output/rank<r>.error`` with the traceback being handled, unless this rank already wrote one."""
    path = output / f"rank{os.environ.get('RANK', '?')}.error"
    if not path.exists():
        path.write_text(traceback.format_exc())


def write_rank_result(output: Path, rank: int, world_size: int, config: dict, device, result: dict) -> None:
    """``output/rank<r>.json``, atomically: who wrote it (rank, backend, device, threads, TF32), then
    ``result``."""
    header = {"rank": rank, "world_size": world_size, "backend": config["backend"], "device": str(device),
              "threads": torch.get_num_threads(), "tf32": tf32_in_use()}  # fmt: skip
    write_json_atomically(output / f"rank{rank}.json", {**header, **result})


def worker_main(run_rank: Callable[[dict, Path], None], description: str) -> NoReturn:
    """The entry point every worker module shares: ``-m MODULE --config CONFIG.json --output DIR``.

    ``run_rank(config, output)`` does the rank's work and writes ``DIR/rank<r>.json``; if it raises,
    ``DIR/rank<r>.error`` gets the traceback first, so that the launcher can name the rank. On success the
    process ends at once (``processes.end_process``: ``os._exit``, no exit handlers): a rank's process
    only, never to be called in a process that has more to do, and a worker must have written and closed
    everything it keeps before ``run_rank`` returns.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args()
    try:
        run_rank(json.loads(args.config.read_text()), args.output)
    except Exception:
        write_rank_error(args.output)
        raise
    end_process()
