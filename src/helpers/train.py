"""Single-device training and honest step timing (chapter 1).

Timing rules used throughout the book: one-time costs (first kernel launches, allocator growth) are paid
by warm-up steps on a throwaway copy of the model before any clock starts; on a GPU the clock is a pair
of CUDA events read after synchronising; every time carries the ``method`` that produced it.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn
from torch.profiler import record_function
from torch.utils.data import TensorDataset
from tqdm import tqdm

from helpers.data import FSDD_VERSION
from helpers.hardware import gpu_count
from helpers.models import MIB, build_model, saved_bytes_per_sample
from helpers.results import ResultStore
from helpers.stats import ms, plural, significant, speedup, spread

OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


# Warm-up steps before any clock starts. One is not enough on a CPU: the allocator and the thread pool
# settle over the first few steps (chapter 2's one-replica LinearNet step fell from 0.219 to 0.116 s
# between its first and later timed steps), so every single-process timing pays three.
WARMUP_STEPS = 3


def pick_device(name: str = "auto") -> torch.device:
    """``"auto"`` is the current CUDA device when there is one, else the CPU; ``"cuda"`` needs a GPU.

    A CUDA device always comes back with its index (``"auto"`` and ``"cuda"`` both give ``cuda:0`` by
    default), so that records name the device the same way whichever way it was asked for.
    """
    if name == "auto":
        name = "cuda" if gpu_count() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', not {name!r}")
    if device.type == "cuda" and not gpu_count():
        raise ValueError(f"device {name!r} asked for, but no CUDA device is visible")
    if device.type == "cuda" and device.index is None:  # the recorded machine's first GPU without CUDA here
        device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    return device


def counted(count: int, noun: str) -> str:
    """``3 warm-up steps``, ``1 warm-up step``, ``2 launches``: a count with its noun, plural unless it is
    one (``stats.plural``)."""
    return f"{count:,} {plural(count, noun)}"


def highest_load(record: dict) -> float | None:
    """The higher of the 1-minute load averages a record was measured under (``load_average``: before and
    after), or None where the record or the system kept none."""
    readings = [value for value in record.get("load_average") or [] if value is not None]
    return max(readings) if readings else None


def check_positive(**values: int) -> None:
    """ValueError naming the first value that is not a positive integer."""
    for name, value in values.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")


def make_optimizer(name: str, parameters, lr: float, **options) -> torch.optim.Optimizer:
    """SGD or Adam by name; ``options`` go to its constructor (``foreach=False``, ``fused=True``)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, not {name!r}")
    return OPTIMIZERS[name](parameters, lr=lr, **options)


class Timer:
    """Elapsed seconds of a ``with`` block on ``devices`` (one device or a list of them).

    On one GPU: a pair of CUDA events on that GPU's current stream, read after synchronising. On several
    GPUs every one of them is synchronised at both ends and the host clock measures between: events of
    different GPUs cannot be compared, and events on the first GPU alone would miss the others' work. On
    the CPU: ``time.perf_counter``.
    """

    def __init__(self, devices) -> None:
        devices = devices if isinstance(devices, list | tuple) else [devices]
        self.gpus = list(dict.fromkeys(torch.device(d) for d in devices if torch.device(d).type == "cuda"))
        self.seconds = float("nan")

    def _synchronize(self) -> None:
        for gpu in self.gpus:
            torch.cuda.synchronize(gpu)

    def __enter__(self) -> Timer:
        if len(self.gpus) == 1:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record(torch.cuda.current_stream(self.gpus[0]))
        else:
            self._synchronize()
            self._start_time = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if len(self.gpus) == 1:
            self._end.record(torch.cuda.current_stream(self.gpus[0]))
            self._end.synchronize()
            self.seconds = self._start.elapsed_time(self._end) / 1000
        else:
            self._synchronize()
            self.seconds = time.perf_counter() - self._start_time


def batches(size: int, batch_size: int, generator: torch.Generator | None):
    """Index tensors of consecutive mini-batches, shuffled when a generator is given (last may be short)."""
    order = torch.randperm(size, generator=generator) if generator is not None else torch.arange(size)
    return order.split(batch_size)


def training_step(
    model, optimizer, inputs, targets, loss_function, autocast_dtype=None, phase=record_function
):
    """One forward, backward and optimizer step; returns the detached loss and logits.

    ``phase(name)`` is entered around each of the three phases: by default torch.profiler's
    ``record_function`` labels them (it costs microseconds when no profiler runs); a clock can time them
    instead (``helpers.profiling.PhaseClock``).
    """
    optimizer.zero_grad(set_to_none=True)
    autocast = torch.autocast(inputs.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None)
    with phase("forward"), autocast:
        logits = model(inputs)
        loss = loss_function(logits, targets)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
    return loss.detach(), logits.detach()


