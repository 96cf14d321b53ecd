"""What each device holds (chapter 6): parameters, gradients, Adam's state and activations, under DDP and
the three stages of ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020), exactly.

Float32 training with Adam keeps per parameter 4 bytes of weight, 4 of gradient and 8 of state (two
moments), and one 4-byte step counter per parameter tensor; plain SGD keeps no state. Over k devices:

- stage 0 (DDP): everything everywhere;
- stage 1 (``ZeroRedundancyOptimizer``): each device keeps Adam's state for the whole parameter tensors
  it owns, assigned largest first to the least loaded device;
- stage 2: gradients sharded too (each device keeps the reduced gradient of its shard);
- stage 3 (FSDP's ``fully_shard``): weights sharded too; each tensor is cut along its first dimension as
  ``torch.chunk`` cuts it, and a layer's full weights exist only while it computes.
"""

from __future__ import annotations

import functools
import math

import pandas as pd
from torch import nn

from helpers.models import build_model, saved_bytes_per_sample

FLOAT = 4
STATE_PER_PARAMETER = 2 * FLOAT  # exp_avg and exp_avg_sq
STEP_BYTES = 4  # Adam's step counter: one float32 scalar per parameter tensor
STAGES = (0, 1, 2, 3)
OPTIMIZER_STATE = {"adam": (STATE_PER_PARAMETER, STEP_BYTES), "sgd": (0, 0)}  # per parameter, per tensor


def as_module(model: str | nn.Module) -> nn.Module:
    """One of the book's models by name, or any model given as a module (``helpers.advise``)."""
    return build_model(model) if isinstance(model, str) else model


def check_stage(stage) -> int:
    """``stage`` if it is a ZeRO stage 0–3; ValueError naming it otherwise."""
    if stage not in STAGES:
        raise ValueError(f"ZeRO stage must be one of {STAGES}, not {stage!r}")
    return stage


@functools.cache
def parameter_shapes(model: str | nn.Module) -> tuple[tuple[int, ...], ...]:
    """The shape of every trainable parameter tensor, in ``named_parameters`` order."""
    return tuple(tuple(p.shape) for p in as_module(model).parameters() if p.requires_grad)


def numel(shape) -> int:
    return math.prod(shape)


