"""helpers.reference_speed: the fixed workload's figures, the gap between two references, their spread."""

from unittest import mock

import pytest

from helpers import reference_speed


def test_the_reference_times_the_cpu_and_caches_it_for_a_minute(monkeypatch):
    monkeypatch.setattr(reference_speed, "MATMUL_SECONDS", 0.02)
    monkeypatch.setattr(reference_speed, "COPY_SECONDS", 0.01)
    monkeypatch.setattr(reference_speed, "_cached", None)
    first = reference_speed.current()
    assert set(first) >= {"measured_at", "cpu_matmul_gflops", "cpu_copy_gbps"}
    assert first["cpu_matmul_gflops"] > 0 and first["cpu_copy_gbps"] > 0
    assert reference_speed.current() is first
    monkeypatch.setattr(reference_speed, "REFRESH_SECONDS", -1.0)
    assert reference_speed.current() is not first


def test_the_gap_is_the_largest_ratio_over_shared_figures():
    slow = {"measured_at": "t0", "cpu_matmul_gflops": 50.0, "cpu_copy_gbps": 30.0}
    fast = {"measured_at": "t1", "cpu_matmul_gflops": 100.0, "cpu_copy_gbps": 36.0, "cuda_copy_gbps": 4e3}
    assert reference_speed.speed_gap(slow, fast) == pytest.approx(1.0)  # 100 / 50 - 1
    assert reference_speed.speed_gap(fast, slow) == reference_speed.speed_gap(slow, fast)
    assert reference_speed.speed_gap(slow, None) is None  # a record from before references were kept
    assert reference_speed.speed_gap({"measured_at": "t"}, fast) is None
    assert reference_speed.pair_gaps([slow, fast, {**fast, "cpu_matmul_gflops": 80.0}]) == pytest.approx(
        [0.25, 0.6, 1.0]
    )


def test_the_spread_summarises_each_figure_over_the_records_that_hold_it():
    references = [{"cpu_matmul_gflops": value} for value in (80.0, 100.0, 120.0)]
    references.append({"cpu_matmul_gflops": 90.0, "cuda_matmul_gflops": 40_000.0})
    summary = reference_speed.spread(references)
    assert summary["cpu_matmul_gflops"] == {
        "records": 4, "lowest": 80.0, "median": 95.0, "highest": 120.0, "gap": pytest.approx(0.5)
    }  # fmt: skip
    assert summary["cuda_matmul_gflops"]["records"] == 1 and summary["cuda_matmul_gflops"]["gap"] == 0


def _record(when: str, reference: dict | None = None, kind: str = "step_timing", device: str = "cpu") -> dict:
    found = {"kind": kind, "config": {"device": device}, "measured_at": when}
    return found | ({"reference": reference} if reference else {})


def test_a_pooled_fit_says_when_its_records_ran_and_how_far_their_speeds_differ():
    """Issue 40, 2: records pooled across days say so; references 2x apart are shown as a 100 % gap, the
    reference shared by two records counted once."""
    fast = {"measured_at": "2026-11-20T10:00:00+00:00", "cpu_matmul_gflops": 40.0, "cpu_copy_gbps": 10}
    slow = {"measured_at": "2026-11-22T09:00:00+00:00", "cpu_matmul_gflops": 20.0, "cpu_copy_gbps": 9}
    records = [
        _record("2026-11-20T10:00:30+00:00", fast),
        _record("2026-11-20T10:00:50+00:00", fast),
        _record("2026-11-22T09:00:10+00:00", slow),
        _record("2026-11-22T09:30:00+00:00"),
    ]
    assert reference_speed.distinct(records) == [fast, slow]
    assert reference_speed.pooled_note(records, "The fit reads") == (
        "The fit reads 4 records of this machine, measured on 2 days, from 2026-11-20 10:00 to "
        "2026-11-22 09:30 UTC; 3 carry the machine's reference speed (1 predates it), 2 distinct references "
        "whose widest gap is 100 % (one CPU thread, float32 product (GFLOP/s): 20 to 40; the reference's own "
        "noise is part of it)."
    )
    assert reference_speed.pooled_note(records[3:], "The fit reads") == (
        "The fit reads 1 record of this machine, measured at 2026-11-22 09:30 UTC; none of them carries the "
        "machine's reference speed (they predate it), so whether the machine ran at one speed across them "
        "cannot be checked."
    )
    assert reference_speed.pooled_note([_record("2026-11-20T10:00:00+00:00"), records[3]], "Read").endswith(
        "cannot be checked, and a drift between days would be inside the fit."
    )
    assert reference_speed.pooled_note([_record("2026-11-22T09:00:00+00:00"), records[3]], "Read") == (
        "Read 2 records of this machine, measured on 2026-11-22, from 09:00 to 09:30 UTC; none of them "
        "carries the machine's reference speed (they predate it), so whether the machine ran at one speed "
        "across them cannot be checked."
    )
    assert reference_speed.pooled_note([], "The fit reads") == ""


def test_the_pooled_records_are_those_the_fit_and_its_check_read():
    """Issue 40, 2: the note counts what the time model and its check read, no more: float32 step timings
    of the models with the chapter's timed steps, the benchmark fitted, the newest copy, single-replica
    DataParallel for the optimizer, and multi-rank runs of the models on this device."""
    from helpers.costmodel import validation

    def record(kind, key, **config):
        return {"kind": kind, "key": key, "config": config, "result": {}}

    benchmark = record("collective_benchmark", "b2", backend="gloo", device="cpu")
    benchmark["result"] = {"rows": []}
    read = [
        record("step_timing", "s", device="cpu", timed_steps=5, model="ConvNet"),
        record("copy_calibration", "c2", device="cpu"),
        record("dataparallel_timing", "d1", devices=["cpu"], model="ConvNet"),
        record("ddp_run", "r2", world_size=2, backend="gloo", device="cpu", model="ConvNet"),
        record("dataparallel_timing", "d2", devices=["cpu", "cpu"], model="ConvNet"),
    ]
    left_out = [
        record("step_timing", "bf16", device="cpu", timed_steps=5, model="ConvNet", autocast="bf16"),
        record("step_timing", "other", device="cpu", timed_steps=5, model="MelCNN"),
        record("copy_calibration", "c1", device="cpu"),
        record("ddp_run", "r1", world_size=1, backend="gloo", device="cpu", model="ConvNet"),
        record("ddp_run", "nccl", world_size=2, backend="nccl", device="cuda:0", model="ConvNet"),
    ]
    records = [benchmark, left_out[2], *read, *left_out[:2], *left_out[3:]]  # c1 older than c2
    fitted = {"record_key": "b2"}  # the benchmark the link is fitted to
    with mock.patch("helpers.costmodel.timemodel.all_reduce_alpha_beta", return_value=fitted):
        pooled = validation.pooled_records(records, ["ConvNet"], backend="gloo", timed_steps=5, device="cpu")
    assert sorted(r["key"] for r in pooled) == sorted(["b2", *(r["key"] for r in read)])
