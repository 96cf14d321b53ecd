"""The renter's one-minute check: every GPU path of the study, at a tiny size (``make gpu-check``).

``python -m helpers.gpu_check`` on a machine with N ≥ 1 GPUs runs each path once — CUDA training steps
timed with CUDA events, bf16 autocast, the profiler's CUDA trace, the bytes per sample held after the
forward pass against chapter 1's count, DataParallel from primitives against one device and against
``torch.nn.DataParallel``, DDP with NCCL (one rank per GPU) and with Gloo on CUDA tensors (ranks sharing
GPUs), our ring collectives on NCCL and on Gloo with CUDA tensors, ZeRO-1 and FSDP on two NCCL ranks,
the topology matrix — and prints one table: path, what was compared, result, seconds. It exits 1 if any
path fails, so that a broken machine costs a minute of rent instead of a failed hour. GPUs that
nvidia-smi lists but torch cannot use (a driver too old for torch's CUDA) are a failure with the reason;
without any GPU it says so and exits 0, running nothing. ``--plan`` lists the checks and validates
their launches on this or a described machine, and runs nothing.

Every check takes its device as an argument, so the CPU can run the same code (the tests do)."""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import dataparallel, hardware, models, profiling, topology, train
from helpers.collectives.runs import WORKER, collective_config, run_task
from helpers.data import load_fsdd
from helpers.ddp import ddp_config
from helpers.hardware import Machine
from helpers.launch import Request, check_request, launch
from helpers.paths import results_dir
from helpers.results import short_hash, write_json_atomically
from helpers.sharding.runs import WORKER as SHARDING_WORKER
from helpers.sharding.runs import loss_parity as sharding_loss_parity
from helpers.sharding.runs import memory_check as sharding_memory_check
from helpers.sharding.runs import run_sharding_series, sharding_config, traffic_check
from helpers.worker import set_tf32, visible_gpus

TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}  # float32 sums in another order, TF32 switched off
LAUNCH_LIMIT_SECONDS = 120


class CheckFailed(AssertionError):
    """A path that ran but did not give what it was compared with."""


@dataclass(frozen=True)
class Check:
    """One GPU path: what it is, what it is compared with, the function that returns the outcome, the
    launches it makes, and why it is skipped on this machine (None: it runs)."""

    path: str
    compared: str
    run: Callable[[], str]
    launches: tuple[Request, ...] = ()
    refusal: str | None = None  # why the launcher would refuse one of its launches on this machine
    optional: bool = False  # a refusal then skips it (it needs more GPUs); otherwise it is a failure
    window: tuple[int, int] | None = None  # the bounds a measured number must fall in, where there are

    def outcome(self) -> tuple[str, dict]:
        """The row's result — "pass: …", "FAIL: …", or "skip: …" / "FAIL: refused …" when a launch would
        be refused — and what the check measured for later use (its step times), {} otherwise."""
        if self.refusal:
            return ("skip: " if self.optional else "FAIL: refused before starting: ") + self.refusal, {}
        try:
            returned = self.run()
        except Exception as error:  # every failure becomes a row, and the next check still runs
            first = str(error).strip().splitlines()[0] if str(error) else ""
            return f"FAIL: {type(error).__name__}: {first}", {}
        text, measured = returned if isinstance(returned, tuple) else (returned, {})
        return f"pass: {text}", measured


def synthetic(samples: int = 16, seed: int = 0) -> TensorDataset:
    """Random waveforms and labels of the study's shape: the single-device checks need no recordings."""
    generator = torch.Generator().manual_seed(seed)
    return TensorDataset(
        torch.randn(samples, 1, 12_000, generator=generator) * 0.1,
        torch.randint(0, 10, (samples,), generator=generator),
    )


