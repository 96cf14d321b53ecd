"""helpers.collectives: α-β formulas, bytes per topology, the fit, stale SGD, and real Gloo launches
of the worker (semantics, our rings against torch.distributed, a deadlock that must time out, a benchmark)."""

import time

import pandas as pd
import psutil
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import collectives, models, train
from helpers.results import ResultStore

HARDWARE = {"cpu_model": "test CPU", "usable_cores": 2, "gpus": []}


def worker_processes() -> list:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if "helpers.collectives" in " ".join(p.info["cmdline"] or [])
    ]


@pytest.fixture
def no_leftovers():
    yield
    assert not worker_processes(), "a launch left processes behind"


# --- formulas -------------------------------------------------------------------------------------------


def test_ring_broadcast_formula_from_naive_to_pipelined():
    alpha, beta, n = 1e-5, 1e-9, 1e6
    for k in (2, 3, 8):
        naive = collectives.ring_broadcast_seconds(n, k, 1, alpha, beta)
        assert naive == pytest.approx((k - 1) * (alpha + n * beta), rel=1e-12)
        assert collectives.ring_broadcast_seconds(n, k, 10**6, 0.0, beta) == pytest.approx(n * beta, rel=1e-5)
    assert collectives.ring_broadcast_seconds(n, 1, 4, alpha, beta) == 0.0
    assert collectives.ring_broadcast_seconds(100, 4, 4, 1.0, 0.01) == pytest.approx(6 * (1.0 + 0.25))


def test_ring_all_reduce_formula():
    assert collectives.ring_all_reduce_seconds(400, 4, 1.0, 0.01) == pytest.approx(6 * (1.0 + 1.0))
    assert collectives.ring_all_reduce_seconds(400, 1, 1.0, 0.01) == 0.0
    assert collectives.message_seconds(100, 2.0, 0.5) == 52.0


def test_bus_bandwidth_factors():
    factor = collectives.bus_bandwidth_factor
    assert [factor("all_reduce", k) for k in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]
    assert [factor("all_gather", 4), factor("reduce_scatter", 4)] == [0.75, 0.75]
    assert [factor("broadcast", 4), factor("reduce", 8)] == [1.0, 1.0]
    with pytest.raises(ValueError, match="operation must be one of"):
        factor("all_to_all", 2)


# --- bytes per topology ---------------------------------------------------------------------------------


def test_split_sizes_are_those_of_tensor_split():
    for total, parts in [(25, 4), (3, 4), (1001, 3), (0, 2)]:
        expected = [len(piece) for piece in torch.arange(total).tensor_split(parts)]
        assert collectives.split_sizes(total, parts) == expected


def test_topology_bytes_with_uneven_chunks():
    rows = {row["topology"]: row for row in collectives.bytes_per_step_by_topology(100, 4, 2)}
    assert list(rows) == [
        "parameter server (CPU)",
        "all-reduce on the devices",
        "sharded parameter servers (s=2)",
        "ring all-reduce",
    ]

    def moved_and_busiest(topology: str) -> tuple[int, int]:
        return rows[topology]["bytes_moved"], rows[topology]["busiest_link_bytes"]

    assert moved_and_busiest("parameter server (CPU)") == (800, 800)
    assert rows["parameter server (CPU)"]["worker_link_bytes"] == 200
    assert moved_and_busiest("all-reduce on the devices") == (1200, 600)
    # 25 float32 elements in 2 shards of 13 and 12: the larger shard's server carries 2·4·52 bytes
    assert moved_and_busiest("sharded parameter servers (s=2)") == (800, 416)
    assert rows["sharded parameter servers (s=2)"]["busiest"] == "each server"
    # ring chunks of 7, 6, 6, 6 elements: ranks send 152, 152, 148, 148 bytes; rank 1 also receives 152
    assert moved_and_busiest("ring all-reduce") == (600, 304)
    assert all(isinstance(value, int) for topology in rows for value in moved_and_busiest(topology))
    assert all(row["suits"] for row in rows.values())


