"""helpers.advise.predict and report: the advice for the book's models is chapter 5's; verdicts and
reasons come with their numbers; what cannot be priced is refused or left out with the reason."""

import json
import math

import pandas as pd
import pytest

from helpers import stats
from helpers.advise import counting, examples, predict, report
from helpers.costmodel import recommend
from helpers.sharding.memory import per_rank_bytes

MACHINES = ("AWS p5.4xlarge", "AWS p5.48xlarge", "AWS g6.xlarge", "AWS g6.48xlarge")


@pytest.fixture(scope="module")
def linear_advice():
    return predict.advise(counting.count_book_model("LinearNet"), 16, gpu_counts=(1, 8), samples=2700)


def test_the_advice_for_a_book_model_equals_chapter_5_s_prediction(linear_advice):
    chapter_five = recommend.summarize(
        recommend.scenario_predictions(("LinearNet",), MACHINES, (16,), samples=2700, epochs=1)
    ).set_index("machine")
    advice = linear_advice.machines.set_index("machine").loc[list(MACHINES)]
    for column in ("step_seconds", "speedup_low", "speedup_high", "cost_multiplier", "dollars_per_run"):
        pd.testing.assert_series_equal(advice[column], chapter_five[column], check_names=False)
    assert (advice["faster"] == chapter_five["faster"]).all()


def test_a_verdict_below_one_reads_as_the_time_taken(linear_advice):
    """LinearNet at a global batch of 16 on eight GPUs: a machine predicted slower reads "taking N× as
    long as one", N the speed-up's reciprocal, never "0.4× as fast"."""
    multi = linear_advice.machines[linear_advice.machines["gpus"] > 1].set_index("machine")
    for sentence in linear_advice.verdicts:
        machine = sentence.split("(", 1)[1].split(")", 1)[0]
        row = multi.loc[machine]
        figure, band = stats.ratio_figures(row["speedup"], row["speedup_low"], row["speedup_high"])
        pace = "as long as one" if row["speedup"] < 1 else "as fast as one"
        assert f"({machine}): {figure}× ({band}) {pace}" in sentence
    assert (multi["speedup"] < 1).any()  # the case this test is for


def test_only_machines_of_the_asked_sizes_with_their_one_gpu_offer_and_the_rest_said(linear_advice):
    machines = set(linear_advice.machines["machine"])
    assert {"AWS p5.48xlarge", "AWS p5.4xlarge", "AWS g6.48xlarge", "AWS g6.xlarge"} <= machines
    assert not {"AWS g6.12xlarge", "AWS p3.8xlarge"} & machines  # four GPUs were not asked for
    chosen, skipped = predict.machines_for((2, 8), "bf16")
    assert "2 GPUs: no machine of that size in chapter 5's table of real configurations" in skipped
    assert "AWS p3.16xlarge: the V100 SXM2 16 GB has no bfloat16 tensor cores" in skipped
    assert "AWS p3.16xlarge" not in chosen and "AWS p5.48xlarge" in chosen


def test_every_method_s_memory_is_the_sharding_arithmetic_plus_its_activations(linear_advice):
    rows = linear_advice.methods.set_index(["machine", "method"])
    fsdp = rows.loc[("AWS p5.48xlarge", "ZeRO-3 (FSDP)")]
    busiest = max(
        per_rank_bytes("LinearNet", 3, 8), key=lambda r: r["parameters"] + r["gradients"] + r["optimizer"]
    )
    held = busiest["parameters"] + busiest["gradients"] + busiest["optimizer"]
    # 16 over 8 GPUs: 2 samples each, 52,440 B kept for backward a sample (and none per step)
    assert fsdp["state_bytes"] == held and fsdp["device_bytes"] == held + 2 * 52_440
    ddp = rows.loc[("AWS p5.48xlarge", "DDP")]
    assert ddp["state_bytes"] == 12_102_220 * 16 + 8 * 4  # weights, gradients, two moments, 8 step counters
    assert fsdp["step_seconds_high"] >= ddp["step_seconds_high"]  # FSDP's all-gather at most adds
    assert fsdp["largest_batch_per_gpu"] > ddp["largest_batch_per_gpu"]


