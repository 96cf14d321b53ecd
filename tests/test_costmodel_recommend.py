"""helpers.costmodel.recommend: GPU predictions with their bands, verdicts that hold over the band, the
two conditions on the per-GPU batch, time to a result, and the checks against the seed."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from helpers.costmodel import configurations as configs
from helpers.costmodel import gpus, prose, recommend, specs, tables
from helpers.costmodel.timemodel import ComputeLine
from helpers.dataparallel import SAMPLE_BYTES
from helpers.results import ResultStore
from helpers.stats import significant

LINK = specs.Link("test link", 1e10, 1e10, 5e9, 2e10, 1e-5, "made up", "", "")


def flat(seconds: float):
    """A GPU whose every step takes ``seconds`` per sample, split 1 : 2 : 0 over the three phases."""
    return lambda batch: {
        "forward": seconds * batch / 3,
        "backward": 2 * seconds * batch / 3,
        "optimizer": 0.0,
    }


def test_ddp_shards_a_batch_of_100_over_8_gpus_into_100_samples():
    assert recommend.ddp_shards(100, 8) == [13, 13, 13, 13, 12, 12, 12, 12]
    assert sum(recommend.ddp_shards(100, 8)) == 100
    step = recommend.predict_gpu_step("ddp_overlap", "ConvNet", 100, 8, flat(1e-3), LINK)
    assert step["per_gpu_batch"] == 13 and step["samples_per_step"] == 100
    # the step waits for the largest shard: 13 samples at 1 ms, not 100 // 8 = 12
    assert step["compute_seconds"] == pytest.approx(13e-3)
    with pytest.raises(ValueError, match="no sample"):
        recommend.ddp_shards(4, 8)


def test_dataparallel_step_by_hand():
    step = recommend.predict_gpu_step("dataparallel", "ConvNet", 10, 4, flat(1e-3), LINK, op_seconds=0)
    ring = 3 * 1e-5 + 1_504_800 / 1e10  # ConvNet's 376,200 float32 parameters, broadcast and reduced
    moved = 7 * (SAMPLE_BYTES + 80) / 1e10  # chunks 3, 3, 3, 1: seven samples leave GPU 0 and come back
    assert step["step_seconds"] == pytest.approx(3e-3 + 2 * ring + moved)
    assert step["communication_seconds"] == pytest.approx(2 * ring + moved)
    launches = recommend.predict_gpu_step("dataparallel", "ConvNet", 10, 4, flat(1e-3), LINK, op_seconds=1.0)
    kernels = 12 + 21  # one replica's forward and backward kernels, for each of 3 more replicas
    assert launches["step_seconds"] - step["step_seconds"] == pytest.approx(3 * kernels)
    one = recommend.predict_gpu_step("dataparallel", "ConvNet", 10, 1, flat(1e-3), LINK)
    assert one["step_seconds"] == pytest.approx(1e-2) and one["communication_seconds"] == 0


def test_ddp_step_hides_the_all_reduce_behind_backward_at_the_scenarios_bandwidth():
    """LinearNet, 800 samples on 8 GPUs at 1 ms a sample: 100 per GPU, forward 100/3 ms, backward 200/3 ms.
    Its 48,408,880 B of gradient is one 25 MiB bucket, handed over when backward ends: nothing hides it.
    A ring of 8 takes 14 steps of α + (N/8)β = 1e-5 + 6,051,110 × 1e-10 s: 8.611554 ms."""
    step = recommend.predict_gpu_step("ddp_overlap", "LinearNet", 800, 8, flat(1e-3), LINK)
    assert step["communication_seconds"] == pytest.approx(8.611554e-3)
    assert step["step_seconds"] == pytest.approx(0.1 + 8.611554e-3)
    # at the link's low end, 5 GB/s: 14 × (1e-5 + 6,051,110 × 2e-10) = 17.08311 ms
    slow = recommend.predict_gpu_step("ddp_overlap", "LinearNet", 800, 8, flat(1e-3), LINK,
                                      bus_bandwidth=LINK.bus("low"))  # fmt: skip
    assert slow["communication_seconds"] == pytest.approx(17.08311e-3)


def test_a_full_prediction_row_by_hand():
    """ConvNet on the p5s with a measured line of 0.1 ms a sample (no fixed cost) at a global batch of 800:
    one H100 takes 80 ms a step; eight take 100 samples each, 10 ms, and all-reduce the 1,504,800 B of
    gradient in one bucket over NVLink 4 (α 33.7/14 µs, busbw 370 GB/s): 14 × (2.407143e-6 + 188,100 /
    370e9) = 14 × 2.915522e-6 = 40.81730 µs, not hidden (one bucket). Step 10.04082 ms, speed-up
    80 / 10.04082 = 7.967478; an epoch of 800 samples is one step, so a 1-epoch run costs $55.04 × 10.04082
    ms / 3,600 s = $1.535130e-4 against one GPU's $6.88 × 80 ms / 3,600 s = $1.528889e-4: 1.004082×."""
    lines = {("ConvNet", "H100 SXM 80 GB"): measured_flat(1e-4)}
    frame = recommend.scenario_predictions(("ConvNet",), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (800,),
                                           samples=800, epochs=1, measured=lines)  # fmt: skip
    row = frame[(frame["machine"] == "AWS p5.48xlarge") & (frame["scenario"] == "central")].iloc[0]
    assert row["communication_seconds"] == pytest.approx(40.81730e-6, rel=1e-6)
    assert row["step_seconds"] == pytest.approx(10.04082e-3, rel=1e-6)
    assert row["speedup"] == pytest.approx(7.967478, rel=1e-6)
    assert row["dollars_per_run"] == pytest.approx(1.535130e-4, rel=1e-6)
    assert row["one_gpu_dollars_per_run"] == pytest.approx(1.528889e-4, rel=1e-6)
    assert row["cost_multiplier"] == pytest.approx(1.004082, rel=1e-6)