def test_topology_bytes_of_the_linear_net_on_four_devices():
    gradient = models.parameter_bytes(models.build_model("LinearNet"))
    rows = {row["topology"]: row for row in collectives.bytes_per_step_by_topology(gradient, 4, 4)}
    assert gradient == 48_408_880
    assert rows["ring all-reduce"]["bytes_moved"] == 290_453_280  # 2(k−1)N
    assert rows["ring all-reduce"]["busiest_link_bytes"] == 2 * 72_613_320  # 2(k−1)/k·N each way
    assert rows["sharded parameter servers (s=4)"]["busiest_link_bytes"] == 2 * gradient
    assert rows["parameter server (CPU)"]["busiest_link_bytes"] == 8 * gradient
    one = {row["topology"]: row for row in collectives.bytes_per_step_by_topology(gradient, 1, 1)}
    assert one["ring all-reduce"]["bytes_moved"] == 0 and one["all-reduce on the devices"]["bytes_moved"] == 0


def test_topology_bytes_refuses_bad_input():
    with pytest.raises(ValueError, match="whole number of 4-byte elements"):
        collectives.bytes_per_step_by_topology(102, 2, 1)
    with pytest.raises(ValueError, match="shards ≥ 1"):
        collectives.bytes_per_step_by_topology(100, 2, 0)


# --- the α-β fit ----------------------------------------------------------------------------------------


def test_fit_recovers_alpha_and_beta():
    alpha, beta = 25e-6, 1 / 3e9
    rows = [
        {"operation": "all_reduce", "world_size": k, "bytes": n,
         "seconds": collectives.ring_all_reduce_seconds(n, k, alpha, beta)}
        for k in (1, 2, 3, 4) for n in (1024, 2**16, 2**20, 2**24)
    ]  # fmt: skip
    fit = collectives.fit_alpha_beta(pd.DataFrame(rows[4:]))  # rows of one rank (zero seconds) dropped too
    assert fit["alpha_seconds"] == pytest.approx(alpha, rel=1e-6)
    assert fit["seconds_per_byte"] == pytest.approx(beta, rel=1e-6)
    assert fit["bandwidth_bytes_per_second"] == pytest.approx(3e9, rel=1e-6)


def test_fit_refuses_mixed_operations_and_too_few_rows():
    frame = pd.DataFrame({"operation": ["all_reduce", "broadcast"], "world_size": [2, 2], "bytes": [1, 2],
                          "seconds": [1.0, 2.0]})  # fmt: skip
    with pytest.raises(ValueError, match="one operation at a time"):
        collectives.fit_alpha_beta(frame)
    with pytest.raises(ValueError, match="at least two measurements"):
        collectives.fit_alpha_beta(frame.iloc[:1])


# --- asynchronous SGD -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_data():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(48, 1, 12_000, generator=generator) * 0.1
    targets = torch.randint(0, 10, (48,), generator=generator)
    return TensorDataset(inputs[:32], targets[:32]), TensorDataset(inputs[32:], targets[32:])


def test_staleness_zero_is_synchronous_sgd(tiny_data):
    train_set, test_set = tiny_data
    run = collectives.stale_gradient_training(
        "LinearNet", train_set, test_set, staleness=0, steps=5, batch_size=8, lr=0.05, seed=3, eval_every=2
    )
    torch.manual_seed(3)
    model = models.build_model("LinearNet")
    optimizer = train.make_optimizer("sgd", model.parameters(), 0.05)
    inputs, targets = train_set.tensors
    losses = [
        train.training_step(model, optimizer, inputs[i], targets[i], nn.functional.cross_entropy)[0].item()
        for i in train.step_batches(32, 8, 3, 5)
    ]
    assert [row["batch_loss"] for row in run["history"]] == pytest.approx(losses, rel=1e-6, abs=1e-7)
    assert [row["step"] for row in run["history"] if "test_loss" in row] == [2, 4, 5]
    assert run["history"][-1]["test_loss"] == pytest.approx(train.evaluate(model, test_set)[0], rel=1e-5)


def test_stale_gradients_change_the_trajectory(tiny_data):
    train_set, test_set = tiny_data
    fresh = collectives.stale_gradient_training("LinearNet", train_set, test_set, 0, 4, 8, 0.05, 3)
    stale = collectives.stale_gradient_training("LinearNet", train_set, test_set, 2, 4, 8, 0.05, 3)
    fresh_losses = [row["batch_loss"] for row in fresh["history"]]
    stale_losses = [row["batch_loss"] for row in stale["history"]]
    assert stale_losses[0] == fresh_losses[0]  # step 1: the stale snapshot is the initial parameters
    assert stale_losses[1] != pytest.approx(fresh_losses[1], rel=1e-4)  # step 2 still sees step 0's
    assert "2 step(s) stale" in stale["method"]
    with pytest.raises(ValueError, match="staleness must be"):
        collectives.stale_gradient_training("LinearNet", train_set, test_set, -1, 4, 8, 0.05, 3)


