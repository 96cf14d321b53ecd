"""What each machine that can be rented would do with a counted model (chapter 7), by chapter 5's roofline
and chapter 6's sharding arithmetic: per machine, the step with DataParallel, DDP and ZeRO-1..3, the memory
per device, the largest batch that fits, the two conditions on the per-GPU batch (whether DDP's buckets let
the all-reduce hide behind backward at all, and from which batch), the speed-up, the cost
multiplier and the dollars and hours per epoch, each a band over the inputs chapter 5 is unsure of, with
a verdict only where the whole band agrees; and the usual reasons multi-GPU training is slower than one
GPU, each with the number behind it for this model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.advise.counting import AdviseError, Counted
from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel import configurations as configs
from helpers.costmodel import recommend, rule
from helpers.costmodel.gpus import gradient_bytes, roofline_step
from helpers.costmodel.prose import short_verdict
from helpers.costmodel.specs import CENTRAL, GPUS, LINKS
from helpers.data import SPLIT_SIZES
from helpers.sharding.memory import per_rank_bytes
from helpers.stats import ratio_figures

METHODS = {"dataparallel": "DataParallel", "ddp_overlap": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2",
           "zero3": "ZeRO-3 (FSDP)"}  # fmt: skip
DEFAULT_GPUS = (1, 2, 4, 8)
DEFAULT_EPOCH = SPLIT_SIZES["train"]  # FSDD's training clips: the book's epoch, unless one is given
DEFAULT_EPOCH_SOURCE = "FSDD's training split, the default"


@dataclass
class Advice:
    """Everything ``advise`` predicts for one model and global batch (frames described there)."""

    counted: Counted
    global_batch: int
    samples: int
    machines: pd.DataFrame
    methods: pd.DataFrame
    conditions: pd.DataFrame
    reasons: pd.DataFrame
    verdicts: list[str]
    skipped: list[str]
    epoch_source: str = "as given"  # where ``samples`` came from: given, or FSDD's split by default


def check_batch(global_batch: int, gpu_counts) -> tuple[tuple[int, ...], list[str]]:
    """The GPU counts the global batch divides over, and a one-line note for each it does not: the advice
    prices equal shares, so a count that would leave ranks with unequal batches is left out and said so,
    never the whole answer refused. Refused: a batch or GPU count that is not positive, or a batch no
    asked count divides."""
    if global_batch < 1:
        raise AdviseError(f"batch must be a positive integer, not {global_batch}")
    if not gpu_counts or min(gpu_counts) < 1:
        raise AdviseError(f"GPU counts must be positive integers, not {list(gpu_counts)}")
    even = tuple(k for k in gpu_counts if global_batch % k == 0)
    notes = [
        f"{k} GPUs: a global batch of {global_batch} does not split evenly over {k} (give a multiple of {k})"
        for k in gpu_counts
        if global_batch % k
    ]
    if not even:
        raise AdviseError(
            f"a global batch of {global_batch} does not divide over "
            + " or ".join(map(str, gpu_counts))
            + " GPUs: give a batch that one of them divides"
        )
    return even, notes


def epoch(global_batch: int, samples: int | None) -> tuple[int, str]:
    """The epoch the hours and dollars are for, and where it came from: ``samples`` as given, or by
    default FSDD's training split (the book's epoch; a made-up size would price a made-up run). An epoch
    smaller than one global batch is refused, saying how to give one."""
    if samples is None:
        if global_batch > DEFAULT_EPOCH:
            raise AdviseError(
                f"a global batch of {global_batch} is larger than the default epoch, FSDD's training split "
                f"of {DEFAULT_EPOCH:,} clips: give your epoch with --samples-per-epoch"
            )
        return DEFAULT_EPOCH, DEFAULT_EPOCH_SOURCE
    if samples < 1:
        raise AdviseError(f"an epoch must hold a positive number of samples, not {samples}")
    if samples < global_batch:
        raise AdviseError(f"an epoch of {samples} samples is smaller than the global batch of {global_batch}")
    return samples, "as given"


def machines_for(gpu_counts, dtype: str) -> tuple[list[str], list[str]]:
    """The configurations with one of ``gpu_counts`` GPUs, with their one-GPU offer (each speed-up's
    baseline); and why others are left out (no machine of that size; no bf16 on that GPU)."""
    chosen, skipped = [], []
    for config in configs.CONFIGURATIONS:
        if config.gpus not in gpu_counts:
            continue
        if dtype == "bf16" and GPUS[config.gpu].bf16_flops is None:
            skipped.append(f"{config.name}: the {config.gpu} has no bfloat16 tensor cores")
            continue
        chosen.append(config.name)
        alone = configs.baseline(config)
        if alone is not None and alone.name not in chosen:
            chosen.insert(len(chosen) - 1, alone.name)
    sizes = {c.gpus for c in configs.CONFIGURATIONS}
    skipped += [f"{k} GPUs: no machine of that size in chapter 5's table of real configurations"
                for k in gpu_counts if k not in sizes]  # fmt: skip
    return list(dict.fromkeys(chosen)), skipped


def zero3_gather_seconds(model: str, gpus: int, link_name: str | None, level: str) -> float:
    """FSDP's forward all-gather of the weights, counted as not hidden: (k − 1) ring steps of α plus
    (k − 1)/k of the gradient's bytes at the link's busbw (``level``). Prefetching can hide it; the
    band's bottom (DDP's step) allows that."""
    if gpus == 1 or link_name is None:
        return 0.0
    link = LINKS[link_name]
    return (gpus - 1) * link.alpha_seconds + (gpus - 1) / gpus * gradient_bytes(model) / link.bus(level)


def method_table(counted: Counted, summary: dict[str, pd.DataFrame], global_batch: int) -> pd.DataFrame:
    """Per machine and method: step seconds with its band, and the bytes on the busiest device (training
    state of ``sharding.memory.per_rank_bytes`` plus the activations of its share of the batch)."""
    rows = []
    ddp = summary["ddp_overlap"].set_index("machine")
    for machine, row in ddp.iterrows():
        k = int(row["gpus"])
        per_gpu = math.ceil(global_batch / k)
        activations = counted.activation_bytes_per_sample * per_gpu + counted.activation_bytes_fixed
        memory = GPUS[row["gpu"]].memory_bytes
        for method, label in METHODS.items():
            if method == "dataparallel":
                step = summary["dataparallel"].set_index("machine").loc[machine]
                band = (step["step_seconds"], step["step_seconds_low"], step["step_seconds_high"])
                state = per_rank_bytes(counted.module, 0, k, counted.optimizer)[0]
            else:
                stage = 0 if method == "ddp_overlap" else int(method[-1])
                extra = [zero3_gather_seconds(counted.name, k, row["link"], level) if stage == 3 else 0.0
                         for level in ("central", "high", "low")]  # fmt: skip
                band = (row["step_seconds"] + extra[0], row["step_seconds_low"],
                        row["step_seconds_high"] + extra[2])  # fmt: skip
                state = max(per_rank_bytes(counted.module, stage, k, counted.optimizer),
                            key=lambda r: r["parameters"] + r["gradients"] + r["optimizer"])  # fmt: skip
            held = state["parameters"] + state["gradients"] + state["optimizer"]
            largest = max(
                0, (memory - held - counted.activation_bytes_fixed) // counted.activation_bytes_per_sample
            )
            rows.append(
                {
                    "machine": machine,
                    "GPUs": k,
                    "method": label,
                    "step_seconds": band[0],
                    "step_seconds_low": band[1],
                    "step_seconds_high": band[2],
                    "per_gpu_batch": per_gpu,
                    "state_bytes": held,
                    "device_bytes": held + activations,
                    "gpu_memory_bytes": memory,
                    "fits": held + activations <= memory,
                    "largest_batch_per_gpu": int(largest),
                }
            )
    return pd.DataFrame(rows)


def predictions(counted: Counted, global_batch: int, machines: list[str], samples: int, measured=None):
    """``recommend.summarize`` of DDP (overlapped) and DataParallel on every machine, at ``global_batch``,
    for one epoch of ``samples``: with hours and dollars per epoch."""
    summary = {}
    for method in ("ddp_overlap", "dataparallel"):
        per_scenario = recommend.scenario_predictions(
            (counted.name,), machines, (global_batch,), method, samples=samples, epochs=1, measured=measured
        )
        frame = recommend.summarize(per_scenario)
        frame["hours_per_epoch"] = frame["epoch_seconds"] / 3600
        summary[method] = frame
    return summary


def samples(count: int) -> str:
    return f"{count} sample" + ("s" if count != 1 else "")


def short_time(seconds: float) -> str:
    """Seconds in µs below a millisecond, else in ms, three significant digits: "41.2 µs", "1.39 ms"."""
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


def time_band(central: float, low: float, high: float) -> str:
    """A band of seconds in one unit, µs unless its top reaches a millisecond: "35.3 (34.9–35.9) µs"."""
    scale, unit = (1e6, "µs") if high < 1e-3 else (1e3, "ms")
    return f"{central * scale:.3g} ({low * scale:.3g}–{high * scale:.3g}) {unit}"


def mebibytes(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB"


def one_bucket(gradient: float) -> str:
    """ "fit one DDP bucket", with the cap that makes it one where DDP's smaller first bucket (the cap left
    unset: 1 MiB) would not hold them all."""
    if gradient <= recommend.DEFAULT_FIRST_BUCKET_MB * 2**20:
        return "fit one DDP bucket"
    return f"fit one DDP bucket at bucket_cap_mb={recommend.BUCKET_CAP_MB:g}"


def all_reduce_words(cond: pd.Series, per_gpu: int) -> str:
    """Where the all-reduce of one machine's ``condition_table`` row stands at ``per_gpu`` samples per GPU:
    after backward for a model whose gradients fit one DDP bucket (nothing overlaps, at any batch), with
    its predicted time; else hidden from b*_hide but for its last bucket, or not hidden below b*_hide."""
    tail = time_band(cond["tail_seconds"], cond["tail_seconds_low"], cond["tail_seconds_high"])
    if int(cond["buckets"]) == 1:
        return (f"its {mebibytes(cond['gradient_bytes'])} of gradients {one_bucket(cond['gradient_bytes'])}, "
                f"so the all-reduce comes after backward, never hidden: {tail} a step")  # fmt: skip
    hide = cond["hide"]
    if np.isinf(hide):
        return "the all-reduce is never hidden behind backward at the central values"
    if per_gpu < hide:
        return (
            f"the all-reduce is not hidden below b*_hide = {int(hide)} per GPU (this batch gives {per_gpu})"
        )
    return (f"the all-reduce hides behind backward from {samples(int(hide))} per GPU but for its last "
            f"bucket ({mebibytes(cond['last_bucket_bytes'])}), whose {tail} follow backward")  # fmt: skip


def verdict_sentences(summary: pd.DataFrame, conditions: pd.DataFrame, global_batch: int) -> list[str]:
    """One sentence per multi-GPU machine: speed-up ("2.1× as fast as one"; below 1 the time taken, "1.3×
    as long as one") and cost multiplier with their bands, the verdicts that hold over the band, and where
    the all-reduce stands: after backward with one DDP bucket, else hidden from which per-GPU batch
    (``all_reduce_words``)."""
    found = []
    by_machine = conditions.set_index("machine")
    for row in summary[summary["gpus"] > 1].itertuples():
        figure, band = ratio_figures(row.speedup, row.speedup_low, row.speedup_high)
        pace = "as fast as one" if row.speedup >= 1 else "as long as one"
        text = f"{row.gpus} × {row.gpu} ({row.machine}): {figure}× ({band}) {pace}"
        if not math.isnan(row.cost_multiplier):
            text += (f", for {row.cost_multiplier:.3g}× the dollars "
                     f"({row.cost_multiplier_low:.3g}–{row.cost_multiplier_high:.3g}×)")  # fmt: skip
        text += f" — {short_verdict(row.faster)}; {short_verdict(row.dollars)}"
        if row.machine in by_machine.index:
            text += "; " + all_reduce_words(by_machine.loc[row.machine], global_batch // row.gpus)
        found.append(text + ".")
    return found


def reasons(counted: Counted, summary: dict[str, pd.DataFrame], conditions: pd.DataFrame,
            global_batch: int) -> pd.DataFrame:  # fmt: skip
    """The usual reasons multi-GPU training is slower than one GPU, per multi-GPU machine, each with the
    number behind it (central values) and whether it applies to this model at this batch."""
    rows = []
    ddp = summary["ddp_overlap"]
    dp = summary["dataparallel"].set_index("machine")
    by_machine = conditions.set_index("machine")
    name = counted.name
    for row in ddp[ddp["gpus"] > 1].itertuples():
        k, gpu = int(row.gpus), GPUS[row.gpu]
        per_gpu = global_batch // k
        cond = by_machine.loc[row.machine] if row.machine in by_machine.index else None
        backward = roofline_step(name, per_gpu, gpu, CENTRAL)["backward_seconds"]
        link = LINKS[row.link]
        exchange = ring_all_reduce_seconds(gradient_bytes(name), k, link.alpha_seconds, 1 / link.bus())
        single = roofline_step(name, global_batch, gpu, CENTRAL)["step_seconds"]
        weak = recommend.predict_gpu_step(
            "ddp_overlap", name, global_batch * k, k, recommend.roofline_compute(name, gpu), link
        )["step_seconds"]
        dp_ratio = dp.loc[row.machine, "step_seconds"] / row.step_seconds
        found = []
        if cond is not None and int(cond["buckets"]) == 1:
            after, fits = short_time(cond["tail_seconds"]), one_bucket(cond["gradient_bytes"])
            found.append((f"the all-reduce after backward: the gradients {fits}, nothing overlaps",
                          f"{mebibytes(cond['gradient_bytes'])} in one bucket: {after} after backward, in a "
                          f"step of {short_time(row.step_seconds)}", True))  # fmt: skip
        elif cond is not None:
            hide = "never" if np.isinf(cond["hide"]) else f"{int(cond['hide']):,}"
            found.append(("per-GPU batch below b*_hide, the all-reduce not hidden",
                          f"{per_gpu} per GPU against b*_hide = {hide}", per_gpu < cond["hide"]))  # fmt: skip
        if cond is not None:
            found.append(("per-step fixed cost: compute below the host's ops and the optimizer's pass",
                          f"{per_gpu} per GPU against b*_floor = {int(cond['floor']):,}",
                          per_gpu < cond["floor"]))  # fmt: skip
        found += [
            ("gradient exchange longer than backward on this link",
             f"all-reduce {exchange * 1e3:.3g} ms against backward {backward * 1e3:.3g} ms",
             exchange > backward),
            ("DataParallel's per-step replication instead of DDP",
             f"DataParallel's step {dp_ratio:.2f}× DDP's", dp_ratio > 1),
            ("if the batch grows with the GPUs and the steps stay as many: k GPUs do k× the samples per step",
             f"grown to {k} × {global_batch} samples a step, a step takes {weak / single:.2f}× one GPU's "
             f"step of {global_batch}: the same number of steps gives more epochs, not less time",
             weak >= single),
        ]  # fmt: skip
        rows += [{"machine": row.machine, "reason": reason, "number": number, "applies": bool(applies)}
                 for reason, number, applies in found]  # fmt: skip
    return pd.DataFrame(rows, columns=["machine", "reason", "number", "applies"])


def advise(counted: Counted, global_batch: int, gpu_counts=DEFAULT_GPUS, samples: int | None = None,
           measured: dict | None = None) -> Advice:  # fmt: skip
    """The advice for ``counted`` at ``global_batch``, on every real machine of ``gpu_counts`` GPUs:
    ``machines`` (DDP per machine: step, speed-up, cost multiplier, hours and dollars per epoch with bands
    and verdicts), ``methods`` (DataParallel, DDP, ZeRO-1..3: step and memory per device, largest batch),
    ``conditions`` (``rule.condition_table``), ``reasons`` and one verdict sentence per machine.
    ``samples`` is an epoch (default: FSDD's training split, ``DEFAULT_EPOCH`` clips, the book's own
    epoch; ``Advice.epoch_source`` says which); ``measured`` replaces the roofline for a GPU
    (``recommend.measured_computes``)."""
    gpu_counts, uneven = check_batch(global_batch, gpu_counts)
    samples, epoch_source = epoch(global_batch, samples)
    machines, skipped = machines_for(gpu_counts, counted.dtype)
    skipped = uneven + skipped
    if not machines:
        raise AdviseError(
            "no machine in chapter 5's table has " + " or ".join(map(str, gpu_counts)) + " GPUs"
        )
    summary = predictions(counted, global_batch, machines, samples, measured)
    several = [m for m in machines if configs.configuration(m).gpus > 1]
    conditions = rule.condition_table((counted.name,), several) if several else pd.DataFrame(
        columns=["model", "machine", "gpus", "buckets", "hide", "floor", "global_batch"])  # fmt: skip
    return Advice(
        counted, global_batch, samples, summary["ddp_overlap"], method_table(counted, summary, global_batch),
        conditions, reasons(counted, summary, conditions, global_batch),
        verdict_sentences(summary["ddp_overlap"], conditions, global_batch), skipped, epoch_source,
    )  # fmt: skip