def test_each_reason_comes_with_its_number_and_whether_it_applies(linear_advice):
    reasons = linear_advice.reasons.set_index(["machine", "reason"])["applies"]
    # LinearNet's 48 MB gradient over PCIe takes longer than 2 samples' backward on an L4: it applies
    assert reasons[("AWS g6.48xlarge", "gradient exchange longer than backward on this link")]
    # and its 46.2 MiB make one bucket at the 25 MiB cap: the all-reduce follows backward, whatever the batch
    one = (
        "the all-reduce after backward: the gradients fit one DDP bucket at bucket_cap_mb=25, nothing "
        "overlaps"
    )
    assert reasons[("AWS g6.48xlarge", one)]
    # weak scaling is a condition, said as one: the batch grown with the GPUs, the steps kept
    fixed = linear_advice.reasons.query("reason.str.startswith('if the batch grows')", engine="python")
    assert len(fixed) and fixed["number"].str.startswith("grown to ").all()
    assert fixed["number"].str.contains("the same number of steps gives more epochs, not less time").all()
    floors = linear_advice.reasons.query("reason.str.startswith('per-step fixed cost')", engine="python")
    assert floors["number"].str.fullmatch(r"\d+ per GPU against b\*_floor = [\d,]+").all()
    assert floors["number"].str.contains(",").any()  # thousands separated: "2,571", not "2571"
    sentence = next(v for v in linear_advice.verdicts if v.startswith("8 × L4 (AWS g6.48xlarge)"))
    assert "slower whatever the inputs" in sentence
    assert (
        "its 46.2 MiB of gradients fit one DDP bucket at bucket_cap_mb=25, so the all-reduce comes after "
        "backward, never hidden: " in sentence
    )


def test_a_one_bucket_model_s_all_reduce_is_never_said_to_hide():
    """WaveTransformer's 0.32 MiB of gradients fit one bucket (under DDP's 1 MiB first bucket too): every
    verdict says its all-reduce comes after backward, with its predicted time, none that it hides."""
    counted = counting.count(examples.wave_transformer(), (1, 12_000), label="WaveTransformer")
    advice = predict.advise(counted, 256, (1, 8))
    assert (advice.conditions["buckets"] == 1).all() and advice.conditions["hide"].map(math.isinf).all()
    conditions = advice.conditions.set_index("machine")
    for verdict in advice.verdicts:
        assert "hides behind backward" not in verdict
        machine = verdict[verdict.index("(") + 1 : verdict.index(")")]
        row = conditions.loc[machine]
        band = predict.time_band(row["tail_seconds"], row["tail_seconds_low"], row["tail_seconds_high"])
        assert verdict.endswith(
            "its 0.322 MiB of gradients fit one DDP bucket, so the all-reduce comes after backward, never "
            f"hidden: {band} a step."
        )
    view = report.condition_view(advice)
    assert view["all-reduce"].str.startswith("after backward, never hidden: ").all()
    assert "b*_floor, above fixed cost" in view.columns


def test_why_slower_leaves_out_the_machines_predicted_faster():
    """7.5 asks why multi-GPU training is slower: a machine predicted faster whatever the inputs (ConvNet
    on every one at a global batch of 64) pays the same kinds of cost and outweighs them, so its costs are
    no answer; LinearNet on an L4 machine, slower whatever the inputs, keeps its reasons."""
    convnet = predict.advise(counting.count_book_model("ConvNet"), 64, gpu_counts=(1, 8), samples=2700)
    multi = convnet.machines[convnet.machines["gpus"] > 1]
    faster = list(multi.loc[multi["faster"] == "faster whatever the inputs", "machine"])
    assert faster  # ConvNet outgrows its costs on some machine
    applies, left_out = report.why_slower(convnet)
    assert left_out == faster and not set(applies["machine"]) & set(faster)
    assert "applies" not in applies.columns
    assert report.faster_note(left_out).startswith(f"On {stats.listed(faster)}, predicted faster whatever")
    assert report.faster_note([]) == ""
    # one row per reason, in order: on which machines it applies, with its number on the first of them
    applies = pd.DataFrame({"machine": ["A", "A", "B", "C"],
                            "reason": ["fixed", "all-reduce", "fixed", "fixed"],
                            "number": ["64 < 1859", "90 µs", "32 < 2571", "32 < 10963"]})  # fmt: skip
    assert report.reason_summary(applies).reset_index().values.tolist() == [
        ["fixed", "all 3 machines", "64 < 1859 (A)"], ["all-reduce", "A", "90 µs (A)"],
    ]  # fmt: skip
    assert (
        report.typeset("32 per GPU against b*_floor = 2571")
        == r"32 per GPU against \(b^*_{\text{floor}}\) = 2571"
    )
    full = report.reason_table(applies.assign(number=["b*_floor 1859", "b*_hide 4", "x", "y"]))
    assert full.loc[("A", "fixed"), "number"] == r"\(b^*_{\text{floor}}\) 1859" and len(full) == 4
    text = report.render(convnet)
    assert "on each machine not predicted faster whatever the inputs" in text
    assert f"- left out, predicted faster whatever the inputs: {', '.join(faster)}" in text
    assert "b*_hide" in text and "b*_floor that outgrows the fixed cost" in text
    linear = predict.advise(counting.count_book_model("LinearNet"), 16, gpu_counts=(1, 8), samples=2700)
    applies, _ = report.why_slower(linear)
    assert "AWS g6.48xlarge" in set(applies["machine"])


