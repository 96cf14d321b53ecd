"""What every chapter notebook does first, in a cell the book hides: check the parameters, open the
chapter's results store, set the figures' style and say on what hardware the chapter was measured.

``store, machine = chapter.start(globals())`` right after the parameters cell: the parameters are the
notebook's plain-data globals at that point (papermill's injected values included), and each must pass
its rule below; a parameter without a rule is refused too, so that no setting goes unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from IPython import get_ipython
from IPython.display import Markdown
from matplotlib.figure import Figure
from matplotlib_inline.config import InlineBackend

from helpers import phone, plotting
from helpers.costmodel.configurations import BY_NAME
from helpers.costmodel.money import exact
from helpers.costmodel.specs import GPUS
from helpers.hardware import describe
from helpers.models import MODELS
from helpers.provenance import edition_line
from helpers.renter_settings import SETTINGS
from helpers.results import ResultStore
from helpers.sharding.memory import STAGES
from helpers.worker import set_tf32

PLAIN = (str, int, float, bool, type(None), list, tuple, dict)


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _list_of(test: Callable, allow_empty: bool = False) -> Callable:
    return lambda value: isinstance(value, list) and (allow_empty or bool(value)) and all(map(test, value))


def _price(value) -> bool:
    try:
        return exact(value) > 0
    except (TypeError, ValueError):
        return False


def _adjustment(value) -> bool:
    try:
        return -1 < exact(value) < 1
    except (TypeError, ValueError):
        return False


# (name pattern, test, what a valid value is); the first pattern that matches the whole name decides
RULES: list[tuple[str, Callable, str]] = [
    ("results_run|gpu_results_run", lambda v: isinstance(v, str) and v, "a results folder name"),
    (
        "training_runs",
        _list_of(lambda v: isinstance(v, str) and v, allow_empty=True),
        "a list of folder names",
    ),
    ("(sharding_)?device", lambda v: v in ("cpu", "cuda", "auto"), "'cpu', 'cuda' or 'auto'"),
    ("backend", lambda v: v in ("gloo", "nccl"), "'gloo' or 'nccl'"),
    ("backends", _list_of(lambda v: v in ("gloo", "nccl")), "a list of 'gloo' and 'nccl'"),
    ("gpus", lambda v: v is None or _positive_int(v), "None or a positive integer"),
    ("memory_gpus", _list_of(lambda v: v in GPUS), f"a list of {', '.join(GPUS)}"),
    ("models_.*|.*_models", _list_of(lambda v: v in MODELS), f"a list of {', '.join(MODELS)}"),
    (".*model", lambda v: v in MODELS, f"one of {', '.join(MODELS)}"),
    ("(.*_)?optimizer", lambda v: v in ("sgd", "adam"), "'sgd' or 'adam'"),
    (".*seed", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer ≥ 0"),
    (".*seeds", _list_of(lambda v: isinstance(v, int) and v >= 0), "a list of integers ≥ 0"),
    (".*_gib", _list_of(lambda v: _number(v) and v > 0), "a list of positive sizes in GiB"),
    (".*_samples", lambda v: v is None or _positive_int(v), "None (every clip) or a positive integer"),
    (".*_groups", lambda v: v is None or (_positive_int(v) and v >= 2), "None (no interval) or an int ≥ 2"),
    (".*stages", _list_of(lambda v: v in STAGES), f"a list of ZeRO stages {STAGES}"),
    (".*checkpoints", _list_of(lambda v: isinstance(v, int) and v >= 0), "a list of steps ≥ 0"),
    (".*rules", _list_of(lambda v: v in ("fixed", "linear")), "a list of 'fixed' and 'linear'"),
    (".*_loss", lambda v: _number(v) and v > 0, "a positive loss"),
    (".*stalenesses", _list_of(lambda v: isinstance(v, int) and v >= 0), "a list of integers ≥ 0"),
    (
        ".*(batch_sizes|world_sizes|replica_counts|message_bytes|chunks|seeds|gpu_counts)",
        _list_of(_positive_int),
        "a non-empty list of positive integers",
    ),
    (
        ".*(batch_size|batch|epochs|steps|iterations|world_size|shards|repeats|rounds)",
        _positive_int,
        "a positive integer",
    ),
    (".*launches", _positive_int, "a positive integer"),
    (".*_seconds", lambda v: v is None or (_number(v) and v > 0), "None or a positive number"),
    (".*price.*", _price, "a positive price, as a string for exact arithmetic"),
    (".*adjustment", _adjustment, "a fraction between −1 and 1, as a string"),
    (".*(accuracy|fraction)", lambda v: _number(v) and 0 < v <= 1, "a number in (0, 1]"),
    (".*speedup", lambda v: _number(v) and v >= 1, "a number ≥ 1"),
    ("hour_value", lambda v: _number(v) and v >= 0, "dollars an hour, a number ≥ 0"),
    (".*caps_mb", _list_of(lambda v: _number(v) and v > 0), "a list of positive sizes in MB"),
    (".*compressions", _list_of(lambda v: v in (None, "fp16", "bf16")), "a list of None, 'fp16', 'bf16'"),
    (".*lr", lambda v: _number(v) and v > 0, "a positive learning rate"),
    ("lightning", lambda v: isinstance(v, bool), "True or False"),
    (
        "settings_timed",
        _list_of(lambda v: v in SETTINGS, allow_empty=True),
        f"a list of {', '.join(SETTINGS)}",
    ),
    (
        "held_out_specs",
        _list_of(lambda v: isinstance(v, str) and ":" in v),
        "a list of module:callable factories of models",
    ),
    ("example_machine", lambda v: v in BY_NAME, "a machine of chapter 5's table of configurations"),
]


def parameters_of(namespace: dict) -> dict:
    """The notebook's parameters: its plain-data globals that IPython did not define itself."""
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_") and name not in ("In", "Out", "exit", "quit") and isinstance(value, PLAIN)
    }


