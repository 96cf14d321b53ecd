"""helpers.costmodel.prose: chapter 5's sentences follow from its tables, verdicts as they hold."""

import math

import pandas as pd
import pytest

from helpers import stats
from helpers.costmodel import gpus, prose, recommend, seed, specs

FASTER, SLOWER, DEARER = (
    "faster whatever the inputs",
    "slower whatever the inputs",
    "dearer whatever the inputs",
)
DEPENDS = "depends on the per-op host overhead: measure it with `make gpu-check`"


def summary_rows(rows) -> pd.DataFrame:
    """Rows of ``recommend.summarize``: (model, machine, gpus, faster, dollars)."""
    return pd.DataFrame(rows, columns=["model", "machine", "gpus", "faster", "dollars"]).assign(
        global_batch=100
    )


def test_a_verdict_is_shortened_to_what_it_says_and_lists_read_as_prose():
    assert prose.short_verdict(DEPENDS) == "depends on the per-op host overhead"
    assert prose.short_verdict(FASTER) == FASTER
    assert [stats.listed(items) for items in (["a"], ["a", "b"], ["a", "b", "c"])] == [
        "a",
        "a and b",
        "a, b and c",
    ]


def test_the_dollar_verdict_says_only_what_every_band_holds():
    several = summary_rows([
        ("LinearNet", "p5", 8, DEPENDS, DEARER), ("LinearNet", "g6", 8, SLOWER, DEARER),
        ("ConvNet", "p5", 8, FASTER, DEARER), ("ConvNet", "g6", 8, FASTER, DEARER),
    ])  # fmt: skip
    said = prose.dollar_verdict(several)
    assert said == (
        "On the machines that can be rented here, none of the multi-GPU machines whose GPU is also rented "
        "singly gives a cheaper result than one of those GPUs, whatever the inputs. Of the 2 multi-GPU "
        "machines predicted, `LinearNet` runs slower on 1, and on 1 its verdict depends on inputs not yet "
        "measured; `ConvNet` runs faster on every one."
    )
    unpriced = several.assign(dollars=["no price: no one-GPU offer", DEARER] * 2)  # p5 without its offer
    assert "Of the 2 multi-GPU machines predicted (1 of them with no one-GPU price to compare)" in (
        prose.dollar_verdict(unpriced)
    )
    cheaper = several.assign(dollars=["no dearer whatever the inputs"] + [DEARER] * 3)
    assert "p5 give a result no dearer than one GPU, whatever the inputs" in prose.dollar_verdict(cheaper)
    assert "depends on inputs not known yet" in prose.dollar_verdict(several.assign(dollars=DEPENDS))


def test_the_answer_box_gets_a_brief_of_each_answer_and_the_dollar_verdict_s_first_sentence():
    several = summary_rows([("LinearNet", "p5", 8, DEPENDS, DEARER), ("ConvNet", "p5", 8, FASTER, DEARER)])
    several = several.assign(speedup=[0.683, 7.51], speedup_low=[0.465, 3.86], speedup_high=[1.03, 7.64],
                             cost_multiplier=[11.7, 1.06], cost_multiplier_low=[7.75, 1.05],
                             cost_multiplier_high=[17.2, 2.07])  # fmt: skip
    said = prose.answer(several, 100, machine="p5")
    assert said["answer_convnet"] == "a speed-up of 7.51× (3.86–7.64×) for 1.06× the dollars (1.05–2.07×)"
    assert said["answer_convnet_brief"] == "a speed-up of 7.51× for 1.06× the dollars: " + FASTER
    assert said["answer_convnet_verdict"] == "faster and dearer whatever the inputs"
    assert said["answer_linearnet_verdict"] == (
        "depends on the per-op host overhead, and dearer whatever the inputs"
    )
    assert said["answer_linearnet_brief"] == (
        "1.46× the time for 11.7× the dollars: depends on the per-op host overhead"
    )
    assert said["dollar_headline"] == (
        "On the machines that can be rented here, none of the multi-GPU machines whose GPU is also rented "
        "singly gives a cheaper result than one of those GPUs, whatever the inputs."
    )
    assert said["dollar_verdict"] == said["dollar_headline"] + " " + (
        "Of the 1 multi-GPU machine predicted, `LinearNet`'s verdict depends on inputs not yet measured on "
        "every one; `ConvNet` runs faster on every one."
    )


