"""Launch worker modules with torchrun, safely (chapter 3; chapter 4's collectives reuse it).

``launch`` checks the request before starting anything (NCCL needs one GPU per rank: it refuses two
ranks on one GPU), then runs ``python -m torch.distributed.run --standalone`` — whose rendezvous takes
a free port, so two launches never collide — with per-rank logs, a wall-clock limit and clean-up of
every process on error, interrupt or timeout. Results come back through the files the ranks write,
never through their console output.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist

from helpers.hardware import usable_cores
from helpers.processes import stop_process_tree
from helpers.results import write_json_atomically

BACKENDS = ("gloo", "nccl")
MAX_TIMEOUT_SECONDS = 120  # every process group times out within 2 minutes


class LaunchError(RuntimeError):
    """A launch that failed, timed out, or whose ranks reported an error."""


def usable_gpus(gpus: int | None = None) -> int:
    """The GPUs a launch may use: every visible one, or at most ``gpus`` of them."""
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return visible if gpus is None else min(gpus, visible)


def check_request(backend: str, device: str, world_size: int, gpus: int | None = None) -> None:
    """Refuse, with the reason, what cannot work, before any process starts.

    Gloo may share GPUs between ranks (local rank r uses GPU r mod ``usable_gpus(gpus)``); NCCL may not.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, not {world_size!r}")
    gpus = usable_gpus(gpus)
    if device == "cuda" and gpus == 0:
        raise ValueError("device 'cuda' asked for, but no CUDA device is visible")
    if backend == "nccl":
        if device != "cuda":
            raise ValueError("NCCL only moves CUDA tensors: use device 'cuda', or the gloo backend for CPU")
        if world_size > gpus:
            raise ValueError(
                f"NCCL needs one GPU per rank: {world_size} ranks asked for, {gpus} GPU(s) visible "
                "(NCCL refuses two ranks on one GPU; use gloo to share a GPU between ranks)"
            )


def torchrun_command(
    world_size: int,
    config_path: Path,
    output: Path,
    logs: Path,
    rendezvous: list[str],
    module: str = "helpers.ddp",
) -> list:
    """The torchrun command line for ``world_size`` local ranks of the worker ``module``."""
    return [
        sys.executable, "-m", "torch.distributed.run", *rendezvous,
        f"--nproc-per-node={world_size}", "--max-restarts=0", "--monitor-interval=0.5",
        "--log-dir", str(logs), "--redirects", "3",
        "-m", module, "--config", str(config_path), "--output", str(output),
    ]  # fmt: skip


