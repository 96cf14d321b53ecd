"""Chapter 2's DataParallel measurements as the chapter reads them (chapter 2): the bytes and the phases in
tables, the transfers' speeds and fits, the rebuild against ``torch.nn.DataParallel`` and against chapter 1's
steps, and the sentences the chapter glues, each built from the verdict it states.

``helpers.dataparallel`` measures; this module reads what it measured.
"""

from __future__ import annotations

import math
import mmap

import pandas as pd
import torch
from torch.utils.data import TensorDataset

from helpers.dataparallel import PHASES, TRANSFER_PHASES, bytes_per_epoch
from helpers.ddp import significant
from helpers.models import MIB, MMAP_THRESHOLD_MAX, build_model, parameter_bytes
from helpers.stats import MATTERS, describe_speedup, speedup
from helpers.train import counted, milliseconds, stored_step_timing

SHARED_DEVICE_NOTE = (
    "**The replicas share one device on this machine**, so these timings measure what DataParallel's "
    "mechanics *cost* — the copies, the threads, the extra kernel launches — not a speed-up: every replica "
    "computes on the same cores (or the same GPU). A machine with one GPU per replica runs the same "
    "notebook and shows the speed-up, if there is one (`gpu` profile)."
)


def times_as_long(ratio: float) -> str:
    """A ratio of times to read, one form whatever its size: ``0.42× as long``, ``0.0025× as long``."""
    return f"{ratio:.2g}× as long"


def ms(seconds: float) -> str:
    """Seconds as milliseconds to three significant digits, never in powers of ten: 2,500, 12.3, 0.270."""
    return significant(seconds * 1e3)


def explain_replicas(single: dict, multi: dict, shared: bool, on_gpu: bool = False) -> str:
    """What k replicas did to one step, from the ``time_dataparallel_steps`` results of 1 and k replicas,
    and why: the seed's label (a "network choke" moves data longer than it computes, a "compute choke",
    the seed's "GPU choke", the reverse), the step against one replica (``helpers.stats.speedup``), and
    how the forward and the backward changed, which the label does not see (the optimizer's update, done
    once whatever the replicas, would dilute a ratio of all the computing). ``shared``: the replicas share
    one device, so each runs the whole model on the same cores, or (``on_gpu``) the same GPU."""
    ratio = multi["communication_to_compute"]
    kind = "network choke" if ratio >= 1 else "compute choke"
    change = speedup(single["step_seconds_all"], multi["step_seconds_all"])
    one, many = single["phase_seconds"], multi["phase_seconds"]
    replicated = (many["forward"] + many["backward"]) / (one["forward"] + one["backward"])
    text = (
        f"with {multi['replicas']} replicas moving data took {ms(multi['transfer_seconds'])} ms per step and "
        f"computing {ms(multi['compute_seconds'])} ms, {times_as_long(ratio)}: a {kind} by the seed's "
        "definition (moving longer than computing is a network choke, the reverse a compute choke, the "
        'seed\'s "GPU choke"). The '
        f"step against one replica: {describe_speedup(change)}. The forward took "
        f"{many['forward'] / one['forward']:.2f}× and the backward {many['backward'] / one['backward']:.2f}× "
        f"as long as with one replica (one replica: {ms(one['forward'])} ms forward, "
        f"{ms(one['backward'])} ms backward)"
    )
    if replicated > 1 + MATTERS and shared:
        where = "one GPU" if on_gpu else "the same cores"
        return text + (
            f": every replica runs the whole model on {where}, its forward reading every weight and "
            "its backward writing a gradient of every weight, so that work is done once per replica "
            "whatever the chunk."
        )
    if replicated < 1 / (1 + MATTERS) and shared:
        busy = "the GPU busy in gaps" if on_gpu else "busy cores"
        return text + f": the replicas' threads kept {busy} that one replica's operators left idle."
    return text + "."


def shared_replicas_sentence(
    model: str, change: dict, replicas: int, shared: bool = True, on_gpu: bool = False
) -> str:
    """What ``replicas`` replicas sharing one device (its cores, or with ``on_gpu`` one GPU) did to
    ``model``'s step against one replica (``helpers.stats.speedup``), said only as far as its verdict goes
    (``explain_replicas`` gives the figures); with one device per replica (``shared`` False), the verdict
    alone. Plain text."""
    verdict = change["verdict"]
    if not shared:
        return f"{model} with {replicas} replicas on {replicas} devices against one replica: {verdict}"
    idle, same, do = (
        ("GPU time between kernels", "the same GPU", "does") if on_gpu else ("cores", "the same cores", "do")
    )
    if verdict == "faster":
        return (
            f"{model} ran faster with {replicas} replicas than with one: its operators left {idle} idle that "
            f"the replicas' threads filled, a better use of {same}, not extra hardware, and no prediction "
            "of GPU scaling"
        )
    if verdict == "slower":
        return (
            f"{model} ran slower with {replicas} replicas than with one: the replicas' threads share {same}, "
            "so nothing ran in parallel that one replica's operators did not already run in parallel, and "
            "every phase that grew with the replicas (above) added to the step"
        )
    if verdict == "no measurable difference":
        return (
            f"{model} ran as fast with {replicas} replicas as with one: the replicas' threads found no idle "
            f"{idle} to fill, and their repeated work cost little"
        )
    return (
        f"whether {model} ran faster or slower with {replicas} replicas than with one is not resolved: idle "
        f"{idle} filled by the replicas' threads, if any, {do} not show through the spread of the steps"
    )


