"""Chapter 5's rule for your own model, in words (section 5.6 and its takeaway): per model and eight-GPU
machine, the all-reduce left after backward (all of it with one DDP bucket, the last bucket's with several)
beside each GPU's step without it, and the per-GPU batch that outgrows the fixed cost, against the data.
"""

from __future__ import annotations

import pandas as pd

from helpers.costmodel.gpus import gradient_bytes
from helpers.costmodel.recommend import BUCKET_CAP_MB, DEFAULT_FIRST_BUCKET_MB, TRAIN_CLIPS, ddp_buckets
from helpers.costmodel.rule import FLOOR, HELD, HIDE, NOT_HELD
from helpers.costmodel.tables import banded
from helpers.stats import listed, significant


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB"


def _against(rows: pd.DataFrame, column: str) -> tuple[int, int]:
    """Of ``rows``, how many fit the training set whatever the inputs by ``column``, and how many never."""
    return int(rows[column].eq(HELD).sum()), int(rows[column].eq(NOT_HELD).sum())


def fits_phrase(within: int, never: int, machines: int) -> str:
    """Of ``machines`` eight-GPU machines, on how many the training set holds a global batch whatever the
    inputs (``within``), on how many only at some inputs, and on how many never, in that order and with
    no count of zero said: "whatever the inputs on all 5 eight-GPU machines", "only at some inputs on 4
    and never on 1 of the 5 eight-GPU machines" ("both" for two)."""
    named = f"{machines} eight-GPU machine{'' if machines == 1 else 's'}"
    every = {1: named, 2: "both eight-GPU machines"}.get(machines, f"all {named}")
    rest = machines - within - never
    if never == machines:
        return f"on none of the {named}, whatever the inputs"
    counts = [(within, "whatever the inputs"), (rest, "only at some inputs"), (never, "never")]
    said = [(count, words) for count, words in counts if count]
    if len(said) == 1:
        return f"{said[0][1]} on {every}"
    return listed(f"{words} on {count}" for count, words in said) + f" of the {named}"


def _span(values, percent: bool = False, whole: bool = False) -> str:
    """The smallest and largest of ``values`` to two significant digits, "0.65–6.9" (one value alone), or
    ``whole`` numbers with separators, "122–877"."""
    scale = 100 if percent else 1
    ends = [float(value) * scale for value in (min(values), max(values))]
    low, high = (f"{value:,.0f}" if whole else significant(value, 2) for value in ends)
    return low if low == high else f"{low}–{high}"


def as_long_as(ratios) -> str:
    """How long an all-reduce lasts against a compute, over machines: "0.65–6.9× as long as", or, where it
    is shorter everywhere, "0.63–11 % as long as"."""
    if max(ratios) < 1:
        return f"{_span(ratios, percent=True)} % as long as"
    return f"{_span(ratios)}× as long as"


def _paid_beside(rows: pd.DataFrame) -> tuple[list[float], str] | None:
    """A one-bucket model's all-reduce after backward against its step per GPU without it at the chapter's
    global batch (``condition_table`` given one), per machine: the ratios of the central values and "at a
    global batch of 100 (13 per GPU)"; None where the table has no such step."""
    if "compute_seconds" not in rows or rows["compute_seconds"].isna().any():
        return None
    shares = sorted({int(share) for share in rows["per_gpu_batch"]})
    each = listed([str(share) for share in shares])
    ratios = list(rows["tail_seconds"] / rows["compute_seconds"])
    return ratios, f"at a global batch of {int(rows['batch'].iloc[0])} ({each} per GPU)"


def _floor_reading(rows: pd.DataFrame) -> str:
    """Where the per-GPU batch of the chapter's global batch stands against b*_floor (central values)."""
    floors = f"{_span(rows['floor'], whole=True)} per GPU (central values)"
    if "per_gpu_batch" not in rows or rows["per_gpu_batch"].isna().any():
        return f"Its {FLOOR} is {floors}"
    above = int((rows["per_gpu_batch"] >= rows["floor"]).sum())
    share = int(rows["per_gpu_batch"].max())
    if above == len(rows):
        return (f"Its {FLOOR}, {floors}, lies below the {share} samples each GPU computes there on every "
                "machine, so the compute that more GPUs divide outgrows the fixed cost")  # fmt: skip
    if above == 0:
        return (f"Its {FLOOR}, {floors}, lies above the {share} samples each GPU computes there on every "
                "machine, so each GPU's step is mostly the fixed cost, which more GPUs do not "
                "divide")  # fmt: skip
    return (f"Its {FLOOR} is {floors}: the {share} samples each GPU computes there outgrow it on {above} of "
            f"{len(rows)} machines")  # fmt: skip


