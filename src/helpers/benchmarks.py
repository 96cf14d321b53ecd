"""Benchmarks of the helpers themselves (chapter 1).

``python -m helpers.benchmarks data`` times loading FSDD: verifying and decoding all 3,000 recordings
into a fresh cache, then loading from that cache.

``python -m helpers.benchmarks overhead`` trains the same model on the same batches twice, once with
``helpers.train.train`` and once with the shortest correct PyTorch loop, and compares epoch times.
The two runs must end with identical losses, which proves that they did the same work.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.models import build_model
from helpers.train import batches, check_positive, pick_device, train


def bare_training(
    model_name: str, train_set: TensorDataset, *, epochs: int, batch_size: int, lr: float, seed: int
) -> tuple[list[float], list[float]]:
    """The plainest Adam loop over the batches ``train`` uses: (epoch seconds, mean loss per epoch)."""
    torch.manual_seed(seed)
    model = build_model(model_name)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    inputs, targets = train_set.tensors
    generator = torch.Generator().manual_seed(seed)
    seconds, losses = [], []
    for _ in range(epochs):
        loss_sum = torch.zeros(())
        started = time.perf_counter()
        for index in batches(len(targets), batch_size, generator):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs[index]), targets[index])
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * len(index)
        seconds.append(time.perf_counter() - started)
        losses.append(loss_sum.item() / len(targets))
    return seconds, losses


def train_overhead(
    model_name: str,
    train_set: TensorDataset,
    test_set: TensorDataset,
    *,
    epochs: int = 4,
    batch_size: int = 50,
    lr: float = 1e-3,
    seed: int = 0,
    repeats: int = 2,
) -> dict:
    """Median epoch seconds (first epoch of each run excluded) of ``train`` and of the bare loop, on CPU.

    The two are run alternately ``repeats`` times so that drift in the machine's speed hits both.
    """
    check_positive(epochs=epochs, repeats=repeats)
    if epochs < 2:
        raise ValueError("epochs must be at least 2: the first epoch of each run is not timed")
    pick_device("cpu")
    helper_seconds, bare_seconds = [], []
    for _ in range(repeats):
        run = train(
            model_name, train_set, test_set, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
            device="cpu", warmup_steps=0, progress=False,
        )  # fmt: skip
        helper_seconds += [row["epoch_seconds"] for row in run.history[1:]]
        seconds, losses = bare_training(
            model_name, train_set, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed
        )
        if losses != [row["train_loss"] for row in run.history]:
            raise RuntimeError("helpers.train and the bare loop did different work (losses differ)")
        bare_seconds += seconds[1:]
    helper, bare = statistics.median(helper_seconds), statistics.median(bare_seconds)
    return {
        "model": model_name,
        "train_samples": len(train_set),
        "batch_size": batch_size,
        "helpers_train_epoch_seconds": helper,
        "bare_loop_epoch_seconds": bare,
        "overhead": helper / bare - 1,
        "method": f"median of {repeats} x {epochs - 1} epochs each (epoch 1 of every run excluded)",
    }


def data_loading_seconds(repeats: int = 3) -> dict:
    """Seconds to verify, decode and cache all recordings into a fresh cache, then to load the cache."""
    from helpers.data import load_fsdd

    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        load_fsdd(cache_dir=Path(cache))
        first = time.perf_counter() - started
        cached = []
        for _ in range(repeats):
            started = time.perf_counter()
            load_fsdd(cache_dir=Path(cache))
            cached.append(time.perf_counter() - started)
    return {"decode_and_cache_seconds": first, "from_cache_seconds": statistics.median(cached)}


def main() -> None:
    """``python -m helpers.benchmarks {data,overhead}``: loading times, or helpers.train's overhead."""
    import pandas as pd

    from helpers.data import load_fsdd, take

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("benchmark", choices=["data", "overhead"])
    parser.add_argument("--conv-samples", type=int, default=300, help="ConvNet training clips (CPU-slow)")
    args = parser.parse_args()
    if args.benchmark == "data":
        print(pd.Series(data_loading_seconds()).round(3).to_string())
        return
    dataset = load_fsdd()
    test_set = take(dataset.split("test"), 50)
    rows = [
        train_overhead("LinearNet", dataset.split("train"), test_set),
        train_overhead("ConvNet", take(dataset.split("train"), args.conv_samples), test_set, epochs=3),
    ]
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
