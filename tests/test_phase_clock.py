"""helpers.phase_clock: each phase of a training step timed once, on the host's clock on a CPU."""

import torch
from torch import nn

from helpers import phase_clock, train


def test_phase_clock_times_each_phase_of_a_training_step():
    """``training_step`` enters ``phase(name)`` around each phase; the clock keeps the host seconds."""
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = phase_clock.PhaseClock(torch.device("cpu"))
    loss, logits = train.training_step(
        model, optimizer, torch.randn(3, 4), torch.tensor([0, 1, 0]), nn.functional.cross_entropy, phase=clock
    )
    seconds = clock.seconds()
    assert list(seconds) == list(phase_clock.PHASES)
    assert all(host > 0 and device is None for host, device in seconds.values())
    assert logits.shape == (3, 2) and not loss.requires_grad
