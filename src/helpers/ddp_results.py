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
from helpers.data import SPLIT_SIZES, take
from helpers.ddp import launch_steps, loss_parity, matching, median_of_medians, significant
from helpers.stats import MATTERS, describe_speedup, launch_speedup

LEARNS_BY = 0.10  # training accuracy this far above the commonest digit's share: the model has learned


def ms(seconds: float) -> str:
    """Seconds as milliseconds to three significant digits, as chapter 3's tables and sentences give them."""
    return significant(seconds * 1e3)


def listed(items) -> str:
    """``a, b and c``: items in a sentence."""
    words = [str(item) for item in items]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


BACKEND_NAMES = {"gloo": "Gloo", "nccl": "NCCL", "mpi": "MPI"}


def relative_difference(value: float) -> str:
    """A relative loss difference in a table: ``1.2e-06``, or ``0 (identical)`` where nothing differs."""
    return "0 (identical)" if value == 0 else f"{value:.1e}"


def interval_note(launches: int) -> str:
    """What the 95 % bootstrap interval of ``stats.launch_speedup`` is with ``launches`` a side, in words.
    With three, the median of three draws is the smallest launch with probability 7/27 (two or three of
    the draws are it) and the largest as often, so the smallest ratio of the sides' medians turns up in
    (7/27)² ≈ 6.7 % of the resamples, more than the 2.5 % each end cuts off: the interval's ends are
    exactly the smallest and the largest ratio of one side's launches to the other's."""
    if launches == 3:
        return (
            "(with three launches a side, exactly the range of the ratios of one side's launches to the "
            "other's)"
        )
    return "(percentile method, 4,000 resamples of the launches)"


def allreduce_seconds(runs: list[tuple[dict, dict]], exposed: bool = False, **match) -> float:
    """The all-reduce's seconds per timed step, timed in the hook while some bucket is in flight
    (``ddp.in_flight_seconds``; ``exposed``: only what follows the last hand-over, which no computation
    hides): the median over the matching launches of each launch's median (NaN where nothing was timed)."""
    key = "exposed_allreduce_seconds_all" if exposed else "allreduce_seconds_all"
    launches = [r["result"].get(key) for _, r in matching(runs, **match)]
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
    """Per model, backend and rank count: threads per rank, launches, the median step and all-reduce (one
    rank's too where the hook timed one: Gloo with CUDA tensors copies the buckets through host memory even
    with no peer), and the speed-up over one rank (the one-rank launches, on whichever backend ran them)
    across launches. Also returns the comparisons, keyed by (model, backend, ranks)."""
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
                     "all-reduce (ms)": ms(allreduce),
                     "against one rank": text})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "backend", "ranks"]), changes


def modelled_allreduce_seconds(bucket_bytes: list[int], world_size: int, fit: dict) -> float:
    """The α-β time (chapter 4's ring all-reduce, ``fit``'s α and β) of all-reducing each of these buckets,
    one after the other, on ``world_size`` ranks."""
    alpha, beta = fit["alpha_seconds"], fit["seconds_per_byte"]
    return sum(ring_all_reduce_seconds(nbytes, world_size, alpha, beta) for nbytes in bucket_bytes)


def larger_all_reduce(hook_seconds: float, model_seconds: float) -> float:
    """The all-reduce a bound rests on: the larger of the hook's timing and the α-β model's (NaN ignored),
    so that neither a hook that misses part of the work nor a model that misses an overhead makes the
    bound too small."""
    return max(value for value in (hook_seconds, model_seconds) if not math.isnan(value))


