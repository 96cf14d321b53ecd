"""helpers.collectives.runs: settings refused before launching, records reused, the chapter's tables."""

import time

import pandas as pd
import pytest
import torch

from helpers.collectives import model, p2p, runs
from helpers.results import ResultStore

HARDWARE = {"cpu_model": "test CPU", "usable_cores": 2, "gpus": []}


# --- configuration --------------------------------------------------------------------------------------


def test_configs_are_checked_before_anything_starts():
    assert runs.collective_config("deadlock")["timeout_seconds"] == 5
    with pytest.raises(ValueError, match="task must be one of"):
        runs.collective_config("gossip")
    with pytest.raises(ValueError, match="unknown verify setting"):
        runs.collective_config("verify", size=[3])
    with pytest.raises(ValueError, match="unknown operation"):
        runs.collective_config("benchmark", operations=["all_to_all"])
    with pytest.raises(ValueError, match="timeout_seconds must be in"):
        runs.collective_config("semantics", timeout_seconds=600)
    with pytest.raises(ValueError, match="NCCL only moves CUDA tensors"):
        runs.run_task("semantics", 2, backend="nccl")
    with pytest.raises(ValueError, match="needs at least two ranks"):
        runs.run_task("deadlock", 1)
    with pytest.raises(ValueError, match="chunks must be a positive integer"):
        p2p.ring_broadcast(torch.zeros(3), chunks=0)


def test_benchmark_rows_and_reuse_through_the_store(tmp_path, no_leftovers):
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    settings = dict(sizes_bytes=[1024, 4100], chunks=[1, 2], iterations=2, warmup_iterations=1)
    record = runs.stored_benchmark(store, 2, time_limit_seconds=120, **settings)
    frame = runs.benchmark_frame(record["result"])
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
        factor = model.bus_bandwidth_factor(row.collective, 2)
        assert row.algbw_bytes_per_second == pytest.approx(row.bytes / row.seconds, rel=1e-12)
        assert row.busbw_bytes_per_second == pytest.approx(row.algbw_bytes_per_second * factor, rel=1e-12)
        assert len(row.seconds_all) == 2 and row.seconds == pytest.approx(sum(row.seconds_all) / 2)
    assert frame["busbw_GBps"].tolist() == pytest.approx((frame["busbw_bytes_per_second"] / 1e9).tolist())
    assert "median over 2 iterations of the slowest rank's time" in record["result"]["method"]
    started = time.monotonic()
    again = runs.stored_benchmark(store, 2, time_limit_seconds=120, **settings)
    assert again == record and time.monotonic() - started < 2  # reused, not launched again


def synthetic_benchmark(alpha: float, beta: float) -> pd.DataFrame:
    """Rows as benchmark_frame gives them, with times exactly those of the α-β model."""
    rows = []
    for nbytes in (2**10, 2**16, 2**20, 2**24, 2**26):
        for operation in ("all_reduce", "all_reduce_ring"):
            seconds = model.ring_all_reduce_seconds(nbytes, 2, alpha, beta) * (
                1.0 if operation == "all_reduce" else 1.25
            )
            rows.append({"operation": operation, "collective": "all_reduce", "chunks": None,
                         "bytes": nbytes, "seconds": seconds, "busbw_GBps": nbytes / seconds / 1e9,
                         "status": "ok"})  # fmt: skip
        for chunks in (1, 4):
            seconds = model.ring_broadcast_seconds(nbytes, 2, chunks, alpha, beta)
            rows.append({"operation": "ring_broadcast", "collective": "broadcast", "chunks": chunks,
                         "bytes": nbytes, "seconds": seconds, "busbw_GBps": nbytes / seconds / 1e9,
                         "status": "ok"})  # fmt: skip
    return pd.DataFrame(rows).assign(world_size=2, backend="gloo", device="cpu", label="x")


def test_fits_per_implementation_and_the_model_seconds_they_predict():
    frame = synthetic_benchmark(alpha=20e-6, beta=1e-9)
    fits = runs.alpha_beta_fits(frame)
    assert fits["operation"].tolist() == ["all_reduce", "all_reduce_ring", "ring_broadcast"]
    library = fits.query("operation == 'all_reduce'").iloc[0]
    assert library["alpha_seconds"] == pytest.approx(20e-6, rel=1e-6)
    assert library["seconds_per_byte"] == pytest.approx(1e-9, rel=1e-6)
    modelled = runs.with_model_seconds(frame, fits, "all_reduce")
    library_rows = modelled.query("operation == 'all_reduce'")
    assert library_rows["model_seconds"].tolist() == pytest.approx(library_rows["seconds"].tolist(), rel=1e-6)
    naive = fits.query("operation == 'ring_broadcast'").iloc[0]  # fitted on the one-chunk rows only
    assert (naive["alpha_seconds"], naive["seconds_per_byte"]) == pytest.approx((20e-6, 1e-9), rel=1e-6)
    broadcasts = runs.with_model_seconds(frame, fits, "ring_broadcast").query("chunks == 4")
    assert broadcasts["model_seconds"].tolist() == pytest.approx(broadcasts["seconds"].tolist(), rel=1e-6)