def assert_equal_parameters(ours: list[torch.Tensor], reference: list[torch.Tensor], what: str) -> float:
    """The largest absolute difference; CheckFailed naming ``what`` when a parameter differs."""
    for mine, theirs in zip(ours, reference, strict=True):
        try:
            torch.testing.assert_close(mine, theirs, **TOLERANCE)
        except AssertionError as error:
            raise CheckFailed(f"{what}: {str(error).splitlines()[0]}") from None
    return max(float((mine - theirs).abs().max()) for mine, theirs in zip(ours, reference, strict=True))


TIMING_BATCHES = (8, 64)  # two batches: chapter 5 draws the GPU's step line (slope, fixed cost) through them
CPU_TIMING_BATCHES = (2, 4)  # the same code on a CPU (the tests' plan), at batches that take a second
PROFILE_BATCH, CPU_PROFILE_BATCH = 8, 2  # the profiled step's batch on a GPU, and on a CPU (the tests')
# bf16's step on all 16 clips on a GPU; on a CPU without bf16 units a bf16 convolution is emulated (about
# 1 s per clip and layer on 2 cores), so the tests' plan takes 2 clips
BF16_BATCH, CPU_BF16_BATCH = 16, 2


def check_training_step(model_name: str, device: str, batches=TIMING_BATCHES) -> tuple[str, dict]:
    """One SGD step on ``device`` equals the CPU's; the step time (Adam, as chapter 1 times it; CUDA events
    on a GPU) is measured at two ``batches`` and kept, so that chapter 5 can put this GPU's own line in
    place of its roofline."""
    inputs, targets = synthetic().tensors
    on_device = dataparallel.parameters_after_one_step(model_name, inputs, targets, device=device)
    on_cpu = dataparallel.parameters_after_one_step(model_name, inputs, targets, device="cpu")
    gap = assert_equal_parameters(on_device, on_cpu, f"{device} against cpu")
    data = synthetic(2 * max(batches))
    timings = {
        batch: train.time_training_steps(model_name, data, batch_size=batch, timed_steps=5, device=device)
        for batch in batches
    }
    steps = ", ".join(f"{t['step_seconds'] * 1e3:.2f} ms at batch {b}" for b, t in timings.items())
    kept = [{"model": model_name, "batch": batch, "device": str(device),
             "step_seconds_all": t["step_seconds_all"], "method": t["method"]}
            for batch, t in timings.items()]  # fmt: skip
    return f"max |Δ| {gap:.1e}; median step {steps}", {"step_timings": kept}


def check_bf16(model_name: str, device: str, batch_size: int = BF16_BATCH) -> str:
    """A bf16-autocast training step on ``batch_size`` clips runs and its loss is within 5 % of float32's."""
    inputs, targets = (t[:batch_size].to(device) for t in synthetic().tensors)
    losses = {}
    for dtype in (None, torch.bfloat16):
        torch.manual_seed(0)
        model = models.build_model(model_name).to(device)
        optimizer = train.make_optimizer("sgd", model.parameters(), 0.1)
        loss, _ = train.training_step(model, optimizer, inputs, targets, nn.functional.cross_entropy, dtype)
        losses[dtype] = loss.item()
    if not math.isclose(losses[torch.bfloat16], losses[None], rel_tol=0.05):
        raise CheckFailed(f"bf16 loss {losses[torch.bfloat16]:.4f} against float32 {losses[None]:.4f}")
    return f"loss {losses[torch.bfloat16]:.4f} (bf16) against {losses[None]:.4f} (float32)"


def check_profiler(model_name: str, device: str, batch_size: int = PROFILE_BATCH) -> str:
    """torch.profiler sees the step's work on the device's clock (kernels on a GPU), and each phase its
    own CUDA-event time. On a GPU the profiler's table is kept (``key-averages-<model>.json`` beside the
    check's record): a real CUDA trace for ``tests/test_profiling.py``, which has only a hand-built one."""
    result = profiling.profile_training_step(model_name, synthetic(), batch_size=batch_size, device=device)
    seconds = result["device_seconds"] if device != "cpu" else result["host_seconds"]
    if not seconds or seconds <= 0:
        raise CheckFailed(f"no time on the device's clock: {result['device_seconds']!r}")
    if device != "cpu":
        missing = [row["phase"] for row in result["phases"] if not row["device_seconds"]]
        if missing:
            raise CheckFailed(f"no CUDA-event time for phase(s) {', '.join(missing)}")
        events = {"torch": torch.__version__, **result, "gpu": torch.cuda.get_device_name(device)}
        write_json_atomically(results_dir() / "gpu-check" / f"key-averages-{model_name}.json", events)
    return (
        f"{seconds * 1e3:.2f} ms on the {'device' if device != 'cpu' else 'host'} clock; "
        + (profiling.host_device_verdict(result).split(":")[0])
    )