def test_each_biased_method_is_named_with_its_error_and_side():
    summary = pd.DataFrame({
        "model": ["ConvNet", "ConvNet", "LinearNet"],
        "method": ["dataparallel", "ddp_no_overlap", "dataparallel"],
        "points": [3, 3, 3], "predictions_above": [3, 1, 0], "within_measured_range": [0, 1, 1],
        "mape_percent": [19.4, 8.0, 30.0], "mean_error_percent": [19.4, -2.0, -30.0],
    })  # fmt: skip
    said = prose.time_model_sentences(summary, pd.DataFrame())
    assert (
        said["time_model_errors"]
        == "`ConvNet` DataParallel 19 %, DDP without overlap 8 %; `LinearNet` DataParallel 30 %"
    )
    # LinearNet's predictions all lie below, but one lies inside the measured range: not called a bias
    assert said["bias_short"] == "`ConvNet` DataParallel (+19 %, all above)"
    assert said["bias_note"].startswith("`ConvNet`'s DataParallel predictions all lie above the measurements")
    assert prose.time_model_sentences(pd.DataFrame(), pd.DataFrame())["bias_short"].startswith("not tested")


def test_out_of_sample_errors_read_as_a_range_with_their_signed_median():
    tested = pd.DataFrame({"curve": ["a", "b", "c"], "error (%)": [12.2, -34.0, 29.0]})
    said = prose.loss_sentences(tested)
    # the signed median of +12.2, -34 and +29 is +12.2: two of three predicted later than they came
    assert said == {"loss_tested": "3 curves",
                    "loss_error_range": "12 % to 34 % (median +12 %; 2 of 3 predicted later than they came)",
                    "loss_error_brief": "a median of +12 % (too late on 2 of 3)"}  # fmt: skip
    # a fit that never reaches the target after its fitted points is a failed prediction, counted
    failed = pd.concat([tested, pd.DataFrame({"curve": ["d"], "error (%)": [float("nan")]})])
    said = prose.loss_sentences(failed)
    assert said["loss_tested"] == "4 curves"
    assert said["loss_error_range"] == (
        "12 % to 34 % (median +12 %; 2 of 3 predicted later than they came), and on 1 the fit never "
        "reaches the target (a failed prediction)"
    )
    assert said["loss_error_brief"] == (
        "a median of +12 % (too late on 2 of 3), and on 1 the fit never reaches the target (a "
        "failed prediction)"
    )
    assert prose.loss_sentences(tested.head(1))["loss_tested"] == "1 curve"
    assert prose.loss_sentences(tested.head(1))["loss_error_brief"] == "12 %"  # no median of one
    late = tested.assign(**{"error (%)": [12.2, 34.0, 29.0]})
    assert prose.loss_sentences(late)["loss_error_brief"] == "a median of +29 % (too late on all 3)"


def test_the_seed_traffic_check_by_hand():
    """LinearNet's gradient is 12,102,220 × 4 = 48,408,880 B; at batch 20 a 2,000-clip epoch has 100 steps,
    each broadcasting and reducing it once over every link: 2 × 48,408,880 × 100 = 9,681,776,000 B, 3.2 %
    under the seed's 50 MB × 2 × 100 = 10 GB."""
    said = prose.seed_traffic_sentences(seed.seed_traffic())
    assert said["seed_traffic_short"] == "9.68 GB per GPU link per epoch against its 10 GB"
    assert "the model gives 9.68 GB, 3.2 % less" in said["seed_traffic_note"]
    assert said["seed_traffic_note"].endswith("The arithmetic agrees; it could have disagreed.")