def communication_bound(runs: list[tuple[dict, dict]], baseline: dict, candidate: dict, fit: dict) -> dict:
    """What changing the all-reduce's settings from ``baseline`` to ``candidate`` did to the step, beside
    the most it can do.

    A step holds the part of its all-reduce that no computation hides: between none and all of it. So a
    setting of the all-reduce alone (bucket size, compression) can save at most the baseline's whole
    all-reduce (``most_saved``) and lose at most the candidate's (``most_lost``), each
    ``larger_all_reduce`` of the hook's timing (compression's conversions included) and the α-β model's.
    When nothing overlaps (one bucket on both sides, handed over when the backward pass ends) the step
    changes by the difference of the two all-reduces, so the bounds are the larger of the hook's and the
    model's difference each way (``expected_seconds``: the model's). ``saved_seconds`` is the measured saving
    per step, baseline median minus candidate median (negative: slower), with ``saved_low`` to
    ``saved_high`` from the speed-up's interval at the baseline's median. ``compression`` names the
    candidate's compression (None: the comparison is of buckets). ``waits``, per side: whether its bound is
    the hook's time in flight although more of that time came before the backward pass's last gradient than
    the α-β model gives the whole all-reduce: buckets handed over early that wait for the other ranks'
    backward passes, so the bound is loose (``waiting``).
    """
    change = compare(runs, baseline, candidate)
    records = [matching(runs, **side)[0][1]["result"] for side in (baseline, candidate)]
    ranks = records[0]["world_size"]
    model = [modelled_allreduce_seconds(r["bucket_bytes"], ranks, fit) for r in records]
    hook = [allreduce_seconds(runs, **side) for side in (baseline, candidate)]
    exposed = [allreduce_seconds(runs, exposed=True, **side) for side in (baseline, candidate)]
    base = change["baseline_seconds"]
    buckets = [len(r["bucket_bytes"]) for r in records]
    most_saved, most_lost = larger_all_reduce(hook[0], model[0]), larger_all_reduce(hook[1], model[1])
    waits = [waiting(h, e, m) for h, e, m in zip(hook, exposed, model, strict=True)]
    if buckets == [1, 1]:  # nothing overlaps: only the difference of the two all-reduces can show
        differences = [a - b for a, b in (hook, model) if not (math.isnan(a) or math.isnan(b))]
        most_saved = max([0.0, *differences])
        most_lost = max([0.0, *(-difference for difference in differences)])
        waits = [False, False]
    return {
        "change": change,
        "saved_seconds": base - change["candidate_seconds"],
        "saved_low": base * (1 - 1 / change["low"]),
        "saved_high": base * (1 - 1 / change["high"]),
        "hook_seconds": hook,
        "exposed_seconds": exposed,
        "model_seconds": model,
        "buckets": buckets,
        "expected_seconds": model[0] - model[1],
        "most_saved": most_saved,
        "most_lost": most_lost,
        "waits": waits,
        "compression": candidate.get("compression"),
    }


def waiting(hook: float, exposed: float, model: float) -> bool:
    """Whether the hook's time in flight is mostly waiting, not communication: longer than the α-β model's
    all-reduce (beyond ``stats.MATTERS``), more of it before the backward pass's last gradient than the
    model gives the whole all-reduce, and no more than the model's after it (an all-reduce as slow as the
    hook says would show after the last gradient too). A bucket handed over early is in flight until every
    rank has handed it over, so this is the other ranks' backward passes, which take turns where the ranks
    share a device."""
    if math.isnan(hook) or math.isnan(exposed):
        return False
    return hook > model * (1 + MATTERS) and hook - exposed > model >= exposed


def _arrow(values) -> str:
    return " → ".join(map(ms, values))


def measured_saving(bound: dict) -> str:
    """The measured saving per step as an interval, the interval first: ``between 86.8 ms lost and 11.3 ms
    saved``, ``between 10.0 and 30.0 ms saved``, ``between 5.00 and 9.00 ms lost``."""
    low, high = bound["saved_low"], bound["saved_high"]
    if low >= 0:
        return f"between {ms(low)} and {ms(high)} ms saved"
    if high <= 0:
        return f"between {ms(-high)} and {ms(-low)} ms lost"
    return f"between {ms(-low)} ms lost and {ms(high)} ms saved"


LOOSE = "the hook's time in flight, mostly waiting for backward passes, not communication"


def bound_limits(bound: dict) -> str:
    """The most a setting can move a step, both ways: ``at most 50.0 ms saved or 30.0 ms lost``; a side
    whose bound is mostly waiting (``communication_bound``'s ``waits``) says so, as a loose bound."""
    saved, lost = (
        f"{ms(bound[key])} ms {word}" for key, word in (("most_saved", "saved"), ("most_lost", "lost"))
    )
    waits = bound.get("waits", [False, False])
    saved += f" ({LOOSE}: a loose bound)" if waits[0] else ""
    lost += f" ({LOOSE}: a loose bound)" if waits[1] else ""
    return f"at most {saved} or {lost}"


def _bound_cell(bound: dict, key: str, side: int) -> str:
    """A bound in the table, labelled where it is the hook's time in flight and mostly waiting."""
    loose = bound.get("waits", [False, False])[side]
    return ms(bound[key]) + (" (hook's time in flight: mostly waiting, not communication)" if loose else "")


