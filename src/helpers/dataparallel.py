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
import pandas as pd
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.data import CLIP_SAMPLES
from helpers.models import build_model, parameter_bytes
from helpers.stats import describe_speedup, speedup
from helpers.train import (
    WARMUP_STEPS,
    Timer,
    check_positive,
    make_optimizer,
    milliseconds,
    pick_device,
    step_batches,
    stored_step_timing,
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


SHARED_DEVICE_NOTE = (
    "**The replicas share one device on this machine**, so these timings measure what DataParallel's "
    "mechanics *cost* — the copies, the threads, the extra kernel launches — not a speed-up: every replica "
    "computes on the same cores (or the same GPU). A machine with one GPU per replica runs the same "
    "notebook and shows the speed-up, if there is one (`gpu` profile)."
)


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


def balance_batch(model_name: str, replicas: int, sample_bytes: int = SAMPLE_BYTES) -> float:
    """The batch above which an epoch's scattered inputs outweigh its parameters and gradients.

    Per epoch of N clips the inputs that leave device 0 are N(k−1)/k samples; the parameters (P floats)
    go to, and their gradients come back from, k−1 replicas in each of N/B steps: 2(k−1)·4P·N/B bytes.
    They are equal at B = 8Pk / sample bytes.
    """
    return 2 * parameter_bytes(build_model(model_name)) * replicas / sample_bytes


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
                replica.zero_grad(set_to_none=False)
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
        f"per epoch, after {warmup_steps} warm-up step(s)",
    }


def explain_replicas(single: dict, multi: dict, shared: bool) -> str:
    """What k replicas did to one step, from the ``time_dataparallel_steps`` results of 1 and k replicas,
    and why: the seed's label (a "network choke" moves data longer than it computes, a "compute choke",
    the seed's "GPU choke", the reverse), the step against one replica (``helpers.stats.speedup``), and
    how the compute itself changed, which the label does not see. ``shared``: the replicas share one
    device, so each runs the whole model on the same cores."""
    ratio = multi["communication_to_compute"]
    kind = "network choke" if ratio >= 1 else "compute choke"
    change = speedup(single["step_seconds_all"], multi["step_seconds_all"])
    compute = multi["compute_seconds"] / single["compute_seconds"]
    moving, computing = multi["transfer_seconds"] * 1e3, multi["compute_seconds"] * 1e3
    text = (
        f"with {multi['replicas']} replicas moving data took {moving:,.0f} ms per step and computing "
        f"{computing:,.0f} ms, {ratio:.2g}× as long: a {kind} by the seed's definition. The step against one "
        f"replica: {describe_speedup(change)}. Computing alone took {compute:.2f}× as long as with one "
        f"replica ({single['compute_seconds'] * 1e3:,.0f} ms)"
    )
    if compute > 1.1 and shared:
        return text + (
            ": every replica runs the whole model on the same cores, its forward reading every weight and "
            "its backward writing a gradient of every weight, so that work is done once per replica "
            "whatever the chunk."
        )
    if compute < 1 / 1.1 and shared:
        return text + ": the replicas' threads kept busy cores that one replica's operators left idle."
    return text + "."


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
    many comparisons gave each verdict) and ``reused`` (whether every chapter-1 record came from the
    store rather than being measured here)."""
    before, rows = len(store.records("step_timing")), []
    for record in (r for r in records if r["result"]["replicas"] == 1):
        name, size, one = record["config"]["model"], record["config"]["batch_size"], record["result"]
        plain = stored_step_timing(store, name, train_set, batch_size=size, optimizer="adam", lr=1e-3,
                                   device=device, **settings)["result"]  # fmt: skip
        change = speedup(plain["step_seconds_all"], one["step_seconds_all"])
        rows.append({"model": name, "batch size": size,
                     "chapter 1's step (ms)": milliseconds(plain["step_seconds_all"], unit=""),
                     "one replica's step (ms)": milliseconds(one["step_seconds_all"], unit=""),
                     "one replica against chapter 1": describe_speedup(change),
                     "verdict": change["verdict"]})  # fmt: skip
    table = pd.DataFrame(rows).set_index(["model", "batch size"])
    return {"table": table.drop(columns="verdict"), "verdicts": table["verdict"].value_counts().to_dict(),
            "reused": len(store.records("step_timing")) == before}  # fmt: skip


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
    """Median seconds and bytes of each phase of ``dataparallel_timing`` records, one row per phase."""
    return pd.DataFrame(
        [
            {"model": record["config"]["model"], "replicas": record["result"]["replicas"],
             "batch_size": record["config"]["batch_size"], "phase": phase, "seconds": seconds,
             "bytes": record["result"]["bytes_per_step"].get(phase, 0),
             "kind": "transfer" if phase in TRANSFER_PHASES else "compute"}
            for record in records
            for phase, seconds in record["result"]["phase_seconds"].items()
        ]
    )  # fmt: skip


def replica_devices(device: str, replicas: int, gpus: int | None = None) -> tuple[list[str], bool]:
    """Devices for ``replicas`` replicas, and whether they share one device.

    Distinct GPUs when at least ``replicas`` may be used (``gpus``, at most the visible ones); otherwise
    every replica on the one device (the CPU, or the first GPU), which shows the mechanics and their
    overheads but cannot speed anything up.
    """
    check_positive(replicas=replicas)
    target = pick_device(device)
    usable = torch.cuda.device_count() if target.type == "cuda" else 0
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