MEMORY_BATCHES = (16, 80)  # a wide gap: the allocator's 512-byte rounding is < 100 B per sample


def held_and_peak_bytes_per_sample(
    model_name: str, device: str, batches: tuple[int, int] = MEMORY_BATCHES
) -> tuple[int, int]:
    """Growth per added sample of (what is allocated once the forward pass and loss are done, the step's
    peak), from before the batch is moved to the device: the CUDA allocator's own counters.

    The first is free of cuDNN's workspace (allocated inside a convolution call and freed before it
    returns) and of backward's buffers; the peak includes both, and the workspace cuDNN picks may grow
    with the batch, so only the first is compared with arithmetic. One untimed step runs first: cuBLAS
    and cuDNN allocate their handles and workspaces (tens of MiB, kept) on the first call, and had they
    landed inside the first batch's reading, the growth per sample would come out too small, even
    negative.
    """
    held, peaks = [], []
    for batch in (batches[0], *batches):  # the first pass warms up and is not kept
        torch.manual_seed(0)
        model = models.build_model(model_name).to(device)
        optimizer = train.make_optimizer("sgd", model.parameters(), 0.1)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        inputs, targets = (t.to(device) for t in synthetic(batch).tensors)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        torch.cuda.synchronize(device)
        held.append(torch.cuda.memory_allocated(device) - before)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize(device)
        peaks.append(torch.cuda.max_memory_allocated(device) - before)
        del model, optimizer, inputs, targets, loss
    held, peaks = held[1:], peaks[1:]
    gap = batches[1] - batches[0]
    return (held[1] - held[0]) // gap, (peaks[1] - peaks[0]) // gap


def memory_window(model_name: str) -> tuple[int, int, int]:
    """(expected bytes per sample, lowest and highest that pass): ``models.held_bytes_per_sample`` — the
    input, what autograd keeps for backward, logits and targets, each storage once, counted on the CPU
    — within 10 %. (The seed's "every output twice" leaves out the input, which is most of what
    ``LinearNet`` keeps, and counts outputs no one keeps: it is printed, not used.)"""
    expected = models.held_bytes_per_sample(models.build_model(model_name))
    return expected, int(0.9 * expected), int(1.1 * expected)


def check_memory(model_name: str, device: str) -> str:
    """Bytes per sample held after the forward pass lie within 10 % of chapter 1's count of them."""
    expected, low, high = memory_window(model_name)
    held, peak = held_and_peak_bytes_per_sample(model_name, device)
    seed = models.activation_bytes_per_sample(models.build_model(model_name))
    if not low <= held <= high:
        raise CheckFailed(f"{held:,} B per sample held after forward, outside [{low:,}, {high:,}]")
    return (
        f"{held:,} B per sample held after forward (counted {expected:,}); step peak {peak:,} B per "
        f"sample; seed's count {seed:,}"
    )


def check_dataparallel(model_name: str, devices: list[str]) -> str:
    """DataParallel from primitives on ``devices`` equals one device, and ``torch.nn.DataParallel``."""
    inputs, targets = synthetic(9).tensors  # 9 samples: uneven chunks on 2 or more replicas
    ours = dataparallel.parameters_after_one_step(model_name, inputs, targets, replicas=devices)
    single = dataparallel.parameters_after_one_step(model_name, inputs, targets, device=devices[0])
    gap = assert_equal_parameters(ours, single, "ours against one device")
    detail = f"max |Δ| {gap:.1e} against one device"
    if all(torch.device(d).type == "cuda" for d in devices):
        ids = [torch.device(d).index or 0 for d in devices]
        theirs = dataparallel.parameters_after_one_step(model_name, inputs, targets, device_ids=ids)
        gap = assert_equal_parameters(ours, theirs, "ours against torch.nn.DataParallel")
        detail += f", {gap:.1e} against torch.nn.DataParallel"
    return detail


