"""What chapter 3 reads from its DDP launches: comparisons across launches, whether k ranks learn what one
process learns, and each table as a reader reads it (human column names with units, one rounding per
column); the most the all-reduce's settings can change a step is ``helpers.ddp_bounds``.

Every timing comparison rests on independent launches (``ddp.run_sweeps``): each launch contributes its
median timed step, and ``stats.launch_speedup`` compares the launch medians with a bootstrap interval.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd
import torch

from helpers.collectives import link_reading
from helpers.collectives.runs import LINK_FIT_WORLD_SIZE, alpha_beta_fits, benchmark_frames
from helpers.collectives.tables import beyond_the_fit
from helpers.data import SPLIT_SIZES, take
from helpers.ddp import launch_steps, loss_parity, matching, median_of_medians
from helpers.launch import BACKEND_NAMES, placement_words
from helpers.stats import (
    MATTERS,
    describe_speedup,
    launch_speedup,
    ms,
    plural,
    scientific,
    signed,
    significant,
    whole_percent,
    within_matters,
)

LEARNS_BY = 0.10  # training accuracy this far above the commonest digit's share: the model has learned


def below_matters(change: dict) -> bool:
    """A resolved verdict ("faster" or "slower") whose whole interval lies within ±``stats.MATTERS`` of 1
    (``stats.within_matters``): a difference the launches resolve, but smaller than one that matters."""
    return change["verdict"] in ("faster", "slower") and within_matters(change["low"], change["high"])


def describe_change(change: dict, unit: str = "launch", brief: bool = False) -> str:
    """``stats.describe_speedup`` for a sentence, with the size of a resolved difference inside
    ±``stats.MATTERS``: ``faster by under 10 %, 1.02× (1.01–1.03×, 3 launches each), a 2 % difference``;
    ``brief``, for an answer box: ``faster by under 10 %, 1.02×``."""
    said = describe_speedup(change, unit=unit, brief=brief)
    if below_matters(change) and not brief:
        said += f", a {significant(abs(change['speedup'] - 1) * 100, 1)} % difference"
    return said


def in_ms(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every column of seconds ("step time (s)", three significant digits as text) in
    milliseconds ("step time (ms)"), as chapter 3's other tables give them; other columns as they were."""
    renamed = {}
    for column in table.columns:
        if isinstance(column, str) and column.endswith(" (s)"):
            table = table.assign(
                **{column: [ms(float(str(v).replace(",", ""))) if v not in ("", "–") else v
                            for v in table[column]]}
            )  # fmt: skip
            renamed[column] = column[: -len(" (s)")] + " (ms)"
    return table.rename(columns=renamed)


def relative_difference(value: float) -> str:
    """A relative loss difference in a table: ``1.2 × 10⁻⁶``, or ``0 (identical)`` where nothing differs."""
    return "0 (identical)" if value == 0 else scientific(value)


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


def interval_test(launches: int) -> str:
    """What an interval of ``stats.launch_speedup`` that excludes 1 amounts to with ``launches`` a side, as
    a sentence: with three, the interval is the range of the 9 ratios of one side's launches to the
    other's (``interval_note``), so excluding 1 means every launch of one side beat every launch of the
    other. Under no difference the 6 launches' order is random and one given side takes the 3 fastest
    places with probability 1/C(6, 3) = 1/20, either side 1/10: an exact rank test (Mann-Whitney's U = 0)
    at p = 1/10 two-sided, since a verdict may go either way; not a 95 % interval. Empty for other counts,
    whose interval is the bootstrap's."""
    if launches != 3:
        return ""
    return (
        "With three launches a side, an interval that excludes 1 has all 9 ratios of one side's launches to "
        "the other's on one side of 1: every launch of one configuration beat every launch of the other, "
        "which two configurations of the same speed do in a given direction with probability 1/20, and in "
        "either direction, as a verdict may go, with probability 1/10. That is an exact rank test (p = "
        "1/10, two-sided), not a 95 % interval."
    )


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
    """A varied setting as a figure's legend says it: "2 ranks", "none" (no compression), "Gloo"."""
    if key == "ranks":
        return f"{value} rank{'' if value == 1 else 's'}"
    if key == "backend":
        return BACKEND_NAMES.get(value, str(value))
    return "none" if value is None else str(value)


