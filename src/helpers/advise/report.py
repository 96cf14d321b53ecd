"""The advice as a reader reads it (chapter 7): a terminal table whose columns fit their contents, the JSON
with every number and its source (counted, measured or assumed, an assumption with its source and date),
and a figure of speed-up against the dollars of a result, each with its band."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.advise.counting import Counted
from helpers.advise.predict import Advice
from helpers.costmodel import figures, gpus, specs
from helpers.results import write_json_atomically

PREDICTED = "predicted: chapter 5's roofline and links, a band over the inputs in `assumptions`"


def megabytes(nbytes: float) -> str:
    """Bytes in MiB, or GiB from 1 GiB, two decimals at most."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def plain(value: float) -> str:
    """Three significant digits without an exponent: 0.000115, 12.3, 4,520."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return np.format_float_positional(value, precision=3, unique=False, fractional=False, trim="-")


def band(central: float, low: float, high: float, scale: float = 1.0) -> str:
    """ "12.3 (8.1–20)" to three significant digits; "–" for no value."""
    if central is None or (isinstance(central, float) and math.isnan(central)):
        return "–"
    return f"{plain(central * scale)} ({plain(low * scale)}–{plain(high * scale)})"


def duration(seconds: float) -> str:
    """Seconds, minutes or hours, whichever reads best."""
    if seconds < 120:
        return f"{plain(seconds)} s"
    return f"{plain(seconds / 60)} min" if seconds < 7200 else f"{plain(seconds / 3600)} h"


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
            else band(r.dollars_per_run, r.dollars_per_run_low, r.dollars_per_run_high)
        )
        rows.append(
            {
                "machine": r.machine,
                "GPUs": r.gpus,
                "per GPU": r.per_gpu_batch,
                "step (ms)": band(r.step_seconds, r.step_seconds_low, r.step_seconds_high, 1e3),
                "speed-up (×)": band(r.speedup, r.speedup_low, r.speedup_high),
                "$ over 1 GPU (×)": band(r.cost_multiplier, r.cost_multiplier_low, r.cost_multiplier_high),
                "epoch": duration(r.epoch_seconds),
                "$ per epoch": dollars,
                "basis": r.basis,
            }
        )
    return pd.DataFrame(rows)


def method_view(advice: Advice) -> pd.DataFrame:
    """Per multi-GPU machine and method: step with its band, the busiest device's bytes, the largest batch."""
    shown = advice.methods[advice.methods["GPUs"] > 1]
    return pd.DataFrame(
        {
            "machine": shown["machine"],
            "method": shown["method"],
            "step (ms)": [
                band(c, lo, hi, 1e3)
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
    """The two conditions on the per-GPU batch, per machine, with their bands."""
    c = advice.conditions

    def whole(value) -> str:
        return "never" if math.isinf(value) else f"{int(value):,}"

    return pd.DataFrame(
        {
            "machine": c["machine"],
            "b* all-reduce hidden": [
                f"{whole(v)} ({whole(lo)}–{whole(hi)})"
                for v, lo, hi in zip(c["hide"], c["hide_low"], c["hide_high"], strict=True)
            ],
            "b* above fixed cost": [
                f"{whole(v)} ({whole(lo)}–{whole(hi)})"
                for v, lo, hi in zip(c["floor"], c["floor_low"], c["floor_high"], strict=True)
            ],
            "per GPU here": [advice.global_batch // k for k in c["gpus"]],
        }
    )


def summary_lines(counted: Counted, advice: Advice) -> list[str]:
    """What was counted, in words, with the settings of the advice."""
    state = counted.optimizer_state_bytes
    shape = tuple(counted.input_shape)
    return [
        f"{counted.name}: {counted.parameters:,} parameters, input {shape}, {counted.dtype}, "
        f"{counted.optimizer} (counted)",
        f"  gradients {megabytes(counted.gradient_bytes)}, optimizer state {megabytes(state)}, kept for "
        f"backward {megabytes(counted.activation_bytes_per_sample)} per sample (counted)",
        f"  training {counted.training_flops_per_sample / 1e9:.3g} GFLOP per sample in products and "
        "convolutions (counted by torch.utils.flop_counter)",
        f"Global batch {advice.global_batch}; an epoch of {advice.samples:,} samples "
        f"({epoch_words(advice)}), {math.ceil(advice.samples / advice.global_batch):,} steps. Figures are "
        "PREDICTIONS (chapter 5's roofline), central (lowest–highest) over the uncertain inputs.",
    ]


def epoch_words(advice: Advice) -> str:
    """Where the epoch's size came from, as the summary says it: given, or FSDD's split by default."""
    if advice.epoch_source == "as given":
        return "as given"
    return f"{advice.epoch_source}; --samples-per-epoch sets yours"


def render(advice: Advice, measured: pd.DataFrame | None = None) -> str:
    """The whole advice as terminal text."""
    applies = advice.reasons[advice.reasons["applies"]]
    parts = [
        "\n".join(summary_lines(advice.counted, advice)),
        "DDP on each machine (speed-up and dollars against one GPU of the same kind):\n"
        + text_table(machine_view(advice)),
        "Every method on the multi-GPU machines (busiest device):\n" + text_table(method_view(advice)),
        "The per-GPU batch each machine needs (b*: hide the all-reduce; outgrow the fixed cost):\n"
        + text_table(condition_view(advice)),
        "Verdicts:\n" + "\n".join(f"- {v}" for v in advice.verdicts),
        "Why multi-GPU training can be slower than one GPU, for this model at this batch (what applies):\n"
        + (
            "\n".join(f"- {r.machine}: {r.reason}: {r.number}" for r in applies.itertuples())
            or "- none applies"
        ),
    ]
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
        "assumptions": _numbers(specs.assumptions_table(), "assumed"),
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
    figure = figures.plot_renter_choice(
        advice.machines,
        f"{advice.counted.name}, global batch {advice.global_batch}: speed-up against dollars",
    )
    figure.savefig(path, dpi=120, bbox_inches="tight")


def model_table(counted: dict[str, Counted]) -> pd.DataFrame:
    """Models side by side as the cost model sees them: parameters, training FLOPs and host ops per step
    (every layer's kernels, the loss's and the optimizer's, as chapter 5's roofline counts them), bytes
    kept for backward per sample, and FLOPs per byte of gradient (what decides whether the all-reduce can
    hide behind compute)."""
    rows = []
    for name, c in counted.items():
        flops = c.training_flops_per_sample
        rows.append({
            "model": name, "parameters": f"{c.parameters:,}", "training MFLOP per sample": plain(flops / 1e6),
            "host ops per step (layers, loss, optimizer)": gpus.ops_per_step(c.name),
            "kept for backward per sample (KiB)": plain(c.activation_bytes_per_sample / 2**10),
            "gradient (MiB)": plain(c.gradient_bytes / 2**20),
            "FLOPs per gradient byte, per sample": plain(flops / c.gradient_bytes),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def joined(words) -> str:
    """Words as prose: "a", "a and b", "a, b and c"."""
    words = [str(word) for word in words]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def listed(names) -> str:
    """Names as code, joined as prose: "`a`, `b` and `c`"."""
    return joined(f"`{name}`" for name in names)


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
    book_ops = joined(ops[n] for n in reference)
    if busy:
        who = "" if len(busy) == len(new) else f"{listed(busy)} "
        verb = "issues" if len(busy) == 1 else "issue"
        clauses.append(f"{who}{verb} more host ops per step than {either} "
                       f"({joined(ops[n] for n in busy)} against {book_ops})")  # fmt: skip
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
        text += f"; the {joined(p.upper() for p in elsewhere)} edition measures {it}"
    return text + "."


def profiles_holding_out(specs: list[str]) -> list[str]:
    """The study's profiles (smoke aside: the notebook's own test run) whose chapter 7 holds out every one
    of ``specs``, by the parameters the study runner gives it."""
    from helpers import study

    found = []
    for profile in (name for name in study.PROFILES if name != "smoke"):
        (chapter,) = study.plan(profile, ["07_your_model"])
        held = {**study.notebook_defaults(chapter.source), **chapter.parameters}["held_out_specs"]
        if set(specs) <= set(held):
            found.append(profile)
    return found


ACCURACY_GOAL_PERCENT = 15  # the time model's goal on runs it never saw, which chapter 7 sets itself


def against_goal(
    error: float, low: float, high: float, goal: float = ACCURACY_GOAL_PERCENT, launches: int = 3
) -> str:
    """Whether one held-out error (%) meets the goal: by its median launch, and whether its interval over
    launches agrees (a verdict holds only where the whole interval agrees, as the book's bands do); one
    launch has no interval."""
    if launches < 2:
        return f"{'within' if abs(error) <= goal else 'outside'} the book's {goal:g} % goal"
    if abs(error) <= goal:
        inside = -goal <= low and high <= goal
        return f"within the book's {goal:g} % goal" + (
            "" if inside else ", though its interval reaches past it"
        )
    outside = low > goal or high < -goal
    return f"outside the book's {goal:g} % goal" + (
        ", its whole interval too" if outside else ", though its interval reaches inside it"
    )


def off_by(error: float) -> str:
    """A step predicted ``error`` % off, in words: "34 % too long" (positive: the prediction too slow)."""
    return f"{abs(error):.0f} % too {'long' if error > 0 else 'short'}"


def held_out_sentences(table: pd.DataFrame, goal: float = ACCURACY_GOAL_PERCENT) -> dict[str, str]:
    """The held-out test in words (``validate.validate`` rows of one or more models), built from how many
    multi-rank points there are: one point is stated as its error, several as their mean absolute error
    and the worst; each against the book's ``goal`` (%). Keys: ``held_out_detail`` (every point with its
    interval and verdict), ``held_out_summary`` (7.4), ``held_out_answer`` (the answer box),
    ``held_out_takeaway``, ``accuracy_goal``."""
    several = table[table["ranks"] > 1]
    found = {"accuracy_goal": f"{goal:g} %"}
    if several.empty:
        none = "No multi-rank launch ran here, so the time model was not checked on this machine."
        return found | {"held_out_detail": "no multi-rank launch ran here", "held_out_summary": none,
                        "held_out_answer": none, "held_out_takeaway": none}  # fmt: skip
    rows = list(several.itertuples())
    models = list(dict.fromkeys(several["model"]))

    def point(r) -> str:
        return f"`{r.model}` on {r.ranks} ranks"

    def verdict(r) -> str:
        return against_goal(r.error_percent, r.error_low, r.error_high, goal, r.launches)

    def spread(r) -> str:
        """The error's interval over launches; none from one launch."""
        return f" ({r.error_low:+.0f} to {r.error_high:+.0f} %)" if r.launches > 1 else ""

    found["held_out_detail"] = "; ".join(
        f"{point(r)} {r.error_percent:+.0f} %{spread(r)}, {verdict(r)}" for r in rows
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
        launches = (
            f", {r.error_low:+.0f} to {r.error_high:+.0f} % over {r.launches} launches"
            if r.launches > 1
            else ", one launch"
        )
        said = (
            f"predicts its DDP step on {r.ranks} ranks, the one multi-rank point measured here, "
            f"{off_by(r.error_percent)}"
        )
        found["held_out_answer"] = f"{opening}{said} ({r.error_percent:+.0f} %{launches}): {verdict(r)}."
        found["held_out_summary"] = (
            "That is the only multi-rank point measured here, so its error is the whole test: one point, not "
            "a mean over models and rank counts."
        )
        found["held_out_takeaway"] = f"{takeaway}{said}: {verdict(r).split(',')[0]}."
        return found
    errors = several["error_percent"].abs()
    mape, worst = errors.mean(), rows[int(errors.to_numpy().argmax())]
    within = int((errors <= goal).sum())
    count = (
        "none of them is" if within == 0 else f"all {len(rows)} are" if within == len(rows)
        else f"{within} of the {len(rows)} {'is' if within == 1 else 'are'}"
    )  # fmt: skip
    worst_text = f"worst {abs(worst.error_percent):.0f} %, {point(worst)}"
    found["held_out_answer"] = (
        f"{opening}predicts their DDP steps at {len(rows)} multi-rank points with a mean absolute error of "
        f"{mape:.0f} % ({worst_text}): {count} within the book's {goal:g} % goal."
    )
    found["held_out_summary"] = (
        f"Over these {len(rows)} multi-rank points the mean absolute error is {mape:.0f} % ({worst_text}), "
        f"against the {goal:g} % this book set itself as a goal: {count} within it."
    )
    found["held_out_takeaway"] = (
        f"{takeaway}predicts their DDP steps with a mean absolute error of {mape:.0f} % over {len(rows)} "
        f"points ({worst_text}); {count} within the book's {goal:g} % goal."
    )
    return found


def held_out_setting(
    hardware: dict, device: str, backend: str, world_sizes, launches: int, threads
) -> dict[str, str]:
    """Where the held-out test ran, from the machine's record (``hardware``: its usable cores and GPUs)
    and the chapter's settings: how the single-process calibration ran (``threads``: its thread counts),
    how the DDP launches ran, what they share and how the all-reduce travels, and so what the test
    checks. Keys: ``interval_setting``, ``calibration_setting``, ``launch_setting``, ``held_out_setting``,
    ``held_out_checks``."""
    cores, gpus = hardware["usable_cores"], hardware.get("gpus") or []
    largest, counts = max(world_sizes), sorted(set(world_sizes))
    name = "NCCL" if backend == "nccl" else "Gloo"
    times = "once" if launches == 1 else f"{launches} times"
    if len(counts) == 1:
        launched = "One rank is" if largest == 1 else f"The {largest} ranks are"
        launch = f"{launched} then launched {times} for real with {name}"
    else:
        launch = (
            f"Each rank count ({joined(counts)}) is then launched {times} for real with {name}, alternating"
        )
    ranks = f"{'up to ' if len(counts) > 1 else ''}{largest} {name} ranks"
    per_rank = max(1, cores // largest)
    if device == "cuda" and gpus:
        device_text = f"this machine's {'one ' if len(gpus) == 1 else ''}{gpus[0]['name']}"
        calibration = (
            f"its step time on {device_text} at every per-rank batch, the host at {joined(threads)} threads"
        )
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
            f"its step time at every per-rank batch and at {joined(threads)} threads of {device_text}"
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
        "interval_setting": (
            f"with its 95 % interval over the {launches} launches (a bootstrap of their medians)"
            if launches > 1
            else "from one launch, so without an interval"
        ),
        "calibration_setting": calibration,
        "launch_setting": launch,
        "held_out_setting": f"Here {ranks} {where}{host}, and {travel}. The test checks {checks}.",
        "held_out_checks": f"This checks chapter 5's step-time model {short}, not the roofline behind the "
        "prices above.",
    }
