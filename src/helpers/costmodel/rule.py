"""The two conditions on the per-GPU batch (chapter 5's rule, chapter 7's advice): whether backward can hide
the all-reduce of all but the last DDP bucket (b*_hide; never with one bucket) and whether each GPU's
compute outgrows the fixed cost of a step (b*_floor), per model and machine, each with its band, and
the global batch both need against the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel import configurations as configs
from helpers.costmodel.gpus import arithmetic_seconds, fixed_step_seconds
from helpers.costmodel.recommend import (
    BUCKET_CAP_MB,
    ONE_BUCKET,
    TRAIN_CLIPS,
    ddp_buckets,
    ddp_shards,
    deciding_inputs,
    roofline_compute,
)
from helpers.costmodel.specs import GPUS, LINKS, scenarios

# The rule's two per-GPU batches as the book typesets them, in tables and glued sentences (\(…\) is math
# there: the book's pasted_code extension and MathJax read it; "$" in a sentence is a dollar).
HIDE, FLOOR = r"\(b^*_{\text{hide}}\)", r"\(b^*_{\text{floor}}\)"
# Whether the training set holds a global batch (``_against_data``), as prose and tables read it.
HELD = "within the dataset whatever the inputs"
NOT_HELD = "more than the dataset holds whatever the inputs"
HELD_OR_NOT = "within the dataset or not, depending on "


def hidden_but_last(backward_seconds: float, bucket_bytes: list[float], all_reduce_seconds) -> bool:
    """Whether backward hides every bucket's all-reduce but the last's, the most DDP can hide: bucket j is
    ready once backward has produced its share of the bytes and its all-reduce starts when the one before
    has ended (``timemodel.overlapped_all_reduce_finish``); all of them up to the last must end by the end
    of backward. The last bucket is ready only when backward ends, so its all-reduce always follows it;
    with one bucket that is the whole all-reduce, and nothing hides, at any batch."""
    if len(bucket_bytes) < 2:
        return False
    total = sum(bucket_bytes)
    finish = produced = 0.0
    for size in bucket_bytes[:-1]:
        produced += size
        finish = max(backward_seconds * produced / total, finish) + all_reduce_seconds(size)
    return finish <= backward_seconds


def batch_conditions(
    model: str,
    machine: str,
    largest: int = 1 << 16,
    bucket_cap_mb: float = BUCKET_CAP_MB,
    batch: int | None = None,
) -> pd.DataFrame:
    """The two per-GPU batches above which adding GPUs pays, per scenario, on ``machine``'s GPUs:

    - ``hide``: the smallest b whose predicted backward hides the all-reduce of every DDP bucket but the
      last (``hidden_but_last``, buckets at ``bucket_cap_mb`` as the step predictions have them); None
      where no b up to ``largest`` does, and always for a model whose gradients fit one bucket: that
      bucket is handed over when backward ends, so its all-reduce follows backward at any batch;
    - ``floor``: the smallest b whose convolutions and matrix products take as long as what every GPU
      repeats each step whatever its batch (its host ops and the optimizer): below it, each GPU's step is
      mostly fixed cost, and dividing the batch over more GPUs divides little.

    ``tail_seconds`` is the all-reduce that follows backward however large b: the last bucket's (with one
    bucket, the whole gradient's). ``global_batch`` is k × the larger of the two: the global batch that
    makes both hold (None where ``hide`` is). Given the global ``batch``, ``compute_seconds`` is what each
    GPU computes of it (forward, backward and optimizer of its ``per_gpu_batch``, the largest of
    ``ddp_shards``: the step predictions' compute), the work a one-bucket model's ``tail_seconds`` is paid
    beside; NaN without it.
    """
    config = configs.configuration(machine)
    gpu, link, k = GPUS[config.gpu], LINKS[config.link], config.gpus
    buckets = ddp_buckets(model, bucket_cap_mb)
    per_gpu = max(ddp_shards(batch, k)) if batch is not None else None
    rows = []
    for label, scenario in scenarios():
        shard = scenario.at_shard()  # each GPU computes its shard of the global batch
        compute = roofline_compute(model, gpu, shard)
        computed = sum(compute(per_gpu).values()) if per_gpu is not None else math.nan

        def all_reduce(nbytes: float, level: str = scenario.link) -> float:
            return ring_all_reduce_seconds(nbytes, k, link.alpha_seconds, 1 / link.bus(level))

        hide = _smallest(
            lambda b, c=compute, f=all_reduce: hidden_but_last(c(b)["backward"], buckets, f), largest
        ) if len(buckets) > 1 else None  # fmt: skip
        floor = math.ceil(fixed_step_seconds(model, gpu, shard) / arithmetic_seconds(model, 1, gpu, shard))
        both = None if hide is None else k * max(hide, floor)
        rows.append({"model": model, "machine": machine, "gpus": k, "scenario": label, "hide": hide,
                     "floor": floor, "global_batch": both, "floor_global_batch": k * floor,
                     "buckets": len(buckets), "gradient_bytes": sum(buckets),
                     "last_bucket_bytes": buckets[-1], "tail_seconds": all_reduce(buckets[-1]),
                     "batch": batch, "per_gpu_batch": per_gpu, "compute_seconds": computed})  # fmt: skip
    return pd.DataFrame(rows)


def _smallest(holds: Callable[[int], bool], largest: int) -> int | None:
    """The smallest b in 1..``largest`` for which ``holds`` (assumed monotone), by doubling and bisection."""
    batch = 1
    while batch <= largest and not holds(batch):
        batch *= 2
    if batch > largest:
        return None
    low, high = batch // 2 + 1, batch
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle + 1, high)
    return low


def _against_data(frame: pd.DataFrame, column: str, cap: int) -> str:
    """Whether the training set (``cap`` clips) holds the global batch of ``column`` over the whole band
    of ``frame`` (``batch_conditions``' scenarios), or what decides it."""
    need = frame[column]
    if need.max() <= cap:
        return HELD
    if need.min() > cap:
        return NOT_HELD
    return HELD_OR_NOT + deciding_inputs(frame.assign(spare=cap - need), "spare", 0)[1]


def condition_table(
    models,
    machines,
    cap: int = TRAIN_CLIPS,
    bucket_cap_mb: float = BUCKET_CAP_MB,
    batch: int | None = None,
) -> pd.DataFrame:
    """``batch_conditions`` summarized per model and machine: each condition's per-GPU batch, the global
    batch both need and the one the fixed cost alone needs (``floor_global_batch``), the all-reduce that
    follows backward (``tail_seconds``) and, given the global ``batch``, the step per GPU without it (host
    issue and compute) beside it (``compute_seconds``, at ``per_gpu_batch``), central with lowest and
    highest over the band (``hide_high`` infinite where some scenario never hides the all-reduce; all of
    ``hide`` infinite for a one-bucket model, which never hides it); the model's DDP ``buckets``; and
    whether the training set (``cap`` clips) holds the global batch over the whole band, or what decides it
    (``ONE_BUCKET`` where no batch can meet both), and the same for the fixed cost alone (``floor against
    the training set``).

    ``needed_global_batch`` is the global batch from which every condition that can hold holds: k ×
    b*_floor for a one-bucket model (the first never holds), the global batch both need for one of several
    buckets; ``needed against the training set`` says whether the training set holds it."""
    rows = []
    for model in models:
        for machine in machines:
            frame = batch_conditions(model, machine, bucket_cap_mb=bucket_cap_mb, batch=batch).fillna(
                {"hide": np.inf, "global_batch": np.inf}
            )
            central = frame[frame["scenario"] == "central"].iloc[0]
            one = int(central["buckets"]) == 1
            row = {"model": model, "machine": machine, "gpus": int(central["gpus"]),
                   "buckets": int(central["buckets"]), "gradient_bytes": int(central["gradient_bytes"]),
                   "last_bucket_bytes": int(central["last_bucket_bytes"]), "batch": batch,
                   "per_gpu_batch": central["per_gpu_batch"]}  # fmt: skip
            for column in ("hide", "floor", "global_batch", "floor_global_batch", "tail_seconds",
                           "compute_seconds"):  # fmt: skip
                row[column], row[f"{column}_low"], row[f"{column}_high"] = (
                    central[column], frame[column].min(), frame[column].max())  # fmt: skip
            floor_fits = _against_data(frame, "floor_global_batch", cap)
            both_fits = ONE_BUCKET if one else _against_data(frame, "global_batch", cap)
            needed = "floor_global_batch" if one else "global_batch"
            for suffix in ("", "_low", "_high"):
                row[f"needed_global_batch{suffix}"] = row[f"{needed}{suffix}"]
            rows.append({**row, "against the training set": both_fits,
                         "floor against the training set": floor_fits,
                         "needed against the training set": floor_fits if one else both_fits})  # fmt: skip
    return pd.DataFrame(rows)