def measured_flat(seconds: float) -> dict:
    return {level: flat(seconds) for level in ("low", "central", "high")}


def test_dollars_per_run_and_the_cost_multiplier():
    lines = {("ConvNet", "H100 SXM 80 GB"): measured_flat(1e-4)}
    frame = recommend.scenario_predictions(("ConvNet",), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (100,),
                                           samples=1000, epochs=2, measured=lines)  # fmt: skip
    assert set(frame["basis"]) == {"measured"} and len(frame) == 2 * (1 + 2 * 3 + 2**3)
    one = frame[(frame["machine"] == "AWS p5.4xlarge") & (frame["scenario"] == "central")].iloc[0]
    # 100 samples at 0.1 ms = 10 ms a step, 10 steps an epoch, 2 epochs: 0.2 s at $6.88 an hour
    assert one["step_seconds"] == pytest.approx(0.01) and one["epoch_seconds"] == pytest.approx(0.1)
    assert one["dollars_per_run"] == pytest.approx(6.88 * 0.2 / 3600) and one["speedup"] == 1
    eight = frame[frame["machine"] == "AWS p5.48xlarge"]
    # $55.04 is exactly 8 x $6.88: with linear prices, a result costs k / speed-up times one GPU's
    assert (eight["cost_multiplier"] - 8 / eight["speedup"]).abs().max() < 1e-9
    assert (eight["cost_multiplier"] > 1).all()


def scenario_rows(values: dict) -> pd.DataFrame:
    """A one-machine frame of speed-ups: the central value, each input's ends, and the corners."""
    rows = [{"scenario": label, "speedup": value} for label, value in values.items()]
    return pd.DataFrame(rows)


