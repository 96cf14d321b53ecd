"""helpers.costmodel.timemodel: calibration, the step-time formulas, validation."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch.utils.data import TensorDataset

from helpers import ddp
from helpers.collectives.model import fit_alpha_beta, ring_all_reduce_seconds
from helpers.costmodel import timemodel
from helpers.dataparallel import bytes_per_step
from helpers.models import build_model, parameter_count
from helpers.results import ResultStore

# ----- compute calibration ------------------------------------------------------------------------------


def test_fit_line_recovers_a_line_and_stays_non_negative():
    line, mape = timemodel.fit_line([10, 20, 50], [0.2, 0.3, 0.6])
    assert line.intercept_seconds == pytest.approx(0.1)
    assert line.seconds_per_sample == pytest.approx(0.01)
    assert mape == pytest.approx(0, abs=1e-9)
    falling, _ = timemodel.fit_line([10, 20], [0.3, 0.2])  # a falling line would need a negative slope
    assert falling.seconds_per_sample == 0


def test_fit_compute_groups_by_model_and_threads():
    frame = pd.DataFrame(
        {
            "model": ["A", "A", "A", "A"],
            "threads": [1, 1, 2, 2],
            "batch_size": [10, 20, 10, 20],
            "step_seconds": [0.2, 0.3, 0.1, 0.15],
        }
    )
    fits = timemodel.fit_compute(frame)
    assert timemodel.compute_line(fits, "A", 1)(30) == pytest.approx(0.4)
    assert timemodel.compute_line(fits, "A", 2)(30) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="stored_compute_calibration"):
        timemodel.compute_line(fits, "A", 4)


def test_compute_lines_in_physical_units_with_their_uncertainty():
    # ConvNet: 3,275,918,870 FLOPs a sample; a slope of 0.1 s per sample is 32.759... GFLOP/s
    frame = pd.DataFrame(
        {
            "model": ["ConvNet"] * 3 + ["LinearNet"] * 3,
            "threads": [1] * 6,
            "batch_size": [10, 20, 40] * 2,
            "step_seconds": [1.5, 2.5, 4.5, 0.2, 0.2, 0.2],
            "step_seconds_all": [[1.4, 1.5, 1.6], [2.4, 2.5, 2.6], [4.4, 4.5, 4.6]] + [[0.19, 0.2, 0.21]] * 3,
        }
    )
    fits = timemodel.fit_compute(frame, resamples=50)
    conv = fits.loc[("ConvNet", 1)]
    assert conv["intercept_seconds"] == pytest.approx(0.5) and conv["seconds_per_sample"] == pytest.approx(
        0.1
    )
    assert conv["achieved_gflops"] == pytest.approx(32.7591887)
    assert (
        conv["slope_low"] <= 0.1 <= conv["slope_high"]
        and conv["intercept_low"] <= 0.5 <= conv["intercept_high"]
    )
    assert conv["slope_resolved"] and conv["gflops_low"] <= conv["achieved_gflops"] <= conv["gflops_high"]
    flat = fits.loc[("LinearNet", 1)]  # a step that does not grow with the batch: no slope to resolve
    assert not flat["slope_resolved"] and flat["gflops_high"] == float("inf")


def test_compute_lines_carry_their_spread_across_runs():
    """Three runs per batch: the line goes through each batch's median run (0.2 and 0.4 s: 0.02 s per
    sample, no fixed cost), and its range is the one across runs, not within one run's steps."""
    frame = pd.DataFrame(
        {
            "model": ["A"] * 6,
            "threads": [1] * 6,
            "batch_size": [10, 10, 10, 20, 20, 20],
            "step_seconds": [0.19, 0.2, 0.3, 0.38, 0.4, 0.41],
            "step_seconds_all": [[0.19] * 3, [0.2] * 3, [0.3] * 3, [0.38] * 3, [0.4] * 3, [0.41] * 3],
        }
    )
    fit = timemodel.fit_compute(frame, resamples=100).loc[("A", 1)]
    assert (fit["spread_over"], fit["runs_per_point"], fit["points"]) == ("runs", 3, 2)
    assert fit["seconds_per_sample"] == pytest.approx(0.02) and fit["intercept_seconds"] == pytest.approx(0)
    # every step of one run is the same, so only the runs can spread the fit: the 0.3 s run lifts it
    assert fit["intercept_high"] > 0.05
    one_run = timemodel.fit_compute(frame.iloc[[1, 4]], resamples=100).loc[("A", 1)]
    assert one_run["spread_over"] == "timed steps" and one_run["intercept_high"] == pytest.approx(0)


