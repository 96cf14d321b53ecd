"""What renting k GPUs would buy (chapter 5): step, epoch and run times, speed-ups and dollars for the
machines that exist (``costmodel.configurations``), each a band over the inputs the roofline is unsure
of (``costmodel.specs.scenarios``), with a verdict only where the whole band agrees; time to a result
with chapter 6's steps-versus-batch; the two conditions on the per-GPU batch; the check against the seed.

PREDICTIONS, labelled so: a GPU's single step comes from the roofline unless the study measured that GPU
(a ``gpu``-profile run at two or more batches), in which case lines through the measured steps replace
it. Speed-up is strong scaling, as in the seed: the same global batch and epoch on k GPUs instead of one
GPU of the same kind. The cost multiplier is what the k-GPU machine's result costs over the one-GPU
offer's: with prices linear in the GPUs it is k / speed-up, never below 1 unless scaling is perfect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import cache

import numpy as np
import pandas as pd

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel import configurations as configs
from helpers.costmodel.gpus import (
    gradient_bytes,
    gradient_sizes,
    layer_costs,
    roofline_step,
)
from helpers.costmodel.money import SECONDS_PER_HOUR, break_even_hour_value
from helpers.costmodel.specs import (
    CENTRAL,
    CORNER,
    GPU,
    GPUS,
    INPUTS,
    LINKS,
    MEASURED_INPUTS,
    OP_OVERHEAD,
    ROOFLINE_INPUTS,
    Link,
    Scenario,
    gpu_key,
    scenarios,
)
from helpers.costmodel.timemodel import (
    ComputeLine,
    fit_line,
    overlapped_all_reduce_finish,
    split_step,
)
from helpers.dataparallel import SAMPLE_BYTES, chunk_sizes
from helpers.ddp import ddp_bucket_bytes
from helpers.paths import results_dir
from helpers.results import read_json, short_hash
from helpers.stats import listed, ratio_figures, spread, verdict_words
from helpers.train import counted

METHODS = ("dataparallel", "ddp_overlap")
SEED_BATCH_SIZES = (10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600)  # the seed's sweep
TRAIN_CLIPS = 2700  # FSDD's training clips: no global batch can be larger
# global batches for time to result; 256 is the largest chapter 6 measures steps to its target at (study.yml's
# critical_batch_sizes), where the time to a result stops
RESULT_BATCHES = (10, 20, 50, 100, 200, 256, 300, 500, 1000, 2000, 2700)
RESULT_MACHINES = ("AWS p3.2xlarge", "AWS p3.16xlarge", "AWS p5.4xlarge", "AWS p5.48xlarge", "AWS g6.xlarge",
                   "AWS g6.48xlarge")  # fmt: skip
EIGHT_GPU_MACHINES = ("AWS p3.16xlarge", "AWS p4de.24xlarge", "AWS p5.48xlarge", "AWS g6.48xlarge",
                      "AWS g6e.48xlarge")  # fmt: skip
OUTPUT_BYTES = 10 * 4  # ten float32 logits per sample

# A prediction's basis as a reader reads it: a measured GPU's one-GPU steps still meet a modelled all-reduce
BASIS_WORDS = {"measured": "measured 1-GPU steps, modelled all-reduce", "roofline": "roofline"}

NO_GPU_MEASURED = (
    "No GPU has been measured by this study yet (no step times at two or more batches from `make gpu-check` "
    "or a `gpu`-profile run): every GPU figure of this chapter comes from the roofline, with its band. "
    "When such records exist, lines through their measured steps replace the roofline for that GPU, and "
    "this table shows the roofline's error against them."
)

Compute = Callable[[int], dict]  # per-GPU batch → forward, backward and optimizer seconds

BUCKET_CAP_MB = 25  # DDP's bucket cap, given as the book's launches give it: the first bucket capped alike
DEFAULT_FIRST_BUCKET_MB = 1  # DDP's smaller first bucket when ``bucket_cap_mb`` is left unset
ONE_BUCKET = "none: one bucket, so the all-reduce never hides"  # a one-bucket model against the data


def ddp_buckets(model: str, bucket_cap_mb: float = BUCKET_CAP_MB, first_bucket_mb: float | None = None):
    """Bytes of each DDP bucket of ``model``'s gradients, in the order backward fills them: at
    ``bucket_cap_mb`` every bucket closes once it holds the cap (``ddp.ddp_bucket_bytes``: DDP with the cap
    given, as the step predictions and the book's launches have it); with ``first_bucket_mb`` the first
    closes at that size instead (DDP with the cap left unset: 1 MiB, ``DEFAULT_FIRST_BUCKET_MB``)."""
    sizes = gradient_sizes(model)
    if first_bucket_mb is None:
        return ddp_bucket_bytes(sizes, bucket_cap_mb)
    produced = 0
    for index, size in enumerate(sizes):
        produced += size
        if produced >= first_bucket_mb * 2**20:
            return [produced, *ddp_bucket_bytes(sizes[index + 1 :], bucket_cap_mb)]
    return [produced]


def roofline_compute(model: str, gpu: GPU, scenario: Scenario = CENTRAL) -> Compute:
    """The roofline's forward, backward and optimizer seconds of ``model`` on ``gpu`` at a batch."""

    scenario = replace(scenario, link="central", measured="central")  # neither changes one GPU's step

    def phases(batch: int) -> dict:
        step = roofline_step(model, batch, gpu, scenario)
        return {phase: step[f"{phase}_seconds"] for phase in ("forward", "backward", "optimizer")}

    return phases


def measured_compute(line: ComputeLine, optimizer_seconds: float, backward_share: float = 2 / 3) -> Compute:
    """Phases from a line fitted to measured single-GPU step times (``timemodel.fit_line``)."""
    return lambda batch: split_step(line, batch, optimizer_seconds, backward_share)


TIMING_COLUMNS = [
    "model",
    "gpu",
    "batch",
    "step_seconds",
    "step_min",
    "step_max",
    "runs",
    "machine",
    "source",
]


def gpu_step_timings(run: str = "gpu") -> pd.DataFrame:
    """Single-GPU step times measured on real GPUs, on whichever machine made them: a ``gpu``-profile run's
    float32 steps (``step_timing`` records in ``data/results/<run>/``: chapter 1's sweep, chapter 2's
    one-device baseline) and every ``make gpu-check`` record (``data/results/gpu-check/``, two batches per
    model). Per model, GPU (``specs.gpu_key`` of its driver name), batch and machine, the timed steps of
    every run are pooled: their median and range, the number of runs and where they came from. Empty when
    neither exists."""
    runs = []
    folder = results_dir() / run
    machines = {path.stem: read_json(path) for path in sorted((folder / "provenance").glob("*.json"))}
    for path in sorted((folder / "records").glob("*.json")):
        record = read_json(path)
        config = record["config"] if record else {}
        if not record or record["kind"] != "step_timing" or not str(config.get("device")).startswith("cuda"):
            continue
        if config.get("autocast") is not None:
            continue
        hardware = (machines.get(record["provenance_id"]) or {}).get("hardware", {})
        steps = record["result"]["step_seconds_all"]
        runs.append(_timing_run(config["model"], config["batch_size"], config["device"], hardware, steps,
                                record["provenance_id"], f"{run} profile"))  # fmt: skip
    for path in sorted((results_dir() / "gpu-check").glob("*.json")):
        record = read_json(path) if not path.name.startswith("key-averages-") else None
        for check in (record or {}).get("checks", []):
            for timing in (check.get("measured") or {}).get("step_timings", []):
                hardware = record["hardware"]
                steps, machine = timing["step_seconds_all"], short_hash(hardware)
                runs.append(_timing_run(timing["model"], timing["batch"], timing["device"], hardware, steps,
                                        machine, "make gpu-check"))  # fmt: skip
    pooled = {}
    for entry in filter(None, runs):
        pooled.setdefault((entry["model"], entry["gpu"], entry["batch"], entry["machine"]), []).append(entry)
    rows = []
    for (model, gpu, batch, machine), entries in pooled.items():
        timing = spread([step for entry in entries for step in entry["steps"]])
        sources = ", ".join(dict.fromkeys(entry["source"] for entry in entries))
        rows.append({"model": model, "gpu": gpu, "batch": batch, "step_seconds": timing.median,
                     "step_min": timing.low, "step_max": timing.high, "runs": len(entries),
                     "machine": machine, "source": sources})  # fmt: skip
    frame = pd.DataFrame(rows, columns=TIMING_COLUMNS)
    return frame.sort_values(["model", "gpu", "batch"], ignore_index=True)


def _timing_run(model, batch, device, hardware: dict, steps, machine: str, source: str) -> dict | None:
    """One run's timed steps for ``gpu_step_timings``; None for a GPU the table of GPUs does not know."""
    index = int(str(device).partition(":")[2] or 0)
    names = [gpu["name"] for gpu in hardware.get("gpus", [])]
    gpu = gpu_key(names[index]) if index < len(names) else None
    if gpu is None:
        return None
    return {"model": model, "gpu": gpu, "batch": batch, "steps": steps, "machine": machine, "source": source}


def measured_computes(measured: pd.DataFrame) -> dict:
    """Per (model, GPU) measured at two or more batches: a ``Compute`` for the lines through the fastest
    ("low"), median ("central") and slowest ("high") timed steps (``fit_line``), the optimizer's share
    taken from the roofline. Empty where no GPU was measured: the roofline stands for every GPU."""
    computes = {}
    if measured.empty:
        return computes
    for (model, gpu), rows in measured.groupby(["model", "gpu"]):
        if rows["batch"].nunique() < 2:
            continue
        optimizer = roofline_step(model, 1, GPUS[gpu])["optimizer_seconds"]
        computes[(model, gpu)] = {
            level: measured_compute(fit_line(rows["batch"], rows[column])[0], optimizer)
            for level, column in (("low", "step_min"), ("central", "step_seconds"), ("high", "step_max"))
        }
    return computes


@cache
def kernels_per_pass(model: str) -> int:
    """Forward and backward kernels of one replica's step: what each extra DataParallel replica launches."""
    return int(layer_costs(model)["kernels"].sum())


def ddp_shards(global_batch: int, gpus: int) -> list[int]:
    """Samples each of ``gpus`` DDP ranks computes for one step of ``global_batch``: equal shares, the
    first ``global_batch % gpus`` ranks one more (100 on 8: four of 13, four of 12). The step waits for
    the largest."""
    if global_batch < gpus:
        raise ValueError(f"global_batch {global_batch} gives no sample to some of {gpus} GPUs")
    share, extra = divmod(global_batch, gpus)
    return [share + (rank < extra) for rank in range(gpus)]


def predict_gpu_step(
    method: str,
    model: str,
    global_batch: int,
    gpus: int,
    compute: Compute,
    link: Link,
    *,
    bucket_cap_mb: float = BUCKET_CAP_MB,
    op_seconds: float = OP_OVERHEAD.central,
    bus_bandwidth: float | None = None,
) -> dict:
    """Predicted seconds of one step of ``global_batch`` samples on ``gpus`` GPUs joined by ``link``.

    - ``dataparallel`` (torch.nn.DataParallel, the seed's method): the replicas compute their chunks
      (``chunk_sizes``) at the same time, so the step takes the largest chunk's step; the parameters are
      broadcast and the gradients reduced as pipelined rings ((k−1)·α + N / busbw each), the inputs
      scattered and outputs gathered through GPU 0's link; one Python process issues every replica's
      ops, so each extra replica adds its kernels × ``op_seconds`` of host time.
    - ``ddp_overlap`` (one process per GPU): each GPU computes its shard (``ddp_shards``: the step waits
      for the largest); DDP's gradient buckets are ring all-reduced behind backward
      (``timemodel.overlapped_all_reduce_finish``).

    ``bus_bandwidth`` overrides the link's central busbw (a scenario's low or high end).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if global_batch < gpus:
        raise ValueError(f"global_batch {global_batch} gives no sample to some of {gpus} GPUs")
    gradient = gradient_bytes(model)
    beta = 1 / (bus_bandwidth or link.bus_bandwidth)
    if method == "dataparallel":
        chunks = chunk_sizes(global_batch, gpus)
        replicas, largest = len(chunks), max(chunks)
        phases = compute(largest)
        if replicas == 1:
            communication = launches = 0.0
        else:
            ring = (replicas - 1) * link.alpha_seconds + gradient * beta
            moved = global_batch - chunks[0]
            communication = 2 * ring + moved * (SAMPLE_BYTES + 2 * OUTPUT_BYTES) * beta
            launches = (replicas - 1) * kernels_per_pass(model) * op_seconds
        compute_seconds = sum(phases.values())
        step = compute_seconds + communication + launches
    else:
        largest = max(ddp_shards(global_batch, gpus))
        phases = compute(largest)
        buckets = ddp_buckets(model, bucket_cap_mb)

        def all_reduce(nbytes: float) -> float:
            return ring_all_reduce_seconds(nbytes, gpus, link.alpha_seconds, beta)

        communication = sum(all_reduce(size) for size in buckets)
        finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
        step = phases["forward"] + finish + phases["optimizer"]
        compute_seconds = sum(phases.values())
    return {"step_seconds": step, "compute_seconds": compute_seconds, "communication_seconds": communication,
            "per_gpu_batch": largest, "samples_per_step": global_batch}  # fmt: skip


OTHER_END = {"low": "high", "central": "central", "high": "low"}  # a measured line's other end


def _compute_for(model: str, gpu: str, measured: dict | None) -> tuple[tuple, str, Callable]:
    """The uncertain inputs of ``model`` on ``gpu``, the basis of its single step and a function from a
    scenario to its ``Compute``: measured lines where ``measured`` has the GPU, else the roofline."""
    lines = (measured or {}).get((model, gpu))
    if lines:
        return MEASURED_INPUTS, "measured", lambda scenario: lines[scenario.measured]
    return ROOFLINE_INPUTS, "roofline", lambda scenario: roofline_compute(model, GPUS[gpu], scenario)


def scenario_predictions(
    models,
    machines=tuple(configs.BY_NAME),
    batches=SEED_BATCH_SIZES,
    method: str = "ddp_overlap",
    *,
    samples: int = TRAIN_CLIPS,
    epochs: int = 20,
    measured: dict | None = None,
    gpu_counts: dict | None = None,
) -> pd.DataFrame:
    """One row per model, machine, GPU count, global batch and scenario of the uncertain inputs.

    ``machines`` are names from ``configurations.CONFIGURATIONS``; each runs on all its GPUs unless
    ``gpu_counts`` maps its name to other counts (the seed's sweep over 1-4 of its GPUs). Columns: the
    step and epoch seconds (⌈samples / batch⌉ steps), the one-GPU step of the same GPU in the same
    scenario and the speed-up over it, dollars per run of ``epochs`` epochs at the machine's hourly price
    and, where a one-GPU offer of that GPU exists, its dollars, the cost multiplier and what an hour of
    waiting must be worth for this machine to cost less in total (``money.break_even_hour_value``). Where
    measured lines replace the roofline, the one-GPU step of a scenario at one end of their spread is taken
    at the other end (min–max pairing, as ``stats.speedup`` pairs timings).
    """
    rows = []
    for model in models:
        for name in machines:
            config = configs.configuration(name)
            inputs, basis, compute_for = _compute_for(model, config.gpu, measured)
            link = LINKS[config.link] if config.link else LINKS["PCIe 4.0 x16"]  # one GPU: no traffic
            alone = configs.baseline(config)
            price = config.hourly_price
            one_price = alone.hourly_price if alone else None
            for label, scenario in scenarios(inputs):
                # one GPU, the whole batch; against measured lines, the other end of their spread (the
                # fastest one-GPU steps against the slowest k-GPU ones, and the reverse): the noise of
                # steps at different batches is independent, so it does not cancel in a speed-up
                alone_at = replace(scenario, shard=1.0, measured=OTHER_END[scenario.measured])
                compute = compute_for(alone_at)
                for k in (gpu_counts or {}).get(name, (config.gpus,)):
                    shard = compute if k == 1 else compute_for(scenario.at_shard())
                    for batch in batches:
                        if batch < k or batch > samples:
                            continue
                        step = predict_gpu_step(method, model, batch, k, shard, link,
                                                op_seconds=scenario.op_seconds,
                                                bus_bandwidth=link.bus(scenario.link))  # fmt: skip
                        single = sum(compute(batch).values())
                        steps = math.ceil(samples / batch)
                        run_hours = step["step_seconds"] * steps * epochs / SECONDS_PER_HOUR
                        one_hours = single * steps * epochs / SECONDS_PER_HOUR
                        dollars = (
                            float(price) * run_hours if price is not None and k == config.gpus else np.nan
                        )
                        one_dollars = float(one_price) * one_hours if one_price is not None else np.nan
                        priced = k > 1 and not (math.isnan(dollars) or math.isnan(one_dollars))
                        break_even = (
                            break_even_hour_value(dollars, run_hours, one_dollars, one_hours)
                            if priced
                            else np.nan
                        )
                        rows.append({"model": model, "machine": name, "gpu": config.gpu, "gpus": k,
                                     "link": config.link, "method": method, "global_batch": batch,
                                     "scenario": label, "basis": basis, **step,
                                     "single_gpu_step_seconds": single,
                                     "epoch_seconds": step["step_seconds"] * steps,
                                     "speedup": single / step["step_seconds"],
                                     "dollars_per_run": dollars, "one_gpu_dollars_per_run": one_dollars,
                                     "cost_multiplier": dollars / one_dollars,
                                     "hour_value_break_even": break_even})  # fmt: skip
    return pd.DataFrame(rows)


BANDED = (
    "step_seconds", "epoch_seconds", "speedup", "dollars_per_run", "cost_multiplier", "hour_value_break_even",
)  # fmt: skip


def input_ends(rows: pd.DataFrame, column: str, name: str) -> pd.Series:
    """``column`` at the input ``name``'s low and high end, every other input central (none where the
    scenarios of ``rows`` do not vary it)."""
    return rows.loc[rows["scenario"].isin([f"{name}: low", f"{name}: high"]), column]


def depends_on(rows: pd.DataFrame, column: str, threshold: float) -> list[str]:
    """The inputs that alone, from their low to their high end, carry ``column`` across ``threshold``."""
    found = []
    for name in INPUTS:
        ends = input_ends(rows, column, name)
        if len(ends) == 2 and ends.min() < threshold <= ends.max():
            found.append(name)
    return found


def verdict(rows: pd.DataFrame, column: str, threshold: float, above: str, below: str) -> str:
    """``above`` or ``below`` "whatever the inputs" when the whole band of ``column`` lies on one side
    of ``threshold``; otherwise what it depends on and what measures that. Against 1 a speed-up's "faster"
    or "slower" adds "by under 10 %" where the whole band lies that close to 1, as a measured one does
    (``stats.verdict_words``): a predicted 0.996× is not "slower" in any sense that matters."""
    values = rows[column].dropna()
    if values.empty:
        return "no price to compare"
    low, high = values.min(), values.max()
    if low >= threshold * (1 - 1e-9):  # a one-GPU machine's speed-up is 1 to rounding
        return f"{verdict_words(above, low, high) if threshold == 1 else above} whatever the inputs"
    if high < threshold * (1 - 1e-9):
        return f"{verdict_words(below, low, high) if threshold == 1 else below} whatever the inputs"
    names, phrase = deciding_inputs(rows, column, threshold)
    return f"depends on {phrase}: {measure_with(names)}" if names else f"depends on {phrase}"


def side(verdict: str) -> str | None:
    """The side of a ``verdict`` that holds whatever the inputs, "faster" or "slower" ("slower by under
    10 % whatever the inputs" is slower); None for one that depends on the inputs or is no speed verdict."""
    word = verdict.split(" ")[0]
    return word if verdict.endswith(" whatever the inputs") and word in ("faster", "slower") else None


def deciding_inputs(rows: pd.DataFrame, column: str, threshold: float) -> tuple[list[str], str]:
    """What carries ``column`` across ``threshold`` over the scenarios of ``rows``, as names and in words:
    the inputs that alone can, from one end of their range ("the a and the b (each alone can tip it)");
    where none can alone, the ends every corner that crosses shares, which only together tip it ("the
    inputs together (no input alone tips it; it tips only with the a at its low end and the b at its high
    end: 8 of the 64 combinations of every input's two ends)"; "every combination that tips it has …"
    where some corner with those ends does not) — what to measure, and which way. Where the crossing
    corners share no end, the inputs are named whose ends alone bring it nearest the threshold."""
    names = depends_on(rows, column, threshold)
    if names:
        each = " (each alone can tip it)" if len(names) > 1 else ""
        return names, listed(f"the {name}" for name in names) + each
    above = rows[column] >= threshold * (1 - 1e-9)
    central = bool(above[rows["scenario"] == "central"].iloc[0])
    corners = rows[rows["scenario"].str.startswith(CORNER)]
    ends = [
        dict(end.rsplit(" ", 1) for end in label.removeprefix(CORNER).split("; "))
        for label in corners["scenario"]
    ]
    tips = (above[corners.index] != central).to_numpy()
    moves = [name for name in INPUTS if input_ends(rows, column, name).nunique() > 1]  # in INPUTS' order
    crossing = [end for end, tipped in zip(ends, tips, strict=True) if tipped]
    shared = {name: crossing[0][name] for name in crossing[0] if name in moves} if crossing else {}
    shared = {name: at for name, at in shared.items() if all(end[name] == at for end in crossing)}
    if shared and all(set(end) <= set(INPUTS) for end in ends):
        needs = listed(f"the {name} at its {at} end" for name, at in shared.items())
        count = f"{len(crossing)} of the {len(ends)} combinations of every input's two ends"
        enough = all(tipped for end, tipped in zip(ends, tips, strict=True)
                     if all(end[name] == at for name, at in shared.items()))  # fmt: skip
        said = f"it tips only with {needs}" if enough else f"every combination that tips it has {needs}"
        return list(shared), f"the inputs together (no input alone tips it; {said}: {count})"
    gap = abs(float(rows.loc[rows["scenario"] == "central", column].iloc[0]) - threshold)
    nearer = {name: gap - (input_ends(rows, column, name) - threshold).abs().min() for name in moves}
    names = [name for name in sorted(nearer, key=nearer.get, reverse=True)[:2] if nearer[name] > 0]
    if not names:
        return [], "the inputs together (no input alone tips it)"
    bring = "brings" if len(names) == 1 else "bring"
    nearest = listed(f"the {name}" for name in names)
    return names, f"the inputs together (no input alone tips it; {nearest} {bring} it nearest)"


def measure_with(names: list[str]) -> str:
    """What measures the uncertain ``INPUTS`` named: "measure it with …", each tool once."""
    tools = "; ".join(dict.fromkeys(INPUTS[name][3] for name in names))
    return f"measure {'them' if len(names) > 1 else 'it'} with {tools}"


def summarize(per_scenario: pd.DataFrame, min_speedup: float = 1.0) -> pd.DataFrame:
    """One row per model, machine, GPU count and global batch: the central value of every banded column
    with its lowest and highest over the scenarios, and verdicts that hold over the whole band or say what
    to measure: faster than one GPU, no dearer per result (cost multiplier ≤ 1) and, when ``min_speedup``
    is above 1, at least that much faster (``enough``)."""
    keys = ["model", "machine", "gpu", "gpus", "link", "method", "global_batch", "basis"]
    rows = []
    for key, group in per_scenario.groupby(keys, dropna=False, sort=False):
        central = group[group["scenario"] == "central"].iloc[0]
        row = dict(zip(keys, key, strict=True))
        row["per_gpu_batch"] = central["per_gpu_batch"]
        for column in BANDED:
            row[column] = central[column]
            row[f"{column}_low"], row[f"{column}_high"] = group[column].min(), group[column].max()
        if row["gpus"] == 1:
            row["faster"] = row["dollars"] = row["enough"] = "the one-GPU baseline"
        else:
            row["faster"] = verdict(group, "speedup", 1.0, "faster", "slower")
            cheaper = group.assign(saving=1 / group["cost_multiplier"])
            row["dollars"] = verdict(cheaper, "saving", 1.0, "no dearer", "dearer")
            row["enough"] = (
                row["faster"]
                if min_speedup == 1
                else verdict(
                    group,
                    "speedup",
                    min_speedup,
                    f"at least {min_speedup:g}× faster",
                    f"not {min_speedup:g}× faster",  # true of a slower machine too
                )
            )
        rows.append(row)
    return pd.DataFrame(rows)


def headline(summary: pd.DataFrame, model: str, machine: str, batch: int, bands: bool = True) -> str:
    """ "a speed-up of 4.90× (3.10–6.00×) for 1.63× the dollars (1.33–2.58×)" for one row of
    ``summarize``; without its ``bands``, "a speed-up of 4.90× for 1.63× the dollars". A speed-up below 1
    reads as the time taken (``stats.ratio_figures``): "1.12× the time (1.05–1.23×) for 8.94× the
    dollars"."""
    row = summary.query("model == @model and machine == @machine and global_batch == @batch").iloc[0]
    figure, band = ratio_figures(row.speedup, row.speedup_low, row.speedup_high)
    text = f"a speed-up of {figure}×" if row.speedup >= 1 else f"{figure}× the time"
    text += f" ({band})" if bands else ""
    if not math.isnan(row.cost_multiplier):
        text += f" for {row.cost_multiplier:.3g}× the dollars"
        text += f" ({row.cost_multiplier_low:.3g}–{row.cost_multiplier_high:.3g}×)" if bands else ""
    return text


def steps_relation(records: list[dict]) -> dict[str, dict]:
    """Chapter 6's S(B) = S_min + E_min / B per model, from ``steps_to_target`` records: of the learning-rate
    rules it fitted (``batchsize.critical_fits``), the one that needs fewer steps at the largest batch it
    measured (a renter picks the better rule). Empty when chapter 6 has not run into this store."""
    from helpers import batchsize

    found = {}
    runs = [r for r in records if r["kind"] == "steps_to_target"]
    for model in sorted({r["config"]["model"] for r in runs}):
        mine = [r for r in runs if r["config"]["model"] == model]
        table = batchsize.critical_batch_table(mine)
        largest = int(table["global_batch"].max())
        fits = batchsize.critical_fits(table)
        if fits:
            rule, fit = min(fits.items(), key=lambda item: item[1]["s_min"] + item[1]["e_min"] / largest)
            found[model] = {**fit, "rule": rule, "largest_batch": largest,
                            "envelope": batchsize.seed_envelope_fits(table, rule),
                            "smallest_batch": int(table["global_batch"].min()),
                            "train_samples": mine[0]["config"]["train_samples"],
                            "target_loss": mine[0]["config"]["target_loss"]}  # fmt: skip
    return found


def time_to_result(per_scenario: pd.DataFrame, relation: dict, cap: int | None = None) -> pd.DataFrame:
    """Seconds and dollars to chapter 6's target: S(B) steps of each predicted step, per scenario, for every
    global batch up to ``cap`` (default: the largest batch chapter 6 measured the relation at, and never
    beyond the training set): past it S(B) would be an extrapolation shown as a result. Beside each
    scenario's row at the fitted S(B), the same scenario at the S(B) fitted to the fewest and to the most
    steps over seeds (``relation["envelope"]``; scenario "<scenario>, fewest steps" and "…, most steps"),
    so that ``result_band`` spans the seeds' spread as well as the step's inputs."""
    cap = min(TRAIN_CLIPS, relation["largest_batch"] if cap is None else cap)
    frame = per_scenario[per_scenario["global_batch"] <= cap]
    variants = [(frame.copy(), relation)]
    for case, fit in relation.get("envelope", {}).items():
        variants.append((frame.assign(scenario=frame["scenario"] + f", {case} steps"), fit))
    for rows, fit in variants:
        rows["steps_to_target"] = fit["s_min"] + fit["e_min"] / rows["global_batch"]
    frame = pd.concat([rows for rows, _ in variants], ignore_index=True)
    frame["seconds_to_target"] = frame["steps_to_target"] * frame["step_seconds"]
    hourly = {name: configs.configuration(name).hourly_price for name in frame["machine"].unique()}
    rate = frame["machine"].map(lambda name: float(hourly[name]) if hourly[name] is not None else np.nan)
    frame["dollars_to_target"] = rate * frame["seconds_to_target"] / SECONDS_PER_HOUR
    return frame


def result_band(frame: pd.DataFrame, columns=("seconds_to_target", "dollars_to_target")) -> pd.DataFrame:
    """Per model, machine and global batch: the central value of ``columns`` and their band."""
    keys = ["model", "machine", "gpus", "global_batch"]
    central = frame[frame["scenario"] == "central"].set_index(keys)[list(columns)]
    grouped = frame.groupby(keys)[list(columns)]
    low, high = grouped.min().add_suffix("_low"), grouped.max().add_suffix("_high")
    return central.join(low).join(high).reset_index()


def fastest_batches(bands: pd.DataFrame) -> pd.DataFrame:
    """Per model and machine, the global batch with the shortest central time to the target, and it."""
    best = bands.loc[bands.groupby(["model", "machine"])["seconds_to_target"].idxmin()]
    return best.sort_values(["model", "seconds_to_target"]).reset_index(drop=True)


def result_costs(
    records: list[dict],
    model: str,
    training_batch: int,
    target_accuracy: float,
    machines,
    *,
    measured: dict | None = None,
) -> pd.DataFrame | None:
    """Seconds and dollars to ``target_accuracy`` for ``model``: chapter 1's measured epoch on this
    machine, chapter 3's DDP runs scaled by their steps to the same epoch (labelled by ranks and bucket
    size), and each of ``machines``' predicted epoch with its band. None when chapter 1 has no run of
    ``model`` at ``training_batch`` or it never reached the target (the reason is in ``reason``)."""
    from helpers.costmodel import money

    run = next((r for r in records if r["kind"] == "training" and r["config"]["model"] == model
                and r["config"]["batch_size"] == training_batch), None)  # fmt: skip
    if run is None:
        return None
    epochs = money.epochs_to_accuracy(run["result"]["history"], target_accuracy)
    if epochs is None:
        clips, trained = run["config"]["train_samples"] or TRAIN_CLIPS, len(run["result"]["history"])
        return pd.DataFrame({"model": [model], "reason": [
            f"never reached {target_accuracy:.0%} test accuracy in this machine's chapter 1 run, which this "
            f"chapter reads ({counted(trained, 'epoch')} of {clips:,} clips)"]})  # fmt: skip
    samples = run["config"]["train_samples"] or TRAIN_CLIPS
    rows = [{"setup": "this machine, one process", "basis": "measured (chapter 1)",
             "epoch_seconds": run["result"]["epoch_seconds"], "hourly_price": None}]  # fmt: skip
    launches: dict[tuple, list[float]] = {}  # a configuration launched several times: its median epoch
    for record in records:
        config = record["config"]
        if (
            record["kind"] == "ddp_run"
            and config["model"] == model
            and config["global_batch_size"] == training_batch
        ):
            key = (
                config["world_size"],
                config["bucket_cap_mb"],
                config.get("compression"),
                config["train_samples"],
            )
            launches.setdefault(key, []).append(record["result"]["epoch_seconds"])
    for (ranks, bucket, compression, clips), epochs_measured in launches.items():
        clips = clips or samples
        gradients = f", {compression} gradients" if compression else ""
        setup = f"this machine, DDP {counted(ranks, 'rank')}, {bucket:g} MiB buckets{gradients}"
        rows.append({"setup": setup,
                     "basis": f"measured on {clips} clips "
                              f"({counted(len(epochs_measured), 'launch')}, median), "
                              f"scaled by steps to {samples}",
                     "epoch_seconds": money.scale_epoch(float(np.median(epochs_measured)), clips, samples,
                                                        training_batch), "hourly_price": None})  # fmt: skip
    table = money.cost_to_target(epochs, rows).assign(seconds_low=np.nan, seconds_high=np.nan,
                                                      dollars_low=np.nan, dollars_high=np.nan)  # fmt: skip
    predicted = summarize(scenario_predictions((model,), machines, (training_batch,), samples=samples,
                                               epochs=epochs, measured=measured))  # fmt: skip
    gpu_rows = pd.DataFrame({
        "setup": predicted["machine"], "basis": "predicted: " + predicted["basis"].map(BASIS_WORDS),
        "epochs": epochs,
        "seconds": predicted["epoch_seconds"] * epochs, "hours": predicted["epoch_seconds"] * epochs / 3600,
        "dollars": predicted["dollars_per_run"], "seconds_low": predicted["epoch_seconds_low"] * epochs,
        "seconds_high": predicted["epoch_seconds_high"] * epochs,
        "dollars_low": predicted["dollars_per_run_low"],
        "dollars_high": predicted["dollars_per_run_high"]})  # fmt: skip
    return pd.concat([table, gpu_rows], ignore_index=True).assign(model=model)
