"""Chapter 2's DataParallel measurements as the chapter reads them (chapter 2): the bytes and the phases in
tables, the transfers' speeds and fits, the rebuild against ``torch.nn.DataParallel`` and against chapter 1's
steps, and the sentences the chapter glues, each built from the verdict it states.

``helpers.dataparallel`` measures; this module reads what it measured, and ``helpers.dataparallel_sharing``
says what sharing one device does to the replicas.
"""

from __future__ import annotations

import math
import mmap
import re
import statistics

import pandas as pd
import torch
from torch.utils.data import TensorDataset

from helpers import stats
from helpers.costmodel import specs
from helpers.dataparallel import PHASES, TRANSFER_PHASES, bytes_per_epoch
from helpers.models import MIB, MMAP_THRESHOLD_MAX, build_model, parameter_bytes
from helpers.stats import (
    MATTERS,
    describe_speedup,
    interval_digits,
    ms,
    ratio_words,
    shown_ratio,
    significant,
    speedup,
)
from helpers.train import milliseconds, stored_step_timing


def gbps(bytes_per_second: float) -> str:
    """Bytes per second as GB/s (10⁹ bytes) to three significant digits: 1,160, 880, 3.10."""
    return significant(bytes_per_second / 1e9)


def speed_range(low: float, high: float) -> str:
    """Two speeds in bytes per second as a range of GB/s, each to three significant digits: 115–196."""
    return f"{gbps(low)}–{gbps(high)}"


def gpu_model(hardware: dict, device: str) -> str | None:
    """The driver's name of the GPU that ``device`` (``cuda:i``, an index among the visible GPUs) is on
    the machine ``hardware`` describes (``hardware.fingerprint``); None for the CPU or a GPU not listed."""
    place = torch.device(device)
    if place.type != "cuda":
        return None
    visible = hardware.get("visible_gpu_indices") or []
    index = place.index or 0
    physical = visible[index] if index < len(visible) else index
    found = [gpu["name"] for gpu in hardware.get("gpus") or [] if gpu.get("index") == physical]
    return found[0] if found else None


def datasheet(gpu_name: str | None) -> specs.GPU | None:
    """The datasheet figures of a GPU as its driver names it (``costmodel.specs.GPUS``), or None."""
    key = specs.gpu_key(gpu_name) if gpu_name else None
    return specs.GPUS.get(key) if key else None


def describe_seed_verdicts(table: pd.DataFrame) -> dict[str, str]:
    """Per model, four GPUs against one over the seed's sweep, from ``costmodel.seed.seed_verdict_table``
    (columns ``model``, ``global_batch``, ``faster``): ``slower at every batch of the seed's sweep (10 to
    600)``, or the verdict of each run of consecutive batches, ``undecided`` where the inputs decide
    (``undecided at batch 10 and faster from batch 20 to 600``). Plain text."""
    described = {}
    for model, rows in table.groupby("model", sort=False):
        ordered = rows.sort_values("global_batch")
        words = [verdict.split(" ")[0] if verdict.endswith("whatever the inputs") else "undecided"
                 for verdict in ordered["faster"]]  # fmt: skip
        runs = stats.batch_runs(zip(ordered["global_batch"], words, strict=True))
        if len(runs) == 1:
            word, first, last = runs[0]
            described[model] = f"{word} at every batch of the seed's sweep ({first} to {last})"
            continue
        described[model] = stats.listed(stats.run_phrases(runs))
    return described


def moved_table(moved: dict) -> pd.DataFrame:
    """The bytes each phase of one step moved between replicas (a ``StepReport``'s ``bytes``), to read."""
    return pd.DataFrame(
        {"bytes moved": {phase.replace("_", " "): f"{count:,}" for phase, count in moved.items()}}
    )


def megabytes(count: int) -> str:
    """Bytes as MB (10⁶) to read, at most four significant digits: whole MB from 1,000 up ("4,841"), one
    decimal from 10 ("150.5", so that two of them add up to the prose's 301), two significant digits below
    ("0.040")."""
    value = count / 1e6
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}" if value >= 10 else significant(value, 2)