def test_a_batch_timed_once_is_resampled_within_its_run_and_the_range_holds_the_estimate():
    """Batch 4 timed in one run (another chapter's), batches 10 and 20 in three: each batch resampled from
    the data its point estimate is the median of, so the range holds the estimate (it did not when one
    batch's single run made every batch draw within its first run's steps)."""
    frame = pd.DataFrame(
        {
            "model": ["A"] * 7,
            "threads": [2] * 7,
            "batch_size": [4, 10, 10, 10, 20, 20, 20],
            "step_seconds": [0.2, 0.33, 0.3, 0.36, 0.5, 0.52, 0.47],
            "step_seconds_all": [[0.18, 0.2, 0.25], [0.2, 0.33, 0.4], [0.3] * 3, [0.36] * 3, [0.4, 0.5, 0.6],
                                 [0.52] * 3, [0.47] * 3],
        }
    )  # fmt: skip
    fit = timemodel.fit_compute(frame, resamples=200).loc[("A", 2)]
    assert fit["spread_over"] == "runs and timed steps" and fit["runs_per_point"] == 1
    assert fit["intercept_low"] <= fit["intercept_seconds"] <= fit["intercept_high"]
    assert fit["slope_low"] <= fit["seconds_per_sample"] <= fit["slope_high"]
    assert fit["intercept_high"] > fit["intercept_low"]  # the runs of batches 10 and 20 do spread it


def test_stored_compute_calibration_measures_at_the_asked_threads(tmp_path):
    store = ResultStore("calibration", root=tmp_path, hardware={"machine": "test"})
    samples = TensorDataset(torch.randn(8, 1, 12000), torch.randint(0, 10, (8,)))
    before = torch.get_num_threads()
    records = timemodel.stored_compute_calibration(
        store, samples, ["LinearNet"], [2, 4], threads=1, timed_steps=1, warmup_steps=0
    )
    assert torch.get_num_threads() == before
    assert [(r["config"]["threads"], r["config"]["batch_size"]) for r in records] == [(1, 2), (1, 4)]
    assert set(timemodel.fit_compute(store.frame("step_timing")).index) == {("LinearNet", 1)}


def test_optimizer_seconds_per_parameter_from_single_replica_records():
    records = [
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu"], "threads": 2},
            "result": {"phase_seconds": {"optimizer_step": 376200e-9}},
        },
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu"], "threads": 1},
            "result": {"phase_seconds": {"optimizer_step": 376200e-8}},
        },
        {
            "kind": "dataparallel_timing",
            "config": {"model": "ConvNet", "devices": ["cpu", "cpu"], "threads": 2},
            "result": {"phase_seconds": {"optimizer_step": 1.0}},
        },
    ]
    fitted = timemodel.fit_optimizer_seconds_per_parameter(records)
    assert fitted == pytest.approx({1: 1e-8, 2: 1e-9})
    time_model = synthetic_time_model(optimizer_seconds_per_parameter=fitted)
    assert time_model.optimizer_seconds(100, threads=4) == pytest.approx(1e-7)  # nearest: 2 threads


# ----- communication and the step-time formulas ----------------------------------------------------------


