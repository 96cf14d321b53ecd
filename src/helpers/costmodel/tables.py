"""What chapter 5 shows (chapter 5): the cost model's frames as a reader reads them — human column names with
units, each banded figure as "central (lowest–highest)", and one frame where the chapter would otherwise
loop, filter and pivot in view."""

from __future__ import annotations

import math
import re

import pandas as pd
from IPython.display import Markdown

from helpers.costmodel import configurations, money, specs
from helpers.costmodel.prose import METHOD_NAMES, WHATEVER
from helpers.costmodel.recommend import (
    BASIS_WORDS,
    TRAIN_CLIPS,
    fastest_batches,
    measure_with,
    result_band,
    result_costs,
    time_to_result,
)
from helpers.costmodel.rule import FLOOR, HELD, HELD_OR_NOT, HIDE, NOT_HELD
from helpers.stats import MATTERS, signed, significant
from helpers.train import counted


def band_text(
    central: float, low: float, high: float, scale: float = 1.0, digits: int = 3, whole: bool = False
) -> str:
    """A value and its band as text, "17.3 (8.95–50.3)", times ``scale`` (1e3 for milliseconds), never in
    powers of ten ("0.0000736", "12,300"); ``whole`` numbers with thousands separators ("2,864
    (920–8,320)"), an infinite one "unbounded"; a missing central value "–" alone, and a value without a
    band (a measurement) alone. A value that is not 1 never prints as "1.00": it gets the digits that
    tell it from 1 ("1.004"), since a verdict beside it says which side of 1 the whole band lies on."""

    def text(value) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        if math.isinf(value):
            return "unbounded"
        if whole:
            return f"{value * scale:,.0f}"
        shown, more = significant(value * scale, digits), digits
        while float(shown.replace(",", "")) == 1 and abs(value * scale - 1) > 1e-9 and more < 6:
            more += 1
            shown = significant(value * scale, more)
        return shown

    if text(central) == "–" or text(low) == text(high) == "–":
        return text(central)
    return f"{text(central)} ({text(low)}–{text(high)})"


def banded(
    frame: pd.DataFrame, column: str, scale: float = 1.0, digits: int = 3, whole: bool = False
) -> pd.Series:
    """``column`` of ``frame`` and its band (``column``_low, ``column``_high) as text, row by row
    (``band_text``)."""
    triples = zip(frame[column], frame[f"{column}_low"], frame[f"{column}_high"], strict=True)
    return pd.Series([band_text(*triple, scale, digits, whole) for triple in triples], index=frame.index)


def said_in_headers(table: pd.DataFrame, column: str, headers: dict[str, str]) -> pd.DataFrame:
    """``table`` without ``column`` where every row has the same value, said instead in the ``headers``
    (``{header: new header}``, "{}" the value with separators); as it is where the rows differ."""
    values = table[column].unique()
    if len(values) != 1:
        return table
    return table.drop(columns=column).rename(
        columns={old: new.format(f"{int(values[0]):,}") for old, new in headers.items()}
    )


def prediction_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``summarize``'s rows for reading: the verdicts first, beside the machine (what a "depends (n)"
    depends on in ``table_notes``), then each banded column as "central (lowest–highest)"; a global batch
    every row shares goes into the per-GPU batch's header."""
    table = pd.DataFrame({  # the verdicts beside the machine, before the figures behind them
        "model": summary["model"], "machine": summary["machine"], "GPUs": summary["gpus"],
        "faster?": summary["faster"],
        **({"enough?": summary["enough"]} if summary["enough"].ne(summary["faster"]).any() else {}),
        "no dearer?": summary["dollars"],
        "global batch": summary["global_batch"], "per-GPU batch": summary["per_gpu_batch"],
        "step (ms)": banded(summary, "step_seconds", 1e3), "speed-up (×)": banded(summary, "speedup"),
        "cents per run": banded(summary, "dollars_per_run", 100),
        "dollars over one GPU's (×)": banded(summary, "cost_multiplier"),
        "basis": summary["basis"].map(BASIS_WORDS),
    })  # fmt: skip
    table = said_in_headers(table, "global batch", {"per-GPU batch": "per-GPU batch (of {})"})
    return depends_coded(table, [c for c in ("faster?", "enough?", "no dearer?") if c in table])


