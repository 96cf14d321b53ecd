"""helpers.profiling: profiled steps split into phases and operators, with their spread over the steps;
each clock's time counted once."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from helpers import profiling, stats, train
from helpers.results import ResultStore

CUDA_TABLE = Path(__file__).parent / "data" / "profile-cuda-key-averages.json"


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


def test_profile_has_the_three_phases_and_operators(clips, tmp_path):
    """A real run on the CPU, through the store (a record like any timing, reused on rerun): phases once
    each from unprofiled steps, no device clock, positive totals."""
    store = ResultStore("test-profile", root=tmp_path, hardware={"cpu_model": "test"})
    record = profiling.stored_step_profile(
        store, "LinearNet", clips, batch_size=8, device="cpu", timed_steps=3
    )
    assert record["config"]["autocast"] is None and record["config"]["device"] == "cpu"
    again = profiling.stored_step_profile(
        store, "LinearNet", clips, batch_size=8, device="cpu", timed_steps=3
    )
    assert again == record  # reused, not profiled again
    result = record["result"]
    assert [row["phase"] for row in result["phases"]] == ["forward", "backward", "optimizer"]
    assert all(row["host_seconds"] > 0 and row["device_seconds"] is None for row in result["phases"])
    assert result["device"] == "cpu" and result["device_seconds"] is None
    assert result["host_seconds"] > 0
    assert result["operators"] and all(row["calls"] >= 1 for row in result["operators"])
    assert not {row["operator"] for row in result["operators"]} & set(profiling.PHASES)
    assert [row["key"] for row in result["events"]].count("forward") == 1
    assert result["method"].startswith("each phase is the median of 3 unprofiled steps on the host clock")
    assert result["method"].endswith("all after 3 warm-up steps")
    assert len(result["load_average"]) == 2
    assert "host is the device" in profiling.host_device_verdict(result)
    assert list(profiling.phase_frame({"LinearNet": result})["phase"]) == list(profiling.PHASES)
    table = profiling.operator_table(result)
    assert table.index.name == "operator" and list(table.columns) == [
        "calls per step", "self time on the host (ms), median", "range over 5 steps (ms)",
    ]  # fmt: skip
    assert len(result["step_seconds_all"]) == 3 and result["autocast"] is None
    # the operators and totals are the median of the profiled steps, each kept with its own table
    assert len(result["profiled"]) == 5 and all(step["events"] for step in result["profiled"])
    hosts = sorted(step["host_seconds"] for step in result["profiled"])
    assert result["host_seconds"] == hosts[2]
    assert "the operators and totals come from 5 steps each under torch.profiler" in result["method"]


def test_profile_refuses_a_batch_larger_than_the_data(clips):
    with pytest.raises(ValueError, match="exceeds the 20 training samples"):
        profiling.profile_training_step("LinearNet", clips, batch_size=21)


def test_verdict_reads_the_two_clocks():
    """The unprofiled steps' host phases (here 1 ms, or 10 ms) against the profiled steps' kernel time."""
    phases = [{"phase": name, "host_seconds": 1e-3 / 3, "device_seconds": 1e-3} for name in profiling.PHASES]
    kernels = [{"events": [], "host_seconds": 0.05, "device_seconds": 0.010}] * 3
    gpu_bound = {"phases": phases, "device_seconds": 0.010, "profiled": kernels}
    host_bound = gpu_bound | {"phases": [row | {"host_seconds": 0.1} for row in phases]}
    assert profiling.host_device_verdict(gpu_bound).startswith("The host spent 1.0 ms issuing work")
    assert "GPU waits" in profiling.host_device_verdict(host_bound)


def test_backward_forward_ratio_sums_whichever_operators_hold_the_time():
    step = fake_step({"aten::convolution_backward": 3, "aten::mkldnn_convolution": 1,
                      "aten::convolution": 0.5, "aten::mm": 9}, step_ms=20)  # fmt: skip
    # 3 ms of backward against the backend's 1 ms: aten::convolution only dispatches to it, left out
    assert profiling.backward_forward_ratio(profiling.operator_seconds(step)) == 3.0
    with pytest.raises(ValueError, match="no forward matmul"):
        profiling.backward_forward_ratio(profiling.operator_seconds(step), "matmul")


def test_backward_forward_ratio_reads_the_kernels_on_a_gpu(cuda_rows):
    """Hand-built CUDA table: the log-softmax backward's kernel (2.0 us) over the forward's (2.2 us)."""
    step = {"events": cuda_rows, **profiling.summarize_events(cuda_rows, gpu=True)}
    assert profiling.backward_forward_ratio(profiling.operator_seconds(step), "softmax") == pytest.approx(
        2.0 / 2.2
    )


def test_the_table_and_the_ratio_read_the_same_medians():
    """Convolutions' backward 3, 2 and 4 ms against forward 1, 1 and 2 ms: the table's medians give 3 / 1,
    the ratio said; each step's own ratio ranges from 2 to 3."""
    steps = [(3, 1), (2, 1), (4, 2)]
    result = fake_profile({}, step_ms=10)
    result["profiled"] = [
        fake_step({"aten::convolution_backward": b, "aten::mkldnn_convolution": f, "aten::add_": 0.043}, 10)
        for b, f in steps
    ]
    ratio = profiling.backward_forward(result)
    assert (ratio.median, ratio.low, ratio.high, ratio.count) == pytest.approx((3.0, 2.0, 3.0, 3))
    table = profiling.operator_table(result)
    assert list(table.columns) == [
        "calls per step",
        "self time on the host (ms), median",
        "range over 3 steps (ms)",
    ]
    assert table.loc["aten::convolution_backward"].tolist()[1:] == ["3.0", "2.0–4.0"]
    assert table.loc["aten::mkldnn_convolution"].tolist()[1:] == ["1.0", "1.0–2.0"]
    assert table.loc["aten::add_"].tolist()[1:] == ["0.043", "0.043–0.043"]  # 43 µs, not "0.0"
    assert profiling.ratio_text(ratio) == "3.00× (2.00–3.00× over 3 steps of one run)"