def test_a_ring_all_reduce_by_hand():
    # LinearNet's 48,408,880 B on 8 GPUs: 2(k−1) = 14 steps of α + (N/k)β = 1e-5 + 6,051,110 × 1e-10
    assert ring_all_reduce_seconds(48_408_880, 8, 1e-5, 1e-10) == pytest.approx(14 * (1e-5 + 6_051_110e-10))
    assert pytest.approx(8.611554e-3) == 14 * (1e-5 + 6_051_110e-10)


def test_overlap_of_buckets_with_backward():
    fast = timemodel.overlapped_all_reduce_finish(1.0, [1, 1, 1, 1], lambda n: 0.1 * n)
    assert fast == pytest.approx(1.1)  # hidden behind backward except the last bucket
    slow = timemodel.overlapped_all_reduce_finish(1.0, [1, 1, 1, 1], lambda n: 1.0 * n)
    assert slow == pytest.approx(4.25)  # the first starts at 0.25, then they queue
    single = timemodel.overlapped_all_reduce_finish(1.0, [4], lambda n: 0.5 * n)
    assert single == pytest.approx(3.0)  # one bucket: no overlap


def synthetic_time_model(**changes) -> timemodel.TimeModel:
    compute = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2,
            "threads": [1, 2],
            "intercept_seconds": [0.2, 0.1],
            "seconds_per_sample": [0.02, 0.01],
        }
    ).set_index(["model", "threads"])
    settings = {
        "compute": compute,
        "alpha_seconds": 1e-3,
        "seconds_per_byte": 1e-9,
        "copy_seconds_per_byte": 2e-10,
        "optimizer_seconds_per_parameter": 1e-7,  # 0.03762 s for ConvNet's 376,200 parameters
        "cores": 2,
    }
    return timemodel.TimeModel(**{**settings, **changes})


def test_dataparallel_step_formula():
    time_model = synthetic_time_model()
    parts = timemodel.predict_step("dataparallel", "ConvNet", 10, 4, time_model)
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    assert parts["compute_seconds"] == pytest.approx(0.1 + 0.01 * 10 + 3 * (0.1 - optimizer))  # 4 chunks
    moved = sum(bytes_per_step(build_model("ConvNet"), 10, 4).values())
    assert parts["communication_seconds"] == pytest.approx(moved * 2e-10)
    assert parts["step_seconds"] == pytest.approx(parts["compute_seconds"] + parts["communication_seconds"])


def test_ddp_step_formulas():
    time_model = synthetic_time_model()
    buckets = ddp.ddp_bucket_bytes("ConvNet", 0.25)
    all_reduce = sum(ring_all_reduce_seconds(b, 2, 1e-3, 1e-9) for b in buckets)
    plain = timemodel.predict_step("ddp_no_overlap", "ConvNet", 50, 2, time_model, bucket_cap_mb=0.25)
    assert plain["threads"] == 1 and plain["per_rank_batch"] == 25
    assert plain["step_seconds"] == pytest.approx(0.2 + 0.02 * 25 + all_reduce)
    overlapped = timemodel.predict_step("ddp_overlap", "ConvNet", 50, 2, time_model, bucket_cap_mb=0.25)
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    passes = 0.2 + 0.02 * 25 - optimizer
    finish = timemodel.overlapped_all_reduce_finish(
        passes * 2 / 3, buckets, lambda n: ring_all_reduce_seconds(n, 2, 1e-3, 1e-9)
    )
    assert overlapped["step_seconds"] == pytest.approx(passes / 3 + finish + optimizer)
    assert overlapped["step_seconds"] < plain["step_seconds"]
    one = timemodel.predict_step("ddp_overlap", "ConvNet", 50, 1, synthetic_time_model(cores=1))
    assert one["step_seconds"] == pytest.approx(0.2 + 0.02 * 50)  # one rank: nothing to all-reduce


