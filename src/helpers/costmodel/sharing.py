"""Ranks that share one GPU (issue 35, item 4): do they take turns on the whole step, or on the device only?

Two rules for the compute of each of m Gloo ranks sharing one GPU, each rank at b samples:

- **turns** (``timemodel.predict_step``'s): the ranks take turns on everything, each repeating the step's
  fixed part: c(m·b) + (m − 1)·a, with c(b) = a + s·b the single-process line;
- **side by side**: each rank's host issues its own kernels on its own cores at the same time, and only the
  device is shared: max(c(b), m·d(b)), with d(b) the kernels' time of one single-process step (profiled).

Both add the same all-reduce: α and β of Gloo fitted on CUDA tensors, so the copies Gloo makes from the
device to the host and back are inside them. The check sets both against every multi-rank Gloo step the
results hold for ranks sharing one GPU: chapter 3's and 6's DDP launches of the book's models, chapter 7's
held-out launches. Which rule the measurements support is read from this table, not assumed.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter

import numpy as np
import pandas as pd

from helpers.advise import measure
from helpers.costmodel import timemodel, validate
from helpers.results import ResultStore
from helpers.stats import listed

RULES = ("turns", "side by side")
GOAL = 0.15  # the book's goal for the time model on runs it never saw: 15 % either way


def device_seconds(records: list[dict], model: str, batch: float) -> float:
    """The profiled kernels' time of one single-process step of ``model`` at ``batch`` samples: the median
    over seeds at each profiled batch, linear between batches (kernel time grows with the batch). ValueError
    where the profiles hold no batch at or around it."""
    frame = validate.profile_frame(records)
    frame = frame[frame["model"].map(validate.costs_digest) == validate.costs_digest(model)]
    medians = frame.groupby("batch")["kernel_seconds"].median()
    if medians.empty or not medians.index.min() <= batch <= medians.index.max():
        raise ValueError(f"no profiled kernel time of {model} around batch {batch}")
    return float(np.interp(batch, medians.index, medians.values))


def predict_shared(
    model: str, global_batch: int, world_size: int, time_model: timemodel.TimeModel, kernel_seconds: float
) -> dict[str, float]:
    """DDP's step (with overlap) of ``world_size`` ranks sharing one GPU under both rules, in seconds.

    ``kernel_seconds`` is d(b) at the per-rank batch. Side by side is ``predict_step`` with every rank on a
    device of its own, its compute raised to the device's turns m·d(b) where those are longer."""
    turns = timemodel.predict_step("ddp_overlap", model, global_batch, world_size, time_model)
    apart = dataclasses.replace(
        time_model, devices=world_size, peer_copy_seconds_per_byte=time_model.copy_seconds_per_byte
    )
    side = timemodel.predict_step("ddp_overlap", model, global_batch, world_size, apart)
    queued = world_size * kernel_seconds - side["compute_seconds"]
    return {"turns": turns["step_seconds"], "side by side": side["step_seconds"] + max(queued, 0.0),
            "one process": side["compute_seconds"], "device turns": world_size * kernel_seconds,
            "all-reduce": turns["communication_seconds"]}  # fmt: skip


def _book_time_model(records: list[dict], model: str, cores: int) -> timemodel.TimeModel:
    """Chapter 5's time model of one of the book's models on the GPU with Gloo: the single-device timings
    of the timed-step count most of them used (chapter 5's calibration)."""
    counts = Counter(
        r["config"]["timed_steps"] for r in records
        if r["kind"] == "step_timing" and r["config"]["device"] == "cuda:0" and r["config"]["model"] == model
    )  # fmt: skip
    if not counts:
        raise ValueError(f"no single-device step timing of {model} on the GPU")
    return timemodel.time_model_from_records(
        records, [model], backend="gloo", timed_steps=counts.most_common(1)[0][0], cores=cores,
        device_type="cuda",
    )[0]  # fmt: skip