def test_a_verdict_holds_over_the_whole_band_or_names_what_to_measure():
    above = scenario_rows(
        {"central": 2.0, "per-op host overhead: low": 2.5, "per-op host overhead: high": 1.2}
    )
    assert recommend.verdict(above, "speedup", 1, "faster", "slower") == "faster whatever the inputs"
    below = scenario_rows({"central": 0.5, "corner": 0.9})
    assert recommend.verdict(below, "speedup", 1, "faster", "slower") == "slower whatever the inputs"
    mixed = scenario_rows(
        {
            "central": 1.1,
            "per-op host overhead: low": 1.4,
            "per-op host overhead: high": 0.8,
            "achieved link bandwidth: low": 1.05,
            "achieved link bandwidth: high": 1.2,
        }
    )
    assert recommend.verdict(mixed, "speedup", 1, "faster", "slower") == (
        'depends on the per-op host overhead: measure it with "make gpu-check", which times a step of almost '
        "nothing but per-op time (LinearNet at batch 8)"
    )
    together = scenario_rows(
        {
            "central": 1.1,
            "corner": 0.9,
            "achieved link bandwidth: low": 1.01,
            "achieved link bandwidth: high": 1.2,
        }
    )
    # no input alone crosses 1 (the link's ends 1.01 and 1.2), an unlabelled corner does: the inputs
    # together, naming the one whose end comes nearest to crossing
    assert recommend.verdict(together, "speedup", 1, "faster", "slower") == (
        "depends on the inputs together (no input alone tips it; the achieved link bandwidth brings it "
        "nearest): measure it with chapter 4's all-reduce benchmark on the rented machine "
        '("make study PROFILE=gpu")'
    )


def test_a_predicted_speed_up_within_10_percent_of_one_says_so():
    # 0.994-0.998: slower whatever the inputs, but by under 10 %, as a measured interval would say; the
    # side is still slower. 0.81-0.95 reaches past 1/1.1 = 0.909: plain "slower". Dollars keep their words.
    close = scenario_rows({"central": 0.996, "corner": 0.994, "per-op host overhead: high": 0.998})
    far = scenario_rows({"central": 0.895, "corner": 0.81, "per-op host overhead: high": 0.95})
    assert (
        recommend.verdict(close, "speedup", 1, "faster", "slower")
        == "slower by under 10 % whatever the inputs"
    )
    assert recommend.verdict(far, "speedup", 1, "faster", "slower") == "slower whatever the inputs"
    assert recommend.side("slower by under 10 % whatever the inputs") == "slower"
    assert recommend.side("depends on the per-op host overhead: measure it with x") is None
    assert recommend.verdict(close, "speedup", 0.5, "cheaper", "dearer") == "cheaper whatever the inputs"
    coded = tables.depends_coded(pd.DataFrame({"v": ["slower by under 10 % whatever the inputs"]}), ["v"])
    assert coded["v"].tolist() == ["slower by under 10 %"]
    assert coded.attrs["notes"][-1] == '"by under 10 %": the whole band lies within 10 % of 1×.'


def test_inputs_that_tip_a_verdict_only_together_are_those_every_crossing_corner_shares():
    # 1.1 at the central inputs; each end alone stays above 1; of the four corners only the one with the
    # host overhead high and the link low crosses: those two ends are named, and which end; the efficiency
    # is named with neither, since its ends alone do not move the speed-up (1.1 at both)
    host, link, efficiency = "per-op host overhead", "achieved link bandwidth", "matrix-product efficiency"
    corners = {
        f"corner: {host} {h}; {link} {b}; {efficiency} low": value
        for (h, b), value in {("low", "low"): 1.05, ("low", "high"): 1.3, ("high", "low"): 0.9,
                              ("high", "high"): 1.05}.items()
    }  # fmt: skip
    rows = scenario_rows({"central": 1.1, f"{host}: low": 1.2, f"{host}: high": 1.02, f"{link}: low": 1.03,
                          f"{link}: high": 1.2, f"{efficiency}: low": 1.1, f"{efficiency}: high": 1.1,
                          **corners})  # fmt: skip
    names, said = recommend.deciding_inputs(rows, "speedup", 1.0)
    assert names == [host, link]
    assert said == (
        "the inputs together (no input alone tips it; it tips only with the per-op host overhead at its high "
        "end and the achieved link bandwidth at its low end: 1 of the 4 combinations of every input's two "
        "ends)"
    )
    # where a corner with those ends does not tip it, the ends are said to be needed, not enough
    rows.loc[rows["scenario"] == f"corner: {host} high; {link} low; {efficiency} low", "speedup"] = 1.05
    extra = pd.DataFrame(
        {"scenario": [f"corner: {host} high; {link} low; {efficiency} high"], "speedup": [0.9]}
    )
    _, said = recommend.deciding_inputs(pd.concat([rows, extra], ignore_index=True), "speedup", 1.0)
    assert "every combination that tips it has the per-op host overhead at its high end" in said
    # a parenthesis with a colon inside survives the short form of a verdict
    verdict = recommend.verdict(rows, "speedup", 1, "faster", "slower")
    assert prose.short_verdict(verdict).count("(") == prose.short_verdict(verdict).count(")")