def test_ring_against_library_is_the_busbw_ratio_at_large_messages():
    frame = synthetic_benchmark(alpha=20e-6, beta=1e-9)
    other = frame.query("operation == 'all_reduce'").assign(
        operation="all_gather", bytes=lambda f: f["bytes"] - 4
    )
    ratio = runs.ring_against_library(pd.concat([frame, other]), min_bytes=2**24)
    assert ratio["bytes"].tolist() == [2**24, 2**26]
    assert ratio["ring / dist"].tolist() == pytest.approx([0.8, 0.8])


def test_semantics_expectation_support_table_and_verify_summary():
    table = pd.DataFrame(
        [{"operation": "all_reduce", "rank": r, "after": [10, 12], "status": "ok"} for r in range(2)]
        + [{"operation": "broadcast", "rank": r, "after": [0, 1], "status": "ok"} for r in range(2)]
        + [{"operation": "all_to_all", "rank": r, "after": None, "status": "unsupported"} for r in range(2)]
    )
    assert runs.matches_expectation(table, 2) == {"broadcast": True, "all_reduce": True}
    table.loc[1, "after"] = [10, 13]
    assert runs.matches_expectation(table, 2)["all_reduce"] is False
    support = pd.DataFrame(
        [
            {"backend": "gloo", "device": "cpu", "operation": "all_reduce", "supported": True},
            {"backend": "gloo", "device": "cpu", "operation": "all_to_all", "supported": False},
            {"backend": "nccl", "device": "cpu", "operation": "(all)", "supported": False},
        ]
    )
    matrix = runs.support_matrix_table(support)
    assert matrix.loc["all_reduce", ("gloo", "cpu")] == "yes"
    assert matrix.loc["all_to_all", ("gloo", "cpu")] == "no"
    assert matrix.loc["(all)", ("nccl", "cpu")] == "no" and matrix.loc["all_reduce", ("nccl", "cpu")] == ""
    result = {"checks": [{"check": "ring_all_reduce"}, {"check": "ring_all_reduce (transposed 3×7)"},
                         {"check": "ring_broadcast"}], "sizes": [1, 3], "all_equal": True}  # fmt: skip
    assert runs.verify_summary(result, 2) == {
        "ranks": 2, "algorithms": "ring_all_reduce, ring_broadcast", "sizes": "1, 3", "checks": 3,
        "all exactly equal": True,
    }  # fmt: skip


def test_support_probe_refuses_with_reasons_without_gpus(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine every combination runs")
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    support = runs.probe_support(store, backends=("nccl",), devices=("cpu", "cuda"))
    assert support["operation"].tolist() == ["(all)", "(all)"] and not support["supported"].any()
    assert support["message"].iloc[0].startswith("NCCL only moves CUDA tensors")


def test_a_benchmark_budget_must_leave_room_in_the_launch_limit():
    with pytest.raises(ValueError, match="at most 75% of the launch's 100 s limit, not 90"):
        runs.run_task("benchmark", 2, time_limit_seconds=100, time_budget_seconds=90)
    with pytest.raises(ValueError, match="must be positive"):
        runs.run_task("benchmark", 2, time_limit_seconds=100, time_budget_seconds=-1)


def test_a_cheaper_chunk_explains_a_pipelined_broadcast_the_model_did_not_predict():
    frame = pd.DataFrame(
        {"operation": "ring_broadcast", "chunks": 1, "status": "ok", "backend": "gloo", "world_size": 2,
         "bytes": [2**22, 2**24], "algbw_bytes_per_second": [3e9, 1.5e9]}
    )  # fmt: skip
    effect = runs.message_size_effect(frame, "gloo", 2, 4)
    assert effect == {"one message of N/S bytes, speed against N": 2.0}
    table = pd.DataFrame(
        [{"backend": "gloo", "ranks": 2, "predicted S*": 1.0, "fastest measured S": 4, **effect}]
    )
    assert "moves 2.00x as fast per byte" in runs.describe_pipelining(table)
    agreeing = table.assign(**{"fastest measured S": 1})
    assert runs.describe_pipelining(agreeing).endswith("lies where the model puts S* (1.0).")
    assert runs.describe_pipelining(table.iloc[:0]) == "No pipelined broadcast was measured here."


def test_the_bandwidth_reference_is_a_copy_between_buffers(tmp_path):
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    label, rate = runs.bandwidth_reference(store, "cpu")
    assert label == "one buffer copied to another in memory" and rate > 1e8
    record = store.records("copy_calibration")[0]
    assert record["config"]["fresh"] is False
