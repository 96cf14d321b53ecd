"""What k GPUs would buy (chapter 5): predicted step and epoch times, speed-up, efficiency and dollars of
DataParallel and DDP on 1–8 named GPUs over named links, a decision map, and the check against the seed.
PREDICTIONS, labelled so: the single-GPU step comes from the roofline (``costmodel.gpus``) unless the
study measured that GPU; the links' figures are published measurements or stated fractions of peak.

Speed-up is strong scaling, as in the seed's experiment: the same global batch and epoch, on k GPUs
instead of one. Efficiency is speed-up / k. Δ (the seed's Table I) is speed-up per fold increase in
price: with k GPUs at k times the hourly price, Δ equals the efficiency, and Δ ≥ 1 means the faster run
is also no dearer per result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np
import pandas as pd

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel.gpus import (
    GPU,
    GPUS,
    KERNEL_LAUNCH,
    LINKS,
    Link,
    gpu_key,
    gradient_bytes,
    layer_costs,
    roofline_step,
)
from helpers.costmodel.money import SECONDS_PER_HOUR, hourly_price_per_gpu
from helpers.costmodel.timemodel import (
    ComputeLine,
    ddp_bucket_bytes,
    fit_line,
    overlapped_all_reduce_finish,
    split_step,
)
from helpers.dataparallel import SAMPLE_BYTES, chunk_sizes
from helpers.paths import results_dir
from helpers.results import read_json
from helpers.stats import spread

METHODS = ("dataparallel", "ddp_overlap")
SEED_BATCH_SIZES = (10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600)
SEED_SAMPLES = 2000  # the seed's epoch
SEED_GPU, SEED_LINK = "GTX 1080 Ti", "PCIe 3.0 x16, host bridge"
OUTPUT_BYTES = 10 * 4  # ten float32 logits per sample

NO_GPU_MEASURED = (
    "No GPU has been measured by this study yet (no `gpu`-profile records): every GPU figure below comes "
    "from the roofline. When a `gpu` run exists, its measured steps replace the roofline for that GPU, and "
    "this table shows the roofline's error against them."
)

Compute = Callable[[int], dict]  # per-GPU batch → forward, backward and optimizer seconds


def roofline_compute(model: str, gpu: GPU) -> Compute:
    """The roofline's forward, backward and optimizer seconds of ``model`` on ``gpu`` at a batch."""

    @cache
    def phases(batch: int) -> dict:
        step = roofline_step(model, batch, gpu)
        return {phase: step[f"{phase}_seconds"] for phase in ("forward", "backward", "optimizer")}

    return phases


def measured_compute(line: ComputeLine, optimizer_seconds: float, backward_share: float = 2 / 3) -> Compute:
    """Phases from a line fitted to measured single-GPU step times (``timemodel.fit_compute``)."""
    return lambda batch: split_step(line, batch, optimizer_seconds, backward_share)


def roofline_table(models, gpu_names, batches) -> pd.DataFrame:
    """The roofline's single-GPU step for each model, GPU and batch, and what bounds it."""
    return pd.DataFrame(
        [
            {"model": model, "gpu": name, "batch": batch, **roofline_step(model, batch, GPUS[name])}
            for model in models
            for name in gpu_names
            for batch in batches
        ]
    )


def gpu_step_timings(run: str = "gpu") -> pd.DataFrame:
    """Single-GPU step times measured by a ``gpu``-profile run, on whichever machine made them: per model,
    GPU (``gpus.gpu_key`` of its driver name) and batch, the median of the timed steps and its range.
    Empty when no such run is in ``data/results/<run>/``."""
    folder = results_dir() / run
    machines = {path.stem: read_json(path) for path in sorted((folder / "provenance").glob("*.json"))}
    rows = []
    for path in sorted((folder / "records").glob("*.json")):
        record = read_json(path)
        config = record["config"] if record else {}
        if not record or record["kind"] != "step_timing" or not str(config.get("device")).startswith("cuda"):
            continue
        if config.get("autocast") is not None:
            continue
        hardware = (machines.get(record["provenance_id"]) or {}).get("hardware", {})
        index = int(str(config["device"]).partition(":")[2] or 0)
        names = [gpu["name"] for gpu in hardware.get("gpus", [])]
        gpu = gpu_key(names[index]) if index < len(names) else None
        if gpu is None:
            continue
        timing = spread(record["result"]["step_seconds_all"])
        rows.append({"model": config["model"], "gpu": gpu, "batch": config["batch_size"],
                     "step_seconds": timing.median, "step_min": timing.low, "step_max": timing.high,
                     "machine": record["provenance_id"]})  # fmt: skip
    return pd.DataFrame(
        rows, columns=["model", "gpu", "batch", "step_seconds", "step_min", "step_max", "machine"]
    )


