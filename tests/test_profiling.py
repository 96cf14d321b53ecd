"""helpers.profiling: one profiled step, split into phases and operators; each clock's time counted once."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import data, profiling, train

CUDA_TABLE = Path(__file__).parent / "data" / "profile-cuda-key-averages.json"


@pytest.fixture(scope="module")
def clips():
    """20 synthetic clips of FSDD's shape: enough for a step, without the recordings."""
    generator = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(20, 1, data.CLIP_SAMPLES, generator=generator) * 0.1,
        torch.randint(0, 10, (20,), generator=generator),
    )


@pytest.fixture(scope="module")
def cuda_rows():
    """A ``key_averages`` table of one CUDA training step, HAND-BUILT in the shape torch 2.11 produces
    (see its ``_comment``): to be replaced by the real table that a GPU run records
    (``profile_training_step(...)["events"]``)."""
    return json.loads(CUDA_TABLE.read_text())["rows"]


def test_cuda_table_device_time_is_the_kernels_counted_once(cuda_rows):
    """Hand-built CUDA table (see ``cuda_rows``): the device total is the kernel and memcpy rows alone."""
    result = profiling.summarize_events(cuda_rows, gpu=True)
    # Kernel and memcpy rows (us): memcpy 2.6, sgemm_tn 5.6, clamp 1.0, softmax 2.2, nll 2.9, fill 1.9,
    # nll_backward 1.2, softmax_backward 2.0, sgemm_nn 2.4, sgemm_nt 4.4, sum 3.5, threshold 1.1,
    # foreach lerp 1.7, mul 1.5, addcmul 1.8, sqrt 1.6, div 1.4, add 1.3, addcdiv 2.1 = 42.2
    assert result["device_seconds"] == pytest.approx(42.2e-6)
    # The old sum of every row's self device time: the operators' copies of those kernels (42.2), the
    # kernels (42.2) and the GPU-side ranges forward 165.9, backward 1.0, Optimizer.step 103.1 (270.0).
    naive = sum(row["self_device_time_total"] for row in cuda_rows)
    assert naive == pytest.approx(354.4)
    assert naive > 2 * result["device_seconds"] * 1e6


def test_cuda_table_host_time_is_the_main_thread_once(cuda_rows):
    """Hand-built CUDA table: the host total is the three phase ranges' wall time, 190 + 218 + 178 us."""
    result = profiling.summarize_events(cuda_rows, gpu=True)
    assert result["host_seconds"] == pytest.approx(586e-6)
    # Every host row's self time adds autograd's device thread (178 us, which the main thread's backward
    # waits for) and the 38 us synchronisation that closes the profile, besides zero_grad's 8 us.
    naive = sum(row["self_cpu_time_total"] for row in cuda_rows if row["device_type"] == "CPU")
    assert naive == pytest.approx(586 + 178 + 38 + 8)


def test_cuda_table_operators_rank_by_their_kernels(cuda_rows):
    """Hand-built CUDA table: host operators by the device time of the kernels each launched, no ranges."""
    operators = profiling.summarize_events(cuda_rows, gpu=True, top=100)["operators"]
    assert [row["operator"] for row in operators[:5]] == [
        "aten::mm", "aten::addmm", "aten::sum", "aten::nll_loss_forward", "aten::copy_",
    ]  # fmt: skip
    assert [row["device_self_seconds"] * 1e6 for row in operators[:5]] == pytest.approx(
        [6.8, 5.6, 3.5, 2.9, 2.6]
    )
    assert operators[0]["calls"] == 3
    names = [row["operator"] for row in operators]
    assert len(names) == len(set(names))
    annotations = {row["key"] for row in cuda_rows if row["is_user_annotation"]}
    assert annotations >= set(profiling.PHASES) and not annotations & set(names)
    assert not any(name.startswith(("ampere_", "void ", "Memcpy")) for name in names)  # no device rows
    # In the table the phases appear twice ("forward", "backward" also as GPU-side ranges) and the
    # main thread's "backward" holds 1 us of the 16.5 us of backward kernels: hence phases by CUDA events.
    assert sorted(row["key"] for row in cuda_rows if row["key"] in profiling.PHASES) == [
        "backward", "backward", "forward", "forward", "optimizer",
    ]  # fmt: skip
    backward = next(r for r in cuda_rows if r["key"] == "backward" and r["device_type"] == "CPU")
    assert backward["device_time_total"] == pytest.approx(1.0)