def test_the_seed_verdicts_agree_only_where_every_batch_and_band_does():
    verdicts = pd.DataFrame({
        "model": ["LinearNet", "LinearNet", "ConvNet"], "global_batch": [10, 600, 10],
        "speedup": [0.5, 0.9, 2.0], "speedup_low": [0.4, 0.7, 1.5], "speedup_high": [0.6, 1.1, 2.5],
        "faster": [SLOWER, DEPENDS, FASTER],
    })  # fmt: skip
    said = prose.seed_verdict_sentence(verdicts)
    assert said["seed_agrees"] == "do not all agree"
    # each verdict with the band of its own batches: slower at 10 (0.4-0.6), not the sweep's 0.4-1.1
    assert said["seed_verdict_note"].startswith(
        "`LinearNet` on four GPUs against one: mixed: slower whatever the inputs at batch 10 (0.4–0.6×); "
        "depends on the "
    )
    assert "at batch 600 (0.7–1.1×)" in said["seed_verdict_note"]
    assert (
        "`ConvNet` on four GPUs against one: faster whatever the inputs at every batch (speed-up 1.5–2.5× "
        "over" in (said["seed_verdict_note"])
    )
    assert said["seed_verdict_note"].endswith(
        "The seed's verdict for `LinearNet` is not confirmed at every batch over the whole band: the table "
        "says where, and which input decides it. The host time per op there is the H200 machine's measured "
        "range, lent to the seed's workstation, whose own host and PyTorch were not measured."
    )
    agreeing = prose.seed_verdict_sentence(verdicts.assign(faster=[SLOWER, SLOWER, FASTER]))
    assert agreeing["seed_agrees"] == "agree"
    # a band that crosses 1 for different inputs at two batches is one run, "depends on the inputs": the
    # table's notes say which input at which batch (the sentence was 182 words in chapter 5)
    other = "depends on the convolution efficiency: measure it with a sweep"
    two_reasons = prose.seed_verdict_sentence(verdicts.assign(faster=[DEPENDS, other, FASTER]))
    assert two_reasons["seed_verdict_note"].startswith(
        "`LinearNet` on four GPUs against one: depends on the inputs at every batch (speed-up 0.4–1.1× over "
    )


def test_the_two_ddp_methods_are_identical_for_one_bucket_and_close_for_several():
    """LinearNet at 25 MiB makes one bucket, so overlap hides nothing and the two DDP predictions are the
    same by construction; ConvNet at 0.25 MiB makes three, where they differ a little."""
    measurements = pd.DataFrame({
        "measurement": ["a", "b", "c"], "model": ["LinearNet", "ConvNet", "ConvNet"],
        "bucket_cap_mb": [25, 25, 0.25], "compression": [None, "bf16", None],
    })  # fmt: skip
    predicted = {"a": (1.0, 1.0), "b": (2.0, 2.0), "c": (3.0, 3.012)}
    validated = pd.DataFrame([
        {**row, "method": method, "predicted_seconds": predicted[row["measurement"]][index]}
        for row in measurements.to_dict("records")
        for index, method in enumerate(("ddp_no_overlap", "ddp_overlap"))
    ])  # fmt: skip
    summary = pd.DataFrame({
        "model": ["LinearNet", "LinearNet", "ConvNet", "ConvNet"],
        "method": ["ddp_no_overlap", "ddp_overlap"] * 2,
        "points": 2, "predictions_above": 1, "within_measured_range": 1, "mape_percent": 5.0,
        "mean_error_percent": 0.0,
    })  # fmt: skip
    note = prose.time_model_sentences(summary, validated)["ddp_methods_note"]
    assert note == (
        "On this CPU DDP with and without overlap predict the same step (to 0.4 %); they count as one "
        "method here. For `LinearNet` and `ConvNet` at 25 MiB they are identical by construction: the "
        "gradients make one DDP bucket, handed over when backward ends, so both put its whole all-reduce "
        "after backward. For `ConvNet` at 0.25 MiB (3 buckets) they differ by at most 0.4 %: the buckets' "
        "all-reduces are short next to the compute, so hiding all but the last changes little."
    )
    only_one = prose.time_model_sentences(summary, validated[validated["measurement"] == "a"])
    assert "short next to the compute" not in only_one["ddp_methods_note"]
    assert "(to 0.0 %)" in only_one["ddp_methods_note"]
    apart = prose.time_model_sentences(summary, validated.replace({3.012: 3.3}))["ddp_methods_note"]
    assert apart.startswith("DDP with and without overlap differ by up to 10 % here. For `LinearNet`")