# --- configuration --------------------------------------------------------------------------------------


def test_configs_are_checked_before_anything_starts():
    assert collectives.collective_config("deadlock")["timeout_seconds"] == 5
    with pytest.raises(ValueError, match="task must be one of"):
        collectives.collective_config("gossip")
    with pytest.raises(ValueError, match="unknown verify setting"):
        collectives.collective_config("verify", size=[3])
    with pytest.raises(ValueError, match="unknown operation"):
        collectives.collective_config("benchmark", operations=["all_to_all"])
    with pytest.raises(ValueError, match="timeout_seconds must be in"):
        collectives.collective_config("semantics", timeout_seconds=600)
    with pytest.raises(ValueError, match="NCCL only moves CUDA tensors"):
        collectives.run_task("semantics", 2, backend="nccl")
    with pytest.raises(ValueError, match="needs at least two ranks"):
        collectives.run_task("deadlock", 1)
    with pytest.raises(ValueError, match="chunks must be a positive integer"):
        collectives.ring_broadcast(torch.zeros(3), chunks=0)


# --- real launches with Gloo ----------------------------------------------------------------------------

SEMANTICS_TWO_RANKS = {
    "send_recv": [[0, 1], [0, 1]],
    "broadcast": [[0, 1], [0, 1]],
    "scatter": [[0], [1]],
    "gather": [[0, 1, 10, 11], None],
    "reduce": [[10, 12], None],
    "all_reduce": [[10, 12], [10, 12]],
    "all_gather": [[0, 1, 10, 11], [0, 1, 10, 11]],
    "reduce_scatter": [[10], [12]],
    "all_to_all": [[0, 10], [1, 11]],
    "all_to_all_single": [[0, 10], [1, 11]],
    "barrier": [[0, 1], [10, 11]],
}
SEMANTICS_THREE_RANKS = {
    "send_recv": [[0, 1, 2], [0, 1, 2], [20, 21, 22]],
    "broadcast": [[0, 1, 2]] * 3,
    "scatter": [[0], [1], [2]],
    "gather": [[0, 1, 2, 10, 11, 12, 20, 21, 22], None, None],
    "reduce": [[30, 33, 36], None, None],
    "all_reduce": [[30, 33, 36]] * 3,
    "all_gather": [[0, 1, 2, 10, 11, 12, 20, 21, 22]] * 3,
    "reduce_scatter": [[30], [33], [36]],
    "all_to_all": [[0, 10, 20], [1, 11, 21], [2, 12, 22]],
    "all_to_all_single": [[0, 10, 20], [1, 11, 21], [2, 12, 22]],
    "barrier": [[0, 1, 2], [10, 11, 12], [20, 21, 22]],
}
GLOO_CPU_LACKS = {"all_to_all"}  # torch 2.11's Gloo offers only the single-tensor all_to_all


@pytest.mark.parametrize(("world_size", "expected"), [(2, SEMANTICS_TWO_RANKS), (3, SEMANTICS_THREE_RANKS)])
def test_semantics_table_and_support_matrix(tmp_path, no_leftovers, world_size, expected):
    assert collectives.expected_semantics(world_size) == expected
    results = collectives.run_task("semantics", world_size, time_limit_seconds=120, output=tmp_path)
    frame = collectives.semantics_frame(results)
    assert list(frame["operation"].unique()) == list(expected)
    for operation, per_rank in expected.items():
        rows = frame[frame["operation"] == operation]
        assert rows["rank"].tolist() == list(range(world_size))
        assert rows["before"].tolist() == [[10 * r + i for i in range(world_size)] for r in range(world_size)]
        if operation in GLOO_CPU_LACKS:
            assert rows["after"].tolist() == [None] * world_size
            assert all(status.startswith("unsupported: ") for status in rows["status"])
        else:
            assert rows["after"].tolist() == per_rank, operation
            assert set(rows["status"]) == {"ok"}
    matrix = {row["operation"]: row for row in collectives.support_matrix(results)}
    assert {op for op, row in matrix.items() if not row["supported"]} == GLOO_CPU_LACKS
    assert matrix["all_to_all"]["message"] == "Backend gloo does not support alltoall"
    assert {(row["backend"], row["device"]) for row in matrix.values()} == {("gloo", "cpu")}


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_our_algorithms_equal_torch_distributed_exactly(tmp_path, no_leftovers, world_size):
    results = collectives.run_task("verify", world_size, time_limit_seconds=120, output=tmp_path)
    assert len(results) == world_size
    for result in results:
        assert {world_size - 1, world_size + 1, 1, 7, 1000, 1001} <= set(result["sizes"])
        checks = result["checks"]
        failed = [c for c in checks if not c["equal"] or c["max_abs_difference"] != 0]
        assert not failed, failed[:3]
        kinds = {(c["check"], c["dtype"]) for c in checks}
        assert {"ring_all_reduce", "parameter_server_step", "ring_broadcast"} <= {kind for kind, _ in kinds}
        assert {dtype for _, dtype in kinds} == {"int64", "float64"}
        broadcasts = {(c["src"], c["chunks"]) for c in checks if c["check"] == "ring_broadcast"}
        assert broadcasts == {(src, s) for src in (0, world_size - 1) for s in (1, 2, 3, 8)}