def roofline_error(measured: pd.DataFrame) -> pd.DataFrame:
    """Each measured single-GPU step next to the roofline's prediction, and the prediction's error (%)."""
    predicted = [
        roofline_step(row.model, int(row.batch), GPUS[row.gpu])["step_seconds"]
        for row in measured.itertuples()
    ]
    frame = measured.assign(roofline_seconds=predicted)
    frame["error_percent"] = (frame["roofline_seconds"] - frame["step_seconds"]) / frame["step_seconds"] * 100
    return frame


def measured_computes(measured: pd.DataFrame) -> dict:
    """``Compute`` per (model, GPU) from measured step times: a line through them (``fit_line``), its
    optimizer share taken from the roofline. Needs two batch sizes per model and GPU."""
    computes = {}
    for (model, gpu), rows in measured.groupby(["model", "gpu"]):
        if rows["batch"].nunique() < 2:
            continue
        line, _ = fit_line(rows["batch"], rows["step_seconds"])
        optimizer = roofline_step(model, 1, GPUS[gpu])["optimizer_seconds"]
        computes[(model, gpu)] = measured_compute(line, optimizer)
    return computes


@cache
def kernels_per_pass(model: str) -> int:
    """Forward and backward kernels of one replica's step: what each extra DataParallel replica launches."""
    return int(layer_costs(model)["kernels"].sum())