def bound_table(bounds: dict[str, dict]) -> pd.DataFrame:
    """``communication_bound`` results side by side, one column per comparison, in milliseconds per step."""
    rows = {
        "buckets per step": lambda b: " → ".join(map(str, b["buckets"])),
        "all-reduce in flight, timed in the hook (ms)": lambda b: _arrow(b["hook_seconds"]),
        "of it after backward's last gradient (ms)": lambda b: _arrow(b["exposed_seconds"]),
        "all-reduce, α-β model (ms)": lambda b: _arrow(b["model_seconds"]),
        "α-β model's saving if nothing overlaps (ms)": lambda b: ms(b["expected_seconds"]),
        "most it can save (ms)": lambda b: _bound_cell(b, "most_saved", 0),
        "most it can cost (ms)": lambda b: _bound_cell(b, "most_lost", 1),
        "measured saving per step, interval (ms)": lambda b: f"{ms(b['saved_low'])} to {ms(b['saved_high'])}",
        "measured saving, medians (ms)": lambda b: ms(b["saved_seconds"]),
        "step time (s)": lambda b: (
            f"{significant(b['change']['baseline_seconds'])} → "
            f"{significant(b['change']['candidate_seconds'])}"
        ),
        "verdict": lambda b: describe_speedup(b["change"]),
    }
    return pd.DataFrame({name: [show(b) for show in rows.values()] for name, b in bounds.items()},
                        index=list(rows))  # fmt: skip


def bound_summary(what: str, bound: dict) -> str:
    """One sentence for the answer: the verdict, the measured saving as its interval (a point estimate only
    where the verdict is resolved) and the most the setting can move the step."""
    change, saved = bound["change"], bound["saved_seconds"]
    if change["verdict"] in ("faster", "slower"):
        point = f"{ms(saved)} ms saved" if saved >= 0 else f"{ms(-saved)} ms lost"
        measured = f"{point} per step ({measured_saving(bound)})"
    else:
        measured = f"{measured_saving(bound)} per step"
    limits = f"it can move a step by {bound_limits(bound)}"
    if bound["saved_low"] > bound["most_saved"] or bound["saved_high"] < -bound["most_lost"]:
        return (
            f"{what}: {describe_speedup(change)}, {measured}; {limits}, so that difference is not its doing."
        )
    return f"{what}: {describe_speedup(change)}, {measured}; {limits}."


def bound_sentence(what: str, bound: dict, shared: str = "") -> str:
    """``bound_summary``, then the all-reduce it changes before and after, in the hook and in the α-β model,
    and what the two say together: a compression that the model has shortening the all-reduce while the
    hook's time (which holds the conversions) did not shorten, or lengthened; a bound that is mostly the
    wait for backward passes (``waiting``: ``shared`` names what the ranks' backward passes take turns on,
    as ``ddp_placement.Placement.shared`` says it); an interval of the launches wider than anything the
    setting can change."""
    hook, exposed, model = bound["hook_seconds"], bound["exposed_seconds"], bound["model_seconds"]
    name = bound.get("compression")
    inside = f", the conversions to and from {name} included" if name else ""
    sentences = [
        bound_summary(what, bound),
        f"The all-reduce it changes, timed in the hook{inside}, went from {ms(hook[0])} to "
        f"{ms(hook[1])} ms per step ({ms(exposed[0])} to {ms(exposed[1])} ms of it after the backward "
        f"pass's last gradient); the α-β model has {ms(model[0])} to {ms(model[1])} ms.",
    ]
    model_shorter = model[1] < model[0] / (1 + MATTERS)
    if name and model_shorter and hook[1] > hook[0] * (1 + MATTERS):
        sentences.append(
            f"So {name} lengthened the hook-timed all-reduce that its fewer bytes shorten in the model: the "
            "conversions cost more than the bytes saved."
        )
    elif name and model_shorter and hook[1] >= hook[0] / (1 + MATTERS):
        sentences.append(
            f"So {name} did not shorten the hook-timed all-reduce that its fewer bytes shorten in the model: "
            "here the conversions took about what the bytes saved."
        )
    for side, waits in enumerate(bound.get("waits", [False, False])):
        if waits:
            turns = " of the other ranks"
            if shared:
                turns = f" that {'share' if 'cores' in shared else 'take turns on'} {shared} here"
            sentences.append(
                f"Of the {ms(hook[side])} ms in flight {('before', 'after')[side]} the change, only "
                f"{ms(exposed[side])} ms came after the backward pass's last gradient, and the α-β model "
                f"has {ms(model[side])} ms for the whole all-reduce: most of it is buckets handed over "
                f"early waiting for backward passes{turns}, not communication, so the {ms(hook[side])} ms "
                "bound is a loose one."
            )
    if bound["saved_low"] < -bound["most_lost"] and bound["saved_high"] > bound["most_saved"]:
        sentences.append(
            "The launches' interval reaches beyond what the setting can change both ways: their spread is "
            "larger than anything this setting could do, so they cannot show its effect."
        )
    return " ".join(sentences)


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