def chunk_rows(rows: int, parts: int) -> list[int]:
    """Rows of each of ``parts`` pieces as ``torch.chunk`` cuts ``rows``: ⌈rows/parts⌉ each, the last
    ones shorter or empty."""
    size = -(-rows // parts)
    return [max(0, min(size, rows - size * index)) for index in range(parts)]


def fsdp_shard_numel(shape, world_size: int) -> list[int]:
    """Elements of each rank's shard of one tensor cut along its first dimension."""
    row = numel(shape[1:])
    return [rows * row for rows in chunk_rows(shape[0], world_size)]


def zero_partition(sizes: list[int], world_size: int) -> list[list[int]]:
    """Which tensors (by index) each rank owns: largest first, each to the rank with the fewest elements
    so far, as ``ZeroRedundancyOptimizer`` partitions (ties go to the lowest rank)."""
    owned, loads = [[] for _ in range(world_size)], [0] * world_size
    for index in sorted(range(len(sizes)), key=lambda i: sizes[i], reverse=True):
        rank = loads.index(min(loads))
        owned[rank].append(index)
        loads[rank] += sizes[index]
    return owned


def per_rank_bytes(
    model: str | nn.Module, stage: int, world_size: int, optimizer: str = "adam"
) -> list[dict]:
    """Each rank's parameter, gradient and optimizer bytes, exactly: weights as held between forward and
    backward (a step's peak: stage 2 holds them whole there; stage 3 only its shards, the one layer it
    gathers at a time not counted), gradients and the optimizer's state (Adam's, or none for SGD) as held
    after the update.
    """
    check_stage(stage)
    state, step = OPTIMIZER_STATE[optimizer]
    shapes = parameter_shapes(model)
    sizes = [numel(shape) for shape in shapes]
    total = sum(sizes)
    rows = []
    for rank in range(world_size):
        if stage == 0:
            parameters = gradients = total
            optimizer = total * state + len(sizes) * step
            parameters, gradients = parameters * FLOAT, gradients * FLOAT
        elif stage == 1:
            owned = zero_partition(sizes, world_size)[rank]
            parameters = gradients = total * FLOAT
            optimizer = sum(sizes[i] for i in owned) * state + len(owned) * step
        else:
            local = [fsdp_shard_numel(shape, world_size)[rank] for shape in shapes]
            sharded = sum(local) * FLOAT
            parameters = total * FLOAT if stage == 2 else sharded
            gradients = sharded
            optimizer = sum(local) * state + len(shapes) * step
        rows.append({"rank": rank, "parameters": parameters, "gradients": gradients, "optimizer": optimizer})
    return rows


def bytes_per_parameter(stage: int, world_size: int) -> dict:
    """The ZeRO paper's bytes per parameter per device (float32, Adam; step counters left out)."""
    check_stage(stage)
    k = world_size
    parameters = FLOAT / k if stage == 3 else FLOAT
    gradients = FLOAT / k if stage >= 2 else FLOAT
    optimizer = STATE_PER_PARAMETER / k if stage >= 1 else STATE_PER_PARAMETER
    return {"parameters": parameters, "gradients": gradients, "optimizer": optimizer,
            "total": parameters + gradients + optimizer}  # fmt: skip


def device_table(models, world_size: int, batch_per_device: int) -> pd.DataFrame:
    """Bytes on the busiest device per model and stage: weights, gradients, Adam, activations of
    ``batch_per_device`` samples (what autograd saves, chapter 1) and their total."""
    rows = []
    for name in models:
        activations = saved_bytes_per_sample(build_model(name))[0] * batch_per_device
        for stage in STAGES:
            busiest = max(per_rank_bytes(name, stage, world_size), key=lambda r: sum(list(r.values())[1:]))
            state = {key: busiest[key] for key in ("parameters", "gradients", "optimizer")}
            rows.append({"model": name, "stage": stage, **state, "activations": activations,
                         "total": sum(state.values()) + activations})  # fmt: skip
    return pd.DataFrame(rows)


def layer_parameters(model: str | nn.Module) -> list[int]:
    """Parameters of each module that holds any itself: each is one ``fully_shard`` unit, gathered whole to
    compute (the book's models are flat ``Sequential``s of layers)."""
    return [
        sum(p.numel() for p in layer.parameters(recurse=False))
        for layer in as_module(model).modules()
        if any(True for _ in layer.parameters(recurse=False))
    ]


def stage3_peak(model_name: str, world_size: int, batch_per_device: int) -> dict:
    """Stage 3's peak on the busiest device against DDP's, by the same arithmetic as ``device_table``.

    Between forward and backward a stage-3 rank holds its shards; while its largest layer computes its
    gradient and reduce-scatters it, it also holds that layer's whole weights (gathered) and whole
    gradient (until the reduce-scatter): 2 × 4 bytes per parameter of that layer. Activations of
    ``batch_per_device`` samples are counted on both sides. ``fraction`` is the peak over DDP's total.
    """
    table = device_table([model_name], world_size, batch_per_device).set_index("stage")
    ddp, counted = int(table.loc[0, "total"]), int(table.loc[3, "total"])
    gathered = 2 * FLOAT * max(layer_parameters(model_name))
    return {"ddp": ddp, "stage3_counted": counted, "gathered_layer": gathered,
            "stage3_peak": counted + gathered, "fraction": (counted + gathered) / ddp}  # fmt: skip


def largest_batch(
    model: str | nn.Module,
    stage: int,
    world_size: int,
    memory_bytes: int,
    *,
    per_sample: int | None = None,
    optimizer: str = "adam",
) -> int:
    """The largest per-device batch whose activations fit beside the busiest device's state (0: none):
    ``per_sample`` bytes each (by default what autograd saves per FSDD clip, chapter 1)."""
    busiest = per_rank_bytes(model, stage, world_size, optimizer)
    state = max(sum(list(row.values())[1:]) for row in busiest)
    per_sample = per_sample or saved_bytes_per_sample(as_module(model))[0]
    return max(0, (memory_bytes - state) // per_sample)


def linear_net_parameters(width: int) -> int:
    """LinearNet's parameters with ``width`` hidden units in its first layer (1,000 in the book's)."""
    return 12_000 * width + width + width * 100 + 100 + 100 * 10 + 10 + 10 * 10 + 10


def widest_linear_net(stage: int, world_size: int, memory_bytes: int, batch: int = 0) -> int:
    """The largest first-layer width of LinearNet whose training state fits ``memory_bytes`` per device
    (ZeRO's bytes per parameter; activations of ``batch`` samples, 4 bytes per hidden unit, kept twice)."""
    per_parameter = bytes_per_parameter(stage, world_size)["total"]
    width = 0
    low, high = 0, 10**9
    while low < high:  # the largest width that fits: a binary search over an increasing function
        middle = (low + high + 1) // 2
        needed = linear_net_parameters(middle) * per_parameter + batch * 2 * FLOAT * (middle + 12_000)
        low, high = (middle, high) if needed <= memory_bytes else (low, middle - 1)
        width = low
    return width


def fit_table(models, gpu_memory: dict[str, int], world_size: int) -> pd.DataFrame:
    """Per model, GPU and stage: the largest per-device batch that fits (``largest_batch``), and the
    widest LinearNet whose training state fits with a batch of one (``widest_linear_net``)."""
    rows = []
    for gpu, memory_bytes in gpu_memory.items():
        for stage in STAGES:
            row = {"gpu": gpu, "stage": stage}
            for name in models:
                row[f"{name}: largest batch"] = largest_batch(name, stage, world_size, memory_bytes)
            row["widest LinearNet"] = widest_linear_net(stage, world_size, memory_bytes, batch=1)
            rows.append(row)
    return pd.DataFrame(rows)


def device_view(table: pd.DataFrame) -> pd.DataFrame:
    """``device_table`` as the chapter shows it: MiB, one decimal, one row per model and stage."""
    view = table.set_index(["model", "stage"]) / 2**20
    view.index.names = ["model", "ZeRO stage"]
    names = {"parameters": "weights", "optimizer": "Adam state"}
    return view.rename(columns=lambda c: f"{names.get(c, c)} (MiB)").round(1)


def fit_view(table: pd.DataFrame) -> pd.DataFrame:
    """``fit_table`` as the chapter shows it: per GPU and stage, human columns."""
    names = {"gpu": "GPU", "stage": "ZeRO stage", "widest LinearNet": "widest LinearNet (first-layer units)"}
    view = table.rename(columns=lambda c: names.get(c, c.replace(": largest batch", ", largest batch")))
    view = view.set_index(["GPU", "ZeRO stage"])
    return view.apply(lambda column: column.map("{:,}".format))