def test_a_many_bucket_model_s_all_reduce_hides_from_b_star_but_for_its_last_bucket():
    row = pd.Series({"buckets": 3, "hide": 13.0, "last_bucket_bytes": 0.0375 * 2**20,
                     "tail_seconds": 34e-6, "tail_seconds_low": 33e-6, "tail_seconds_high": 36e-6,
                     "gradient_bytes": 1.44 * 2**20})  # fmt: skip
    assert predict.all_reduce_words(row, 16) == (
        "the all-reduce hides behind backward from 13 samples per GPU but for its last bucket (0.0375 MiB), "
        "whose 34 (33–36) µs follow backward"
    )
    assert (
        predict.all_reduce_words(row, 8)
        == "the all-reduce is not hidden below b*_hide = 13 per GPU (this batch gives 8)"
    )


@pytest.mark.parametrize(
    ("batch", "gpus", "message"),
    [
        (10, (4, 8), "a global batch of 10 does not divide over 4 or 8 GPUs: give a batch that one of them"),
        (0, (1,), "batch must be a positive integer"),
        (16, (1, 0), r"GPU counts must be positive integers, not \[1, 0\]"),
    ],
)
def test_a_batch_that_no_gpu_count_divides_is_refused(batch, gpus, message):
    with pytest.raises(counting.AdviseError, match=message):
        predict.check_batch(batch, gpus)


def test_a_gpu_count_that_would_split_the_batch_unevenly_is_left_out_and_said_so():
    # chapter 5's ordinary batch of 100 over the default 1, 2, 4 and 8 GPUs: 100 = 8 x 12 + 4
    assert predict.check_batch(100, (1, 2, 4, 8)) == (
        (1, 2, 4),
        ["8 GPUs: a global batch of 100 does not split evenly over 8 (give a multiple of 8)"],
    )
    advice = predict.advise(counting.count_book_model("ConvNet"), 100, (1, 2, 4, 8))
    assert (
        advice.skipped[0]
        == "8 GPUs: a global batch of 100 does not split evenly over 8 (give a multiple of 8)"
    )
    assert not advice.machines.empty and (advice.machines["gpus"] <= 4).all()


def test_the_report_reads_as_aligned_columns_and_the_json_keeps_every_source(linear_advice, tmp_path):
    table = report.text_table(pd.DataFrame({"machine": ["a", "bbb"], "GPUs": [1, 8]}))
    assert table.splitlines() == ["machine  GPUs", "-------  ----", "a           1", "bbb         8"]
    text = report.render(linear_advice)
    assert "DDP on each machine" in text and "AWS p5.48xlarge" in text and "PREDICTIONS" in text
    path = tmp_path / "advice.json"
    report.write_json(path, linear_advice)
    found = json.loads(path.read_text())
    assert found["counted"]["parameters"] == {"value": 12_102_220, "origin": "counted"}
    assert {row["origin"] for row in found["machines"]} == {report.PREDICTED}
    inputs = {row["input"]: row for row in found["assumptions"]}
    host = inputs["host time per eager PyTorch op"]  # measured on the H200 machine's host, with its command
    assert host["origin"] == "measured on the H200 machine's host (1fcc455750dea9a9)"
    assert host["source"].startswith("measured: a step's host issue time")
    assert "python -m helpers.costmodel.validate" in host["source"]
    assert host["date"] == "2026-11-26" and host["low"] == 4.37e-5
    efficiency = inputs["achieved fraction of FP32 peak, matrix products"]
    assert efficiency["origin"] == "assumed" and efficiency["source"].startswith("assumption: cuBLAS")
    p5 = next(row for row in found["machines"] if row["machine"] == "AWS p5.48xlarge")
    assert math.isclose(
        p5["speedup"], linear_advice.machines.set_index("machine").loc["AWS p5.48xlarge", "speedup"]
    )
    report.write_figure(tmp_path / "advice.png", linear_advice)
    assert (tmp_path / "advice.png").stat().st_size > 10_000


def test_the_default_epoch_is_fsdd_s_training_split_and_the_report_says_which():
    """Not a made-up epoch: FSDD's 2,700 training clips by default, named as such; a given one "as given";
    a global batch larger than the default epoch is refused, saying how to give one."""
    counted = counting.count_book_model("ConvNet")
    default = predict.advise(counted, 256, gpu_counts=(1, 8))
    assert default.samples == 2_700 and default.epoch_source == "FSDD's training split, the default"
    assert ("Global batch 256; an epoch of 2,700 samples (FSDD's training split, the default; "
            "--samples-per-epoch sets yours), 11 steps.") in report.render(default)  # fmt: skip
    given = predict.advise(counted, 256, gpu_counts=(1, 8), samples=5_000)
    assert "an epoch of 5,000 samples (as given), 20 steps" in report.render(given)
    assert report.as_json(given)["samples_per_epoch_source"] == "as given"
    with pytest.raises(
        counting.AdviseError, match="larger than the default epoch, FSDD's training split of 2,700"
    ):
        predict.epoch(4_096, None)
    with pytest.raises(counting.AdviseError, match="an epoch must hold a positive number of samples, not 0"):
        predict.epoch(16, 0)