def prepare_rank(config: dict) -> tuple[int, int, torch.device]:
    """Inside a worker: this rank's (rank, world_size, device), with its share of the cores as threads.

    The ranks on one machine share its cores equally (``config["threads"]`` overrides). With
    ``device`` "cuda" local rank r takes GPU r mod ``usable_gpus(config["gpus"])``: Gloo may share
    GPUs between ranks; NCCL gets one each (``check_request`` saw to that before the launch).
    """
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank, local_world_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    torch.set_num_threads(config.get("threads") or max(1, usable_cores() // local_world_size))
    if config["device"] != "cuda":
        return rank, world_size, torch.device("cpu")
    device = torch.device(f"cuda:{local_rank % usable_gpus(config.get('gpus'))}")
    torch.cuda.set_device(device)
    return rank, world_size, device


def group_timeout(config: dict) -> datetime.timedelta:
    """The process group's timeout: ``config["timeout_seconds"]`` (default 60 s), at most 2 minutes."""
    return datetime.timedelta(seconds=min(config.get("timeout_seconds", 60), MAX_TIMEOUT_SECONDS))


@contextlib.contextmanager
def process_group(config: dict):
    """Join the default process group of ``config["backend"]`` with its short timeout; always leave it."""
    dist.init_process_group(config["backend"], timeout=group_timeout(config))
    try:
        yield
    finally:
        dist.destroy_process_group()


def write_rank_result(output: Path, rank: int, world_size: int, config: dict, device, result: dict) -> None:
    """``output/rank<r>.json``, atomically: who wrote it (rank, backend, device, threads), then ``result``."""
    header = {"rank": rank, "world_size": world_size, "backend": config["backend"], "device": str(device),
              "threads": torch.get_num_threads()}  # fmt: skip
    write_json_atomically(output / f"rank{rank}.json", {**header, **result})


def worker_main(run_rank: Callable[[dict, Path], None], description: str) -> int:
    """The entry point every worker module shares: ``-m MODULE --config CONFIG.json --output DIR``.

    ``run_rank(config, output)`` does the rank's work and writes ``DIR/rank<r>.json``; if it raises,
    ``DIR/rank<r>.error`` gets the traceback first, so that the launcher can name the rank.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args()
    try:
        run_rank(json.loads(args.config.read_text()), args.output)
    except Exception:
        rank = os.environ.get("RANK", "?")
        (args.output / f"rank{rank}.error").write_text(traceback.format_exc())
        raise
    return 0


def collect(output: Path, ranks: int) -> list[dict]:
    """Every rank's result file; LaunchError naming the ranks that reported errors or wrote nothing."""
    errors = sorted(output.glob("rank*.error"), key=lambda path: path.stat().st_mtime)
    if errors:  # the first error written is the cause; the others are usually its echo ("connection closed")
        cause = errors[0].read_text().strip().splitlines()[-1]
        others = ", ".join(path.stem.removeprefix("rank") for path in errors[1:])
        echo = f" (then rank {others}, after it)" if others else ""
        raise LaunchError(f"rank {errors[0].stem.removeprefix('rank')} failed: {cause}{echo}")
    missing = [rank for rank in range(ranks) if not (output / f"rank{rank}.json").exists()]
    if missing:
        raise LaunchError(f"rank(s) {missing} wrote no result; see the logs in {output / 'logs'}")
    return [json.loads((output / f"rank{rank}.json").read_text()) for rank in range(ranks)]


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_rendezvous(nodes: int, endpoint: str, run_id: str) -> list[str]:
    """torchrun's options for one of ``nodes`` machines meeting at ``endpoint`` (c10d rendezvous)."""
    return [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}"]


def launch(
    config: dict,
    world_size: int,
    *,
    module: str = "helpers.ddp",
    nodes: int = 1,
    time_limit_seconds: float = 600,
    output: Path | None = None,
) -> list[dict]:
    """Run the worker ``module`` on ``world_size`` ranks; returns each rank's result, rank 0 first.

    ``config`` (JSON) reaches every rank; it names at least ``backend`` and ``device``.

    With ``nodes`` > 1 the ranks are split over that many torchrun "nodes" on this machine that meet
    through a c10d rendezvous on the loopback interface: the same command a multi-machine run uses,
    with the head node's address in place of 127.0.0.1.
    """
    check_request(config["backend"], config["device"], world_size, config.get("gpus"))
    if "global_batch_size" in config and config["global_batch_size"] % world_size:
        raise ValueError(
            f"global_batch_size {config['global_batch_size']} is not divisible by {world_size} ranks"
        )
    output = Path(output or tempfile.mkdtemp(prefix=module.rsplit(".", 1)[-1] + "-"))
    output.mkdir(parents=True, exist_ok=True)
    config_path = output / "config.json"
    config_path.write_text(json.dumps(config, indent=1))
    if nodes == 1:
        commands = [
            torchrun_command(world_size, config_path, output, output / "logs", ["--standalone"], module)
        ]
    else:
        if world_size % nodes:
            raise ValueError(f"{world_size} ranks cannot be split evenly over {nodes} nodes")
        rendezvous = node_rendezvous(nodes, f"127.0.0.1:{free_port()}", output.name)
        commands = [
            torchrun_command(
                world_size // nodes, config_path, output, output / f"logs-node{node}", rendezvous, module
            )
            for node in range(nodes)
        ]
    run_processes(commands, time_limit_seconds)
    return collect(output, world_size)


def run_processes(commands: list[list], time_limit_seconds: float) -> None:
    """Start every command, wait for all within the limit; on any failure stop every process tree."""
    processes = [subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for command in commands]  # fmt: skip
    deadline = time.monotonic() + time_limit_seconds
    try:
        for process in processes:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise LaunchError(
            f"the launch exceeded its {time_limit_seconds:.0f} s limit and was stopped"
        ) from None
    finally:
        for process in processes:
            stop_process_tree(process, grace_seconds=5)


def backend_support() -> list[dict]:
    """What this torch build and machine offer: each backend and device, and whether a launch may use it."""
    available = {
        "gloo": torch.distributed.is_gloo_available(),
        "nccl": torch.distributed.is_nccl_available(),
        "mpi": torch.distributed.is_mpi_available(),
    }
    rows = []
    for backend, built in available.items():
        for device in ("cpu", "cuda"):
            if not built:
                verdict = "not built into this torch"
            elif backend == "mpi":
                verdict = "built, not used by this study"
            else:
                try:
                    check_request(backend, device, 2)
                    verdict = "2 ranks: yes"
                except ValueError as error:
                    verdict = f"2 ranks: no ({error})"
            rows.append({"backend": backend, "tensors on": device, "in this build": built, "here": verdict})
    return rows


def run_plan(backends: list[str], device: str, world_sizes: list[int], gpus: int | None = None):
    """Which (backend, ranks) pairs can run here and, for those that cannot, the launcher's reason."""
    rows = []
    for backend in backends:
        for size in world_sizes:
            try:
                check_request(backend, device, size, gpus)
                reason = ""
            except ValueError as error:
                reason = str(error)
            rows.append({"backend": backend, "ranks": size, "runs": not reason, "reason": reason})
    return pd.DataFrame(rows)


def main_backend(plan: pd.DataFrame) -> str:
    """The first backend of the plan that can run its largest number of ranks (it runs every section)."""
    largest = plan["ranks"].max()
    able = plan.query("ranks == @largest and runs")["backend"]
    if able.empty:
        raise ValueError(f"no backend can run {largest} ranks here:\n{plan.to_string(index=False)}")
    return able.iloc[0]


def multi_node_command(nodes: int, ranks_per_node: int, head_address: str = "HEAD_NODE_ADDRESS") -> str:
    """The torchrun line to type on each of ``nodes`` machines for a multi-node run of the worker."""
    rendezvous = node_rendezvous(nodes, f"{head_address}:29500", "gpu-study")
    command = torchrun_command(ranks_per_node, Path("config.json"), Path("results"), Path("logs"), rendezvous)
    return " ".join(["torchrun", *command[3:]])