def test_a_skipped_all_reduce_ends_by_timeout(tmp_path, no_leftovers):
    started = time.monotonic()
    results = collectives.run_task("deadlock", 3, time_limit_seconds=90, output=tmp_path, skip_rank=1)
    assert time.monotonic() - started < 5 + 40  # the timeout, plus starting three Python processes
    assert [r["skipped_all_reduce"] for r in results] == [False, True, False]
    for waiting in (results[0], results[2]):
        assert waiting["timed_out"] is True and waiting["timeout_seconds"] == 5
        assert 5 <= waiting["seconds"] < 5 + 3
        assert waiting["error"].startswith("Timed out waiting 5000ms")


def test_benchmark_rows_and_reuse_through_the_store(tmp_path, no_leftovers):
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    settings = dict(sizes_bytes=[1024, 4100], chunks=[1, 2], iterations=2, warmup_iterations=1)
    record = collectives.stored_benchmark(store, 2, time_limit_seconds=120, **settings)
    frame = collectives.benchmark_frame(record["result"])
    assert (frame["status"] == "ok").all()
    labels = frame["label"].unique().tolist()
    assert labels == [
        "all_reduce (torch.distributed)",
        "all_reduce (our ring)",
        "all_reduce (our parameter server)",
        "all_gather (torch.distributed)",
        "reduce_scatter (torch.distributed)",
        "broadcast (torch.distributed)",
        "broadcast (our ring, S=1)",
        "broadcast (our ring, S=2)",
    ]
    assert frame[frame["operation"] == "all_gather"]["bytes"].tolist() == [1024, 4096]  # k parts of 512
    assert frame[frame["operation"] == "all_reduce"]["bytes"].tolist() == [1024, 4100]
    for row in frame.itertuples():
        factor = collectives.bus_bandwidth_factor(row.collective, 2)
        assert row.algbw_bytes_per_second == pytest.approx(row.bytes / row.seconds, rel=1e-12)
        assert row.busbw_bytes_per_second == pytest.approx(row.algbw_bytes_per_second * factor, rel=1e-12)
        assert len(row.seconds_all) == 2 and row.seconds == pytest.approx(sum(row.seconds_all) / 2)
    assert frame["busbw_GBps"].tolist() == pytest.approx((frame["busbw_bytes_per_second"] / 1e9).tolist())
    assert "median over 2 iterations of the slowest rank's time" in record["result"]["method"]
    started = time.monotonic()
    again = collectives.stored_benchmark(store, 2, time_limit_seconds=120, **settings)
    assert again == record and time.monotonic() - started < 2  # reused, not launched again


def synthetic_benchmark(alpha: float, beta: float) -> pd.DataFrame:
    """Rows as benchmark_frame gives them, with times exactly those of the α-β model."""
    rows = []
    for nbytes in (2**10, 2**16, 2**20, 2**24, 2**26):
        for operation in ("all_reduce", "all_reduce_ring"):
            seconds = collectives.ring_all_reduce_seconds(nbytes, 2, alpha, beta) * (
                1.0 if operation == "all_reduce" else 1.25
            )
            rows.append({"operation": operation, "collective": "all_reduce", "chunks": None,
                         "bytes": nbytes, "seconds": seconds, "busbw_GBps": nbytes / seconds / 1e9,
                         "status": "ok"})  # fmt: skip
        for chunks in (1, 4):
            seconds = collectives.ring_broadcast_seconds(nbytes, 2, chunks, alpha, beta)
            rows.append({"operation": "ring_broadcast", "collective": "broadcast", "chunks": chunks,
                         "bytes": nbytes, "seconds": seconds, "busbw_GBps": nbytes / seconds / 1e9,
                         "status": "ok"})  # fmt: skip
    return pd.DataFrame(rows).assign(world_size=2, backend="gloo", device="cpu", label="x")