def placement_sentence(placements: dict[int, tuple[list[str], bool]]) -> str:
    """Where the replicas of each count ran (``{count: replica_devices(...)}``), to read: ``1 replica; 2
    and 4 replicas, all on the CPU`` or ``1 replica on GPU 0; 2 replicas on GPUs 0 and 1``."""

    def device_name(name: str) -> str:
        return "the CPU" if name == "cpu" else f"GPU {torch.device(name).index or 0}"

    def listed(items: list) -> str:
        items = [str(item) for item in items]
        return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"

    counts = sorted(placements)
    everywhere = {device for devices, _ in placements.values() for device in devices}
    if len(everywhere) == 1:
        single = ["1 replica"] if 1 in counts else []
        several = [count for count in counts if count > 1]
        groups = single + ([f"{listed(several)} replicas"] if several else [])
        return f"{'; '.join(groups)}, all on {device_name(everywhere.pop())}"
    parts = []
    for count in counts:
        devices = list(dict.fromkeys(placements[count][0]))
        where = (
            device_name(devices[0])
            if len(devices) == 1
            else f"GPUs {listed([torch.device(device).index for device in devices])}"
        )
        parts.append(f"{counted(count, 'replica')} on {where}")
    return "; ".join(parts)


def describe_seed_verdicts(table: pd.DataFrame) -> dict[str, str]:
    """Per model, four GPUs against one over the seed's sweep, from ``costmodel.seed.seed_verdict_table``
    (columns ``model``, ``global_batch``, ``faster``): ``slower at every batch of the seed's sweep (10 to
    600)``, or the verdict of each run of consecutive batches, ``undecided`` where the inputs decide
    (``undecided at batch 10 and faster from batch 20 to 600``). Plain text."""
    described = {}
    for model, rows in table.groupby("model", sort=False):
        runs: list[list] = []
        for batch, verdict in rows.sort_values("global_batch")[["global_batch", "faster"]].itertuples(
            index=False
        ):
            word = verdict.split(" ")[0] if verdict.endswith("whatever the inputs") else "undecided"
            if runs and runs[-1][0] == word:
                runs[-1][2] = batch
            else:
                runs.append([word, batch, batch])
        if len(runs) == 1:
            word, first, last = runs[0]
            described[model] = f"{word} at every batch of the seed's sweep ({first} to {last})"
            continue
        parts = [f"{word} at batch {first}" if first == last else f"{word} from batch {first} to {last}"
                 for word, first, last in runs]  # fmt: skip
        described[model] = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return described


def moved_table(moved: dict) -> pd.DataFrame:
    """The bytes each phase of one step moved between replicas (a ``StepReport``'s ``bytes``), to read."""
    return pd.DataFrame(
        {"bytes moved": {phase.replace("_", " "): f"{count:,}" for phase, count in moved.items()}}
    )


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
                phase.replace("_", " "): f"{count / 1e6:,.1f}" for phase, count in counted.items()
            }
    return pd.DataFrame(columns).rename_axis("MB moved per epoch")


def against_chapter_one(
    store, records: list[dict], train_set: TensorDataset, device: str, **settings
) -> dict:
    """Each one-replica record of ``records`` against chapter 1's plain training step at the same model
    and batch (``train.stored_step_timing`` with chapter 1's Adam, learning rate 1e-3, and ``settings``):
    ``table`` (to read: both spreads and ``speedup`` of the replica over chapter 1), ``verdicts`` (how
    many comparisons gave each verdict), ``comparisons`` (per model and batch: the verdict and the
    ratio) and ``reused`` (whether every chapter-1 record came from the store, not measured here)."""
    before, rows, comparisons = len(store.records("step_timing")), [], []
    for record in (r for r in records if r["result"]["replicas"] == 1):
        name, size, one = record["config"]["model"], record["config"]["batch_size"], record["result"]
        chapter_one = stored_step_timing(store, name, train_set, batch_size=size, optimizer="adam", lr=1e-3,
                                         device=device, **settings)  # fmt: skip
        plain = chapter_one["result"]
        change = speedup(plain["step_seconds_all"], one["step_seconds_all"])
        comparisons.append({"model": name, "batch_size": size, "verdict": change["verdict"],
                            "ratio": change["speedup"], "low": change["low"],
                            "high": change["high"]})  # fmt: skip
        rows.append({"model": name, "batch size": size,
                     "chapter 1's step (ms)": milliseconds(plain["step_seconds_all"], unit=""),
                     "one replica's step (ms)": milliseconds(one["step_seconds_all"], unit=""),
                     "one replica against chapter 1": describe_speedup(change),
                     "verdict": change["verdict"]})  # fmt: skip
    table = pd.DataFrame(rows).set_index(["model", "batch size"])
    return {"table": table.drop(columns="verdict"), "verdicts": table["verdict"].value_counts().to_dict(),
            "comparisons": comparisons, "reused": len(store.records("step_timing")) == before}  # fmt: skip


