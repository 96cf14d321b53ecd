"""helpers.collectives.runs: settings refused before launching, records reused, the chapter's tables."""

import os

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


def test_benchmark_rows_and_reuse_through_the_store(tmp_path, no_leftovers, monkeypatch):
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
    # two ranks, each pinned to its own half of this process's cores (helpers.worker.pinned_cores)
    cores = sorted(os.sched_getaffinity(0))
    half = len(cores) // 2
    assert record["config"]["pin_cores"] is True
    assert record["result"]["cores_per_rank"] == [cores[:half], cores[half : 2 * half]]
    assert runs.placement([record]).startswith("gloo, 2 ranks: pinned, rank 0 on core")
    monkeypatch.setattr(runs, "launch", lambda *a, **k: pytest.fail("launched again"))
    again = runs.stored_benchmark(store, 2, time_limit_seconds=120, **settings)
    assert again == record  # reused, not launched again


OK = {"status": "ok"}


def synthetic_benchmark(alpha: float, beta: float, world_sizes=(2,)) -> pd.DataFrame:
    """Rows as benchmark_frame gives them, with times exactly those of the α-β model (our ring 1.25×)."""
    rows = []
    for k in world_sizes:
        for nbytes in (2**10, 2**16, 2**20, 2**24, 2**26):
            for operation, times in (
                ("all_reduce", 1.0),
                ("all_reduce_ring", 1.25),
                ("parameter_server", 1.0),
            ):
                seconds = model.alpha_beta_seconds(operation, nbytes, k, alpha, beta) * times
                rows.append({"operation": operation, "collective": "all_reduce", "chunks": None,
                             "bytes": nbytes, "seconds": seconds, "seconds_all": [seconds] * 3,
                             "busbw_GBps": nbytes / seconds / 1e9, "world_size": k, **OK})  # fmt: skip
            for chunks in (1, 4):
                seconds = model.ring_broadcast_seconds(nbytes, k, chunks, alpha, beta)
                rows.append({"operation": "ring_broadcast", "collective": "broadcast", "chunks": chunks,
                             "bytes": nbytes, "seconds": seconds, "seconds_all": [seconds] * 3,
                             "busbw_GBps": nbytes / seconds / 1e9, "world_size": k, **OK})  # fmt: skip
    return pd.DataFrame(rows).assign(backend="gloo", device="cpu", label="x")


def test_fits_per_implementation_and_the_model_seconds_they_predict():
    frame = synthetic_benchmark(alpha=20e-6, beta=1e-9)
    fits = runs.alpha_beta_fits(frame)
    assert fits["operation"].tolist() == [
        "all_reduce",
        "all_reduce_ring",
        "parameter_server",
        "ring_broadcast",
    ]
    assert fits["ranks"].tolist() == ["2"] * 4
    library = fits.query("operation == 'all_reduce'").iloc[0]
    assert library["alpha_seconds"] == pytest.approx(20e-6, rel=1e-6)
    assert library["seconds_per_byte"] == pytest.approx(1e-9, rel=1e-6)
    server = fits.query("operation == 'parameter_server'").iloc[0]  # its own formula: the same α and β
    assert (server["alpha_seconds"], server["seconds_per_byte"]) == pytest.approx((20e-6, 1e-9), rel=1e-6)
    modelled = runs.with_model_seconds(frame, fits, "all_reduce")
    library_rows = modelled.query("operation == 'all_reduce'")
    assert library_rows["model_seconds"].tolist() == pytest.approx(library_rows["seconds"].tolist(), rel=1e-6)
    naive = fits.query("operation == 'ring_broadcast'").iloc[0]  # fitted on the one-chunk rows only
    assert (naive["alpha_seconds"], naive["seconds_per_byte"]) == pytest.approx((20e-6, 1e-9), rel=1e-6)
    broadcasts = runs.with_model_seconds(frame, fits, "ring_broadcast").query("chunks == 4")
    assert broadcasts["model_seconds"].tolist() == pytest.approx(broadcasts["seconds"].tolist(), rel=1e-6)


def test_the_link_fit_is_on_two_ranks_and_pooling_is_asked_for():
    two, three = synthetic_benchmark(20e-6, 1e-9), synthetic_benchmark(20e-6, 1e-9, world_sizes=(3,))
    slow = three.assign(  # three ranks on two cores: everything takes twice as long
        seconds=three["seconds"] * 2, seconds_all=[[2 * t for t in times] for times in three["seconds_all"]]
    )
    frame = pd.concat([two, slow], ignore_index=True)
    link = runs.alpha_beta_fits(frame, world_sizes=[runs.LINK_FIT_WORLD_SIZE])
    assert runs.LINK_FIT_WORLD_SIZE == 2 and set(link["ranks"]) == {"2"}
    assert link.query("operation == 'all_reduce'")["alpha_seconds"].iloc[0] == pytest.approx(20e-6, rel=1e-6)
    pooled = runs.alpha_beta_fits(frame)
    assert set(pooled["ranks"]) == {"2, 3"}
    assert (pooled["median_relative_error"] > 0.05).all()  # one line cannot hold both rank counts


def test_placement_says_whether_each_rank_had_its_own_cores():
    def record(k, cores):
        return {"config": {"world_size": k, "backend": "gloo"}, "result": {"cores_per_rank": cores}}

    assert runs.placement([record(2, [[0], [1]]), record(3, [[0, 1]] * 3), record(2, None)]) == (
        "gloo, 2 ranks: pinned, rank 0 on core 0, rank 1 on core 1; gloo, 3 ranks: not pinned, 3 ranks on 2 "
        "cores; gloo, 2 ranks: placement not recorded."
    )
    assert (
        runs.placement_of(record(2, [[0, 1], [2, 3]]))
        == "pinned, rank 0 on cores 0 and 1, rank 1 on cores 2 and 3"
    )
    assert runs.placement_of(record(2, [list(range(8)), list(range(8, 16))])) == (
        "pinned, rank 0 on cores 0–7, rank 1 on cores 8–15"  # a run of cores as its ends
    )
    assert runs.placement_of(record(2, [[0, 2, 5], [1, 3, 4]])) == (
        "pinned, rank 0 on cores 0, 2 and 5, rank 1 on cores 1, 3 and 4"
    )
    assert runs.is_pinned(record(2, [[0], [1]])) and runs.is_pinned(record(3, [[0, 1]] * 3)) is False


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


def test_the_bandwidth_reference_is_a_copy_between_buffers(tmp_path):
    store = ResultStore("test-run", root=tmp_path, hardware=HARDWARE)
    label, rate = runs.bandwidth_reference(store, "cpu")
    assert label == "one buffer copied to another in memory" and rate > 1e8
    record = store.records("copy_calibration")[0]
    assert record["config"]["fresh"] is False