def test_summaries_of_the_renters_choice():
    frame = recommend.scenario_predictions(
        ("ConvNet", "LinearNet"), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (100,)
    )
    summary = recommend.summarize(frame).set_index(["model", "machine"])
    convnet = summary.loc[("ConvNet", "AWS p5.48xlarge")]
    assert convnet["speedup_low"] <= convnet["speedup"] <= convnet["speedup_high"]
    assert (
        convnet["faster"] == "faster whatever the inputs"
        and convnet["dollars"] == "dearer whatever the inputs"
    )
    assert summary.loc[("ConvNet", "AWS p5.4xlarge"), "faster"] == "the one-GPU baseline"
    text = recommend.headline(summary.reset_index(), "ConvNet", "AWS p5.48xlarge", 100)
    assert text.startswith("a speed-up of ") and "× the dollars (" in text
    # below 1, the time taken: 1/0.8 = 1.25× the time, its ends 1/0.9 and 1/0.5 (hand-computed)
    slow = pd.DataFrame([{"model": "M", "machine": "X", "global_batch": 8, "speedup": 0.8, "speedup_low": 0.5,
                          "speedup_high": 0.9, "cost_multiplier": 10.0, "cost_multiplier_low": 9.0,
                          "cost_multiplier_high": 12.0}])  # fmt: skip
    assert recommend.headline(slow, "M", "X", 8) == "1.25× the time (1.11–2.00×) for 10× the dollars (9–12×)"
    assert recommend.headline(slow, "M", "X", 8, bands=False) == "1.25× the time for 10× the dollars"
    table = tables.prediction_table(summary.reset_index())
    assert table["speed-up (×)"].str.fullmatch(r"\S+ \(\S+–\S+\)").all()
    # a run of these small models costs a fraction of a dollar: read in cents, 100 to the dollar
    cents = table.set_index(["model", "machine"]).loc[("ConvNet", "AWS p5.48xlarge"), "cents per run"]
    assert cents.split(" ")[0] == significant(convnet["dollars_per_run"] * 100, 3)
    batches = summary.reset_index()["global_batch"].unique()  # one global batch: said in a header
    assert len(batches) > 1 or ("global batch" not in table and f"per-GPU batch (of {batches[0]:,})" in table)


def test_ddp_s_first_bucket_is_1_mib_when_the_cap_is_left_unset():
    """ConvNet's 1.44 MiB: one bucket at the 25 MiB cap; with DDP's 1 MiB first bucket, 1.40 MiB and then
    the first layer's 0.04 MiB. LinearNet stays one bucket: its 45.8 MiB weight's gradient comes last."""
    sizes = gpus.gradient_sizes("ConvNet")  # in the order backward produces them; the last two: layer 1
    assert len(recommend.ddp_buckets("ConvNet")) == 1
    # the first bucket closes with the eighth gradient, the one that takes it past 1 MiB
    assert sum(sizes[:7]) < 2**20 <= sum(sizes[:8])
    assert recommend.ddp_buckets("ConvNet", first_bucket_mb=1) == [sum(sizes[:8]), sum(sizes[8:])]
    assert recommend.ddp_buckets("LinearNet", first_bucket_mb=1) == recommend.ddp_buckets("LinearNet")


