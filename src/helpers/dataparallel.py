"""``torch.nn.DataParallel`` rebuilt from its primitives, with the bytes each step moves (chapter 2).

One training step of DataParallel over devices ``d0 … d(k-1)`` is eight steps and an update:

1. scatter the mini-batch's inputs in ``k`` chunks (chunk 0 stays on ``d0``);
2. replicate the model: broadcast the parameters from ``d0`` to the other ``k-1`` replicas;
3. forward every replica on its chunk, in threads (as ``torch.nn.parallel.parallel_apply`` does);
4. gather the outputs on ``d0``;
5. compute the loss and its gradient with respect to the gathered outputs on ``d0``;
6. scatter those output gradients back to the replicas;
7. backward every replica, in threads;
8. reduce (sum) the parameter gradients onto ``d0``; then the optimizer updates the parameters there.

The devices may repeat: several replicas on the CPU, or on one GPU, show the mechanics (and their
overheads) where only one device exists. Bytes are counted between replicas, whatever the devices are,
and every transfer between replicas really copies (``copy=True``), also when both sit on one device.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.data import CLIP_SAMPLES
from helpers.hardware import gpu_count
from helpers.models import build_model, parameter_bytes
from helpers.train import (
    WARMUP_STEPS,
    Timer,
    check_positive,
    counted,
    make_optimizer,
    pick_device,
    step_batches,
    time_training_steps,
)

PHASES = (
    "scatter_inputs",
    "broadcast_parameters",
    "forward",
    "gather_outputs",
    "loss",
    "scatter_output_gradients",
    "backward",
    "reduce_gradients",
    "optimizer_step",
)
TRANSFER_PHASES = (
    "scatter_inputs",
    "broadcast_parameters",
    "gather_outputs",
    "scatter_output_gradients",
    "reduce_gradients",
)
COMPUTE_PHASES = ("forward", "loss", "backward", "optimizer_step")
SAMPLE_BYTES = CLIP_SAMPLES * 4  # one float32 waveform
OUTPUT_BYTES = 10 * 4  # ten float32 logits


def parse_devices(devices: list[str]) -> list[torch.device]:
    """Devices of the replicas, ``d0`` first; the same device may appear several times."""
    if not devices:
        raise ValueError("DataParallel needs at least one device")
    return [pick_device(name) for name in devices]


def chunk_sizes(batch_size: int, replicas: int) -> list[int]:
    """How ``Tensor.chunk`` splits a batch: equal chunks of ceil(batch / replicas), the last smaller.

    Fewer chunks than replicas come out when the batch is small (10 over 4 gives 3, 3, 3, 1; 2 over 4
    gives 1, 1): like DataParallel, only that many replicas take part in the step.
    """
    size = -(-batch_size // replicas)
    return [min(size, batch_size - start) for start in range(0, batch_size, size)]


def bytes_per_step(
    model: nn.Module,
    batch_size: int,
    replicas: int,
    sample_bytes: int = SAMPLE_BYTES,
    output_bytes: int = OUTPUT_BYTES,
) -> dict:
    """Bytes each phase moves between replicas in one step (the analytic count).

    Chunk 0 never moves; every other chunk's inputs, outputs and output gradients move once; the
    parameters are broadcast to, and the gradients reduced from, each of the other replicas.
    """
    sizes = chunk_sizes(batch_size, replicas)
    moved_samples = sum(sizes[1:])
    model_bytes = parameter_bytes(model) * (len(sizes) - 1)
    return {
        "scatter_inputs": moved_samples * sample_bytes,
        "broadcast_parameters": model_bytes,
        "gather_outputs": moved_samples * output_bytes,
        "scatter_output_gradients": moved_samples * output_bytes,
        "reduce_gradients": model_bytes,
    }


def bytes_per_epoch(
    model: nn.Module,
    samples: int,
    batch_size: int,
    replicas: int,
    sample_bytes: int = SAMPLE_BYTES,
    output_bytes: int = OUTPUT_BYTES,
) -> dict:
    """``bytes_per_step`` summed over the steps of one epoch (the last batch may be short)."""
    full, rest = divmod(samples, batch_size)
    total = {phase: full * count for phase, count in bytes_per_step(
        model, batch_size, replicas, sample_bytes, output_bytes).items()}  # fmt: skip
    if rest:
        for phase, count in bytes_per_step(model, rest, replicas, sample_bytes, output_bytes).items():
            total[phase] += count
    return total


def balance_batch(model_name: str, replicas: int, sample_bytes: int = SAMPLE_BYTES) -> int:
    """The smallest batch at which an epoch's scattered inputs outweigh its parameters and gradients.

    Per epoch of N clips the inputs that leave device 0 are N(k−1)/k samples; the parameters (P floats)
    go to, and their gradients come back from, k−1 replicas in each of N/B steps: 2(k−1)·4P·N/B bytes.
    They are equal at B = 8Pk / sample bytes, so the inputs weigh more from the next whole batch on.
    """
    return 2 * parameter_bytes(build_model(model_name)) * replicas // sample_bytes + 1


def in_threads(function, argument_lists: list[tuple]) -> list:
    """Run ``function`` on each argument tuple in its own thread; results in order, errors re-raised."""
    if len(argument_lists) == 1:
        return [function(*argument_lists[0])]
    with ThreadPoolExecutor(max_workers=len(argument_lists)) as pool:
        return list(pool.map(lambda arguments: function(*arguments), argument_lists))


@dataclass
class StepReport:
    """What one step did: its loss, the seconds and the bytes of each phase."""

    loss: float
    seconds: dict = field(default_factory=dict)
    bytes: dict = field(default_factory=dict)


class DataParallelTrainer:
    """A master model on ``devices[0]`` and persistent replicas, stepped through the eight phases.

    Replica 0 is the master itself (broadcasting to the device that holds the parameters is free);
    the other replicas are copies whose parameters are overwritten by the broadcast of every step.
    """

    def __init__(
        self, model: nn.Module, devices: list[str], optimizer: str = "adam", lr: float = 1e-3
    ) -> None:
        self.devices = parse_devices(devices)
        self.model = model.to(self.devices[0])
        self.replicas = [self.model] + [copy.deepcopy(model).to(device) for device in self.devices[1:]]
        self.optimizer = make_optimizer(optimizer, self.model.parameters(), lr)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, timed: bool = False) -> StepReport:
        """One DataParallel training step on a mini-batch held on ``devices[0]``."""
        report = StepReport(loss=float("nan"), bytes=dict.fromkeys(TRANSFER_PHASES, 0))
        first = self.devices[0]

        @contextlib.contextmanager
        def phase(name: str):
            """Time a phase on every replica's device: work queued on d1…d(k−1) belongs to it too."""
            if not timed:
                yield
                return
            with Timer(self.devices) as timer:
                yield
            report.seconds[name] = timer.seconds

        def moved(tensors) -> int:
            return sum(t.numel() * t.element_size() for t in tensors)

        self.optimizer.zero_grad(set_to_none=False)
        for replica in self.replicas[1:]:  # zeroing gradients is bookkeeping, timed in no phase
            replica.zero_grad(set_to_none=False)
        with phase("scatter_inputs"):
            pieces = inputs.chunk(len(self.devices))
            chunks = [pieces[0]] + [
                piece.to(device, copy=True)
                for piece, device in zip(pieces[1:], self.devices[1:], strict=False)
            ]
        report.bytes["scatter_inputs"] = moved(chunks[1:])
        replicas = self.replicas[: len(chunks)]
        with phase("broadcast_parameters"), torch.no_grad():
            for replica in replicas[1:]:
                for source, target in zip(self.model.parameters(), replica.parameters(), strict=True):
                    target.copy_(source)
                    report.bytes["broadcast_parameters"] += moved([source])
        with phase("forward"):
            outputs = in_threads(
                lambda replica, chunk: replica(chunk), list(zip(replicas, chunks, strict=True))
            )
        with phase("gather_outputs"):
            gathered = torch.cat(
                [output.detach().to(first, copy=True) for output in outputs]
            ).requires_grad_()
        report.bytes["gather_outputs"] = moved(outputs[1:])
        with phase("loss"):
            loss = nn.functional.cross_entropy(gathered, targets)
            loss.backward()
        with phase("scatter_output_gradients"):
            pieces = gathered.grad.split([len(output) for output in outputs])
            gradients = [pieces[0]] + [
                piece.to(device, copy=True)
                for piece, device in zip(pieces[1:], self.devices[1:], strict=False)
            ]
        report.bytes["scatter_output_gradients"] = moved(gradients[1:])
        with phase("backward"):
            in_threads(
                lambda output, gradient: output.backward(gradient), list(zip(outputs, gradients, strict=True))
            )
        with phase("reduce_gradients"), torch.no_grad():
            for replica in replicas[1:]:
                for master, copied in zip(self.model.parameters(), replica.parameters(), strict=True):
                    master.grad += copied.grad.to(first, copy=True)
                    report.bytes["reduce_gradients"] += moved([copied.grad])
        with phase("optimizer_step"):
            self.optimizer.step()
        report.loss = loss.item()
        return report


