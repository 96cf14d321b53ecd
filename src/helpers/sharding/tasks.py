"""The sharded-training worker (chapter 6), one process per rank, started by torchrun through
``helpers.launch`` (``-m helpers.sharding.tasks --config C --output DIR``).

Each rank trains the same steps as chapter 3's DDP worker (``GlobalBatchSampler``: the global batches one
process would take) under one of four strategies, named by their ZeRO stage:

- ``ddp`` (stage 0): ``DistributedDataParallel``, every gradient all-reduced;
- ``zero1`` (stage 1): DDP with ``ZeroRedundancyOptimizer``: each rank keeps Adam's state of the
  parameters it owns, updates them and broadcasts them to the others;
- ``zero2`` (stage 2): ``fully_shard`` per layer with ``reshard_after_forward=False``: weights gathered
  once per step and kept until backward, gradients reduce-scattered, Adam's state sharded;
- ``fsdp`` (stage 3): ``fully_shard`` per layer: weights gathered for each layer's forward and again for
  its backward, and freed after each.

The rank counts every collective a training step makes (operation and the size of the whole buffer it
works on), by wrapping ``torch.distributed``'s functions around the real ones for the duration of the
step, and reads the bytes it holds from its tensors: the weights it holds between forward and backward,
and its gradients and Adam state after the update, local shards only.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from helpers.data import load_fsdd, take
from helpers.ddp import GlobalBatchSampler
from helpers.models import build_model
from helpers.train import OPTIMIZERS
from helpers.worker import prepare_rank, process_group, worker_main, write_rank_result

STRATEGIES = {"ddp": 0, "zero1": 1, "zero2": 2, "fsdp": 3}  # strategy → ZeRO stage

# The collectives the strategies call from Python, and which argument holds the whole buffer.
COUNTED = {
    "all_reduce": "tensor",
    "broadcast": "tensor",
    "all_gather_into_tensor": "output_tensor",
    "reduce_scatter_tensor": "input",
}


class CollectiveCounter:
    """Records every counted collective as (operation, bytes of the whole buffer), per step.

    ``with counter.step():`` wraps ``torch.distributed``'s functions for one training step; the
    libraries look them up there when they call them (``dist.all_gather_into_tensor(...)``), so each call
    is recorded and then made for real.
    """

    def __init__(self) -> None:
        self.steps: list[list[tuple[str, int]]] = []

    def _wrapped(self, name: str, real):
        keyword = COUNTED[name]

        @functools.wraps(real)
        def call(*args, **kwargs):
            tensor = kwargs.get(keyword, args[0] if args else None)
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"cannot count {name}: no tensor in its first argument or {keyword}=")
            self.steps[-1].append((name, tensor.numel() * tensor.element_size()))
            return real(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def step(self):
        self.steps.append([])
        originals = {name: getattr(dist, name) for name in COUNTED}
        try:
            for name, real in originals.items():
                setattr(dist, name, self._wrapped(name, real))
            yield
        finally:
            for name, real in originals.items():
                setattr(dist, name, real)


def sharded_model(strategy: str, model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` wrapped for ``strategy``: DDP (stages 0 and 1) or ``fully_shard`` on every layer that
    has parameters, then on the whole (stages 2 and 3)."""
    if STRATEGIES[strategy] <= 1:
        ddp = DistributedDataParallel(  # the cap given, as in chapter 3: no separate 1 MiB first bucket
            model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=25
        )
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)  # the all-reduce, from Python
        return ddp
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))  # this rank's device, not a default
    keep = strategy == "zero2"
    for layer in model:
        if any(True for _ in layer.parameters(recurse=False)):
            fully_shard(layer, mesh=mesh, reshard_after_forward=not keep)
    return fully_shard(model, mesh=mesh, reshard_after_forward=not keep)


def sharded_optimizer(strategy: str, model: nn.Module, name: str, lr: float) -> torch.optim.Optimizer:
    """The optimizer of ``strategy``; stage 1 partitions its state with ``ZeroRedundancyOptimizer``."""
    if strategy == "zero1":
        return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=OPTIMIZERS[name], lr=lr)
    return OPTIMIZERS[name](model.parameters(), lr=lr)