SAMPLES_PER_RANK = 4  # every check's global batch: 4 per rank, so any number of ranks divides it
STEPS_PER_EPOCH = 4


def ddp_settings(backend: str, device: str, world_size: int) -> dict:
    """A tiny LinearNet DDP run sized from its rank count: 4 samples per rank, 4 steps per epoch, 2 epochs."""
    batch = SAMPLES_PER_RANK * world_size
    return ddp_config(
        backend=backend, device=device, model="LinearNet", train_samples=STEPS_PER_EPOCH * batch,
        test_samples=8, global_batch_size=batch, epochs=2, optimizer="sgd", lr=0.05, timeout_seconds=60,
    )  # fmt: skip


def ddp_losses(backend: str, device: str, world_size: int) -> list[float]:
    """Per-epoch training losses of a tiny LinearNet DDP run (``ddp_settings``, real recordings)."""
    results = launch(
        ddp_settings(backend, device, world_size), world_size, time_limit_seconds=LAUNCH_LIMIT_SECONDS
    )
    expected = models.parameter_bytes(models.build_model("LinearNet"))
    if {sum(step) for step in results[0]["bucket_bytes_per_step"]} != {expected}:
        raise CheckFailed(f"all-reduced bytes per step differ from the {expected:,} gradient bytes")
    return [row["train_loss"] for row in results[0]["history"]]


def check_ddp(backend: str, device: str, world_size: int) -> str:
    """DDP on ``backend``/``device`` gives the losses of Gloo on the CPU with the same ranks."""
    ours = ddp_losses(backend, device, world_size)
    same = (backend, device) == ("gloo", "cpu")  # the reference itself: one launch is enough
    reference = ours if same else ddp_losses("gloo", "cpu", world_size)
    if not all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(ours, reference, strict=True)):
        raise CheckFailed(f"losses {ours} against {reference} on gloo/cpu")
    return f"epoch losses {', '.join(f'{loss:.5f}' for loss in ours)} equal gloo/cpu's; bytes exact"


RING_TASK = {"sizes": [1, 7, 1001], "chunks": [1, 3]}  # one element, an odd count, one no k divides


def ring_config(backend: str, device: str) -> dict:
    """The configuration ``check_rings`` launches the exactness task with."""
    return collective_config("verify", backend=backend, device=device, **RING_TASK)


def check_rings(backend: str, device: str, world_size: int) -> str:
    """Our ring broadcast, ring all-reduce and parameter server equal torch.distributed, exactly."""
    results = run_task(
        "verify", world_size, LAUNCH_LIMIT_SECONDS, backend=backend, device=device, **RING_TASK
    )
    checks = [check for result in results for check in result["checks"]]
    failed = [check for check in checks if not check["equal"]]
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(checks)} unequal, first: {failed[0]}")
    return f"{train.counted(len(checks), 'check')} on {train.counted(world_size, 'rank')}, all exactly equal"


SHARDED = ("ddp", "zero1", "fsdp")  # DDP is the reference the sharded strategies are held against


def sharding_settings(backend: str, device: str, world_size: int, strategy: str) -> dict:
    """A tiny sharded LinearNet run: 4 samples per rank, 3 steps (the first warms up)."""
    batch = SAMPLES_PER_RANK * world_size
    return sharding_config(
        backend=backend, device=device, model="LinearNet", strategy=strategy, train_samples=4 * batch,
        global_batch_size=batch, steps=3, timeout_seconds=60,
    )  # fmt: skip