@pytest.mark.parametrize("model", ["LinearNet", "ConvNet"])
def test_flop_sentences_read_the_exact_counts(model):
    said = prose.flop_sentences([model])
    # forward multiply-adds per sample as FLOPs (2 each), checked independently: LinearNet 2 × (12,000 × 1,000
    # + 1,000 × 100 + 100 × 10 + 10 × 10) = 24,202,200; ConvNet's convolutions 2 × 585,175,000 and its two
    # products 2 × 201,000: 1,170,752,000
    expected = {"LinearNet": "24,202,200", "ConvNet": "1,170,752,000"}[model]
    assert said[f"{model.lower()}_forward_macs"] == expected


def errors_frame(model: str, steps_ms: list[float], roofline_ms: list[float], batches=(10, 100, 1000)):
    """A ``gpus.roofline_error`` frame of one model on the H100 SXM, the band at ±50 % of the roofline."""
    rows = []
    for batch, step, predicted in zip(batches, steps_ms, roofline_ms, strict=True):
        rows.append({"model": model, "gpu": "H100 SXM 80 GB", "batch": batch, "step_seconds": step / 1e3,
                     "roofline_seconds": predicted / 1e3, "roofline_high": 1.5 * predicted / 1e3,
                     "error_percent": (predicted - step) / step * 100,
                     "within_band": 0.5 * predicted <= step <= 1.5 * predicted})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_roofline_error_reads_its_range_side_and_band_by_hand():
    # LinearNet at batches 10-1000 on an H100: 2.0, 2.0 and 2.5 ms measured against 0.5, 1.0 and 2.0 ms
    flat = errors_frame("LinearNet", [2.0, 2.0, 2.5], [0.5, 1.0, 2.0])
    texts = prose.roofline_error_sentences(flat)
    note = texts["roofline_error_note"]
    # (0.5 - 2) / 2 = -75 %, (2 - 2.5) / 2.5 = -20 %; measured over predicted 4.0x, 2.0x and 1.25x
    assert "is 1.25× to 4.00× the roofline's central value, which lies 20–75 % below it" in note
    assert "inside the band at 1 of 3 batches" in note  # only 2.5 against 2.0 ± 50 %
    assert "replace the roofline for the H100 SXM 80 GB" in note and note.endswith("measured here.")
    assert texts["roofline_error_short"] == (
        "on one H100 SXM 80 GB, the roofline's central step is 20–75 % below the measured one for "
        "`LinearNet` (1 of 3 batches inside the band)"
    )
    # a step that grows with the batch is not called the host's, and errors of both signs say so
    growing = prose.roofline_error_sentences(errors_frame("ConvNet", [1.0, 10.0, 100.0], [2.0, 8.0, 90.0]))
    assert "from 20 % below to 100 % above it" in growing["roofline_error_note"]
    assert (
        "host" not in growing["roofline_error_note"] and "still priced" not in growing["roofline_error_note"]
    )
    assert "unchecked" in prose.roofline_error_sentences(flat.iloc[:0])["roofline_error_short"]


def test_the_roofline_error_note_is_paragraphs_with_a_list_item_per_model():
    # the book's budget is 200 words a paragraph: the GPU's lead, one item per model, then what replaces it
    both = pd.concat([errors_frame("LinearNet", [2.0, 2.0, 2.5], [0.5, 1.0, 2.0]),
                      errors_frame("ConvNet", [1.0, 10.0, 100.0], [2.0, 8.0, 90.0])])  # fmt: skip
    paragraphs = prose.roofline_error_sentences(both)["roofline_error_note"].split("\n\n")
    assert paragraphs[0] == "Against one H100 SXM 80 GB, measured by this study:"
    items = paragraphs[1].split("\n")
    assert [item[:14] for item in items] == ["- `LinearNet`'", "- `ConvNet`'s "]
    assert paragraphs[2].startswith("Straight lines fitted through these steps")


