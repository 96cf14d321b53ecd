"""helpers.reference_speed: the fixed workload's figures, the gap between two references, their spread."""

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