def check_sharded(backend: str, device: str, world_size: int) -> str:
    """ZeroRedundancyOptimizer and fully_shard on ``backend``: every rank holds and sends exactly the bytes
    chapter 6's arithmetic says, and the losses follow DDP's."""
    settings = sharding_settings(backend, device, world_size, SHARDED[0])
    series = [{"strategy": name} for name in SHARDED]  # one launch: a check, not a timing
    records = run_sharding_series(world_size, series, LAUNCH_LIMIT_SECONDS, **settings)
    held, traffic = sharding_memory_check(records), traffic_check(records)
    if not held["as computed"].all():
        first = held[~held["as computed"]].iloc[0]
        raise CheckFailed(f"{first['strategy']} rank {first['rank']} holds other bytes than computed")
    if not traffic["as expected"].all():
        first = traffic[~traffic["as expected"]].iloc[0]
        raise CheckFailed(f"{first['strategy']} {first['operation']}: other calls or bytes than computed")
    gap = float(sharding_loss_parity(records)["largest loss difference"].max())
    if gap > 1e-4:
        raise CheckFailed(f"losses differ from DDP's by up to {gap:.1e}")
    strategies = ", ".join(SHARDED[1:])
    return f"{strategies}: bytes held and sent exact on {world_size} ranks; losses within {gap:.1e} of DDP's"


def check_nccl_refuses_sharing(gpus: int) -> str:
    """More NCCL ranks than GPUs are refused before any process starts, with the reason."""
    try:
        check_request("nccl", "cuda", gpus + 1)
    except ValueError as error:
        return str(error).split("(")[0].strip()
    raise CheckFailed(f"{gpus + 1} NCCL ranks on {gpus} GPU(s) were not refused")


def check_topology(gpus: int) -> str:
    """``nvidia-smi topo -m`` parses, and its matrix, cut to the GPUs torch sees, names as many as torch."""
    text = hardware.fingerprint()["gpu_topology"]
    if not text:
        raise CheckFailed("nvidia-smi topo -m printed nothing")
    try:
        pairs = topology.visible_topology(text)  # the GPUs torch sees (CUDA_VISIBLE_DEVICES), torch's numbers
    except ValueError as error:
        raise CheckFailed(str(error)) from None
    named = pairs["gpu_b"].max() + 1 if len(pairs) else 1
    if named != gpus:
        raise CheckFailed(f"the matrix names {named} GPU(s) that torch sees, torch sees {gpus}")
    return topology.describe_topology(pairs)


def check_peer_copy(gpus: int) -> str:
    """GPU 0 to GPU 1: peer access and the copy speed chapter 5's DataParallel prediction uses."""
    access = {(row["from"], row["to"]): row["peer_access"] for row in hardware.peer_access()}
    copy = dataparallel.copy_seconds_per_byte(megabytes=64, repeats=5, device="cuda:0", to="cuda:1")
    return f"peer access {access[(0, 1)]}; {copy['bytes'] / copy['seconds'] / 1e9:.1f} GB/s GPU 0 → GPU 1"


