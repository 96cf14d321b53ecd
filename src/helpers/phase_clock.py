"""The phases of one training step timed on the host's clock and, on a GPU, on the device's (CUDA events):
what chapter 1's profile, its Adam timings and chapter 7's measured step times all read."""

from __future__ import annotations

import contextlib
import time

import torch

PHASES = ("forward", "backward", "optimizer")


class PhaseClock:
    """Times the phases of one ``train.training_step`` (pass it as ``phase``): the host clock around each
    phase and, on a GPU, a pair of CUDA events recorded on the current stream.

    Autograd runs a GPU's backward on its own device thread, but enqueues each backward kernel on the
    stream of its forward operation (the current stream here), and ``loss.backward()`` returns only once
    they are enqueued, so the events on that stream bracket the backward's kernels too. An event pair
    measures the phase's span on the GPU: its kernels and any gaps while the GPU waits for the host.
    """

    def __init__(self, device: torch.device) -> None:
        self.gpu = device if device.type == "cuda" else None
        self._marks: dict[str, tuple] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        events = None
        if self.gpu is not None:
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record(torch.cuda.current_stream(self.gpu))
        start = time.perf_counter()
        yield
        host = time.perf_counter() - start
        if events is not None:
            events[1].record(torch.cuda.current_stream(self.gpu))
        self._marks[name] = (host, events)

    def seconds(self) -> dict[str, tuple[float, float | None]]:
        """``{phase: (host seconds, device seconds or None)}``, read after the GPU has finished."""
        if self.gpu is not None:
            torch.cuda.synchronize(self.gpu)
        return {
            name: (host, events[0].elapsed_time(events[1]) / 1e3 if events else None)
            for name, (host, events) in self._marks.items()
        }