def bytes_table(names, replica_counts, samples: int, batch_size: int) -> pd.DataFrame:
    """``bytes_per_epoch`` to read: MB (10⁶ bytes) per phase and in total (rows), per model and replica
    count (columns), for one epoch of ``samples`` clips at ``batch_size``."""
    columns = {}
    for name in names:
        model = build_model(name)
        for replicas in replica_counts:
            counted = bytes_per_epoch(model, samples=samples, batch_size=batch_size, replicas=replicas)
            counted["total"] = sum(counted.values())
            columns[(name, f"{replicas} replicas")] = {
                phase.replace("_", " "): megabytes(count) for phase, count in counted.items()
            }
    return pd.DataFrame(columns).rename_axis("MB moved per epoch")


def against_chapter_one(
    store, records: list[dict], train_set: TensorDataset, device: str, **settings
) -> dict:
    """Each one-replica record of ``records`` against chapter 1's plain training step at the same model
    and batch (``train.stored_step_timing`` with chapter 1's Adam, learning rate 1e-3, and ``settings``):
    ``table`` (to read: both spreads and ``speedup`` of the replica over chapter 1), ``verdicts`` (how
    many comparisons gave each verdict), ``comparisons`` (per model and batch: the verdict, the ratio with
    its interval, and both median steps) and ``reused`` (whether every chapter-1 record came from the
    store, not measured here). The store keys every record by its machine, so chapter 1's records are
    this machine's whichever edition of chapter 1 a reader sees."""
    before, rows, comparisons = len(store.records("step_timing")), [], []
    for record in (r for r in records if r["result"]["replicas"] == 1):
        name, size, one = record["config"]["model"], record["config"]["batch_size"], record["result"]
        chapter_one = stored_step_timing(store, name, train_set, batch_size=size, optimizer="adam", lr=1e-3,
                                         device=device, **settings)  # fmt: skip
        plain = chapter_one["result"]
        change = speedup(plain["step_seconds_all"], one["step_seconds_all"])
        comparisons.append({"model": name, "batch_size": size, "verdict": change["verdict"],
                            "ratio": change["speedup"], "low": change["low"], "high": change["high"],
                            "chapter_one_seconds": statistics.median(plain["step_seconds_all"]),
                            "replica_seconds": statistics.median(one["step_seconds_all"])})  # fmt: skip
        rows.append({"model": name, "batch size": size,
                     "chapter 1's step (ms)": milliseconds(plain["step_seconds_all"], unit=""),
                     "one replica's step (ms)": milliseconds(one["step_seconds_all"], unit=""),
                     "one replica against chapter 1": describe_speedup(change),
                     "verdict": change["verdict"]})  # fmt: skip
    table = pd.DataFrame(rows).set_index(["model", "batch size"])
    return {"table": table.drop(columns="verdict"), "verdicts": table["verdict"].value_counts().to_dict(),
            "comparisons": comparisons, "reused": len(store.records("step_timing")) == before}  # fmt: skip


def chapter_one_source(reused: bool) -> str:
    """Where the chapter-1 steps of ``against_chapter_one`` come from, to follow "The chapter-1 steps are":
    chapter 1's records of this same machine (the store keys records by machine), which need not be the
    figures of the chapter 1 page a reader sees (another edition, from another machine), or measured here
    when the store held none. Plain text."""
    if reused:
        return (
            "chapter 1's measurements on this same machine, its records of the same configurations read "
            "from the results store (measured when chapter 1 ran here, not measured again); they need not "
            "be the figures on the chapter 1 page this book shows, which may be another machine's edition"
        )
    return (
        "measured here with chapter 1's settings, because this run's store held no chapter-1 record for "
        "them; the chapter 1 page this book shows may come from another run, or another machine"
    )


def _ratio_text(comparison: dict) -> str:
    """A comparison's ratio as the table says it (``stats.shown_ratio``): "1.05×", or below 1 the time it
    takes, "1.12× as long", with the decimals its interval needs (``stats.interval_digits``)."""
    said = {"speedup": comparison["ratio"], "low": comparison["low"], "high": comparison["high"]}
    _, low, high = shown_ratio(said)
    return ratio_words(comparison["ratio"], interval_digits(comparison["verdict"], low, high))