def local_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer that holds this rank's state (``ZeroRedundancyOptimizer`` keeps it in ``optim``)."""
    return optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer


def local_bytes(tensors) -> int:
    """Bytes of ``tensors`` as this rank stores them: the local shard of a sharded one (a DTensor)."""
    local = (t.to_local() if hasattr(t, "to_local") else t for t in tensors)
    return sum(t.numel() * t.element_size() for t in local)


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """This rank's weight, gradient and optimizer-state bytes as stored, local shards only."""
    state = [value for values in optimizer.state.values() for value in values.values()
             if isinstance(value, torch.Tensor)]  # fmt: skip
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return {"parameters": local_bytes(model.parameters()), "gradients": local_bytes(grads),
            "optimizer": local_bytes(state)}  # fmt: skip


def global_batches(sampler: GlobalBatchSampler, steps: int):
    """The first ``steps`` of ``sampler``'s index batches, epoch after epoch (each reshuffled)."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for batch in sampler:
            if steps == 0:
                return
            steps -= 1
            yield torch.tensor(batch)
        epoch += 1


def save_parameters(model: nn.Module, path: Path, rank: int) -> None:
    """Write the whole trained weights (gathered from every rank's shards) from rank 0, for tests."""
    whole = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu()
             for name, p in model.named_parameters()}  # fmt: skip
    if rank == 0:
        torch.save({name.removeprefix("module."): value for name, value in whole.items()}, path)


def train_rank(config: dict, output: Path) -> None:
    """Train ``config["steps"]`` steps with ``config["strategy"]`` and write ``rank<r>.json`` (``train_run``).
    With ``config["series"]``, a list of settings that each override ``config`` (a model, a strategy), the
    runs of the series one after another in one process group: ``{"series": [result, ...]}``, for checks
    that need no independent launches (the tests, gpu-check), without a launch's start-up per run."""
    rank, world_size, device = prepare_rank(config)
    with process_group(config, device, output):
        if "series" in config:
            result = {"series": [train_run({**config, **item}, rank, world_size, device, output)
                                 for item in config["series"]]}  # fmt: skip
        else:
            result = train_run(config, rank, world_size, device, output)
        write_rank_result(output, rank, world_size, config, device, result)


def train_run(config: dict, rank: int, world_size: int, device: torch.device, output: Path) -> dict:
    """One run inside the process group: the global batch loss and seconds of every step, the
    collectives of every step, and the bytes this rank holds."""
    strategy = config["strategy"]
    train_set = take(load_fsdd(download=False).split("train"), config.get("train_samples"), config["seed"])
    sampler = GlobalBatchSampler(
        len(train_set), config["global_batch_size"], world_size, rank, config["seed"]
    )
    torch.manual_seed(config["seed"])
    model = sharded_model(strategy, build_model(config["model"]).to(device), device)
    optimizer = sharded_optimizer(strategy, model, config["optimizer"], config["lr"])
    counter = CollectiveCounter()
    losses, step_seconds, held_in_step = [], [], 0
    all_inputs, all_targets = train_set.tensors
    for index in global_batches(sampler, config["steps"]):
        inputs, targets = all_inputs[index].to(device), all_targets[index].to(device)
        dist.barrier()
        started = time.perf_counter()
        with counter.step():
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(inputs), targets)
            held_in_step = local_bytes(model.parameters())
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        step_seconds.append(time.perf_counter() - started)
        losses.append(loss.detach())
    global_losses = torch.stack(losses)
    dist.all_reduce(global_losses)  # equal slices: the global batch's loss is the mean of the ranks'
    held = held_bytes(model, local_optimizer(optimizer))
    if config.get("save_parameters"):
        save_parameters(model, output / "parameters.pt", rank)
    return {"strategy": strategy, "stage": STRATEGIES[strategy],
            "step_losses": (global_losses / world_size).tolist(), "step_seconds": step_seconds,
            "collectives": counter.steps,
            "held_bytes": {**held, "parameters_in_step": held_in_step}}  # fmt: skip


def main() -> NoReturn:
    """Entry point for torchrun: ``-m helpers.sharding.tasks --config CONFIG.json --output DIR``."""
    return worker_main(train_rank, main.__doc__)


if __name__ == "__main__":
    sys.exit(main())