def planned_checks(gpus: int, device: str = "cuda", machine: Machine | None = None) -> list[Check]:
    """Every path to check on a machine with ``gpus`` GPUs (on the CPU with ``device`` "cpu", for tests).

    NCCL runs 1..N ranks, one per GPU; Gloo with CUDA tensors runs 2 and N+1 ranks, so that ranks share
    GPUs; DataParallel runs on 1..N replicas (two sharing the CPU there); the sharded strategies run on
    two NCCL ranks (Gloo ranks on the CPU). Each check lists the launches it makes, so that ``--plan``
    can validate them on a described ``machine`` without starting one; a check this machine cannot run
    carries the launcher's reason as its ``skip``.
    """
    first = f"{device}:0" if device == "cuda" else "cpu"
    checks = []

    def add(path: str, compared: str, function, *arguments, launches=(), optional=False, window=None) -> None:
        refusal = next(filter(None, (request.refusal(machine) for request in launches)), None)
        run = functools.partial(function, *arguments)
        checks.append(Check(path, compared, run, tuple(launches), refusal, optional, window))

    def ddp_launches(backend: str, k: int) -> list[Request]:
        ours = Request("helpers.ddp", k, ddp_settings(backend, device, k))
        reference = Request("helpers.ddp", k, ddp_settings("gloo", "cpu", k))
        return [ours] if (backend, device) == ("gloo", "cpu") else [ours, reference]

    timing = TIMING_BATCHES if device == "cuda" else CPU_TIMING_BATCHES  # the CPU's plan is the tests'
    profiled = PROFILE_BATCH if device == "cuda" else CPU_PROFILE_BATCH
    bf16_batch = BF16_BATCH if device == "cuda" else CPU_BF16_BATCH
    for name in models.MODELS:
        add(f"training step, {name}", "parameters after one SGD step against the CPU's",
            check_training_step, name, first, timing)  # fmt: skip
        add(f"bf16 autocast, {name}", "loss against float32", check_bf16, name, first, bf16_batch)
        add(f"profiler trace, {name}", "device time recorded", check_profiler, name, first, profiled)
        if device == "cuda":
            add(f"memory, {name}", "bytes per sample held after forward against chapter 1's count",
                check_memory, name, first, window=memory_window(name)[1:])  # fmt: skip
    for replicas in range(1, max(gpus, 1) + 1):
        devices = [f"cuda:{r}" for r in range(replicas)] if device == "cuda" else ["cpu"] * max(replicas, 2)
        add(f"DataParallel, {train.counted(len(devices), 'replica')}",
            "parameters against one device and torch's", check_dataparallel, "ConvNet", devices)  # fmt: skip
    nccl = list(range(1, gpus + 1)) if device == "cuda" else []
    gloo = sorted({2, max(gpus + 1, 2)})
    ddp_compared = "epoch losses against gloo/cpu; bytes per step"
    for k in nccl:
        add(f"DDP nccl, {train.counted(k, 'rank')}", ddp_compared, check_ddp, "nccl", device, k,
            launches=ddp_launches("nccl", k))  # fmt: skip
    for k in gloo:
        add(f"DDP gloo on {device}, {k} ranks", ddp_compared, check_ddp, "gloo", device, k,
            launches=ddp_launches("gloo", k))  # fmt: skip
    rings = [("nccl", k) for k in nccl if k > 1] + [("gloo", k) for k in gloo]
    for backend, k in rings:
        where = "nccl" if backend == "nccl" else f"gloo on {device}"
        ring = Request(WORKER, k, ring_config(backend, device))
        add(f"ring collectives, {where}, {k} ranks", "against torch.distributed, exactly",
            check_rings, backend, device, k, launches=[ring])  # fmt: skip
    sharded = ("nccl", "cuda") if device == "cuda" else ("gloo", "cpu")
    strategies = [Request(SHARDING_WORKER, 2, sharding_settings(*sharded, 2, name)) for name in SHARDED]
    add(f"sharded training, {sharded[0]} on {sharded[1]}, 2 ranks",
        "bytes held and sent against chapter 6's arithmetic; losses against DDP's",
        check_sharded, *sharded, 2, optional=True, launches=strategies)  # fmt: skip
    if device == "cuda":
        add("NCCL, more ranks than GPUs", "refused before starting", check_nccl_refuses_sharing, gpus)
        add("nvidia-smi topo -m", "GPUs in the matrix against torch's count", check_topology, gpus)
        if gpus >= 2:
            add("peer copy GPU 0 → 1", "runs; bandwidth", check_peer_copy, gpus)
    return checks