def test_ranks_sharing_cores_cannot_beat_the_whole_machine():
    # The 2-thread line makes two ranks' work together cost 0.3 + 0.01·50 + 0.3 = 1.1 s, more than
    # one rank alone at 1 thread (0.2 + 0.02·25 = 0.7 s): the shared machine is the limit.
    compute = pd.DataFrame(
        {
            "model": ["ConvNet"] * 2,
            "threads": [1, 2],
            "intercept_seconds": [0.2, 0.3],
            "seconds_per_sample": [0.02, 0.01],
        }
    ).set_index(["model", "threads"])
    shared = synthetic_time_model(compute=compute, alpha_seconds=0.0, seconds_per_byte=0.0)
    assert timemodel.predict_step_seconds("ddp_no_overlap", "ConvNet", 50, 2, shared) == pytest.approx(1.1)
    overlapped = timemodel.predict_step_seconds("ddp_overlap", "ConvNet", 50, 2, shared)
    assert overlapped == pytest.approx(1.1)  # free communication: the split does not change the sum
    # Two ranks on two GPUs do not share a device: each computes on its own (the one GPU line).
    gpu_line = compute.loc[[("ConvNet", 1)]]
    apart = synthetic_time_model(
        compute=gpu_line, alpha_seconds=0.0, seconds_per_byte=0.0, device_type="cuda", devices=2,
        peer_copy_seconds_per_byte=1e-10,
    )  # fmt: skip
    assert timemodel.predict_step_seconds("ddp_no_overlap", "ConvNet", 50, 2, apart) == pytest.approx(0.7)
    # Four ranks on those two GPUs: two share each, and each GPU does two ranks' work.
    assert timemodel.predict_step_seconds("ddp_no_overlap", "ConvNet", 100, 4, apart) == pytest.approx(
        0.2 + 0.02 * 50 + 0.2
    )


def test_a_time_model_knows_where_its_ranks_run():
    with pytest.raises(ValueError, match="devices must be 1"):
        synthetic_time_model(devices=2, peer_copy_seconds_per_byte=1e-10)
    with pytest.raises(ValueError, match="device-to-device copy"):
        synthetic_time_model(device_type="cuda", devices=4)
    with pytest.raises(ValueError, match="device_type"):
        synthetic_time_model(device_type="tpu")
    gpus = synthetic_time_model(device_type="cuda", devices=4, peer_copy_seconds_per_byte=1e-10)
    assert [gpus.ranks_per_device(k) for k in (1, 2, 4, 5, 8)] == [1, 1, 1, 2, 2]
    assert [synthetic_time_model().ranks_per_device(k) for k in (1, 2, 4)] == [1, 2, 4]


def test_dataparallel_replicas_on_separate_gpus_compute_side_by_side():
    compute = pd.DataFrame(
        {"model": ["ConvNet"], "threads": [2], "intercept_seconds": [0.1], "seconds_per_sample": [0.01]}
    ).set_index(["model", "threads"])
    gpus = synthetic_time_model(
        compute=compute, device_type="cuda", devices=4, peer_copy_seconds_per_byte=1e-10
    )
    parts = timemodel.predict_step("dataparallel", "ConvNet", 10, 4, gpus)  # chunks 3, 3, 3, 1
    assert parts["compute_seconds"] == pytest.approx(0.1 + 0.01 * 3)
    moved = sum(bytes_per_step(build_model("ConvNet"), 10, 4).values())
    assert parts["communication_seconds"] == pytest.approx(moved * 1e-10)
    one_gpu = synthetic_time_model(compute=compute, device_type="cuda")
    shared = timemodel.predict_step("dataparallel", "ConvNet", 10, 4, one_gpu)
    optimizer = parameter_count(build_model("ConvNet")) * 1e-7
    assert shared["compute_seconds"] == pytest.approx(0.1 + 0.01 * 10 + 3 * (0.1 - optimizer))
    assert shared["communication_seconds"] == pytest.approx(moved * 2e-10)


