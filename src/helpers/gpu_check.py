"""The renter's one-minute check: every GPU path of the study, at a tiny size (``make gpu-check``).

``python -m helpers.gpu_check`` on a machine with N ≥ 1 GPUs runs each path once — CUDA training steps
timed with CUDA events, bf16 autocast, the profiler's CUDA trace, peak memory against chapter 1's
arithmetic, DataParallel from primitives against one device and against ``torch.nn.DataParallel``, DDP
with NCCL (one rank per GPU) and with Gloo on CUDA tensors (ranks sharing GPUs), our ring collectives on
NCCL and on Gloo with CUDA tensors, the topology matrix — and prints one table: path, what was
compared, result, seconds. It exits 1 if any path fails, so that a broken machine costs a minute of
rent instead of a failed hour. Without a GPU it says so and exits 0, running nothing.

Every check takes its device as an argument, so the CPU can run the same code (the tests do).
"""

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

from helpers import dataparallel, hardware, models, profiling, train
from helpers.collectives.runs import run_task
from helpers.data import load_fsdd
from helpers.ddp import ddp_config
from helpers.launch import check_request, launch
from helpers.paths import results_dir
from helpers.results import short_hash, write_json_atomically
from helpers.worker import visible_gpus

TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}  # float32 sums in another order, TF32 switched off
LAUNCH_LIMIT_SECONDS = 120


class CheckFailed(AssertionError):
    """A path that ran but did not give what it was compared with."""


@dataclass(frozen=True)
class Check:
    """One GPU path: what it is, what it is compared with, and the function that returns the outcome."""

    path: str
    compared: str
    run: Callable[[], str]


def synthetic(samples: int = 16, seed: int = 0) -> TensorDataset:
    """Random waveforms and labels of the study's shape: the single-device checks need no recordings."""
    generator = torch.Generator().manual_seed(seed)
    return TensorDataset(
        torch.randn(samples, 1, 12_000, generator=generator) * 0.1,
        torch.randint(0, 10, (samples,), generator=generator),
    )


def no_tf32() -> None:
    """Full float32 matmuls and convolutions, so that GPU and CPU results compare at float32 tolerance."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def assert_equal_parameters(ours: list[torch.Tensor], reference: list[torch.Tensor], what: str) -> float:
    """The largest absolute difference; CheckFailed naming ``what`` when a parameter differs."""
    for mine, theirs in zip(ours, reference, strict=True):
        try:
            torch.testing.assert_close(mine, theirs, **TOLERANCE)
        except AssertionError as error:
            raise CheckFailed(f"{what}: {str(error).splitlines()[0]}") from None
    return max(float((mine - theirs).abs().max()) for mine, theirs in zip(ours, reference, strict=True))


def check_training_step(model_name: str, device: str) -> str:
    """One SGD step on ``device`` equals the CPU's; the step time is measured (CUDA events on a GPU)."""
    data = synthetic()
    inputs, targets = data.tensors
    on_device = dataparallel.parameters_after_one_step(model_name, inputs, targets, device=device)
    on_cpu = dataparallel.parameters_after_one_step(model_name, inputs, targets, device="cpu")
    gap = assert_equal_parameters(on_device, on_cpu, f"{device} against cpu")
    timing = train.time_training_steps(model_name, data, batch_size=8, timed_steps=3, device=device)
    return f"max |Δ| {gap:.1e}; median step {timing['step_seconds'] * 1e3:.2f} ms ({timing['method']})"


def check_bf16(model_name: str, device: str) -> str:
    """A bf16-autocast training step runs and its loss is within 5 % of float32's."""
    inputs, targets = (t.to(device) for t in synthetic().tensors)
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


def check_profiler(model_name: str, device: str) -> str:
    """torch.profiler sees the step's work on the device's clock (kernels on a GPU)."""
    result = profiling.profile_training_step(model_name, synthetic(), batch_size=8, device=device)
    seconds = result["device_seconds"] if device != "cpu" else result["host_seconds"]
    if not seconds or seconds <= 0:
        raise CheckFailed(f"no time on the device's clock: {result['device_seconds']!r}")
    return (
        f"{seconds * 1e3:.2f} ms on the {'device' if device != 'cpu' else 'host'} clock; "
        + (profiling.host_device_verdict(result).split(":")[0])
    )