def renter_table(summary: pd.DataFrame, hour_value: float) -> pd.DataFrame:
    """Per multi-GPU machine with a one-GPU offer of its GPU: speed-up and dollars over that offer, what an
    hour of waiting must be worth for it to cost less in total ("never" where it is no faster), and, for a
    positive ``hour_value`` (dollars), the verdict for someone whose hour is worth that
    (``money.hour_value_verdict``; at 0 it is the dollars' verdict of the prediction table)."""
    priced = summary[(summary["gpus"] > 1) & summary["cost_multiplier"].notna()]
    worth = banded(priced, "hour_value_break_even").str.replace("unbounded", "never")
    worth[worth == "never (never–never)"] = "never"
    verdicts = [
        money.hour_value_verdict(hour_value, low, high)
        for low, high in priced[["hour_value_break_even_low", "hour_value_break_even_high"]].to_numpy()
    ]
    shown = pd.DataFrame({
        "model": priced["model"], "machine": priced["machine"],
        "speed-up (×)": banded(priced, "speedup"), "dollars (×)": banded(priced, "cost_multiplier"),
        "break-even value of your hour ($)": worth, f"at ${hour_value:g} an hour": verdicts,
    }).set_index(["model", "machine"])  # fmt: skip
    return shown if hour_value else shown.iloc[:, :-1]  # at 0 the verdict is the dollars' own


def cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """``result_costs`` for reading: seconds and cents (a result of these small models costs a fraction of
    a dollar) to three significant digits, as "central (lowest–highest)" where banded (``banded``)."""
    return pd.DataFrame({"model": costs["model"], "setup": costs["setup"], "basis": costs["basis"],
                         "epochs": costs["epochs"], "seconds": banded(costs, "seconds"),
                         "cents per result": banded(costs, "dollars", 100)})  # fmt: skip


def condition_display(conditions: pd.DataFrame) -> pd.DataFrame:
    """``condition_table`` for reading, per-GPU and global batches and seconds as "central
    (lowest–highest)", narrow enough for the column: the GPUs and the DDP buckets in the headers where every
    row shares them; b*_hide only where some model has several buckets (a one-bucket model's reads "none:
    one bucket", never an unbounded band); the all-reduce left after backward (all of it with one bucket,
    the last bucket's with several) beside each GPU's step without it (the host's issue and the compute) at
    the chapter's global batch, where ``condition_table`` was given one; b*_floor; the global batch every
    condition that can hold needs; and whether the training set holds it: yes, no or "depends (n)", whose
    inputs ``table_notes`` names (``attrs["notes"]``)."""
    one = conditions["buckets"].eq(1)
    gpus, buckets = conditions["gpus"].unique(), conditions["buckets"].unique()
    shown = {"model": conditions["model"], "machine": conditions["machine"]}
    if len(gpus) > 1:  # a count every row shares goes into the headers instead
        shown["GPUs"] = conditions["gpus"]
    if len(buckets) > 1:
        shown["DDP buckets"] = conditions["buckets"]
        hide = banded(conditions, "hide", whole=True).where(~one, "none: one bucket")
        shown[f"{HIDE} (samples per GPU)"] = hide
    bucket = f", {counted(int(buckets[0]), 'bucket')}" if len(buckets) == 1 else ""
    shown[f"all-reduce after backward{bucket} (ms)"] = banded(conditions, "tail_seconds", 1e3)
    if "compute_seconds" in conditions and conditions["compute_seconds"].notna().any():
        batch, shares = int(conditions["batch"].iloc[0]), conditions["per_gpu_batch"].unique()
        each = f", at most {int(shares[0])} per GPU" if len(shares) == 1 else ""
        step = f"step without the all-reduce, batch {batch}{each} (ms)"
        shown[step] = banded(conditions, "compute_seconds", 1e3)
    shown[f"{FLOOR} (samples per GPU)"] = banded(conditions, "floor", whole=True)
    on = f" on {int(gpus[0])} GPUs" if len(gpus) == 1 else ""
    shown[f"global batch needed{on}"] = banded(conditions, "needed_global_batch", whole=True)
    answers = conditions["needed against the training set"]
    enough = f"{TRAIN_CLIPS:,} clips enough?"
    shown[enough] = answers.map(lambda answer: {HELD: "yes", NOT_HELD: "no"}.get(answer) or _depends(answer))
    table = pd.DataFrame(shown)
    if answers.isin((HELD, NOT_HELD)).any():
        table.attrs["notes"] = ["yes, no: the same answer at every input of the band."]
    return depends_coded(table, [enough])