def launch_frame(runs: list[tuple[dict, dict]], by: str, setup: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per launch: the variation's ``by`` setting, its ``setup`` settings in words ("Gloo, 2
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
    with no peer), in ms, and the speed-up over one rank (the one-rank launches of the same backend, else of
    whichever backend ran them) across launches; where NCCL and Gloo both ran a rank count, NCCL's speed-up
    over Gloo too
    (``backend_changes``). Also returns the comparisons against one rank, keyed by (model, backend,
    ranks)."""
    rows, changes = [], {}
    against_gloo = backend_changes(runs)
    keys = dict.fromkeys((v["model"], v["backend"], v["ranks"]) for v, _ in runs)
    for model, backend, ranks in keys:
        setup = {"model": model, "backend": backend}
        mine = matching(runs, **setup, ranks=ranks)
        ones = [v for v, _ in runs if v["model"] == model and v["ranks"] == 1]  # its own backend's first
        one = next((v for v in ones if v["backend"] == backend), ones[0] if ones else None)
        text = ""
        if ranks != 1 and one is not None:
            baseline = {"model": model, "backend": one["backend"], "ranks": 1}
            changes[model, backend, ranks] = compare(runs, baseline, {**setup, "ranks": ranks})
            text = describe_speedup(changes[model, backend, ranks])
        allreduce = allreduce_seconds(runs, **setup, ranks=ranks)
        rows.append({"model": model, "backend": backend, "ranks": ranks,
                     "threads per rank": mine[0][1]["result"]["threads_per_rank"], "launches": len(mine),
                     "step time (ms)": ms(median_of_medians(launch_steps(mine))),
                     "all-reduce (ms)": ms(allreduce),
                     "against one rank": text})  # fmt: skip
        if against_gloo:
            change = against_gloo.get((model, ranks)) if backend == "nccl" else None
            rows[-1]["NCCL against Gloo"] = describe_speedup(change) if change else ""
    return pd.DataFrame(rows).set_index(["model", "backend", "ranks"]), changes


def backend_changes(runs: list[tuple[dict, dict]]) -> dict[tuple[str, int], dict]:
    """NCCL's speed-up over Gloo (``compare``), per (model, ranks) where both backends ran that many ranks:
    the chapter title's comparison, where a GPU per rank lets NCCL run (on one GPU, one rank each: what
    each backend's all-reduce costs with no peer)."""
    ran = dict.fromkeys((v["model"], v["backend"], v["ranks"]) for v, _ in runs)
    return {
        (model, ranks): compare(runs, {"model": model, "backend": "gloo", "ranks": ranks},
                                {"model": model, "backend": "nccl", "ranks": ranks})
        for model, backend, ranks in ran
        if backend == "nccl" and (model, "gloo", ranks) in ran
    }  # fmt: skip


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
    within = f"within {scientific(PARITY_THRESHOLD, 1)} (relative)"
    rows = [
        {"model": model, "ranks": ranks, "steps compared": parity["steps"],
         within: parity["largest_rel_difference"] < PARITY_THRESHOLD,
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
            f"{ranks} ranks follow one process's loss at every step, within {scientific(worst)} relative: "
            "float32 rounding of sums taken in another order."
        )
    return (
        f"{ranks} ranks drift from one process's loss by up to {scientific(worst)} relative, more than "
        f"float32 rounding explains (below {scientific(PARITY_THRESHOLD, 1)}): they do not compute the same "
        "steps."
    )


def commonest_digit_share(labels: torch.Tensor) -> float:
    """The share of the commonest digit among ``labels``: the accuracy of always answering it."""
    return float(torch.bincount(labels, minlength=10).max()) / len(labels)


def chance_by_seed(train_split, samples: int | None, seeds) -> dict[int, float]:
    """Per seed, ``commonest_digit_share`` of the training clips a launch with that seed takes."""
    return {seed: commonest_digit_share(take(train_split, samples, seed).tensors[1]) for seed in seeds}


def _percent(share: float) -> str:
    """A share in per cent to two decimals: with 2,700 clips one clip is 0.037 points, so the table shows
    the difference that decides whether a model learned."""
    return f"{share * 100:.2f}"


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
    relative loss difference compression made); ``rounding`` (per compression, ``gaps``: per seed its
    accuracy less the uncompressed k ranks', and ``loss``: its largest relative loss difference);
    ``learns`` (every seed's one-rank accuracy at least ``LEARNS_BY`` above its chance), ``margins`` (per
    seed, one rank's accuracy less its chance), ``lowest_margin``, ``highest_margin`` and ``clips`` (the
    training clips each launch scored: accuracy moves in steps of one clip in that many).
    """
    rows, ranks_gaps, rounding_gaps, rounding_losses, one_rank = [], [], [], [], []
    margins: dict[int, float] = {}
    rounding: dict[str, dict] = {}
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
            entry = rounding.setdefault(variation["compression"], {"gaps": {}, "loss": 0.0})
            entry["gaps"][seed] = accuracy - many["result"]["train_accuracy"]
            entry["loss"] = max(entry["loss"], difference)
            row[f"{variation['compression']} loss difference (relative)"] = relative_difference(difference)
        rows.append(row)
    return {
        "table": pd.DataFrame(rows).set_index("seed"),
        "ranks_gap": max(ranks_gaps),
        "rounding_gap": max(rounding_gaps, default=math.nan),
        "rounding_loss": max(rounding_losses, default=math.nan),
        "rounding": rounding,
        "noise": statistics.stdev(one_rank) if len(one_rank) > 1 else math.nan,
        "learns": min(margins.values()) >= LEARNS_BY,
        "margins": margins,
        "lowest_margin": min(margins.values()),
        "highest_margin": max(margins.values()),
        "clips": clips,
    }


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
        missing = math.ceil(round((LEARNS_BY - margins[lowest]) * clips, 6)) if clips else 0
        # short of the threshold by a clip or three, and by a tenth of its clips at most: it turns on them
        asked = f"the {LEARNS_BY * 100:.0f} points this chapter asks of a model that learns"
        if 0 < missing <= min(3, max(1, LEARNS_BY * clips / 10)):
            count = ("one", "two", "three")[missing - 1]
            return (
                f"`{model}` got {got} percentage points above always answering the commonest digit in these "
                f"short runs{each}; {short} falls {count} {plural(missing, 'clip')} of the {clips:,} short "
                f"of {asked} (a clip is {100 / clips:.2g} points): a threshold that turns on so few clips "
                "settles nothing, and the step-by-step loss parity is the check that counts."
            )
        if margins[lowest] < 0:
            short = f"{short.replace('-', '')} below it"
        return (
            f"`{model}` got {got} percentage points {above} always answering the commonest digit in these "
            f"short runs{each}; {short} falls short of {asked}, too little for accuracy to show anything: "
            "the step-by-step loss parity is the check that counts."
        )

    def gap(value: float, unit: str) -> str:
        return f"{value * 100:.1f} {unit} ({round(value * clips)} of {clips} clips)"

    on_seeds = f"on all {seeds} seeds" if seeds > 1 else "on its one seed"
    if check["ranks_gap"] == 0:
        said = f"Its training accuracy on {ranks} ranks is identical to one process's {on_seeds}"
    else:
        said = (
            f"Over {seeds} {plural(seeds, 'seed')} its training accuracy on {ranks} ranks differs from one "
            "process's by at "
            f"most {gap(check['ranks_gap'], 'percentage points')}"
        )
    if check["ranks_gap"] > 0 and seeds > 1:
        said += f", against a seed-to-seed spread of {check['noise'] * 100:.1f} points"
    return (
        f"`{model}` fits its {clips} training clips here, at least "
        f"{_points_at_least(check['lowest_margin'])} percentage points above always answering the commonest "
        f"digit (what it fits, not what it generalises; the per-step loss parity is the stricter check). "
        f"{said} ({clips} clips: accuracy moves in steps of {100 / clips:.2g} %)."
    )


def _clips(share: float, clips: int) -> str:
    count = round(share * clips)
    return f"{count} {plural(count, 'clip')}"


def rounding_sentence(check: dict, ranks: int, model: str) -> str:
    """What compressed gradients did to what ``model`` learned, per compression, from ``learning_check``'s
    ``rounding``: its training accuracy against the uncompressed ``ranks`` ranks' (identical, or within
    how many points and clips, each seed's gap signed), its largest per-step loss difference against
    ``PARITY_THRESHOLD`` (within it, float32 rounding; beyond it, the rounding changed the training),
    and what the accuracy can resolve: a cost shown where every seed lost more than reordering float32's
    sums moved the accuracy (``ranks_gap``), else how often and by how much it was lower; never finer than
    one clip, and nothing where the model was not shown to learn (``learns``). Empty with no compression."""
    clips, seeds = check["clips"], len(check["table"])
    sentences = []
    for name, found in check.get("rounding", {}).items():
        gaps, loss = found["gaps"], found["loss"]
        largest = max(abs(gap) for gap in gaps.values())
        if largest == 0:
            on = f"on all {seeds} seeds" if seeds > 1 else "on its one seed"
            accuracy = f"was identical to uncompressed float32's {on}"
        else:
            each = ", ".join(f"seed {seed} {signed(gap * 100, 2)}" for seed, gap in gaps.items())
            accuracy = (
                f"was within {largest * 100:.2f} points of uncompressed float32's on every seed "
                f"({_clips(largest, clips)} of the {clips:,}; {name} less float32: {each})"
            )
        threshold = f"the {scientific(PARITY_THRESHOLD, 1)} that float32's reordered sums stay within"
        if loss == 0:
            lossy = "identical to the uncompressed run's at every step"
        elif loss < PARITY_THRESHOLD:
            lossy = (
                f"within {scientific(loss)} relative of the uncompressed run's at every step, inside "
                f"{threshold}"
            )
        else:
            lossy = (
                f"within {scientific(loss)} relative of the uncompressed run's at every step, beyond "
                f"{threshold}: the rounding did change the training"
            )
        sentences.append(f"With {name}-compressed gradients the {ranks} ranks' training accuracy {accuracy}, "
                         f"and their loss {lossy}.")  # fmt: skip
        lower = [-gap for gap in gaps.values() if gap < 0]
        if largest == 0:
            reading = (
                f"So in these runs the rounding cost less than one clip ({100 / clips:.2g} points), the "
                "finest difference they can show"
            )
        elif not lower:
            reading = f"The {name} runs were never below float32 here"
        elif len(lower) == len(gaps) and min(lower) > check["ranks_gap"]:
            reading = (
                f"The {name} runs were below float32 on every seed, by more than reordering float32's sums "
                f"moved the accuracy ({check['ranks_gap'] * 100:.2f} points): a cost these runs show"
            )
        else:
            by = "by" if len(lower) == 1 else "by at most"
            reading = (
                f"The {name} runs were below float32 on {len(lower)} of the {len(gaps)} seeds, {by} "
                f"{max(lower) * 100:.2f} points ({_clips(max(lower), clips)}), and level with or above it on "
                "the others"
            )
        if check["learns"]:
            reading += "; runs this short cannot say what the rounding would cost a full training."
        else:
            reading += (
                f"; with `{model}` not shown to learn in runs this short (above), accuracy cannot resolve a "
                "cost of the rounding either way, and the loss difference is what these runs show."
            )
        sentences.append(reading)
    return " ".join(sentences)


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
        f"{what} ({placement_words(backend, device)}, two ranks, {sizes} message sizes, each size's lower "
        f"quartile of {config['iterations']} iterations)"
    )


def fit_reach(
    records: list[dict], fit: dict, backend: str, device: str, ranks: int, cores: int | None = None
) -> str:
    """Whether the two-rank α-β ``fit`` (named by its ``record_key`` among ``records``) holds at the
    ``ranks`` the chapter applies it to, read by chapter 4's own verdict (``collectives.link_reading.
    carry_over``, what its ``describe_beyond`` says): chapter 4's benchmark of ``backend`` on ``device`` at
    that many ranks against the fit's prediction (``collectives.tables.beyond_the_fit``: the median over
    message sizes of measured ÷ predicted, and its range), with the two-rank fit's own median error
    (``cores``: the machine's, for a launch with more ranks than cores). Where it carries over to within a
    margin beyond ``stats.MATTERS``, the α-β figures are estimates to that accuracy. Empty where the ranks
    are the fit's own."""
    if ranks == LINK_FIT_WORLD_SIZE:
        return ""
    applied = f"The fit is of {LINK_FIT_WORLD_SIZE} ranks, applied here at k = {ranks}"
    fitted = [r for r in records if r["key"] == fit.get("record_key")]
    others = [
        r for r in records
        if r["config"]["backend"] == backend and r["config"]["device"] == device and r not in fitted
    ]  # fmt: skip
    read, fit_error = None, None
    if fitted and others:
        two = alpha_beta_fits(benchmark_frames(fitted), world_sizes=[LINK_FIT_WORLD_SIZE])
        beyond = beyond_the_fit(benchmark_frames(others), two)
        errors = two.loc[two["operation"] == "all_reduce", "median_relative_error"]
        fit_error = float(errors.iloc[0]) if len(errors) else None
        read = link_reading.carry_over(beyond, fit_error, ranks, where=f"{backend}/{device}", cores=cores)
    if read is None:
        return (
            f"{applied}; chapter 4 did not benchmark {ranks} ranks here, so whether it carries over is "
            "untested."
        )
    took = (
        f"chapter 4's benchmark of {ranks} ranks took {read['median']:.2f}× what it predicts "
        f"({read['range']}× over message sizes)"
    )
    if read["verdict"] == link_reading.CARRIES:
        own = (
            f", a miss within the fit's own error on two ranks ({whole_percent(fit_error)})"
            if read["reason"] == "within the fit's own error"
            else ""
        )
        if read["within"] <= MATTERS:
            return f"{applied}; {took}{own}, so it carries over."
        return (
            f"{applied}; {took}{own}, so it carries over to within about {whole_percent(read['within'])}; "
            "the α-β figures here are estimates to that accuracy."
        )
    why = {
        "scheduler": f" (with {ranks} ranks on {cores} cores some rank waits for a core at every step)",
        "something the model lacks": " (something the two-rank model lacks costs time)",
    }.get(read["reason"], "")
    return (
        f"{applied}, although {took}: chapter 4 finds that it does not carry over to {ranks} ranks{why}, so "
        "the α-β model's figures here are estimates."
    )
