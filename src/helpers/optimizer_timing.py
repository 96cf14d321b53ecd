"""Adam's optimizer phase timed in each implementation torch offers, and counted as memory traffic
(chapter 1): is the optimizer's time Adam's arithmetic, or its passes over memory?"""

from __future__ import annotations

import statistics

import pandas as pd
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.models import MIB, MMAP_THRESHOLD_MAX, build_model, parameter_sizes
from helpers.phase_clock import PHASES, PhaseClock
from helpers.stats import MATTERS, describe_speedup, speedup
from helpers.train import (
    WARMUP_STEPS,
    check_positive,
    make_optimizer,
    milliseconds,
    pick_device,
    step_batches,
    to_device,
    training_step,
)

# Adam's three implementations in torch.optim, by the option that selects each.
ADAM_IMPLEMENTATIONS = {
    "for-loop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def default_adam_implementation(device) -> str:
    """What ``torch.optim.Adam`` runs when given no option: ``foreach`` on CUDA tensors, else the for-loop."""
    return "foreach" if torch.device(device).type == "cuda" else "for-loop"


def time_optimizer_phase(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch_size: int,
    implementation: str,
    timed_steps: int = 5,
    warmup_steps: int = WARMUP_STEPS,
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "auto",
) -> dict:
    """Adam's update (the optimizer phase) and the whole step, timed over ``timed_steps`` training steps with
    one of ``ADAM_IMPLEMENTATIONS`` (``PhaseClock``: CUDA events on a GPU), after ``warmup_steps``.

    The for-loop updates one tensor at a time and writes intermediate results (``sqrt``, ``div``) into new
    tensors; foreach does the same over lists of tensors; fused makes one pass per parameter without them.
    """
    if implementation not in ADAM_IMPLEMENTATIONS:
        raise ValueError(
            f"implementation must be one of {list(ADAM_IMPLEMENTATIONS)}, not {implementation!r}"
        )
    check_positive(timed_steps=timed_steps)
    target = pick_device(device)
    torch.manual_seed(seed)
    model = build_model(model_name).to(target)
    optim = make_optimizer("adam", model.parameters(), lr, **ADAM_IMPLEMENTATIONS[implementation])
    inputs, targets = to_device(train_set, target).tensors
    clock_index = 1 if target.type == "cuda" else 0
    optimizer_seconds, step_seconds = [], []
    for step, index in enumerate(step_batches(len(train_set), batch_size, seed, warmup_steps + timed_steps)):
        clock = PhaseClock(target)
        index = index.to(target)
        training_step(model, optim, inputs[index], targets[index], nn.functional.cross_entropy, phase=clock)
        if step >= warmup_steps:
            seconds = clock.seconds()
            optimizer_seconds.append(seconds["optimizer"][clock_index])
            step_seconds.append(sum(seconds[name][clock_index] for name in PHASES))
    return {
        "implementation": implementation,
        "optimizer_seconds": statistics.median(optimizer_seconds),
        "optimizer_seconds_all": optimizer_seconds,
        "step_seconds_all": step_seconds,
        "method": f"median of {timed_steps} timed steps' optimizer phase, after {warmup_steps} warm-up "
        "step(s)",
    }


def stored_optimizer_timing(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """``time_optimizer_phase`` through the results store."""
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    config = {"kind": "optimizer_timing", "model": model_name, "train_samples": len(train_set),
              "threads": torch.get_num_threads(), **settings}  # fmt: skip
    return store.measure(config, lambda: time_optimizer_phase(model_name, train_set, **settings))


def optimizer_comparison(store, model_name: str, train_set: TensorDataset, **settings) -> dict:
    """Adam's optimizer phase and whole step in each implementation torch offers on the device, against
    torch's default there: ``table`` (to read), ``speedups`` and ``step_speedups`` (``helpers.stats.speedup``
    of the phase and of the whole step against the default), the timed ``optimizer_seconds`` and
    ``step_seconds`` per implementation, ``default``, ``device``, the model's ``parameter_bytes`` (per
    tensor) and ``unavailable`` ({implementation: torch's refusal}) where the device lacks one."""
    device = str(pick_device(settings.get("device", "auto")))
    default = default_adam_implementation(device)
    optimizer, steps, unavailable = {}, {}, {}
    for name in ADAM_IMPLEMENTATIONS:
        try:
            record = stored_optimizer_timing(store, model_name, train_set, implementation=name, **settings)
        except (RuntimeError, ValueError) as refusal:
            unavailable[name] = str(refusal).splitlines()[0]
            continue
        optimizer[name] = record["result"]["optimizer_seconds_all"]
        steps[name] = record["result"]["step_seconds_all"]
    others = [name for name in optimizer if name != default]
    speedups = {name: speedup(optimizer[default], optimizer[name]) for name in others}
    step_speedups = {name: speedup(steps[default], steps[name]) for name in others}
    table = pd.DataFrame(
        [
            {"implementation": name + (" (torch's default here)" if name == default else ""),
             "optimizer phase (ms)": milliseconds(optimizer[name], unit=""),
             "against the default": describe_speedup(speedups[name]) if name in speedups else "—",
             "whole step (ms)": milliseconds(steps[name], unit=""),
             "whole step against the default": (
                 describe_speedup(step_speedups[name]) if name in step_speedups else "—")}
            for name in optimizer
        ]
    ).set_index("implementation")  # fmt: skip
    return {"default": default, "device": device, "table": table, "speedups": speedups,
            "step_speedups": step_speedups, "optimizer_seconds": optimizer, "step_seconds": steps,
            "parameter_bytes": parameter_sizes(build_model(model_name)),
            "unavailable": unavailable}  # fmt: skip


def optimizer_share(comparison: dict) -> dict:
    """The default Adam's optimizer phase against its whole step, both from the same timed steps of
    ``optimizer_comparison``: the medians in seconds and ``share``, the ratio of the medians."""
    default = comparison["default"]
    phase = statistics.median(comparison["optimizer_seconds"][default])
    step = statistics.median(comparison["step_seconds"][default])
    return {"optimizer_seconds": phase, "step_seconds": step, "share": phase / step}


# Tensor-sized reads and writes per parameter in one Adam update (torch.optim.adam without weight decay
# or amsgrad). The for-loop: lerp_ 3 (reads the first moment and the gradient, writes the moment), mul_
# 2, addcmul_ 3, sqrt 2, div 2, add_ 2, addcdiv_ 4; foreach: the same seven operations, each one kernel
# over the list of tensors (torch.optim.adam._multi_tensor_adam); fused: reads the parameter, its gradient
# and both moments, writes the parameter and both moments.
ADAM_PASSES = {"for-loop": 18, "foreach": 18, "fused": 7}
ADAM_TEMPORARIES = 2  # the for-loop's sqrt and div each write a new tensor the size of the parameter


def adam_memory_account(comparison: dict, fresh: dict, reused: dict) -> dict:
    """The for-loop Adam's optimizer phase counted as memory traffic, from the speed of a plain copy into
    a fresh and into a reused buffer (``dataparallel.copy_seconds_per_byte`` results), in seconds:

    ``passes``: its ``ADAM_PASSES`` over every parameter's bytes at the reused-buffer speed (a copy makes
    two passes over its bytes, a read and a write); ``first_touch``: what fresh pages add to its
    ``ADAM_TEMPORARIES`` temporaries, counted for parameters of ``models.MMAP_THRESHOLD_MAX`` or more (those
    temporaries get fresh pages every step; smaller ones reuse freed memory); ``fused_passes``: fused Adam's
    passes; ``measured`` and ``fused_measured``: the medians of ``optimizer_comparison``."""
    sizes = comparison["parameter_bytes"]
    per_pass = reused["seconds_per_byte"] / 2
    fresh_extra = max(fresh["seconds_per_byte"] - reused["seconds_per_byte"], 0.0)
    large = sum(size for size in sizes if size >= MMAP_THRESHOLD_MAX)
    timed = comparison["optimizer_seconds"]
    return {
        "passes": ADAM_PASSES["for-loop"] * sum(sizes) * per_pass,
        "first_touch": ADAM_TEMPORARIES * large * fresh_extra,
        "fresh_bytes": ADAM_TEMPORARIES * large,
        "fused_passes": ADAM_PASSES["fused"] * sum(sizes) * per_pass,
        "measured": statistics.median(timed["for-loop"]),
        "fused_measured": statistics.median(timed["fused"]) if "fused" in timed else None,
    }


def explain_adam(comparison: dict, fresh: dict, reused: dict) -> str:
    """What ``optimizer_comparison`` says about fused Adam against the default and, where the default is
    the for-loop, the default's phase counted as memory traffic (``adam_memory_account``, from a copy into a
    fresh and into a reused buffer: ``dataparallel.copy_seconds_per_byte`` results) against the measured
    time, and how much of the measured time that count accounts for. Plain text."""
    fused = comparison["speedups"].get("fused")
    if fused is None:
        return f"fused Adam is not available here ({comparison['unavailable'].get('fused', '')})"
    if fused["verdict"] != "faster":
        return (
            f"fused Adam against the default: {describe_speedup(fused)}, so fewer passes over memory and no "
            "temporaries did not shorten the optimizer phase here"
        )
    text = (
        f"fused Adam against the default: {describe_speedup(fused)}, {1 - 1 / fused['speedup']:.0%} less "
        "time in the optimizer phase"
    )
    if comparison["default"] != "for-loop" or "fused" not in comparison["optimizer_seconds"]:
        return text + (
            f": it makes {ADAM_PASSES['fused']} tensor-sized reads and writes per parameter where the "
            f"default ({comparison['default']} here) makes {ADAM_PASSES[comparison['default']]}, and writes "
            "no temporaries"
        )
    found = adam_memory_account(comparison, fresh, reused)
    counted_seconds = found["passes"] + found["first_touch"]
    coverage = counted_seconds / found["measured"]
    text += (
        f". Counted from the two copies, the default's {found['measured'] * 1e3:.1f} ms hold about "
        f"{found['first_touch'] * 1e3:.1f} ms ({found['first_touch'] / found['measured']:.0%}) of first "
        f"writes to fresh pages (its sqrt and div write {found['fresh_bytes'] / MIB:,.0f} MiB of new "
        f"tensors every step) and about {found['passes'] * 1e3:.1f} ms for its {ADAM_PASSES['for-loop']} "
        "tensor-sized reads and writes of every parameter at the reused-buffer speed (a copy is one read "
        "and one write, so each pass takes half a copy's time); fused Adam makes "
        f"{ADAM_PASSES['fused']} such passes (about {found['fused_passes'] * 1e3:.1f} ms; measured "
        f"{found['fused_measured'] * 1e3:.1f} ms) and writes no temporaries"
    )
    if 1 / (1 + 2 * MATTERS) <= coverage <= 1 + 2 * MATTERS:
        return text + (
            f". The count comes to {coverage:.0%} of the measured phase: memory traffic, not Adam's "
            "arithmetic, is the optimizer's time"
        )
    if coverage > 1:
        return text + (
            f". The count comes to {coverage:.0%} of the measured phase: the plain copies' speeds do not "
            "carry over to Adam's passes here, so the count does not say where its time goes"
        )
    return text + (
        f". The count comes to {coverage:.0%} of the measured phase, so memory traffic alone does not "
        "account for the optimizer's time here"
    )
