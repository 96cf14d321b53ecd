"""The communication model of chapter 4: what collectives leave on each rank, what they cost, what they move.

- semantics: what every rank holds after each collective (``expected_semantics``, written by hand);
- the latency-bandwidth (α-β) model: sending one message of n bytes between two ranks costs
  α + n·β seconds (α: latency per message, β: seconds per byte, 1/β the link's bandwidth); the ring
  all-reduce and the pipelined ring broadcast in those terms, and their fit to measurements;
- nccl-tests' bus bandwidth factors;
- the bytes one data-parallel step moves under each topology of the seed lecture.

Pure arithmetic on numbers and tables: chapter 5's cost model imports it without importing a worker.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import nnls

SEMANTIC_OPERATIONS = (
    "send_recv", "broadcast", "scatter", "gather", "reduce", "all_reduce", "all_gather", "reduce_scatter",
    "all_to_all", "all_to_all_single", "barrier",
)  # fmt: skip
# Each benchmarked operation: the collective whose bus factor applies, and its label in tables and figures.
BENCHMARK_OPERATIONS = {
    "all_reduce": ("all_reduce", "all_reduce (torch.distributed)"),
    "all_reduce_ring": ("all_reduce", "all_reduce (our ring)"),
    "parameter_server": ("all_reduce", "all_reduce (our parameter server)"),
    "all_gather": ("all_gather", "all_gather (torch.distributed)"),
    "reduce_scatter": ("reduce_scatter", "reduce_scatter (torch.distributed)"),
    "broadcast": ("broadcast", "broadcast (torch.distributed)"),
    "ring_broadcast": ("broadcast", "broadcast (our ring, S={chunks})"),
}
ALL_REDUCE_IMPLEMENTATIONS = ("all_reduce", "all_reduce_ring", "parameter_server")


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

    S = 1 is the naive ring, (k−1)(α + nβ). More chunks overlap the hops but each adds a latency α: the
    time is smallest at ``optimal_chunks`` and grows again beyond it.
    """
    if world_size == 1:
        return 0.0
    return (chunks + world_size - 2) * message_seconds(nbytes / chunks, alpha_seconds, seconds_per_byte)


def optimal_chunks(nbytes: float, world_size: int, alpha_seconds: float, seconds_per_byte: float) -> float:
    """The chunk count S* that minimises the pipelined ring broadcast's (S+k−2)(α + Nβ/S).

    d/dS = α − (k−2)·Nβ/S² = 0 gives S* = √((k−2)·Nβ/α): more chunks overlap the hops, each adds α.
    With two ranks there is one hop and nothing to overlap, so S* = 1: every extra chunk only adds
    latency. At S* the time is (√(Nβ) + √((k−2)α))²: it approaches Nβ only as α → 0.
    """
    if world_size <= 2 or alpha_seconds <= 0:
        return 1.0 if world_size <= 2 else math.inf
    return max(1.0, math.sqrt((world_size - 2) * nbytes * seconds_per_byte / alpha_seconds))


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


def parameter_server_seconds(
    nbytes: float, world_size: int, alpha_seconds: float, seconds_per_byte: float
) -> float:
    """Parameter-server step of ``nbytes`` on k ranks, one of them the server: 2(α + (k−1)·n·β).

    Two steps (``p2p.parameter_server_schedule``): the k−1 workers' tensors into the server, posted
    together, then the sum back out. Their latencies overlap; their bytes share the server's link, which
    carries (k−1)·n each way. Zero for one rank.
    """
    if world_size == 1:
        return 0.0
    return 2 * message_seconds((world_size - 1) * nbytes, alpha_seconds, seconds_per_byte)


def alpha_beta_terms(operation: str, world_size, nbytes, chunks=1) -> tuple:
    """(latencies, bytes) of one call: its time is latencies·α + bytes·β, for each implementation.

    ring all-reduce (``all_reduce``, ``all_reduce_ring``): 2(k−1) messages of n/k bytes; ring broadcast
    in S chunks: S+k−2 messages of n/S; parameter server: 2 steps, each (k−1)·n bytes through the server.
    Works on numbers and on numpy arrays alike.
    """
    k, n = world_size, nbytes
    if operation == "ring_broadcast":
        return chunks + k - 2, (chunks + k - 2) * n / chunks
    if operation == "parameter_server":
        return 2 * np.ones_like(k, dtype=float), 2 * (k - 1) * n
    if operation in ("all_reduce", "all_reduce_ring"):
        return 2 * (k - 1), 2 * (k - 1) * n / k
    raise ValueError(f"no α-β formula for {operation!r}")


def alpha_beta_seconds(
    operation: str, nbytes, world_size, alpha_seconds: float, seconds_per_byte: float, chunks=1
):
    """What the α-β model predicts for one call of ``operation`` (``alpha_beta_terms``)."""
    latencies, moved = alpha_beta_terms(operation, world_size, nbytes, chunks)
    return latencies * alpha_seconds + moved * seconds_per_byte


