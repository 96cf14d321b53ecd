"""What chapter 3 reads from its DDP launches: comparisons across launches, the most that the all-reduce's
settings can change a step, whether k ranks learn what one process learns, and each table as a reader
reads it (human column names with units, one rounding per column).

Every timing comparison rests on independent launches (``ddp.run_sweeps``): each launch contributes its
median timed step, and ``stats.launch_speedup`` compares the launch medians with a bootstrap interval.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd
import torch

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.data import take
from helpers.dataparallel import stored_dataparallel_timing
from helpers.ddp import launch_steps, loss_parity, matching, median_of_medians, significant
from helpers.stats import describe_speedup, launch_speedup

LEARNS_BY = 0.10  # training accuracy this far above the commonest digit's share: the model has learned


def _ms(seconds: float) -> str:
    return significant(seconds * 1e3)


def allreduce_seconds(runs: list[tuple[dict, dict]], **match) -> float:
    """The all-reduce's seconds per timed step, timed in the hook: the median over the matching launches
    of each launch's median (NaN where nothing was timed)."""
    launches = [r["result"].get("allreduce_seconds_all") for _, r in matching(runs, **match)]
    launches = [values for values in launches if values]
    return median_of_medians(launches) if launches else math.nan


def compare(runs: list[tuple[dict, dict]], baseline: dict, candidate: dict) -> dict:
    """``stats.launch_speedup`` of the launches matching ``candidate`` over those matching ``baseline``,
    with both sides' median step (``baseline_seconds``, ``candidate_seconds``)."""
    base, new = launch_steps(runs, **baseline), launch_steps(runs, **candidate)
    if not base or not new:
        raise ValueError(f"no launch of {baseline if not base else candidate} among the runs")
    return {
        **launch_speedup(base, new),
        "baseline_seconds": median_of_medians(base),
        "candidate_seconds": median_of_medians(new),
    }


def setting_text(key: str, value) -> str:
    """A varied setting as a figure's legend says it: "2 ranks", "none" (no compression), "gloo"."""
    if key == "ranks":
        return f"{value} rank{'' if value == 1 else 's'}"
    return "none" if value is None else str(value)


