"""helpers.costmodel.prose: chapter 5's sentences follow from its tables, verdicts as they hold."""

import pandas as pd
import pytest

from helpers.costmodel import prose, seed

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
    assert [prose.listing(items) for items in (["a"], ["a", "b"], ["a", "b", "c"])] == [
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
        "On the machines that can be rented here, no multi-GPU machine with a one-GPU offer of its GPU gives "
        "a cheaper result, whatever the inputs; `LinearNet` runs slower on 1 of them, and on 1 its verdict "
        "depends on inputs not yet measured; `ConvNet` runs faster on every one of them."
    )
    cheaper = several.assign(dollars=["no dearer whatever the inputs"] + [DEARER] * 3)
    assert "p5 give a result no dearer than one GPU, whatever the inputs" in prose.dollar_verdict(cheaper)
    assert "depends on inputs not known yet" in prose.dollar_verdict(several.assign(dollars=DEPENDS))


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


def test_out_of_sample_errors_read_per_curve_and_as_a_range():
    tested = pd.DataFrame({"curve": ["a", "b", "c"], "error (%)": [12.2, -34.0, 29.0]})
    said = prose.loss_sentences(tested)
    assert said == {"loss_tested": "3", "loss_error_range": "12 % to 34 %",
                    "loss_per_curve": "a: +12 %; b: -34 %; c: +29 %"}  # fmt: skip
    # a fit that never reaches the target after its fitted points is a failed prediction, counted
    failed = pd.concat([tested, pd.DataFrame({"curve": ["d"], "error (%)": [float("nan")]})])
    said = prose.loss_sentences(failed)
    assert said["loss_tested"] == "4" and said["loss_per_curve"].endswith("; d: never reached")
    assert said["loss_error_range"] == (
        "12 % to 34 %, and on 1 the fit never reaches the target (a failed prediction)"
    )


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
    assert (
        "`LinearNet` on four GPUs against one: mixed: slower whatever the inputs at batch 10; depends on the "
        in (said["seed_verdict_note"])
    )
    assert said["seed_verdict_note"].endswith(
        "`LinearNet` does not agree with the seed's verdict at every batch over the whole band: the table "
        "says where, and which input decides it."
    )
    agreeing = prose.seed_verdict_sentence(verdicts.assign(faster=[SLOWER, SLOWER, FASTER]))
    assert agreeing["seed_agrees"] == "agree"


def test_the_rule_counts_machines_whose_global_batch_fits_the_training_set():
    conditions = pd.DataFrame({
        "model": ["LinearNet"] * 2, "machine": ["p5", "g6"], "global_batch": [2864.0, float("inf")],
        "global_batch_low": [920.0, 5000.0], "global_batch_high": [8320.0, float("inf")], "hide_low": [1, 40],
        "against the training set": ["within the dataset or not, depending on the inputs together",
                                     "more than the dataset holds whatever the inputs"],
    })  # fmt: skip
    said = prose.rule_sentences(conditions)
    assert said["rule_linearnet"].startswith(
        "`LinearNet`: p5 needs a global batch of 2,864 (920–8,320): within"
    )
    assert said["rule_short"] == (
        "`LinearNet` fits within the 2,700 clips on 0 of 2 eight-GPU machines whatever the inputs, on 1 "
        "never."
    )
    assert said["hide_note"].startswith("At the band's edge on p5, even a one-sample backward")


@pytest.mark.parametrize("model", ["LinearNet", "ConvNet"])
def test_flop_sentences_read_the_exact_counts(model):
    said = prose.flop_sentences([model])
    # forward multiply-adds per sample as FLOPs (2 each), checked independently: LinearNet 2 × (12,000 × 1,000
    # + 1,000 × 100 + 100 × 10 + 10 × 10) = 24,202,200; ConvNet's convolutions 2 × 585,175,000 and its two
    # products 2 × 201,000: 1,170,752,000
    expected = {"LinearNet": "24,202,200", "ConvNet": "1,170,752,000"}[model]
    assert said[f"{model.lower()}_forward_macs"] == expected