def test_the_backward_sentence_compares_time_with_arithmetic():
    said = profiling.backward_sentence(stats.spread([1.9, 1.94, 2.01]), 1.79)
    assert said.startswith(
        "the backward convolutions took 1.94× the forward's time (1.90–2.01× over 3 steps of one run) for "
        "1.79× their"
    )
    # 1.79 / 1.94 = 0.92 as fast per multiply-add: said as the time taken, 1.94 / 1.79 = 1.08× as long
    assert said.endswith("so per multiply-add they took 1.08× as long as the forward ones")
    faster = profiling.backward_sentence(stats.spread([1.9, 1.94, 2.01]), 2.5)  # 2.5 / 1.94 = 1.29
    assert faster.endswith("so per multiply-add they ran 1.29× as fast as the forward ones")
    # two different ends keep apart: the gpu edition's 3.8201–3.8249 is not "3.82–3.82×"
    assert profiling.ratio_text(stats.spread([3.8201, 3.822, 3.8249])) == (
        "3.822× (3.820–3.825× over 3 steps of one run)"
    )


def fake_step(rows: dict[str, float], step_ms: float) -> dict:
    """One profiled CPU step: host self times (ms) per operator and the step's host total."""
    events = [{"key": key, "count": 1, "device_type": "CPU", "is_user_annotation": False,
               "self_cpu_time_total": ms * 1e3, "self_device_time_total": 0.0}
              for key, ms in rows.items()]  # fmt: skip
    events.append({"key": "forward", "count": 1, "device_type": "CPU", "is_user_annotation": True,
                   "self_cpu_time_total": 5e3, "self_device_time_total": 0.0})  # fmt: skip
    return {"events": events, "device_seconds": None, "host_seconds": step_ms / 1e3}