def test_summary_needs_the_phase_ranges(cuda_rows):
    rows = [row for row in cuda_rows if row["key"] != "backward"]
    with pytest.raises(ValueError, match="no \\['backward'\\] range"):
        profiling.summarize_events(rows, gpu=True)


@pytest.mark.filterwarnings("ignore:.*Profiler clears events")
def test_event_rows_reads_torch_key_averages():
    """Real ``key_averages`` on the CPU: phase ranges are host-side user annotations, operators are not."""
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(3, 4), torch.tensor([0, 1, 0])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        train.training_step(model, optimizer, inputs, targets, nn.functional.cross_entropy)
    rows = {row["key"]: row for row in profiling.event_rows(profiler.key_averages())}
    assert json.loads(json.dumps(list(rows.values()))) == list(rows.values())
    assert all(
        rows[name]["is_user_annotation"] and rows[name]["device_type"] == "CPU" for name in profiling.PHASES
    )
    assert not rows["aten::addmm"]["is_user_annotation"] and rows["aten::addmm"]["count"] == 1
    assert set(rows["aten::addmm"]) == {"key", "count", "device_type", "is_user_annotation", *profiling.TIMES}


def test_profile_has_the_three_phases_and_operators(clips):
    """A real run on the CPU: phases once each from unprofiled steps, no device clock, positive totals."""
    result = profiling.profile_training_step("LinearNet", clips, batch_size=8, device="cpu", timed_steps=3)
    assert [row["phase"] for row in result["phases"]] == ["forward", "backward", "optimizer"]
    assert all(row["host_seconds"] > 0 and row["device_seconds"] is None for row in result["phases"])
    assert result["device"] == "cpu" and result["device_seconds"] is None
    assert result["host_seconds"] > 0
    assert result["operators"] and all(row["calls"] >= 1 for row in result["operators"])
    assert not {row["operator"] for row in result["operators"]} & set(profiling.PHASES)
    assert [row["key"] for row in result["events"]].count("forward") == 1
    assert "median of 3 unprofiled steps" in result["method"]
    assert "host is the device" in profiling.host_device_verdict(result)
    assert list(profiling.phase_frame({"LinearNet": result})["phase"]) == list(profiling.PHASES)
    assert "host self ms" in profiling.operator_table(result)


def test_profile_refuses_a_batch_larger_than_the_data(clips):
    with pytest.raises(ValueError, match="exceeds the 20 training samples"):
        profiling.profile_training_step("LinearNet", clips, batch_size=21)


def test_phase_clock_times_each_phase_of_a_training_step():
    """``training_step`` enters ``phase(name)`` around each phase; the clock keeps the host seconds."""
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = profiling.PhaseClock(torch.device("cpu"))
    loss, logits = train.training_step(
        model, optimizer, torch.randn(3, 4), torch.tensor([0, 1, 0]), nn.functional.cross_entropy, phase=clock
    )
    seconds = clock.seconds()
    assert list(seconds) == list(profiling.PHASES)
    assert all(host > 0 and device is None for host, device in seconds.values())
    assert logits.shape == (3, 2) and not loss.requires_grad


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


def test_backward_forward_ratio_reads_the_kernels_on_a_gpu(cuda_rows):
    """Hand-built CUDA table: the log-softmax backward's kernel (2.0 us) over the forward's (2.2 us)."""
    result = profiling.summarize_events(cuda_rows, gpu=True)
    assert profiling.backward_forward_ratio(result, "softmax") == pytest.approx(2.0 / 2.2)
