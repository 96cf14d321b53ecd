"""helpers.collectives.model: α-β formulas and their fit, bus factors, bytes per topology, semantics."""

import pandas as pd
import pytest
import torch

from helpers import models
from helpers.collectives import model

# --- formulas -------------------------------------------------------------------------------------------


def test_ring_broadcast_formula_from_naive_to_pipelined():
    alpha, beta, n = 1e-5, 1e-9, 1e6
    for k in (2, 3, 8):
        naive = model.ring_broadcast_seconds(n, k, 1, alpha, beta)
        assert naive == pytest.approx((k - 1) * (alpha + n * beta), rel=1e-12)
        assert model.ring_broadcast_seconds(n, k, 10**6, 0.0, beta) == pytest.approx(n * beta, rel=1e-5)
    assert model.ring_broadcast_seconds(n, 1, 4, alpha, beta) == 0.0
    assert model.ring_broadcast_seconds(100, 4, 4, 1.0, 0.01) == pytest.approx(6 * (1.0 + 0.25))


def test_ring_all_reduce_formula():
    assert model.ring_all_reduce_seconds(400, 4, 1.0, 0.01) == pytest.approx(6 * (1.0 + 1.0))
    assert model.ring_all_reduce_seconds(400, 1, 1.0, 0.01) == 0.0
    assert model.message_seconds(100, 2.0, 0.5) == 52.0


def test_parameter_server_formula_and_the_terms_every_fit_uses():
    # 2 steps; each carries the k−1 workers' 100 B through the server: 2(1 + 3·100·0.01) = 8 at k = 4
    assert model.parameter_server_seconds(100, 4, 1.0, 0.01) == pytest.approx(8.0)
    assert model.parameter_server_seconds(100, 2, 1.0, 0.01) == pytest.approx(4.0)  # 2(1 + 1)
    assert model.parameter_server_seconds(100, 1, 1.0, 0.01) == 0.0
    assert model.alpha_beta_terms("all_reduce", 4, 400) == (6, 600)  # 2(k−1) messages of N/k
    assert model.alpha_beta_terms("all_reduce_ring", 2, 400) == (2, 400)
    assert model.alpha_beta_terms("parameter_server", 4, 400) == (2, 2400)  # 2 steps of (k−1)N
    assert model.alpha_beta_terms("ring_broadcast", 3, 400, 4) == (5, 500)  # S+k−2 messages of N/S
    assert model.alpha_beta_seconds("ring_broadcast", 100, 4, 1.0, 0.01, 4) == pytest.approx(7.5)
    with pytest.raises(ValueError, match="no α-β formula for 'all_gather'"):
        model.alpha_beta_terms("all_gather", 2, 100)


def test_bus_bandwidth_factors():
    factor = model.bus_bandwidth_factor
    assert [factor("all_reduce", k) for k in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]
    assert [factor("all_gather", 4), factor("reduce_scatter", 4)] == [0.75, 0.75]
    assert [factor("broadcast", 4), factor("reduce", 8)] == [1.0, 1.0]
    with pytest.raises(ValueError, match="operation must be one of"):
        factor("all_to_all", 2)


# --- bytes per topology ---------------------------------------------------------------------------------


def test_split_sizes_are_those_of_tensor_split():
    for total, parts in [(25, 4), (3, 4), (1001, 3), (0, 2)]:
        expected = [len(piece) for piece in torch.arange(total).tensor_split(parts)]
        assert model.split_sizes(total, parts) == expected


def test_topology_bytes_with_uneven_chunks():
    rows = {row["topology"]: row for row in model.bytes_per_step_by_topology(100, 4, 2)}
    assert list(rows) == [
        "parameter server on the CPU",
        "parameter server on a rank",
        "all-reduce on the devices",
        "sharded parameter servers (s=2)",
        "ring all-reduce",
    ]

    def moved_and_busiest(topology: str) -> tuple[int, int]:
        return rows[topology]["bytes_moved"], rows[topology]["busiest_link_bytes"]

    # every count per direction: the server receives 4 gradients of 100 B and sends 4 back
    assert moved_and_busiest("parameter server on the CPU") == (800, 400)
    assert rows["parameter server on the CPU"]["worker_link_bytes"] == 100
    assert moved_and_busiest("parameter server on a rank") == (600, 300)  # its own gradient stays
    assert moved_and_busiest("all-reduce on the devices") == (1200, 300)
    # 25 float32 elements in 2 shards of 13 and 12: the larger shard's server receives 4·52 bytes
    assert moved_and_busiest("sharded parameter servers (s=2)") == (800, 208)
    assert rows["sharded parameter servers (s=2)"]["busiest"] == "each server"
    # ring chunks of 7, 6, 6, 6 elements: ranks send 152, 152, 148, 148 bytes and receive as much
    assert moved_and_busiest("ring all-reduce") == (600, 152)
    assert all(isinstance(value, int) for topology in rows for value in moved_and_busiest(topology))
    assert all(row["suits"] for row in rows.values())