def peak_bytes_per_sample(model_name: str, device: str, batches: tuple[int, int] = (8, 24)) -> int:
    """Growth of the CUDA allocator's peak over one training step, per added sample."""
    peaks = []
    for batch in batches:
        inputs, targets = (t.to(device) for t in synthetic(batch).tensors)
        torch.manual_seed(0)
        model = models.build_model(model_name).to(device)
        optimizer = train.make_optimizer("sgd", model.parameters(), 0.1)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        train.training_step(model, optimizer, inputs, targets, nn.functional.cross_entropy)
        torch.cuda.synchronize(device)
        peaks.append(torch.cuda.max_memory_allocated(device))
        del model, optimizer, inputs, targets
    return (peaks[1] - peaks[0]) // (batches[1] - batches[0])


def check_peak_memory(model_name: str, device: str) -> str:
    """Peak memory per sample lies between what autograd saves for backward (measured on the CPU,
    chapter 1) and the seed's accounting of every layer's output, forward and backward."""
    model = models.build_model(model_name)
    saved, _ = models.saved_bytes_per_sample(model)
    counted = models.activation_bytes_per_sample(model)
    measured = peak_bytes_per_sample(model_name, device)
    if not 0.9 * saved <= measured <= 1.1 * counted:
        raise CheckFailed(f"{measured:,} B per sample outside [{saved:,}, {counted:,}]")
    return f"{measured:,} B per sample; saved for backward {saved:,} B, seed's count {counted:,} B"


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


def ddp_losses(backend: str, device: str, world_size: int) -> list[float]:
    """Per-epoch training losses of a tiny LinearNet DDP run (real recordings, 32 clips, 2 epochs)."""
    config = ddp_config(
        backend=backend, device=device, model="LinearNet", train_samples=32, test_samples=8,
        global_batch_size=8, epochs=2, optimizer="sgd", lr=0.05, timeout_seconds=60,
    )  # fmt: skip
    results = launch(config, world_size, time_limit_seconds=LAUNCH_LIMIT_SECONDS)
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


def check_rings(backend: str, device: str, world_size: int) -> str:
    """Our ring broadcast, ring all-reduce and parameter server equal torch.distributed, exactly."""
    results = run_task(
        "verify", world_size, time_limit_seconds=LAUNCH_LIMIT_SECONDS, backend=backend, device=device,
        sizes=[1, 7, 1001], chunks=[1, 3],
    )  # fmt: skip
    checks = [check for result in results for check in result["checks"]]
    failed = [check for check in checks if not check["equal"]]
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(checks)} unequal, first: {failed[0]}")
    return f"{len(checks)} checks on {world_size} rank(s), all exactly equal"


def check_nccl_refuses_sharing(gpus: int) -> str:
    """More NCCL ranks than GPUs are refused before any process starts, with the reason."""
    try:
        check_request("nccl", "cuda", gpus + 1)
    except ValueError as error:
        return str(error).split("(")[0].strip()
    raise CheckFailed(f"{gpus + 1} NCCL ranks on {gpus} GPU(s) were not refused")


def check_topology(gpus: int) -> str:
    """``nvidia-smi topo -m`` parses, and its matrix names every GPU torch sees."""
    text = hardware.fingerprint()["gpu_topology"]
    if not text:
        raise CheckFailed("nvidia-smi topo -m printed nothing")
    pairs = hardware.parse_topology(text)
    named = pairs["gpu_b"].max() + 1 if len(pairs) else 1
    if named != gpus:
        raise CheckFailed(f"the matrix names {named} GPU(s), torch sees {gpus}")
    return hardware.describe_topology(pairs)


def check_peer_copy(gpus: int) -> str:
    """GPU 0 to GPU 1: peer access and the copy speed chapter 5's DataParallel prediction uses."""
    access = {(row["from"], row["to"]): row["peer_access"] for row in hardware.peer_access()}
    copy = dataparallel.copy_seconds_per_byte(megabytes=64, repeats=5, device="cuda:0", to="cuda:1")
    return f"peer access {access[(0, 1)]}; {copy['bytes'] / copy['seconds'] / 1e9:.1f} GB/s GPU 0 → GPU 1"