def consistency_sentence(consistency: dict, most_named: int = 4) -> str:
    """What ``against_chapter_one`` found: how many comparisons agree within ``MATTERS`` (their whole
    interval inside ±10 %), how many of those are still measurably apart, which differ by more (their whole
    interval beyond ±10 %), which are measurably apart with an interval that reaches inside ±10 % (apart,
    by an amount not resolved), and which spread too widely to tell. Up to ``most_named`` configurations
    are named with their ratios; more are counted, for the table to show. Plain text."""
    comparisons = consistency["comparisons"]
    inside, outside = 1 / (1 + MATTERS), 1 + MATTERS
    within = [c for c in comparisons if c["low"] >= inside and c["high"] <= outside]
    beyond = [c for c in comparisons if c["high"] < inside or c["low"] > outside]
    straddling = [c for c in comparisons if c not in within and c not in beyond
                  and c["verdict"] in ("faster", "slower")]  # fmt: skip
    unclear = [c for c in comparisons if c not in within and c not in beyond and c not in straddling]
    apart = [c for c in within if c["verdict"] in ("faster", "slower")]

    def named(found: list[dict], ratios: bool = True) -> str:
        if len(found) > most_named:
            return f"{len(found)} configurations (the table)"
        names = [f"{c['model']} at batch {c['batch_size']}"
                 + (f" ({_ratio_text(c)})" if ratios else "")
                 for c in found]  # fmt: skip
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    everyone = len(within) == len(comparisons)
    said = f"{f'all {len(comparisons)}' if everyone else len(within)} agree within {MATTERS:.0%}"
    if apart:
        gap = max(abs(shown_ratio({**c, "speedup": c["ratio"]})[0] - 1) for c in apart)  # as the table says
        count = "all" if len(apart) == len(within) else f"{len(apart)} of them"
        said += f" ({count} measurably apart, by at most {gap:.0%})"
    if everyone:
        said += ": one replica costs what chapter 1's step costs" + (", within that" if apart else "")
    parts = [said]
    if beyond:
        one = len(beyond) == 1
        parts.append(
            f"{named(beyond)} {'differs' if one else 'differ'} by more, {'its' if one else 'their'} whole "
            f"interval beyond ±{MATTERS:.0%}"
        )
    if straddling:
        one = len(straddling) == 1
        parts.append(
            f"{named(straddling)} {'is' if one else 'are'} measurably apart, but {'its' if one else 'their'} "
            f"interval reaches inside ±{MATTERS:.0%}, so whether by more than {MATTERS:.0%} is not resolved"
        )
    if unclear:
        parts.append(f"for {named(unclear, ratios=False)} the steps spread too widely to tell")
    if len(parts) == 1:
        return parts[0]
    return "; ".join(parts[:-1]) + ("; and " if len(parts) > 2 else "; ") + parts[-1]


def extra_add_seconds(model: str, reused: dict) -> float:
    """The seconds the rebuild's extra add of every gradient into the zeroed one should take for ``model``:
    two reads and a write of its parameter bytes, 1.5 copies at the reused-buffer speed of
    ``copy_seconds_per_byte`` (a copy reads once and writes once)."""
    return 1.5 * reused["seconds_per_byte"] * parameter_bytes(build_model(model))