def test_the_gpu_whose_host_was_measured_says_its_host_bound_check_is_in_sample():
    frame = errors_frame("LinearNet", [2.0, 2.0, 2.1], [2.2, 2.2, 2.3])
    assert "in sample" not in prose.roofline_error_sentences(frame)["roofline_error_note"]  # an H100
    said = prose.roofline_error_sentences(frame.assign(gpu="H200 SXM 141 GB"))
    assert (
        "The roofline's host time per op, 44–114 µs (median 67 µs), was measured on the H200 SXM 141 GB "
        "machine's host, so where its steps are host-bound the roofline is checked here in sample."
        in said["roofline_error_note"]
    )
    assert said["roofline_error_short"].endswith(
        "inside the band), in sample for the host (its time per op comes from this GPU's profiles)"
    )
    assert said["roofline_host_band"] == "44–114 µs (median 67 µs)"


def test_a_flat_step_the_roofline_calls_the_hosts_reads_as_microseconds_per_op():
    # LinearNet's roofline step on an H100 is host-bound at these batches (33 ops per step); 5.0 and 6.0 ms
    # measured at batches 8 and 100 (a host slower than the band's) are 152 and 182 us per op
    batches = (8, 100)
    predicted = [gpus.roofline_band("LinearNet", b, specs.GPUS["H100 SXM 80 GB"]) for b in batches]
    assert [row["bound_by"] for row in predicted] == ["host", "host"] and gpus.ops_per_step("LinearNet") == 33
    frame = errors_frame("LinearNet", [5.0, 6.0], [row["step_seconds"] * 1e3 for row in predicted], batches)
    frame["roofline_high"] = [row["step_seconds_high"] for row in predicted]
    note = prose.roofline_error_sentences(frame)["roofline_error_note"]
    assert (
        "hardly grows over a 12-fold range of batches" in note
        and "calls 2 of the 2 batches host-bound" in note
    )
    assert f"reaches at most {max(r['step_seconds_high'] for r in predicted) * 1e3:.3g} ms" in note
    assert "but at 44–114 µs per op its band there reaches at most" in note
    assert "At the roofline's 33 ops per step the measured step is 152–182 µs per op." in note


def test_the_price_per_gpu_premium_is_said_per_machine_from_the_price_table():
    """AWS p3 and p5 charge the same per GPU on every machine (p3.8xlarge: 12.24 / 4 = 3.06, the
    p3.2xlarge's); g6.12xlarge charges 4.6016 / 4 = 1.1504 per GPU against g6.xlarge's 0.8048: 1.43×."""
    note = prose.price_per_gpu_sentences()["price_per_gpu_note"]
    assert note.startswith(
        "Where a machine charges the same per GPU as its one-GPU offer (AWS p3.8xlarge, AWS p3.16xlarge and "
        "AWS p5.48xlarge) that is \\(k\\) ÷ speed-up"  # typeset as the symbol it is
    )
    assert "AWS g6.12xlarge 1.43×" in note and "AWS g6e.48xlarge 2.02×" in note
    assert note.endswith(
        "AWS p4d.24xlarge, AWS p4de.24xlarge and AWS p5en.48xlarge have no one-GPU offer of their GPU to "
        "compare with."
    )


