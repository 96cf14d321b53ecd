"""The advice as a reader reads it (chapter 7): a terminal table whose columns fit their contents, the JSON
with every number and its source (counted, measured or assumed, an assumption with its source and date),
and a figure of speed-up against the dollars of a result, each with its band."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from helpers import stats
from helpers.advise.counting import Counted
from helpers.advise.predict import Advice, time_band
from helpers.costmodel import figures, gpus, rule, specs, tables
from helpers.costmodel.recommend import BASIS_WORDS, side
from helpers.results import write_json_atomically
from helpers.stats import significant

PREDICTED = "predicted: chapter 5's roofline and links, a band over the inputs in `assumptions`"


def megabytes(nbytes: float) -> str:
    """Bytes in MiB, or GiB from 1 GiB, two decimals at most."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def duration(seconds: float) -> str:
    """Seconds, minutes or hours, whichever reads best."""
    if seconds < 120:
        return f"{significant(seconds)} s"
    return f"{significant(seconds / 60)} min" if seconds < 7200 else f"{significant(seconds / 3600)} h"


def text_table(frame: pd.DataFrame) -> str:
    """Rows of text as aligned columns: each as wide as its widest cell, numbers to the right."""
    cells = [[str(value) for value in row] for row in frame.itertuples(index=False)]
    headers = [str(column) for column in frame.columns]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    numeric = (
        [
            all(c.replace(".", "", 1).replace(",", "").isdigit() for c in column) and column
            for column in zip(*cells, strict=True)
        ]
        if cells
        else [False] * len(headers)
    )

    def line(values) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(row) for row in cells)]).rstrip()


def machine_view(advice: Advice) -> pd.DataFrame:
    """Per machine (DDP): step, speed-up, cost multiplier, hours and dollars per epoch, the verdicts."""
    rows = []
    for r in advice.machines.itertuples():
        dollars = (
            "–"
            if math.isnan(r.dollars_per_run)
            else tables.band_text(r.dollars_per_run, r.dollars_per_run_low, r.dollars_per_run_high)
        )
        rows.append(
            {
                "machine": r.machine,
                "GPUs": r.gpus,
                "per GPU": r.per_gpu_batch,
                "step (ms)": tables.band_text(r.step_seconds, r.step_seconds_low, r.step_seconds_high, 1e3),
                "speed-up (×)": tables.band_text(r.speedup, r.speedup_low, r.speedup_high),
                "$ over 1 GPU (×)": tables.band_text(
                    r.cost_multiplier, r.cost_multiplier_low, r.cost_multiplier_high
                ),
                "epoch": duration(r.epoch_seconds),
                "$ per epoch": dollars,
                "basis": r.basis,
            }
        )
    return pd.DataFrame(rows)


def verdict_view(advice: Advice) -> pd.DataFrame:
    """One model's verdicts as a table (7.3), a row per multi-GPU machine named with its GPUs: speed-up and
    dollar multiple over one GPU with their bands, and the verdict each band allows (where the band
    crosses 1×, "depends (n)", what decides it and measures it said once under the table by
    ``tables.table_notes``); the basis of the figures
    (roofline or measured) only where it differs between machines."""
    several = advice.machines[advice.machines["gpus"] > 1]
    view = pd.DataFrame(
        {
            "speed-up (×)": [
                tables.band_text(r.speedup, r.speedup_low, r.speedup_high) for r in several.itertuples()
            ],
            "$ over 1 GPU (×)": [
                tables.band_text(r.cost_multiplier, r.cost_multiplier_low, r.cost_multiplier_high)
                for r in several.itertuples()
            ],
            "time verdict": several["faster"].tolist(),
            "dollar verdict": several["dollars"].tolist(),
            "basis": several["basis"].map(BASIS_WORDS).tolist(),
        },
        index=[f"{r.machine}: {r.gpus} × {r.gpu}" for r in several.itertuples()],
    ).rename_axis(advice.counted.label)
    view = view if several["basis"].nunique() > 1 else view.drop(columns="basis")
    return tables.depends_coded(view, ["time verdict", "dollar verdict"])


def basis_note(advice: dict[str, Advice]) -> str:
    """What 7.3's figures rest on, as ``verdict_view`` shows it: a table names each row's basis only where
    its machines differ in it, so the sentence says what every figure rests on when they do not."""
    per_table = [set(found.machines.loc[found.machines["gpus"] > 1, "basis"]) for found in advice.values()]
    if any(len(bases) > 1 for bases in per_table):
        return (
            "Every number in these tables rests on chapter 5's roofline, except on a machine whose GPU this "
            "study measured, which the basis column names."
        )
    bases = set().union(*per_table)
    if bases <= {"roofline"}:
        return "Every number in these tables rests on chapter 5's roofline."
    return f"Every number in these tables rests on {' or '.join(BASIS_WORDS[b] for b in sorted(bases))}."


