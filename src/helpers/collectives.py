"""Collective operations: their cost models, and (chapter 4) rings built from send/recv.

The latency-bandwidth (α-β) model: sending one message of n bytes between two ranks costs
α + n·β seconds (α: latency per message, β: seconds per byte, 1/β the link's bandwidth).
Chapter 4 fits α and β to measured collectives; chapter 5's cost model predicts with them.
"""

from __future__ import annotations


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
