"""The most a DDP setting can change a step (chapter 3): for a bucket size or a gradient compression, the
all-reduce it changes, timed in the communication hook and modelled with chapter 4's α-β fit, bounds what
it can save or cost; each bound set beside the measured change, and read in words, including where the
hook's time in flight is mostly waiting for backward passes rather than communication.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.ddp import matching
from helpers.ddp_results import allreduce_seconds, compare, describe_change, ms
from helpers.stats import MATTERS, describe_speedup


def modelled_allreduce_seconds(bucket_bytes: list[int], world_size: int, fit: dict) -> float:
    """The α-β time (chapter 4's ring all-reduce, ``fit``'s α and β) of all-reducing each of these buckets,
    one after the other, on ``world_size`` ranks."""
    alpha, beta = fit["alpha_seconds"], fit["seconds_per_byte"]
    return sum(ring_all_reduce_seconds(nbytes, world_size, alpha, beta) for nbytes in bucket_bytes)


def communication_bound(runs: list[tuple[dict, dict]], baseline: dict, candidate: dict, fit: dict) -> dict:
    """What changing the all-reduce's settings from ``baseline`` to ``candidate`` did to the step, beside
    the most it can do.

    A step holds the part of its all-reduce that no computation hides: at least its tail, what follows the
    backward pass's last gradient, and at most all of it. The last bucket is handed over with that
    gradient, so its all-reduce is always tail; a side with one bucket is all tail. So a setting of the
    all-reduce alone (bucket size, compression) can save at most the baseline's whole all-reduce less the
    candidate's tail (``most_saved``) and lose at most the candidate's whole all-reduce less the baseline's
    tail (``most_lost``), each computed from the hook (its time in flight, and of it the part after the last
    gradient, ``exposed_seconds``) and from the α-β model (the whole all-reduce, and the last bucket's alone,
    ``model_tail_seconds``; with ``fit["medians"]``, chapter 4's fit to the medians too, the larger of the
    two fits: its α is known only within their range), the larger being the bound (NaN ignored), so that
    neither a hook that misses part of the work nor a model that misses an overhead makes it too small;
    never below 0.
    A compression's bound rests on the hook alone wherever it timed both sides: the hook holds the
    conversions to and from the compressed type, which the α-β model (bytes alone) leaves out, so the
    model's figure (``model_most_saved``, ``model_most_lost``) is shown beside it, labelled, not taken.
    With one bucket on both sides the bounds are the difference of the two all-reduces each way
    (``expected_seconds``: the model's). ``saved_seconds`` is the measured saving per step, baseline median
    minus candidate median (negative: slower), with ``saved_low`` to ``saved_high`` from the speed-up's
    interval at the baseline's median. ``compression`` names the candidate's compression (None: the
    comparison is of buckets). ``waits``, per bound (saved, lost): whether it rests on the hook's time in
    flight of a side with several buckets although more of that time came before the backward pass's last
    gradient than the α-β model gives the whole all-reduce: buckets handed over early that wait for the
    other ranks' backward passes, so the bound is loose (``waiting``).
    """
    change = compare(runs, baseline, candidate)
    records = [matching(runs, **side)[0][1]["result"] for side in (baseline, candidate)]
    ranks = records[0]["world_size"]
    fits = [fit, *([fit["medians"]] if "medians" in fit else [])]  # chapter 4's α range: both its fits
    modelled = [[modelled_allreduce_seconds(r["bucket_bytes"], ranks, f) for r in records] for f in fits]
    tails = [[modelled_allreduce_seconds(r["bucket_bytes"][-1:], ranks, f) for r in records] for f in fits]
    model, model_tail = modelled[0], tails[0]
    hook = [allreduce_seconds(runs, **side) for side in (baseline, candidate)]
    exposed = [allreduce_seconds(runs, exposed=True, **side) for side in (baseline, candidate)]
    base = change["baseline_seconds"]
    buckets = [len(r["bucket_bytes"]) for r in records]
    hook_tail = [
        whole if count == 1 else tail for whole, tail, count in zip(hook, exposed, buckets, strict=True)
    ]
    bounds, by_models, waits = [], [], []
    compressed = candidate.get("compression") is not None
    for side, other in ((0, 1), (1, 0)):  # saved: baseline whole less candidate tail; lost: the reverse
        by_hook = hook[side] - hook_tail[other]
        by_model = max(whole[side] - tail[other] for whole, tail in zip(modelled, tails, strict=True))
        taken = (by_hook,) if compressed and not math.isnan(by_hook) else (by_hook, by_model)
        bounds.append(max([0.0, *(v for v in taken if not math.isnan(v))]))
        by_models.append(max(0.0, by_model))
        waits.append(
            buckets[side] > 1
            and not math.isnan(by_hook)
            and by_hook >= by_model
            and by_hook > 0
            and waiting(hook[side], exposed[side], model[side])
        )
    return {
        "change": change,
        "saved_seconds": base - change["candidate_seconds"],
        "saved_low": base * (1 - 1 / change["low"]),
        "saved_high": base * (1 - 1 / change["high"]),
        "hook_seconds": hook,
        "exposed_seconds": exposed,
        "model_seconds": model,
        "model_tail_seconds": model_tail,
        "model_seconds_medians": modelled[1] if len(fits) > 1 else None,
        "buckets": buckets,
        "expected_seconds": model[0] - model[1],
        "most_saved": bounds[0],
        "most_lost": bounds[1],
        "model_most_saved": by_models[0],
        "model_most_lost": by_models[1],
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
    said = f"at most {saved} or {lost}"
    if bound.get("compression") and "model_most_saved" in bound:
        said += (
            f", as the hook timed it, conversions included (the α-β model, bytes alone, puts that most at "
            f"{ms(bound['model_most_saved'])} ms saved or {ms(bound['model_most_lost'])} ms lost)"
        )
    return said


def _bound_cell(bound: dict, key: str, side: int) -> str:
    """A bound in the table, marked "loose" where it is the hook's time in flight and mostly waiting (the
    sentence below the table says why)."""
    loose = bound.get("waits", [False, False])[side]
    return ms(bound[key]) + (" (loose: mostly waiting)" if loose else "")


def saved_words(seconds: float) -> str:
    """A change of a step in ms as saved or lost, never a negative saving: ``18.8 saved``, ``2.81 lost``."""
    if seconds == 0:
        return "0"
    return f"{ms(abs(seconds))} {'saved' if seconds > 0 else 'lost'}"


def saved_range(low: float, high: float) -> str:
    """An interval of savings in ms, each end saved or lost: ``12.7 to 14.9 saved``, ``5.00 to 9.00 lost``,
    ``86.8 lost to 11.3 saved``."""
    if low >= 0:
        return f"{ms(low)} to {ms(high)} saved"
    if high <= 0:
        return f"{ms(-high)} to {ms(-low)} lost"
    return f"{ms(-low)} lost to {ms(high)} saved"


def bound_table(bounds: dict[str, dict]) -> pd.DataFrame:
    """``communication_bound`` results side by side, one column per comparison, in milliseconds per step.
    Each column is headed baseline → candidate (``from_to``, set by ``chapter_bounds``; else its key), as
    its cells run; changes of the step are written as saved or lost."""
    rows = {
        "buckets per step": lambda b: " → ".join(map(str, b["buckets"])),
        "all-reduce in flight, timed in the hook (ms)": lambda b: _arrow(b["hook_seconds"]),
        "of it after backward's last gradient (ms)": lambda b: _arrow(b["exposed_seconds"]),
        "all-reduce, α-β model (ms)": lambda b: _arrow(b["model_seconds"]),
        "the same, α-β fitted to medians (ms)": lambda b: (
            _arrow(b["model_seconds_medians"]) if b.get("model_seconds_medians") else "–"
        ),
        "of it, the last bucket alone (ms)": lambda b: _arrow(
            b.get("model_tail_seconds", b["model_seconds"])
        ),
        "α-β model, if nothing overlaps (ms)": lambda b: saved_words(b["expected_seconds"]),
        "most it can save (ms)": lambda b: _bound_cell(b, "most_saved", 0),
        "most it can cost (ms)": lambda b: _bound_cell(b, "most_lost", 1),
        "measured per step, interval (ms)": lambda b: saved_range(b["saved_low"], b["saved_high"]),
        "measured per step, medians (ms)": lambda b: saved_words(b["saved_seconds"]),
        "step time (ms)": lambda b: _arrow(
            [b["change"]["baseline_seconds"], b["change"]["candidate_seconds"]]
        ),
        "verdict": lambda b: describe_speedup(b["change"]),
    }
    return pd.DataFrame({b.get("from_to", name): [show(b) for show in rows.values()]
                         for name, b in bounds.items()}, index=list(rows))  # fmt: skip


def bound_brief(what: str, bound: dict, brief: bool = True) -> str:
    """The answer box's clause: what was changed and its measured verdict (``brief``: without its interval,
    which the body gives), the saving and its bound left to ``bound_summary``."""
    return f"{what}: {describe_change(bound['change'], brief=brief)}"


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
    clause = bound_brief(what, bound, brief=False)  # with its interval
    if bound["saved_low"] > bound["most_saved"] or bound["saved_high"] < -bound["most_lost"]:
        return f"{clause}; {measured}; {limits}, so that difference is more than it can explain."
    if change["verdict"] in ("faster", "slower") and (
        saved > bound["most_saved"] or -saved > bound["most_lost"]
    ):
        most = bound["most_saved"] if saved > 0 else bound["most_lost"]
        return (
            f"{clause}; {measured}; {limits}: the median, {ms(abs(saved))} ms, is "
            f"more than the {ms(most)} ms it can {'save' if saved > 0 else 'cost'}, so the all-reduce "
            "explains at most part of that difference."
        )
    return f"{clause}; {measured}; {limits}."


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
    tail = bound.get("model_tail_seconds", model)
    last = (
        f" ({ms(tail[0])} to {ms(tail[1])} ms for the last bucket, which no computation can hide)"
        if max(bound["buckets"]) > 1
        else ""
    )
    sentences = [
        bound_summary(what, bound),
        f"The all-reduce it changes, timed in the hook{inside}, went from {ms(hook[0])} to "
        f"{ms(hook[1])} ms per step ({ms(exposed[0])} to {ms(exposed[1])} ms of it after the backward "
        f"pass's last gradient); the α-β model has {ms(model[0])} to {ms(model[1])} ms{last}.",
    ]
    model_shorter = model[1] < model[0] / (1 + MATTERS)
    if name and model_shorter and hook[1] > hook[0] * (1 + MATTERS):
        sentences.append(
            f"So {name} lengthened the hook-timed all-reduce that its fewer bytes shorten in the model: the "
            "conversions cost more than the bytes saved."
        )
    elif name and model_shorter and hook[1] >= hook[0] / (1 + MATTERS):
        moved = hook[1] / hook[0] - 1
        bytes_off = f"where its fewer bytes take {(1 - model[1] / model[0]) * 100:.0f} % off in the model"
        if moved <= -0.005:
            said = (f"shortened the hook-timed all-reduce by only {-moved * 100:.0f} % "
                    f"({ms(hook[0] - hook[1])} ms), {bytes_off}: here the conversions took most of what the "
                    "bytes saved")  # fmt: skip
        elif moved >= 0.005:
            said = (f"lengthened the hook-timed all-reduce by {moved * 100:.0f} % ({ms(hook[1] - hook[0])} "
                    f"ms), {bytes_off}: here the conversions cost more than the bytes saved")  # fmt: skip
        else:
            said = (
                f"left the hook-timed all-reduce as it was, {bytes_off}: the conversions took what they saved"
            )
        sentences.append(f"So {name} {said}.")
    for side, waits in enumerate(bound.get("waits", [False, False])):
        if waits:
            turns = " of the other ranks"
            if shared:
                turns = f" that {'share' if 'cores' in shared else 'take turns on'} {shared} here"
            limit = ms(bound[("most_saved", "most_lost")[side]])
            sentences.append(
                f"Of the {ms(hook[side])} ms in flight {('before', 'after')[side]} the change, only "
                f"{ms(exposed[side])} ms came after the backward pass's last gradient, and the α-β model "
                f"has {ms(model[side])} ms for the whole all-reduce: most of it is buckets handed over "
                f"early waiting for backward passes{turns}, not communication, so the {limit} ms "
                "bound that rests on it is a loose one."
            )
    if bound["saved_low"] < -bound["most_lost"] and bound["saved_high"] > bound["most_saved"]:
        sentences.append(
            "The launches' interval reaches beyond what the setting can change both ways: their spread is "
            "larger than anything this setting could do, so they cannot show its effect."
        )
    return " ".join(sentences)


def chapter_bounds(runs: dict[str, list[tuple[dict, dict]]], fit: dict) -> dict[str, dict]:
    """``communication_bound`` of each comparison chapter 3 makes of the all-reduce's settings: every
    compression against none (``runs["compression"]``), every bucket cap against the default 25 MiB, or
    the largest cap swept (``runs["buckets"]``). Keyed by what is compared, in words ("0.25 MiB buckets
    against 25 MiB, ConvNet": the candidate's speed-up over the baseline); each bound's ``from_to`` says it
    as the table's arrows run ("25 MiB → 0.25 MiB buckets, ConvNet")."""
    bounds = {}
    comparisons = (
        ("compression", "compression", "{} against none", "none → {}"),
        ("buckets", "bucket_cap_mb", "{:g} MiB buckets against {:g} MiB", "{1:g} MiB → {0:g} MiB buckets"),
    )
    for section, key, words, arrow in comparisons:
        values = list(dict.fromkeys(v[key] for v, _ in runs[section]))
        baseline = None if key == "compression" else (25 if 25 in values else max(values))
        if baseline not in values:
            continue
        for value in values:
            if value != baseline:
                model = runs[section][0][0]["model"]
                what = f"{words.format(value, baseline)}, {model}"
                bounds[what] = communication_bound(runs[section], {key: baseline}, {key: value}, fit)
                bounds[what]["from_to"] = f"{arrow.format(value, baseline)}, {model}"
    return bounds