def test_topology_bytes_of_the_linear_net_on_four_devices():
    gradient = models.parameter_bytes(models.build_model("LinearNet"))
    rows = {row["topology"]: row for row in model.bytes_per_step_by_topology(gradient, 4, 4)}
    assert gradient == 48_408_880
    assert rows["ring all-reduce"]["bytes_moved"] == 290_453_280  # 2(k−1)N
    assert rows["ring all-reduce"]["busiest_link_bytes"] == 72_613_320  # 2(k−1)/k·N each way
    assert rows["sharded parameter servers (s=4)"]["busiest_link_bytes"] == gradient
    assert rows["parameter server on the CPU"]["busiest_link_bytes"] == 4 * gradient
    assert rows["parameter server on a rank"]["busiest_link_bytes"] == 3 * gradient
    one = {row["topology"]: row for row in model.bytes_per_step_by_topology(gradient, 1, 1)}
    assert one["ring all-reduce"]["bytes_moved"] == 0 and one["all-reduce on the devices"]["bytes_moved"] == 0


def test_the_best_chunk_count_of_a_pipelined_broadcast():
    alpha, beta, n = 1e-4, 1e-9, 2**28
    best = model.optimal_chunks(n, 4, alpha, beta)
    assert best == pytest.approx(((4 - 2) * n * beta / alpha) ** 0.5)
    times = {s: model.ring_broadcast_seconds(n, 4, s, alpha, beta) for s in range(1, 200)}
    assert min(times, key=times.get) in (int(best), int(best) + 1)  # the integer next to S* is fastest
    at_best = model.ring_broadcast_seconds(n, 4, best, alpha, beta)
    assert at_best == pytest.approx(((n * beta) ** 0.5 + (2 * alpha) ** 0.5) ** 2)  # never down to Nβ
    assert model.optimal_chunks(n, 2, alpha, beta) == 1.0  # one hop: nothing to overlap


def test_topology_bytes_refuses_bad_input():
    with pytest.raises(ValueError, match="whole number of 4-byte elements"):
        model.bytes_per_step_by_topology(102, 2, 1)
    with pytest.raises(ValueError, match="shards ≥ 1"):
        model.bytes_per_step_by_topology(100, 2, 0)


# --- the α-β fit ----------------------------------------------------------------------------------------


def test_fit_recovers_alpha_and_beta():
    alpha, beta = 25e-6, 1 / 3e9
    rows = [
        {"operation": "all_reduce", "world_size": k, "bytes": n,
         "seconds": model.ring_all_reduce_seconds(n, k, alpha, beta)}
        for k in (1, 2, 3, 4) for n in (1024, 2**16, 2**20, 2**24)
    ]  # fmt: skip
    fit = model.fit_alpha_beta(pd.DataFrame(rows[4:]))  # rows of one rank (zero seconds) dropped too
    assert fit["alpha_seconds"] == pytest.approx(alpha, rel=1e-6)
    assert fit["seconds_per_byte"] == pytest.approx(beta, rel=1e-6)
    assert fit["bandwidth_bytes_per_second"] == pytest.approx(3e9, rel=1e-6)


def test_each_implementation_is_fitted_with_its_own_formula():
    alpha, beta = 40e-6, 1 / 2e9
    sizes = (1024, 2**16, 2**20, 2**24)
    server = pd.DataFrame(
        [{"operation": "parameter_server", "world_size": k, "bytes": n,
          "seconds": model.parameter_server_seconds(n, k, alpha, beta)} for k in (2, 3) for n in sizes]
    )  # fmt: skip
    fit = model.fit_alpha_beta(server)
    assert (fit["alpha_seconds"], fit["seconds_per_byte"]) == pytest.approx((alpha, beta), rel=1e-6)
    assert fit["median_relative_error"] == pytest.approx(0.0, abs=1e-9)
    # the same times read with the ring's formula: at k = 2 the ring moves N/k per message, the server N,
    # so the ring's β comes out twice as large and the "bandwidth" half what the link carried
    as_ring = model.fit_alpha_beta(server.query("world_size == 2").drop(columns="operation"))
    assert as_ring["seconds_per_byte"] == pytest.approx(2 * beta, rel=1e-6)
    off = server.assign(seconds=server["seconds"] * [1.1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8])
    assert model.fit_alpha_beta(off)["median_relative_error"] > 0


def test_fit_refuses_mixed_operations_and_too_few_rows():
    frame = pd.DataFrame({"operation": ["all_reduce", "broadcast"], "world_size": [2, 2], "bytes": [1, 2],
                          "seconds": [1.0, 2.0]})  # fmt: skip
    with pytest.raises(ValueError, match="one operation at a time"):
        model.fit_alpha_beta(frame)
    with pytest.raises(ValueError, match="at least two measurements"):
        model.fit_alpha_beta(frame.iloc[:1])


# --- real launches with Gloo ----------------------------------------------------------------------------
