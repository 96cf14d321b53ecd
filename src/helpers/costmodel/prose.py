"""What chapter 5 says in words (chapter 5): every sentence the chapter glues into its prose, built from the
cost model's tables, so that each claim follows from the numbers beside it and none is typed by hand.

Each function takes the frames the chapter computes and returns ``{glue name: text}``; the chapter glues
them in a hidden cell (``helpers.chapter.glue_all``). A verdict is worded from the verdict columns of
``recommend.summarize`` and ``seed.seed_verdict_table``, which hold only over their whole band.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers import stats
from helpers.batchsize import B_KNEE, S_MIN
from helpers.costmodel import configurations as configs
from helpers.costmodel.gpus import (
    gradient_bytes,
    layer_costs,
    ops_per_step,
    roofline_band,
    training_flops_per_sample,
)
from helpers.costmodel.recommend import (
    fastest_batches,
    headline,
    result_band,
    side,
    time_to_result,
)
from helpers.costmodel.seed import SEED_TRAFFIC
from helpers.costmodel.specs import GPUS, OP_MEASURED_GPU, OP_OVERHEAD
from helpers.costmodel.validation import link_band_percent
from helpers.ddp import ddp_bucket_bytes
from helpers.stats import PARAGRAPH_BREAK, listed, plural, significant
from helpers.train import counted

WHATEVER = " whatever the inputs"
BOUNDS = {"compute": "arithmetic", "memory": "memory traffic", "host": "the host issuing ops"}
METHOD_NAMES = {"ddp_no_overlap": "DDP without overlap", "ddp_overlap": "DDP with overlap",
                "dataparallel": "DataParallel"}  # fmt: skip


def short_verdict(verdict: str) -> str:
    """ "faster whatever the inputs" stays; "depends on …: measure it with …" becomes "depends on …" (a
    colon inside what it depends on, "…: 16 of the 64 combinations …)", stays)."""
    return verdict.split(": measure ", 1)[0]


def loss_sentences(tested: pd.DataFrame) -> dict[str, str]:
    """The loss model's out-of-sample test (``lossfit.out_of_sample``) in words: how many curves tested it,
    the range of its errors with their signed median (a bias where they lean one way; each curve's error is
    in the chapter's folded table); ``loss_error_brief``, the answer box's, gives the signed median alone
    where there is one."""
    if tested.empty:
        unknown = "an unknown amount (no out-of-sample test in this store)"
        return {
            "loss_tested": "no curve",
            "loss_error_range": unknown,
            "loss_error_brief": unknown,
        }
    size = tested["error (%)"].abs().dropna()
    never = len(tested) - len(size)
    if size.empty:
        spread = "unknown: the fit never reaches the target on any of them"
    else:
        spread = f"{size.min():.0f} % to {size.max():.0f} %" if len(size) > 1 else f"{size.max():.0f} %"
    brief = spread
    errors = tested["error (%)"].dropna()
    if len(errors) > 1:
        later, median = int((errors > 0).sum()), f"{stats.signed(errors.median(), 0)} %"
        spread += f" (median {median}; {later} of {len(errors)} predicted later than they came)"
        share = f"all {later}" if later == len(errors) else f"{later} of {len(errors)}"
        brief = f"a median of {median} (too late on {share})"
    if never and not size.empty:
        failed = f", and on {never} the fit never reaches the target (a failed prediction)"
        spread, brief = spread + failed, brief + failed
    return {
        "loss_tested": counted(len(tested), "curve"),
        "loss_error_range": spread,
        "loss_error_brief": brief,
    }


def calibration_note(compute: pd.DataFrame, models) -> dict[str, str]:
    """What the compute lines (``timemodel.fit_compute``) can and cannot say: slopes not resolved,
    LinearNet's implied rate that is no FLOP rate, fixed costs consistent with zero."""
    notes = []
    for (name, threads), fit in compute.iterrows():
        if not fit.slope_resolved:
            notes.append(
                f"`{name}`'s slope at {counted(threads, 'thread')} is not resolved (its range reaches zero): "
                f"the per-sample work hides in the noise of the {fit.intercept_seconds:.3g} s fixed cost."
            )
    if "LinearNet" in models:
        weights = gradient_bytes("LinearNet") / 1e6
        notes.append(
            f"A slope is a FLOP rate only where the step is compute-bound. `LinearNet`'s first matrix "
            f"product streams its {weights:.1f} MB of weights whatever the batch, so at these batches extra "
            "samples ride along almost free and its implied GFLOP/s is no FLOP rate (it can exceed what the "
            "cores can do); its fixed seconds are what the model relies on."
        )
    for (name, threads), fit in compute[compute["intercept_low"] <= 0].iterrows():
        notes.append(
            f"`{name}` at {counted(threads, 'thread')} has a fixed cost consistent with zero "
            f"(0–{fit.intercept_high:.2g} s): its step is all per-sample work."
        )
    return {"calibration_note": " ".join(notes)}


def _measured_buckets(rows: pd.DataFrame, gaps: pd.Series) -> dict:
    """The DDP configurations measured (``rows`` of ``validation.validate``, with their bucket cap and
    compression) split by how many DDP buckets their gradients make: ``one`` and ``several`` name them
    ("`LinearNet`", "`ConvNet` at 25 MiB", "`ConvNet` at 0.25 MiB (3 buckets)"); ``several_gap`` is the
    largest relative difference (%) of the two DDP methods' predictions among the several-bucket ones
    (``gaps``, per measurement). Empty where the rows carry no bucket cap."""
    if "bucket_cap_mb" not in rows or rows.empty:
        return {}
    counts: dict[str, dict[float, int]] = {}
    many = []
    for measurement, row in rows.drop_duplicates("measurement").set_index("measurement").iterrows():
        compression = row.get("compression") if isinstance(row.get("compression"), str) else None
        count = len(ddp_bucket_bytes(row["model"], float(row["bucket_cap_mb"]), compression))
        counts.setdefault(row["model"], {})[float(row["bucket_cap_mb"])] = count
        if count > 1:
            many.append(measurement)
    one, several = [], []
    for model, caps in counts.items():
        single = sorted(cap for cap, count in caps.items() if count == 1)
        if single:
            at = "" if len(single) == len(caps) else " at " + listed([f"{cap:g}" for cap in single]) + " MiB"
            one.append(f"`{model}`{at}")
        several += [f"`{model}` at {cap:g} MiB ({count} buckets)" for cap, count in sorted(caps.items())
                    if count > 1]  # fmt: skip
    return {"one": one, "several": several,
            "several_gap": float(gaps.loc[many].max() * 100) if many else 0.0}  # fmt: skip


def time_model_sentences(summary: pd.DataFrame, validated: pd.DataFrame) -> dict[str, str]:
    """Each method's error on its own (``validation.validation_summary``), whether the two DDP methods
    differ at all here, and which methods are biased: all predictions on one side and none inside the
    measured fastest–slowest range. ``bias_short`` is the takeaway's one-line form."""
    if summary.empty:
        unknown = "an unknown amount (no multi-rank measurement here)"
        return {"time_model_errors": unknown, "ddp_methods_note": "", "bias_note": "", "link_band_note": "",
                "bias_short": "not tested here (no multi-rank measurement)"}  # fmt: skip
    by = summary.set_index(["model", "method"])
    ddp = [m for m in ("ddp_no_overlap", "ddp_overlap") if m in set(summary["method"])]
    gap, buckets = None, {}
    if len(ddp) == 2:
        rows = validated[validated["method"].isin(ddp)]
        pairs = rows.pivot(index="measurement", columns="method", values="predicted_seconds")
        gaps = pairs.max(axis=1) / pairs.min(axis=1) - 1
        gap = float(gaps.max() * 100)
        buckets = _measured_buckets(rows, gaps)
    same = gap is not None and gap < 1
    label = {**METHOD_NAMES, **({"ddp_no_overlap": "DDP"} if same else {})}
    parts = []
    for name in dict.fromkeys(summary["model"]):
        methods = [
            m for m in summary.loc[summary["model"] == name, "method"] if not (same and m == "ddp_overlap")
        ]
        parts.append(
            f"`{name}` " + ", ".join(f"{label[m]} {by.loc[(name, m), 'mape_percent']:.0f} %" for m in methods)
        )
    one, several = buckets.get("one", []), buckets.get("several", [])
    identical = (
        f"For {listed(one)} they are identical by construction: the gradients make one DDP bucket, handed "
        "over when backward ends, so both put its whole all-reduce after backward."
        if one
        else ""
    )
    if same:
        methods_note = (
            f"On this CPU DDP with and without overlap predict the same step (to {gap:.1f} %); they "
            f"count as one method here. {identical}"
        )
        if several:
            methods_note += (
                f" For {listed(several)} they differ by at most {buckets['several_gap']:.1f} %: the "
                "buckets' all-reduces are short next to the compute, so hiding all but the last changes "
                "little."
            )
    else:
        methods_note = f"DDP with and without overlap differ by up to {gap:.0f} % here." if gap else ""
        if gap and one:
            methods_note += f" {identical}"
    methods_note = methods_note.strip()
    biased = []
    for (name, method), row in by.iterrows():
        if (same and method == "ddp_overlap") or row["points"] < 2 or row.get("within_measured_range", 1):
            continue
        side = {row["points"]: "above", 0: "below"}.get(row["predictions_above"])
        if side:
            biased.append((name, label[method], side, row["mean_error_percent"]))
    if biased:
        notes = [f"`{name}`'s {method} predictions all lie {side} the measurements, none inside its "
                 f"fastest–slowest range (mean error {stats.signed(error, 0)} %): a bias, not noise."
                 for name, method, side, error in biased]  # fmt: skip
        notes.append(
            "On a CPU, ranks and replicas share the cores and the memory system with each other and with "
            "Gloo's all-reduce, which a calibration made one process at a time does not see."
        )
        short = "; ".join(
            f"`{name}` {method} ({stats.signed(error, 0)} %, all {side})"
            for name, method, side, error in biased
        )
    else:
        notes = ["No method's predictions lie all on one side beyond the measured spread."]
        short = "none"
    return {"time_model_errors": "; ".join(parts), "ddp_methods_note": methods_note,
            "bias_note": " ".join(notes), "bias_short": short,
            "link_band_note": link_band_note(validated)}  # fmt: skip


def link_band_note(validated: pd.DataFrame, noun: str = "overlapped-DDP measurement") -> str:
    """How far chapter 4's uncertain link (the lower-quartile fit against the fit to medians) moves the DDP
    predictions, and how many overlapped-DDP measurements (``noun``) lie inside that band, with what a band
    on one side of predictions already above every measurement means; "" without DDP rows."""
    if validated.empty or "predicted_high_seconds" not in validated:
        return ""
    rows = validated[validated["method"].str.startswith("ddp")]
    if rows.empty:
        return ""
    width = link_band_percent(rows)
    lead = "Chapter 4's link fitted to each size's median instead of its lower quartile"
    if width.max() < 1:
        moved = (
            (rows["predicted_high_seconds"] - rows["predicted_low_seconds"]) / rows["step_seconds"]
        ).max()
        return (
            f"{lead} moves no DDP prediction here by 1 % or more, nor any error above by more than "
            f"{moved * 100:.1f} percentage points."
        )
    overlapped = rows[rows["method"] == "ddp_overlap"]
    inside = overlapped["step_seconds"].between(
        overlapped["predicted_low_seconds"], overlapped["predicted_high_seconds"]
    )
    holds = (
        f"{'holds' if inside.all() else 'does not hold'} the measured step of the one {noun}"
        if len(overlapped) == 1
        else f"holds the measured step at {int(inside.sum())} of the {counted(len(overlapped), noun)}"
    )
    text = (
        f"{lead} moves the DDP predictions by up to {width.max():.1f} % (median {width.median():.1f} %); "
        f"the band between the two fits {holds}."
    )
    above = (rows["predicted_low_seconds"] > rows["step_seconds"]).all()
    one_sided = (rows["predicted_seconds"] == rows["predicted_low_seconds"]).all()
    if above and one_sided:
        text += (
            " The fit to medians is the slower link, and every prediction is already above its measurement: "
            "the link's uncertainty only widens these errors and cannot explain them."
        )
    return text + " The errors above are the lower-quartile fit's, the one the model uses."


def flop_sentences(models) -> dict[str, str]:
    """Each model's training FLOPs per sample and its forward multiply-adds (as FLOPs), with separators."""
    texts = {}
    for name in models:
        rows = layer_costs(name)
        forward = rows.loc[rows["phase"] == "forward", "multiply_add_flops_per_sample"].sum()
        texts[f"{name.lower()}_flops"] = f"{training_flops_per_sample(name):,}"
        texts[f"{name.lower()}_forward_macs"] = f"{int(forward):,}"
    return texts


def roofline_example(models, batch: int, gpu: str = "H100 SXM 80 GB") -> dict[str, str]:
    """Each model's one-GPU step at ``batch`` on ``gpu``: its band, central value and what bounds it."""
    parts = []
    for name in models:
        row = roofline_band(name, batch, GPUS[gpu])
        parts.append(
            f"`{name}`'s step lies between {row['step_seconds_low'] * 1e3:.3g} and "
            f"{row['step_seconds_high'] * 1e3:.3g} ms (central {row['step_seconds'] * 1e3:.3g} ms, bound by "
            f"{BOUNDS[row['bound_by']]})"
        )
    return {"roofline_example": "; ".join(parts)}


FLAT_STEP = 1.5  # a step that grows less than this over a ten-fold range of batches or more is flat


def below_or_above(low: float, high: float) -> str:
    """A range of errors (%) in words: "45–66 % below", "5–20 % above", "from 10 % below to 5 % above"."""
    if high < 0:
        return f"{-high:.0f}–{-low:.0f} % below"
    if low > 0:
        return f"{low:.0f}–{high:.0f} % above"
    return f"from {-low:.0f} % below to {high:.0f} % above"


def host_band() -> str:
    """The roofline's host time per op as prose: "44–114 µs (median 67 µs)"."""
    low, central, high = (value * 1e6 for value in (OP_OVERHEAD.low, OP_OVERHEAD.central, OP_OVERHEAD.high))
    return f"{low:.0f}–{high:.0f} µs (median {central:.0f} µs)"


def roofline_error_sentences(errors: pd.DataFrame) -> dict[str, str]:
    """The roofline against every single-GPU step measured (``gpus.roofline_error``), per GPU and model:
    how far its central value lies below or above the measured steps (as a percentage and as a ratio), and
    at how many batches the measurement lay inside the band. Where the measured step hardly grows with the
    batch while the roofline calls most of those steps the host's and falls short of every one, it gives
    the host time per op the measurement implies at the roofline's op count; on the GPU whose host the
    roofline's time per op was measured on, that the check of host-bound steps is in sample there. Then
    what replaces the roofline for that GPU, and that every other GPU is still priced by it; and the host
    band as prose (``roofline_host_band``)."""
    if errors.empty:
        unchecked = "No GPU has been measured by this study yet: the roofline is unchecked."
        return {"roofline_error_note": unchecked, "roofline_error_short": "unchecked (no GPU measured yet)",
                "roofline_host_band": host_band()}  # fmt: skip
    notes, shorts = [], []  # paragraphs; a GPU's per-model readings are one list, an item per model
    for gpu, measured in errors.groupby("gpu", sort=False):
        notes.append(f"Against one {gpu}, measured by this study:")
        parts, items = [], []
        for model, rows in measured.groupby("model", sort=False):
            low, high, count = rows["error_percent"].min(), rows["error_percent"].max(), len(rows)
            inside = int(rows["within_band"].sum())
            batches, steps = rows["batch"], rows["step_seconds"] * 1e3
            ratio = rows["step_seconds"] / rows["roofline_seconds"]
            span = f"{batches.min()} to {batches.max()}"
            items.append(
                f"`{model}`'s measured step ({steps.min():.3g}–{steps.max():.3g} ms at {count} batches from "
                f"{span}) is {ratio.min():.2f}× to {ratio.max():.2f}× the roofline's central value, which "
                f"lies {below_or_above(low, high)} it; the measurement is inside the band at {inside} of "
                f"{count} batches."
            )
            host = [roofline_band(model, int(b), GPUS[gpu])["bound_by"] == "host" for b in batches]
            flat = steps.max() / steps.min() < FLAT_STEP and batches.max() / batches.min() >= 10
            if flat and high < 0 and sum(host) > count / 2:
                ops = ops_per_step(model)
                bound = rows[host]
                items[-1] += (
                    f" That step hardly grows over a {batches.max() / batches.min():.0f}-fold range of "
                    "batches, the mark of a step bound by the host issuing ops, and the roofline too calls "
                    f"{sum(host)} of the {count} batches host-bound; but at {OP_OVERHEAD.low * 1e6:.0f}–"
                    f"{OP_OVERHEAD.high * 1e6:.0f} µs per op its band there reaches at most "
                    f"{bound['roofline_high'].max() * 1e3:.3g} ms. At the roofline's {ops} ops per step the "
                    f"measured step is {steps.min() * 1e3 / ops:.0f}–{steps.max() * 1e3 / ops:.0f} µs per op."
                )
            measured_one = "" if parts else " the measured one"
            parts.append(f"{below_or_above(low, high)}{measured_one} for `{model}` ({inside} of {count} "
                         "batches inside the band)")  # fmt: skip
        notes.append("\n".join(f"- {item}" for item in items))
        in_sample = gpu == OP_MEASURED_GPU and OP_OVERHEAD.measured
        caveat = (
            ", in sample for the host (its time per op comes from this GPU's profiles)" if in_sample else ""
        )
        shorts.append(f"on one {gpu}, the roofline's central step is " + "; ".join(parts) + caveat)
        if in_sample:
            notes.append(
                f"The roofline's host time per op, {host_band()}, was measured on the {gpu} machine's host, "
                "so where its steps are host-bound the roofline is checked here in sample."
            )
        if measured.groupby("model")["batch"].nunique().min() >= 2:  # a line needs two batches
            notes.append(
                f"Straight lines fitted through these steps (step time against batch, per model) replace the "
                f"roofline for the {gpu} in every prediction of this chapter; their band pairs the fastest "
                "one-GPU steps with the slowest k-GPU ones, and the reverse."
            )
    if (errors["error_percent"] < 0).all():
        notes.append("Every other GPU of this chapter is still priced by the roofline, which fell short of "
                     "every step measured here.")  # fmt: skip
    return {"roofline_error_note": PARAGRAPH_BREAK.join(notes), "roofline_error_short": "; ".join(shorts),
            "roofline_host_band": host_band()}  # fmt: skip


def answer(predicted: pd.DataFrame, batch: int, machine: str = "AWS p5.48xlarge") -> dict[str, str]:
    """The chapter's answer: per model, ``headline`` and both verdicts on ``machine`` at ``batch``, and for
    the answer box a brief of them (``answer_<model>_brief``: the central figures and the speed verdict);
    and the dollar verdict over every multi-GPU machine predicted at that batch, worded from the verdicts,
    with its first sentence alone for the box (``dollar_headline``)."""
    texts = {}
    at_batch = predicted[predicted["global_batch"] == batch]
    for name in ("LinearNet", "ConvNet"):
        rows = at_batch[(at_batch["model"] == name) & (at_batch["machine"] == machine)]
        if rows.empty:
            texts[f"answer_{name.lower()}"] = "not predicted here (not among the models, or a batch below 8)"
            texts[f"answer_{name.lower()}_verdict"] = "no verdict"
            texts[f"answer_{name.lower()}_brief"] = "not predicted here"
            continue
        row = rows.iloc[0]
        texts[f"answer_{name.lower()}"] = headline(predicted, name, machine, batch)
        texts[f"answer_{name.lower()}_verdict"] = both_verdicts(
            short_verdict(row.faster), short_verdict(row.dollars)
        )
        brief = headline(predicted, name, machine, batch, bands=False)
        texts[f"answer_{name.lower()}_brief"] = f"{brief}: {short_verdict(row.faster)}"
    money, speed = dollar_sentences(at_batch[at_batch["gpus"] > 1])
    texts["dollar_verdict"] = f"{money} {speed}".strip()
    texts["dollar_headline"] = money
    return texts


def both_verdicts(speed: str, dollars: str) -> str:
    """Two verdicts in one phrase: "slower and dearer whatever the inputs" where both hold over the band,
    else each in full ("depends on …, and dearer whatever the inputs")."""
    if speed.endswith(WHATEVER) and dollars.endswith(WHATEVER):
        return f"{speed.removesuffix(WHATEVER)} and {dollars.removesuffix(WHATEVER)}{WHATEVER}"
    return f"{speed}, and {dollars}"


def hour_value_sentence(at_batch: pd.DataFrame, machine: str = "AWS p5.48xlarge") -> dict[str, str]:
    """``hour_value_answer``: per model, what an hour of waiting must be worth for ``machine`` to cost less
    in total per result than its one-GPU offer (``money.break_even_hour_value``), with its band, to the
    three significant digits of the renter table; and for the answer box its brief, the central values
    alone (``hour_value_brief``)."""
    parts, pays, never = [], [], []
    mine = at_batch[(at_batch["machine"] == machine) & (at_batch["gpus"] > 1)]
    for row in mine[mine["cost_multiplier"].notna()].itertuples():
        central, low, high = (row.hour_value_break_even, row.hour_value_break_even_low,
                              row.hour_value_break_even_high)  # fmt: skip
        if math.isinf(low):
            parts.append(f"`{row.model}` at no value of an hour, whatever the inputs")
            never.append((row.model, "whatever the inputs"))
        elif math.isinf(central):
            best = f"only at the inputs' most favourable end, from {significant(low)} dollars an hour"
            parts.append(f"`{row.model}` at no value of an hour at the central inputs, where it is no faster "
                         f"({best})")  # fmt: skip
            never.append((row.model, "at the central inputs"))
        else:
            band = (f"from {significant(low)} dollars to never" if math.isinf(high)
                    else f"{significant(low)}–{significant(high)} dollars")  # fmt: skip
            worth = f"more than {significant(central)} dollars"
            parts.append(f"`{row.model}` once an hour is worth {worth} ({band} over the inputs)")
            pays.append(f"for `{row.model}` once an hour of your waiting is worth {worth}")
    if not parts:
        none = f"{machine} has no one-GPU offer to set its total cost against."
        return {"hour_value_answer": none, "hour_value_brief": none}
    gpus = int(mine["gpus"].iloc[0])
    cheaper = f"the {gpus} GPUs of {machine} cost less per result than its one-GPU offer"
    if pays:  # what pays first, then where it never does: "never" leads no clause
        brief = f"The {gpus} GPUs of {machine} cost less per result than its one-GPU offer " + "; ".join(pays)
        brief += "".join(f"; for `{model}` they never do, {which}" for model, which in never)
    else:
        never_for = "; ".join(f"for `{model}` {which}" for model, which in never)
        brief = f"The {gpus} GPUs of {machine} never cost less per result than its one-GPU offer, {never_for}"
    return {
        "hour_value_answer": "Counting your waiting too (machine dollars + hours × what an hour is worth to "
        f"you), {cheaper}: for " + "; for ".join(parts) + ".",
        "hour_value_brief": brief + ".",
    }


def dollar_verdict(several: pd.DataFrame) -> str:
    """What more GPUs buy over all ``several`` (multi-GPU rows of ``summarize``): ``dollar_sentences``."""
    return " ".join(dollar_sentences(several)).strip()


def dollar_sentences(several: pd.DataFrame) -> tuple[str, str]:
    """Two sentences on what more GPUs buy over all ``several`` (multi-GPU rows of ``summarize``): dearer
    or not per result; and faster or not, per model; each only as far as the verdicts hold."""
    if several.empty:
        return "No multi-GPU machine is predicted at this batch.", ""
    priced = several[~several["dollars"].str.startswith("no price")]
    dearer = priced["dollars"].eq("dearer" + WHATEVER)
    if len(priced) and dearer.all():
        money = (
            "none of the multi-GPU machines whose GPU is also rented singly gives a cheaper result than one "
            "of those GPUs, whatever the inputs"
        )
    elif priced["dollars"].eq("no dearer" + WHATEVER).any():
        cheap = listed(sorted(set(priced.loc[priced["dollars"].eq("no dearer" + WHATEVER), "machine"])))
        money = f"{cheap} give a result no dearer than one GPU, whatever the inputs"
    else:
        money = "whether a result costs more depends on inputs not known yet (see the table)"
    speed = []
    for name, rows in several.groupby("model", sort=False):
        faster = rows["faster"].map(side)
        if faster.eq("faster").all():
            speed.append(f"`{name}` runs faster on every one")
        elif faster.eq("slower").all():
            speed.append(f"`{name}` runs slower on every one")
        else:
            sides = [f"{word} on {n}" for word in ("faster", "slower") if (n := faster.eq(word).sum())]
            open_ = int(faster.isna().sum())
            if sides:
                told = f"`{name}` runs {listed(sides)}"
                told += f", and on {open_} its verdict depends on inputs not yet measured" if open_ else ""
            else:
                where = "every one" if open_ == len(rows) else str(open_)
                told = f"`{name}`'s verdict depends on inputs not yet measured on {where}"
            speed.append(told)
    machines, unpriced = (
        several["machine"].nunique(),
        several.loc[~several.index.isin(priced.index), "machine"],
    )
    without = f" ({unpriced.nunique()} of them with no one-GPU price to compare)" if len(unpriced) else ""
    counted = f"Of the {machines} multi-GPU {plural(machines, 'machine')} predicted{without}, " + "; ".join(
        speed
    )
    counted += "."
    return f"On the machines that can be rented here, {money}.", counted


NAMED_AT_MOST = 3  # machines a sentence names; more are counted (the predictions table lists them)


def speedup_note(at_batch: pd.DataFrame, models) -> dict[str, str]:
    """Per model, which multi-GPU machines are faster, slower or undecided at the chapter's batch, and the
    measurements that would decide the undecided ones. A verdict shared by more than ``NAMED_AT_MOST``
    machines is counted, not listed: the folded table above names each machine's."""
    notes, tools = [], {}
    for name in models:
        several = at_batch[(at_batch["model"] == name) & (at_batch["gpus"] > 1)]
        for verdict in several["faster"]:
            if ": measure " in verdict:
                measured_by = verdict.split(": measure ")[1].split(" with ", 1)[1]
                tools.update(dict.fromkeys(measured_by.split("; ")))
        groups = several.groupby(several["faster"].map(short_verdict), sort=False)["machine"].agg(list)

        def where(machines: list[str], total: int = len(several)) -> str:
            if len(machines) == total:
                return "on both multi-GPU machines" if total == 2 else f"on all {total} multi-GPU machines"
            return (
                f"on {listed(machines)}"
                if len(machines) <= NAMED_AT_MOST
                else f"on {len(machines)} of the {total} multi-GPU machines"
            )

        notes.append(f"`{name}`: " + "; ".join(f"{v} {where(m)}" for v, m in groups.items()) + ".")
    if tools:
        notes.append(f"What decides the rest is measured by {stats.listed(list(tools))}.")
    return {"speedup_note": " ".join(notes)}


def price_per_gpu_sentences() -> dict[str, str]:
    """How each k-GPU machine's price per GPU compares with the one-GPU offer of its GPU: where it is the
    same, a result costs k ÷ speed-up times the one-GPU offer's; where it is higher, that premium times
    k ÷ speed-up; and which machines have no one-GPU offer to compare with."""
    same, premiums, alone = [], [], []
    for config in configs.CONFIGURATIONS:
        single = configs.baseline(config)
        if config.gpus == 1 or config.hourly_price is None:
            continue
        if single is None:
            alone.append(config.name)
            continue
        premium = (config.hourly_price / config.gpus) / single.hourly_price
        if premium == 1:
            same.append(config.name)
        else:
            premiums.append(f"{config.name} {float(premium):.2f}×")
    text = ""
    if same:
        text = (f"Where a machine charges the same per GPU as its one-GPU offer ({listed(same)}) that is "
                "\\(k\\) ÷ speed-up, so \"faster and no dearer\" would need perfect scaling.")  # fmt: skip
    if premiums:
        text += (
            " Where it charges more per GPU, it is that premium times \\(k\\) ÷ speed-up (per GPU, against "
            f"the one-GPU offer: {listed(premiums)})."
        )
    if alone:
        text += f" {listed(alone)} have no one-GPU offer of their GPU to compare with."
    return {"price_per_gpu_note": text.strip()}


def relation_sentences(relations: dict, per_scenario: pd.DataFrame, models) -> dict[str, str]:
    """Chapter 6's steps-versus-batch (``recommend.steps_relation``) in words, and, per model, the machine
    and global batch that reach its target soonest with the band of that time."""
    measured = [name for name in models if name in relations]
    if not measured:
        return {
            "relation_note": "This store holds no chapter 6 measurement (no `steps_to_target` records), so "
            "no time to a result is computed here: run chapter 6 into it first.",
            "time_to_result_note": "Time to a result with a growing batch needs chapter 6's measurement, "
            "absent here.",
        }
    texts, results = [], []
    for name in measured:
        r = relations[name]
        texts.append(
            f"For `{name}` it found {S_MIN} = {r['s_min']:.3g} steps and a knee {B_KNEE} = {r['b_crit']:.3g} "
            f"with the {r['rule']} learning-rate rule (training loss {r['target_loss']} on "
            f"{r['train_samples']} clips, global batches {r['smallest_batch']}–{r['largest_batch']}). "
            f"Above {r['largest_batch']} the relation would be an extrapolation, so the times below stop "
            "there, and their band spans the relation fitted to the fewest and to the most steps over "
            "seeds as well as the step's inputs. The steps come from chapter 6's runs and each step's time "
            "is predicted for its GPU, so the times are the relation's consequence, not a measurement."
        )
        timed = time_to_result(per_scenario[per_scenario["model"] == name], r)
        fastest = fastest_batches(result_band(timed))
        top = fastest.iloc[0]
        band = f"{top['seconds_to_target_low']:.3g}–{top['seconds_to_target_high']:.3g} s"
        ties = fastest.iloc[1:][fastest.iloc[1:]["seconds_to_target_low"] < top["seconds_to_target_high"]]
        said = (
            f"to chapter 6's target, `{name}` is soonest at the central inputs on {top['machine']} at a "
            f"global batch of {int(top['global_batch'])}: {top['seconds_to_target']:.3g} s ({band})"
        )
        if top["global_batch"] >= r["largest_batch"]:
            said += ", the largest batch the relation covers, where the time is still falling"
        if len(ties):
            said += (
                ", but its band overlaps that of "
                + listed(ties["machine"].tolist()[:3] + ([f"{len(ties) - 3} more"] if len(ties) > 3 else []))
                + ", so no machine is soonest whatever the inputs"
            )
        results.append(said)
    others = [name for name in models if name not in relations]
    if others:
        texts.append(
            f"Chapter 6 measured no relation for {', '.join(others)}, so its time to a result is absent."
        )
    return {"relation_note": " ".join(texts),
            "time_to_result_note": "With the batch allowed to grow, " + "; ".join(results) + "."}  # fmt: skip


def seed_traffic_sentences(traffic: pd.DataFrame) -> dict[str, str]:
    """The seed's "50 MB × 2 transfers × 100 batches = 10 GB" against the exact bytes per GPU link and in
    all (``seed.seed_traffic``), and whether they agree within 10 %: a check that could fail."""
    quoted = SEED_TRAFFIC
    claimed, per_link, total = traffic["bytes per epoch"].iloc[:3]
    quote = (f"{quoted['megabytes']} MB × {quoted['transfers']} transfers × {quoted['batches']} batches = "
             f"{quoted['gigabytes']} GB")  # fmt: skip
    gap = (1 - per_link / claimed) * 100
    gradient = gradient_bytes("LinearNet") / 1e6
    agreement = ("The arithmetic agrees; it could have disagreed." if abs(gap) < 10
                 else "The arithmetic disagrees by more than the seed's rounding.")  # fmt: skip
    return {
        "seed_quote": f"the seed counts {quote}",
        "seed_traffic_note": (
            f"The seed's {quoted['gigabytes']} GB is what each GPU's link carries when the broadcast and the "
            f"reduce run as pipelined rings: the model gives {per_link / 1e9:.2f} GB, {gap:.1f} % less, the "
            f"seed's rounding of {gradient:.1f} MB of gradient to {quoted['megabytes']} MB. Between all four "
            f"GPUs {total / 1e9:.1f} GB move, three times as much: every other replica receives the "
            f"parameters and returns a gradient. {agreement}"
        ),
        "seed_traffic_short": (
            f"{per_link / 1e9:.2f} GB per GPU link per epoch against its {quoted['gigabytes']} GB"
        ),
    }


SEED_SAID = {"LinearNet": "slower", "ConvNet": "faster"}  # the seed's verdicts on four GPUs


def seed_verdict_sentence(verdicts: pd.DataFrame) -> dict[str, str]:
    """Per model, four GPUs against one over the seed's sweep (``seed.seed_verdict_table``), each verdict
    with the speed-ups of the batches it holds at (a "faster" never beside another batch's 0.39×), and
    whether each agrees with the seed's verdict at every batch over the whole band. Where the band crosses
    1 the verdict is "depends on the inputs", whatever it depends on: the table's notes say which input,
    batch by batch, so that the sentence stays one line per model."""

    def band(rows: pd.DataFrame) -> str:
        return f"{rows['speedup_low'].min():.3g}–{rows['speedup_high'].max():.3g}×"

    def word(verdict: str) -> str:
        return "depends on the inputs" if verdict.startswith("depends") else short_verdict(verdict)

    notes = []
    for name, rows in verdicts.groupby("model", sort=False):
        kinds = list(dict.fromkeys(rows["faster"].map(word)))
        if len(kinds) == 1:
            found = f"{kinds[0]} at every batch (speed-up {band(rows)} over the sweep and the band)"
        else:
            ordered = rows.sort_values("global_batch")
            batches = ordered["global_batch"].astype(int)
            runs = stats.batch_runs(zip(batches, ordered["faster"].map(word), strict=True))
            found = "mixed: " + "; ".join(
                f"{phrase} ({band(ordered[batches.between(first, last)])})"
                for phrase, (_, first, last) in zip(stats.run_phrases(runs), runs, strict=True)
            )
        notes.append(f"`{name}` on four GPUs against one: {found}")
    models = set(verdicts["model"])
    agree = []
    for name, said in SEED_SAID.items():
        if name in models and verdicts.loc[verdicts["model"] == name, "faster"].map(side).eq(said).all():
            agree.append(name)
    disagree = [name for name in SEED_SAID if name in models and name not in agree]
    if not disagree:
        ending = "Both agree with the seed's verdicts, over the whole band."
    else:
        ending = (f"The seed's verdict for {listed([f'`{n}`' for n in disagree])} is not confirmed at every "
                  "batch over the whole band: the table says where, and which input decides it.")  # fmt: skip
        if OP_OVERHEAD.measured:
            ending += (" The host time per op there is the H200 machine's measured range, lent to the seed's "
                       "workstation, whose own host and PyTorch were not measured.")  # fmt: skip
    return {"seed_verdict_note": "; ".join(notes) + ". " + ending,
            "seed_agrees": "agree" if not disagree else "do not all agree"}  # fmt: skip