def test_fits_per_implementation_and_the_model_seconds_they_predict():
    frame = synthetic_benchmark(alpha=20e-6, beta=1e-9)
    fits = collectives.alpha_beta_fits(frame)
    assert fits["operation"].tolist() == ["all_reduce", "all_reduce_ring", "ring_broadcast"]
    library = fits.query("operation == 'all_reduce'").iloc[0]
    assert library["alpha_seconds"] == pytest.approx(20e-6, rel=1e-6)
    assert library["seconds_per_byte"] == pytest.approx(1e-9, rel=1e-6)
    modelled = collectives.with_model_seconds(frame, fits, "all_reduce")
    library_rows = modelled.query("operation == 'all_reduce'")
    assert library_rows["model_seconds"].tolist() == pytest.approx(library_rows["seconds"].tolist(), rel=1e-6)
    naive = fits.query("operation == 'ring_broadcast'").iloc[0]  # fitted on the one-chunk rows only
    assert (naive["alpha_seconds"], naive["seconds_per_byte"]) == pytest.approx((20e-6, 1e-9), rel=1e-6)
    broadcasts = collectives.with_model_seconds(frame, fits, "ring_broadcast").query("chunks == 4")
    assert broadcasts["model_seconds"].tolist() == pytest.approx(broadcasts["seconds"].tolist(), rel=1e-6)


def test_ring_against_library_is_the_busbw_ratio_at_large_messages():
    frame = synthetic_benchmark(alpha=20e-6, beta=1e-9)
    other = frame.query("operation == 'all_reduce'").assign(
        operation="all_gather", bytes=lambda f: f["bytes"] - 4
    )
    ratio = collectives.ring_against_library(pd.concat([frame, other]), min_bytes=2**24)
    assert ratio["bytes"].tolist() == [2**24, 2**26]
    assert ratio["ring / dist"].tolist() == pytest.approx([0.8, 0.8])


def test_semantics_expectation_support_table_and_verify_summary():
    table = pd.DataFrame(
        [{"operation": "all_reduce", "rank": r, "after": [10, 12], "status": "ok"} for r in range(2)]
        + [{"operation": "broadcast", "rank": r, "after": [0, 1], "status": "ok"} for r in range(2)]
        + [{"operation": "all_to_all", "rank": r, "after": None, "status": "unsupported"} for r in range(2)]
    )
    assert collectives.matches_expectation(table, 2) == {"broadcast": True, "all_reduce": True}
    table.loc[1, "after"] = [10, 13]
    assert collectives.matches_expectation(table, 2)["all_reduce"] is False
    support = pd.DataFrame(
        [
            {"backend": "gloo", "device": "cpu", "operation": "all_reduce", "supported": True},
            {"backend": "gloo", "device": "cpu", "operation": "all_to_all", "supported": False},
            {"backend": "nccl", "device": "cpu", "operation": "(all)", "supported": False},
        ]
    )
    matrix = collectives.support_matrix_table(support)
    assert matrix.loc["all_reduce", ("gloo", "cpu")] == "yes"
    assert matrix.loc["all_to_all", ("gloo", "cpu")] == "no"
    assert matrix.loc["(all)", ("nccl", "cpu")] == "no" and matrix.loc["all_reduce", ("nccl", "cpu")] == ""
    result = {"checks": [{"check": "ring_all_reduce"}, {"check": "ring_all_reduce (transposed 3×7)"},
                         {"check": "ring_broadcast"}], "sizes": [1, 3], "all_equal": True}  # fmt: skip
    assert collectives.verify_summary(result, 2) == {
        "ranks": 2, "algorithms": "ring_all_reduce, ring_broadcast", "sizes": "1, 3", "checks": 3,
        "all exactly equal": True,
    }  # fmt: skip


def test_support_probe_refuses_with_reasons_without_gpus(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine every combination runs")
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    support = collectives.probe_support(store, backends=("nccl",), devices=("cpu", "cuda"))
    assert support["operation"].tolist() == ["(all)", "(all)"] and not support["supported"].any()
    assert support["message"].iloc[0].startswith("NCCL only moves CUDA tensors")
