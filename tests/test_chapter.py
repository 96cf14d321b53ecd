"""helpers.chapter: every chapter parameter is checked by a rule, and bad values are named."""

import math
import re

import nbformat
import numpy as np
import pandas as pd
import pytest

from helpers import chapter, study
from helpers.notebook_parameters import notebook_defaults


def test_the_parameters_are_the_plain_data_globals():
    namespace = {"epochs": 3, "device": "cpu", "In": [], "_": 1, "pd": re, "plot": print, "x": [1, 2]}
    assert chapter.parameters_of(namespace) == {"epochs": 3, "device": "cpu", "x": [1, 2]}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("epochs", 0, "epochs = 0 is not a positive integer"),
        ("batch_size", 2.5, "batch_size = 2.5 is not a positive integer"),
        ("train_samples", -1, "train_samples = -1 is not None"),
        ("world_sizes", [], "world_sizes = [] is not a non-empty list of positive integers"),
        ("device", "tpu", "device = 'tpu' is not 'cpu', 'cuda' or 'auto'"),
        ("stale_model", "ResNet", "stale_model = 'ResNet' is not one of LinearNet, ConvNet"),
        ("hourly_price_per_device", "-1", "is not a positive price"),
        ("backends", ["mpi"], "is not a list of 'gloo' and 'nccl'"),
        ("hour_value", -5, "hour_value = -5 is not dollars an hour, a number ≥ 0"),
        ("colour", "blue", "parameter 'colour' has no check"),
    ],
)
def test_bad_values_are_refused_by_name(name, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        chapter.check_parameters({name: value})


def test_every_chapter_parameter_of_every_profile_passes_its_rule():
    for profile in study.PROFILES:
        for planned in study.plan(profile):
            notebook = nbformat.read(planned.source, as_version=4)
            cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
            defaults = {}
            exec(cell.source, {}, defaults)  # the notebook's own literals
            chapter.check_parameters({**defaults, **planned.parameters})


def test_the_sizes_that_must_agree_agree_in_every_profile():
    # 5.3 prices chapter 1's training runs, 1.5 sets its profiled step beside the swept one and 2.4 breaks
    # down one of the swept batches: a smoke size changed in one place must not part them
    for profile in study.PROFILES:
        effective = {planned.name: {**notebook_defaults(planned.source), **planned.parameters}
                     for planned in study.plan(profile)}  # fmt: skip
        one, two = effective["01_single_device"], effective["02_dataparallel_internals"]
        assert effective["05_cost_model"]["training_batch"] == one["batch_size"], profile
        assert one["profile_batch_size"] in one["sweep_batch_sizes"], profile
        assert two["breakdown_batch_size"] in two["batch_sizes"], profile


def test_glue_all_glues_the_named_readings_as_markdown(monkeypatch):
    import myst_nb
    from IPython.display import Markdown

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display: glued.update({name: value}))
    chapter.glue_all({"short": "one line", "long": "one\n\ntwo"}, markdown={"long"})
    assert glued["short"] == "one line"
    assert isinstance(glued["long"], Markdown) and glued["long"].data == "one\n\ntwo"
    for wrong in ("long", {"lengthy"}):  # a string would match by substring; a name must be a text's
        with pytest.raises(ValueError, match="markdown must be a set of names"):
            chapter.glue_all({"long": "one"}, markdown=wrong)


def test_a_table_reads_in_words_not_python_values():
    """True/False read "yes"/"no" and a missing word or flag "–" in every table a chapter shows; numbers,
    a missing number included, stay as they are."""
    frame = pd.DataFrame({"held": [True, False], "status": [None, "ok"], "seconds": [1.5, math.nan],
                          "ranks": [2, 4], "calls": [[1, 2], None]})  # fmt: skip
    shown = chapter.readable(frame)
    assert shown.drop(columns="seconds").to_dict("list") == {
        "held": ["yes", "no"], "status": ["–", "ok"], "ranks": [2, 4], "calls": [[1, 2], "–"]
    }  # fmt: skip
    assert shown["seconds"].iloc[0] == 1.5 and math.isnan(shown["seconds"].iloc[1])
    assert frame["held"].tolist() == [True, False]  # the frame itself is left as it was


def test_a_printed_flag_or_missing_value_reads_as_a_word():
    assert [chapter.word(value) for value in (True, np.bool_(False), None, math.nan, 0, "x")] == [
        "yes", "no", "–", "–", 0, "x"
    ]  # fmt: skip