def parameters_after_one_step(
    model_name: str,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    replicas: list[str] | None = None,
    device_ids: list[int] | None = None,
    device: str = "cpu",
    lr: float = 0.1,
    seed: int = 0,
) -> list[torch.Tensor]:
    """The seeded model's parameters (copied to the CPU) after one SGD step on one mini-batch, taken by
    ``DataParallelTrainer`` on ``replicas``, by ``torch.nn.DataParallel`` on the GPUs ``device_ids``, or,
    with neither, by plain training on ``device``: what the tests and the GPU check hold equal.

    SGD's update is linear in the gradient, so equal parameters mean equal gradients.
    """
    if replicas and device_ids:
        raise ValueError("give replicas (ours) or device_ids (torch.nn.DataParallel), not both")
    torch.manual_seed(seed)
    model = build_model(model_name)
    if replicas:
        trainer = DataParallelTrainer(model, replicas, optimizer="sgd", lr=lr)
        trainer.step(inputs.to(trainer.devices[0]), targets.to(trainer.devices[0]))
        return [p.detach().cpu() for p in model.parameters()]
    first = pick_device(f"cuda:{device_ids[0]}" if device_ids else device)
    model = model.to(first)
    stepped = nn.DataParallel(model, device_ids=device_ids) if device_ids else model
    optimizer = make_optimizer("sgd", model.parameters(), lr)
    nn.functional.cross_entropy(stepped(inputs.to(first)), targets.to(first)).backward()
    optimizer.step()
    return [p.detach().cpu() for p in model.parameters()]