def bucket_note(advice: dict[str, Advice]) -> str:
    """Where each model's all-reduce stands, which ``verdict_view`` leaves out: the models whose gradients
    fit one DDP bucket (so on every machine their all-reduce follows backward, never hidden, and how long
    it takes there, central values from fastest to slowest machine) and those that split into several;
    "" without multi-GPU machines."""
    one, several = [], []
    for label, found in advice.items():
        if found.conditions.empty:
            continue
        (one if (found.conditions["buckets"] == 1).all() else several).append(label)
    parts = []
    if one:
        whose = (
            f"{listed(one)}'s gradients fit" if len(one) == 1 else f"the gradients of {listed(one)} each fit"
        )
        times = [
            f"`{label}` {significant(advice[label].conditions['tail_seconds'].min() * 1e6)}–"
            f"{significant(advice[label].conditions['tail_seconds'].max() * 1e6)} µs"
            for label in one
        ]
        parts.append(f"{whose} one DDP bucket at the default 25 MiB cap, so on every machine the all-reduce "
                     f"follows backward, never hidden ({', '.join(times)} a step across the "
                     "machines)")  # fmt: skip
    if several:
        whose = (
            f"{listed(several)}'s gradients" if len(several) == 1 else f"the gradients of {listed(several)}"
        )
        parts.append(f"{whose} split into several buckets, all but the last of which can hide behind "
                     "backward")  # fmt: skip
    if not parts:
        return ""
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."


def method_view(advice: Advice) -> pd.DataFrame:
    """Per multi-GPU machine and method: step with its band, the busiest device's bytes, the largest batch."""
    shown = advice.methods[advice.methods["GPUs"] > 1]
    return pd.DataFrame(
        {
            "machine": shown["machine"],
            "method": shown["method"],
            "step (ms)": [
                tables.band_text(c, lo, hi, 1e3)
                for c, lo, hi in zip(
                    shown["step_seconds"], shown["step_seconds_low"], shown["step_seconds_high"], strict=True
                )
            ],
            "memory per device": [
                f"{megabytes(b)} of {megabytes(m)}" + ("" if fits else " (does not fit)")
                for b, m, fits in zip(
                    shown["device_bytes"], shown["gpu_memory_bytes"], shown["fits"], strict=True
                )
            ],
            "largest batch per GPU": shown["largest_batch_per_gpu"].map("{:,}".format),
        }
    )