def _held_out_time_model(records: list[dict], config: dict) -> timemodel.TimeModel:
    """Chapter 7's time model of a held-out model, from its single-device step timings on the GPU and the
    records' all-reduce and copy (read, never measured: this is a check)."""
    rows = [
        measure.step_row(r) for r in records
        if r["kind"] == "advise_step_timing" and r["config"]["model"] == config["model"]
        and r["config"]["device"] == "cuda" and r["config"]["timed_steps"] == config["timed_steps"]
    ]  # fmt: skip
    # counting the model registers its costs (gradient sizes) with the roofline, which the step needs
    (counted,) = validate.counted_models([config["model"].split(" [")[0]]).values()
    parameters = counted.parameters
    link = timemodel.all_reduce_alpha_beta(records, "gloo", "cuda")
    copy = timemodel.copy_record(records, "cuda:0", "cuda:0")["result"]
    return measure.steps_time_model(pd.DataFrame(rows), parameters, link, copy, "cuda")


def _launches(records: list[dict]) -> dict[tuple, dict]:
    """Every multi-rank Gloo launch of plain DDP on one GPU (float32 gradients, 25 MiB buckets), grouped by
    setting: ``{(chapter, model, ranks, global batch): {"steps": [median step per launch], "config": one
    launch's config}}``. Chapter 3 stores its launches as ``ddp_run`` (compressed and small-bucket launches
    left out: the rules predict the plain step), chapter 6 as ``sharding_run`` of the "ddp" strategy (its
    scaling runs, 6.1 and 6.2, and its sharding section's DDP, all through the sharding worker), chapter 7 as
    ``advise_validation``."""
    settings: dict[tuple, dict] = {}
    for record in records:
        config = record["config"]
        if (
            config.get("backend") != "gloo"
            or config.get("device") != "cuda"
            or config.get("world_size", 1) < 2
        ):
            continue
        if (record["kind"] == "ddp_run" and config["bucket_cap_mb"] == 25
                and config.get("compression") is None):  # fmt: skip
            chapter = "chapter 3"
        elif record["kind"] == "sharding_run" and config["strategy"] == "ddp":
            chapter = "chapter 6"
        elif record["kind"] == "advise_validation":
            chapter = "chapter 7"
        else:
            continue
        key = (chapter, config["model"], config["world_size"], config["global_batch_size"])
        found = settings.setdefault(key, {"steps": [], "config": config})
        found["steps"].append(statistics.median(record["result"]["step_seconds_all"]))
    return settings


def shared_gpu_check(store: ResultStore) -> pd.DataFrame:
    """Both rules against every multi-rank Gloo setting of ``store``'s GPU machine: one row per setting with
    the measured step (median launch and range over launches), the single-process compute c(b), the
    device's turns m·d(b), each rule's prediction and its ratio predicted / measured. Empty where the
    store holds no such launch or no profile of the model."""
    records = store.records()
    profiles = [r for r in records if r["kind"] == validate.PROFILE_KIND]
    cores = store.hardware["usable_cores"]
    order = {"chapter 3": 0, "chapter 6": 1, "chapter 7": 2}  # the book's order
    settings = sorted(_launches(records).items(), key=lambda item: (order[item[0][0]], item[0]))
    rows = [row for setting, found in settings
            for row in _check_row(records, profiles, cores, setting, found)]  # fmt: skip
    return pd.DataFrame(rows)


