"""helpers.benchmarks: the bare loop is a faithful baseline for helpers.train."""

import pytest

from helpers import benchmarks, data, train


def test_bare_loop_does_exactly_what_train_does(fsdd):
    train_set, test_set = data.take(fsdd.split("train"), 90), data.take(fsdd.split("test"), 20)
    settings = dict(epochs=2, batch_size=40, lr=1e-3, seed=5)
    run = train.train("LinearNet", train_set, test_set, device="cpu", progress=False, **settings)
    _, losses = benchmarks.bare_training("LinearNet", train_set, **settings)
    assert losses == [row["train_loss"] for row in run.history]


def test_overhead_needs_two_epochs(fsdd):
    with pytest.raises(ValueError, match="at least 2"):
        benchmarks.train_overhead("LinearNet", fsdd.split("train"), fsdd.split("test"), epochs=1)