def fit_alpha_beta(frame: pd.DataFrame) -> dict:
    """α and β fitted to measured ``bytes``, ``world_size``, ``seconds`` of one operation.

    Each row's time is latencies·α + bytes·β with the terms of its implementation (``alpha_beta_terms``,
    from the ``operation`` column; without one, the ring all-reduce's): linear in (α, β), so non-negative
    least squares on relative errors (each row divided by its seconds) fits them, and small messages,
    which carry the information about α, weigh as much as large ones. ``median_relative_error`` says how
    far the fitted line lies from the points. Rows of one rank carry no information and are dropped; a
    frame holding several ``operation`` values is refused (fit one at a time).

    Where the rows keep every iteration (``seconds_all``), each row's time is the lower quartile of its
    iterations: what the link does when nothing interrupts it. On a CPU shared with other processes a
    quarter or more of the iterations can stall for milliseconds (the scheduler's time slices), and a fit
    to medians then reads the stalls as latency (α 16× too large in one run here).
    """
    if "operation" in frame and frame["operation"].nunique() > 1:
        raise ValueError(f"fit one operation at a time, not {sorted(frame['operation'].unique())}")
    rows = frame[frame["world_size"] > 1]
    if len(rows) < 2:
        raise ValueError("fitting α and β needs at least two measurements with two or more ranks")
    operation = rows["operation"].iloc[0] if "operation" in rows else "all_reduce"
    chunks = rows["chunks"].to_numpy(dtype=float) if operation == "ring_broadcast" else 1.0
    latencies, nbytes = alpha_beta_terms(
        operation, rows["world_size"].to_numpy(dtype=float), rows["bytes"].to_numpy(dtype=float), chunks
    )
    if "seconds_all" in rows:
        seconds = np.array([np.percentile(times, 25) for times in rows["seconds_all"]], dtype=float)
    else:
        seconds = rows["seconds"].to_numpy(dtype=float)
    design = np.column_stack([latencies, nbytes]) / seconds[:, None]
    scale = np.linalg.norm(design, axis=0)  # columns differ by ~10⁷: solve in units of equal size
    solution, _ = nnls(design / scale, np.ones_like(seconds))
    alpha, beta = solution / scale
    modelled = latencies * alpha + nbytes * beta
    return {
        "alpha_seconds": float(alpha),
        "seconds_per_byte": float(beta),
        "bandwidth_bytes_per_second": float(1 / beta) if beta > 0 else math.inf,
        "median_relative_error": float(np.median(np.abs(modelled / seconds - 1))),
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

    Every count is per direction: links are full duplex, so what limits a step is the larger of what a
    participant sends and what it receives. ``bytes_moved`` counts every byte once, at its sender;
    ``busiest_link_bytes`` is the busiest participant's larger direction (that link sets the step's
    communication time) and ``worker_link_bytes`` a worker's. Ring chunks are whole elements of
    ``element_bytes``, split like ``torch.tensor_split``.

    - parameter server on the CPU (the seed's picture): each of k workers sends N and receives N; the
      server receives kN and sends kN.
    - parameter server on one of the ranks (``p2p.parameter_server_step``): its own gradient need not
      travel, so it receives (k−1)N and sends (k−1)N.
    - all-reduce on the devices (direct exchange): each device sends its N to every other device:
      (k−1)N each way per device, k(k−1)N in all.
    - s sharded parameter servers: each worker sends N/s to each server and gets N/s back; a server
      receives and sends k times its largest shard.
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
    ring_link = max(max(sent, received) for sent, received in zip(ring_sent, ring_received, strict=True))
    on_rank = (k - 1) * n
    return [
        {
            "topology": "parameter server on the CPU",
            "bytes_moved": 2 * k * n,
            "busiest_link_bytes": k * n,
            "busiest": "the server",
            "worker_link_bytes": n,
            "suits": "few workers; the server's link grows with k and becomes the bottleneck",
        },
        {
            "topology": "parameter server on a rank",
            "bytes_moved": 2 * on_rank,
            "busiest_link_bytes": on_rank,
            "busiest": "the server rank" if k > 2 else "both ranks",
            "worker_link_bytes": n if k > 1 else 0,
            "suits": "the same as on the CPU, one gradient fewer to move",
        },
        {
            "topology": "all-reduce on the devices",
            "bytes_moved": k * (k - 1) * n,
            "busiest_link_bytes": (k - 1) * n,
            "busiest": "every device",
            "worker_link_bytes": (k - 1) * n,
            "suits": "a few devices joined all-to-all (NVLink/NVSwitch); traffic grows as k²",
        },
        {
            "topology": f"sharded parameter servers (s={s})",
            "bytes_moved": 2 * k * n,
            "busiest_link_bytes": max(k * largest_shard, n),
            "busiest": "each server" if k * largest_shard >= n else "every worker",
            "worker_link_bytes": n,
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