@torch.no_grad()
def evaluate(model: nn.Module, dataset: TensorDataset, batch_size: int = 500) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``dataset`` (tensors already on its device)."""
    model.eval()
    inputs, targets = dataset.tensors
    total_loss, correct = 0.0, 0
    for index in batches(len(targets), batch_size, None):
        logits = model(inputs[index])
        total_loss += nn.functional.cross_entropy(logits, targets[index], reduction="sum").item()
        correct += (logits.argmax(1) == targets[index]).sum().item()
    model.train()
    return total_loss / len(targets), correct / len(targets)


def to_device(dataset: TensorDataset, device: torch.device) -> TensorDataset:
    """The same dataset with its tensors on ``device``."""
    return TensorDataset(*(t.to(device) for t in dataset.tensors))


def warm_up(model, optimizer_name, lr, inputs, targets, steps, autocast_dtype=None) -> None:
    """Pay one-time costs with ``steps`` training steps on copies of the model and optimizer."""
    if steps == 0:
        return
    shadow = copy.deepcopy(model)
    optimizer = make_optimizer(optimizer_name, shadow.parameters(), lr)
    for _ in range(steps):
        training_step(shadow, optimizer, inputs, targets, nn.functional.cross_entropy, autocast_dtype)
    if inputs.device.type == "cuda":
        torch.cuda.synchronize(inputs.device)


@dataclass
class TrainingRun:
    """Per-epoch history of one training run and how its time was measured."""

    history: list[dict] = field(default_factory=list)
    method: str = ""
    step_losses: list[float] = field(default_factory=list)

    @property
    def epoch_seconds(self) -> float:
        """Median training time of one epoch (evaluation excluded)."""
        return statistics.median(row["epoch_seconds"] for row in self.history)


def train(
    model_name: str,
    train_set: TensorDataset,
    test_set: TensorDataset,
    *,
    epochs: int,
    batch_size: int,
    optimizer: str = "adam",
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "auto",
    warmup_steps: int = WARMUP_STEPS,
    progress: bool = True,
) -> TrainingRun:
    """Train a fresh, seeded model; after each epoch record train/test loss and accuracy and the epoch time.

    ``train_loss`` and ``train_accuracy`` are averaged over the epoch's steps while the weights change
    (the usual running figures); the test figures are evaluated on the whole test set after the epoch.
    ``step_losses`` keeps every step's batch loss (the loss curve chapter 5 fits).
    """
    check_positive(epochs=epochs, batch_size=batch_size)
    target = pick_device(device)
    torch.manual_seed(seed)
    model = build_model(model_name).to(target)
    optim = make_optimizer(optimizer, model.parameters(), lr)
    train_on, test_on = to_device(train_set, target), to_device(test_set, target)
    inputs, targets = train_on.tensors
    warm_up(model, optimizer, lr, inputs[:batch_size], targets[:batch_size], warmup_steps)
    generator = torch.Generator().manual_seed(seed)
    warmup = counted(warmup_steps, "warm-up step")
    run = TrainingRun(method=f"each epoch in full, after {warmup} on a copy of the model")
    step_losses = []
    for epoch in tqdm(range(1, epochs + 1), desc=f"{model_name} bs={batch_size}", disable=not progress):
        loss_sum = torch.zeros((), device=target)
        correct = torch.zeros((), device=target, dtype=torch.long)
        with Timer(target) as timer:
            for index in batches(len(targets), batch_size, generator):
                index = index.to(target)
                loss, logits = training_step(
                    model, optim, inputs[index], targets[index], nn.functional.cross_entropy
                )
                loss_sum += loss * len(index)
                correct += (logits.argmax(1) == targets[index]).sum()
                step_losses.append(loss)
        test_loss, test_accuracy = evaluate(model, test_on)
        run.history.append(
            {
                "epoch": epoch,
                "train_loss": loss_sum.item() / len(targets),
                "train_accuracy": correct.item() / len(targets),
                "test_loss": test_loss,
                "test_accuracy": test_accuracy,
                "epoch_seconds": timer.seconds,
            }
        )
    run.step_losses = torch.stack(step_losses).tolist()
    return run


def step_batches(samples: int, batch_size: int, seed: int, count: int) -> list[torch.Tensor]:
    """``count`` index tensors of full batches from a seeded shuffle, cycled if one epoch has fewer.

    The batches every step-timing function of the book measures on (chapters 1 and 2).
    """
    check_positive(batch_size=batch_size, count=count)
    if batch_size > samples:
        raise ValueError(f"batch_size {batch_size} exceeds the {samples} training samples")
    generator = torch.Generator().manual_seed(seed)
    full = [i for i in batches(samples, batch_size, generator) if len(i) == batch_size]
    return [full[step % len(full)] for step in range(count)]


def epoch_batches(samples: int, batch_size: int, seed: int, count: int) -> list[torch.Tensor]:
    """``count`` full batches, the clips reshuffled every epoch (each shuffle's short remainder dropped).

    Training progress needs every epoch reshuffled: ``step_batches`` cycles one shuffle (right for timing
    the same batches), which would show the model the same batches in the same order epoch after epoch,
    and at a batch of more than half the clips train on the same clips at every step and never on the
    rest (chapter 4's stale gradients and chapter 6's steps to a target use this).
    """
    check_positive(batch_size=batch_size, count=count)
    if batch_size > samples:
        raise ValueError(f"batch_size {batch_size} exceeds the {samples} training samples")
    generator = torch.Generator().manual_seed(seed)
    found: list[torch.Tensor] = []
    while len(found) < count:
        found += [index for index in batches(samples, batch_size, generator) if len(index) == batch_size]
    return found[:count]


def time_training_steps(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch_size: int,
    timed_steps: int = 5,
    warmup_steps: int = WARMUP_STEPS,
    optimizer: str = "adam",
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "auto",
    autocast_dtype: torch.dtype | None = None,
    wrap=None,
    optimizer_options: dict | None = None,
) -> dict:
    """Median seconds per training step at ``batch_size``, and the epoch time it implies.

    Steps use the first full batches of a seeded shuffle. The warm-up steps run on the measured model and
    optimizer themselves, so that lazily created optimizer state is paid for before the clock starts. The
    epoch estimate is the median step time times the steps in one epoch of ``train_set`` (``method``).
    ``wrap`` (for example ``torch.nn.DataParallel``) wraps the model for the forward pass;
    ``optimizer_options`` go to the optimizer's constructor (``{"fused": True}``).
    """
    check_positive(timed_steps=timed_steps)
    indices = step_batches(len(train_set), batch_size, seed, warmup_steps + timed_steps)
    target = pick_device(device)
    torch.manual_seed(seed)
    model = build_model(model_name).to(target)
    stepped = wrap(model) if wrap else model
    optim = make_optimizer(optimizer, model.parameters(), lr, **(optimizer_options or {}))
    inputs, targets = to_device(train_set, target).tensors
    step_seconds = []
    for step, index in enumerate(indices):
        index = index.to(target)
        with Timer(target) as timer:
            training_step(
                stepped, optim, inputs[index], targets[index], nn.functional.cross_entropy, autocast_dtype
            )
        if step >= warmup_steps:
            step_seconds.append(timer.seconds)
    steps_per_epoch = -(-len(targets) // batch_size)
    median = statistics.median(step_seconds)
    return {
        "step_seconds": median,
        "step_seconds_all": step_seconds,
        "steps_per_epoch": steps_per_epoch,
        "epoch_seconds": median * steps_per_epoch,
        "samples_per_second": batch_size / median,
        "method": f"median of {timed_steps} timed steps x {steps_per_epoch} steps per epoch, "
        f"after {counted(warmup_steps, 'warm-up step')}",
    }


def training_config(model: str, train_set, test_set, **settings) -> dict:
    """The record configuration of a training run: model, data sizes, device and every setting."""
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    return {
        "kind": "training",
        "threads": torch.get_num_threads(),
        "model": model,
        "data": f"FSDD {FSDD_VERSION}",
        "train_samples": len(train_set),
        "test_samples": len(test_set),
        **settings,
    }


def stored_training(store: ResultStore, model: str, train_set, test_set, **settings) -> dict:
    """``train`` through the results store: a finished identical run is reused, not repeated."""
    config = training_config(model, train_set, test_set, **settings)

    def run() -> dict:
        result = train(model, train_set, test_set, **settings)
        return {"history": result.history, "method": result.method, "epoch_seconds": result.epoch_seconds,
                "step_losses": result.step_losses}  # fmt: skip

    return store.measure(config, run)


def stored_step_timing(store: ResultStore, model: str, train_set, **settings) -> dict:
    """``time_training_steps`` through the results store (``autocast`` is ``"bf16"`` or None)."""
    autocast = settings.pop("autocast", None)
    if autocast not in (None, "bf16"):
        raise ValueError(f"autocast must be None or 'bf16', not {autocast!r}")
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    config = {
        "kind": "step_timing",
        "model": model,
        "train_samples": len(train_set),
        "autocast": autocast,
        "threads": torch.get_num_threads(),
    }
    config.update(settings)
    dtype = torch.bfloat16 if autocast == "bf16" else None
    return store.measure(
        config, lambda: time_training_steps(model, train_set, autocast_dtype=dtype, **settings)
    )


def history_frame(records: dict[str, dict]) -> pd.DataFrame:
    """Per-epoch history of each model's training record (``{model: record}``), one row per epoch."""
    return pd.concat(
        [pd.DataFrame(record["result"]["history"]).assign(model=name) for name, record in records.items()],
        ignore_index=True,
    )


def steps_frame(records: list[dict]) -> pd.DataFrame:
    """Every timed step of ``step_timing`` records, one row each (with the record's settings), and the
    epoch seconds and samples per second that step implies: the long form that figures draw medians and
    spreads from."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        settings = {k: v for k, v in config.items() if k != "kind"}
        for repeat, seconds in enumerate(result["step_seconds_all"]):
            rows.append(
                {**settings, "repeat": repeat, "step_seconds": seconds,
                 "epoch_seconds": seconds * result["steps_per_epoch"],
                 "samples_per_second": config["batch_size"] / seconds, "method": result["method"]}
            )  # fmt: skip
    return pd.DataFrame(rows)


def precision_comparison(store: ResultStore, names, train_set, batch_size: int, **settings) -> dict:
    """float32 against bf16 autocast for each model: timed steps (``steps_frame`` rows with a
    ``precision`` column), the bytes autograd saves per sample under each (exact), and the speed-up of
    bf16 with its interval and verdict (``helpers.stats.speedup``)."""
    steps, memory, verdicts = [], [], {}
    for name in names:
        timed = {}
        for precision, autocast in (("float32", None), ("bf16", "bf16")):
            record = stored_step_timing(store, name, train_set, batch_size=batch_size, autocast=autocast,
                                        **settings)  # fmt: skip
            steps.append(steps_frame([record]).assign(precision=precision))
            timed[precision] = record["result"]["step_seconds_all"]
            dtype = torch.bfloat16 if autocast else None
            saved, fixed = saved_bytes_per_sample(build_model(name), dtype)
            memory.append({"model": name, "precision": precision, "saved_mib_per_sample": saved / MIB,
                           "saved_mib_fixed": fixed / MIB})  # fmt: skip
        verdicts[name] = speedup(timed["float32"], timed["bf16"])
    return {
        "steps": pd.concat(steps, ignore_index=True),
        "memory": pd.DataFrame(memory),
        "speedups": verdicts,
    }


def spread_table(steps: pd.DataFrame, by: list[str], column: str = "epoch_seconds") -> pd.DataFrame:
    """Median, min and max of ``column`` per group of ``by``, and the number of repeats."""
    return steps.groupby(by)[column].agg(median="median", min="min", max="max", repeats="count").reset_index()


def milliseconds(seconds, unit: str = " ms") -> str:
    """Repeated seconds as ``1,234 ms (1,100–1,300, 5 steps)``: the median, then the fastest and the slowest,
    in whole milliseconds from 100 ms up and with one decimal below."""
    found = spread(seconds)
    digits = 0 if found.median >= 0.1 else 1
    low, median, high = (f"{value * 1e3:,.{digits}f}" for value in (found.low, found.median, found.high))
    return f"{median}{unit} ({low}–{high}, {found.count} steps)"


def sweep_table(steps: pd.DataFrame, by=("model", "batch_size")) -> pd.DataFrame:
    """The timed steps of ``steps_frame`` (or ``dataparallel.steps_frame``, by model, replicas and batch)
    per group of ``by``, to read, every time to three significant digits (a GPU's 9.14 ms step, an epoch of
    0.0457 s, never "9" and "0.0"): the median step in milliseconds, the epoch it implies in seconds, and
    the epochs that the fastest and the slowest step imply."""
    by = list(by)
    step = spread_table(steps, by, "step_seconds").set_index(by)
    epoch = spread_table(steps, by, "epoch_seconds").set_index(by)
    table = pd.DataFrame(
        {
            "step time (ms), median": step["median"].map(ms),
            "epoch time (s), median": epoch["median"].map(significant),
            "epoch time (s), fastest–slowest step": [
                f"{significant(low)}–{significant(high)}"
                for low, high in zip(epoch["min"], epoch["max"], strict=True)
            ],
            "timed steps": step["repeats"],
        }
    )
    return table.rename_axis([name.replace("_", " ") for name in by])


def batch_effects(steps: pd.DataFrame) -> dict[str, dict]:
    """Per model of ``steps_frame`` rows: how much faster an epoch runs at its largest batch than at its
    smallest (``helpers.stats.speedup`` of the epochs the timed steps imply)."""
    effects = {}
    for model, rows in steps.groupby("model", sort=False):
        smallest, largest = rows["batch_size"].min(), rows["batch_size"].max()
        epochs = {size: rows.loc[rows["batch_size"] == size, "epoch_seconds"] for size in (smallest, largest)}
        effects[model] = speedup(epochs[smallest], epochs[largest])
    return effects


def explain_batch_effect(model: str, change: dict, smallest: int, largest: int, parameters: int) -> str:
    """Why ``model``'s epoch changed (or did not) from batch ``smallest`` to ``largest``, following the
    verdict of ``batch_effects`` (``change``); ``parameters``: the model's parameter count. Plain text."""
    verdict = change["verdict"]
    if verdict == "faster":
        return (
            f"{model}'s epoch is shorter at batch {largest}: two causes, which this timing does not "
            "separate. What a step costs whatever its batch (the optimizer's pass over all "
            f"{parameters:,} parameters, starting every operator) is paid {largest / smallest:.3g} times "
            "less often per epoch, and larger operators can keep the device busier"
        )
    if verdict == "slower":
        return (
            f"{model}'s epoch is longer at batch {largest} than at batch {smallest}: whatever the larger "
            "batch saves on per-step costs, each of its samples costs more there"
        )
    if verdict == "no measurable difference":
        return (
            f"{model}'s epoch takes as long at batch {largest} as at batch {smallest}: its step is work on "
            "its samples at every batch, with no per-step cost large enough to amortise"
        )
    return f"{model}'s timed steps spread too widely to tell whether a larger batch shortens its epoch"


def final_table(history: pd.DataFrame) -> pd.DataFrame:
    """The last epoch of each model's ``history_frame``, to read: accuracies in percent, the epoch's time."""
    last = history.groupby("model", sort=False).last()
    return pd.DataFrame(
        {
            "epochs": last["epoch"],
            "training accuracy, running mean (%)": (last["train_accuracy"] * 100).map("{:.1f}".format),
            "test accuracy (%)": (last["test_accuracy"] * 100).map("{:.1f}".format),
            "last epoch's time (s)": last["epoch_seconds"].map(significant),
        }
    )


def against_chance(accuracy: float, clips: int, classes: int = 10, threshold: float = 2.0) -> dict:
    """Whether a test accuracy on ``clips`` clips is above guessing among ``classes`` balanced classes.

    A guess is right with probability p = 1/classes, so the accuracy of guesses on n clips has the binomial
    standard error sqrt(p(1 − p)/n). An accuracy ``threshold`` standard errors or more above p is "above
    chance"; below that, guessing would reach it too often to tell the two apart.
    """
    chance = 1 / classes
    error = math.sqrt(chance * (1 - chance) / clips)
    above = float((accuracy - chance) / error)
    return {
        "chance": chance,
        "standard_error": error,
        "standard_errors_above": above,
        "position": f"{abs(above):.1f} standard errors {'above' if above >= 0 else 'below'}",
        "verdict": "above chance" if above >= threshold else "not distinguishable from chance",
    }


def precision_memory_table(memory: pd.DataFrame) -> pd.DataFrame:
    """``precision_comparison``'s memory rows, to read: MiB kept for backward per sample and whatever the
    batch, per model and precision (three decimals; nothing kept is 0)."""

    def mib(value: float) -> str:
        return "0" if value == 0 else f"{value:.3f}"

    return pd.DataFrame(
        {
            "kept for backward per sample (MiB)": memory["saved_mib_per_sample"].map(mib).values,
            "kept whatever the batch (MiB)": memory["saved_mib_fixed"].map(mib).values,
        },
        index=pd.MultiIndex.from_frame(memory[["model", "precision"]]),
    )


def main() -> None:
    """``python -m helpers.train``: train one model on the full official split and store the record."""
    import argparse

    from helpers.data import load_fsdd

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--run", default="cpu", help="results folder under data/results/")
    parser.add_argument("--model", default="ConvNet")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dataset = load_fsdd()
    record = stored_training(
        ResultStore(args.run),
        args.model,
        dataset.split("train"),
        dataset.split("test"),
        epochs=args.epochs,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        lr=args.lr,
        seed=args.seed,
        device=args.device,
    )
    print(pd.DataFrame(record["result"]["history"]).to_string(index=False))
    print(f"record: {ResultStore(args.run).path(record['config'])}")


if __name__ == "__main__":
    main()