def _parities(runs: list[tuple[dict, dict]], ranks: int, backend: str | None) -> dict[str, dict]:
    """Per model, ``ddp.loss_parity`` of the first launch on ``ranks`` ranks against the first on one."""
    runs = matching(runs, backend=backend) if backend else runs
    return {
        model: loss_parity(matching(runs, model=model, ranks=1, launch=0)[0][1],
                           matching(runs, model=model, ranks=ranks, launch=0)[0][1])
        for model in dict.fromkeys(v["model"] for v, _ in runs)
    }  # fmt: skip


PARITY_THRESHOLD = 1e-4  # relative: float32 rounding carried over a few dozen steps stays far below it


def exact_parity_table(runs: list[tuple[dict, dict]], ranks: int, backend: str | None = None) -> pd.DataFrame:
    """Per model, the first launch on ``ranks`` ranks against the first on one rank (of ``backend``, where
    the runs hold several): every step's global loss compared; whether they agree within
    ``PARITY_THRESHOLD`` relative, and the largest relative difference (``relative_difference``)."""
    rows = [
        {"model": model, "ranks": ranks, "steps compared": parity["steps"],
         "within 1e-4 (relative)": parity["largest_rel_difference"] < PARITY_THRESHOLD,
         "largest relative difference": relative_difference(parity["largest_rel_difference"])}
        for model, parity in _parities(runs, ranks, backend).items()
    ]  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def parity_sentence(runs: list[tuple[dict, dict]], ranks: int, backend: str | None = None) -> str:
    """One sentence on how closely ``ranks`` ranks follow one process's loss, from the largest relative
    difference over the models: exactly, within float32 rounding (below ``PARITY_THRESHOLD``), or not."""
    worst = max(p["largest_rel_difference"] for p in _parities(runs, ranks, backend).values())
    if worst == 0:
        return f"{ranks} ranks reproduce one process's loss exactly, at every step."
    if worst < PARITY_THRESHOLD:
        return (
            f"{ranks} ranks follow one process's loss at every step, within {worst:.1e} relative: float32 "
            "rounding of sums taken in another order."
        )
    return (
        f"{ranks} ranks drift from one process's loss by up to {worst:.1e} relative, more than float32 "
        f"rounding explains (below {PARITY_THRESHOLD:g}): they do not compute the same steps."
    )


def commonest_digit_share(labels: torch.Tensor) -> float:
    """The share of the commonest digit among ``labels``: the accuracy of always answering it."""
    return float(torch.bincount(labels, minlength=10).max()) / len(labels)


def chance_by_seed(train_split, samples: int | None, seeds) -> dict[int, float]:
    """Per seed, ``commonest_digit_share`` of the training clips a launch with that seed takes."""
    return {seed: commonest_digit_share(take(train_split, samples, seed).tensors[1]) for seed in seeds}


def _percent(share: float) -> str:
    return f"{share * 100:.1f}"