def _check_row(records, profiles, cores: int, setting: tuple, found: dict) -> list[dict]:
    """``shared_gpu_check``'s row of one setting; none where the records lack what it needs (a profile of
    the model, its single-device timings, Gloo's all-reduce on the GPU)."""
    chapter, model, ranks, global_batch = setting
    try:
        kernel = device_seconds(profiles, model, global_batch // ranks)
        if chapter == "chapter 7":
            time_model = _held_out_time_model(records, found["config"])
        else:
            time_model = _book_time_model(records, model, cores)
    except ValueError:
        return []
    predicted = predict_shared(model, global_batch, ranks, time_model, kernel)
    measured = statistics.median(found["steps"])
    return [{
        "chapter": chapter, "model": model.split(" [")[0], "ranks": ranks,
        "per_rank_batch": global_batch // ranks,
        "measured_seconds": measured, "launch_low": min(found["steps"]), "launch_high": max(found["steps"]),
        "launches": len(found["steps"]), "one_process_seconds": predicted["one process"],
        "device_turns_seconds": predicted["device turns"], "all_reduce_seconds": predicted["all-reduce"],
        **{f"{rule}_seconds": predicted[rule] for rule in RULES},
        **{f"{rule}_ratio": predicted[rule] / measured for rule in RULES},
    }]  # fmt: skip


NO_CHECK = {
    "shared_gpu_verdict": "The results hold no launch of several Gloo ranks on one profiled GPU to check "
    "either rule against."
}


def stored_checks(run: str = "gpu") -> list[tuple[ResultStore, pd.DataFrame]]:
    """``shared_gpu_check`` of every machine of ``validate.profiled_machines`` that has a setting to check."""
    checked = ((store, shared_gpu_check(store)) for store, _ in validate.profiled_machines(run).values())
    return [(store, check) for store, check in checked if not check.empty]


def check_view(check: pd.DataFrame) -> pd.DataFrame:
    """``shared_gpu_check`` for readers, short columns (the prose names them): milliseconds, and each rule's
    prediction over the measured step to two decimals."""
    ms = lambda column: (check[column] * 1e3).round(2)  # noqa: E731
    return pd.DataFrame({
        "measured in": check["chapter"], "model": check["model"], "ranks": check["ranks"],
        "batch per rank": check["per_rank_batch"],
        "measured ms (range)": [
            f"{step * 1e3:.2f} ({low * 1e3:.2f}–{high * 1e3:.2f})"
            for step, low, high in check[["measured_seconds", "launch_low", "launch_high"]].to_numpy()
        ],
        "c(b) (ms)": ms("one_process_seconds"), "m·d(b) (ms)": ms("device_turns_seconds"),
        "all-reduce (ms)": ms("all_reduce_seconds"),
        "turns": check["turns_ratio"].map("{:.2f}×".format),
        "side by side": check["side by side_ratio"].map("{:.2f}×".format),
    }).set_index(["measured in", "model", "ranks"])  # fmt: skip


def check_sentence(check: pd.DataFrame) -> str:
    """What the check shows, per rule: the median factor each is off by, how many settings each predicts
    within the book's 15 % goal, at how many each is the nearer one, and which settings decide (one rule
    within the goal, the other not); with so few settings the rule is chosen only where they decide."""
    fold = {rule: check[f"{rule}_ratio"].map(lambda r: math.exp(abs(math.log(r)))) for rule in RULES}
    nearer = int((fold["turns"] < fold["side by side"]).sum())
    settings = len(check)
    inside = {rule: check[f"{rule}_ratio"].between(1 - GOAL, 1 + GOAL) for rule in RULES}
    text = (
        f"Over the {settings} settings where Gloo ranks shared the one GPU, taking turns on the whole step "
        f"is off by a median factor of {fold['turns'].median():.2f} and sharing only the device by "
        f"{fold['side by side'].median():.2f}; within the book's {GOAL * 100:.0f} % goal are "
        f"{int(inside['turns'].sum())} and {int(inside['side by side'].sum())} of the {settings} "
        f"respectively, and turns is the nearer rule at {nearer} of {settings}."
    )
    labels = "`" + check["model"] + "` (" + check["chapter"] + ")"
    decide = {rule: labels[inside[rule] & ~inside[other]].tolist()
              for rule, other in (("turns", "side by side"), ("side by side", "turns"))}  # fmt: skip
    named = {
        rule: f"{listed(found)} decide{'s' if len(found) == 1 else ''}" for rule, found in decide.items()
    }
    if decide["turns"] and not decide["side by side"]:
        text += (f" Only {named['turns']}, for turns, the rule the time model keeps; so few settings "
                 "support it without proving it.")  # fmt: skip
    elif decide["side by side"] and not decide["turns"]:
        text += (f" Only {named['side by side']}, for sharing only the device; so few settings suggest it "
                 "without proving it.")  # fmt: skip
    elif decide["turns"]:
        text += (f" {named['turns']} for turns and {listed(decide['side by side'])} for sharing only the "
                 "device: the measurements do not choose between them.")  # fmt: skip
    else:
        text += " No setting has one rule within the goal and the other not: the measurements do not choose."
    return text + _all_reduce_note(check)


def _all_reduce_note(check: pd.DataFrame) -> str:
    """Settings whose predicted all-reduce alone is longer than the measured step: they test the
    all-reduce's α-β price, not either rule (empty when none is)."""
    if "all_reduce_seconds" not in check:
        return ""
    over = check[check["all_reduce_seconds"] > check["measured_seconds"]]
    if over.empty:
        return ""
    named = listed([f"`{row.model}` on {row.ranks} ranks ({row.chapter})" for row in over.itertuples()])
    return (
        f" For {named} the predicted all-reduce alone is longer than the measured step, so that setting "
        "tests the all-reduce's α-β price more than either rule."
    )