def test_predict_step_refuses_what_it_cannot_predict():
    with pytest.raises(ValueError, match="method"):
        timemodel.predict_step("zero", "ConvNet", 50, 2, synthetic_time_model())
    with pytest.raises(ValueError, match="no sample"):
        timemodel.predict_step("ddp_overlap", "ConvNet", 1, 2, synthetic_time_model())
    with pytest.raises(ValueError, match="calibration"):
        timemodel.predict_step("ddp_overlap", "ConvNet", 50, 2, synthetic_time_model(cores=8))


# ----- validation ----------------------------------------------------------------------------------------


def test_alpha_beta_must_come_from_chapter_four(tmp_path):
    store = ResultStore("empty", root=tmp_path, hardware={"cpu_model": "test"})
    with pytest.raises(ValueError, match="no all_reduce benchmark of gloo on cpu"):
        timemodel.all_reduce_alpha_beta(store.records())
    rows = [
        {"operation": "all_reduce", "status": "ok", "world_size": 2, "bytes": n, "label": "x",
         "collective": "all_reduce",
         "seconds": ring_all_reduce_seconds(n, 2, 1e-4, 2e-9), "algbw_bytes_per_second": 1.0,
         "busbw_bytes_per_second": 1.0}
        for n in (1024, 2**20, 2**24)
    ]  # fmt: skip
    store.measure(
        {"kind": "collective_benchmark", "backend": "gloo", "device": "cpu"}, lambda: {"rows": rows}
    )
    three = [{**row, "world_size": 3, "seconds": 10 * row["seconds"]} for row in rows]  # the scheduler's
    store.measure(
        {"kind": "collective_benchmark", "backend": "gloo", "device": "cpu", "k": 3}, lambda: {"rows": three}
    )
    fit = timemodel.all_reduce_alpha_beta(store.records())  # the link is fitted on two ranks only
    assert (fit["alpha_seconds"], fit["seconds_per_byte"]) == pytest.approx((1e-4, 2e-9), rel=1e-6)
    medians = fit["medians"]  # no iterations kept: the fit to the medians is the same fit
    assert (medians["alpha_seconds"], medians["seconds_per_byte"]) == pytest.approx((1e-4, 2e-9), rel=1e-6)
    # the all-reduce alone, at two sizes and with another link: chapter 4's three sizes still decide
    alone = [{**row, "seconds": 3 * row["seconds"]} for row in rows[:2]]
    store.measure({"kind": "collective_benchmark", "backend": "gloo", "device": "cpu", "alone": True},
                  lambda: {"rows": alone})  # fmt: skip
    again = timemodel.all_reduce_alpha_beta(store.records())
    assert (again["alpha_seconds"], again["seconds_per_byte"]) == pytest.approx((1e-4, 2e-9), rel=1e-6)


def test_the_link_is_fitted_on_the_iterations_nothing_interrupted():
    """Each size's lower quartile of its iterations: a 4 ms stall in two of eight iterations of every
    size would otherwise read as latency."""
    sizes = (1024, 2**20, 2**24)
    clean = [ring_all_reduce_seconds(n, 2, 1e-4, 2e-9) for n in sizes]
    frame = pd.DataFrame({"operation": "all_reduce", "world_size": 2, "bytes": sizes,
                          "seconds": [c + 4e-3 for c in clean],  # medians pulled up by the stalls
                          "seconds_all": [[c] * 6 + [c + 4e-3] * 2 for c in clean]})  # fmt: skip
    fit = fit_alpha_beta(frame)
    assert (fit["alpha_seconds"], fit["seconds_per_byte"]) == pytest.approx((1e-4, 2e-9), rel=1e-6)
    assert fit_alpha_beta(frame.drop(columns="seconds_all"))["alpha_seconds"] > 5e-4  # medians: 5× off


# ----- calibration records of a 4-GPU machine, made up ----------------------------------------------------

GPU_MACHINE = {"cpu_model": "test", "usable_cores": 16, "gpus": [{"name": "test GPU"}] * 4}


