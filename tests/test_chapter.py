"""helpers.chapter: every chapter parameter is checked by a rule, and bad values are named."""

import re

import nbformat
import pytest

from helpers import chapter, study


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
