"""helpers.costmodel.rule_prose: chapter 5's rule in words, telling one-bucket models apart."""

import pandas as pd

from helpers.costmodel import rule, rule_prose


def test_the_rule_counts_machines_whose_global_batch_fits_the_training_set():
    conditions = pd.DataFrame({
        "model": ["LinearNet"] * 2, "machine": ["p5", "g6"], "global_batch": [2864.0, float("inf")],
        "global_batch_low": [920.0, 5000.0], "global_batch_high": [8320.0, float("inf")], "hide_low": [1, 40],
        "against the training set": ["within the dataset or not, depending on the inputs together",
                                     "more than the dataset holds whatever the inputs"],
    })  # fmt: skip
    said = rule_prose.rule_sentences(conditions)
    assert said["rule_linearnet"].startswith(
        "`LinearNet`: p5 needs a global batch of 2,864 (920–8,320): within"
    )
    assert said["rule_short"] == (
        "`LinearNet` fits within the 2,700 clips only at some inputs on 1 and never on 1 of the 2 eight-GPU "
        "machines."
    )
    assert said["hide_note"].startswith("At the band's edge on p5, even a one-sample backward")


def test_counts_of_machines_read_without_a_count_of_zero():
    """How many eight-GPU machines' training set holds a global batch: no "(on 0 never)", no "0 of 5",
    and no "on none … whatever the inputs" that reads as never."""
    assert rule_prose.fits_phrase(5, 0, 5) == "whatever the inputs on all 5 eight-GPU machines"
    assert rule_prose.fits_phrase(0, 5, 5) == "on none of the 5 eight-GPU machines, whatever the inputs"
    assert rule_prose.fits_phrase(0, 0, 5) == "only at some inputs on all 5 eight-GPU machines"
    assert (
        rule_prose.fits_phrase(0, 1, 5)
        == "only at some inputs on 4 and never on 1 of the 5 eight-GPU machines"
    )
    assert rule_prose.fits_phrase(2, 1, 5) == (
        "whatever the inputs on 2, only at some inputs on 2 and never on 1 of the 5 eight-GPU machines"
    )
    assert (
        rule_prose.fits_phrase(3, 2, 5)
        == "whatever the inputs on 3 and never on 2 of the 5 eight-GPU machines"
    )
    # two machines are "both", never "all 2"
    assert rule_prose.fits_phrase(2, 0, 2) == "whatever the inputs on both eight-GPU machines"
    assert rule_prose.fits_phrase(0, 0, 2) == "only at some inputs on both eight-GPU machines"
    for said in (rule_prose.fits_phrase(*counts, 5) for counts in ((5, 0), (0, 5), (0, 0), (2, 1), (3, 2))):
        assert " 0 " not in said and "on 0" not in said


