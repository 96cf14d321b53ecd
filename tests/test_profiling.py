"""helpers.profiling: one profiled step, split into phases and operators."""

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
