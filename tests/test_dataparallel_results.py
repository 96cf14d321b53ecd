"""helpers.dataparallel_results: chapter 2's tables and sentences, each checked on measurements made up
by hand."""

import statistics

import pandas as pd
import pytest

from helpers import data, dataparallel, dataparallel_results, dataparallel_sharing, results, train


def fake_timing(model: str, replicas: int, batch: int, steps: list[float]) -> dict:
    phases = dict.fromkeys(dataparallel.PHASES, 0.01)
    return {"config": {"model": model, "batch_size": batch},
            "result": {"replicas": replicas, "step_seconds_all": steps, "steps_per_epoch": 10,
                       "phase_seconds": phases, "step_seconds": sorted(steps)[len(steps) // 2],
                       "bytes_per_step": {"reduce_gradients": 8},
                       "communication_to_compute": 0.5}}  # fmt: skip


def consistency(*rows) -> dict:
    """Comparisons of (model, batch, verdict, ratio, low, high)."""
    keys = ("model", "batch_size", "verdict", "ratio", "low", "high")
    return {"comparisons": [dict(zip(keys, row, strict=True)) for row in rows]}


def reduce_points(broadcast_seconds: tuple[float, float]) -> pd.DataFrame:
    """LinearNet on 2 and 4 replicas: 48,408,880 B per extra replica in each phase; the reduce took 20 ms
    and 90 ms (20 and 30 ms per extra replica)."""
    moved = [48_408_880, 3 * 48_408_880]
    return pd.DataFrame({"phases": ["broadcast parameters"] * 2 + ["reduce gradients"] * 2,
                         "model": "LinearNet", "replicas": [2, 4] * 2, "bytes": moved * 2,
                         "seconds": [*broadcast_seconds, 0.02, 0.09]})  # fmt: skip


def test_a_compute_choke_that_runs_slower_says_why():
    """4 replicas: 0.5 s moving data against 2.5 s computing (0.2x: a compute choke), yet the step is
    slower (1.1 s over 3.1 s = 0.35x, interval 1.0/3.2 to 1.2/3.0), because the forward (0.2 to 0.8 s) and
    the backward (0.6 to 1.8 s) took three times as long: each phase on its own, not diluted by the rest."""
    said = explained(3.0, shared=True)
    assert "moving data took 500 ms per step and computing 2,500 ms, 0.2× as long: a compute choke" in said
    assert "slower, taking 2.82× as long (2.50–3.20×)" in said  # 3.1/1.1, 3.0/1.2 to 3.2/1.0
    assert (
        "The forward took 3.00× and the backward 3.00× as long as with one replica (one replica: 200 ms "
        "forward, 600 ms backward)" in said
    )
    assert "every replica runs the whole model on the same cores" in said
    # on one GPU, 3x in each phase stays within the 4x of repeating the work: two plausible causes, labelled
    on_gpu = explained(3.0, shared=True, on_gpu=True)
    assert "on one GPU the two together grew by 1,600 ms" in on_gpu
    assert "Plausible causes, not measured in this chapter: on the host" in on_gpu
    assert "on the GPU, each replica's kernels work on 1/4 of the batch" in on_gpu
    assert "same cores" not in on_gpu and "so that work is done once per replica" not in on_gpu
    shrank = explained(0.5, shared=True, on_gpu=True)
    assert "the two shrank with the replicas. A plausible cause, not measured in this chapter" in shrank
    assert "cores" not in shrank
    assert [dataparallel_results.ms(s) for s in (2.5, 0.0123, 0.00027, 0)] == ["2,500", "12.3", "0.270", "0"]
    assert "idle" in explained(0.5, shared=True) and "idle" not in explained(0.5, shared=False)
    assert explained(1.0, shared=True).endswith("(one replica: 200 ms forward, 600 ms backward).")
    # 0.5 s moving against 0.4 s computing: the label turns
    assert "a network choke" in explained(1.0, shared=False, multi_compute=0.4)
    # 0.5 s moving against 200 s computing: 0.0025 of it, in the same form as every ratio
    assert "0.0025× as long: a compute choke" in explained(1.0, shared=False, multi_compute=200.0)


def test_fit_recovers_a_known_line():
    fit = dataparallel_results.fit_seconds_per_byte([0, 1e6, 2e6, 4e6], [0.001, 0.002, 0.003, 0.005])
    assert fit["seconds_per_byte"] == pytest.approx(1e-9)
    assert fit["intercept_seconds"] == pytest.approx(0.001)
    assert fit["bytes_per_second"] == pytest.approx(1e9) and fit["r_squared"] == pytest.approx(1.0)


def explained(scale: float, shared: bool, multi_compute: float = 2.5, on_gpu: bool = False) -> str:
    """One replica: forward 0.2 s, backward 0.6 s, 1.0 s computing in all; four replicas: forward and
    backward ``scale`` times as long, ``multi_compute`` s computing, 0.5 s moving data."""
    single = {"replicas": 1, "step_seconds_all": [1.0, 1.1, 1.2], "compute_seconds": 1.0,
              "transfer_seconds": 0.0, "communication_to_compute": 0.0,
              "phase_seconds": {"forward": 0.2, "backward": 0.6}}  # fmt: skip
    multi = {"replicas": 4, "step_seconds_all": [3.0, 3.1, 3.2], "compute_seconds": multi_compute,
             "transfer_seconds": 0.5, "communication_to_compute": 0.5 / multi_compute,
             "phase_seconds": {"forward": 0.2 * scale, "backward": 0.6 * scale}}  # fmt: skip
    return dataparallel_sharing.explain_replicas(single, multi, shared, on_gpu=on_gpu)


def test_the_seeds_verdicts_say_where_they_change():
    table = pd.DataFrame(
        {"model": ["LinearNet"] * 3 + ["ConvNet"] * 4, "global_batch": [10, 20, 600, 20, 10, 600, 300],
         "faster": ["slower whatever the inputs"] * 3
         + ["faster whatever the inputs", "depends on convolution efficiency", "slower whatever the inputs",
            "faster whatever the inputs"]}
    )  # fmt: skip
    assert dataparallel_results.describe_seed_verdicts(table) == {
        "LinearNet": "slower at every batch of the seed's sweep (10 to 600)",
        "ConvNet": "undecided at batch 10, faster from batch 20 to 300 and slower at batch 600",
    }


def test_one_replica_against_chapter_one_says_which_timings_disagree():
    agreeing = consistency(("LinearNet", 10, "no measurable difference", 1.01, 0.97, 1.05),
                           ("ConvNet", 10, "no measurable difference", 0.99, 0.95, 1.03))  # fmt: skip
    assert dataparallel_results.consistency_sentence(agreeing) == (
        "all 2 agree within 10%: one replica costs what chapter 1's step costs"
    )
    # 0.95x (0.94-0.96x) is measurably apart but inside 10 %: it agrees within 10 %, and is said to be apart
    # (taking 1/0.95 = 1.053 as long: 5 %); 0.80x (0.78-0.82x), 1/0.80 = 1.25 as long, differs by more;
    # 1.04x (0.85-1.2x) cannot be told
    mixed = consistency(("LinearNet", 10, "slower", 0.95, 0.94, 0.96),
                        ("LinearNet", 30, "no measurable difference", 1.0, 0.98, 1.02),
                        ("ConvNet", 30, "slower", 0.80, 0.78, 0.82),
                        ("ConvNet", 10, "not resolved", 1.04, 0.85, 1.2))  # fmt: skip
    assert dataparallel_results.consistency_sentence(mixed) == (
        "2 agree within 10% (1 of them measurably apart, by at most 5%); ConvNet at batch 30 (1.25× as long) "
        "differs by more, its whole interval beyond ±10%; and for ConvNet at batch 10 the steps spread too "
        "widely to tell"
    )
    # an interval ending near the edge, 0.9003 against 1/1.1 = 0.909, said as the time taken: 1/0.8891 =
    # 1.125 as long, its ends 1.111 and 1.143 print apart from the edge 1.10 at two decimals
    edge = consistency(("ConvNet", 50, "slower", 0.8891, 0.8748, 0.9003))
    assert dataparallel_results.consistency_sentence(edge) == (
        "0 agree within 10%; ConvNet at batch 50 (1.12× as long) differs by more, its whole interval beyond "
        "±10%"
    )
    many = consistency(*[("ConvNet", size, "slower", 0.8, 0.78, 0.82) for size in (10, 20, 30, 50, 70)])
    assert dataparallel_results.consistency_sentence(many) == (
        "0 agree within 10%; 5 configurations (the table) differ by more, their whole interval beyond ±10%"
    )


def test_a_difference_whose_interval_reaches_inside_ten_per_cent_is_not_counted_as_larger():
    """The H200's records: LinearNet at batch 400 is slower, 0.79x (0.55-0.96x): measurably apart, but
    0.96 lies inside ±10 %, so it is not one of those that differ by more; 500 and 600 are."""
    found = consistency(("LinearNet", 400, "slower", 0.79, 0.55, 0.96),
                        ("LinearNet", 500, "slower", 0.70, 0.54, 0.81),
                        ("LinearNet", 600, "slower", 0.68, 0.53, 0.78))  # fmt: skip
    assert dataparallel_results.consistency_sentence(found) == (
        "0 agree within 10%; LinearNet at batch 500 (1.43× as long) and LinearNet at batch 600 (1.47× as "
        "long) differ by more, their whole interval beyond ±10%; and LinearNet at batch 400 (1.27× as long) "
        "is measurably apart, but its interval reaches inside ±10%, so whether by more than 10% is not "
        "resolved"
    )


def test_fresh_memory_costs_page_faults_on_a_cpu():
    """By hand: 48 MiB are 12,288 pages of 4 KiB; (14.0 - 2.6 ms) / 12,288 = 0.93 us more per page;
    50,331,648 B in 14 ms is 3.60 GB/s, in 2.6 ms 19.4 GB/s (three significant figures)."""
    fresh = {"bytes": 50_331_648, "seconds": 0.014, "seconds_per_byte": 0.014 / 50_331_648}
    reused = {"bytes": 50_331_648, "seconds": 0.0026, "seconds_per_byte": 0.0026 / 50_331_648}
    said = dataparallel_results.fresh_memory_sentence(fresh, reused, "cpu", page_bytes=4096)
    assert said == (
        "a copy of 48 MiB took 14.0 ms into a fresh buffer and 2.60 ms into a reused one (3.60 against 19.4 "
        "GB/s). A buffer of 32 MiB or more gets new pages from the kernel at every allocation (glibc serves "
        "it with mmap), and each 4 KiB page faults and is zeroed by the kernel on its first write: 12,288 "
        "pages here, 0.93 µs more per page than the copy into reused memory"
    )
    cheap = dict(fresh, seconds=0.0027)  # within 10 % of the reused copy
    assert dataparallel_results.fresh_memory_sentence(cheap, reused, "cpu", page_bytes=4096).endswith(
        "12,288 pages here, and here they cost no more than reused memory"
    )
    gpu = dataparallel_results.fresh_memory_sentence(fresh, reused, "cuda:0")
    assert "which this chapter does not measure" in gpu and "page faults" not in gpu
    assert dataparallel_results.fresh_memory_sentence(cheap, reused, "cuda:0").endswith(
        "allocates its buffer, and the two agree within 10%"
    )


def test_copies_on_one_h200_are_read_as_host_clock_times():
    """The H200's copy_calibration records: 50,331,648 B in 57.166 us (fresh) and 43.554 us (reused),
    each the median of 9 copies after 1 warm-up: 880 and 1,160 GB/s, 13.6 us apart; the datasheet's
    4.8 TB/s is the memory's speed, which these times (launch and synchronisation included) are not."""
    method = "median of 9 copies of 50,331,648 B into a {} buffer on cuda:0, after 1 warm-up"
    fresh = {"bytes": 50_331_648, "seconds": 5.7166e-05, "seconds_per_byte": 5.7166e-05 / 50_331_648,
             "method": method.format("fresh")}  # fmt: skip
    reused = {"bytes": 50_331_648, "seconds": 4.3554e-05, "seconds_per_byte": 4.3554e-05 / 50_331_648,
              "method": method.format("reused")}  # fmt: skip
    said = dataparallel_results.fresh_memory_sentence(fresh, reused, "cuda:0", gpu="NVIDIA H200")
    assert said.startswith(
        "a copy of 48 MiB took 0.0572 ms into a fresh buffer and 0.0436 ms into a reused one (880 against "
        "1,160 GB/s), each the median of 9 copies after 1 warm-up, every copy timed on the host's clock"
    )
    assert "the times include launching the copy and waiting for it" in said
    assert "neither is the speed of the GPU's memory (the datasheet gives 4.8 TB/s for the H200" in said
    assert "also holds the call to `torch.empty_like`" in said
    assert said.endswith(
        "The two differ by 0.0136 ms, more than 10%, and the records, which time each copy whole, do not "
        "split that difference: the allocation and the launch on the host are a plausible cause, not a "
        "measured one"
    )
    for wrong in ("in one copy each", "no first write explains", "page", "glibc"):
        assert wrong not in said.replace("no page is new to the GPU", "")
    note = dataparallel_results.copy_speeds_note(fresh, reused, "cuda:0")
    assert note == (
        "a plain copy ran at 880 GB/s into newly allocated memory and 1,160 GB/s into reused memory, both "
        "timed on the host's clock with the copy's launch and synchronisation, so neither is the GPU "
        "memory's speed; section 2.5 says what the two timings hold, and that these records do not say "
        "what sets their difference"
    )
    on_cpu = {"bytes": 50_331_648, "seconds": 0.0185, "seconds_per_byte": 0.0185 / 50_331_648}
    cpu_reused = {"bytes": 50_331_648, "seconds": 0.00323, "seconds_per_byte": 0.00323 / 50_331_648}
    assert dataparallel_results.copy_speeds_note(on_cpu, cpu_reused, "cpu").endswith(
        "; section 2.5 says what sets that difference on this device"
    )
    assert dataparallel_results.copy_speeds_note(cpu_reused, cpu_reused, "cpu").endswith(
        "; section 2.5 reads the two"
    )


def test_the_reduce_is_predicted_from_a_fresh_copy_and_an_addition():
    """By hand: a fresh copy at 2.5e-10 s/B, a reused one at 5e-11 s/B (20 GB/s, the broadcast's
    prediction). The reduce: 2.5e-10 + 1.5 x 5e-11 = 3.25e-10 s/B, 3.08 GB/s; for LinearNet's 48,408,880 B
    (46.2 MiB) 12.1 ms copying and 3.6 ms adding, 15.7 ms per extra replica. Measured: the reduce at
    48,408,880 / 0.02 = 2.42 GB/s and 145,226,640 / 0.09 = 1.61 GB/s; the broadcast at 9.68 and 4.84 GB/s
    (three significant figures; the reduce's speed holds its addition, so it is no copy's)."""
    fresh, reused = {"seconds_per_byte": 2.5e-10}, {"seconds_per_byte": 5e-11}
    said = dataparallel_results.reduce_prediction(reduce_points((0.005, 0.03)), fresh, reused)
    assert said == (
        "the broadcast (a copy into existing parameters) should run at 20.0 GB/s and the reduce (a copy into "
        "a fresh buffer, then an addition that reads two tensors and writes one) at 3.08 GB/s: for "
        "LinearNet's 46.2 MiB of gradients, 12.1 ms copying and 3.63 ms adding, 15.7 ms per extra replica; "
        "measured, LinearNet's reduce took 20.0–30.0 ms per extra replica. Measured in each configuration "
        "that moved at least 10 MB per step, the broadcast ran at 4.84–9.68 GB/s and the reduce, its copy "
        "and its addition together, at 1.61–2.42 GB/s: the reduce was the slower of the two in every "
        "configuration"
    )
    # the H200's copies: 0.0550 ms copying and 0.0628 ms adding, three significant figures as everywhere
    h200 = dataparallel_results.reduce_prediction(
        reduce_points((0.005, 0.03)), {"seconds_per_byte": 1.1357863739412059e-12},
        {"seconds_per_byte": 8.65340232873409e-13},
    )  # fmt: skip
    assert "0.0550 ms copying and 0.0628 ms adding, 0.118 ms per extra replica" in h200
    # a broadcast of 40 ms at 2 replicas runs at 1.21 GB/s: the ranges overlap
    overlapping = dataparallel_results.reduce_prediction(reduce_points((0.04, 0.03)), fresh, reused)
    assert overlapping.endswith(
        "the broadcast ran at 1.21–4.84 GB/s and the reduce, its copy and its addition together, at "
        "1.61–2.42 GB/s: the two ranges overlap in this run, so the measured speeds alone do not tell the "
        "two apart"
    )


def test_readable_byte_tables():
    moved = dataparallel_results.moved_table({"scatter_inputs": 96_000, "broadcast_parameters": 48_408_880})
    expected = {"scatter inputs": "96,000", "broadcast parameters": "48,408,880"}
    assert moved["bytes moved"].to_dict() == expected
    table = dataparallel_results.bytes_table(["LinearNet"], [2], samples=2000, batch_size=20)
    # the seed's example: 100 steps of 48,408,880 bytes out and back, 1,000 clips of 48,000 bytes scattered
    assert table[("LinearNet", "2 replicas")].to_dict() == {
        "scatter inputs": "48.0", "broadcast parameters": "4,841", "gather outputs": "0.040",
        "scatter output gradients": "0.040", "reduce gradients": "4,841", "total": "9,730",
    }  # fmt: skip


def test_one_replica_against_chapter_one_reuses_its_records(fsdd, tmp_path):
    store = results.ResultStore("test-dataparallel", root=tmp_path, hardware={"cpu_model": "test"})
    train_set = data.take(fsdd.split("train"), 20)
    train.stored_step_timing(store, "LinearNet", train_set, batch_size=10, timed_steps=1, optimizer="adam",
                             lr=1e-3, device="cpu", seed=0)  # fmt: skip  # chapter 1's record
    records = [fake_timing("LinearNet", 1, 10, [0.1, 0.2, 0.3]), fake_timing("LinearNet", 2, 10, [0.1])]
    found = dataparallel_results.against_chapter_one(
        store, records, train_set, device="cpu", timed_steps=1, seed=0
    )
    assert found["reused"] and len(found["table"]) == 1 and sum(found["verdicts"].values()) == 1
    compared = found["comparisons"][0]
    assert (compared["model"], compared["batch_size"]) == ("LinearNet", 10)
    plain = store.records("step_timing")[0]["result"]["step_seconds_all"]  # chapter 1's, over the 0.2 s
    assert compared["ratio"] == pytest.approx(statistics.median(plain) / 0.2)
    assert compared["replica_seconds"] == 0.2
    assert compared["chapter_one_seconds"] == pytest.approx(statistics.median(plain))
    assert found["table"].iloc[0]["one replica's step (ms)"] == "200 (100–300, 3 steps)"
    records.append(fake_timing("LinearNet", 1, 20, [0.1, 0.2]))  # batch 20: no chapter-1 record yet
    again = dataparallel_results.against_chapter_one(
        store, records, train_set, device="cpu", timed_steps=1, seed=0
    )
    assert not again["reused"]


def test_epoch_bytes_table_adds_up():
    table = dataparallel_results.epoch_bytes_table(["LinearNet"], [2], [2000], 20)
    assert table.iloc[0]["total"] == 9_729_856_000  # the seed's example, as in the test above


def test_frames_of_timing_records():
    records = [fake_timing("ConvNet", 1, 20, [1.0, 1.2, 1.1]), fake_timing("ConvNet", 2, 20, [2.0, 2.2, 2.1])]
    steps = dataparallel_results.steps_frame(records)
    assert len(steps) == 6 and steps["epoch_seconds"].tolist()[:3] == [10.0, 12.0, 11.0]
    phases = dataparallel_results.phase_frame(records)
    assert len(phases) == 2 * len(dataparallel.PHASES)
    assert set(phases.query("phase == 'reduce_gradients'")["bytes"]) == {8}
    assert set(phases.query("phase == 'forward'")["kind"]) == {"compute"}
    compare = dataparallel_results.torch_comparison([fake_timing("ConvNet", 2, 20, [1.5, 1.5, 1.5])], records)
    assert compare.iloc[0].tolist() == ["1,500.0", "2,100.0"]
    assert list(compare.columns) == ["torch.nn.DataParallel step (ms)", "rebuilt step (ms)"]


def test_transfer_points_and_fits_per_group_of_phases():
    records = [fake_timing("LinearNet", 1, 20, [1.0])]
    for replicas, megabytes in ((2, 1), (4, 3)):
        record = fake_timing("LinearNet", replicas, 20, [1.0])
        moved = megabytes * 10**6
        record["result"]["bytes_per_step"] = {
            "broadcast_parameters": moved, "reduce_gradients": moved, "scatter_inputs": 1000
        }  # fmt: skip
        record["result"]["phase_seconds"] = dict.fromkeys(dataparallel.PHASES, 0.0) | {
            "broadcast_parameters": megabytes * 1e-4, "reduce_gradients": megabytes * 5e-4}  # fmt: skip
        records.append(record)
    points = dataparallel_results.transfer_points(records)
    assert len(points) == 2 * 3 and set(points["replicas"]) == {2, 4}  # no point for one replica
    every = points[points["phases"] == "all transfer phases"].set_index("replicas")
    assert every.loc[4, "bytes"] == 6_001_000 and every.loc[4, "seconds"] == pytest.approx(18e-4)
    fits = dataparallel_results.transfer_fits(points)
    # 1e-4 s per MB is 10 GB/s, 5e-4 s per MB is 2 GB/s
    assert fits["broadcast parameters"]["bytes_per_second"] == pytest.approx(10e9)
    assert fits["reduce gradients"]["bytes_per_second"] == pytest.approx(2e9)
    # each configuration's own speed: none moves 10 MB, so both count; above 3 MB only the 4-replica one
    assert dataparallel_results.phase_speeds(points)["reduce gradients"] == pytest.approx((2e9, 2e9))
    speeds = dataparallel_results.phase_speeds(points, min_bytes=3e6)["all transfer phases"]
    assert speeds == pytest.approx((6_001_000 / 18e-4, 6_001_000 / 18e-4))


def test_the_seeds_line_is_read_as_a_speed_only_where_it_holds():
    holds = {"r_squared": 0.98, "bytes_per_second": 4.97e9}
    assert dataparallel_results.slope_sentence(holds).startswith(
        "The single slope of the seed's model, 4.97 GB/s"
    )
    loose = dataparallel_results.slope_sentence({"r_squared": 0.02, "bytes_per_second": 1.4e12})
    assert "does not hold on this device: its R² is 0.02" in loose and "GB/s" not in loose
    assert "no line to fit" in dataparallel_results.slope_sentence(
        {"r_squared": float("nan"), "bytes_per_second": 1.0}
    )


H200 = {"gpus": [{"index": 0, "name": "NVIDIA H200"}], "visible_gpu_indices": [0], "usable_cores": 16}


def test_the_shared_device_and_its_replicas_are_named():
    on_gpu = dataparallel_sharing.shared_device_note(on_gpu=True)
    assert "**The replicas share one GPU on this machine**" in on_gpu
    assert "every replica computes on the same GPU, and one host process issues every replica's kernels" in (
        on_gpu
    )
    assert on_gpu.endswith(
        "A gain here can only come from GPU time, or host time issuing kernels, that one replica leaves idle "
        "(section 2.6)."
    )
    assert "cores" not in on_gpu
    on_cpu = dataparallel_sharing.shared_device_note()
    assert "every replica computes on the same cores." in on_cpu and "GPU)" not in on_cpu
    assert on_cpu.endswith("A gain here can only come from cores that one replica leaves idle (section 2.6).")
    shared = ["cuda:0"] * 4
    assert dataparallel_sharing.where_replicas_ran(shared, True, H200) == (
        "the replicas share one device, one NVIDIA H200 (GPU 0)"
    )
    assert (
        dataparallel_sharing.sharing_phrase(shared, True, H200)
        == "4 replicas sharing one NVIDIA H200 (GPU 0)"
    )
    cpu = {"gpus": [], "usable_cores": 2}
    assert dataparallel_sharing.where_replicas_ran(["cpu"] * 4, True, cpu) == (
        "the replicas share one device, the CPU's 2 cores"
    )
    assert (
        dataparallel_sharing.sharing_phrase(["cpu"] * 4, True, cpu) == "4 replicas sharing the CPU's 2 cores"
    )
    spread = [f"cuda:{index}" for index in range(4)]
    assert dataparallel_sharing.where_replicas_ran(spread, False, H200) == (
        "each of the 4 replicas has a GPU of its own"
    )
    assert dataparallel_sharing.sharing_phrase(spread, False, H200) == "4 replicas on 4 GPUs"
    # cuda:1 among the visible GPUs 2 and 3 is the machine's GPU 3
    two = {"gpus": [{"index": 2, "name": "NVIDIA A100"}, {"index": 3, "name": "NVIDIA H100"}],
           "visible_gpu_indices": [2, 3]}  # fmt: skip
    assert dataparallel_results.gpu_model(two, "cuda:1") == "NVIDIA H100"
    assert dataparallel_results.gpu_model(two, "cpu") is None


def test_chapter_ones_steps_are_this_machines_records():
    said = dataparallel_results.chapter_one_source(True)
    assert said.startswith("chapter 1's measurements on this same machine")
    assert "need not be the figures on the chapter 1 page this book shows" in said
    assert dataparallel_results.chapter_one_source(False).startswith(
        "measured here with chapter 1's settings"
    )


def test_the_gap_to_chapter_one_is_set_against_the_extra_add():
    """On the H200, LinearNet's extra add (46.2 MiB read twice and written once at the reused copy's
    1155.6 GB/s) takes 0.0628 ms: 12 % of the smallest gap of 0.53-0.88 ms, so most is not explained."""
    keys = ("model", "batch_size", "verdict", "chapter_one_seconds", "replica_seconds")
    rows = [("LinearNet", 300, "not resolved", 0.0019, 0.0026),
            ("LinearNet", 400, "slower", 0.0020, 0.00253),
            ("LinearNet", 500, "slower", 0.0018, 0.0026),
            ("LinearNet", 600, "slower", 0.0018, 0.00268)]  # fmt: skip
    found = {"comparisons": [dict(zip(keys, row, strict=True)) for row in rows]}
    h200 = {"seconds_per_byte": 8.65340232873409e-13}
    assert dataparallel_results.gap_sentence(found, h200) == (
        "LinearNet's replica, measurably slower at batches 400, 500 and 600, took 0.530–0.880 ms longer than "
        "chapter 1's step, and the extra add of its gradients should take about 0.0628 ms at the reused "
        "copy's speed (section 2.5), 12% of the smallest gap, so most of each gap is not explained by these "
        "records (they do not time the gathered loss or the two backward calls on their own)"
    )
    # on a CPU the add is a larger part: 4.66 ms of an 8.2 ms gap
    cpu = {"comparisons": [dict(zip(keys, ("LinearNet", 10, "slower", 0.0690, 0.0772), strict=True))]}
    assert dataparallel_results.gap_sentence(cpu, {"seconds_per_byte": 0.00323 / 50_331_648}).endswith(
        "about 4.66 ms at the reused copy's speed (section 2.5), 57% of it, and the rest is not explained by "
        "these records (they do not time the gathered loss or the two backward calls on their own)"
    )
    assert dataparallel_results.gap_sentence({"comparisons": found["comparisons"][:1]}, h200) == ""


def test_speeds_and_sweep_times_are_given_to_three_significant_figures():
    assert dataparallel_results.gbps(1.1556e12) == "1,160" and dataparallel_results.gbps(880.4e9) == "880"
    # the gpu edition's measured speeds: the broadcast 241.2–423.7 GB/s, the reduce 114.9–196.1 GB/s
    assert dataparallel_results.speed_range(241.2e9, 423.7e9) == "241–424"
    assert dataparallel_results.speed_range(114.9e9, 196.1e9) == "115–196"
    # the gpu edition's LinearNet on 4 replicas at batch 600: 9.14 ms steps, 5 of them an epoch of 0.0457 s;
    # ConvNet's 5.61 ms steps at batch 10, 270 an epoch of 1.51 s
    steps = pd.DataFrame(
        [{"model": "LinearNet", "replicas": 4, "batch_size": 600, "step_seconds": s, "epoch_seconds": s * 5}
         for s in (0.00746, 0.00914, 0.00956)]
        + [{"model": "ConvNet", "replicas": 1, "batch_size": 10, "step_seconds": s, "epoch_seconds": s * 270}
           for s in (0.00533, 0.00561, 0.00581)]
    )  # fmt: skip
    table = train.sweep_table(steps, by=("model", "replicas", "batch_size"))
    assert table.index.names == ["model", "replicas", "batch size"]
    assert table.loc[("LinearNet", 4, 600)].to_dict() == {
        "step time (ms), median": "9.14", "epoch time (s), median": "0.0457",
        "epoch time (s), fastest–slowest step": "0.0373–0.0478", "timed steps": 3,
    }  # fmt: skip
    assert table.loc[("ConvNet", 1, 10), "step time (ms), median"] == "5.61"
    assert table.loc[("ConvNet", 1, 10), "epoch time (s), median"] == "1.51"