def test_steps_to_a_target_and_the_time_to_it(tmp_path):
    store = ResultStore("smoke", root=tmp_path, hardware={"cpu_model": "x", "usable_cores": 2}, code="v")
    for lr_rule, steps in (("fixed", {8: 70, 32: 40, 128: 30}), ("linear", {8: 70, 32: 20, 128: 10})):
        for batch, count in steps.items():
            config = {"kind": "steps_to_target", "model": "LinearNet", "train_samples": 200, "rule": lr_rule,
                      "global_batch": batch, "lr": 1e-3, "seed": 0, "target_loss": 2.2}  # fmt: skip
            store.measure(config, lambda c=count, b=batch: {"steps": c, "samples": c * b, "history": []})
    relation = recommend.steps_relation(store.records())["LinearNet"]
    assert relation["rule"] == "linear" and relation["largest_batch"] == 128  # fewer steps at batch 128
    frame = recommend.scenario_predictions(("LinearNet",), ("AWS p5.4xlarge",), (100, 128, 2700, 4000))
    timed = recommend.time_to_result(frame, relation)
    assert set(timed["global_batch"]) == {100, 128}  # no batch beyond the relation's measured range
    wide = recommend.time_to_result(frame, relation, cap=10_000)
    assert wide["global_batch"].max() == 2700  # nor, asked for more, beyond the training set
    row = timed[timed["scenario"] == "central"].iloc[0]
    steps = relation["s_min"] + relation["e_min"] / row["global_batch"]
    assert row["seconds_to_target"] == pytest.approx(steps * row["step_seconds"])
    assert row["dollars_to_target"] == pytest.approx(6.88 * row["seconds_to_target"] / 3600)
    best = recommend.fastest_batches(recommend.result_band(timed))
    assert len(best) == 1 and best.iloc[0]["seconds_to_target_low"] <= best.iloc[0]["seconds_to_target"]
    assert recommend.steps_relation([]) == {}
    # for reading: the one machine's fastest batch is every machine's, so it goes into the headers
    _, shown = tables.time_to_result_table(frame, relation)
    batch = int(best.iloc[0]["global_batch"])
    assert list(shown.columns) == ["GPUs", f"seconds to target, global batch {batch:,}",
                                   f"cents to target, global batch {batch:,}"]  # fmt: skip
    cents = shown[f"cents to target, global batch {batch:,}"].iloc[0].split(" ")[0]
    assert cents == significant(best.iloc[0]["dollars_to_target"] * 100, 3)


def test_the_time_to_a_result_carries_the_seeds_spread(tmp_path):
    """Two seeds: 70/40/30 and 90/50/30 steps at batches 8/32/128 (median 80/45/30). S(B) = S_min + E_min/B
    on (1/B, S) by least squares, fitted to the fewest, the median and the most steps over seeds."""
    store = ResultStore("smoke", root=tmp_path, hardware={"cpu_model": "x", "usable_cores": 2}, code="v")
    for seed, steps in ((0, {8: 70, 32: 40, 128: 30}), (1, {8: 90, 32: 50, 128: 30})):
        for batch, count in steps.items():
            config = {"kind": "steps_to_target", "model": "LinearNet", "train_samples": 200, "rule": "fixed",
                      "global_batch": batch, "lr": 1e-3, "seed": seed, "target_loss": 2.2}  # fmt: skip
            store.measure(config, lambda c=count, b=batch: {"steps": c, "samples": c * b, "history": []})
    relation = recommend.steps_relation(store.records())["LinearNet"]
    inverse = np.array([1 / 8, 1 / 32, 1 / 128])
    for case, steps in (("fewest", [70, 40, 30]), ("most", [90, 50, 30])):
        slope, intercept = np.polyfit(inverse, steps, 1)
        assert relation["envelope"][case]["e_min"] == pytest.approx(slope)
        assert relation["envelope"][case]["s_min"] == pytest.approx(intercept)
    frame = recommend.scenario_predictions(("LinearNet",), ("AWS p5.4xlarge",), (100,))
    timed = recommend.time_to_result(frame, relation)
    assert len(timed) == 3 * len(frame)  # every scenario at the median fit and at each seed envelope
    central = timed[timed["scenario"] == "central"].iloc[0]
    fewest = timed[timed["scenario"] == "central, fewest steps"].iloc[0]
    fit = relation["envelope"]["fewest"]
    assert fewest["seconds_to_target"] == pytest.approx(
        (fit["s_min"] + fit["e_min"] / 100) * central["step_seconds"]
    )
    band = recommend.result_band(timed).iloc[0]
    assert band["seconds_to_target_low"] <= fewest["seconds_to_target"] < central["seconds_to_target"]
    assert band["seconds_to_target"] == central["seconds_to_target"]