def condition_view(advice: Advice) -> pd.DataFrame:
    """The two conditions on the per-GPU batch, per machine, with their bands: where DDP's all-reduce goes
    (after backward when the gradients fit one bucket: it never hides, and its predicted time is shown;
    else hidden from b*_hide but for its last bucket) and the per-GPU batch that outgrows the fixed cost,
    b*_floor."""
    c = advice.conditions
    if c.empty:  # every multi-GPU count was left out (the batch does not split over it, or no machine)
        return pd.DataFrame({"machine": ["none: no multi-GPU machine is priced at this batch"]})

    def whole(value) -> str:
        return "never" if math.isinf(value) else f"{int(value):,}"

    def all_reduce(r) -> str:
        tail = time_band(r.tail_seconds, r.tail_seconds_low, r.tail_seconds_high)
        if r.buckets == 1:
            return f"after backward, never hidden: {tail}"
        return (f"hidden from b*_hide = {whole(r.hide)} ({whole(r.hide_low)}–{whole(r.hide_high)}) but its "
                f"last bucket, {tail} after backward")  # fmt: skip

    return pd.DataFrame(
        {
            "machine": c["machine"],
            "DDP buckets": c["buckets"],
            "all-reduce": [all_reduce(r) for r in c.itertuples()],
            "b*_floor, above fixed cost": [
                f"{whole(v)} ({whole(lo)}–{whole(hi)})"
                for v, lo, hi in zip(c["floor"], c["floor_low"], c["floor_high"], strict=True)
            ],
            "per GPU here": [advice.global_batch // k for k in c["gpus"]],
        }
    )


def why_slower(advice: Advice) -> tuple[pd.DataFrame, list[str]]:
    """The reasons that apply (``Advice.reasons``), on the multi-GPU machines whose DDP verdict is not
    "faster whatever the inputs" — a machine predicted faster pays the same kinds of cost and outweighs
    them, so they are no reason it is slower — and the machines so left out, in the table's order."""
    ddp = advice.machines[advice.machines["gpus"] > 1]
    faster = list(ddp.loc[ddp["faster"].map(side).eq("faster"), "machine"])
    applies = advice.reasons[advice.reasons["applies"] & ~advice.reasons["machine"].isin(faster)]
    return applies.drop(columns="applies"), faster


def typeset(text: str) -> str:
    """The command's plain-text symbols (b*_floor, b*_hide) as the book typesets them."""
    return text.replace("b*_floor", rule.FLOOR).replace("b*_hide", rule.HIDE)


def reason_summary(applies: pd.DataFrame) -> pd.DataFrame:
    """``why_slower``'s reasons, one row each in their order: the machines it applies on ("all 11" where
    it applies on every machine listed) and its number on the first of them, its symbols typeset (the
    terminal's b*_floor is the book's ``rule.FLOOR``). Readers see four rows, not one per machine and
    reason; the full table keeps every machine's number."""
    machines = list(dict.fromkeys(applies["machine"]))
    rows = []
    for reason, group in applies.groupby("reason", sort=False):
        on = list(group["machine"])
        first = group.iloc[0]
        rows.append({
            "reason": reason,
            "applies on": f"all {len(machines)} machines" if len(on) == len(machines) else stats.listed(on),
            "its number, for example": f"{typeset(first['number'])} ({first['machine']})",
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["reason", "applies on", "its number, for example"]).set_index("reason")


def reason_table(applies: pd.DataFrame) -> pd.DataFrame:
    """``why_slower``'s reasons in full, by machine and reason, their numbers' symbols typeset."""
    return applies.assign(number=applies["number"].map(typeset)).set_index(["machine", "reason"])


def faster_note(faster: list[str]) -> str:
    """What ``why_slower`` left out, as a sentence: "On the seed's 4x GTX 1080 Ti workstation and AWS
    g6.12xlarge, predicted faster whatever the inputs, the same kinds of cost are paid and outweighed by
    the compute the GPUs divide: they are not listed."; "" where none is."""
    if not faster:
        return ""
    return (
        f"On {stats.listed(faster)}, predicted faster whatever the inputs, the same kinds of cost are paid "
        "and outweighed by the compute the GPUs divide: they are not listed."
    )


def summary_lines(counted: Counted, advice: Advice) -> list[str]:
    """What was counted, in words, with the settings of the advice."""
    state = counted.optimizer_state_bytes
    shape = tuple(counted.input_shape)
    return [
        f"{gpus.shown_name(counted.name)}: {counted.parameters:,} parameters, input {shape}, "
        f"{counted.dtype}, {counted.optimizer} (counted)",
        f"  gradients {megabytes(counted.gradient_bytes)}, optimizer state {megabytes(state)}, kept for "
        f"backward {megabytes(counted.activation_bytes_per_sample)} per sample (counted)",
        f"  training {counted.training_flops_per_sample / 1e9:.3g} GFLOP per sample in products and "
        "convolutions (counted by torch.utils.flop_counter)",
        f"Global batch {advice.global_batch}; an epoch of {advice.samples:,} samples "
        f"({epoch_words(advice)}), {math.ceil(advice.samples / advice.global_batch):,} steps. Figures are "
        "PREDICTIONS (chapter 5's roofline; a line through the study's single-GPU steps where the basis "
        "says measured), central (lowest–highest) over the uncertain inputs.",
    ]


def epoch_words(advice: Advice) -> str:
    """Where the epoch's size came from, as the summary says it: given, or FSDD's split by default."""
    if advice.epoch_source == "as given":
        return "as given"
    return f"{advice.epoch_source}; --samples-per-epoch sets yours"


def render(advice: Advice, measured: pd.DataFrame | None = None, hour_value: float | None = None) -> str:
    """The whole advice as terminal text; with ``hour_value`` (dollars an hour of waiting is worth), what
    each multi-GPU machine costs in total against its one-GPU offer (``tables.renter_table``)."""
    applies, faster = why_slower(advice)
    parts = [
        "\n".join(summary_lines(advice.counted, advice)),
        "DDP on each machine (speed-up and dollars against one GPU of the same kind):\n"
        + text_table(machine_view(advice)),
        "Every method on the multi-GPU machines (busiest device):\n" + text_table(method_view(advice)),
        "Where DDP's all-reduce goes (gradients that fit one bucket are all-reduced after backward, never "
        "hidden; with several, all but the last bucket hide behind backward from the per-GPU batch b*_hide) "
        "and the per-GPU batch b*_floor that outgrows the fixed cost:\n" + text_table(condition_view(advice)),
        "Verdicts:\n" + "\n".join(f"- {v}" for v in advice.verdicts),
        "Why multi-GPU training can be slower than one GPU, for this model at this batch (what applies, on "
        "each machine not predicted faster whatever the inputs):\n"
        + (
            "\n".join(f"- {r.machine}: {r.reason}: {r.number}" for r in applies.itertuples())
            or "- none applies"
        )
        + (f"\n- left out, predicted faster whatever the inputs: {', '.join(faster)}" if faster else ""),
    ]
    if hour_value is not None:
        waiting = tables.renter_table(advice.machines, hour_value).reset_index().drop(columns="model")
        parts.append(
            "What waiting costs (machine dollars + hours × the value of an hour; a machine is cheaper in "
            "total above its break-even, never where it is no faster):\n"
            + (text_table(waiting) if len(waiting) else "- no multi-GPU machine here has a one-GPU offer")
        )
    if measured is not None and len(measured):
        parts.append("Measured on this machine:\n" + text_table(measured))
    if advice.skipped:
        parts.append("Left out: " + "; ".join(advice.skipped))
    return "\n\n".join(parts)


def _numbers(frame: pd.DataFrame, origin: str) -> list[dict]:
    """A frame's rows as JSON objects, each saying where its numbers come from (``origin``); rows that
    carry their own ``source`` and ``date`` (assumptions) keep them."""
    rows = json.loads(frame.to_json(orient="records"))
    return [{**row, "origin": origin} for row in rows]


def as_json(
    advice: Advice, measured: pd.DataFrame | None = None, validation: pd.DataFrame | None = None
) -> dict:
    """Every number of the advice with its source: counted, measured, or predicted from assumptions listed
    with their sources and dates."""
    counted = advice.counted
    count = {
        name: {"value": value, "origin": "counted"}
        for name, value in {
            "parameters": counted.parameters,
            "gradient_bytes": counted.gradient_bytes,
            "optimizer_state_bytes": counted.optimizer_state_bytes,
            "activation_bytes_per_sample": counted.activation_bytes_per_sample,
            "activation_bytes_fixed": counted.activation_bytes_fixed,
            "training_flops_per_sample": counted.training_flops_per_sample,
        }.items()
    }
    return {
        "model": counted.name,
        "input_shape": list(counted.input_shape),
        "dtype": counted.dtype,
        "optimizer": counted.optimizer,
        "global_batch": advice.global_batch,
        "samples_per_epoch": advice.samples,
        "samples_per_epoch_source": advice.epoch_source,
        "counted": count,
        "layers": _numbers(counted.layer_table(), "counted"),
        "assumptions": [
            {**row, "origin": specs.input_origin(row["input"])}
            for row in _numbers(specs.assumptions_table(), "assumed")
        ],
        "machines": _numbers(advice.machines, PREDICTED),
        "methods": _numbers(advice.methods, PREDICTED),
        "conditions": _numbers(advice.conditions, PREDICTED),
        "reasons": _numbers(advice.reasons, PREDICTED),
        "verdicts": advice.verdicts,
        "left_out": advice.skipped,
        "measured": _numbers(measured, "measured on this machine") if measured is not None else [],
        "validation": _numbers(validation, "measured on this machine") if validation is not None else [],
    }


def write_json(path: Path, advice: Advice, measured=None, validation=None) -> None:
    write_json_atomically(Path(path), as_json(advice, measured, validation))


def write_figure(path: Path, advice: Advice) -> None:
    """Speed-up against the dollars of a result over one GPU's, per machine with a one-GPU offer."""
    what = f"{gpus.shown_name(advice.counted.name)}, global batch {advice.global_batch}"
    figure = figures.plot_renter_choice(advice.machines, f"{what}: speed-up against dollars")
    figure.savefig(path, dpi=120, bbox_inches="tight")


def model_table(counted: dict[str, Counted]) -> pd.DataFrame:
    """Models side by side as the cost model sees them: parameters, training FLOPs and host ops per step
    (every layer's kernels, the loss's and the optimizer's, as chapter 5's roofline counts them), bytes
    kept for backward per sample, and FLOPs per byte of gradient (what decides how long backward lasts
    against the all-reduce; whether the all-reduce can hide behind it at all depends on DDP's buckets)."""
    rows = []
    for name, c in counted.items():
        flops = c.training_flops_per_sample
        rows.append({
            "model": name, "parameters": f"{c.parameters:,}",
            "training MFLOP per sample": significant(flops / 1e6),
            "host ops per step (layers, loss, optimizer)": gpus.ops_per_step(c.name),
            "kept for backward per sample (KiB)": significant(c.activation_bytes_per_sample / 2**10),
            "gradient (MiB)": significant(c.gradient_bytes / 2**20),
            "FLOPs per gradient byte, per sample": significant(flops / c.gradient_bytes),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def listed(names) -> str:
    """Names as code, joined as prose: "`a`, `b` and `c`"."""
    return stats.listed(f"`{name}`" for name in names)