def planned_checks(gpus: int, device: str = "cuda") -> list[Check]:
    """Every path to check on a machine with ``gpus`` GPUs (on the CPU with ``device`` "cpu", for tests).

    NCCL runs 1..N ranks, one per GPU; Gloo with CUDA tensors runs 2 and N+1 ranks, so that ranks share
    GPUs; DataParallel runs on 1..N replicas (two sharing the CPU there).
    """
    first = f"{device}:0" if device == "cuda" else "cpu"
    checks = []

    def add(path: str, compared: str, function, *arguments) -> None:
        checks.append(Check(path, compared, functools.partial(function, *arguments)))

    for name in models.MODELS:
        add(f"training step, {name}", "parameters after one SGD step against the CPU's",
            check_training_step, name, first)  # fmt: skip
        add(f"bf16 autocast, {name}", "loss against float32", check_bf16, name, first)
        add(f"profiler trace, {name}", "device time recorded", check_profiler, name, first)
        if device == "cuda":
            add(f"peak memory, {name}", "bytes per sample against chapter 1's arithmetic",
                check_peak_memory, name, first)  # fmt: skip
    for replicas in range(1, max(gpus, 1) + 1):
        devices = [f"cuda:{r}" for r in range(replicas)] if device == "cuda" else ["cpu"] * max(replicas, 2)
        add(f"DataParallel, {len(devices)} replica(s)", "parameters against one device and torch's",
            check_dataparallel, "ConvNet", devices)  # fmt: skip
    nccl = list(range(1, gpus + 1)) if device == "cuda" else []
    gloo = sorted({2, max(gpus + 1, 2)})
    ddp_compared = "epoch losses against gloo/cpu; bytes per step"
    for k in nccl:
        add(f"DDP nccl, {k} rank(s)", ddp_compared, check_ddp, "nccl", device, k)
    for k in gloo:
        add(f"DDP gloo on {device}, {k} ranks", ddp_compared, check_ddp, "gloo", device, k)
    for k in [k for k in nccl if k > 1]:
        add(f"ring collectives, nccl, {k} ranks", "against torch.distributed, exactly",
            check_rings, "nccl", device, k)  # fmt: skip
    for k in gloo:
        add(f"ring collectives, gloo on {device}, {k} ranks", "against torch.distributed, exactly",
            check_rings, "gloo", device, k)  # fmt: skip
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
        try:
            result = f"pass: {check.run()}"
        except Exception as error:  # every failure becomes a row, and the next check still runs
            result = (
                f"FAIL: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
            )
        rows.append({"path": check.path, "compared": check.compared, "result": result,
                     "seconds": round(time.perf_counter() - started, 2)})  # fmt: skip
    return pd.DataFrame(rows, columns=["path", "compared", "result", "seconds"])


def default_output(info: dict) -> Path:
    """``data/results/gpu-check/<GPU name>-<machine id>.json``: the check's record, named by the hardware."""
    gpu = info["gpus"][0]["name"] if info["gpus"] else "cpu"
    slug = "".join(c if c.isalnum() else "-" for c in gpu).strip("-").lower()
    return results_dir() / "gpu-check" / f"{slug}-{short_hash(info)}.json"


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.gpu_check [--output FILE]``: check every GPU path; exit 1 if any fails."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--output", type=Path, help="where to write the table as JSON (default: by hardware)")
    args = parser.parse_args(argv)
    gpus = visible_gpus()
    if gpus == 0:
        print("gpu-check: no CUDA device is visible on this machine; nothing to check (exit 0).")
        return 0
    no_tf32()
    info = hardware.fingerprint()
    print(f"gpu-check on {hardware.describe(info)}", flush=True)
    load_fsdd()  # the DDP checks' ranks read the decoded recordings (downloaded and checked if missing)
    started = time.perf_counter()
    table = run_checks(planned_checks(gpus))
    seconds = time.perf_counter() - started
    with pd.option_context("display.max_colwidth", 120, "display.width", 250):
        print(table.to_string(index=False))
    failed = int(table["result"].str.startswith("FAIL").sum())
    print(f"{len(table) - failed} passed, {failed} failed in {seconds:.0f} s")
    output = args.output or default_output(info)
    write_json_atomically(output, {"hardware": info, "seconds": seconds, "checks": table.to_dict("records")})
    print(f"written to {output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