def gap_sentence(consistency: dict, reused: dict) -> str:
    """Per model, how much longer one replica's step took than chapter 1's where it was measurably slower
    (``against_chapter_one``), against what the rebuild's extra add of every gradient should cost
    (``extra_add_seconds`` at ``reused``'s speed): its share of the gaps, and whether the records explain
    the rest (they do not time the gathered loss or the two backward calls on their own). Plain text;
    empty where no replica was measurably slower."""
    said, unexplained = [], False
    for model in dict.fromkeys(c["model"] for c in consistency["comparisons"]):
        slower = [c for c in consistency["comparisons"] if c["model"] == model and c["verdict"] == "slower"]
        if not slower:
            continue
        gaps = [c["replica_seconds"] - c["chapter_one_seconds"] for c in slower]
        batches = sorted(c["batch_size"] for c in slower)
        if len(batches) == 1:
            where = f"at batch {batches[0]}"
        elif len(batches) <= 4:
            where = f"at batches {', '.join(map(str, batches[:-1]))} and {batches[-1]}"
        else:
            where = f"at {len(batches)} batches from {batches[0]} to {batches[-1]}"
        low, high = min(gaps), max(gaps)
        add = extra_add_seconds(model, reused)
        span = f"{ms(low)} ms" if len(gaps) == 1 else f"{ms(low)}–{ms(high)} ms"
        share = f"{significant(100 * add / low, 2)}% of " + ("it" if len(gaps) == 1 else "the smallest gap")
        if add >= 0.8 * high:
            share += ", about all of them" if len(gaps) > 1 else ", about all of it"
        elif add < 0.5 * low:
            share += f", so most of {'each gap' if len(gaps) > 1 else 'it'} is not explained by these records"
            unexplained = True
        else:
            share += ", and the rest is not explained by these records"
            unexplained = True
        said.append(
            f"{model}'s replica, measurably slower {where}, took {span} longer than chapter 1's step, and "
            f"the extra add of its gradients should take about {ms(add)} ms at the reused copy's speed "
            f"(section 2.5), {share}"
        )
    if not said:
        return ""
    text = "; ".join(said)
    if unexplained:
        text += " (they do not time the gathered loss or the two backward calls on their own)"
    return text


def epoch_bytes_table(names, replica_counts, sample_counts, batch_size: int) -> pd.DataFrame:
    """Bytes each phase moves in one epoch, per model, replica count and epoch size, with their total."""
    rows = []
    for name in names:
        model = build_model(name)
        for replicas in replica_counts:
            for samples in sample_counts:
                counted = bytes_per_epoch(model, samples=samples, batch_size=batch_size, replicas=replicas)
                rows.append({"model": name, "replicas": replicas, "clips": samples, **counted,
                             "total": sum(counted.values())})  # fmt: skip
    return pd.DataFrame(rows)