def run_checks(checks: list[Check], progress: bool = True) -> pd.DataFrame:
    """Run every check, catching its failure; one row each: path, compared, result, seconds."""
    rows = []
    for number, check in enumerate(checks, 1):
        if progress:
            print(f"[{number}/{len(checks)}] {check.path}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        result, measured = check.outcome()
        rows.append({"path": check.path, "compared": check.compared, "result": result,
                     "seconds": round(time.perf_counter() - started, 2), "measured": measured})  # fmt: skip
    return pd.DataFrame(rows, columns=["path", "compared", "result", "seconds", "measured"])


def describe_request(request: Request) -> str:
    """One launch in words: "2 × helpers.ddp, nccl on cuda, global batch 8 (4 per rank)"."""
    config = request.config
    text = f"{request.world_size} × {request.module}, {config['backend']} on {config['device']}"
    if "global_batch_size" in config:
        batch = config["global_batch_size"]
        text += f", global batch {batch} ({batch // request.world_size} per rank)"
    return text


def plan_table(machine: hardware.Machine) -> pd.DataFrame:
    """Every check ``main`` would run on ``machine``, without running one: its launches, the bounds its
    measurement must fall in, and "runs", "skip: …" or "refused: …" with the launcher's reason."""
    rows = []
    for check in planned_checks(machine.gpus, "cuda" if machine.gpus else "cpu", machine):
        status = ("skip: " if check.optional else "refused: ") + check.refusal if check.refusal else "runs"
        window = f"{check.window[0]:,}–{check.window[1]:,}" if check.window else ""
        rows.append({"path": check.path,
                     "launches": "; ".join(dict.fromkeys(map(describe_request, check.launches))),
                     "pass window (B per sample)": window,
                     "status": status})  # fmt: skip
    return pd.DataFrame(rows)


def default_output(info: dict) -> Path:
    """``data/results/gpu-check/<GPU name>-<machine id>.json``: the check's record, named by the hardware."""
    gpu = info["gpus"][0]["name"] if info["gpus"] else "cpu"
    slug = "".join(c if c.isalnum() else "-" for c in gpu).strip("-").lower()
    return results_dir() / "gpu-check" / f"{slug}-{short_hash(info)}.json"


def print_table(table: pd.DataFrame) -> None:
    with pd.option_context("display.max_colwidth", 140, "display.width", 250):
        print(table.to_string(index=False))


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.gpu_check [--output FILE]``: check every GPU path; exit 1 if any fails.
    ``--plan`` lists the checks and validates their launches (on a described machine with ``--gpus N
    --gpu-name NAME``) and starts nothing."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--output", type=Path, help="where to write the table as JSON (default: by hardware)")
    parser.add_argument("--plan", action="store_true", help="list and validate the checks; run nothing")
    hardware.add_machine_arguments(parser)
    args = parser.parse_args(argv)
    if args.plan:
        try:
            machine = hardware.machine_from_arguments(args)
        except (ValueError, OSError) as error:
            parser.error(str(error))
        table = plan_table(machine)
        print(f"gpu-check plan on {machine.describe()}")
        print_table(table)
        refused = int(table["status"].str.startswith("refused").sum())
        skipped = int(table["status"].str.startswith("skip").sum())
        print(f"{len(table)} checks: {refused} refused, {skipped} skipped")
        return 1 if refused else 0
    problem = hardware.cuda_problem()
    if problem:
        print(f"gpu-check: {problem}", file=sys.stderr)
        return 1
    gpus = visible_gpus()
    if gpus == 0:
        print("gpu-check: no CUDA device is visible on this machine; nothing to check (exit 0).")
        return 0
    set_tf32(False)
    info = hardware.fingerprint()
    print(f"gpu-check on {hardware.describe(info)}", flush=True)
    load_fsdd()  # the DDP checks' ranks read the decoded recordings (downloaded and checked if missing)
    started = time.perf_counter()
    table = run_checks(planned_checks(gpus))
    seconds = time.perf_counter() - started
    print_table(table.drop(columns="measured"))
    failed = int(table["result"].str.startswith("FAIL").sum())
    skipped = int(table["result"].str.startswith("skip").sum())
    print(f"{len(table) - failed - skipped} passed, {failed} failed, {skipped} skipped in {seconds:.0f} s")
    output = args.output or default_output(info)
    write_json_atomically(output, {"hardware": info, "seconds": seconds, "checks": table.to_dict("records")})
    print(f"written to {output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
