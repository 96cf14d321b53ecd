"""helpers.profiling: one profiled step, split into phases and operators."""

import pytest

from helpers import data, profiling


def test_profile_has_the_three_phases_and_operators(fsdd):
    result = profiling.profile_training_step("LinearNet", data.take(fsdd.split("train"), 20), batch_size=8)
    assert [row["phase"] for row in result["phases"]] == ["forward", "backward", "optimizer"]
    assert result["operators"] and all(row["calls"] >= 1 for row in result["operators"])
    assert result["host_seconds"] > 0
    if result["device_seconds"] is None:
        assert "host is the device" in profiling.host_device_verdict(result)


def test_verdict_reads_the_two_clocks():
    gpu_bound = {"host_seconds": 0.001, "device_seconds": 0.010}
    host_bound = {"host_seconds": 0.010, "device_seconds": 0.001}
    assert "GPU is the bottleneck" in profiling.host_device_verdict(gpu_bound)
    assert "GPU waits" in profiling.host_device_verdict(host_bound)


def test_backward_forward_ratio_sums_whichever_operators_hold_the_time():
    operators = [
        {"operator": "aten::convolution_backward", "host_self_seconds": 3.0, "device_self_seconds": None},
        {"operator": "aten::mkldnn_convolution", "host_self_seconds": 1.0, "device_self_seconds": None},
        {"operator": "aten::convolution", "host_self_seconds": 0.5, "device_self_seconds": None},
        {"operator": "aten::mm", "host_self_seconds": 9.0, "device_self_seconds": None},
    ]
    result = {"device_seconds": None, "operators": operators}
    assert profiling.backward_forward_ratio(result) == 2.0
    with pytest.raises(ValueError, match="no forward matmul"):
        profiling.backward_forward_ratio(result, "matmul")