def first_bucket_note(models, first_mb: float = DEFAULT_FIRST_BUCKET_MB) -> str:
    """What DDP's smaller first bucket (``bucket_cap_mb`` left unset) would change for ``models``: which
    would still make one bucket, and how little of backward a first bucket that holds nearly every byte
    could overlap (only the part that produces the rest)."""
    one, split = [], []
    for name in models:
        buckets = ddp_buckets(name, first_bucket_mb=first_mb)
        if len(buckets) == 1:
            one.append(f"`{name}`'s gradients would still make one bucket")
        else:
            rest = sum(buckets[1:])
            split.append(
                f"`{name}`'s a first of {_mib(buckets[0])} and {_mib(rest)} after it, so its first bucket's "
                f"all-reduce could overlap only the part of backward that produces that last {_mib(rest)}, "
                "and the second's would follow backward"
            )
    if not one + split:
        return ""
    return f"With `bucket_cap_mb` left unset DDP closes its first bucket at {first_mb:g} MiB instead: " + (
        listed(one + split) + "."
    )


def bucket_split_note(model: str, bucket_cap_mb: float) -> dict[str, str]:
    """``bucket_split``: what a smaller ``bucket_cap_mb`` does to ``model``'s gradients (chapter 3 runs
    ``ConvNet`` at 0.25 MiB beside the 25 MiB cap): "chapter 3 runs `ConvNet` at 0.25 MiB too, where its
    1.44 MiB of gradients make 3 buckets"."""
    buckets = len(ddp_buckets(model, bucket_cap_mb))
    return {"bucket_split": (
        f"chapter 3 runs `{model}` at {bucket_cap_mb:g} MiB too, where its {_mib(gradient_bytes(model))} of "
        f"gradients make {buckets} bucket{'' if buckets == 1 else 's'}"
    )}  # fmt: skip


def rule_sentences(conditions: pd.DataFrame, example: str = "AWS p5.48xlarge") -> dict[str, str]:
    """Per model, what each eight-GPU machine needs for both conditions (``rule.condition_table``),
    with its band, against the training set; ``rule_short`` for the takeaway, ``rule_closing`` for the
    section's last sentence and ``one_bucket_models`` for its opening.

    A model whose gradients fit one DDP bucket never hides its all-reduce, so no global batch meets both:
    it is said so, and the models are told apart by what that all-reduce costs beside the step per GPU
    at the chapter's global batch (where ``condition_table`` was given one; ``example`` is the machine
    whose two times are named) and by where that per-GPU batch stands against b*_floor."""
    texts, short, single, floors, beside = {}, [], [], [], {}
    machines = len(set(conditions["machine"])) if len(conditions) else 0
    for name in ("LinearNet", "ConvNet"):
        rows = conditions[conditions["model"] == name]
        one = len(rows) > 0 and "buckets" in rows and rows["buckets"].eq(1).all()
        if one:
            single.append(name)
            paid = _paid_beside(rows)
            opening = (
                f"`{name}`: its {_mib(rows['gradient_bytes'].iloc[0])} of gradients make one DDP bucket at "
                f"the {BUCKET_CAP_MB} MiB cap the step predictions assume, so no per-GPU batch hides its "
                "all-reduce: every step pays all of it after backward"
            )
            if paid is None:
                tails = banded(rows, "tail_seconds", 1e3)
                after = [f"{t} ms on {machine}" for machine, t in zip(rows["machine"], tails, strict=True)]
                opening += f", {listed(after)}."
            else:
                ratios, at = paid
                beside[name] = ratios
                named = rows[rows["machine"] == example] if example in set(rows["machine"]) else rows.iloc[:1]
                pair = (f"{significant(named['tail_seconds'].iloc[0] * 1e3)} ms against "
                        f"{significant(named['compute_seconds'].iloc[0] * 1e3)} ms on "
                        f"{named['machine'].iloc[0]}")  # fmt: skip
                opening += (f". {at[0].upper()}{at[1:]} it lasts {as_long_as(ratios)} each GPU's step "
                            "without it, its host's issue and its compute (central values over the "
                            f"{len(rows)} machines; {pair}).")  # fmt: skip
            within, never = _against(rows, "floor against the training set")
            fits = fits_phrase(within, never, len(rows))
            texts[f"rule_{name.lower()}"] = (
                f"{opening} {_floor_reading(rows)}. The {TRAIN_CLIPS:,} clips hold the global batch that "
                f"outgrows it {fits}."
            )
            floors.append(f"for `{name}` {fits}")
            continue
        needs = banded(rows, "global_batch", whole=True)
        parts = [f"{machine} needs a global batch of {batch}: {fits}"
                 for machine, batch, fits in zip(rows["machine"], needs, rows["against the training set"],
                                                 strict=True)]  # fmt: skip
        texts[f"rule_{name.lower()}"] = f"`{name}`: " + "; ".join(parts) + "." if parts else ""
        if len(rows):
            within, never = _against(rows, "against the training set")
            fits = fits_phrase(within, never, len(rows))
            short.append(f"`{name}` fits within the {TRAIN_CLIPS:,} clips {fits}")
    if single:
        if len(single) == 1:
            said = (f"`{single[0]}`'s all-reduce cannot hide (one DDP bucket holds it at the {BUCKET_CAP_MB} "
                    "MiB cap), so every step pays it after backward")  # fmt: skip
        else:
            said = (f"Neither model's all-reduce can hide (one DDP bucket each at the {BUCKET_CAP_MB} MiB "
                    "cap), so every step pays it after backward")  # fmt: skip
        if len(beside) == len(single):
            at = _paid_beside(conditions[conditions["model"].isin(single)])[1]
            lasts = [f"{as_long_as(beside[name])} `{name}`'s" for name in single]
            said += f": {at} it lasts " + listed(lasts) + (" step per GPU" if len(lasts) == 1 else "")
            if len(lasts) > 1:
                said = said.replace(lasts[0], lasts[0] + " step per GPU", 1)
        short.append(f"{said}; the {TRAIN_CLIPS:,} clips hold the global batch that outgrows the fixed cost "
                     + "; ".join(floors))  # fmt: skip
    texts["rule_short"] = "; ".join(short) + "." if short else ""
    texts["one_bucket_models"] = _one_bucket_models(single, machines)
    texts["rule_closing"] = _closing(conditions, beside)
    several = conditions[conditions["buckets"] > 1] if "buckets" in conditions else conditions
    edge = several[several["hide_low"] <= 1]
    notes = []
    if single:
        notes.append(
            "For a one-bucket model the first condition is therefore a cost, not a threshold: the table sets "
            "that cost beside the compute it is paid on, and the step predictions of 5.4 weigh the two."
        )
        notes.append(first_bucket_note(single))
    if len(edge):
        notes.append(
            f"At the band's edge on {listed(sorted(set(edge['machine'])))}, even a one-sample backward "
            f"hides the all-reduce of every bucket but the last ({HIDE} = 1), so there only the second "
            "condition decides."
        )
    texts["hide_note"] = " ".join(note for note in notes if note)
    return texts