def check_parameters(parameters: dict) -> None:
    """ValueError naming the first parameter whose value breaks its rule, or that has no rule."""
    for name, value in parameters.items():
        rule = next(((test, what) for pattern, test, what in RULES if re.fullmatch(pattern, name)), None)
        if rule is None:
            raise ValueError(f"parameter {name!r} has no check in helpers.chapter.RULES")
        test, what = rule
        try:
            valid = bool(test(value))
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise ValueError(f"parameter {name} = {value!r} is not {what}")


def word(value):
    """``value`` as a reader reads it: a flag as "yes" or "no", a missing value as "–" (where Python would
    print True, None or NaN); anything else as it is."""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    missing = value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))
    return "–" if missing else value


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a reader sees it: flags and missing values in words (``word``) in every column of
    words or flags. Numbers stay as they are."""
    shown = frame.copy()
    for column, dtype in zip(shown.columns, shown.dtypes, strict=True):
        if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
            shown[column] = shown[column].map(word)
    return shown


def _readable_html(frame: pd.DataFrame) -> str:
    return readable(frame)._repr_html_()


def start(namespace: dict) -> tuple[ResultStore, str]:
    """Check the parameters in ``namespace`` (a notebook's ``globals()``), keep float32 arithmetic off
    TF32 in this kernel as in every rank, then open the store of its ``results_run``, set the figures'
    style (each shown in the book with its phone layout too: ``phone.book_bundle``) and tables shown
    whole, in words (``readable``). What its hardware can and cannot show is said once, in the intro's
    list of every chapter's hardware (``provenance.edition_note``), which the chapter's badge links to.

    Returns the store and the one-line description of its hardware, for figure titles. A chapter executed
    from another machine's records (``helpers.study --from-records``) runs torch with that machine's
    thread count, the default its records were measured with and name in their configurations.
    """
    check_parameters(parameters_of(namespace))
    set_tf32(False)  # the study's float32, as every rank sets it (helpers.worker.prepare_rank)
    plotting.setup_style()
    pd.set_option("display.max_colwidth", None)  # a table's sentence cells whole, never cut at 50 characters
    pd.set_option("display.max_rows", None)  # and every row: a long table folds, it never drops rows
    shell = get_ipython()
    if shell is not None:  # every table shown reads yes/no and "–", not True/False and None
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, _readable_html)
        # and every figure in one HTML <picture>: the column's layout, and one panel per row on a phone (a
        # bundle, which the inline backend leaves in place when it claims the figure formatters; its own
        # PNG, the column's layout a second time, is switched off)
        shell.display_formatter.mimebundle_formatter.for_type(Figure, phone.book_bundle)
        InlineBackend.instance().figure_formats = set()
    store = ResultStore(namespace["results_run"])
    if store.records_of:
        torch.set_num_threads(store.hardware["usable_cores"])
    return store, describe(store.hardware)


def rerun_command(chapter: str) -> str:
    """The one command that reruns ``chapter`` on the reader's own machine."""
    return f'make study STUDY_ARGS="--chapters {chapter}"'


def finish(store: ResultStore, chapter: str) -> None:
    """Glue what a chapter's prose names last: the command that reruns it (``rerun``) and the badge under
    its answer (``edition``: ``provenance.edition_line``, once every record it shows has been read)."""
    from myst_nb import glue

    glue("rerun", rerun_command(chapter), display=False)
    glue("edition", Markdown(edition_line(store)), display=False)  # {glue:md}: its bold is Markdown


def glue_all(texts: dict, markdown=()) -> None:
    """Glue every ``{name: value}`` for the chapter's prose, none of it displayed: the sentences a helper
    built from the chapter's tables (``costmodel.prose``, for example), for ``{glue:text}`name```. The
    ``markdown`` names are glued as Markdown, for the ``glue:md`` directive: readings of several paragraphs
    (``stats.PARAGRAPH_BREAK``) or a list, which keep each paragraph within the book's budget."""
    from myst_nb import glue

    if isinstance(markdown, str) or not set(markdown) <= set(texts):
        raise ValueError(f"markdown must be a set of names of these texts, not {markdown!r}")
    for name, value in texts.items():
        glue(name, Markdown(value) if name in markdown else value, display=False)
