"""Collective operations: their cost models, rings built from send/recv, and a torchrun worker (chapter 4).

The latency-bandwidth (α-β) model: sending one message of n bytes between two ranks costs
α + n·β seconds (α: latency per message, β: seconds per byte, 1/β the link's bandwidth).
Chapter 4 fits α and β to measured collectives; chapter 5's cost model predicts with them.

The worker runs one ``task`` per launch on every rank
(``python -m helpers.collectives --config C --output DIR``, started by ``helpers.launch.launch``):

- ``semantics``: what each rank holds before and after every collective, on tiny integer tensors; an
  operation the backend lacks is recorded as ``"unsupported: …"`` (the runtime-probed support matrix);
- ``verify``: our send/recv algorithms against torch.distributed's collectives, exactly;
- ``deadlock``: one rank skips an all-reduce; the others must end by the process-group timeout;
- ``benchmark``: nccl-tests-style algorithm and bus bandwidth over message sizes.

Our algorithms (``ring_broadcast``, ``ring_all_reduce``, ``parameter_server_step``) use only
point-to-point messages. Gloo's send/recv move host memory only, so with Gloo a CUDA tensor travels
through a host copy, as Gloo's own collectives do with CUDA tensors.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import statistics
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from scipy.optimize import nnls
from torch import nn
from torch.utils.data import TensorDataset

from helpers.data import load_fsdd, take
from helpers.launch import (
    MAX_TIMEOUT_SECONDS,
    launch,
    prepare_rank,
    process_group,
    run_plan,
    worker_main,
    write_rank_result,
)
from helpers.models import build_model
from helpers.train import check_positive, evaluate, make_optimizer, step_batches

# the "[/pytorch/third_party/gloo/…/unbound_buffer.cc:78] " that starts gloo's errors
SOURCE_LOCATION = re.compile(r"^\s*\[[^\]]+:\d+\]\s*")
TASKS = ("semantics", "verify", "deadlock", "benchmark")
SEMANTIC_OPERATIONS = (
    "send_recv", "broadcast", "scatter", "gather", "reduce", "all_reduce", "all_gather", "reduce_scatter",
    "all_to_all", "all_to_all_single", "barrier",
)  # fmt: skip
BENCHMARK_OPERATIONS = (
    "all_reduce", "all_reduce_ring", "parameter_server", "all_gather", "reduce_scatter", "broadcast",
    "ring_broadcast",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# The α-β model


def message_seconds(nbytes: float, alpha_seconds: float, seconds_per_byte: float) -> float:
    """One point-to-point message of ``nbytes``: α + n·β."""
    return alpha_seconds + nbytes * seconds_per_byte


def ring_all_reduce_seconds(
    nbytes: float, world_size: int, alpha_seconds: float, seconds_per_byte: float
) -> float:
    """Ring all-reduce of ``nbytes`` on k ranks: 2(k−1) steps, each sending n/k bytes.

    Reduce-scatter (k−1 steps) then all-gather (k−1 steps); zero for one rank.
    """
    steps = 2 * (world_size - 1)
    return steps * message_seconds(nbytes / world_size, alpha_seconds, seconds_per_byte)


def ring_broadcast_seconds(
    nbytes: float, world_size: int, chunks: int, alpha_seconds: float, seconds_per_byte: float
) -> float:
    """Ring broadcast of ``nbytes`` in S = ``chunks`` pipelined chunks: (S+k−2)(α + n/S·β).

    S = 1 is the naive ring, (k−1)(α + nβ); as S grows the time tends to nβ (+ the latencies).
    """
    if world_size == 1:
        return 0.0
    return (chunks + world_size - 2) * message_seconds(nbytes / chunks, alpha_seconds, seconds_per_byte)


def bus_bandwidth_factor(operation: str, world_size: int) -> float:
    """nccl-tests' busbw = algbw × this factor: the fraction of the data each rank's link carries.

    all_reduce 2(k−1)/k; all_gather and reduce_scatter (k−1)/k; broadcast and reduce 1.
    """
    k = world_size
    factors = {
        "all_reduce": 2 * (k - 1) / k,
        "all_gather": (k - 1) / k,
        "reduce_scatter": (k - 1) / k,
        "broadcast": 1.0,
        "reduce": 1.0,
    }
    if operation not in factors:
        raise ValueError(f"operation must be one of {sorted(factors)}, not {operation!r}")
    return factors[operation]


def fit_alpha_beta(frame: pd.DataFrame) -> dict:
    """α and β fitted to measured ``bytes``, ``world_size``, ``seconds`` of one operation.

    Ring all-reduce rows follow 2(k−1)·α + 2(k−1)/k·bytes·β; ring-broadcast rows (``operation``
    "ring_broadcast", with ``chunks`` S) follow (S+k−2)·α + (S+k−2)/S·bytes·β. Both are linear in
    (α, β): non-negative least squares on relative errors (each row divided by its seconds), so that
    small messages, which carry the information about α, weigh as much as large ones. Rows of one rank
    carry no information and are dropped; a frame holding several ``operation`` values is refused (fit one
    at a time).
    """
    if "operation" in frame and frame["operation"].nunique() > 1:
        raise ValueError(f"fit one operation at a time, not {sorted(frame['operation'].unique())}")
    rows = frame[frame["world_size"] > 1]
    if len(rows) < 2:
        raise ValueError("fitting α and β needs at least two measurements with two or more ranks")
    k = rows["world_size"].to_numpy(dtype=float)
    nbytes = rows["bytes"].to_numpy(dtype=float)
    seconds = rows["seconds"].to_numpy(dtype=float)
    if "operation" in rows and rows["operation"].iloc[0] == "ring_broadcast":
        chunks = rows["chunks"].to_numpy(dtype=float)
        messages, message_bytes = chunks + k - 2, nbytes / chunks
    else:
        messages, message_bytes = 2 * (k - 1), nbytes / k
    design = np.column_stack([messages, messages * message_bytes]) / seconds[:, None]
    scale = np.linalg.norm(design, axis=0)  # columns differ by ~10⁷: solve in units of equal size
    solution, _ = nnls(design / scale, np.ones_like(seconds))
    alpha, beta = solution / scale
    return {
        "alpha_seconds": float(alpha),
        "seconds_per_byte": float(beta),
        "bandwidth_bytes_per_second": float(1 / beta) if beta > 0 else math.inf,
    }


# ---------------------------------------------------------------------------------------------------------
# Bytes on the wire per training step, by topology (the seed lecture's four pictures)


def split_sizes(total: int, parts: int) -> list[int]:
    """Part sizes of ``torch.tensor_split`` of ``total`` items: the first total % parts get one more."""
    return [total // parts + (1 if part < total % parts else 0) for part in range(parts)]


def bytes_per_step_by_topology(
    gradient_bytes: int, world_size: int, shards: int, element_bytes: int = 4
) -> list[dict]:
    """Bytes one data-parallel step moves to combine k gradients of N bytes, for each topology (exact ints).

    ``bytes_moved`` counts every byte once, at its sender; ``busiest_link_bytes`` is what the busiest
    participant's link carries in and out together (that link sets the step's communication time), and
    ``worker_link_bytes`` what a worker's link carries. Ring chunks are whole elements of
    ``element_bytes`` split like ``torch.tensor_split``.

    - parameter server on the CPU: each worker sends N up and receives N down; the server's link
      carries kN in and kN out.
    - all-reduce on the devices (direct exchange): each device sends its N to every other device and
      sums what it receives: (k−1)N out and (k−1)N in per device, k(k−1)N in all.
    - s sharded parameter servers: each worker sends N/s to each server and gets N/s back; a server's
      link carries 2kN/s (its largest shard).
    - ring all-reduce: 2(k−1) steps of N/k: each rank sends and receives 2(k−1)/k·N.
    """
    n, k, s = gradient_bytes, world_size, shards
    if not all(isinstance(value, int) for value in (n, k, s, element_bytes)) or n < 0 or min(k, s) < 1:
        raise ValueError(
            f"need integers gradient_bytes ≥ 0 and world_size, shards ≥ 1, not {n!r}, {k!r}, {s!r}"
        )
    if n % element_bytes:
        raise ValueError(f"gradient_bytes {n} is not a whole number of {element_bytes}-byte elements")
    largest_shard = max(split_sizes(n // element_bytes, s)) * element_bytes
    chunks = [size * element_bytes for size in split_sizes(n // element_bytes, k)]
    # rank r sends every chunk but (r+1) % k in the reduce-scatter and every chunk but (r+2) % k after
    ring_sent = [2 * n - chunks[(r + 1) % k] - chunks[(r + 2) % k] for r in range(k)] if k > 1 else [0]
    ring_received = [ring_sent[(r - 1) % k] for r in range(k)]
    ring_link = max(sent + received for sent, received in zip(ring_sent, ring_received, strict=True))
    return [
        {
            "topology": "parameter server (CPU)",
            "bytes_moved": 2 * k * n,
            "busiest_link_bytes": 2 * k * n,
            "busiest": "the server",
            "worker_link_bytes": 2 * n,
            "suits": "few workers; the server's link grows with k and becomes the bottleneck",
        },
        {
            "topology": "all-reduce on the devices",
            "bytes_moved": k * (k - 1) * n,
            "busiest_link_bytes": 2 * (k - 1) * n,
            "busiest": "every device",
            "worker_link_bytes": 2 * (k - 1) * n,
            "suits": "a few devices joined all-to-all (NVLink/NVSwitch); traffic grows as k²",
        },
        {
            "topology": f"sharded parameter servers (s={s})",
            "bytes_moved": 2 * k * n,
            "busiest_link_bytes": max(2 * k * largest_shard, 2 * n),
            "busiest": "each server" if 2 * k * largest_shard >= 2 * n else "every worker",
            "worker_link_bytes": 2 * n,
            "suits": "many workers when servers can be added (s ≈ k spreads the load); asynchronous updates",
        },
        {
            "topology": "ring all-reduce",
            "bytes_moved": sum(ring_sent),
            "busiest_link_bytes": ring_link,
            "busiest": "every rank",
            "worker_link_bytes": ring_link,
            "suits": "many devices on bandwidth-limited links: ≈2N per rank whatever k, but 2(k−1) latencies",
        },
    ]


# ---------------------------------------------------------------------------------------------------------
# Algorithms from point-to-point messages only


def _flat_view(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as one contiguous vector: a view when possible, else a copy."""
    return tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1).clone()


