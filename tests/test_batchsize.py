"""helpers.batchsize: learning-rate rules, the critical-batch fit, per-sample gradients and the noise
scale (against a plain autograd loop), and steps to a target on real clips."""

import math

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import batchsize


def test_learning_rate_rules():
    assert batchsize.learning_rate(1e-3, 32, 128, "fixed") == 1e-3
    assert batchsize.learning_rate(1e-3, 32, 128, "linear") == pytest.approx(4e-3)
    with pytest.raises(ValueError, match="'fixed' or 'linear', not 'sqrt'"):
        batchsize.learning_rate(1e-3, 32, 128, "sqrt")


def test_the_fit_recovers_an_exact_critical_batch():
    batches = [8, 16, 32, 64, 128]
    steps = [100 * (1 + 32 / b) for b in batches]
    fit = batchsize.fit_critical_batch(batches, steps)
    assert fit["s_min"] == pytest.approx(100) and fit["b_crit"] == pytest.approx(32)
    assert fit["e_min"] == pytest.approx(3200)
    with pytest.raises(ValueError, match="three or more"):
        batchsize.fit_critical_batch([8, 16], [10, 5])
    assert batchsize.fit_critical_batch([8, 16, 32], [10, 10, 11])["b_crit"] == 0
    assert batchsize.fit_critical_batch([8, 16, 32], [80, 40, 20])["b_crit"] == math.inf


def tiny_problem():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    data = TensorDataset(torch.randn(9, 5), torch.randint(0, 3, (9,)))
    return model, data


def loop_gradients(model, data):
    """Each sample's gradient by one backward pass per sample: the slow, plain way."""
    rows = []
    for x, y in zip(*data.tensors, strict=True):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[None]), y[None]).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    return torch.stack(rows)


def test_the_fit_is_placed_against_the_measured_batches():
    assert batchsize.fit_position(16.1, [8, 256]) == "inside the measured range (8–256)"
    assert batchsize.fit_position(393.0, [8, 256]).startswith("beyond the largest batch measured (256)")
    assert batchsize.fit_position(2.0, [8, 256]).startswith("below the smallest batch measured (8)")
    assert batchsize.fit_position(math.inf, [8, 256]).startswith("no floor")


def test_the_noise_scale_is_compared_in_orders_of_magnitude():
    assert batchsize.noise_against_critical(10.0, 25.0) == "within a factor of 3 of"
    assert batchsize.noise_against_critical(1.4, 16.8) == "12 times smaller than"
    assert batchsize.noise_against_critical(100.0, 20.0) == "5 times larger than"
    assert batchsize.noise_against_critical(math.inf, 20.0) == "not comparable with"


def test_training_batches_are_reshuffled_every_epoch():
    chosen = batchsize.epoch_batches(10, 6, seed=0, count=4)  # one full batch per epoch of 10
    assert len(chosen) == 4 and all(len(index) == 6 for index in chosen)
    assert len({tuple(index.tolist()) for index in chosen}) == 4  # a new shuffle each epoch
    assert len(set(torch.cat(chosen).tolist())) > 6  # more clips than one cycled batch would ever see
    again = batchsize.epoch_batches(10, 6, seed=0, count=4)
    assert all(a.equal(b) for a, b in zip(chosen, again, strict=True))
    with pytest.raises(ValueError, match="exceeds the 10"):
        batchsize.epoch_batches(10, 11, seed=0, count=1)


def test_per_sample_gradients_equal_one_backward_per_sample():
    model, data = tiny_problem()
    fast = batchsize.per_sample_gradients(model, *data.tensors)
    torch.testing.assert_close(fast, loop_gradients(model, data))


def test_noise_scale_is_trace_of_covariance_over_squared_mean_norm():
    model, data = tiny_problem()
    g = loop_gradients(model, data).double()
    mean = g.mean(0)
    trace = float(g.var(0, unbiased=True).sum())
    signal = float(mean @ mean) - trace / len(g)
    result = batchsize.gradient_noise_scale(model, data, chunk=4)  # chunks of 4, 4, 1
    assert result["trace_sigma"] == pytest.approx(trace, rel=1e-6)
    assert result["gradient_norm2"] == pytest.approx(signal, rel=1e-6)
    assert result["b_simple"] == pytest.approx(trace / signal, rel=1e-6)


def test_steps_to_target_on_real_clips(fsdd):
    from helpers.data import take

    train_set = take(fsdd.split("train"), 20, 0)
    reached = batchsize.steps_to_target("LinearNet", train_set, global_batch=10, lr=1e-3, target_loss=2.0,
                                        max_steps=60, eval_every=5, warmup_steps=5)  # fmt: skip
    assert reached["steps"] is not None and reached["steps"] % 5 == 0
    assert reached["samples"] == reached["steps"] * 10 and reached["history"][-1]["loss"] <= 2.0
    never = batchsize.steps_to_target("LinearNet", train_set, global_batch=10, lr=1e-3, target_loss=1e-9,
                                      max_steps=10, eval_every=5)  # fmt: skip
    assert never["steps"] is None and len(never["history"]) == 2


def test_the_noise_scale_probe_spans_the_digits(fsdd):
    """The clips are sorted by digit: the probe must be a random subset, not the first clips."""
    from helpers.data import take
    from helpers.models import build_model

    train_set = take(fsdd.split("train"), 60, 0)
    probe = take(train_set, 12, 3)
    assert len(set(probe.tensors[1].tolist())) > 6 and len(set(train_set.tensors[1][:12].tolist())) <= 3
    during = batchsize.noise_scale_during_training("ConvNet", train_set, batch=6, lr=1e-3, checkpoints=[0],
                                                   samples=12, seed=3)  # fmt: skip
    torch.manual_seed(3)
    expected = batchsize.gradient_noise_scale(build_model("ConvNet"), probe)
    assert during["points"][0]["b_simple"] == pytest.approx(expected["b_simple"], rel=1e-9)