def learning_check(
    parity_runs: list[tuple[dict, dict]], rounding_runs: list[tuple[dict, dict]], chance: dict, ranks: int
) -> dict:
    """Do k ranks, and k ranks with compressed gradients, learn what one process learns? Per seed, the
    training accuracy (%) of one rank, of ``ranks`` ranks and of ``ranks`` ranks with each compression,
    beside ``chance`` (the commonest digit's share of that seed's clips), and the largest per-step relative
    loss difference from the uncompressed ``ranks`` ranks.

    Returns ``table``; ``ranks_gap`` and ``rounding_gap`` (the largest accuracy gaps, k ranks against one,
    compressed against not); ``noise`` (the standard deviation over seeds of the one-rank accuracy: a gap
    within about two of them is seed-to-seed variation; NaN with one seed); ``rounding_loss`` (the largest
    relative loss difference compression made); ``learns`` (every seed's one-rank accuracy at least
    ``LEARNS_BY`` above its chance), ``margins`` (per seed, one rank's accuracy less its chance),
    ``lowest_margin``, ``highest_margin`` and ``clips`` (the training clips each launch scored: accuracy
    moves in steps of one clip in that many).
    """
    rows, ranks_gaps, rounding_gaps, rounding_losses, one_rank = [], [], [], [], []
    margins: dict[int, float] = {}
    clips = None
    for seed in dict.fromkeys(v["seed"] for v, _ in parity_runs):
        one = matching(parity_runs, seed=seed, ranks=1)[0][1]["result"]
        many = matching(parity_runs, seed=seed, ranks=ranks)[0][1]
        clips = many["config"].get("train_samples") or SPLIT_SIZES["train"]
        row = {"seed": seed, "commonest digit's share (%)": _percent(chance[seed]),
               "accuracy, 1 rank (%)": _percent(one["train_accuracy"]),
               f"accuracy, {ranks} ranks (%)": _percent(many["result"]["train_accuracy"])}  # fmt: skip
        one_rank.append(one["train_accuracy"])
        ranks_gaps.append(abs(many["result"]["train_accuracy"] - one["train_accuracy"]))
        margins[seed] = one["train_accuracy"] - chance[seed]
        for variation, record in matching(rounding_runs, seed=seed):
            accuracy = record["result"]["train_accuracy"]
            row[f"accuracy, {ranks} ranks, {variation['compression']} (%)"] = _percent(accuracy)
            rounding_gaps.append(abs(accuracy - many["result"]["train_accuracy"]))
            difference = loss_parity(many, record)["largest_rel_difference"]
            rounding_losses.append(difference)
            row[f"{variation['compression']} loss difference (relative)"] = relative_difference(difference)
        rows.append(row)
    return {
        "table": pd.DataFrame(rows).set_index("seed"),
        "ranks_gap": max(ranks_gaps),
        "rounding_gap": max(rounding_gaps, default=math.nan),
        "rounding_loss": max(rounding_losses, default=math.nan),
        "noise": statistics.stdev(one_rank) if len(one_rank) > 1 else math.nan,
        "learns": min(margins.values()) >= LEARNS_BY,
        "margins": margins,
        "lowest_margin": min(margins.values()),
        "highest_margin": max(margins.values()),
        "clips": clips,
    }


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


def _points_at_least(share: float) -> str:
    """Percentage points, rounded down to one decimal: what "at least" may say of ``share``."""
    return f"{math.floor(round(share * 1000, 6)) / 10:.1f}"


def learning_sentence(check: dict, ranks: int, model: str) -> str:
    """What the accuracy check says, in one or two sentences, from ``learning_check``'s result: how far above
    the commonest digit one rank got (every seed's margin, the lowest below ``LEARNS_BY`` where the model
    did not learn), gaps in percentage points and in clips, "identical" where there is none, and the step
    one clip makes."""
    seeds, clips = len(check["table"]), check["clips"]
    if not check["learns"]:
        margins = check.get("margins") or {None: check["lowest_margin"]}
        lowest = min(margins, key=margins.get)
        points = {seed: significant(margin * 100) for seed, margin in margins.items()}
        got, each, short = points[lowest], "", points[lowest]
        if len(margins) > 1:
            got = f"between {points[lowest]} and {significant(max(margins.values()) * 100)}"
            each = " (" + ", ".join(f"seed {seed} {points[seed]}" for seed in margins) + ")"
            short = f"seed {lowest}'s {points[lowest]}"
        above = "above"
        if max(margins.values()) < 0:  # every seed below chance: say how far below
            above, got = "below", got.replace("-", "")
        return (
            f"`{model}` got {got} percentage points {above} always answering the commonest digit in these "
            f"short runs{each}; {short} is under the {LEARNS_BY * 100:.0f} that this check asks of a model "
            "that learns, too little for accuracy to show anything: the step-by-step loss parity is the "
            "check that counts."
        )

    def gap(value: float, unit: str) -> str:
        return f"{value * 100:.1f} {unit} ({round(value * clips)} of {clips} clips)"

    on_seeds = f"on all {seeds} seeds" if seeds > 1 else "on its one seed"
    if check["ranks_gap"] == 0:
        said = f"Its training accuracy on {ranks} ranks is identical to one process's {on_seeds}"
    else:
        said = (
            f"Over {seeds} seed(s) its training accuracy on {ranks} ranks differs from one process's by at "
            f"most {gap(check['ranks_gap'], 'percentage points')}"
        )
    if check["rounding_gap"] == 0:
        said += ", and identical with compressed gradients"
    elif not math.isnan(check["rounding_gap"]):
        said += f", and with compressed gradients by at most {gap(check['rounding_gap'], 'points')}"
    differs = check["ranks_gap"] > 0 or check["rounding_gap"] > 0
    if differs and seeds > 1:
        said += f", against a seed-to-seed spread of {check['noise'] * 100:.1f} points"
    return (
        f"`{model}` fits its {clips} training clips here, at least "
        f"{_points_at_least(check['lowest_margin'])} percentage points above always answering the commonest "
        f"digit (what it fits, not what it generalises; the per-step loss parity is the stricter check). "
        f"{said} ({clips} clips: accuracy moves in steps of {100 / clips:.2g} %)."
    )