def _write_back(tensor: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """Copy ``flat`` into ``tensor`` when ``flat`` is a copy rather than a view of it."""
    if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
        tensor.copy_(flat.view(tensor.shape))
    return tensor


_RECEIVE_BUFFERS: dict[tuple, torch.Tensor] = {}


def receive_buffer(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A scratch vector of ``numel`` elements, reused across calls (kept until the process ends).

    Fresh large CPU tensors cost page faults on first touch: allocating the receive buffer on every
    all-reduce made 64 MiB rings ~20 % slower on a 2-core CPU.
    """
    key = (dtype, torch.device(device))
    if key not in _RECEIVE_BUFFERS or _RECEIVE_BUFFERS[key].numel() < numel:
        _RECEIVE_BUFFERS[key] = torch.empty(numel, dtype=dtype, device=device)
    return _RECEIVE_BUFFERS[key][:numel]


def _staged_through_host(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` must travel through a host copy: Gloo's send/recv read raw host memory only."""
    return tensor.device.type != "cpu" and dist.get_backend() == "gloo"


def _wait(works: list) -> None:
    for work in works:
        work.wait()


def ring_broadcast(tensor: torch.Tensor, src: int = 0, chunks: int = 1) -> torch.Tensor:
    """Broadcast ``tensor`` from ``src`` around the ring src → src+1 → … in place, from send/recv only.

    ``chunks`` = 1 is the naive ring: the whole tensor hops rank to rank, (k−1)(α + Nβ). With S chunks a
    rank forwards chunk c while it receives chunk c+1, so the hops overlap: (S+k−2)(α + Nβ/S).
    """
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, not {chunks!r}")
    rank, k = dist.get_rank(), dist.get_world_size()
    position = (rank - src) % k  # distance from the source along the ring
    if k == 1:
        return tensor
    if _staged_through_host(tensor):
        return tensor.copy_(ring_broadcast(tensor.cpu(), src, chunks))
    flat = _flat_view(tensor)
    pieces = [piece for piece in flat.tensor_split(chunks) if piece.numel()]
    left, right = (rank - 1) % k, (rank + 1) % k
    receives = [dist.irecv(piece, left) for piece in pieces] if position > 0 else []
    sends = []
    for index, piece in enumerate(pieces):
        if position > 0:
            receives[index].wait()
        if position < k - 1:
            sends.append(dist.isend(piece, right))
    _wait(sends)
    return _write_back(tensor, flat) if position > 0 else tensor


def ring_all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place: a ring reduce-scatter then a ring all-gather.

    The flattened tensor is cut into k chunks (``torch.tensor_split``: uneven when k does not divide it).
    In reduce-scatter step s rank r sends chunk r−s to its right neighbour and adds chunk r−s−1 from its
    left one; after k−1 steps it holds the full sum of chunk r+1, and k−1 all-gather steps pass the
    finished chunks around. Each step posts its send and receive together (no rank waits for another to
    finish sending) and receives into one buffer reused across steps and calls. Every rank sends
    2(k−1)/k of the data.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return tensor
    if _staged_through_host(tensor):
        return tensor.copy_(ring_all_reduce(tensor.cpu()))
    flat = _flat_view(tensor)
    chunks = flat.tensor_split(k)
    buffer = receive_buffer(chunks[0].numel(), flat.dtype, flat.device)
    left, right = (rank - 1) % k, (rank + 1) % k
    for step in range(k - 1):  # reduce-scatter
        outgoing, incoming = chunks[(rank - step) % k], chunks[(rank - step - 1) % k]
        received = buffer[: incoming.numel()]
        works = _exchange(outgoing, right, received, left)
        _wait(works)
        incoming.add_(received)
    for step in range(k - 1):  # all-gather: receive straight into place
        works = _exchange(chunks[(rank + 1 - step) % k], right, chunks[(rank - step) % k], left)
        _wait(works)
    return _write_back(tensor, flat)


def _exchange(outgoing: torch.Tensor, to: int, incoming: torch.Tensor, source: int) -> list:
    """Post a receive and a send together; empty tensors (more ranks than elements) travel not at all."""
    works = [dist.irecv(incoming, source)] if incoming.numel() else []
    if outgoing.numel():
        works.append(dist.isend(outgoing, to))
    return works


def parameter_server_step(tensor: torch.Tensor, server: int = 0) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place through one ``server`` rank: reduce, then broadcast.

    Every other rank sends its gradient to the server, which adds them to its own and sends the sum back
    to each: the server's link carries (k−1)N in and (k−1)N out, a worker's N each way.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1 or tensor.numel() == 0:
        return tensor
    if _staged_through_host(tensor):
        return tensor.copy_(parameter_server_step(tensor.cpu(), server))
    flat = _flat_view(tensor)
    if rank == server:
        workers = [worker for worker in range(k) if worker != server]
        buffers = receive_buffer(len(workers) * flat.numel(), flat.dtype, flat.device).view(
            len(workers), flat.numel()
        )
        receives = [dist.irecv(buffer, worker) for buffer, worker in zip(buffers, workers, strict=True)]
        for receive, buffer in zip(receives, buffers, strict=True):
            receive.wait()
            flat.add_(buffer)
        _wait([dist.isend(flat, worker) for worker in workers])
    else:
        dist.send(flat, server)
        dist.recv(flat, server)
    return _write_back(tensor, flat)


# ---------------------------------------------------------------------------------------------------------
# Worker tasks (one process per rank)


def short_error(error: BaseException, limit: int = 160) -> str:
    """An error message's first line without a leading ``[file.cc:81]``, shortened for a table cell."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    line = SOURCE_LOCATION.sub("", lines[0]).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _listed(value) -> list | None:
    """A tensor, or a list of them, as plain (nested) Python lists for the rank file."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [_listed(item) for item in value]
    return value.detach().cpu().tolist()


def rank_values(rank: int, length: int, device: torch.device) -> torch.Tensor:
    """What rank r holds in the semantics demo: [10r, 10r+1, …] (int64), readable in a table."""
    return torch.arange(length, dtype=torch.int64, device=device) + 10 * rank


def semantics_task(config: dict, device: torch.device) -> dict:
    """Every collective on tiny tensors: what this rank holds before and after, or why it could not run.

    Rank r starts each operation from [10r, …, 10r+k−1] (one element per rank, so scatter-like operations
    hand out single elements). Roots are rank 0; send/recv goes from rank 0 to rank 1. ``after`` is None
    where the operation leaves this rank nothing defined (for example a non-root of reduce or gather).
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    records = []
    for operation in SEMANTIC_OPERATIONS:
        data = rank_values(rank, k, device)
        before = _listed(data)
        try:
            after = _semantic_operation(operation, data, rank, k)
            status = "ok"
        except Exception as error:  # a backend lacking the operation raises on every rank alike
            after, status = None, f"unsupported: {short_error(error)}"
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        records.append({"operation": operation, "status": status, "before": before, "after": _listed(after)})
    return {"operations": records}


def _semantic_operation(operation: str, data: torch.Tensor, rank: int, k: int):
    """Run one collective on ``data``; returns what this rank holds afterwards (None: nothing defined)."""
    if operation == "send_recv":
        if k < 2:
            raise ValueError("send/recv needs two ranks")
        if _staged_through_host(data):  # not probed: Gloo would hand the socket a device pointer
            raise ValueError("Gloo sends and receives CPU tensors only (not attempted)")
        if rank == 0:
            dist.send(data, 1)
        elif rank == 1:
            dist.recv(data, 0)
        return data
    if operation == "broadcast":
        dist.broadcast(data, src=0)
        return data
    if operation == "scatter":
        received = torch.empty(1, dtype=data.dtype, device=data.device)
        dist.scatter(received, list(data.tensor_split(k)) if rank == 0 else None, src=0)
        return received
    if operation == "gather":
        gathered = [torch.empty_like(data) for _ in range(k)] if rank == 0 else None
        dist.gather(data, gathered, dst=0)
        return torch.cat(gathered) if rank == 0 else None
    if operation == "reduce":
        dist.reduce(data, dst=0)
        return data if rank == 0 else None  # other ranks' buffers are unspecified
    if operation == "all_reduce":
        dist.all_reduce(data)
        return data
    if operation == "all_gather":
        gathered = [torch.empty_like(data) for _ in range(k)]
        dist.all_gather(gathered, data)
        return torch.cat(gathered)
    if operation == "reduce_scatter":
        received = torch.empty(1, dtype=data.dtype, device=data.device)
        dist.reduce_scatter(received, list(data.tensor_split(k)))
        return received
    if operation == "all_to_all":
        received = [torch.empty(1, dtype=data.dtype, device=data.device) for _ in range(k)]
        dist.all_to_all(received, list(data.tensor_split(k)))
        return torch.cat(received)
    if operation == "all_to_all_single":
        received = torch.empty_like(data)
        dist.all_to_all_single(received, data)
        return received
    if operation == "barrier":
        dist.barrier()
        return data
    raise ValueError(f"unknown operation {operation!r}")


def expected_semantics(world_size: int) -> dict[str, list]:
    """What each rank holds after each operation of the semantics demo, worked out by hand.

    One list per operation with one entry per rank (None where nothing is defined): the reference the
    measured table is checked against.
    """
    k = world_size
    start = [[10 * r + i for i in range(k)] for r in range(k)]
    column_sums = [sum(start[r][i] for r in range(k)) for i in range(k)]
    concatenated = [value for row in start for value in row]
    return {
        "send_recv": [start[0] if r == 1 else start[r] for r in range(k)],
        "broadcast": [start[0]] * k,
        "scatter": [[start[0][r]] for r in range(k)],
        "gather": [concatenated] + [None] * (k - 1),
        "reduce": [column_sums] + [None] * (k - 1),
        "all_reduce": [column_sums] * k,
        "all_gather": [concatenated] * k,
        "reduce_scatter": [[column_sums[r]] for r in range(k)],
        "all_to_all": [[start[j][r] for j in range(k)] for r in range(k)],
        "all_to_all_single": [[start[j][r] for j in range(k)] for r in range(k)],
        "barrier": start,
    }


def semantics_frame(results: list[dict]) -> pd.DataFrame:
    """One row per (operation, rank): what the rank held before and after, and the operation's status."""
    rows = []
    for result in results:
        for record in result["operations"]:
            rows.append(
                {
                    "operation": record["operation"],
                    "rank": result["rank"],
                    "before": record["before"],
                    "after": record["after"],
                    "status": record["status"],
                }
            )
    order = {name: index for index, name in enumerate(SEMANTIC_OPERATIONS)}
    frame = pd.DataFrame(rows)
    return frame.sort_values(
        ["operation", "rank"], key=lambda c: c.map(order) if c.name == "operation" else c, ignore_index=True
    )


def support_matrix(results: list[dict]) -> list[dict]:
    """Per operation, whether the launch's backend and device ran it (not if any rank failed: why)."""
    first = results[0]
    rows = []
    for index, record in enumerate(first["operations"]):
        statuses = [result["operations"][index]["status"] for result in results]
        failed = [status for status in statuses if status != "ok"]
        rows.append(
            {
                "backend": first["backend"],
                "device": first["device_type"],
                "operation": record["operation"],
                "supported": not failed,
                "message": failed[0].removeprefix("unsupported: ") if failed else "",
            }
        )
    return rows


def verify_task(config: dict, device: torch.device) -> dict:
    """Our send/recv algorithms against torch.distributed's collectives, on random integer-valued tensors.

    Integer values make every sum exact in any order, so the results must be equal, not merely close.
    The sizes are ``config["sizes"]`` plus k−1 and k+1 (never divisible by k > 2); the ring broadcast
    runs with each of ``config["chunks"]`` from rank 0 and from rank k−1. A transposed (non-contiguous)
    7×3 tensor checks the in-place write-back.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    sizes = sorted({*config["sizes"], *([k - 1] if k > 1 else []), k + 1})
    checks = []

    def check(name: str, ours: torch.Tensor, reference: torch.Tensor, **details) -> None:
        difference = (ours.double() - reference.double()).abs().max().item() if ours.numel() else 0.0
        equal = bool(torch.equal(ours, reference))
        checks.append(
            {
                "check": name,
                "dtype": str(ours.dtype).removeprefix("torch."),
                "numel": ours.numel(),
                **details,
                "equal": equal,
                "max_abs_difference": difference,
            }
        )

    for dtype_name in config["dtypes"]:
        dtype = getattr(torch, dtype_name)
        for size in sizes:
            generator = torch.Generator().manual_seed(config["seed"] * 1_000_003 + size * 101 + rank)
            values = torch.randint(-1000, 1000, (size,), generator=generator).to(dtype=dtype, device=device)
            reference = values.clone()
            dist.all_reduce(reference)
            check("ring_all_reduce", ring_all_reduce(values.clone()), reference)
            for server in sorted({0, k - 1}):
                check(
                    "parameter_server_step",
                    parameter_server_step(values.clone(), server),
                    reference,
                    server=server,
                )
            for src in sorted({0, k - 1}):
                reference = values.clone()
                dist.broadcast(reference, src=src)
                for chunks in config["chunks"]:
                    ours = ring_broadcast(values.clone(), src=src, chunks=chunks)
                    check("ring_broadcast", ours, reference, src=src, chunks=chunks)
        generator = torch.Generator().manual_seed(config["seed"] + rank)
        matrix = torch.randint(-1000, 1000, (7, 3), generator=generator).to(dtype=dtype, device=device).t()
        reference = matrix.clone()
        dist.all_reduce(reference)
        check("ring_all_reduce (transposed 3×7)", ring_all_reduce(matrix.clone()), reference)
    return {"checks": checks, "sizes": sizes}


def deadlock_task(config: dict, device: torch.device) -> dict:
    """One rank skips an all-reduce the others enter: they must give up at the process-group timeout.

    The skipping rank stays alive (waiting on the rendezvous store until the others report) so that
    the waiting ranks see a genuine timeout, not a closed connection.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    skip_rank = config["skip_rank"] if config["skip_rank"] is not None else k - 1
    if not 0 <= skip_rank < k:
        raise ValueError(f"skip_rank {skip_rank} is not a rank of {k}")
    store = dist.distributed_c10d._get_default_store()
    waiting = [r for r in range(k) if r != skip_rank]
    timeout = config["timeout_seconds"]
    dist.barrier()
    if rank == skip_rank:
        store.wait([f"deadlock-demo/{r}" for r in waiting], datetime.timedelta(seconds=3 * timeout + 30))
        return {"skipped_all_reduce": True, "timed_out": False}
    tensor = torch.ones(4, device=device)
    started = time.perf_counter()
    try:
        work = dist.all_reduce(tensor, async_op=True)
        work.wait()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        outcome = {"timed_out": False, "error": None}
    except Exception as error:
        message = short_error(error, limit=300)
        outcome = {
            "timed_out": "timed out" in message.lower() or "timeout" in message.lower(),
            "error": message,
            "error_type": type(error).__name__,
        }
    outcome["seconds"] = time.perf_counter() - started
    outcome["timeout_seconds"] = timeout
    store.set(f"deadlock-demo/{rank}", "done")
    return {"skipped_all_reduce": False, **outcome}


LABELS = {
    "all_reduce": "all_reduce (torch.distributed)",
    "all_reduce_ring": "all_reduce (our ring)",
    "parameter_server": "all_reduce (our parameter server)",
    "all_gather": "all_gather (torch.distributed)",
    "reduce_scatter": "reduce_scatter (torch.distributed)",
    "broadcast": "broadcast (torch.distributed)",
    "ring_broadcast": "broadcast (our ring, S={chunks})",
}


def _benchmark_cases(config: dict, size_bytes: int, k: int, device: torch.device) -> list[dict]:
    """One case per operation (and ring-broadcast chunk count) at one message size: what to run, the bytes
    nccl-tests would report and the collective whose bus factor applies.

    Tensors are float32 zeros, shared by the in-place operations (sums of zeros stay zero, however often
    they repeat). As in nccl-tests, the size of all_gather and reduce_scatter is the whole gathered or
    scattered buffer, k per-rank parts.
    """
    count, part = max(1, size_bytes // 4), max(1, size_bytes // (4 * k))
    tensor = torch.zeros(count, device=device)
    if {"all_gather", "reduce_scatter"} & set(config["operations"]):
        whole, one = torch.zeros(part * k, device=device), torch.zeros(part, device=device)
    runs = {
        "all_reduce": lambda chunks: (lambda: dist.all_reduce(tensor), count * 4, "all_reduce"),
        "all_reduce_ring": lambda chunks: (lambda: ring_all_reduce(tensor), count * 4, "all_reduce"),
        "parameter_server": lambda chunks: (lambda: parameter_server_step(tensor), count * 4, "all_reduce"),
        "all_gather": lambda chunks: (
            lambda: dist.all_gather_into_tensor(whole, one),
            part * k * 4,
            "all_gather",
        ),
        "reduce_scatter": lambda chunks: (
            lambda: dist.reduce_scatter_tensor(one, whole),
            part * k * 4,
            "reduce_scatter",
        ),
        "broadcast": lambda chunks: (lambda: dist.broadcast(tensor, src=0), count * 4, "broadcast"),
        "ring_broadcast": lambda chunks: (
            lambda: ring_broadcast(tensor, src=0, chunks=chunks),
            count * 4,
            "broadcast",
        ),
    }
    cases = []
    for operation in config["operations"]:
        for chunks in config["chunks"] if operation == "ring_broadcast" else [None]:
            run, nbytes, collective = runs[operation](chunks)
            cases.append(
                {
                    "operation": operation,
                    "label": LABELS[operation].format(chunks=chunks),
                    "chunks": chunks,
                    "run": run,
                    "bytes": nbytes,
                    "collective": collective,
                }
            )
    return cases


def _timed(run, device: torch.device) -> float:
    """Seconds of one ``run()`` on this rank, started together with the others (barrier, synchronise)."""
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def benchmark_task(config: dict, device: torch.device) -> dict:
    """nccl-tests-style timings: per operation and message size the median over iterations of the slowest
    rank's time, algbw = bytes / seconds and busbw = algbw × the collective's bus factor.

    At each size the operations take turns iteration by iteration, so that background load on a shared
    machine slows them alike. The first warm-up call probes support: an operation the backend lacks is
    recorded as ``"unsupported: …"`` and left out.
    """
    k = dist.get_world_size()
    rows = []
    for size in config["sizes_bytes"]:
        runnable = []
        for case in _benchmark_cases(config, size, k, device):
            row = {key: case[key] for key in ("operation", "label", "chunks")}
            row.update(world_size=k, requested_bytes=size)
            try:
                for _ in range(max(1, config["warmup_iterations"])):
                    case["run"]()
            except Exception as error:  # e.g. a collective the backend does not implement
                rows.append({**row, "status": f"unsupported: {short_error(error)}"})
                continue
            runnable.append((case, row))
        if not runnable:
            continue
        times = [[_timed(case["run"], device) for case, _ in runnable] for _ in range(config["iterations"])]
        slowest = torch.tensor(times, dtype=torch.float64, device=device).reshape(-1, len(runnable))
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        for (case, row), case_times in zip(runnable, slowest.t().tolist(), strict=True):
            seconds = statistics.median(case_times)
            factor = bus_bandwidth_factor(case["collective"], k)
            rows.append(
                {
                    **row,
                    "status": "ok",
                    "collective": case["collective"],
                    "bytes": case["bytes"],
                    "seconds": seconds,
                    "seconds_all": case_times,
                    "bus_factor": factor,
                    "algbw_bytes_per_second": case["bytes"] / seconds,
                    "busbw_bytes_per_second": case["bytes"] / seconds * factor,
                }
            )
    order = {operation: index for index, operation in enumerate(BENCHMARK_OPERATIONS)}
    rows.sort(key=lambda row: (order[row["operation"]], row["chunks"] or 0, row["requested_bytes"]))
    return {
        "rows": rows,
        "method": f"median over {config['iterations']} iterations of the slowest rank's time, after "
        f"{max(1, config['warmup_iterations'])} warm-up iteration(s); barrier"
        + (" and CUDA synchronise" if device.type == "cuda" else "")
        + " before each iteration; operations take turns",
    }


def benchmark_frame(rank0_result: dict) -> pd.DataFrame:
    """Rank 0's benchmark rows as a tidy table, algbw and busbw also in GB/s (10⁹ bytes, as nccl-tests)."""
    frame = pd.DataFrame(rank0_result["rows"])
    for column in ("bytes", "seconds", "algbw_bytes_per_second", "busbw_bytes_per_second"):
        if column not in frame:
            frame[column] = np.nan
    frame["algbw_GBps"] = frame["algbw_bytes_per_second"] / 1e9
    frame["busbw_GBps"] = frame["busbw_bytes_per_second"] / 1e9
    return frame


def matches_expectation(table: pd.DataFrame, world_size: int) -> dict[str, bool]:
    """For each operation the backend ran, whether every rank's result equals ``expected_semantics``."""
    ran = table.query("status == 'ok'")
    return {
        operation: ran.query("operation == @operation")["after"].tolist() == after
        for operation, after in expected_semantics(world_size).items()
        if operation in set(ran["operation"])
    }


def probe_support(store, backends=("gloo", "nccl"), devices=("cpu", "cuda"), gpus: int | None = None):
    """Every operation attempted on every backend and device this machine can launch (two ranks, or the
    one rank a single GPU allows NCCL); a combination the launcher refuses becomes one row with its reason.
    """
    rows = []
    limit = {"gpus": gpus} if gpus is not None else {}
    for backend in backends:
        for device in devices:
            plan = run_plan([backend], device, [2, 1], gpus).query("runs")
            if plan.empty:
                reason = run_plan([backend], device, [1], gpus)["reason"].iloc[0]
                rows.append(
                    {"backend": backend, "device": device, "operation": "(all)", "supported": False,
                     "message": reason}
                )  # fmt: skip
                continue
            ranks = int(plan["ranks"].iloc[0])
            record = stored_semantics(store, ranks, backend=backend, device=device, **limit)
            rows += [{**row, "ranks": ranks} for row in record["result"]["support"]]
    return pd.DataFrame(rows)


def support_matrix_table(support: pd.DataFrame) -> pd.DataFrame:
    """``probe_support``'s rows as operation × (backend, device), "yes"/"no"."""
    marked = support.assign(here=support["supported"].map({True: "yes", False: "no"}))
    table = marked.pivot_table(
        index="operation", columns=["backend", "device"], values="here", aggfunc="first", sort=False
    )
    return table.fillna("")


def verify_summary(result: dict, world_size: int) -> dict:
    """One line of the exactness table: which algorithms, sizes and checks ran on ``world_size`` ranks."""
    checks = pd.DataFrame(result["checks"])
    return {
        "ranks": world_size,
        "algorithms": ", ".join(sorted(checks["check"].str.split(" ").str[0].unique())),
        "sizes": ", ".join(map(str, result["sizes"])),
        "checks": len(checks),
        "all exactly equal": result["all_equal"],
    }


ALL_REDUCE_IMPLEMENTATIONS = ("all_reduce", "all_reduce_ring", "parameter_server")


def alpha_beta_fits(frame: pd.DataFrame) -> pd.DataFrame:
    """α and β per backend, device and operation: each all-reduce implementation on all its rows (two or
    more ranks), and the ring broadcast on its naive, one-chunk rows only — so that its pipelined rows
    stay out of the fit and test the model.
    """
    rows = []
    usable = frame[(frame["status"] == "ok") & (frame["world_size"] > 1)]
    for (backend, device, operation), group in usable.groupby(["backend", "device", "operation"]):
        if operation == "ring_broadcast":
            group = group[group["chunks"] == 1]
        elif operation not in ALL_REDUCE_IMPLEMENTATIONS:
            continue
        if len(group) >= 2:
            fit = fit_alpha_beta(group)
            rows.append({"backend": backend, "device": device, "operation": operation, **fit})
    return pd.DataFrame(rows)


def with_model_seconds(frame: pd.DataFrame, fits: pd.DataFrame, operation: str = "all_reduce"):
    """The benchmark rows with what the α-β model predicts for them, from ``operation``'s fit.

    All-reduce rows use the ring all-reduce formula, ring-broadcast rows the pipelined broadcast formula.
    """
    predicted = []
    for row in frame.itertuples():
        fit = fits.query("backend == @row.backend and device == @row.device and operation == @operation")
        if fit.empty or row.status != "ok":
            predicted.append(np.nan)
            continue
        alpha, beta = fit["alpha_seconds"].iloc[0], fit["seconds_per_byte"].iloc[0]
        if row.collective == "all_reduce":
            predicted.append(ring_all_reduce_seconds(row.bytes, row.world_size, alpha, beta))
        elif row.operation == "ring_broadcast":
            predicted.append(ring_broadcast_seconds(row.bytes, row.world_size, int(row.chunks), alpha, beta))
        else:
            predicted.append(np.nan)
    return frame.assign(model_seconds=predicted)


def ring_against_library(frame: pd.DataFrame, min_bytes: int = 16 * 2**20) -> pd.DataFrame:
    """busbw of our ring all-reduce as a fraction of ``dist.all_reduce``'s, at every size ≥ ``min_bytes``."""
    ok = frame[
        (frame["status"] == "ok")
        & (frame["bytes"] >= min_bytes)
        & (frame["world_size"] > 1)
        & frame["operation"].isin(["all_reduce", "all_reduce_ring"])
    ]
    table = ok.pivot_table(
        index=["backend", "device", "world_size", "bytes"], columns="operation", values="busbw_GBps"
    ).reset_index()
    library, ours = "dist.all_reduce busbw GB/s", "our ring busbw GB/s"
    table = table.rename(columns={"all_reduce": library, "all_reduce_ring": ours})
    table["ring / dist"] = table[ours] / table[library]
    return table[["backend", "device", "world_size", "bytes", library, ours, "ring / dist"]]


TASK_FUNCTIONS = {
    "semantics": semantics_task,
    "verify": verify_task,
    "deadlock": deadlock_task,
    "benchmark": benchmark_task,
}


def run_rank(config: dict, output: Path) -> None:
    """Run ``config["task"]`` on this rank and write ``rank<r>.json``."""
    if config["task"] not in TASK_FUNCTIONS:
        raise ValueError(f"task must be one of {TASKS}, not {config['task']!r}")
    rank, world_size, device = prepare_rank(config)
    if config["backend"] == "nccl" and config["task"] == "deadlock":
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"  # wait() raises at the timeout instead of aborting
    with process_group(config):
        result = TASK_FUNCTIONS[config["task"]](config, device)
        write_rank_result(
            output, rank, world_size, config, device,
            {"device_type": device.type, "task": config["task"], **result},
        )  # fmt: skip


def main() -> int:
    """Entry point for torchrun: ``-m helpers.collectives --config CONFIG.json --output DIR``."""
    return worker_main(run_rank, main.__doc__)


# ---------------------------------------------------------------------------------------------------------
# Launching, through the results store


TASK_DEFAULTS = {
    "semantics": {"timeout_seconds": 30},
    "verify": {
        "timeout_seconds": 60,
        "sizes": [1, 7, 1000, 1001],
        "chunks": [1, 2, 3, 8],
        "dtypes": ["int64", "float64"],
        "seed": 0,
    },
    "deadlock": {"timeout_seconds": 5, "skip_rank": None},
    "benchmark": {
        "timeout_seconds": 60,
        "sizes_bytes": [2**p for p in range(10, 27, 2)],
        "operations": list(BENCHMARK_OPERATIONS),
        "chunks": [1, 4, 16],
        "iterations": 10,
        "warmup_iterations": 2,
    },
}


def collective_config(task: str, **settings) -> dict:
    """A worker configuration for ``task``: backend gloo on the CPU and the task's defaults, overridden."""
    if task not in TASK_DEFAULTS:
        raise ValueError(f"task must be one of {TASKS}, not {task!r}")
    config = {"task": task, "backend": "gloo", "device": "cpu", **TASK_DEFAULTS[task]}
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown {task} setting(s): {', '.join(unknown)}")
    config.update(settings)
    if not 0 < config["timeout_seconds"] <= MAX_TIMEOUT_SECONDS:
        raise ValueError(
            f"timeout_seconds must be in (0, {MAX_TIMEOUT_SECONDS}], not {config['timeout_seconds']!r}"
        )
    unknown_operations = sorted(set(config.get("operations", [])) - set(BENCHMARK_OPERATIONS))
    if unknown_operations:
        raise ValueError(
            f"unknown operation(s) {unknown_operations}; known: {', '.join(BENCHMARK_OPERATIONS)}"
        )
    return config


def run_task(
    task: str, world_size: int, time_limit_seconds: float = 300, output: Path | None = None, **settings
) -> list[dict]:
    """Launch ``task`` on ``world_size`` ranks (checked before anything starts); every rank's result."""
    config = collective_config(task, **settings)
    if task == "deadlock" and world_size < 2:
        raise ValueError("the deadlock demo needs at least two ranks: one to skip, one to wait")
    return launch(
        config, world_size, module="helpers.collectives", time_limit_seconds=time_limit_seconds, output=output
    )


def _stored(store, kind: str, task: str, world_size: int, time_limit_seconds: float, summarize, **settings):
    config = {"kind": kind, "world_size": world_size, **collective_config(task, **settings)}
    return store.measure(
        config, lambda: summarize(run_task(task, world_size, time_limit_seconds, **settings))
    )


def stored_semantics(store, world_size: int, time_limit_seconds: float = 180, **settings) -> dict:
    """The semantics demo through the results store; result: every rank's record and the support matrix."""
    return _stored(
        store,
        "collective_semantics",
        "semantics",
        world_size,
        time_limit_seconds,
        lambda results: {"ranks": results, "support": support_matrix(results)},
        **settings,
    )


def stored_verify(store, world_size: int, time_limit_seconds: float = 180, **settings) -> dict:
    """The exactness checks through the results store; result: rank 0's checks, whether all ranks passed."""

    def summarize(results: list[dict]) -> dict:
        return {
            "checks": results[0]["checks"],
            "sizes": results[0]["sizes"],
            "all_equal": all(c["equal"] for r in results for c in r["checks"]),
        }

    return _stored(
        store, "collective_verify", "verify", world_size, time_limit_seconds, summarize, **settings
    )


def stored_deadlock(store, world_size: int, time_limit_seconds: float = 120, **settings) -> dict:
    """The deadlock demo through the results store; result: every rank's outcome."""
    return _stored(
        store,
        "collective_deadlock",
        "deadlock",
        world_size,
        time_limit_seconds,
        lambda results: {"ranks": results},
        **settings,
    )


def stored_benchmark(store, world_size: int, time_limit_seconds: float = 600, **settings) -> dict:
    """The benchmark through the results store; result: rank 0's rows (``benchmark_frame`` tabulates them)."""
    return _stored(
        store,
        "collective_benchmark",
        "benchmark",
        world_size,
        time_limit_seconds,
        lambda results: results[0],
        **settings,
    )


# ---------------------------------------------------------------------------------------------------------
# Asynchronous SGD, simulated in one process


def stale_gradient_training(
    model_name: str,
    train: TensorDataset,
    test: TensorDataset,
    staleness: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_every: int = 10,
    optimizer: str = "sgd",
) -> dict:
    """SGD in which the gradient applied at step t was computed on the parameters of step t−staleness.

    This is what an asynchronous parameter server does to a worker whose gradient arrives after
    ``staleness`` other updates (with k workers taking turns, staleness ≈ k−1). A queue keeps the last
    staleness+1 parameter snapshots; early steps use the oldest one there is. Staleness 0 is synchronous
    SGD. Batches are ``helpers.train.step_batches`` of a seeded shuffle, so runs differ only in staleness.
    Returns per step the loss of the batch (at the parameters it was computed on) and, every
    ``eval_every`` steps and at the end, the current parameters' test loss and accuracy.
    """
    if not isinstance(staleness, int) or staleness < 0:
        raise ValueError(f"staleness must be a non-negative integer, not {staleness!r}")
    check_positive(steps=steps, batch_size=batch_size, eval_every=eval_every)
    torch.manual_seed(seed)
    model = build_model(model_name)
    stale_copy = build_model(model_name)  # where the late worker computes its gradient
    updater = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = train.tensors
    snapshots: deque[list[torch.Tensor]] = deque(maxlen=staleness + 1)
    history = []
    for step, index in enumerate(step_batches(len(targets), batch_size, seed, steps), start=1):
        snapshots.append([parameter.detach().clone() for parameter in model.parameters()])
        with torch.no_grad():
            for target, value in zip(stale_copy.parameters(), snapshots[0], strict=True):
                target.copy_(value)
        stale_copy.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(stale_copy(inputs[index]), targets[index])
        loss.backward()
        for parameter, stale in zip(model.parameters(), stale_copy.parameters(), strict=True):
            parameter.grad = stale.grad
        updater.step()
        row = {"step": step, "staleness": staleness, "batch_loss": loss.item()}
        if step % eval_every == 0 or step == steps:
            row["test_loss"], row["test_accuracy"] = evaluate(model, test)
        history.append(row)
    return {
        "history": history,
        "method": f"{optimizer} (lr {lr}), batch {batch_size}, gradients {staleness} step(s) stale; "
        f"test figures every {eval_every} steps",
    }


def stored_stale_training(store, model_name: str, staleness: int, train_samples: int | None, **settings):
    """``stale_gradient_training`` on FSDD clips through the results store (seeded subset of the split)."""
    config = {
        "kind": "stale_training",
        "model": model_name,
        "staleness": staleness,
        "train_samples": train_samples,
        "threads": torch.get_num_threads(),
        **settings,
    }

    def measure() -> dict:
        fsdd = load_fsdd()
        train_set = take(fsdd.split("train"), train_samples, settings["seed"])
        return stale_gradient_training(model_name, train_set, fsdd.split("test"), staleness, **settings)

    return store.measure(config, measure)


if __name__ == "__main__":
    sys.exit(main())