def consistency_sentence(consistency: dict, most_named: int = 4) -> str:
    """What ``against_chapter_one`` found: how many comparisons agree within ``MATTERS`` (their whole
    interval inside ±10 %), how many of those are still measurably apart, which differ by more, and which
    spread too widely to tell. Up to ``most_named`` configurations are named with their ratios; more are
    counted, for the table to show. Plain text."""
    comparisons = consistency["comparisons"]
    within = [c for c in comparisons if c["low"] >= 1 / (1 + MATTERS) and c["high"] <= 1 + MATTERS]
    beyond = [c for c in comparisons if c not in within and c["verdict"] in ("faster", "slower")]
    unclear = [c for c in comparisons if c not in within and c not in beyond]
    apart = [c for c in within if c["verdict"] in ("faster", "slower")]

    def named(found: list[dict], ratios: bool = True) -> str:
        if len(found) > most_named:
            return f"{len(found)} configurations (the table)"
        names = [f"{c['model']} at batch {c['batch_size']}" + (f" ({c['ratio']:.2f}×)" if ratios else "")
                 for c in found]  # fmt: skip
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    everyone = len(within) == len(comparisons)
    said = f"{f'all {len(comparisons)}' if everyone else len(within)} agree within {MATTERS:.0%}"
    if apart:
        gap = max(abs(c["ratio"] - 1) for c in apart)
        count = "all" if len(apart) == len(within) else f"{len(apart)} of them"
        said += f" ({count} measurably apart, by at most {gap:.0%})"
    if everyone:
        said += ": one replica costs what chapter 1's step costs" + (", within that" if apart else "")
    parts = [said]
    if beyond:
        parts.append(f"{named(beyond)} {'differs' if len(beyond) == 1 else 'differ'} by more")
    if unclear:
        parts.append(f"for {named(unclear, ratios=False)} the steps spread too widely to tell")
    return parts[0] + ("; " + ", and ".join(parts[1:]) if len(parts) > 1 else "")


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
        return (f"The single slope of the seed's model, {speed / 1e9:.1f} GB/s (R² {r2:.2f}), blends two "
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


def fresh_memory_sentence(
    fresh: dict, reused: dict, device: str = "cpu", page_bytes: int = mmap.PAGESIZE
) -> str:
    """Why a copy into a fresh buffer costs what it does against one into a reused buffer
    (``copy_seconds_per_byte`` results of the same bytes on ``device``): on a CPU, a buffer of
    ``models.MMAP_THRESHOLD_MAX`` or more gets new pages from the kernel, each faulting and zeroed on its
    first write, and the difference per page follows; on a GPU, torch's caching allocator hands back freed
    memory without the driver. Plain text."""
    speeds = (
        f"a copy of {fresh['bytes'] / MIB:,.0f} MiB took {ms(fresh['seconds'])} ms into a fresh buffer "
        f"and {ms(reused['seconds'])} ms into a reused one ({1 / fresh['seconds_per_byte'] / 1e9:.1f} "
        f"against {1 / reused['seconds_per_byte'] / 1e9:.1f} GB/s)"
    )
    if torch.device(device).type == "cuda":
        same = max(fresh["seconds"], reused["seconds"]) <= (1 + MATTERS) * min(
            fresh["seconds"], reused["seconds"]
        )
        apart = (
            f"; the two differ by more than {MATTERS:.0%}, in one copy each, which no first write explains"
        )
        verdict = f", and the two agree within {MATTERS:.0%}" if same else apart
        return speeds + (
            ": torch's caching allocator hands freed GPU memory back to the next tensor without asking the "
            "driver, so no page is new to the GPU" + verdict
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
        f"{predicted['broadcast parameters'] / 1e9:.1f} GB/s and the reduce (a copy into a fresh buffer, "
        "then an addition that reads two tensors and writes one) at "
        f"{predicted['reduce gradients'] / 1e9:.1f} GB/s: for {model}'s {gradient / MIB:,.1f} MiB of "
        f"gradients, {gradient * copy_per_byte * 1e3:.1f} ms copying and {gradient * add_per_byte * 1e3:.1f} "
        f"ms adding, {gradient * (copy_per_byte + add_per_byte) * 1e3:.1f} ms per extra replica"
    )
    reduce_rows = points[(points["phases"] == "reduce gradients") & (points["model"] == model)]
    if len(reduce_rows):
        per_replica = reduce_rows["seconds"] / (reduce_rows["replicas"] - 1) * 1e3
        text += (
            f"; measured, {model}'s reduce took {per_replica.min():.1f}–{per_replica.max():.1f} ms per "
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
        f". Measured in {which}, the broadcast ran at {b_low / 1e9:.1f}–{b_high / 1e9:.1f} GB/s and "
        f"the reduce at {r_low / 1e9:.1f}–{r_high / 1e9:.1f} GB/s: {order}"
    )
