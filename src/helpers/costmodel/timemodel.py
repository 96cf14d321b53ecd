"""Time per step (chapter 5): compute + communication, calibrated on single-device and collective
measurements, validated on multi-rank measurements that the calibration never saw.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd
import torch
from scipy.optimize import nnls

from helpers.collectives.model import fit_alpha_beta, ring_all_reduce_seconds
from helpers.collectives.runs import LINK_FIT_WORLD_SIZE, benchmark_frame, stored_benchmark
from helpers.costmodel.gpus import REGISTERED, gradient_sizes, parameters_of, training_flops_per_sample
from helpers.dataparallel import (
    bytes_per_step,
    chunk_sizes,
    stored_copy_calibration,
    stored_dataparallel_timing,
)
from helpers.ddp import ddp_bucket_bytes
from helpers.hardware import usable_cores
from helpers.launch import placement_words
from helpers.models import build_model
from helpers.results import ResultStore
from helpers.train import counted, stored_step_timing
from helpers.worker import usable_gpus

MIB = 2**20


@dataclass(frozen=True)
class ComputeLine:
    """Seconds of one single-process training step at ``batch`` samples: intercept + per-sample × batch.

    The intercept holds what does not grow with the batch: passes over the weights (forward reads them,
    backward writes their gradient) and the optimizer step; the slope the per-sample arithmetic.
    """

    intercept_seconds: float
    seconds_per_sample: float

    def __call__(self, batch: float) -> float:
        return self.intercept_seconds + self.seconds_per_sample * batch


def fit_line(batch_sizes, step_seconds) -> tuple[ComputeLine, float]:
    """Non-negative line through the points minimising *relative* squared error, and its MAPE in %.

    Rows are divided by the measured time, so that the small batches (milliseconds) count as much as the
    large ones (seconds): what the model is judged on is the percentage error.
    """
    x = np.asarray(batch_sizes, dtype=float)
    y = np.asarray(step_seconds, dtype=float)
    if len(x) < 2 or len(set(x)) < 2:
        raise ValueError("a compute line needs at least two different batch sizes")
    (intercept, slope), _ = nnls(np.column_stack([np.ones_like(x), x]) / y[:, None], np.ones_like(y))
    line = ComputeLine(float(intercept), float(slope))
    mape = float(np.mean(np.abs(line(x) - y) / y) * 100)
    return line, mape


# What a compute line's range is over (every batch timed in several runs, some, none): ``fit_compute``.
SPREADS = {(True, True): "runs", (False, True): "runs and timed steps", (False, False): "timed steps"}


def fit_compute(frame: pd.DataFrame, resamples: int = 200, seed: int = 0) -> pd.DataFrame:
    """One compute line per model and thread count from single-process step times, in physical units.

    ``frame`` needs columns ``model``, ``threads``, ``batch_size`` and ``step_seconds``, one row per
    timing run (for example the ``step_timing`` records of chapter 1 and chapter 5's calibration,
    ``ResultStore.frame("step_timing")``). Why a line: on these models a step is a fixed cost (the weight
    passes and the Adam update, heavy for LinearNet) plus a cost per sample (the convolutions of ConvNet);
    the measured points scatter around it by more than any curvature, so interpolating between them would
    model the noise. The line goes through each batch's median over its runs; the slope is also given as
    the GFLOP/s it implies (the model's exact FLOPs per sample, ``gpus``).

    Uncertainty: the fit is repeated ``resamples`` times on the data each batch's point estimate is the
    median of, drawn with replacement: its runs where a batch was timed in two or more independent runs
    (what another run would see), the timed steps of its one run where it was timed once (which understates
    it). ``spread_over`` says which: "runs", "timed steps", or "runs and timed steps" where batches differ.
    The 5-95 % range of the fixed seconds and of the slope over those fits holds the point estimate. A
    slope whose range reaches zero is not resolved: the per-sample work hides in the noise of the fixed
    cost, and its GFLOP/s is only a lower bound. Indexed by (model, threads).
    """
    missing = {"model", "threads", "batch_size", "step_seconds"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks column(s) {sorted(missing)}")
    generator = np.random.default_rng(seed)
    rows = []
    for (model, threads), group in frame.groupby(["model", "threads"]):
        runs = group.groupby("batch_size")["step_seconds"].apply(list)
        line, mape = fit_line(runs.index, [float(np.median(values)) for values in runs])
        intercepts, slopes = [line.intercept_seconds], [line.seconds_per_sample]
        several = runs.map(len) >= 2  # per batch: resample its runs, else its one run's timed steps
        steps = (
            group.groupby("batch_size")["step_seconds_all"].apply(list)
            if "step_seconds_all" in group
            else None
        )
        drawn = [
            values if several[batch] or steps is None else steps[batch][0] for batch, values in runs.items()
        ]
        if several.any() or steps is not None:
            for _ in range(resamples):
                medians = [float(np.median(generator.choice(values, len(values)))) for values in drawn]
                again, _ = fit_line(runs.index, medians)
                intercepts.append(again.intercept_seconds)
                slopes.append(again.seconds_per_sample)
        try:
            flops = training_flops_per_sample(model)
        except ValueError:  # a model the cost model has no layer formulas for: no rate, the line still holds
            flops = np.nan
        slope_low, slope_high = np.percentile(slopes, [5, 95])
        rows.append(
            {
                "model": model,
                "threads": int(threads),
                "intercept_seconds": line.intercept_seconds,
                "intercept_low": float(np.percentile(intercepts, 5)),
                "intercept_high": float(np.percentile(intercepts, 95)),
                "seconds_per_sample": line.seconds_per_sample,
                "slope_low": float(slope_low),
                "slope_high": float(slope_high),
                "achieved_gflops": flops / line.seconds_per_sample / 1e9
                if line.seconds_per_sample
                else np.inf,
                "gflops_low": flops / slope_high / 1e9 if slope_high > 0 else np.inf,
                "gflops_high": flops / slope_low / 1e9 if slope_low > 0 else np.inf,
                "slope_resolved": bool(slope_low > 0),
                "points": len(runs),
                "runs_per_point": int(runs.map(len).min()),
                "spread_over": SPREADS[bool(several.all()), bool(several.any())],
                "fit_mape_percent": mape,
            }
        )
    return pd.DataFrame(rows).set_index(["model", "threads"]).sort_index()


def compute_line(fits: pd.DataFrame, model: str, threads: int) -> ComputeLine:
    """The fitted line of ``model`` at ``threads`` threads; a clear error when it was never calibrated."""
    if (model, threads) not in fits.index:
        raise ValueError(
            f"no compute calibration for {model} at {threads} thread(s); have {list(fits.index)}. "
            "Measure it with costmodel.stored_compute_calibration."
        )
    row = fits.loc[(model, threads)]
    return ComputeLine(float(row["intercept_seconds"]), float(row["seconds_per_sample"]))


@contextlib.contextmanager
def torch_threads(threads: int):
    """Run a block with ``torch.set_num_threads(threads)``, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def stored_compute_calibration(
    store: ResultStore, train_set, models, batch_sizes, threads: int, **settings
) -> list[dict]:
    """Single-process step times at ``threads`` threads through the store (``stored_step_timing`` records).

    A rank of k DDP processes on c cores gets c/k threads; this measures a single process at exactly that
    thread count, on the CPU, for every model and batch size (finished records are reused).
    ``settings`` go to ``stored_step_timing`` (``timed_steps``, ``warmup_steps``, ``seed``…).
    """
    settings.setdefault("device", "cpu")
    with torch_threads(threads):
        return [
            stored_step_timing(store, model, train_set, batch_size=batch_size, **settings)
            for model in models
            for batch_size in batch_sizes
        ]


def fit_optimizer_seconds_per_parameter(records: list[dict]) -> dict[int, float]:
    """Median seconds per parameter of the optimizer phase in single-replica DataParallel records, per
    thread count.

    Adam updates every parameter elementwise (read the gradient and two moments, write three tensors),
    so its time is close to proportional to the parameter count (chapter 2's phase breakdown: about 4 ns
    per parameter on both models on a 2-core CPU).
    """
    ratios: dict[int, list[float]] = {}
    for record in records:
        config = record["config"]
        if record["kind"] == "dataparallel_timing" and len(config["devices"]) == 1:
            seconds = record["result"]["phase_seconds"]["optimizer_step"]
            ratios.setdefault(config["threads"], []).append(
                seconds / _model_facts(config["model"])["parameters"]
            )
    if not ratios:
        raise ValueError("no single-replica dataparallel_timing records to fit the optimizer step on")
    return {threads: float(np.median(values)) for threads, values in sorted(ratios.items())}


@cache
def _model_facts(model: str) -> dict:
    """Parameters and gradient sizes in backward order of one of the book's models or of a registered one
    (``gpus.register``); the module itself for the book's (DataParallel's bytes are counted on it)."""
    module = build_model(model) if model not in REGISTERED else None
    return {"module": module, "parameters": parameters_of(model), "gradient_sizes": gradient_sizes(model)}


def overlapped_all_reduce_finish(
    backward_seconds: float, bucket_bytes: list[float], all_reduce_seconds
) -> float:
    """When the last bucket's all-reduce ends, counted from the start of backward.

    Bucket j is ready when backward has produced its share of the gradient bytes (gradients assumed to
    come out at a uniform rate in bytes); its all-reduce starts when it is ready and the previous one has
    finished (one communication stream): finish_j = max(ready_j, finish_(j−1)) + all_reduce(bytes_j).
    One bucket: no overlap at all (backward + all-reduce); many small buckets: max(backward, all-reduce)
    plus the last bucket's tail.
    """
    total = sum(bucket_bytes)
    finish, produced = 0.0, 0.0
    for size in bucket_bytes:
        produced += size
        ready = backward_seconds * produced / total
        finish = max(ready, finish) + all_reduce_seconds(size)
    return max(finish, backward_seconds)


@dataclass(frozen=True, eq=False)
class TimeModel:
    """Calibrated inputs of the step-time model (see ``predict_step``), and where the ranks run.

    compute: ``fit_compute`` output (single-device lines per model and thread count);
    alpha_seconds, seconds_per_byte: α and β of the all-reduce's messages (chapter 4's fit);
    copy_seconds_per_byte: seconds per byte of a copy into a fresh buffer on one device (DataParallel's
    transfers between replicas that share a device); peer_copy_seconds_per_byte: the same from one GPU to
    another (replicas on separate GPUs), None where fewer than two GPUs were calibrated;
    optimizer_seconds_per_parameter: the optimizer step's time per parameter, one number or one per
    thread count (``fit_optimizer_seconds_per_parameter``); cores: cores of the machine;
    device_type: where the compute was calibrated, "cpu" or "cuda"; devices: the separate compute devices
    ranks and replicas are spread over (1 on a CPU, whatever its cores; the GPUs used on CUDA);
    backward_share: backward's share of forward + backward (2/3: backward does about twice the forward's
    arithmetic; chapter 2 measured 0.70–0.74 on the CPU); other_links: the other (α, β) fits chapter 4's
    data allow (fitted to each size's median rather than its lower quartile), the band of ``link_variants``.
    """

    compute: pd.DataFrame
    alpha_seconds: float
    seconds_per_byte: float
    copy_seconds_per_byte: float
    optimizer_seconds_per_parameter: float | dict[int, float]
    cores: int
    device_type: str = "cpu"
    devices: int = 1
    peer_copy_seconds_per_byte: float | None = None
    backward_share: float = 2 / 3
    other_links: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.device_type not in ("cpu", "cuda"):
            raise ValueError(f"device_type must be 'cpu' or 'cuda', not {self.device_type!r}")
        if self.device_type == "cpu" and self.devices != 1:
            raise ValueError("on the CPU every rank shares one machine: devices must be 1")
        if self.devices > 1 and self.peer_copy_seconds_per_byte is None:
            raise ValueError(f"{self.devices} devices need a calibrated device-to-device copy speed")

    def link_variants(self) -> list[TimeModel]:
        """This model and one per ``other_links`` fit: what the all-reduce's uncertain α and β span."""
        return [self] + [
            replace(self, alpha_seconds=alpha, seconds_per_byte=beta, other_links=())
            for alpha, beta in self.other_links
        ]

    def ranks_per_device(self, world_size: int) -> int:
        """How many of ``world_size`` ranks (or replicas) share the busiest device: ⌈k / devices⌉."""
        return -(-world_size // self.devices)

    def line(self, model: str, threads: int) -> ComputeLine:
        """The compute line of ``model``: at ``threads`` threads on the CPU; on a GPU the one calibrated
        line (the GPU computes, the host's threads only launch kernels)."""
        if self.device_type == "cuda":
            calibrated = sorted(t for name, t in self.compute.index if name == model)
            threads = calibrated[-1] if calibrated else threads
        return compute_line(self.compute, model, threads)

    def optimizer_seconds(self, parameters: int, threads: int) -> float:
        """The optimizer step of ``parameters`` at ``threads`` threads (nearest calibrated thread count)."""
        per_parameter = self.optimizer_seconds_per_parameter
        if isinstance(per_parameter, dict):
            per_parameter = per_parameter[min(per_parameter, key=lambda t: (abs(t - threads), t))]
        return parameters * per_parameter


METHODS = ("dataparallel", "ddp_no_overlap", "ddp_overlap")


def split_step(line: ComputeLine, batch: float, optimizer_seconds: float, backward_share: float) -> dict:
    """Forward, backward and optimizer seconds of one single-process step at ``batch`` samples.

    The optimizer step is taken out of the line (at most its whole intercept); forward and backward share
    the rest as (1 − backward_share) : backward_share.
    """
    optimizer = min(optimizer_seconds, line.intercept_seconds)
    passes = line(batch) - optimizer
    return {
        "forward": passes * (1 - backward_share),
        "backward": passes * backward_share,
        "optimizer": optimizer,
    }


def predict_step(
    method: str,
    model: str,
    global_batch: int,
    world_size: int,
    time_model: TimeModel,
    *,
    threads: int | None = None,
    bucket_cap_mb: float = 25,
    compression: str | None = None,
) -> dict:
    """Predicted seconds of one training step, with its compute and communication parts.

    Where the ranks (or replicas) run decides how their compute adds up: on separate devices they
    compute at the same time; sharing a device (k ranks on one CPU's cores, or more ranks than GPUs)
    they take turns on it (``TimeModel.ranks_per_device``).

    - ``dataparallel`` (one process, ``world_size`` replicas, ``threads`` = all cores by default).
      Replicas on separate GPUs: the largest chunk's forward+backward and one optimizer step, c(⌈b/r⌉),
      and the transfers at the GPU-to-GPU copy speed. Replicas sharing one device: Σ over replicas of
      forward+backward on its chunk plus one optimizer step; with a line c(b) = a + s·b that is
      c(b) + (r − 1)·(a − optimizer), every extra replica repeating the fixed weight passes, and the
      transfers at the same-device copy speed. Bytes: ``dataparallel.bytes_per_step``.
    - ``ddp_no_overlap``: each rank (threads = cores // world_size, the DDP worker's default) computes a
      step on global_batch // world_size samples, then all-reduces every bucket in turn
      (``collectives.model.ring_all_reduce_seconds`` with α, β per bucket). When m ranks share a device,
      a rank's compute is the larger of two lower bounds: its own line at its threads, c_t(b/k), and the
      device doing its m ranks' work, c_all(m·b/k) + (m − 1)·a_all (each rank repeats the fixed weight
      passes and the optimizer step). On a CPU the second wins whenever memory bandwidth, not the core
      count, limits a step: two 1-thread ranks stream LinearNet's weights and Adam state at the same
      time through one memory system. Gloo ranks sharing one GPU take the same turns, host issue
      included: ``costmodel.sharing`` checks this against ranks that share only the device, on the
      H200's records, which so far do not choose between the two (chapter 5).
    - ``ddp_overlap``: forward + ``overlapped_all_reduce_finish`` (bucketed all-reduce running behind
      backward) + optimizer.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if global_batch <= 0 or world_size <= 0:
        raise ValueError("global_batch and world_size must be positive")
    facts = _model_facts(model)
    sharing = time_model.ranks_per_device(world_size)
    if method == "dataparallel" and facts["module"] is None:
        raise ValueError(
            f"DataParallel's bytes are counted on the module; {model!r} is registered by its costs"
        )
    if method == "dataparallel":
        threads = threads or time_model.cores
        optimizer_seconds = time_model.optimizer_seconds(facts["parameters"], threads)
        line = time_model.line(model, threads)
        chunks = chunk_sizes(global_batch, world_size)
        moved = sum(bytes_per_step(facts["module"], global_batch, world_size).values())
        if sharing == 1 and len(chunks) > 1:  # one replica per GPU: they compute at the same time
            compute = line(max(chunks))
            communication = moved * time_model.peer_copy_seconds_per_byte
        else:
            fixed_passes = max(line.intercept_seconds - optimizer_seconds, 0.0)
            compute = line(global_batch) + (len(chunks) - 1) * fixed_passes
            communication = moved * time_model.copy_seconds_per_byte
        return {
            "method": method, "threads": threads, "per_rank_batch": global_batch / world_size,
            "compute_seconds": compute, "communication_seconds": communication,
            "step_seconds": compute + communication,
        }  # fmt: skip
    threads = threads or max(1, time_model.cores // world_size)
    line = time_model.line(model, threads)
    per_rank_batch = global_batch // world_size
    if per_rank_batch == 0:
        raise ValueError(f"global_batch {global_batch} gives no sample to each of {world_size} ranks")
    compute = line(per_rank_batch)
    if sharing > 1:
        whole = time_model.line(model, time_model.cores)
        together = whole(per_rank_batch * sharing) + (sharing - 1) * whole.intercept_seconds
        if together > compute:  # the shared device, not the rank's threads, is the limit: scale the line
            line = ComputeLine(
                line.intercept_seconds * together / compute, line.seconds_per_sample * together / compute
            )
            compute = together
    buckets = ddp_bucket_bytes(facts["gradient_sizes"], bucket_cap_mb, compression)

    def all_reduce(nbytes: float) -> float:
        return ring_all_reduce_seconds(
            nbytes, world_size, time_model.alpha_seconds, time_model.seconds_per_byte
        )

    communication = sum(all_reduce(size) for size in buckets)
    if method == "ddp_no_overlap":
        step = compute + communication
    else:
        optimizer_seconds = time_model.optimizer_seconds(facts["parameters"], threads)
        phases = split_step(line, per_rank_batch, optimizer_seconds, time_model.backward_share)
        finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
        step = phases["forward"] + finish + phases["optimizer"]
    return {
        "method": method, "threads": threads, "per_rank_batch": per_rank_batch, "compute_seconds": compute,
        "communication_seconds": communication, "step_seconds": step,
    }  # fmt: skip


def predict_step_seconds(method: str, model: str, global_batch: int, world_size: int, time_model, **options):
    """``predict_step(...)["step_seconds"]``."""
    return predict_step(method, model, global_batch, world_size, time_model, **options)["step_seconds"]


def predict_step_band(
    method: str, model: str, global_batch: int, world_size: int, time_model: TimeModel, **options
) -> tuple[dict, float, float]:
    """``predict_step`` with the model's own link, and the least and most step seconds over every link fit
    it carries (``TimeModel.link_variants``): the band the all-reduce's uncertain α and β put on it."""
    parts, *others = [
        predict_step(method, model, global_batch, world_size, variant, **options)
        for variant in time_model.link_variants()
    ]
    steps = [parts["step_seconds"], *(other["step_seconds"] for other in others)]
    return parts, min(steps), max(steps)


def all_reduce_alpha_beta(records: list[dict], backend: str = "gloo", device: str = "cpu") -> dict:
    """α and β of ``dist.all_reduce`` from one ``collective_benchmark`` record: every size on two ranks
    (``LINK_FIT_WORLD_SIZE``), where the link is fitted — three ranks on two cores measure the scheduler
    too. Of several records (chapter 4's benchmark, and the all-reduce alone that chapter 3 or 5 measures
    where chapter 4 has not run) the one with the most such sizes is used, the newest of equals, so that
    every chapter prices the all-reduce with the same fit: chapter 4's once it has run (``record_key``
    names the record). The fit reads each size's lower quartile of its iterations; ``medians`` holds the
    same fit to the medians, which chapter 4 gives beside it: where the machine stalls, the two bound α, and
    whatever prices the all-reduce carries that range (chapter 3's bounds, chapter 5's inputs table). A
    clear error when nothing has measured this backend on two ranks."""
    candidates = []
    for record in records:
        if record["kind"] != "collective_benchmark":
            continue
        frame = benchmark_frame(record["result"]).assign(
            backend=record["config"]["backend"], device=record["config"]["device"]
        )
        frame = frame.query("operation == 'all_reduce' and status == 'ok'")
        frame = frame[frame["world_size"] == LINK_FIT_WORLD_SIZE].query(
            "backend == @backend and device == @device"
        )
        candidates.append((len(frame), record.get("measured_at", ""), frame, record.get("key")))
    rows, key = max(candidates, key=lambda c: c[:2])[2:] if candidates else (pd.DataFrame(), None)
    if len(rows) < 2:
        raise ValueError(
            f"no all_reduce benchmark of {backend} on {device} on two ranks among the records; "
            "run chapter 4 (helpers.collectives.runs.stored_benchmark) first"
        )
    rows = rows.drop(columns=["operation"])
    medians = fit_alpha_beta(rows.drop(columns="seconds_all", errors="ignore"))
    return {**fit_alpha_beta(rows), "record_key": key, "medians": medians}


def other_link_fits(link: dict) -> tuple[tuple[float, float], ...]:
    """An ``all_reduce_alpha_beta`` result's other fit (to each size's median), where it carries one, as
    ``TimeModel.other_links``: the band the all-reduce's uncertain α and β put on a prediction."""
    medians = link.get("medians")
    return ((medians["alpha_seconds"], medians["seconds_per_byte"]),) if medians else ()


def stored_all_reduce_alpha_beta(store: ResultStore, backend: str = "gloo", device: str = "cpu") -> dict:
    """``all_reduce_alpha_beta`` of the store's chapter 4 records; where chapter 4 did not run into this
    store, the all-reduce alone is benchmarked on two ranks first (and stored)."""
    try:
        return all_reduce_alpha_beta(store.records("collective_benchmark"), backend, device)
    except ValueError:
        stored_benchmark(store, 2, backend=backend, device=device, operations=["all_reduce"], chunks=[1])
        return all_reduce_alpha_beta(store.records("collective_benchmark"), backend, device)


def copy_record(records: list[dict], device: str, to: str) -> dict:
    """The newest copy calibration record from ``device`` to ``to``; ValueError naming it when there is
    none."""
    found = [
        r for r in records
        if r["kind"] == "copy_calibration" and r["config"]["device"] == device
        and r["config"].get("to", device) == to and r["config"].get("fresh", True)
    ]  # fmt: skip
    if not found:
        raise ValueError(f"no copy calibration from {device} to {to} among the records")
    return found[-1]


def calibration_records(
    records: list[dict], models, *, backend: str, timed_steps: int, device_type: str = "cpu", devices: int = 1
) -> dict[str, list[dict]]:
    """The records ``time_model_from_records`` builds its model from, by role: ``step_timing`` (float32
    single-device timings of ``models`` with ``timed_steps``), ``link`` (the one all-reduce benchmark
    ``all_reduce_alpha_beta`` fits), ``copy`` (the newest copy on one device, and from the first GPU to
    the second when ``devices`` > 1) and ``optimizer`` (single-replica ``dataparallel_timing``)."""
    target = "cuda:0" if device_type == "cuda" else "cpu"  # where single-device calibrations ran
    benchmarks = [r for r in records if r["kind"] == "collective_benchmark"]
    chosen = all_reduce_alpha_beta(benchmarks, backend, device_type)["record_key"]
    return {
        "step_timing": [
            r for r in records
            if r["kind"] == "step_timing" and r["config"].get("autocast") is None
            and r["config"]["device"] == target and r["config"]["timed_steps"] == timed_steps
            and r["config"]["model"] in models
        ],
        "link": [r for r in benchmarks if r.get("key") == chosen],
        "copy": [copy_record(records, target, target)]
        + ([copy_record(records, "cuda:0", "cuda:1")] if devices > 1 else []),
        "optimizer": [
            r for r in records if r["kind"] == "dataparallel_timing" and r["config"]["devices"] == [target]
        ],
    }  # fmt: skip


def time_model_from_records(
    records: list[dict],
    models,
    *,
    backend: str,
    timed_steps: int,
    cores: int,
    device_type: str = "cpu",
    devices: int = 1,
) -> tuple[TimeModel, pd.DataFrame]:
    """The time model from calibration records of one machine, and a table of its inputs.

    ``records`` are that machine's: single-device ``step_timing`` (on the CPU, or the first GPU), the
    ``collective_benchmark`` of ``backend``, ``copy_calibration`` on one device (and from the first GPU
    to the second when ``devices`` > 1) and single-replica ``dataparallel_timing`` for the optimizer.
    Nothing measured with several ranks or replicas enters. ``devices`` is where ranks spread: 1 on a
    CPU; the GPUs used on CUDA, so that k ranks on k GPUs compute side by side.
    """
    target = "cuda:0" if device_type == "cuda" else "cpu"  # where single-device calibrations ran
    used = calibration_records(
        records, models, backend=backend, timed_steps=timed_steps, device_type=device_type, devices=devices
    )
    timings = pd.DataFrame([{**record["config"], **record["result"]} for record in used["step_timing"]])
    if timings.empty:
        raise ValueError(f"no single-device step timings of {list(models)} on {target} among the records")
    compute = fit_compute(timings)
    link = all_reduce_alpha_beta(used["link"], backend, device_type)
    copy, *peers = (record["result"] for record in used["copy"])
    peer = peers[0] if peers else None
    optimizer = fit_optimizer_seconds_per_parameter(used["optimizer"])
    model = TimeModel(
        compute=compute,
        alpha_seconds=link["alpha_seconds"],
        seconds_per_byte=link["seconds_per_byte"],
        copy_seconds_per_byte=copy["seconds_per_byte"],
        optimizer_seconds_per_parameter=optimizer,
        cores=cores,
        device_type=device_type,
        devices=devices,
        peer_copy_seconds_per_byte=peer["seconds_per_byte"] if peer else None,
        other_links=other_link_fits(link),
    )
    source = f"chapter 4: dist.all_reduce benchmark, {placement_words(backend, device_type)}"
    inputs = pd.DataFrame(
        [
            {"input": "ranks spread over", "value": devices,
             "from": f"{device_type} {'device' if devices == 1 else 'devices'}, {cores} cores"},
            {"input": "all-reduce α (µs per message)", "value": link["alpha_seconds"] * 1e6,
             "from": f"{source}, each size's lower quartile; "
                     f"fitted to the medians instead: {link['medians']['alpha_seconds'] * 1e6:,.0f} µs"},
            {"input": "all-reduce bandwidth 1/β (GB/s)", "value": 1e-9 / link["seconds_per_byte"],
             "from": f"{source}, each size's lower quartile; "
                     f"fitted to the medians instead: {1e-9 / link['medians']['seconds_per_byte']:.3g} GB/s"},
            {"input": "copy bandwidth, one device (GB/s)", "value": 1e-9 / copy["seconds_per_byte"],
             "from": "copy benchmark: " + copy["method"]},
            *([{"input": "copy bandwidth, GPU to GPU (GB/s)", "value": 1e-9 / peer["seconds_per_byte"],
                "from": "copy benchmark: " + peer["method"]}] if peer else []),
            *[{"input": f"optimizer ns per parameter, {counted(threads, 'thread')}", "value": value * 1e9,
               "from": "chapter 2: optimizer phase of one replica"} for threads, value in optimizer.items()],
            *[row for (name, threads), fit in compute.iterrows()
              for row in _compute_rows(name, threads, fit)],
        ]
    )  # fmt: skip
    return model, inputs


def _compute_rows(name: str, threads: int, fit) -> list[dict]:
    """The inputs table's two rows for one compute line: fixed seconds per step and achieved GFLOP/s."""
    over = {
        "runs": f"{fit.runs_per_point} runs per batch",
        "runs and timed steps": "the runs of a batch timed in several, else the timed steps of its run",
        "timed steps": "timed steps of one run",
    }[fit.spread_over]
    source = (
        f"single-device steps at {fit.points} batch sizes, fit MAPE {fit.fit_mape_percent:.1f} %; range over "
        f"{over}"
    )
    if fit.slope_resolved:
        rate = f"{fit.gflops_low:.3g}–{fit.gflops_high:.3g} (5–95 %)"
    elif np.isfinite(fit.gflops_low):
        rate = f"not resolved: at least {fit.gflops_low:.3g}"
    else:
        rate = "not resolved: the slope is zero within its 5–95 % range"
    at = f"{name}, {counted(threads, 'thread')}"
    return [
        {"input": f"{at}: fixed seconds per step", "value": fit.intercept_seconds,
         "from": f"{fit.intercept_low:.3g}–{fit.intercept_high:.3g} s (5–95 %); {source}"},
        {"input": f"{at}: achieved GFLOP/s", "value": fit.achieved_gflops,
         "from": f"{rate}; slope {fit.seconds_per_sample * 1e3:.3g} ms per sample"},
    ]  # fmt: skip


def calibrate(
    store: ResultStore,
    train_set,
    models,
    batch_sizes,
    world_sizes,
    backend: str = "gloo",
    device: str = "cpu",
    timed_steps: int = 3,
    cores: int | None = None,
    gpus: int | None = None,
    repeats: int = 1,
) -> tuple[TimeModel, pd.DataFrame]:
    """Measure what the time model lacks through the store, then build it (``time_model_from_records``).

    Every single-device step timing is made in ``repeats`` independent runs (seeds 0, 1, …: a fresh
    model and another draw of batches each), so that the compute lines carry their spread across runs.

    On the CPU: single-process step times at every thread count a rank gets (cores // k for each k).
    On CUDA: step times on the first GPU, a copy from GPU 0 to GPU 1 where two or more GPUs may be used
    (``gpus``, default all visible), and ranks spread over those GPUs. Both: α and β from chapter 4's
    ``dist.all_reduce`` benchmark (measured here on two ranks if chapter 4 did not run), a same-device
    copy, and chapter 2's single-replica optimizer phase.
    """
    cores = cores or usable_cores()
    devices = usable_gpus(gpus) if device == "cuda" else 1
    target = "cuda:0" if device == "cuda" else "cpu"  # where single-device calibrations run
    thread_counts = (
        sorted({max(1, cores // k) for k in world_sizes} | {cores}) if device == "cpu" else [cores]
    )
    for threads in thread_counts:
        for seed in range(repeats):  # seed 0 has chapter 1's settings: its sweep's records are reused
            stored_compute_calibration(
                store, train_set, models, batch_sizes, threads, timed_steps=timed_steps, device=target,
                optimizer="adam", lr=1e-3, seed=seed,
            )  # fmt: skip
    stored_all_reduce_alpha_beta(store, backend, device)
    stored_copy_calibration(store, device=target)
    if devices > 1:
        stored_copy_calibration(store, device="cuda:0", to="cuda:1")
    for name in models:  # one replica: chapter 2's phase times, single-device (reused when chapter 2 ran)
        stored_dataparallel_timing(
            store, name, train_set, devices=[target], batch_size=max(batch_sizes), timed_steps=timed_steps,
            seed=0,
        )  # fmt: skip
    return time_model_from_records(
        store.records(), models, backend=backend, timed_steps=timed_steps, cores=cores,
        device_type=device, devices=devices,
    )  # fmt: skip