def four_gpu_records(alpha: float = 10e-6, bandwidth: float = 100e9) -> list[dict]:
    """What ``calibrate`` stores on a 4-GPU machine: compute-dominated ConvNet steps on cuda:0 (a fixed
    2 ms plus 0.5 ms per sample), NCCL's all-reduce, copies on one GPU and between two, and the
    single-replica optimizer phase."""
    records = [
        {"kind": "step_timing", "config": {"model": "ConvNet", "threads": 16, "batch_size": batch,
                                           "device": "cuda:0", "timed_steps": 5, "autocast": None},
         "result": {"step_seconds": 2e-3 + 5e-4 * batch}}
        for batch in (10, 20, 50, 100)
    ]  # fmt: skip
    rows = [
        {"operation": "all_reduce", "status": "ok", "world_size": k, "bytes": n, "label": "x",
         "collective": "all_reduce", "seconds": ring_all_reduce_seconds(n, k, alpha, 1 / bandwidth),
         "algbw_bytes_per_second": 1.0, "busbw_bytes_per_second": 1.0}
        for k in (2, 4) for n in (2**10, 2**20, 2**26)
    ]  # fmt: skip
    records.append({"kind": "collective_benchmark", "config": {"backend": "nccl", "device": "cuda"},
                    "result": {"rows": rows}})  # fmt: skip
    for to, seconds_per_byte in (("cuda:0", 1 / 1e12), ("cuda:1", 1 / 200e9)):
        config = {"device": "cuda:0", "to": to}
        result = {"seconds_per_byte": seconds_per_byte, "method": f"copy to {to}"}
        records.append({"kind": "copy_calibration", "config": config, "result": result})
    records.append({"kind": "dataparallel_timing", "config": {"model": "ConvNet", "devices": ["cuda:0"],
                    "threads": 16}, "result": {"phase_seconds": {"optimizer_step": 1e-4}}})  # fmt: skip
    return records


def test_ranks_on_separate_gpus_speed_up_where_compute_dominates():
    records = four_gpu_records()
    on_gpus, inputs = timemodel.time_model_from_records(
        records, ["ConvNet"], backend="nccl", timed_steps=5, cores=16, device_type="cuda", devices=4
    )
    assert (on_gpus.devices, on_gpus.device_type) == (4, "cuda")
    # every iteration kept, the medians half as slow again as the lower quartiles: the second link is
    # 1.5 α and 1.5 β, the fit to the medians, beside the model's own (the quartiles')
    for row in records[4]["result"]["rows"]:  # a row's seconds is its iterations' median
        row["seconds_all"] = [row["seconds"]] * 2 + [2 * row["seconds"]] * 2
        row["seconds"] *= 1.5
    kept, _ = timemodel.time_model_from_records(
        records, ["ConvNet"], backend="nccl", timed_steps=5, cores=16, device_type="cuda", devices=4
    )
    assert (kept.alpha_seconds, kept.seconds_per_byte) == pytest.approx((10e-6, 1 / 100e9), rel=1e-6)
    assert kept.other_links[0] == pytest.approx((1.5 * 10e-6, 1.5 / 100e9), rel=1e-6)
    central, other = kept.link_variants()
    assert central is kept and other.other_links == () and other.compute is kept.compute
    assert (other.alpha_seconds, other.seconds_per_byte) == kept.other_links[0]
    assert timemodel.other_link_fits({"alpha_seconds": 1e-5, "seconds_per_byte": 1e-11}) == ()  # one fit
    assert on_gpus.peer_copy_seconds_per_byte == pytest.approx(1 / 200e9)
    assert "copy bandwidth, GPU to GPU (GB/s)" in set(inputs["input"])
    one = timemodel.predict_step_seconds("ddp_overlap", "ConvNet", 400, 1, on_gpus)
    four = timemodel.predict_step_seconds("ddp_overlap", "ConvNet", 400, 4, on_gpus)
    assert one == pytest.approx(2e-3 + 5e-4 * 400)
    assert one / four > 3.5  # 0.202 s against 0.052 s plus a 1.5 MB all-reduce at 100 GB/s
    dataparallel_four = timemodel.predict_step_seconds("dataparallel", "ConvNet", 400, 4, on_gpus)
    assert one / dataparallel_four > 2  # replicas side by side; copies at GPU-to-GPU speed
    # The same records read as if the four ranks shared one device: no speed-up is possible.
    shared, _ = timemodel.time_model_from_records(
        records, ["ConvNet"], backend="nccl", timed_steps=5, cores=16, device_type="cuda", devices=1
    )
    assert timemodel.predict_step_seconds("ddp_overlap", "ConvNet", 400, 4, shared) >= one