def fake_profile(rows: dict[str, float], step_ms: float, steps=(0.09, 0.1, 0.11), profiled_ms=None) -> dict:
    """A CPU profile result: its median profiled step (``fake_step``), the profiled steps (by default three
    of ``step_ms`` each) and the unprofiled ``steps``."""
    profiled = [fake_step(rows, ms) for ms in (profiled_ms or [step_ms] * 3)]
    return {**fake_step(rows, step_ms), "profiled": profiled, "step_seconds_all": list(steps)}


def test_operator_categories_add_up_to_the_step():
    result = fake_profile({"aten::convolution_backward": 30, "aten::mkldnn_convolution": 10, "aten::mm": 5,
                           "aten::copy_": 2, "aten::_to_copy": 1, "aten::sqrt": 4}, step_ms=60)  # fmt: skip
    found = profiling.operator_categories(profiling.operator_seconds(result), result["host_seconds"])
    assert found == pytest.approx({"convolutions": 0.040, "matrix products": 0.005,
                                   "conversions and copies": 0.003, "everything else": 0.012})  # fmt: skip


def test_each_kind_of_operator_s_share_comes_with_its_spread_over_the_profiled_steps():
    """Convolutions 40 ms of steps of 50, 60 and 80 ms: 80 %, 67 % and 50 % of the step."""
    rows = {"aten::convolution_backward": 30, "aten::mkldnn_convolution": 10, "aten::mm": 5}
    result = fake_profile(rows, step_ms=60, profiled_ms=[50, 60, 80])
    shares = profiling.category_shares(result)
    convolutions = shares["convolutions"]
    assert (convolutions.median, convolutions.low, convolutions.high, convolutions.count) == pytest.approx(
        (40 / 60, 0.5, 0.8, 3)
    )
    assert profiling.share_text(convolutions, on_gpu=False) == (
        "67% of a profiled step (50%–80% over 3 steps of one run)"
    )
    # the gpu edition's 94%–94%: two different ends keep apart with a decimal
    close = stats.spread([0.9412, 0.942, 0.9431])
    assert profiling.share_text(close, on_gpu=True) == (
        "94.2% of a profiled step's GPU kernel time (94.1%–94.3% over 3 steps of one run)"
    )
    assert shares["matrix products"].median == pytest.approx(5 / 60)
    assert profiling.across_steps(result, lambda step: step["host_seconds"]).high == pytest.approx(0.08)


