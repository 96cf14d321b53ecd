"""helpers.collectives.staleness: stale gradients in one process."""

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import models, train
from helpers.collectives import staleness

# --- asynchronous SGD -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_data():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(48, 1, 12_000, generator=generator) * 0.1
    targets = torch.randint(0, 10, (48,), generator=generator)
    return TensorDataset(inputs[:32], targets[:32]), TensorDataset(inputs[32:], targets[32:])


def test_staleness_zero_is_synchronous_sgd(tiny_data):
    train_set, test_set = tiny_data
    run = staleness.stale_gradient_training(
        "LinearNet", train_set, test_set, staleness=0, steps=5, batch_size=8, lr=0.05, seed=3, eval_every=2
    )
    torch.manual_seed(3)
    model = models.build_model("LinearNet")
    optimizer = train.make_optimizer("sgd", model.parameters(), 0.05)
    inputs, targets = train_set.tensors
    losses = [
        train.training_step(model, optimizer, inputs[i], targets[i], nn.functional.cross_entropy)[0].item()
        for i in train.step_batches(32, 8, 3, 5)
    ]
    assert [row["batch_loss"] for row in run["history"]] == pytest.approx(losses, rel=1e-6, abs=1e-7)
    assert [row["step"] for row in run["history"] if "eval_loss" in row] == [2, 4, 5]
    assert run["history"][-1]["eval_loss"] == pytest.approx(train.evaluate(model, test_set)[0], rel=1e-5)


def test_stale_gradients_change_the_trajectory(tiny_data):
    train_set, test_set = tiny_data
    fresh = staleness.stale_gradient_training("LinearNet", train_set, test_set, 0, 4, 8, 0.05, 3)
    stale = staleness.stale_gradient_training("LinearNet", train_set, test_set, 2, 4, 8, 0.05, 3)
    fresh_losses = [row["batch_loss"] for row in fresh["history"]]
    stale_losses = [row["batch_loss"] for row in stale["history"]]
    assert stale_losses[0] == fresh_losses[0]  # step 1: the stale snapshot is the initial parameters
    assert stale_losses[1] != pytest.approx(fresh_losses[1], rel=1e-4)  # step 2 still sees step 0's
    assert "2 step(s) stale" in stale["method"]
    with pytest.raises(ValueError, match="staleness must be"):
        staleness.stale_gradient_training("LinearNet", train_set, test_set, -1, 4, 8, 0.05, 3)
