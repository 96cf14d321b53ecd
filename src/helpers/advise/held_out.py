"""Chapter 7's held-out test in words: which example models an edition measured, how the new ones compare
with the book's two, and how far the time model's predictions missed their DDP steps — one point stated as
one point, several as a mean and the worst, each against the book's 15 % goal, with the range or interval
its launches support and where the ranks ran, from the records of the machine that measured them.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd

from helpers import stats
from helpers.advise.counting import Counted
from helpers.advise.report import listed
from helpers.costmodel import gpus
from helpers.costmodel.prose import link_band_note as link_band_note_of


def _standing(new: list[float], reference: list[float]) -> str | None:
    """Where every new model's value stands against the reference models': "below", "above", "between"
    them all, or None when the new models differ in that."""
    low, high = min(reference), max(reference)
    for standing, test in (("below", lambda v: v < low), ("above", lambda v: v > high),
                           ("between", lambda v: low < v < high)):  # fmt: skip
        if all(test(value) for value in new):
            return standing
    return None


def model_comparison(counted: dict[str, Counted], new: list[str], reference: list[str]) -> str:
    """How the held-out models (``new``) compare with the book's (``reference``) in ``model_table``'s
    counted columns, in words that hold for every model named: only what the counts show is said."""
    c = {name: counted[name] for name in [*new, *reference]}
    one = len(new) == 1
    books = "both of the book's" if len(reference) == 2 else "all of the book's"
    either = "either" if len(reference) == 2 else "any of them"
    columns = {
        "parameters (so little to all-reduce)": lambda m: m.parameters,
        "training FLOPs per sample": lambda m: m.training_flops_per_sample,
    }
    standing = {label: _standing([f(c[n]) for n in new], [f(c[n]) for n in reference])
                for label, f in columns.items()}  # fmt: skip
    subject = f"The new model {listed(new)}" if one else "The new models"
    clauses = []
    for side, word in (("below", "smaller"), ("above", "larger")):
        labels = [label for label, found in standing.items() if found == side]
        if labels:
            clauses.append(f"{word} than {books} on " + " and on ".join(labels))
    ops = {name: gpus.ops_per_step(c[name].name) for name in c}
    busy = [name for name in new if ops[name] > max(ops[n] for n in reference)]
    book_ops = stats.listed(ops[n] for n in reference)
    if busy:
        who = "" if len(busy) == len(new) else f"{listed(busy)} "
        verb = "issues" if len(busy) == 1 else "issue"
        clauses.append(f"{who}{verb} more host ops per step than {either} "
                       f"({stats.listed(ops[n] for n in busy)} against {book_ops})")  # fmt: skip
    ratio = [c[n].training_flops_per_sample / c[n].gradient_bytes for n in new]
    between = _standing(ratio, [c[n].training_flops_per_sample / c[n].gradient_bytes for n in reference])
    text = (
        f"{subject} {'is' if one else 'are'} " + ", and ".join(clauses) if clauses else subject + " differs"
    )
    if between == "between":
        text += f"; on FLOPs per gradient byte {'it sits' if one else 'they sit'} between them"
    return text + "."


def measured_models_note(measured: list[str], results_run: str) -> str:
    """Which of chapter 7's example models this edition counted and measured, and, for one it left out,
    that no table shows it and which other profile of ``notebooks/study.yml`` measures it."""
    from helpers.advise.examples import EXAMPLES

    left = [name for name in EXAMPLES if name not in measured]
    if not left:
        return f"This edition counts and measures {'both' if len(measured) == 2 else listed(measured)}."
    it = "it" if len(left) == 1 else "them"
    text = (f"This edition counts and measures {listed(measured)} alone: {listed(left)} "
            f"{'was' if len(left) == 1 else 'were'} not measured on this machine (this profile's "
            f"`held_out_specs` leave {it} out), so no table or figure below shows {it}")  # fmt: skip
    elsewhere = [p for p in profiles_holding_out([EXAMPLES[n] for n in left]) if p != results_run]
    if elsewhere:
        text += f"; the {stats.listed(p.upper() for p in elsewhere)} edition measures {it}"
    return text + "."


def profiles_holding_out(specs: list[str]) -> list[str]:
    """The study's profiles (smoke aside: the notebook's own test run) whose chapter 7 holds out every one
    of ``specs``, by the parameters the study runner gives it."""
    from helpers import notebook_parameters, study

    found = []
    for profile in (name for name in study.PROFILES if name != "smoke"):
        (chapter,) = study.plan(profile, ["07_your_model"])
        held = {**notebook_parameters.notebook_defaults(chapter.source), **chapter.parameters}[
            "held_out_specs"
        ]
        if set(specs) <= set(held):
            found.append(profile)
    return found


ACCURACY_GOAL_PERCENT = 15  # the time model's goal on runs it never saw, which chapter 7 sets itself


def against_goal(
    error: float, low: float, high: float, goal: float = ACCURACY_GOAL_PERCENT, launches: int = 3,
    spread: str = "interval",
) -> str:  # fmt: skip
    """Whether one held-out error (%) meets the goal: by its median launch, and whether its spread over
    launches agrees (a verdict holds only where the whole spread agrees, as the book's bands do); one
    launch has no spread. ``spread`` names it: "interval" (a 95 % one) or "range" (of the launches)."""
    if launches < 2:
        return f"{'within' if abs(error) <= goal else 'outside'} the book's {goal:g} % goal"
    if abs(error) <= goal:
        inside = -goal <= low and high <= goal
        return f"within the book's {goal:g} % goal" + (
            "" if inside else f", though its {spread} reaches past it"
        )
    outside = low > goal or high < -goal
    return f"outside the book's {goal:g} % goal" + (
        f", its whole {spread} too" if outside else f", though its {spread} reaches inside it"
    )


def off_by(error: float) -> str:
    """A step predicted ``error`` % off, in words: "34 % too long" (positive: the prediction too slow)."""
    return f"{abs(error):.0f} % too {'long' if error > 0 else 'short'}"


def is_launch_range(row) -> bool:
    """Whether a ``validate`` row's error "interval" is just the range of its launches: the errors against
    its slowest and fastest launch's median step. A 95 % bootstrap of the median of a few launches (up to
    five) can return nothing else, so it is labelled as what it is. One launch has no range."""
    values = row._asdict() if hasattr(row, "_asdict") else dict(row)
    if values.get("launches", 1) < 2 or not {"predicted_seconds", "launch_low", "launch_high"} <= set(values):
        return False
    predicted = values["predicted_seconds"]
    ends = ((predicted / values["launch_high"] - 1) * 100, (predicted / values["launch_low"] - 1) * 100)
    return all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
               for a, b in zip(ends, (values["error_low"], values["error_high"]), strict=True))  # fmt: skip


def spread_label(table: pd.DataFrame) -> str:
    """What the error's spread over launches is in ``table``'s multi-launch rows: "range", "interval", or
    "mixed"; "none" where every row is one launch."""
    several = table[table["launches"] > 1]
    if several.empty:
        return "none"
    ranges = [is_launch_range(r) for r in several.itertuples()]
    return "range" if all(ranges) else "interval" if not any(ranges) else "mixed"


def validation_view(table: pd.DataFrame) -> pd.DataFrame:
    """``validate``'s rows for reading: milliseconds, the launches' range, and the error with its spread,
    named for what it holds: the range over the launches where the bootstrap could only return that range
    (``is_launch_range``), else the 95 % interval."""
    measured = [
        f"{m * 1e3:.3g} ({lo * 1e3:.3g}–{hi * 1e3:.3g})"
        for m, lo, hi in zip(
            table["measured_seconds"], table["launch_low"], table["launch_high"], strict=True
        )
    ]
    error = [
        f"{stats.signed(e, 0)} ({stats.signed(lo, 0)} to {stats.signed(hi, 0)})"
        for e, lo, hi in zip(table["error_percent"], table["error_low"], table["error_high"], strict=True)
    ]
    counts = sorted(set(table.loc[table["launches"] > 1, "launches"]))
    launches = f"the {counts[0]} launches" if len(counts) == 1 else "the launches"
    banded = "predicted_high_seconds" in table
    central = table["predicted_seconds"]
    low, high = (table.get(f"predicted_{end}_seconds", central) for end in ("low", "high"))
    predicted = [band_text(*values) for values in zip(central, low, high, strict=True)]
    label = {"range": f"error (%), range over {launches}", "none": "error (%), one launch",
             "interval": "error (%), 95 % interval",
             "mixed": "error (%), 95 % interval or range over the launches"}[spread_label(table)]  # fmt: skip
    return pd.DataFrame(
        {
            "model": table["model"],
            "ranks": table["ranks"],
            "predicted (ms)" + (", band over the link's two fits" if banded else ""): predicted,
            "measured (ms): median launch (range)": measured,
            "launches": table["launches"],
            label: error,
        }
    )


def band_text(central: float, low: float, high: float) -> str:
    """A prediction in ms with its band over the link's fits, "12.3 (12.1–13)"; the central value alone
    where the band does not show at three significant digits (one rank: no all-reduce)."""
    texts = [f"{value * 1e3:.3g}" for value in (central, low, high)]
    return texts[0] if texts[1] == texts[2] else f"{texts[0]} ({texts[1]}–{texts[2]})"


def link_band_note(table: pd.DataFrame) -> str:
    """How far chapter 4's uncertain link moves ``validate``'s multi-rank predictions, and how many measured
    steps its band holds (``prose.link_band_note``, in this chapter's terms); "" without such rows."""
    several = table[table["ranks"] > 1]
    if several.empty or "predicted_high_seconds" not in several:
        return ""
    rows = several.rename(columns={"measured_seconds": "step_seconds"}).assign(method="ddp_overlap")
    return link_band_note_of(rows, noun="multi-rank point")


def launch_medians(records: list[dict], names: dict[str, str], **match) -> dict[tuple, list[float]]:
    """Each held-out launch's median step, in the order the launches ran, per (model label, ranks):
    from ``advise_validation`` records of the models ``names`` maps (label → the records' model name),
    those whose configuration has every ``match`` value (``global_batch_size``, ``backend``, ...)."""
    import statistics

    label_of = {name: label for label, name in names.items()}
    found: dict[tuple, list[tuple[int, float]]] = {}
    for record in records:
        config = record["config"]
        if record["kind"] != "advise_validation" or config["model"] not in label_of:
            continue
        if any(config.get(key) != value for key, value in match.items()):
            continue
        median = statistics.median(record["result"]["step_seconds_all"])
        found.setdefault((label_of[config["model"]], config["world_size"]), []).append(
            (config["launch"], median)
        )
    return {key: [median for _, median in sorted(runs)] for key, runs in found.items()}


def drift(medians: list[float], short: bool = False) -> str | None:
    """Launches that drifted one way, in words: with three or more, each launch's median step shorter (or
    longer) than the one before, first against last, and (unless ``short``) the steps in the order they
    ran; None otherwise (fewer launches, or no single direction)."""
    if len(medians) < 3:
        return None
    pairs = list(itertools.pairwise(medians))
    if all(b < a for a, b in pairs):
        way, change = "faster", f"{(1 - medians[-1] / medians[0]) * 100:.0f} % shorter"
    elif all(b > a for a, b in pairs):
        way, change = "slower", f"{(medians[-1] / medians[0] - 1) * 100:.0f} % longer"
    else:
        return None
    steps = "" if short else f", {stats.listed(f'{m * 1e3:.3g}' for m in medians)} ms in the order they ran"
    return f"each launch {way} than the one before{steps}: the last's median step {change} than the first's"


def held_out_sentences(
    table: pd.DataFrame, goal: float = ACCURACY_GOAL_PERCENT, medians: dict[tuple, list[float]] | None = None
) -> dict[str, str]:
    """The held-out test in words (``validate.validate`` rows of one or more models), built from how many
    multi-rank points there are: one point is stated as its error, several as their mean absolute
    percentage error and the worst; each against the book's ``goal`` (%). The spread over launches is
    called what it is (``is_launch_range``: the range of a few launches, not a 95 % interval), and
    launches that drifted one way (``medians``: ``launch_medians``) are said to have. Keys:
    ``interval_setting``, ``held_out_detail`` (every point with its spread and verdict),
    ``held_out_summary`` (7.4), ``held_out_answer`` (the answer box), ``held_out_takeaway``,
    ``accuracy_goal``, ``held_out_link_band`` (``link_band_note``)."""
    several = table[table["ranks"] > 1]
    found = {"accuracy_goal": f"{goal:g} %", "held_out_link_band": link_band_note(table)}
    if several.empty:
        none = "No multi-rank launch ran here, so the time model was not checked on this machine."
        return found | {"held_out_detail": "no multi-rank launch ran here", "held_out_summary": none,
                        "held_out_answer": none, "held_out_takeaway": none,
                        "interval_setting": "from no launch"}  # fmt: skip
    rows = list(several.itertuples())
    models = list(dict.fromkeys(several["model"]))
    medians = medians or {}
    counts = sorted(set(several["launches"]))
    number = f"the {counts[0]}" if len(counts) == 1 else "its"
    found["interval_setting"] = {
        "none": "from one launch, so without an interval",
        "range": f"with its range over {number} launches, from the slowest launch's median step to the "
        "fastest's (too few launches for a 95 % interval: a bootstrap of their medians returns this same "
        "range)",
        "interval": f"with its 95 % interval over {number} launches (a bootstrap of their medians)",
        "mixed": "with its 95 % interval over the launches (a bootstrap of their medians), or their range "
        "where they are too few for one",
    }[spread_label(several)]

    def point(r) -> str:
        return f"`{r.model}` on {r.ranks} ranks"

    def word(r) -> str:
        return "range" if is_launch_range(r) else "interval"

    def verdict(r) -> str:
        return against_goal(r.error_percent, r.error_low, r.error_high, goal, r.launches, word(r))

    def spread(r) -> str:
        """The error's spread over launches; none from one launch."""
        if r.launches == 1:
            return ""
        return f" ({stats.signed(r.error_low, 0)} to {stats.signed(r.error_high, 0)} %)"

    def drifted(r) -> str | None:
        return drift(medians.get((r.model, r.ranks), []))

    found["held_out_detail"] = "; ".join(
        f"{point(r)} {stats.signed(r.error_percent, 0)} %{spread(r)}, {verdict(r)}"
        + (f" — its launches drifted, {drifted(r)}" if drifted(r) and len(rows) > 1 else "")
        for r in rows
    )
    calibrated = f"`{models[0]}`'s" if len(models) == 1 else "each new model's"
    opening = (f"On this machine the time model, calibrated only on {calibrated} one-process step times and "
               "chapter 4's all-reduce, ")  # fmt: skip
    trained = f"`{models[0]}`" if len(models) == 1 else "each model"
    takeaway = (
        f"On this machine the time model, calibrated on one process of {trained} and never on its "
        "multi-rank runs, "
    )
    if len(rows) == 1:
        r = rows[0]
        ends = f"{stats.signed(r.error_low, 0)} to {stats.signed(r.error_high, 0)} %"
        if r.launches < 2:
            launches = ", one launch"
        elif word(r) == "range":
            launches = f"; {ends} over the range of its {r.launches} launches"
        else:
            launches = f"; {ends}, its 95 % interval over {r.launches} launches"
        said = (
            f"predicts its DDP step on {r.ranks} ranks, the one multi-rank point measured here, "
            f"{off_by(r.error_percent)}"
        )
        error = stats.signed(r.error_percent, 0)
        found["held_out_answer"] = f"{opening}{said} ({error} %{launches}): {verdict(r)}."
        found["held_out_summary"] = (
            "That is the only multi-rank point measured here, so its error is the whole test: one point, not "
            "a mean over models and rank counts."
        )
        if drifted(r):
            short = drift(medians[(r.model, r.ranks)], short=True)
            found["held_out_answer"] = found["held_out_answer"][:-1] + f"; its launches drifted, {short}."
            found["held_out_summary"] += (
                f" Its {r.launches} launches drifted one way — {drifted(r)} — so their range is a trend over "
                f"time as much as scatter, and {r.launches} launches cannot say which of them a longer run "
                "would match."
            )
        found["held_out_takeaway"] = f"{takeaway}{said}: {verdict(r)}."
        return found
    errors = several["error_percent"].abs()
    mape, worst = errors.mean(), rows[int(errors.to_numpy().argmax())]
    within = int((errors <= goal).sum())
    count = (
        "none of them is" if within == 0 else f"all {len(rows)} are" if within == len(rows)
        else f"{within} of the {len(rows)} {'is' if within == 1 else 'are'}"
    )  # fmt: skip
    worst_text = f"worst {abs(worst.error_percent):.0f} %, {point(worst)}"
    # the answer box says it in a sentence; 7.4 gives the setting and every point
    found["held_out_answer"] = (
        f"Its predictions of the new models' DDP steps at {len(rows)} multi-rank points here are "
        f"off by {mape:.0f} % on average ({worst_text}): {count} within the book's {goal:g} % goal."
    )
    found["held_out_summary"] = (
        f"Over these {len(rows)} multi-rank points the mean absolute percentage error is {mape:.0f} % "
        f"({worst_text}), against the {goal:g} % this book set itself as a goal: {count} within it."
    )
    found["held_out_takeaway"] = (
        f"{takeaway}predicts their DDP steps with a mean absolute percentage error of {mape:.0f} % over "
        f"{len(rows)} points ({worst_text}); {count} within the book's {goal:g} % goal."
    )
    return found


def calibration_runs(repeats: int) -> dict[str, str]:
    """``calibration_runs``: how many independent single-process runs each calibration timing had, as the
    prose says it: "3 independent runs each", "one run each"."""
    return {"calibration_runs": "one run each" if repeats == 1 else f"{repeats} independent runs each"}


def held_out_setting(
    hardware: dict, device: str, backend: str, world_sizes, launches: int, threads
) -> dict[str, str]:
    """Where the held-out test ran, from the machine's record (``hardware``: its usable cores and GPUs)
    and the chapter's settings: how the single-process calibration ran (``threads``: its thread counts),
    how the DDP launches ran, what they share and how the all-reduce travels, and so what the test
    checks. Keys: ``calibration_setting``, ``launch_setting``, ``held_out_setting``, ``held_out_checks``
    (what the error's spread over launches is, ``interval_setting``, comes with ``held_out_sentences``)."""
    cores, gpus = hardware["usable_cores"], hardware.get("gpus") or []
    largest, counts = max(world_sizes), sorted(set(world_sizes))
    name = "NCCL" if backend == "nccl" else "Gloo"
    times = "once" if launches == 1 else f"{launches} times"
    if len(counts) == 1:
        launched = "One rank is" if largest == 1 else f"The {largest} ranks are"
        launch = f"{launched} then launched {times} for real with {name}"
    else:
        every = stats.listed(counts)
        launch = f"Each rank count ({every}) is then launched {times} for real with {name}, alternating"
    ranks = f"{'up to ' if len(counts) > 1 else ''}{largest} {name} ranks"
    per_rank = max(1, cores // largest)
    if device == "cuda" and gpus:
        device_text = f"this machine's {'one ' if len(gpus) == 1 else ''}{gpus[0]['name']}"
        at = stats.listed(threads)
        calibration = f"its step time on {device_text} at every per-rank batch, the host at {at} threads"
        shared = largest > len(gpus)
        host = f", each rank at {per_rank} threads of its {cores} cores"
        travel = (
            "NCCL all-reduces from GPU to GPU"
            if backend == "nccl"
            else "Gloo stages every all-reduce through host memory (copied from the GPU, summed by the CPU, "
            "copied back)"
        )
    else:
        device_text = f"this machine's {cores} cores"
        calibration = (
            f"its step time at every per-rank batch and at {stats.listed(threads)} threads of {device_text}"
        )
        shared = True
        host = (
            f" (at {largest} ranks, more processes than cores)"
            if largest > cores
            else f" (at {largest} ranks, {per_rank} {'core' if per_rank == 1 else 'cores'} each)"
        )
        travel = "Gloo all-reduces through the machine's memory"
    if shared:
        where = f"share {device_text}"
        checks = (
            "how chapter 5's step-time model combines one process's compute with that all-reduce when ranks "
            "share a device: it lets them take turns, each repeating a step's fixed cost — not a speed-up "
            "from GPUs of their own"
        )
        short = f"with {ranks} sharing {device_text}"
    else:
        where = f"each have a GPU of their own, of {len(gpus)}"
        checks = "chapter 5's step-time model where each rank computes on its own GPU: a real speed-up"
        short = f"with {ranks} on GPUs of their own"
    return {
        "calibration_setting": calibration,
        "launch_setting": launch,
        "held_out_setting": f"Here {ranks} {where}{host}, and {travel}. The test checks {checks}.",
        "held_out_checks": f"This checks chapter 5's step-time model {short}, not the roofline behind the "
        "prices above.",
    }
