"""Asynchronous SGD simulated in one process: what stale gradients do to training (chapter 4).

An asynchronous parameter server applies each worker's gradient when it arrives, computed on
parameters that are several updates old. Simulating it in one process makes staleness the only
difference between runs: same batches, same start, same optimizer.
"""

from __future__ import annotations

from collections import deque

import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.data import load_fsdd, take
from helpers.models import build_model
from helpers.train import check_positive, evaluate, make_optimizer, step_batches


def stale_gradient_training(
    model_name: str,
    train: TensorDataset,
    evaluation: TensorDataset,
    staleness: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_every: int = 10,
    optimizer: str = "sgd",
) -> dict:
    """SGD in which the gradient applied at step t was computed on the parameters of step t−staleness.

    This is what an asynchronous parameter server does to a worker whose gradient arrives after
    ``staleness`` other updates (with k workers taking turns, staleness ≈ k−1). A queue keeps the last
    staleness+1 parameter snapshots; early steps use the oldest one there is. Staleness 0 is synchronous
    SGD. Batches are ``helpers.train.step_batches`` of a seeded shuffle, so runs differ only in staleness.
    Returns per step the loss of the batch (at the parameters it was computed on) and, every
    ``eval_every`` steps and at the end, the current parameters' loss and accuracy on ``evaluation``.
    """
    if not isinstance(staleness, int) or staleness < 0:
        raise ValueError(f"staleness must be a non-negative integer, not {staleness!r}")
    check_positive(steps=steps, batch_size=batch_size, eval_every=eval_every)
    torch.manual_seed(seed)
    model = build_model(model_name)
    stale_copy = build_model(model_name)  # where the late worker computes its gradient
    updater = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = train.tensors
    snapshots: deque[list[torch.Tensor]] = deque(maxlen=staleness + 1)
    history = []
    for step, index in enumerate(step_batches(len(targets), batch_size, seed, steps), start=1):
        snapshots.append([parameter.detach().clone() for parameter in model.parameters()])
        with torch.no_grad():
            for target, value in zip(stale_copy.parameters(), snapshots[0], strict=True):
                target.copy_(value)
        stale_copy.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(stale_copy(inputs[index]), targets[index])
        loss.backward()
        for parameter, stale in zip(model.parameters(), stale_copy.parameters(), strict=True):
            parameter.grad = stale.grad
        updater.step()
        row = {"step": step, "staleness": staleness, "batch_loss": loss.item()}
        if step % eval_every == 0 or step == steps:
            row["eval_loss"], row["eval_accuracy"] = evaluate(model, evaluation)
        history.append(row)
    return {
        "history": history,
        "method": f"{optimizer} (lr {lr}), batch {batch_size}, gradients {staleness} step(s) stale; "
        f"evaluated every {eval_every} steps",
    }


def stored_stale_training(
    store, model_name: str, staleness: int, train_samples: int | None, evaluate_on: str = "train", **settings
):
    """``stale_gradient_training`` on FSDD clips through the results store (seeded subset of the split),
    evaluated on those training clips (``evaluate_on`` "train": what a model that memorises, like
    LinearNet, visibly learns) or on the test split ("test")."""
    if evaluate_on not in ("train", "test"):
        raise ValueError(f"evaluate_on must be 'train' or 'test', not {evaluate_on!r}")
    config = {
        "kind": "stale_training",
        "model": model_name,
        "staleness": staleness,
        "train_samples": train_samples,
        "evaluate_on": evaluate_on,
        "threads": torch.get_num_threads(),
        **settings,
    }

    def measure() -> dict:
        fsdd = load_fsdd()
        train_set = take(fsdd.split("train"), train_samples, settings["seed"])
        evaluation = train_set if evaluate_on == "train" else fsdd.split("test")
        return stale_gradient_training(model_name, train_set, evaluation, staleness, **settings)

    return store.measure(config, measure)