def _one_bucket_models(single: list[str], machines: int) -> str:
    """ "both of the book's models do" (or the one that does) at the cap the step predictions assume, for
    the section's opening; "" where no model makes one bucket."""
    if not single or not machines:
        return ""
    who = "both of the book's models do" if len(single) == 2 else f"`{single[0]}` does"
    return f"as {who} at the {BUCKET_CAP_MB} MiB cap the step predictions assume"


def _closing(conditions: pd.DataFrame, beside: dict[str, list[float]]) -> str:
    """The section's last sentence: what more GPUs need, then each model told apart by its all-reduce after
    backward against its step per GPU without it (one bucket) or its b*_hide (several), and by b*_floor,
    with what that means at the chapter's global batch (on how many machines, where they disagree)."""
    rule = (
        "That is the book's answer in one table: more GPUs help a model whose compute per GPU outlasts the "
        "all-reduce left after backward (all of it with one bucket; with several, once the per-GPU batch "
        f"reaches {HIDE}, only the last bucket's) and outgrows the fixed cost ({FLOOR}), at a global batch "
        "the data can fill — a model of many FLOPs per gradient byte, on a link fast enough for its "
        "gradients."
    )
    parts, readings = [], []
    for name in ("LinearNet", "ConvNet"):
        rows = conditions[conditions["model"] == name]
        if rows.empty or not {"floor", "buckets", "hide"} <= set(rows):
            continue
        floor = f"its {FLOOR} is {_span(rows['floor'], whole=True)} per GPU"
        if name in beside:
            parts.append(f"`{name}`'s all-reduce after backward lasts {as_long_as(beside[name])} its step "
                         f"per GPU without it and {floor}")  # fmt: skip
            above = rows["per_gpu_batch"] >= rows["floor"]
            if above.all() and max(beside[name]) < 1:
                readings.append(f"`{name}` divides its work over the GPUs")
            elif not above.any():
                waits = ", then waits for an all-reduce that can outlast that step" if max(
                    beside[name]) >= 1 else ""  # fmt: skip
                readings.append(f"`{name}` mostly repeats its fixed cost on every GPU{waits}")
            elif not above.all():
                outgrown = f"{int(above.sum())} of {len(rows)} machines"
                readings.append(f"`{name}` outgrows its fixed cost on {outgrown} and not on the others")
        elif rows["buckets"].gt(1).all():
            hide = _span(rows["hide"], whole=True)
            parts.append(f"`{name}` hides all but its last bucket from {HIDE} = {hide} per GPU and {floor}")
    if not parts:
        return rule
    said = f"{rule} Here {'; '.join(parts)} (central values)."
    if readings:
        at = _paid_beside(conditions[conditions["model"].isin(beside)])[1]
        said += f" {at[0].upper()}{at[1:]}, {'; '.join(readings)}."
    return said