def test_gpu_step_timings_of_a_gpu_run_replace_the_roofline(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    hardware = {"cpu_model": "x", "usable_cores": 16, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    store = ResultStore("gpu", hardware=hardware)
    for batch, seconds in ((10, [1e-3, 1.2e-3, 1.1e-3]), (100, [4e-3, 4e-3, 5e-3])):
        config = {"kind": "step_timing", "model": "ConvNet", "batch_size": batch, "device": "cuda:0",
                  "autocast": None}  # fmt: skip
        store.measure(config, lambda s=seconds: {"step_seconds_all": s})
    store.measure({"kind": "step_timing", "model": "ConvNet", "batch_size": 10, "device": "cpu"},
                  lambda: {"step_seconds_all": [1.0]})  # fmt: skip
    measured = recommend.gpu_step_timings("gpu").sort_values("batch")
    assert measured["gpu"].tolist() == ["H100 SXM 80 GB"] * 2 and measured["batch"].tolist() == [10, 100]
    assert measured["step_seconds"].tolist() == [1.1e-3, 4e-3] and measured["step_max"].tolist() == [
        1.2e-3,
        5e-3,
    ]
    errors = gpus.roofline_error(measured)
    predicted = gpus.roofline_step("ConvNet", 10, specs.GPUS["H100 SXM 80 GB"])["step_seconds"]
    assert errors["error_percent"].iloc[0] == pytest.approx((predicted - 1.1e-3) / 1.1e-3 * 100)
    assert errors["within_band"].dtype == bool
    lines = recommend.measured_computes(measured)[("ConvNet", "H100 SXM 80 GB")]
    assert sum(lines["central"](10).values()) == pytest.approx(1.1e-3, rel=0.05)  # through the two medians
    assert sum(lines["high"](100).values()) == pytest.approx(5e-3, rel=0.05)  # through the slowest steps
    frame = recommend.scenario_predictions(("ConvNet",), ("AWS p5.4xlarge",), (100,), measured={
        ("ConvNet", "H100 SXM 80 GB"): lines})  # fmt: skip
    assert set(frame["basis"]) == {"measured"}
    assert recommend.gpu_step_timings("nothing").empty
    assert recommend.measured_computes(recommend.gpu_step_timings("nothing")) == {}  # the roofline stands


def test_independent_runs_of_one_batch_are_pooled(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    hardware = {"cpu_model": "x", "usable_cores": 16, "gpus": [{"name": "NVIDIA H200"}]}
    store = ResultStore("gpu", hardware=hardware)
    for timed_steps, seconds in ((3, [1e-3, 2e-3, 6e-3]), (2, [3e-3, 4e-3])):  # chapter 1's run, chapter 2's
        config = {"kind": "step_timing", "model": "LinearNet", "batch_size": 10, "device": "cuda:0",
                  "autocast": None, "timed_steps": timed_steps}  # fmt: skip
        store.measure(config, lambda s=seconds: {"step_seconds_all": s})
    bf16 = {
        "kind": "step_timing",
        "model": "LinearNet",
        "batch_size": 10,
        "device": "cuda:0",
        "autocast": "bf16",
    }
    store.measure(bf16, lambda: {"step_seconds_all": [9.0]})  # not float32: left out
    pooled = recommend.gpu_step_timings("gpu")
    assert pooled[["gpu", "batch", "step_seconds", "step_min", "step_max", "runs"]].values.tolist() == [
        ["H200 SXM 141 GB", 10, 3e-3, 1e-3, 6e-3, 2]  # the median of all five steps
    ]


def test_the_cost_of_a_result_from_chapter_1_and_3_records():
    history = [{"epoch": 1, "test_accuracy": 0.05}, {"epoch": 2, "test_accuracy": 0.2}]
    training = {"kind": "training", "config": {"model": "ConvNet", "batch_size": 50, "train_samples": 2700},
                "result": {"history": history, "epoch_seconds": 100.0}}  # fmt: skip
    ddp = {"kind": "ddp_run", "config": {"model": "ConvNet", "global_batch_size": 50, "train_samples": 400,
                                         "world_size": 2, "bucket_cap_mb": 0.25, "compression": None},
           "result": {"epoch_seconds": 8.0}}  # fmt: skip
    costs = recommend.result_costs([training, ddp], "ConvNet", 50, 0.1, ("AWS p5.4xlarge",)).set_index(
        "setup"
    )
    assert costs.loc["this machine, one process", "seconds"] == 200.0  # 2 epochs of 100 s
    # 8 s for 8 steps of 400 clips; 2,700 clips take 54 steps: 54 s an epoch, 108 s for 2
    assert costs.loc["this machine, DDP 2 ranks, 0.25 MiB buckets", "seconds"] == 108.0
    gpu = costs.loc["AWS p5.4xlarge"]
    assert gpu["seconds_low"] <= gpu["seconds"] <= gpu["seconds_high"] and gpu["dollars"] > 0
    never = recommend.result_costs([training], "ConvNet", 50, 0.9, ())
    assert never["reason"].iloc[0] == (  # the edition's own chapter 1 run, which may not be the one shown
        "never reached 90% test accuracy in this machine's chapter 1 run, which this chapter reads (2 epochs "
        "of 2,700 clips)"
    )
    assert recommend.result_costs([], "ConvNet", 50, 0.1, ()) is None
    assert math.isnan(costs.loc["this machine, one process", "dollars"])


def test_step_times_kept_by_gpu_check_are_measured_gpu_steps_too(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    folder = tmp_path / "data" / "results" / "gpu-check"
    folder.mkdir(parents=True)
    timings = [{"model": "ConvNet", "batch": batch, "device": "cuda:0", "step_seconds_all": steps}
               for batch, steps in ((8, [2e-3, 1e-3, 3e-3]), (64, [9e-3, 8e-3, 7e-3]))]  # fmt: skip
    checks = [{"path": "training step, ConvNet", "measured": {"step_timings": timings}},
              {"path": "bf16 autocast, ConvNet", "measured": {}}]  # fmt: skip
    record = {"hardware": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}, "checks": checks}
    (folder / "nvidia-h100-80gb-hbm3-0123456789abcdef.json").write_text(json.dumps(record))
    (folder / "key-averages-ConvNet.json").write_text(json.dumps({"events": []}))  # the profiler's: no steps
    measured = recommend.gpu_step_timings("gpu")
    assert measured[["gpu", "batch", "step_seconds", "step_min", "step_max", "source"]].values.tolist() == [
        ["H100 SXM 80 GB", 8, 2e-3, 1e-3, 3e-3, "make gpu-check"],
        ["H100 SXM 80 GB", 64, 8e-3, 7e-3, 9e-3, "make gpu-check"],
    ]
    assert ("ConvNet", "H100 SXM 80 GB") in recommend.measured_computes(measured)  # two batches: a line


def summary_of(speedups: list[float], multipliers: list[float], min_speedup: float = 1.5) -> dict:
    """``summarize`` of one made-up 8-GPU machine whose scenarios give these speed-ups and multipliers."""
    labels = ["central", "per-op host overhead: low", "per-op host overhead: high"]
    rows = [{"model": "M", "machine": "m", "gpu": "g", "gpus": 8, "link": "l", "method": "ddp_overlap",
             "global_batch": 100, "basis": "roofline", "scenario": label, "per_gpu_batch": 13, "speedup": s,
             "cost_multiplier": c, "step_seconds": 1.0, "epoch_seconds": 1.0, "dollars_per_run": 1.0,
             "hour_value_break_even": 1.0}
            for label, s, c in zip(labels, speedups, multipliers, strict=True)]  # fmt: skip
    return recommend.summarize(pd.DataFrame(rows), min_speedup).iloc[0].to_dict()


def test_every_outcome_of_the_recommendation():
    """Faster and dearer (what linear prices give); slower; faster and no dearer (a speed-up above k, or
    a cheaper price per GPU on the bigger machine: reachable only so); and whether the speed-up is at least
    the renter's minimum, each over the whole band, else what decides it."""
    faster_dearer = summary_of([4.0, 5.0, 3.0], [2.0, 1.6, 2.7])
    assert (faster_dearer["faster"], faster_dearer["dollars"]) == (
        "faster whatever the inputs", "dearer whatever the inputs")  # fmt: skip
    assert faster_dearer["enough"] == "at least 1.5× faster whatever the inputs"
    slower = summary_of([0.5, 0.7, 0.3], [16.0, 11.4, 26.7])
    assert (slower["faster"], slower["enough"]) == (
        "slower whatever the inputs",
        "not 1.5× faster whatever the inputs",  # "under 1.5× faster" read oddly beside "slower"
    )
    cheaper = summary_of([8.5, 9.0, 8.1], [0.94, 0.89, 0.99])
    assert (cheaper["faster"], cheaper["dollars"]) == (
        "faster whatever the inputs",
        "no dearer whatever the inputs",
    )
    undecided = summary_of([1.3, 1.8, 1.1], [6.2, 4.4, 7.3])
    assert undecided["faster"] == "faster whatever the inputs"
    assert undecided["enough"].startswith("depends on the per-op host overhead")


def test_a_measured_speedup_pairs_the_ends_of_the_spread():
    """Flat measured lines at 1, 2 and 3 ms (fastest, median, slowest steps): at the low end of their
    spread the eight-GPU step runs on the fastest line and the one-GPU step on the slowest, and the reverse
    at the high end, so the speed-up band holds the noise of both steps."""
    flat = {level: recommend.measured_compute(ComputeLine(seconds, 0.0), 0.0)
            for level, seconds in (("low", 1e-3), ("central", 2e-3), ("high", 3e-3))}  # fmt: skip
    frame = recommend.scenario_predictions(("LinearNet",), ("AWS p5en.48xlarge",), (100,),
                                           measured={("LinearNet", "H200 SXM 141 GB"): flat})  # fmt: skip
    rows = frame.set_index("scenario")
    ends = {end: rows.loc[f"spread of the measured steps: {end}"] for end in ("low", "high")}
    assert ends["low"]["single_gpu_step_seconds"] == pytest.approx(3e-3)
    assert ends["high"]["single_gpu_step_seconds"] == pytest.approx(1e-3)
    assert rows.loc["central", "single_gpu_step_seconds"] == pytest.approx(2e-3)
    assert ends["low"]["speedup"] > rows.loc["central", "speedup"] > ends["high"]["speedup"]


def test_each_scenario_s_break_even_hour_is_the_price_arithmetic():
    """(D_k − D_1)/(T_1 − T_k) with D = price × T and S = T_1/T_k is (P_k − S·P_1)/(S − 1), P in dollars an
    hour: eight H100s (p5.48xlarge) against one (p5.4xlarge), every scenario of the inputs."""
    frame = recommend.scenario_predictions(("ConvNet",), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (100,))
    eight = frame[frame["gpus"] == 8]
    p8 = float(configs.configuration("AWS p5.48xlarge").hourly_price)
    p1 = float(configs.configuration("AWS p5.4xlarge").hourly_price)
    s = eight["speedup"]
    assert (s > 1).all()
    assert eight["hour_value_break_even"].to_numpy() == pytest.approx(((p8 - s * p1) / (s - 1)).to_numpy())
    assert frame.loc[frame["gpus"] == 1, "hour_value_break_even"].isna().all()
    shown = tables.renter_table(recommend.summarize(frame), 0)
    assert list(shown.columns) == ["speed-up (×)", "dollars (×)", "break-even value of your hour ($)"]
    assert "at $2 an hour" in tables.renter_table(recommend.summarize(frame), 2).columns