def steps_frame(records: list[dict]) -> pd.DataFrame:
    """Every timed step of ``dataparallel_timing`` records, one row each: model, replicas, batch, the
    step's seconds and the epoch seconds it implies."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        for repeat, seconds in enumerate(result["step_seconds_all"]):
            rows.append({"model": config["model"], "replicas": result["replicas"],
                         "batch_size": config["batch_size"], "repeat": repeat, "step_seconds": seconds,
                         "epoch_seconds": seconds * result["steps_per_epoch"]})  # fmt: skip
    return pd.DataFrame(rows)


def phase_frame(records: list[dict]) -> pd.DataFrame:
    """Median seconds and bytes of each phase of ``dataparallel_timing`` records, one row per phase, in the
    order a step runs them (``dataparallel.PHASES``)."""
    return pd.DataFrame(
        [
            {"model": record["config"]["model"], "replicas": record["result"]["replicas"],
             "batch_size": record["config"]["batch_size"], "phase": phase,
             "seconds": record["result"]["phase_seconds"][phase],
             "bytes": record["result"]["bytes_per_step"].get(phase, 0),
             "kind": "transfer" if phase in TRANSFER_PHASES else "compute"}
            for record in records
            for phase in PHASES if phase in record["result"]["phase_seconds"]
        ]
    )  # fmt: skip


TRANSFER_GROUPS = {
    "all transfer phases": TRANSFER_PHASES,
    "broadcast parameters": ("broadcast_parameters",),
    "reduce gradients": ("reduce_gradients",),
}


def transfer_points(records: list[dict]) -> pd.DataFrame:
    """One row per ``dataparallel_timing`` record with two replicas or more and per group of transfer
    phases (``TRANSFER_GROUPS``): the bytes that group moved per step and its median seconds."""
    rows = []
    for record in records:
        result = record["result"]
        if result["replicas"] < 2:
            continue
        for group, phases in TRANSFER_GROUPS.items():
            rows.append({"phases": group, "model": record["config"]["model"], "replicas": result["replicas"],
                         "batch_size": record["config"]["batch_size"],
                         "bytes": sum(result["bytes_per_step"].get(phase, 0) for phase in phases),
                         "seconds": sum(result["phase_seconds"][phase] for phase in phases)})  # fmt: skip
    return pd.DataFrame(rows)


def transfer_fits(points: pd.DataFrame) -> dict[str, dict]:
    """``fit_seconds_per_byte`` per group of ``transfer_points``."""
    return {
        group: fit_seconds_per_byte(rows["bytes"], rows["seconds"])
        for group, rows in points.groupby("phases", sort=False)
    }


def phase_speeds(points: pd.DataFrame, min_bytes: float = 10e6) -> dict[str, tuple[float, float]]:
    """Per group of ``transfer_points``: the slowest and the fastest bytes per second of its configurations
    that moved at least ``min_bytes`` per step (where a copy's fixed start-up does not dominate; every
    configuration where none did)."""
    speeds = {}
    for group, rows in points.groupby("phases", sort=False):
        large = rows[rows["bytes"] >= min_bytes]
        rate = (large if len(large) else rows).pipe(lambda f: f["bytes"] / f["seconds"])
        speeds[group] = (float(rate.min()), float(rate.max()))
    return speeds


def fit_seconds_per_byte(bytes_moved, seconds) -> dict:
    """Least-squares line seconds = intercept + slope x bytes (the seed's "Time = const x Transfer").

    The slope's inverse is the effective bandwidth of the copies, in bytes per second.
    """
    x = torch.as_tensor(list(bytes_moved), dtype=torch.float64)
    y = torch.as_tensor(list(seconds), dtype=torch.float64)
    design = torch.stack([torch.ones_like(x), x], dim=1)
    intercept, slope = torch.linalg.lstsq(design, y.unsqueeze(1)).solution.squeeze(1).tolist()
    residual = y - (intercept + slope * x)
    r_squared = 1 - float(residual.pow(2).sum() / (y - y.mean()).pow(2).sum())
    return {
        "intercept_seconds": intercept,
        "seconds_per_byte": slope,
        "bytes_per_second": 1 / slope if slope > 0 else float("inf"),
        "r_squared": r_squared,
    }


LINE_HOLDS = 0.5  # an R² below this: time does not follow bytes, and no speed is read off the slope


def slope_sentence(fit: dict) -> str:
    """What the seed's one line through every transfer point (``fit_seconds_per_byte``) says: its speed
    where the line holds (R² at least ``LINE_HOLDS``), else that time does not follow bytes here."""
    r2, speed = fit["r_squared"], fit["bytes_per_second"]
    if not math.isfinite(r2):
        nothing = "With no configuration of two replicas or more timed, there is no line to fit."
        return nothing + " Two copies are at work"
    if r2 >= LINE_HOLDS and math.isfinite(speed):
        return (f"The single slope of the seed's model, {gbps(speed)} GB/s (R² {r2:.2f}), blends two "
                "different copies")  # fmt: skip
    return (f"The seed's model, one line through every point, does not hold on this device: its R² is "
            f"{r2:.2f}, so the time of a transfer phase does not follow its bytes here, and the line's slope "
            "is the speed of no copy. Two different copies are at work")  # fmt: skip


def torch_comparison(torch_records: list[dict], ours: list[dict]) -> pd.DataFrame:
    """``torch.nn.DataParallel``'s median step next to the rebuilt one's, per model, replicas and batch."""

    def key(record):
        return record["config"]["model"], record["result"]["replicas"], record["config"]["batch_size"]

    rebuilt = {key(record): record["result"]["step_seconds"] for record in ours}
    rows = []
    for record in torch_records:
        model, replicas, batch = key(record)
        ours = rebuilt.get((model, replicas, batch))
        rows.append({"model": model, "replicas": replicas, "batch size": batch,
                     "torch.nn.DataParallel step (ms)": f"{record['result']['step_seconds'] * 1e3:,.1f}",
                     "rebuilt step (ms)": f"{ours * 1e3:,.1f}" if ours else "—"})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "replicas", "batch size"])


def copy_method(result: dict) -> str:
    """How a ``copy_seconds_per_byte`` result was timed, from its ``method``: ``the median of 9 copies
    after 1 warm-up``; empty where it names none."""
    found = re.search(r"median of ([\d,]+) copies.*after (\d+) warm-up", result.get("method", ""))
    if not found:
        return ""
    return f"the median of {found[1]} copies after {found[2]} warm-up{'' if found[2] == '1' else 's'}"


def fresh_memory_sentence(
    fresh: dict, reused: dict, device: str = "cpu", page_bytes: int = mmap.PAGESIZE, gpu: str | None = None
) -> str:
    """Why a copy into a fresh buffer costs what it does against one into a reused buffer
    (``copy_seconds_per_byte`` results of the same bytes on ``device``): on a CPU, a buffer of
    ``models.MMAP_THRESHOLD_MAX`` or more gets new pages from the kernel, each faulting and zeroed on its
    first write, and the difference per page follows. On a GPU, what the records are (medians of copies
    timed on the host's clock, launch and synchronisation included, so not the memory's speed: with
    ``gpu``, the driver's name of a GPU in ``costmodel.specs``, its datasheet bandwidth), that torch's
    caching allocator hands back freed memory without the driver, and that the records do not split the
    difference, whose allocation and launch on the host are a plausible cause only. Plain text."""
    speeds = (
        f"a copy of {fresh['bytes'] / MIB:,.0f} MiB took {ms(fresh['seconds'])} ms into a fresh buffer "
        f"and {ms(reused['seconds'])} ms into a reused one ({gbps(1 / fresh['seconds_per_byte'])} "
        f"against {gbps(1 / reused['seconds_per_byte'])} GB/s)"
    )
    if torch.device(device).type == "cuda":
        how = copy_method(fresh)
        sheet = datasheet(gpu)
        memory = (
            f"the datasheet gives {sheet.memory_bandwidth / 1e12:.1f} TB/s for the {sheet.name}; chapter 5 "
            "lists the source"
            if sheet
            else "which this chapter does not measure"
        )
        text = (
            f"{speeds}, {'each ' + how + ', every copy' if how else 'each copy'} timed on the host's clock "
            "from one synchronisation of the GPU to the next: the times include launching the copy and "
            "waiting for it, and the speeds count each byte once though a copy reads and writes it, so "
            "neither is the speed of the "
            f"GPU's memory ({memory}). By torch's design (not measured here), its caching allocator hands "
            "freed GPU memory back to the next tensor without asking the driver, so no page is new to the "
            "GPU; the fresh copy's time also holds the call to `torch.empty_like` that allocates its buffer"
        )
        gap = fresh["seconds"] - reused["seconds"]
        if max(fresh["seconds"], reused["seconds"]) <= (1 + MATTERS) * min(
            fresh["seconds"], reused["seconds"]
        ):
            return text + f", and the two agree within {MATTERS:.0%}"
        return text + (
            f". The two differ by {ms(abs(gap))} ms, more than {MATTERS:.0%}, and the records, which time "
            "each copy whole, do not split that difference: the allocation and the launch on the host are "
            "a plausible cause, not a measured one"
        )
    pages = -(-fresh["bytes"] // page_bytes)
    extra = (fresh["seconds"] - reused["seconds"]) / pages
    text = (
        f"{speeds}. A buffer of {MMAP_THRESHOLD_MAX // MIB} MiB or more gets new pages from the kernel at "
        f"every allocation (glibc serves it with mmap), and each {page_bytes // 1024} KiB page faults and is "
        f"zeroed by the kernel on its first write: {pages:,} pages here"
    )
    if fresh["seconds"] > (1 + MATTERS) * reused["seconds"]:
        return text + f", {extra * 1e6:.2f} µs more per page than the copy into reused memory"
    return text + ", and here they cost no more than reused memory"


def copy_speeds_note(fresh: dict, reused: dict, device: str = "cpu") -> str:
    """The plain copies' speeds for the chapter's answer (``copy_seconds_per_byte`` results on
    ``device``), with what section 2.5 (``fresh_memory_sentence``) says of them: on a CPU, what sets
    their difference; on a GPU, that both are host-clock times, not the memory's speed, and that the
    records do not say what sets their difference. Plain text."""
    speeds = (
        f"a plain copy ran at {gbps(1 / fresh['seconds_per_byte'])} GB/s into newly allocated memory and "
        f"{gbps(1 / reused['seconds_per_byte'])} GB/s into reused memory"
    )
    apart = max(fresh["seconds"], reused["seconds"]) > (1 + MATTERS) * min(
        fresh["seconds"], reused["seconds"]
    )
    if torch.device(device).type == "cuda":
        return speeds + (
            ", both timed on the host's clock with the copy's launch and synchronisation, so neither is the "
            "GPU memory's speed; section 2.5 says what the two timings hold"
            + (", and that these records do not say what sets their difference" if apart else "")
        )
    if apart:
        return speeds + "; section 2.5 says what sets that difference on this device"
    return speeds + "; section 2.5 reads the two"


def reduce_prediction(points: pd.DataFrame, fresh: dict, reused: dict, model: str = "LinearNet",
                      min_bytes: float = 10e6) -> str:  # fmt: skip
    """The broadcast's and the reduce's speeds as the plain copies predict them (``copy_seconds_per_byte``
    results) against the measured ones (``phase_speeds`` of ``transfer_points``). The broadcast copies
    into existing parameters: the reused-buffer speed. The reduce copies each replica's gradients into a
    fresh buffer and adds it to d0's: a fresh copy, then two reads and a write (a copy makes two passes,
    so 1.5 reused copies' time). With ``model``'s gradient bytes per extra replica. Plain text."""
    copy_per_byte, add_per_byte = fresh["seconds_per_byte"], 1.5 * reused["seconds_per_byte"]
    gradient = parameter_bytes(build_model(model))
    predicted = {"broadcast parameters": 1 / reused["seconds_per_byte"],
                 "reduce gradients": 1 / (copy_per_byte + add_per_byte)}  # fmt: skip
    text = (
        "the broadcast (a copy into existing parameters) should run at "
        f"{gbps(predicted['broadcast parameters'])} GB/s and the reduce (a copy into a fresh buffer, "
        "then an addition that reads two tensors and writes one) at "
        f"{gbps(predicted['reduce gradients'])} GB/s: for {model}'s {gradient / MIB:,.1f} MiB of "
        f"gradients, {ms(gradient * copy_per_byte)} ms copying and {ms(gradient * add_per_byte)} ms adding, "
        f"{ms(gradient * (copy_per_byte + add_per_byte))} ms per extra replica"
    )
    reduce_rows = points[(points["phases"] == "reduce gradients") & (points["model"] == model)]
    if len(reduce_rows):
        per_replica = reduce_rows["seconds"] / (reduce_rows["replicas"] - 1)
        text += (
            f"; measured, {model}'s reduce took {ms(per_replica.min())}–{ms(per_replica.max())} ms per "
            "extra replica"
        )
    speeds = phase_speeds(points, min_bytes)
    if not {"broadcast parameters", "reduce gradients"} <= set(speeds):
        return text
    (b_low, b_high), (r_low, r_high) = speeds["broadcast parameters"], speeds["reduce gradients"]
    which = (
        f"each configuration that moved at least {min_bytes / 1e6:,.0f} MB per step"
        if (points["bytes"] >= min_bytes).any()
        else "each configuration"
    )
    if r_high < b_low:
        order = "the reduce was the slower of the two in every configuration"
    elif r_low > b_high:
        order = "the reduce was the faster of the two in every configuration, against the prediction"
    else:
        order = "the two ranges overlap in this run, so the measured speeds alone do not tell the two apart"
    return text + (
        f". Measured in {which}, the broadcast ran at {speed_range(b_low, b_high)} GB/s and the reduce, "
        f"its copy and its addition together, at {speed_range(r_low, r_high)} GB/s: {order}"
    )