def launch_frame(runs: list[tuple[dict, dict]], by: str, setup: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per launch: the variation's ``by`` setting, its ``setup`` settings in words ("gloo, 2
    ranks"), the launch number and its median step: what the chapter's figures draw (a bar at the median
    launch, whiskers from the fastest to the slowest)."""
    return pd.DataFrame(
        [
            {by: setting_text(by, variation.get(by)),
             "setup": ", ".join(setting_text(key, variation.get(key)) for key in setup),
             "launch": variation["launch"],
             "step time (s)": statistics.median(record["result"]["step_seconds_all"])}
            for variation, record in runs
        ]
    )  # fmt: skip


def bucket_launches(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """One row per launch of the bucket sweep: its cap, its buckets per step and its median step."""
    return pd.DataFrame(
        [
            {"bucket cap (MiB)": record["config"]["bucket_cap_mb"],
             "buckets per step": len(record["result"]["bucket_bytes"]),
             "step time (s)": statistics.median(record["result"]["step_seconds_all"])}
            for _, record in runs
        ]
    )  # fmt: skip


def scaling_table(runs: list[tuple[dict, dict]]) -> tuple[pd.DataFrame, dict]:
    """Per model, backend and rank count: threads per rank, launches, the median step and all-reduce, and
    the speed-up over one process (the one-rank launches, on whichever backend ran them: one rank moves
    nothing) across launches. Also returns the comparisons, keyed by (model, backend, ranks)."""
    rows, changes = [], {}
    keys = dict.fromkeys((v["model"], v["backend"], v["ranks"]) for v, _ in runs)
    for model, backend, ranks in keys:
        setup = {"model": model, "backend": backend}
        mine = matching(runs, **setup, ranks=ranks)
        one = next((v for v, _ in runs if v["model"] == model and v["ranks"] == 1), None)
        text = ""
        if ranks != 1 and one is not None:
            baseline = {"model": model, "backend": one["backend"], "ranks": 1}
            changes[model, backend, ranks] = compare(runs, baseline, {**setup, "ranks": ranks})
            text = describe_speedup(changes[model, backend, ranks])
        allreduce = allreduce_seconds(runs, **setup, ranks=ranks)
        rows.append({"model": model, "backend": backend, "ranks": ranks,
                     "threads per rank": mine[0][1]["result"]["threads_per_rank"], "launches": len(mine),
                     "step time (s)": significant(median_of_medians(launch_steps(mine))),
                     "all-reduce (ms)": _ms(allreduce) if ranks > 1 else "–",
                     "against one rank": text})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "backend", "ranks"]), changes


def modelled_allreduce_seconds(bucket_bytes: list[int], world_size: int, fit: dict) -> float:
    """The α-β time (chapter 4's ring all-reduce, ``fit``'s α and β) of all-reducing each of these buckets,
    one after the other, on ``world_size`` ranks."""
    alpha, beta = fit["alpha_seconds"], fit["seconds_per_byte"]
    return sum(ring_all_reduce_seconds(nbytes, world_size, alpha, beta) for nbytes in bucket_bytes)


def communication_bound(runs: list[tuple[dict, dict]], baseline: dict, candidate: dict, fit: dict) -> dict:
    """What changing the all-reduce's settings from ``baseline`` to ``candidate`` did to the step, beside
    the most it can do.

    A step holds the part of its all-reduce that no computation hides: between none and all of it. So a
    setting of the all-reduce alone (bucket size, compression) can save at most the baseline's whole
    all-reduce (``most_saved``) and lose at most the candidate's (``most_lost``), each timed in the hook
    (compression's conversions included) or by the α-β model, whichever is larger. When nothing overlaps
    (one bucket, handed over when the backward pass ends) it saves the difference of the two all-reduces
    (``expected_seconds``, by the α-β model). ``saved_seconds`` is the measured saving per step, baseline
    median minus candidate median (negative: slower), with ``saved_low`` to ``saved_high`` from the
    speed-up's interval at the baseline's median.
    """
    change = compare(runs, baseline, candidate)
    records = [matching(runs, **side)[0][1]["result"] for side in (baseline, candidate)]
    ranks = records[0]["world_size"]
    model = [modelled_allreduce_seconds(r["bucket_bytes"], ranks, fit) for r in records]
    hook = [allreduce_seconds(runs, **side) for side in (baseline, candidate)]
    base = change["baseline_seconds"]
    return {
        "change": change,
        "saved_seconds": base - change["candidate_seconds"],
        "saved_low": base * (1 - 1 / change["low"]),
        "saved_high": base * (1 - 1 / change["high"]),
        "hook_seconds": hook,
        "model_seconds": model,
        "buckets": [len(r["bucket_bytes"]) for r in records],
        "expected_seconds": model[0] - model[1],
        "most_saved": max(value for value in (hook[0], model[0]) if not math.isnan(value)),
        "most_lost": max(value for value in (hook[1], model[1]) if not math.isnan(value)),
    }


def bound_table(bounds: dict[str, dict]) -> pd.DataFrame:
    """``communication_bound`` results side by side, one column per comparison, in milliseconds per step."""
    rows = {
        "buckets per step": lambda b: " → ".join(map(str, b["buckets"])),
        "all-reduce, timed in the hook (ms)": lambda b: " → ".join(map(_ms, b["hook_seconds"])),
        "all-reduce, α-β model (ms)": lambda b: " → ".join(map(_ms, b["model_seconds"])),
        "α-β model's saving if nothing overlaps (ms)": lambda b: _ms(b["expected_seconds"]),
        "most it can save (ms)": lambda b: _ms(b["most_saved"]),
        "measured saving (ms)": lambda b: (
            f"{_ms(b['saved_seconds'])} ({_ms(b['saved_low'])} to {_ms(b['saved_high'])})"
        ),
        "step time (s)": lambda b: (
            f"{significant(b['change']['baseline_seconds'])} → "
            f"{significant(b['change']['candidate_seconds'])}"
        ),
        "verdict": lambda b: describe_speedup(b["change"]),
    }
    return pd.DataFrame({name: [show(b) for show in rows.values()] for name, b in bounds.items()},
                        index=list(rows))  # fmt: skip


def bound_sentence(what: str, bound: dict) -> str:
    """One sentence on a comparison and its bound: the verdict, then whether the measured saving fits in
    what the all-reduce can give."""
    saved = bound["saved_seconds"]
    if saved >= 0:
        sentence = (
            f"{what}: {describe_speedup(bound['change'])}. It saved {_ms(saved)} ms per step; the "
            f"all-reduce it changes takes {_ms(bound['most_saved'])} ms, the most it could save"
        )
    else:
        sentence = (
            f"{what}: {describe_speedup(bound['change'])}. It cost {_ms(-saved)} ms more per step; its "
            f"own all-reduce takes {_ms(bound['most_lost'])} ms, the most it could cost"
        )
    if bound["saved_low"] > bound["most_saved"] or bound["saved_high"] < -bound["most_lost"]:
        return sentence + ", so the measured difference, larger than that, is not the all-reduce's doing."
    return sentence + "."


def bucket_table(runs: list[tuple[dict, dict]], ranks: int) -> pd.DataFrame:
    """The buckets DDP really formed on ``ranks`` ranks (after its rebuild at the first step), per model and
    cap: their count and their bytes in the order they are all-reduced, from the first launch's traffic."""
    rows = {}
    for variation, record in runs:
        if variation["ranks"] != ranks or variation["launch"] != 0:
            continue
        result, cap = record["result"], record["config"]["bucket_cap_mb"]
        rows[variation["model"], cap] = {
            "model": variation["model"], "bucket cap (MiB)": f"{cap:g}",
            "buckets per step": len(result["bucket_bytes"]),
            "bucket bytes, in all-reduce order": " + ".join(f"{b:,}" for b in result["bucket_bytes"]),
            "bytes per step": f"{sum(result['bucket_bytes']):,}",
        }  # fmt: skip
    return pd.DataFrame(list(rows.values())).set_index(["model", "bucket cap (MiB)"])


def exact_parity_table(runs: list[tuple[dict, dict]], ranks: int, backend: str | None = None) -> pd.DataFrame:
    """Per model, the first launch on ``ranks`` ranks against the first on one rank (of ``backend``, where
    the runs hold several): every step's global loss compared; whether they agree within 1e-4 relative,
    and the largest relative difference."""
    runs = matching(runs, backend=backend) if backend else runs
    rows = []
    for model in dict.fromkeys(v["model"] for v, _ in runs):
        one = matching(runs, model=model, ranks=1, launch=0)[0][1]
        many = matching(runs, model=model, ranks=ranks, launch=0)[0][1]
        parity = loss_parity(one, many)
        rows.append({"model": model, "ranks": ranks, "steps compared": parity["steps"],
                     "within 1e-4 (relative)": parity["largest_rel_difference"] < 1e-4,
                     "largest relative difference": f"{parity['largest_rel_difference']:.1e}"})  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def commonest_digit_share(labels: torch.Tensor) -> float:
    """The share of the commonest digit among ``labels``: the accuracy of always answering it."""
    return float(torch.bincount(labels, minlength=10).max()) / len(labels)


def chance_by_seed(train_split, samples: int | None, seeds) -> dict[int, float]:
    """Per seed, ``commonest_digit_share`` of the training clips a launch with that seed takes."""
    return {seed: commonest_digit_share(take(train_split, samples, seed).tensors[1]) for seed in seeds}


def learning_check(
    parity_runs: list[tuple[dict, dict]], rounding_runs: list[tuple[dict, dict]], chance: dict, ranks: int
) -> dict:
    """Do k ranks, and k ranks with compressed gradients, learn what one process learns? Per seed, the
    training accuracy of one rank, of ``ranks`` ranks and of ``ranks`` ranks with each compression, beside
    ``chance`` (the commonest digit's share of that seed's clips), and the largest per-step relative loss
    difference from the uncompressed ``ranks`` ranks.

    Returns ``table``; ``ranks_gap`` and ``rounding_gap`` (the largest accuracy gaps, k ranks against one,
    compressed against not); ``noise`` (the standard deviation over seeds of the one-rank accuracy: a gap
    within about two of them is seed-to-seed variation; NaN with one seed); ``rounding_loss`` (the largest
    relative loss difference compression made); ``learns`` (every seed's one-rank accuracy at least
    ``LEARNS_BY`` above its chance) and ``lowest_margin``.
    """
    rows, ranks_gaps, rounding_gaps, rounding_losses, margins = [], [], [], [], []
    for seed in dict.fromkeys(v["seed"] for v, _ in parity_runs):
        one = matching(parity_runs, seed=seed, ranks=1)[0][1]["result"]
        many = matching(parity_runs, seed=seed, ranks=ranks)[0][1]
        row = {"seed": seed, "commonest digit's share": round(chance[seed], 3),
               "1 rank": round(one["train_accuracy"], 3),
               f"{ranks} ranks": round(many["result"]["train_accuracy"], 3)}  # fmt: skip
        ranks_gaps.append(abs(many["result"]["train_accuracy"] - one["train_accuracy"]))
        margins.append(one["train_accuracy"] - chance[seed])
        for variation, record in matching(rounding_runs, seed=seed):
            accuracy = record["result"]["train_accuracy"]
            row[f"{ranks} ranks, {variation['compression']}"] = round(accuracy, 3)
            rounding_gaps.append(abs(accuracy - many["result"]["train_accuracy"]))
            difference = loss_parity(many, record)["largest_rel_difference"]
            rounding_losses.append(difference)
            row[f"{variation['compression']} loss difference (relative)"] = f"{difference:.1e}"
        rows.append(row)
    one_rank = [row["1 rank"] for row in rows]
    return {
        "table": pd.DataFrame(rows).set_index("seed"),
        "ranks_gap": max(ranks_gaps),
        "rounding_gap": max(rounding_gaps, default=math.nan),
        "rounding_loss": max(rounding_losses, default=math.nan),
        "noise": statistics.stdev(one_rank) if len(one_rank) > 1 else math.nan,
        "learns": min(margins) >= LEARNS_BY,
        "lowest_margin": min(margins),
    }


def dataparallel_against_ddp(
    store, models, train_set, devices: list[str], batch_size: int, ddp_runs, backend: str, ranks: int,
    timings: int, warmup_steps: int, timed_steps: int = 5,
) -> pd.DataFrame:  # fmt: skip
    """Chapter 2's DataParallel (``timings`` timings in this process, seeds 0, 1, ..., each with its own
    model and ``warmup_steps``) against the DDP launches of ``backend`` on ``ranks`` ranks, per model:
    each side's median step, and DDP's speed-up over DataParallel across timings and launches."""
    ddp_runs = matching(ddp_runs, backend=backend)
    rows = []
    for name in models:
        parallel = [
            stored_dataparallel_timing(store, name, train_set, devices=devices, batch_size=batch_size,
                                       timed_steps=timed_steps, warmup_steps=warmup_steps,
                                       seed=seed)["result"]["step_seconds_all"]
            for seed in range(timings)
        ]  # fmt: skip
        distributed = launch_steps(ddp_runs, model=name, ranks=ranks)
        change = launch_speedup(parallel, distributed)
        rows.append({"model": name, "replicas": ranks,
                     "DataParallel step (s)": significant(median_of_medians(parallel)),
                     "DDP step (s)": significant(median_of_medians(distributed)),
                     "DDP against DataParallel": describe_speedup(change)})  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def chapter_bounds(runs: dict[str, list[tuple[dict, dict]]], fit: dict) -> dict[str, dict]:
    """``communication_bound`` of each comparison chapter 3 makes of the all-reduce's settings: every
    compression against none (``runs["compression"]``), every bucket cap against the default 25 MiB, or
    the largest cap swept (``runs["buckets"]``). Keyed by what is compared, in words."""
    bounds = {}
    comparisons = (
        ("compression", "compression", "{} against none"),
        ("buckets", "bucket_cap_mb", "{:g} MiB buckets against {:g} MiB"),
    )
    for section, key, words in comparisons:
        values = list(dict.fromkeys(v[key] for v, _ in runs[section]))
        baseline = None if key == "compression" else (25 if 25 in values else max(values))
        if baseline not in values:
            continue
        for value in values:
            if value != baseline:
                model = runs[section][0][0]["model"]
                what = f"{words.format(value, baseline)}, {model}"
                bounds[what] = communication_bound(runs[section], {key: baseline}, {key: value}, fit)
    return bounds


def learning_sentence(check: dict, ranks: int, model: str) -> str:
    """What the accuracy check says, in one or two sentences, from ``learning_check``'s result."""
    seeds = len(check["table"])
    if not check["learns"]:
        return (
            f"`{model}` got no more than {check['lowest_margin']:.2f} above always answering the commonest "
            "digit in these short runs, too little for accuracy to show anything: the exact loss parity "
            "is the check that counts."
        )
    noise = (
        f"against a seed-to-seed spread of {check['noise']:.3f}"
        if seeds > 1
        else "with one seed, so no spread to hold them against"
    )
    rounding = (
        f", and with compressed gradients by at most {check['rounding_gap']:.3f}"
        if not math.isnan(check["rounding_gap"])
        else ""
    )
    return (
        f"`{model}` learns here, at least {check['lowest_margin']:.2f} above always answering the commonest "
        f"digit. Over {seeds} seed(s) its training accuracy on {ranks} ranks differs from one process's "
        f"by at most {check['ranks_gap']:.3f}{rounding}, {noise}."
    )


def warmup_table(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """Whether the warm-up was long enough, per model and rank count: over the launches, the median of the
    first step, of the other warm-up steps and of the timed steps (each launch's median first), from every
    step the launches recorded."""
    rows = []
    keys = dict.fromkeys((v["model"], v["backend"], v["ranks"]) for v, _ in runs)
    for model, backend, ranks in keys:
        firsts, warming, timed = [], [], []
        for _, rec in matching(runs, model=model, backend=backend, ranks=ranks):
            steps = [s for row in rec["result"]["history"] for s in row.get("step_seconds", [])]
            warmup = rec["result"]["warmup_steps"]
            firsts.append(steps[0])
            warming += [statistics.median(steps[1:warmup])] if warmup > 1 else []
            timed.append(statistics.median(steps[warmup:]))
        rows.append({"model": model, "backend": backend, "ranks": ranks,
                     "first step (s)": significant(statistics.median(firsts)),
                     "other warm-up steps (s)": significant(statistics.median(warming)) if warming else "–",
                     "timed steps (s)": significant(statistics.median(timed))})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "backend", "ranks"])