def warmup_reading(warming: float | None, timed: float, early: float, late: float) -> str:
    """What the steps of a configuration say about its warm-up (medians over its launches of the other
    warm-up steps, the timed steps, and the first and second half of the timed steps): still getting
    faster in the timed steps (the warm-up was too short), timed steps slower than the warm-up (the
    machine's load drifted), or settled. Differences within ``stats.MATTERS`` count as none."""
    if early > late * (1 + MATTERS):
        return "still getting faster in the timed steps: the warm-up was too short"
    if warming is not None and timed > warming * (1 + MATTERS):
        return "timed steps slower than the warm-up: the machine's load drifted, not a short warm-up"
    return "settled before the timed steps"


def warmup_table(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """Whether the warm-up was long enough, per model and rank count: over the launches, the median of the
    first step, of the other warm-up steps and of the timed steps (each launch's median first), in ms to
    three significant figures, and ``warmup_reading`` of them, from every step the launches recorded."""
    rows = []
    keys = dict.fromkeys((v["model"], v["backend"], v["ranks"]) for v, _ in runs)
    for model, backend, ranks in keys:
        firsts, warming, timed, early, late = [], [], [], [], []
        for _, rec in matching(runs, model=model, backend=backend, ranks=ranks):
            steps = [s for row in rec["result"]["history"] for s in row.get("step_seconds", [])]
            warmup = rec["result"]["warmup_steps"]
            firsts.append(steps[0])
            warming += [statistics.median(steps[1:warmup])] if warmup > 1 else []
            measured = steps[warmup:]
            half = len(measured) // 2
            timed.append(statistics.median(measured))
            early.append(statistics.median(measured[:half] or measured))
            late.append(statistics.median(measured[half:]))
        warm = statistics.median(warming) if warming else None
        reading = warmup_reading(
            warm, statistics.median(timed), statistics.median(early), statistics.median(late)
        )
        rows.append({"model": model, "backend": backend, "ranks": ranks,
                     "first step (ms)": ms(statistics.median(firsts)),
                     "other warm-up steps (ms)": ms(warm) if warm is not None else "–",
                     "timed steps (ms)": ms(statistics.median(timed)), "reading": reading})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "backend", "ranks"])


def fit_source(records: list[dict], fit: dict, backend: str, device: str) -> str:
    """Which ``collective_benchmark`` record the α-β ``fit`` (``timemodel.all_reduce_alpha_beta``, which
    names it: ``record_key``) came from, in words: chapter 4's benchmark, or the all-reduce alone
    benchmarked because chapter 4 had not run into this results folder; with its message sizes and
    iterations."""
    record = next((r for r in records if r["key"] == fit.get("record_key")), None)
    if record is None:
        return "a fit from no record among these"
    config = record["config"]
    sizes = sum(
        1 for row in record["result"]["rows"]
        if row["operation"] == "all_reduce" and row["status"] == "ok" and row["world_size"] == 2
    )  # fmt: skip
    what = (
        "the all-reduce alone, benchmarked because chapter 4 had not run into this results folder"
        if config.get("operations") == ["all_reduce"]
        else "chapter 4's benchmark"
    )
    return (
        f"{what} ({backend} on {device}, two ranks, {sizes} message sizes, each size's lower quartile of "
        f"{config['iterations']} iterations)"
    )