def test_where_bf16_loses_its_time():
    categories = ["convolutions", "matrix products", "conversions and copies", "everything else"]
    profiles = pd.DataFrame(
        {"model": "ConvNet", "precision": ["float32"] * 4 + ["bf16"] * 4, "category": categories * 2,
         "seconds": [1.0, 0.1, 0.0, 0.2, 20.0, 0.1, 0.3, 0.2], "profiled_steps": 3}
    )  # fmt: skip
    said = profiling.explain_precision(profiles, "ConvNet")
    assert said == (
        "ConvNet's convolutions took 20,000 ms in bf16 against 1,000 ms in float32, conversions and copies "
        "added 300 ms, and everything else took 200 ms against 200 ms: in the profiled steps the largest "
        "change is in the convolutions (+19,000 ms)"
    )
    table = profiling.precision_profile_table(profiles)
    assert table.loc["the whole step (sum)", ("ConvNet", "bf16")] == "20,600"
    assert table.index.name == "ms of a step, median of 3 profiled steps"
    converting = profiles.assign(seconds=[1.0, 0.1, 0.0, 0.2, 1.0, 0.1, 2.0, 0.2])
    assert profiling.explain_precision(converting, "ConvNet").endswith(
        "the largest change is in the conversions and copies (+2,000 ms)"
    )
    # everything else 200 ms in float32, 150 ms in bf16; the convolutions save the most
    faster = profiles.assign(seconds=[1.0, 0.1, 0.0, 0.2, 0.5, 0.1, 0.1, 0.15])
    said = profiling.explain_precision(faster, "ConvNet")
    assert "everything else took 150 ms against 200 ms" in said
    assert said.endswith("the largest change is in the convolutions (−500 ms)")
    small = profiles.assign(seconds=[0.01, 0.1, 0.0, 0.2, 0.005, 0.1, 0.0, 0.2])
    assert profiling.explain_precision(small, "ConvNet").endswith("in the convolutions (−5.00 ms)")
    # the profiled totals, 1.3 s in float32 and 20.6 s in bf16 (a speed-up of 0.06x: 20.6 / 1.3 = 15.85 times
    # as long), against what the timed steps say; a speed-up below 1 is said as the time taken (1 / 0.07 =
    # 14.29, its interval's ends 1 / 0.08 = 12.50 and 1 / 0.05 = 20.00), as the chapter's sentence says it
    inside = {"speedup": 0.07, "low": 0.05, "high": 0.08, "verdict": "slower"}
    assert profiling.explain_precision(profiles, "ConvNet", inside).endswith(
        "; the profiled totals (1,300 ms in float32, 20,600 ms in bf16: bf16 taking 15.85× as long) agree "
        "with the timed steps, in which bf16 took 14.29× as long (12.50–20.00×)"
    )
    outside = {"speedup": 1.06, "low": 0.98, "high": 1.18, "verdict": "not resolved"}
    assert profiling.explain_precision(profiles, "ConvNet", outside).endswith(
        "; but the profiled totals (1,300 ms in float32, 20,600 ms in bf16: bf16 taking 15.85× as long) do "
        "not reproduce the timed steps, in which bf16 ran 1.06× as fast (0.98–1.18×, not resolved), so this "
        "profile does not explain it"
    )
    # chapter 1's ConvNet on the H200: profiled 4.01×, timed 3.80× (3.74–3.83×): ln 4.01 / ln 3.80 =
    # 1.3888 / 1.3350 = 104 % of the timed change
    quartered = profiles.assign(seconds=[4.01, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    close = {"speedup": 3.80, "low": 3.74, "high": 3.83, "verdict": "faster"}
    assert profiling.explain_precision(quartered, "ConvNet", close).endswith(
        "; the profiled totals (4,010 ms in float32, 1,000 ms in bf16: bf16 4.01× as fast) lie outside the "
        "timed steps' interval, in which bf16 ran 3.80× as fast (3.74–3.83×), but their change is 104 % of "
        "the timed one (as logarithms of the ratios): close enough to show where the difference lies"
    )
    # a profile at 1.01× against a timed 1.08× (1.06–1.10×) holds ln 1.01 / ln 1.08 = 13 % of it: no
    small_gain = profiles.assign(seconds=[1.01, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    timed = {"speedup": 1.08, "low": 1.06, "high": 1.10, "verdict": "faster"}
    assert profiling.explain_precision(small_gain, "ConvNet", timed).endswith("does not explain it")
    assert "conversions and copies added 0.400 ms" in profiling.explain_precision(
        profiles.assign(seconds=[1.0, 0.1, 0.0, 0.2, 1.0, 0.1, 0.0004, 0.2]), "ConvNet"
    )


def swept_record(steps: list[float]) -> dict:
    """A ``step_timing`` record of the batch-size sweep."""
    return {"result": {"step_seconds_all": steps}}


def test_the_profiled_step_against_the_unprofiled_and_the_swept_ones():
    # 99-101 ms against 97-103 ms: 0.96-1.04x by the min-max pairing, inside ±10 %
    same = fake_profile({}, step_ms=100, steps=(0.097, 0.1, 0.103), profiled_ms=[99, 100, 101])
    assert profiling.profile_sentence(same) == (
        "the steps under the profiler took 100 ms (99–101, 3 steps), the unprofiled steps 100 ms (97–103, 3 "
        "steps): no measurable difference, so the profiler's own bookkeeping does not show."
    )
    # 200 ms against 90-110 ms: 2.00x the median, 1.82-2.22x by the min-max pairing
    outside = profiling.profile_sentence(fake_profile({}, step_ms=200), swept_record([0.2, 0.2, 0.2]))
    assert "the profiled steps took 2.00× the unprofiled median (1.82–2.22×), the profiler's own" in outside
    # 70 ms against 90-110 ms: the later, profiled steps ran faster, which no bookkeeping explains
    earlier = profiling.profile_sentence(fake_profile({}, step_ms=70))
    assert earlier.endswith(
        "the profiled steps, which ran after the unprofiled ones, took 0.70× their median (0.64–0.78×), so "
        "the gap is no bookkeeping of the profiler's but a change between the earlier and the later steps "
        "of this run."
    )
    wide = profiling.profile_sentence(fake_profile({}, step_ms=100, profiled_ms=[60, 100, 160]))
    assert wide.endswith(
        "the two spread too widely to tell whether the profiler's own bookkeeping adds time."
    )
    # the sweep, another run, at 200 ms against the unprofiled 90-110 ms: no verdict across runs, the gap
    assert outside.endswith(
        "The batch-size sweep, another run, timed this batch at 200 ms (200–200, 3 steps): the unprofiled "
        "steps here took 50% less, and they leave out the sweep's zeroing of gradients and batch indexing: "
        "that work and drift between runs cannot be told apart."
    )
    # the other way round, the phases' 200 ms against the sweep's 100 ms: 100 % longer with less work
    phases = fake_profile({}, step_ms=200, steps=(0.19, 0.2, 0.21))
    slower = profiling.profile_sentence(phases, swept_record([0.1, 0.1, 0.1]))
    assert slower.endswith(
        "the unprofiled steps here took 100% longer, although they leave out the sweep's zeroing of "
        "gradients and batch indexing: a drift between runs that one run cannot explain, so compare step "
        "times within one run."
    )
    # 90-110 ms against 80-130 ms: the ranges overlap, and that is all two runs can say
    profile = fake_profile({}, step_ms=200)
    overlapping = profiling.profile_sentence(profile, swept_record([0.08, 0.1, 0.13]))
    assert overlapping.endswith(
        "timed this batch at 100 ms (80–130, 3 steps): the unprofiled steps' range overlaps the sweep's."
    )
    # on a GPU: the kernels' summed time against the steps' CUDA-event spans, the share the GPU computed
    gpu_steps = [{"events": [], "host_seconds": 0.2, "device_seconds": ms / 1e3} for ms in (24, 25, 26.5)]
    on_gpu = profiling.profile_sentence(profile | {"device_seconds": 0.025, "profiled": gpu_steps})
    assert on_gpu == (
        "the kernels of a profiled step summed to 25.0 ms (24.0–26.5, 3 steps) of GPU time, while the "
        "unprofiled steps spanned 100 ms (90–110, 3 steps) on CUDA events: the GPU computed for 25% of the "
        "step, and waited for the host to issue work for the rest."
    )


REAL_TRACES = Path(__file__).parents[1] / "data" / "results" / "gpu-check"


@pytest.mark.parametrize("model", ["LinearNet", "ConvNet"])
def test_a_real_h200_trace_is_read_as_it_was_on_the_gpu_without_the_profilers_rows(model):
    """``make gpu-check``'s trace of one profiled step on an NVIDIA H200 (committed with its records):
    the device total is what the check computed there, and CUPTI's "Activity Buffer Request", which it
    listed among the costliest operators, is no operator of the step."""
    kept = json.loads((REAL_TRACES / f"key-averages-{model}.json").read_text())
    assert kept["torch"] == "2.11.0+cu130" and "Activity Buffer Request" in {e["key"] for e in kept["events"]}
    result = profiling.summarize_events(kept["events"], gpu=True)
    assert (
        result["device_seconds"] == kept["device_seconds"] and result["host_seconds"] == kept["host_seconds"]
    )
    operators = [row["operator"] for row in result["operators"]]
    assert "Activity Buffer Request" not in operators and all(name.startswith("aten::") for name in operators)
    listed_there = [
        row["operator"] for row in kept["operators"] if row["operator"] != "Activity Buffer Request"
    ]
    assert operators[: len(listed_there)] == listed_there  # the same order, one more operator in its place