def depends_coded(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``table`` with each "depends on …" verdict of ``columns`` shortened to "depends (n)", numbered once
    per distinct reason across them in reading order (row by row), the reason said whole once in
    ``attrs["notes"]``, which ``table_notes`` shows under the table; and "faster whatever the inputs"
    shortened to "faster", with one note saying so: a verdict cell stays a word or two, not a sentence
    repeated per row."""
    cells = [value for row in table[columns].itertuples(index=False) for value in row]  # in reading order
    reasons = list(dict.fromkeys(value for value in cells if str(value).startswith("depends on ")))
    codes = {reason: f"depends ({n})" for n, reason in enumerate(reasons, 1)}

    def short(value):
        return codes.get(value) or (value.removesuffix(WHATEVER) if isinstance(value, str) else value)

    coded = table.assign(**{c: table[c].map(short) for c in columns})
    whole = [value for value in cells if isinstance(value, str) and value.endswith(WHATEVER)]
    said = ["A verdict without a note (n) holds whatever the inputs: over the whole band."] if whole else []
    if any("by under" in value for value in whole):
        said.append(
            f'"by under {MATTERS * 100:.0f} %": the whole band lies within {MATTERS * 100:.0f} % of 1×.'
        )
    numbered = [f"({n}) {reason}." for n, reason in enumerate(reasons, 1)]
    coded.attrs["notes"] = [*table.attrs.get("notes", []), *said, *numbered]
    return coded


def sources_noted(table: pd.DataFrame, column: str, numbering: list[str] | None = None) -> pd.DataFrame:
    """``table`` with each distinct value of ``column`` (a source) replaced by its number, "[n]" in the
    order of ``numbering`` (another table's sources, so that both number them alike) or else of reading,
    and said once in ``attrs["notes"]``: a source that fourteen rows share is read once, under the table,
    not on every row. The notes are Markdown, so a source's "$", "*" and "_" are escaped: they stay
    characters, not math or emphasis."""
    order = list(dict.fromkeys([*(numbering or []), *table[column]]))
    numbers = {source: order.index(source) + 1 for source in dict.fromkeys(table[column])}
    noted = table.assign(**{column: table[column].map(lambda source: f"[{numbers[source]}]")})
    said = [
        f"[{n}] " + re.sub(r"([$*_])", r"\\\1", source)
        for source, n in sorted(numbers.items(), key=lambda item: item[1])
    ]
    noted.attrs["notes"] = [*table.attrs.get("notes", []), *said]
    return noted


def table_notes(table: pd.DataFrame) -> Markdown:
    """A table's notes (``attrs["notes"]``: what its "depends (n)" depend on, its sources), one line each,
    to show under it."""
    notes = table.attrs.get("notes", [])
    return Markdown("\n".join(f"- {note}" for note in notes) if notes else "")


def _depends(against_data: str) -> str:
    """``rule.condition_table``'s answer where the training set may or may not hold the global batch, as
    the note says it: "depends on …: measure it with …", as the verdicts say it (where no single input
    decides, says so)."""
    said = against_data.replace(HELD_OR_NOT, "depends on ")
    names = [name for name in specs.INPUTS if f"the {name}" in said]
    return f"{said}: {measure_with(names)}" if names else said


def cost_tables(records, models, training_batch: int, target_accuracy: float, machines) -> list:
    """Section 5.3 per model: ``cost_table`` of ``result_costs``, or a sentence saying why there is none."""
    shown = []
    for name in models:
        costs = result_costs(records, name, training_batch, target_accuracy, machines)
        if costs is None:
            shown.append(Markdown(f"No chapter 1 run of `{name}` at batch {training_batch} in this store."))
        elif "reason" in costs:
            shown.append(Markdown(f"`{name}` has no time to a result: it {costs['reason'].iloc[0]}."))
        else:
            shown.append(cost_table(costs).set_index(["model", "setup"]))
            if not costs["setup"].str.contains("DDP").any():
                shown.append(Markdown(f"No chapter 3 DDP launch of `{name}` at batch {training_batch} is in "
                                      "this store, so the table has no DDP row."))  # fmt: skip
    return shown


VALIDATION_ERRORS = {
    "configurations": "configs", "points": "measured", "launches": "launches",
    "mape_percent": "MAPE %", "mean_error_percent": "mean signed error %",
    "min_ape_percent": "min |error| %", "max_ape_percent": "max |error| %",
}  # fmt: skip
VALIDATION_SPREAD = {
    "predictions_above": "predictions above", "within_measured_range": "inside measured range",
    "measured_range_percent": "measured range, % of median", "link_band_percent": "link-fit shift, max %",
}  # fmt: skip


def validation_tables(summary: pd.DataFrame) -> list[pd.DataFrame]:
    """``validation.validation_summary`` for reading, rounded to 0.1, as two tables narrow enough for the
    page: each method's errors, then its predictions against the measured spread and the link's band (the
    second only where the summary has those columns); methods by name ("DDP with overlap")."""
    shown = summary.assign(method=summary["method"].map(lambda m: METHOD_NAMES.get(m, m)))
    shown = shown.set_index(["model", "method"])
    found = []
    for names in (VALIDATION_ERRORS, VALIDATION_SPREAD):
        columns = [name for name in names if name in shown]
        if columns:
            found.append(shown[columns].rename(columns=names).round(1))
    return found


def roofline_display(roofline: pd.DataFrame, batches) -> pd.DataFrame:
    """The roofline's single-GPU step at ``batches``, per GPU and model, in ms with its band."""
    rows = roofline[roofline["batch"].isin(batches)]
    return (
        rows.assign(step=banded(rows, "step_seconds", 1e3))
        .pivot(index="gpu", columns=["model", "batch"], values="step")
        .rename_axis(columns=["step in ms, central (lowest–highest)", "batch"])
    )


def time_to_result_table(per_scenario: pd.DataFrame, relation: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For one model: seconds and dollars to chapter 6's target at every machine and global batch (the
    band, for the figure), and per machine the fastest global batch, for reading (in cents: a fraction of
    a dollar); a fastest batch every machine shares goes into the headers."""
    bands = result_band(time_to_result(per_scenario, relation))
    best = fastest_batches(bands)
    shown = best.assign(**{"seconds to target": banded(best, "seconds_to_target"),
                           "cents to target": banded(best, "dollars_to_target", 100)})  # fmt: skip
    shown = shown[["machine", "gpus", "global_batch", "seconds to target", "cents to target"]]
    shown = shown.rename(columns={"gpus": "GPUs", "global_batch": "fastest global batch"}).set_index(
        "machine"
    )
    at = ", global batch {}"
    shown = said_in_headers(
        shown, "fastest global batch", {c: c + at for c in ("seconds to target", "cents to target")}
    )
    return bands, shown


def seed_verdict_display(verdicts: pd.DataFrame) -> pd.DataFrame:
    """``seed.seed_verdict_table`` for reading: the four-GPU speed-up with its band, and the verdict (what
    a "depends (n)" depends on in ``table_notes``)."""
    speedup = "speed-up, 4 GPUs over 1 (×)"
    shown = verdicts.assign(**{speedup: banded(verdicts, "speedup")})
    shown = shown[["model", "global_batch", speedup, "faster"]]
    shown = shown.rename(columns={"global_batch": "batch", "faster": "verdict"}).set_index(["model", "batch"])
    return depends_coded(shown, ["verdict"])


def _thousands(values) -> list[str]:
    return [f"{int(value):,}" for value in values]


def price_display() -> pd.DataFrame:
    """The dated price table for reading: each price in dollars and cents (the arithmetic keeps them
    exact), the price of one GPU beside the offer's."""
    prices = money.price_table()
    cents = lambda value: f"{float(money.exact(value)):,.2f}"  # noqa: E731
    shown = pd.DataFrame({
        "offer": prices["offer"], "GPU": prices["gpu"], "GPUs": prices["gpus"],
        "price ($)": prices["dollars"].map(cents), "per": prices["per"],
        "price per GPU ($)": prices["dollars_per_gpu"].map(cents), "source": price_sources(),
    })  # fmt: skip
    return sources_noted(shown, "source").set_index("offer")


def price_sources() -> pd.Series:
    """Each price row's source and date, as the prices and machines tables number them."""
    return pd.Series([money.price_source(row) for row in money.PRICES])


def machines_display() -> pd.DataFrame:
    """``configurations.configuration_table`` for reading, by machine: each price's source and date said
    once under the table (``table_notes``), not on each of the rows that share it."""
    machines = configurations.configuration_table()
    noted = sources_noted(machines, "price source", numbering=list(price_sources()))
    return noted.rename(columns={"price source": "source"}).set_index("machine")


TABLE_ONE_COLUMNS = {
    "epoch_seconds": "epoch (s)", "hourly_price": "price per hour ($)", "dollars_per_epoch": "$ per epoch",
    "speedup": "speed-up (×)", "price_ratio": "price ratio (×)",
    "cost_per_epoch_ratio": "$ per epoch ratio (×)", "delta": "Δ = speed-up / price ratio",
}  # fmt: skip


def table_one_display(exact: bool) -> pd.DataFrame:
    """The seed's Table I recomputed (``money.table_one``), with human column names: as exact fractions
    (``exact``), or as decimals to 4 significant digits."""
    table = money.table_one(as_float=not exact).set_index("setup")
    shown = table.astype(str) if exact else table.map(lambda value: f"{value:.4g}")
    return shown.rename(columns=TABLE_ONE_COLUMNS).rename_axis("setup")


def layer_cost_display(costs: pd.DataFrame) -> pd.DataFrame:
    """``gpus.layer_costs`` of several models (a ``model`` column) for reading, exact with separators."""
    shown = pd.DataFrame({
        "model": costs["model"], "layer": costs["layer"], "phase": costs["phase"],
        "FLOPs per sample": _thousands(costs["flops_per_sample"]),
        "of which multiply-add FLOPs": _thousands(costs["multiply_add_flops_per_sample"]),
        "bytes per sample": _thousands(costs["bytes_per_sample"]),
        "bytes per step, any batch": _thousands(costs["fixed_bytes"]), "kernels": costs["kernels"],
    })  # fmt: skip
    return shown.set_index(["model", "layer", "phase"])


def _significant(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, str):
        return value
    return (
        "unbounded" if math.isinf(value) else f"{value:,.{digits}g}" if abs(value) < 1e4 else f"{value:,.0f}"
    )


def inputs_display(inputs: pd.DataFrame) -> pd.DataFrame:
    """The time model's inputs (``timemodel.time_model_from_records``) for reading: each value to three
    significant digits, an unbounded rate said so."""
    return inputs.assign(value=inputs["value"].map(_significant)).set_index("input")


def assumptions_display() -> pd.DataFrame:
    """``specs.assumptions_table`` for reading: host times in µs, every value as text with its unit."""
    table = specs.assumptions_table()
    seconds = table["unit"].eq("s")
    for column in ("low", "central", "high"):
        values = table[column].where(
            ~seconds, table[column].map(lambda v: v * 1e6 if isinstance(v, float) else v)
        )
        table[column] = values.map(_significant)
    table.loc[seconds, "unit"] = "µs"
    return table.set_index("input")


def roofline_error_display(errors: pd.DataFrame) -> pd.DataFrame:
    """``gpus.roofline_error`` for reading: measured and predicted steps in ms, the error in %, the runs
    whose steps were pooled and where they came from."""
    return pd.DataFrame({
        "model": errors["model"], "GPU": errors["gpu"], "batch": errors["batch"],
        "measured step (ms)": banded(errors.rename(columns={"step_min": "step_seconds_low",
                                                            "step_max": "step_seconds_high"}),
                                     "step_seconds", 1e3),
        "roofline (ms)": banded(errors.rename(columns={"roofline_low": "roofline_seconds_low",
                                                       "roofline_high": "roofline_seconds_high"}),
                                "roofline_seconds", 1e3),
        "error of the central value (%)": errors["error_percent"].map(lambda e: signed(e, 0)),
        "inside the band": errors["within_band"].map({True: "yes", False: "no"}),
        "runs": errors["runs"],
        "source": errors["source"],
    }).set_index(["model", "GPU", "batch"])  # fmt: skip


def sharing_display(sharing: pd.DataFrame) -> pd.DataFrame:
    """``validation.dataparallel_sharing`` for reading: seconds to three significant digits, errors whole."""
    shown = sharing.copy()
    for column in shown.columns:
        if column.endswith("(s)"):
            shown[column] = shown[column].map(lambda value: f"{value:.3g}")
        elif column.endswith("(%)"):
            shown[column] = shown[column].map(lambda value: signed(value, 0))
    return shown.set_index(["model", "replicas", "global batch"])