def time_dataparallel_steps(
    model_name: str,
    train_set: TensorDataset,
    *,
    devices: list[str],
    batch_size: int,
    timed_steps: int = 3,
    warmup_steps: int = WARMUP_STEPS,
    lr: float = 1e-3,
    seed: int = 0,
) -> dict:
    """Median seconds per phase and per step of DataParallel, the bytes moved, and the epoch they imply."""
    check_positive(timed_steps=timed_steps)
    indices = step_batches(len(train_set), batch_size, seed, warmup_steps + timed_steps)
    torch.manual_seed(seed)
    trainer = DataParallelTrainer(build_model(model_name), devices, lr=lr)
    inputs, targets = (t.to(trainer.devices[0]) for t in train_set.tensors)
    reports = []
    for step, index in enumerate(indices):
        index = index.to(trainer.devices[0])
        report = trainer.step(inputs[index], targets[index], timed=True)
        if step >= warmup_steps:
            reports.append(report)
    phase_seconds = {p: statistics.median(r.seconds[p] for r in reports) for p in PHASES}
    step_seconds_all = [sum(r.seconds.values()) for r in reports]
    step_seconds = statistics.median(step_seconds_all)
    steps_per_epoch = -(-len(targets) // batch_size)
    transfer = sum(phase_seconds[p] for p in TRANSFER_PHASES)
    compute = sum(phase_seconds[p] for p in COMPUTE_PHASES)
    return {
        "replicas": len(devices),
        "step_seconds": step_seconds,
        "step_seconds_all": step_seconds_all,
        "epoch_seconds": step_seconds * steps_per_epoch,
        "steps_per_epoch": steps_per_epoch,
        "phase_seconds": phase_seconds,
        "bytes_per_step": reports[0].bytes,
        "transfer_seconds": transfer,
        "compute_seconds": compute,
        "communication_to_compute": transfer / compute,
        "method": f"median of {timed_steps} timed steps (each phase synchronised) x {steps_per_epoch} steps "
        f"per epoch, after {counted(warmup_steps, 'warm-up step')}",
    }


def replica_devices(device: str, replicas: int, gpus: int | None = None) -> tuple[list[str], bool]:
    """Devices for ``replicas`` replicas, and whether they share one device.

    Distinct GPUs when at least ``replicas`` may be used (``gpus``, at most the visible ones); otherwise
    every replica on the one device (the CPU, or the first GPU), which shows the mechanics and their
    overheads but cannot speed anything up.
    """
    check_positive(replicas=replicas)
    target = pick_device(device)
    usable = gpu_count() if target.type == "cuda" else 0
    if gpus is not None:
        usable = min(usable, gpus)
    if target.type == "cuda" and usable >= replicas:
        return [f"cuda:{index}" for index in range(replicas)], False
    return [str(target)] * replicas, replicas > 1


def stored_dataparallel_timing(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """``time_dataparallel_steps`` through the results store."""
    config = {
        "kind": "dataparallel_timing",
        "model": model_name,
        "train_samples": len(train_set),
        "threads": torch.get_num_threads(),
        **settings,
    }
    return store.measure(config, lambda: time_dataparallel_steps(model_name, train_set, **settings))


def time_torch_dataparallel_steps(
    model_name: str,
    train_set: TensorDataset,
    *,
    device_ids: list[int],
    batch_size: int,
    timed_steps: int = 3,
    warmup_steps: int = WARMUP_STEPS,
    lr: float = 1e-3,
    seed: int = 0,
) -> dict:
    """The same step timing for ``torch.nn.DataParallel`` itself, on CUDA devices (it supports no other)."""
    if not torch.cuda.is_available():
        raise ValueError("torch.nn.DataParallel needs CUDA devices, and none is visible")
    timing = time_training_steps(
        model_name, train_set, batch_size=batch_size, timed_steps=timed_steps, warmup_steps=warmup_steps,
        lr=lr, seed=seed, device=f"cuda:{device_ids[0]}",
        wrap=lambda model: nn.DataParallel(model, device_ids=device_ids),
    )  # fmt: skip
    return {"replicas": len(device_ids), **timing}


def copy_seconds_per_byte(
    megabytes: float = 48, repeats: int = 9, device: str = "cpu", to: str | None = None, fresh: bool = True
) -> dict:
    """Seconds per byte of one copy from ``device`` to ``to`` (default: the same device); median of
    ``repeats`` after one warm-up.

    ``fresh``: into a newly allocated buffer, as DataParallel's transfers do
    (``torch.empty(..., device=to).copy_(x)``; on a CPU the first touch of fresh pages costs more than the
    copy); otherwise into one buffer reused every time, the speed of the copy alone. From one GPU to
    another this is the peer-to-peer copy (NVLink or PCIe) that DataParallel's phases use.
    """
    to = to or device
    source = torch.rand(int(megabytes * 2**20) // 4, device=device)
    target = torch.empty_like(source, device=to)
    gpus = [torch.device(d) for d in dict.fromkeys((device, to)) if torch.device(d).type == "cuda"]
    seconds = []
    for _ in range(repeats + 1):
        for gpu in gpus:
            torch.cuda.synchronize(gpu)
        started = time.perf_counter()
        (torch.empty_like(source, device=to) if fresh else target).copy_(source)
        for gpu in gpus:
            torch.cuda.synchronize(gpu)
        seconds.append(time.perf_counter() - started)
    nbytes = source.numel() * 4
    median = float(np.median(seconds[1:]))
    where = f"on {device}" if to == device else f"from {device} to {to}"
    buffer = "a fresh buffer" if fresh else "a reused buffer"
    method = f"median of {repeats} copies of {nbytes:,} B into {buffer} {where}, after 1 warm-up"
    return {"bytes": nbytes, "seconds": median, "seconds_per_byte": median / nbytes, "method": method}


def stored_copy_calibration(
    store, megabytes: float = 48, repeats: int = 9, device: str = "cpu", to: str | None = None,
    fresh: bool = True,
):  # fmt: skip
    """``copy_seconds_per_byte`` through the results store."""
    config = {"kind": "copy_calibration", "megabytes": megabytes, "repeats": repeats, "device": device,
              "to": to or device, "fresh": fresh, "threads": torch.get_num_threads()}  # fmt: skip
    return store.measure(config, lambda: copy_seconds_per_byte(megabytes, repeats, device, to, fresh))


def stored_torch_dataparallel_timing(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """``time_torch_dataparallel_steps`` through the results store."""
    config = {
        "kind": "torch_dataparallel_timing",
        "model": model_name,
        "train_samples": len(train_set),
        **settings,
    }
    return store.measure(config, lambda: time_torch_dataparallel_steps(model_name, train_set, **settings))