def test_the_rule_tells_one_bucket_models_apart_by_their_all_reduce_and_b_floor():
    """Chapter 5's models at the 25 MiB cap: one bucket each, so neither hides its all-reduce and the rule
    tells them apart by what that all-reduce costs beside the compute per GPU at the chapter's batch, and by
    b*_floor against the samples each GPU gets; and, with DDP's 1 MiB first bucket, that ConvNet's first
    bucket could overlap only the backward of what remains."""
    machines = ("AWS p5.48xlarge", "AWS g6.48xlarge")
    conditions = rule.condition_table(("LinearNet", "ConvNet"), machines, batch=100)
    said = rule_prose.rule_sentences(conditions)
    by = conditions.set_index(["model", "machine"])
    for name, size in (("LinearNet", "46.2 MiB"), ("ConvNet", "1.44 MiB")):
        text = said[f"rule_{name.lower()}"]
        assert text.startswith(f"`{name}`: its {size} of gradients make one DDP bucket at the 25 MiB cap")
        assert "no per-GPU batch hides its all-reduce: every step pays all of it after backward" in text
        assert "needs a global batch" not in text and "hides behind backward" not in text
        assert "unbounded" not in text and "on 0" not in text
        # the all-reduce against each GPU's step without it at 13 samples of 100, on p5 (central values)
        p5 = by.loc[(name, "AWS p5.48xlarge")]
        assert p5["per_gpu_batch"] == 13
        tail, compute = p5["tail_seconds"] * 1e3, p5["compute_seconds"] * 1e3
        pair = f"{tail:.3g} ms against {compute:.3g} ms on AWS p5.48xlarge"
        assert pair in text
    ratios = {name: [by.loc[(name, m), "tail_seconds"] / by.loc[(name, m), "compute_seconds"]
                     for m in machines] for name in ("LinearNet", "ConvNet")}  # fmt: skip
    assert max(ratios["ConvNet"]) < 0.05 < 0.1 < min(ratios["LinearNet"])  # it is what tells them apart
    # beside each GPU's step without the all-reduce: for LinearNet mostly its host's issue, not arithmetic
    assert "% as long as each GPU's step without it, its host's issue and its compute" in said["rule_convnet"]
    assert (
        "× as long as each GPU's step without it, its host's issue and its compute" in said["rule_linearnet"]
    )
    # b*_floor: LinearNet's (1,771-1,979 at the H200 host's measured time per op) lies above the 13 samples on
    # both machines; ConvNet's, 9-19, lies below them on one
    assert "lies above the 13 samples each GPU computes there on every machine" in said["rule_linearnet"]
    assert (
        r"Its \(b^*_{\text{floor}}\) is 9–19 per GPU (central values): the 13 samples each GPU computes "
        "there outgrow it on 1 of 2 machines" in said["rule_convnet"]
    )
    assert said["rule_convnet"].endswith(
        "The 2,700 clips hold the global batch that outgrows it whatever the inputs on both eight-GPU "
        "machines."
    )
    assert said["rule_short"].startswith(
        "Neither model's all-reduce can hide (one DDP bucket each at the 25 MiB cap), so every step pays it "
        "after backward: at a global batch of 100 (13 per GPU) it lasts "
    )
    assert "(on 0 never)" not in said["rule_short"] and "on 0 of" not in said["rule_short"]
    closing = said["rule_closing"]
    assert closing.startswith("That is the book's answer in one table: more GPUs help a model whose compute")
    # ConvNet's b*_floor, 9-19, lies below its 13 samples a GPU on one machine only: said as such
    assert "`ConvNet` outgrows its fixed cost on 1 of 2 machines and not on the others" in closing
    assert "`LinearNet` mostly repeats its fixed cost on every GPU" in closing
    assert (
        said["one_bucket_models"]
        == "as both of the book's models do at the 25 MiB cap the step predictions assume"
    )
    alone = rule_prose.rule_sentences(conditions[conditions["model"] == "ConvNet"])
    assert alone["rule_short"].startswith("`ConvNet`'s all-reduce cannot hide (one DDP bucket holds it")
    assert alone["one_bucket_models"] == "as `ConvNet` does at the 25 MiB cap the step predictions assume"
    assert "`ConvNet`'s a first of 1.4 MiB and 0.0383 MiB after it" in said["hide_note"]
    assert "`LinearNet`'s gradients would still make one bucket" in said["hide_note"]
    assert "At the band's edge" not in said["hide_note"]
    assert said["hide_note"].startswith("For a one-bucket model the first condition is therefore a cost")
    # without the chapter's batch the rule still reads, with each machine's all-reduce after backward
    bare = rule_prose.rule_sentences(rule.condition_table(("ConvNet",), machines))
    tail = f"{by.loc[('ConvNet', 'AWS p5.48xlarge'), 'tail_seconds'] * 1e3:.3g} ("
    assert f"every step pays all of it after backward, {tail}" in bare["rule_convnet"]
    assert bare["rule_closing"].startswith("That is the book's answer in one table")


def test_a_smaller_bucket_cap_splits_convnet_s_gradients():
    assert rule_prose.bucket_split_note("ConvNet", 0.25) == {
        "bucket_split": "chapter 3 runs `ConvNet` at 0.25 MiB too, where its 1.44 MiB of gradients make 3 "
        "buckets"
    }