def test_the_value_of_an_hour_in_words_with_its_band():
    columns = ["model", "machine", "gpus", "cost_multiplier", "hour_value_break_even",
               "hour_value_break_even_low", "hour_value_break_even_high"]  # fmt: skip
    rows = [
        ("ConvNet", "m8", 8, 1.06, 0.516, 0.376, 9.97),
        ("LinearNet", "m8", 8, 11.7, math.inf, 1487.0, math.inf),
        ("ConvNet", "m1", 1, 1.0, math.nan, math.nan, math.nan),
    ]
    frame = pd.DataFrame(rows, columns=columns)
    said = prose.hour_value_sentence(frame, "m8")["hour_value_answer"]
    assert said == (
        "Counting your waiting too (machine dollars + hours × what an hour is worth to you), the 8 GPUs of "
        "m8 cost less per result than its one-GPU offer: for `ConvNet` once an hour is worth more than "
        "0.516 dollars (0.376–9.97 dollars over the inputs); for `LinearNet` at no value of an hour at the "
        "central inputs, where it is no faster (only at the inputs' most favourable end, from 1,490 dollars "
        "an hour)."
    )
    # the answer box's brief: the central values alone
    assert prose.hour_value_sentence(frame, "m8")["hour_value_brief"] == (
        "The 8 GPUs of m8 cost less per result than its one-GPU offer for `ConvNet` once an hour of your "
        "waiting is worth more than 0.516 dollars; for `LinearNet` they never do, at the central inputs."
    )
    # where no model pays, "never" is said once, up front
    never = frame.assign(hour_value_break_even_low=math.inf)
    assert prose.hour_value_sentence(never, "m8")["hour_value_brief"] == (
        "The 8 GPUs of m8 never cost less per result than its one-GPU offer, for `ConvNet` whatever the "
        "inputs; for `LinearNet` whatever the inputs."
    )
    assert "no one-GPU offer" in prose.hour_value_sentence(frame, "m1")["hour_value_answer"]


def test_the_soonest_machine_is_named_only_as_far_as_the_bands_allow():
    relation = {"s_min": 6.59, "e_min": 6.59 * 627, "b_crit": 627, "rule": "linear", "target_loss": 2.2,
                "train_samples": 2700, "smallest_batch": 8, "largest_batch": 256, "envelope": {}}  # fmt: skip
    frame = recommend.scenario_predictions(
        ("LinearNet",), ("AWS p5.4xlarge", "AWS p5.48xlarge"), (100, 200, 400)
    )
    said = prose.relation_sentences({"LinearNet": relation}, frame, ["LinearNet"])["time_to_result_note"]
    assert "soonest at the central inputs on AWS p5.4xlarge at a global batch of 200" in said  # not 400
    assert said.endswith("but its band overlaps that of AWS p5.48xlarge, so no machine is soonest whatever "
                         "the inputs.")  # fmt: skip
    assert "still falling" not in said  # 200 is below the relation's largest batch, 256
    at_cap = prose.relation_sentences({"LinearNet": {**relation, "largest_batch": 200}}, frame, ["LinearNet"])
    assert "at a global batch of 200: " in at_cap["time_to_result_note"]
    assert (
        ", the largest batch the relation covers, where the time is still falling"
        in at_cap["time_to_result_note"]
    )


def test_the_speedup_note_counts_a_verdict_shared_by_many_machines_and_names_the_few():
    """Issue 38: chapter 5's note once listed every machine of every verdict (107 words that repeat the
    table above it); a verdict of more than three machines is now counted."""
    slow = "slower whatever the inputs"
    tipped = "depends on the matrix-product efficiency: measure it with a sweep"
    at_batch = pd.DataFrame({
        "model": ["M"] * 6 + ["N"] * 2, "gpus": [8, 8, 8, 8, 8, 1, 4, 8],
        "machine": ["a", "b", "c", "d", "e", "one", "a", "b"],
        "faster": [slow] * 4 + [tipped, slow] + ["faster whatever the inputs"] * 2,
    })  # fmt: skip
    assert prose.speedup_note(at_batch, ["M", "N"])["speedup_note"] == (
        "`M`: slower whatever the inputs on 4 of the 5 multi-GPU machines; depends on the matrix-product "
        "efficiency on e. `N`: faster whatever the inputs on both multi-GPU machines. What decides the rest "
        "is measured by a sweep."
    )