def predict_gpu_step(
    method: str,
    model: str,
    global_batch: int,
    gpus: int,
    compute: Compute,
    link: Link,
    *,
    bucket_cap_mb: float = 25,
    launch_seconds: float = KERNEL_LAUNCH.value,
) -> dict:
    """Predicted seconds of one step of ``global_batch`` samples on ``gpus`` GPUs joined by ``link``.

    - ``dataparallel`` (torch.nn.DataParallel, the seed's method): the replicas compute their chunks at
      the same time, so the step takes the largest chunk's forward and backward, plus the optimizer on
      GPU 0; the parameters are broadcast and the gradients reduced as pipelined rings (NCCL's
      broadcast and reduce: (k−1)·α + N / busbw each), the inputs scattered and outputs gathered through
      GPU 0's link; one Python process launches every replica's kernels, so each extra replica adds its
      launches.
    - ``ddp_overlap`` (one process per GPU): each GPU computes global_batch // k samples; DDP's gradient
      buckets are ring all-reduced behind backward (``timemodel.overlapped_all_reduce_finish``).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if global_batch < gpus:
        raise ValueError(f"global_batch {global_batch} gives no sample to some of {gpus} GPUs")
    gradient = gradient_bytes(model)
    beta = 1 / link.bus_bandwidth
    if method == "dataparallel":
        chunks = chunk_sizes(global_batch, gpus)
        replicas = len(chunks)
        phases = compute(max(chunks))
        optimizer = compute(global_batch)["optimizer"]
        if replicas == 1:
            communication = launches = 0.0
        else:
            ring = (replicas - 1) * link.alpha_seconds + gradient * beta
            moved = global_batch - chunks[0]
            communication = 2 * ring + moved * (SAMPLE_BYTES + 2 * OUTPUT_BYTES) * beta
            launches = (replicas - 1) * kernels_per_pass(model) * launch_seconds
        step = phases["forward"] + phases["backward"] + optimizer + communication + launches
        compute_seconds = phases["forward"] + phases["backward"] + optimizer
    else:
        per_gpu = global_batch // gpus
        phases = compute(per_gpu)
        buckets = ddp_bucket_bytes(model, bucket_cap_mb)

        def all_reduce(nbytes: float) -> float:
            return ring_all_reduce_seconds(nbytes, gpus, link.alpha_seconds, beta)

        communication = sum(all_reduce(size) for size in buckets)
        finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
        step = phases["forward"] + finish + phases["optimizer"]
        compute_seconds = sum(phases.values())
    return {"step_seconds": step, "compute_seconds": compute_seconds, "communication_seconds": communication}


def predicted_epoch_seconds(
    model: str, global_batch: int, gpus: int, gpu: str, link: str, samples: int, method: str = "ddp_overlap"
) -> float:
    """One predicted epoch of ``samples`` clips (⌈samples / global batch⌉ steps) on the roofline."""
    compute = roofline_compute(model, GPUS[gpu])
    step = predict_gpu_step(method, model, global_batch, gpus, compute, LINKS[link])["step_seconds"]
    return step * math.ceil(samples / global_batch)


def predictions(
    models=("LinearNet", "ConvNet"),
    gpu_names=tuple(GPUS),
    link_names=tuple(LINKS),
    batch_sizes=SEED_BATCH_SIZES,
    gpu_counts=range(1, 9),
    methods=METHODS,
    *,
    samples: int = 2700,
    epochs: int = 20,
    measured: dict | None = None,
) -> pd.DataFrame:
    """Every combination's predicted step and epoch seconds, speed-up, efficiency, Δ and dollars per run.

    ``measured`` maps (model, gpu name) to a ``Compute`` from measured step times, which replaces the
    roofline for that GPU (the ``basis`` column says which). Dollars per run: k GPU-hours at the price
    table's rate for that GPU × run hours (NaN for a GPU no cloud rents). An epoch of ``samples``
    clips takes ⌈samples / global batch⌉ steps; a run is ``epochs`` epochs.
    """
    rows = []
    for model in models:
        for gpu_name in gpu_names:
            gpu = GPUS[gpu_name]
            compute = (measured or {}).get((model, gpu_name)) or roofline_compute(model, gpu)
            basis = "measured" if (measured or {}).get((model, gpu_name)) else "roofline"
            price = hourly_price_per_gpu(gpu_name)
            for link_name in link_names:
                for method in methods:
                    for batch in batch_sizes:
                        for k in gpu_counts:
                            if batch < k:
                                continue
                            step = predict_gpu_step(method, model, batch, k, compute, LINKS[link_name])
                            epoch = step["step_seconds"] * math.ceil(samples / batch)
                            run_hours = epoch * epochs / SECONDS_PER_HOUR
                            rows.append(
                                {"model": model, "gpu": gpu_name, "link": link_name, "method": method,
                                 "global_batch": batch, "gpus": k, "basis": basis, **step,
                                 "epoch_seconds": epoch, "run_hours": run_hours,
                                 "dollars_per_run": k * float(price) * run_hours if price else np.nan}
                            )  # fmt: skip
    frame = pd.DataFrame(rows)
    keys = ["model", "gpu", "link", "method", "global_batch"]
    single = frame[frame["gpus"] == 1].set_index(keys)["epoch_seconds"]
    frame["speedup"] = frame.set_index(keys).index.map(single).to_numpy() / frame["epoch_seconds"]
    frame["efficiency"] = frame["speedup"] / frame["gpus"]
    frame["delta"] = frame["efficiency"]  # k GPUs cost k times one GPU's hour
    return frame


DECISIONS = ("slower", "faster, below the threshold", "faster, dearer per result", "faster and no dearer")


def decide(frame: pd.DataFrame, min_speedup: float = 1.5) -> pd.Series:
    """Each row's verdict: slower than one GPU; faster but below ``min_speedup``; at least that much
    faster but dearer per result (Δ < 1); or faster and no dearer (Δ ≥ 1): where adding GPUs pays."""
    speedup, delta = frame["speedup"], frame["delta"]
    verdict = np.select(
        [speedup < 1, speedup < min_speedup, delta < 1],
        DECISIONS[:3],
        default=DECISIONS[3],
    )
    return pd.Series(pd.Categorical(verdict, categories=DECISIONS), index=frame.index)


def seed_check(models=("LinearNet", "ConvNet")) -> pd.DataFrame:
    """The seed's experiment predicted: DataParallel on 1–4 GTX 1080 Ti over PCIe 3.0 through the host
    bridge, its batch sizes 10–600, its 2,000-clip epoch."""
    return predictions(
        models, (SEED_GPU,), (SEED_LINK,), SEED_BATCH_SIZES, range(1, 5), ("dataparallel",),
        samples=SEED_SAMPLES,
    )  # fmt: skip


def seed_verdicts(check: pd.DataFrame) -> dict[str, str]:
    """Per model, what four GPUs did to the epoch at every batch size: "slower", "faster" or "mixed"."""
    verdicts = {}
    for model, rows in check[check["gpus"] == check["gpus"].max()].groupby("model"):
        if (rows["speedup"] < 1).all():
            verdicts[model] = "slower"
        elif (rows["speedup"] > 1).all():
            verdicts[model] = "faster"
        else:
            verdicts[model] = "mixed"
    return verdicts


def hiding_batch(model: str, gpu: GPU, link: Link, gpus: int = 8, largest: int = 1 << 16) -> int | None:
    """The smallest per-GPU batch whose backward pass lasts as long as DDP's all-reduce of the model's
    gradient on ``gpus`` GPUs: from there on DDP can hide its communication (None: not up to ``largest``)."""
    compute = roofline_compute(model, gpu)
    nbytes = gradient_bytes(model)
    needed = ring_all_reduce_seconds(nbytes, gpus, link.alpha_seconds, 1 / link.bus_bandwidth)
    batch = 1
    while batch <= largest:
        if compute(batch)["backward"] >= needed:
            low, high = batch // 2 + 1, batch
            while low < high:  # the smallest batch in (batch/2, batch] that hides it
                middle = (low + high) // 2
                low, high = (middle + 1, high) if compute(middle)["backward"] < needed else (low, middle)
            return low
        batch *= 2
    return None
