"""This machine's own numbers in place of assumptions (``--measure``, chapter 7): single-device step times
of a counted model at two or more batches (its real compute slope and fixed cost), each phase timed, in
independent runs, and the all-reduce's α and β over the visible devices (NCCL across GPUs, Gloo across
CPU ranks otherwise: ``costmodel.timemodel.stored_all_reduce_alpha_beta``). Every measurement goes
through the results store, so a rerun on the same machine and code reuses it.

From them: the time model of this machine for the model (``time_model``: what ``validate`` checks), and,
on a GPU the roofline knows, lines through the measured steps that replace the roofline for that GPU
(``measured_computes``).
"""

from __future__ import annotations

import copy
import statistics
import time

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from helpers.advise.counting import AdviseError, Counted
from helpers.costmodel import recommend, timemodel
from helpers.costmodel.specs import gpu_key
from helpers.dataparallel import stored_copy_calibration
from helpers.hardware import gpu_count, gpu_name, usable_cores
from helpers.phase_clock import PhaseClock
from helpers.profiling import profile_step
from helpers.results import ResultStore
from helpers.train import WARMUP_STEPS, make_optimizer, pick_device, training_step
from helpers.worker import set_tf32


def synthetic_loss(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A loss for any output: the mean square (the backward pass costs what the model's layers cost)."""
    return output.float().square().mean()


def step_arguments(
    model: nn.Module, input_shape, batch: int, optimizer: str, dtype: str, device: str, seed: int
) -> tuple[torch.device, tuple]:
    """The device and ``train.training_step``'s arguments for a seeded copy of ``model`` with its optimizer,
    on random inputs of ``batch`` samples (no targets: ``synthetic_loss``)."""
    target = pick_device(device)
    torch.manual_seed(seed)
    model = copy.deepcopy(model).to(target).train()
    optim = make_optimizer(optimizer, model.parameters(), 1e-3)
    inputs = torch.randn(batch, *input_shape, device=target)
    autocast = torch.bfloat16 if dtype == "bf16" else None
    return target, (model, optim, inputs, None, synthetic_loss, autocast)


def time_steps(
    model: nn.Module,
    input_shape,
    batch: int,
    *,
    optimizer: str = "adam",
    dtype: str = "float32",
    device: str = "cpu",
    timed_steps: int = 5,
    seed: int = 0,
) -> dict:
    """Every phase of ``timed_steps`` training steps of a copy of ``model`` on random inputs of
    ``batch`` samples, after ``WARMUP_STEPS``: forward (with the loss), backward and optimizer seconds per
    step (host clock; on a GPU, CUDA events), and their sum."""
    target, arguments = step_arguments(model, input_shape, batch, optimizer, dtype, device, seed)
    phases = {"forward": [], "backward": [], "optimizer": []}
    for step in range(WARMUP_STEPS + timed_steps):
        clock = PhaseClock(target)
        training_step(*arguments, phase=clock)
        if step >= WARMUP_STEPS:
            for name, (host, on_device) in clock.seconds().items():
                phases[name].append(on_device if on_device is not None else host)
    steps = [sum(parts) for parts in zip(*phases.values(), strict=True)]
    return {
        "step_seconds": statistics.median(steps),
        "step_seconds_all": steps,
        **{f"{name}_seconds": statistics.median(values) for name, values in phases.items()},
        "method": f"median of {timed_steps} steps of random inputs after {WARMUP_STEPS} warm-up steps, "
        "each phase timed",
    }


def step_config(kind: str, spec: str, counted: Counted, batch: int, **settings) -> dict:
    """A stored step measurement's configuration: the model's spec and counted costs, the batch, the
    threads and the settings."""
    return {
        "kind": kind,
        "spec": spec,
        "model": counted.name,
        "input_shape": list(counted.input_shape),
        "dtype": counted.dtype,
        "optimizer": counted.optimizer,
        "batch_size": batch,
        "threads": torch.get_num_threads(),
        **settings,
    }


def stored_step_timing(store: ResultStore, spec: str, counted: Counted, batch: int, **settings) -> dict:
    """``time_steps`` through the store, keyed by the model's spec and counted costs, the batch, the
    threads and the settings."""
    settings.setdefault("device", "cpu")
    config = step_config("advise_step_timing", spec, counted, batch, **settings)
    return store.measure(
        config,
        lambda: time_steps(
            counted.module,
            counted.input_shape,
            batch,
            optimizer=counted.optimizer,
            dtype=counted.dtype,
            **settings,
        ),
    )


def profile_steps(
    model: nn.Module,
    input_shape,
    batch: int,
    *,
    optimizer: str = "adam",
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> dict:
    """``profiling.profile_step`` of a copy of ``model`` on random inputs of ``batch`` samples: each phase
    on the host's and the device's clocks, and every operator's host and device time under torch.profiler.
    What the host costs per operator, and the device per layer, is read from these (issue 35)."""
    set_tf32(False)  # the study's float32, as chapter.start and every rank set it: what the models price
    target, arguments = step_arguments(model, input_shape, batch, optimizer, dtype, device, seed)
    return profile_step(arguments, target)


def stored_step_profile(
    store: ResultStore, spec: str, counted: Counted, batch: int, *, device: str = "cpu", seed: int = 0
) -> dict:
    """``profile_steps`` through the store, keyed like ``stored_step_timing``."""
    config = step_config("advise_step_profile", spec, counted, batch, device=device, seed=seed, tf32=False)
    return store.measure(
        config,
        lambda: profile_steps(
            counted.module,
            counted.input_shape,
            batch,
            optimizer=counted.optimizer,
            dtype=counted.dtype,
            device=device,
            seed=seed,
        ),
    )


def profile_sweep(
    store: ResultStore,
    counted: dict[str, Counted],
    batches,
    *,
    device: str = "cpu",
    repeats: int = 3,
    time_limit_seconds: float = 600,
) -> list[dict]:
    """``stored_step_profile`` of every ``{spec: Counted}`` at every batch, ``repeats`` seeds each, batch by
    batch across the models (so that a time limit leaves every model measured at the smaller batches).
    Past ``time_limit_seconds`` it stops and returns what it has; everything finished is stored."""
    work = [(b, s, r) for b in sorted(set(batches)) for s in counted for r in range(repeats)]
    deadline, records = time.monotonic() + time_limit_seconds, []
    for batch, spec, seed in tqdm(work, desc="profiled steps"):
        if time.monotonic() > deadline:
            print(f"stopped at its {time_limit_seconds:.0f} s limit; what it measured is stored")
            break
        records.append(stored_step_profile(store, spec, counted[spec], batch, device=device, seed=seed))
    return records


def measure_steps(
    store: ResultStore,
    spec: str,
    counted: Counted,
    batches,
    *,
    thread_counts=None,
    device: str = "cpu",
    repeats: int = 3,
    timed_steps: int = 5,
    time_limit_seconds: float = 600,
) -> pd.DataFrame:
    """Single-device step times at every batch (two or more), thread count (default: every count a rank of
    k ranks on this machine's cores gets, and all cores) and run (``repeats`` seeds): one row per run.
    Past ``time_limit_seconds`` it stops with what it measured stored (a rerun reuses it)."""
    if len(set(batches)) < 2:
        raise ValueError("a compute line needs step times at two or more batches")
    cores = usable_cores()
    if thread_counts is None:  # on a CPU, every count a rank of k ranks on these cores gets; a GPU: all
        thread_counts = sorted({cores, max(1, cores // 2), 1}) if device == "cpu" else [cores]
    before, rows = torch.get_num_threads(), []
    work = [(t, b, r) for t in thread_counts for b in batches for r in range(repeats)]
    deadline = time.monotonic() + time_limit_seconds
    try:
        for threads, batch, seed in tqdm(work, desc=f"step times of {counted.name}"):
            if time.monotonic() > deadline:
                raise AdviseError(
                    f"measuring passed its {time_limit_seconds:.0f} s limit; what it measured is "
                    "stored and a rerun reuses it (or measure smaller batches)"
                )
            torch.set_num_threads(threads)
            record = stored_step_timing(
                store, spec, counted, batch, device=device, timed_steps=timed_steps, seed=seed
            )
            rows.append(step_row(record))
    finally:
        torch.set_num_threads(before)
    return pd.DataFrame(rows)


def step_row(record: dict) -> dict:
    """One ``stored_step_timing`` record as a row of ``measure_steps``' frame: the model's counted name,
    threads, batch, seed and device of its config, and every phase of its result."""
    config = record["config"]
    return {**{key: config[key] for key in ("model", "threads", "batch_size", "seed", "device")},
            **record["result"]}  # fmt: skip


def time_model(
    store: ResultStore, steps: pd.DataFrame, parameters: int, backend: str = "gloo", device: str = "cpu"
) -> timemodel.TimeModel:
    """This machine's time model for the measured model (``steps_time_model``), with the all-reduce's α and
    β on two ranks of ``backend`` and a copy's speed (DataParallel's) measured through the store where
    missing; NCCL ranks each on their own GPU (with the GPU-to-GPU copy measured), Gloo ranks sharing this
    machine's first device."""
    link = timemodel.stored_all_reduce_alpha_beta(store, backend, device)
    one = "cuda:0" if device == "cuda" else "cpu"
    copy = stored_copy_calibration(store, device=one)["result"]
    devices = gpu_count() if device == "cuda" and backend == "nccl" else 1
    peer = stored_copy_calibration(store, device="cuda:0", to="cuda:1")["result"] if devices > 1 else None
    return steps_time_model(steps, parameters, link, copy, device, devices, peer)


def steps_time_model(
    steps: pd.DataFrame,
    parameters: int,
    link: dict,
    copy: dict,
    device: str = "cpu",
    devices: int = 1,
    peer: dict | None = None,
) -> timemodel.TimeModel:
    """The time model of a measured model: its compute lines (``timemodel.fit_compute`` across runs), the
    optimizer's measured seconds per parameter at each thread count, the all-reduce's ``link`` (α, β), a
    copy's speed on one device and, with ``devices`` > 1, from one GPU to another (``peer``); the link's
    fit to medians, where ``link`` has one, as its other fit (``other_links``)."""
    optimizer = (steps.groupby("threads")["optimizer_seconds"].median() / parameters).to_dict()
    return timemodel.TimeModel(
        compute=timemodel.fit_compute(steps),
        alpha_seconds=link["alpha_seconds"],
        seconds_per_byte=link["seconds_per_byte"],
        copy_seconds_per_byte=copy["seconds_per_byte"],
        optimizer_seconds_per_parameter=optimizer,
        cores=usable_cores(),
        device_type=device,
        devices=devices,
        peer_copy_seconds_per_byte=peer["seconds_per_byte"] if peer else None,
        other_links=timemodel.other_link_fits(link),
    )


def measured_computes(steps: pd.DataFrame) -> dict:
    """Lines through single-GPU step times measured on a GPU the roofline knows (``recommend``'s form):
    they replace the roofline for that GPU in every prediction. Empty on a CPU or an unknown GPU."""
    gpu_steps = steps[steps["device"].str.startswith("cuda")]
    if gpu_steps.empty or not gpu_count():
        return {}
    key = gpu_key(gpu_name(0))
    if key is None:
        return {}
    frame = (
        gpu_steps.groupby(["model", "batch_size"])["step_seconds"].agg(["median", "min", "max"]).reset_index()
    )
    frame = frame.rename(
        columns={"batch_size": "batch", "median": "step_seconds", "min": "step_min", "max": "step_max"}
    ).assign(gpu=key)
    return recommend.measured_computes(frame)


def step_table(steps: pd.DataFrame) -> pd.DataFrame:
    """The measured step times for reading: per thread count and batch, the median run and the range."""
    grouped = steps.groupby(["threads", "batch_size"])["step_seconds"]
    return pd.DataFrame(
        {
            "threads": [t for t, _ in grouped.groups],
            "batch": [b for _, b in grouped.groups],
            "step (ms)": [
                f"{m * 1e3:.3g} ({lo * 1e3:.3g}–{hi * 1e3:.3g})"
                for m, lo, hi in zip(grouped.median(), grouped.min(), grouped.max(), strict=True)
            ],
            "runs": grouped.size().tolist(),
        }
    )