def test_calibration_records_must_be_complete():
    records = [r for r in four_gpu_records() if r["kind"] != "copy_calibration"]
    with pytest.raises(ValueError, match="no copy calibration from cuda:0 to cuda:0"):
        timemodel.time_model_from_records(
            records, ["ConvNet"], backend="nccl", timed_steps=5, cores=16, device_type="cuda", devices=4
        )
    with pytest.raises(ValueError, match="no all_reduce benchmark of gloo on cuda"):
        timemodel.time_model_from_records(
            four_gpu_records(), ["ConvNet"], backend="gloo", timed_steps=5, cores=16, device_type="cuda"
        )


def test_calibrate_asks_for_every_thread_count_run_and_device(monkeypatch, tmp_path):
    """What calibrate measures, recorded instead of measured: on a 2-core CPU, every thread count a rank
    of 1, 2 or 4 ranks gets (2, 1, 1) and all cores, each in three runs (seeds 0-2); on four faked GPUs,
    the first GPU at all cores, and a copy from GPU 0 to GPU 1 besides the one on GPU 0."""
    asked = []

    def record(*what):
        asked.append(what)

    def steps(store, train, models, batches, threads, **settings):
        record("steps", threads, settings["seed"], settings["device"], tuple(batches))

    monkeypatch.setattr(timemodel, "stored_compute_calibration", steps)
    monkeypatch.setattr(timemodel, "stored_all_reduce_alpha_beta", lambda store, backend, device: record(
        "all_reduce", backend, device))  # fmt: skip
    monkeypatch.setattr(timemodel, "stored_copy_calibration", lambda store, device, to=None: record(
        "copy", device, to))  # fmt: skip
    monkeypatch.setattr(timemodel, "stored_dataparallel_timing", lambda store, name, train, **s: record(
        "optimizer", name, tuple(s["devices"])))  # fmt: skip
    monkeypatch.setattr(timemodel, "time_model_from_records", lambda records, models, **s: s)
    store = ResultStore("plan", root=tmp_path, hardware={"machine": "test"})
    found = timemodel.calibrate(store, None, ["ConvNet"], [10, 30], [1, 2, 4], cores=2, repeats=3)
    assert [a for a in asked if a[0] == "steps"] == [
        ("steps", threads, seed, "cpu", (10, 30)) for threads in (1, 2) for seed in range(3)
    ]
    assert ("all_reduce", "gloo", "cpu") in asked and ("copy", "cpu", None) in asked
    assert ("optimizer", "ConvNet", ("cpu",)) in asked and found["cores"] == 2 and found["devices"] == 1
    asked.clear()
    monkeypatch.setattr(timemodel, "usable_gpus", lambda gpus=None: 4)
    found = timemodel.calibrate(store, None, ["ConvNet"], [10], [1, 2, 4], "nccl", "cuda", cores=16)
    assert [a for a in asked if a[0] == "steps"] == [("steps", 16, 0, "cuda:0", (10,))]
    assert {("all_reduce", "nccl", "cuda"), ("copy", "cuda:0", None), ("copy", "cuda:0", "cuda:1"),
            ("optimizer", "ConvNet", ("cuda:0",))} <= set(asked)  # fmt: skip
    assert found["device_type"] == "cuda" and found["devices"] == 4
