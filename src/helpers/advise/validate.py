"""The advice checked where it can be: real DDP on K ranks of this machine (``--validate K``, chapter 7),
every launch a fresh set of processes, its step times against the time model's prediction from the
single-device measurements (``advise.measure``), which never saw a multi-rank run.

The rank side (``run_rank``, started by ``helpers.launch`` under torchrun): the model built from its spec
(``module:callable``, importable from the launch's directory), wrapped in ``DistributedDataParallel``, each
rank timing its steps on random inputs of its share of the global batch; rank 0's step times are the
launch's. Gloo on CPU ranks, NCCL across GPUs.
"""

from __future__ import annotations

import statistics
import sys

import pandas as pd
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from helpers.advise.counting import Counted, load_model
from helpers.advise.measure import measure_steps, synthetic_loss, time_model
from helpers.costmodel import timemodel
from helpers.launch import launch
from helpers.results import ResultStore
from helpers.stats import launch_speedup
from helpers.train import WARMUP_STEPS, Timer, counted, make_optimizer, training_step
from helpers.worker import prepare_rank, process_group, worker_main, write_rank_result

MODULE = "helpers.advise.validate"


def run_rank(config: dict, output) -> None:
    """One rank: ``warmup_steps`` + ``timed_steps`` DDP steps of the model on random inputs of its share of
    the global batch, each step timed (host clock, after synchronising on a GPU)."""
    rank, world_size, device = prepare_rank(config)
    with process_group(config, device, output):
        torch.manual_seed(0)  # the same weights in every rank (DDP broadcasts rank 0's anyway)
        model = load_model(config["spec"]).to(device).train()
        wrapped = DistributedDataParallel(
            model,
            device_ids=[device] if device.type == "cuda" else None,
            bucket_cap_mb=config["bucket_cap_mb"],
        )
        optim = make_optimizer(config["optimizer"], model.parameters(), 1e-3)
        torch.manual_seed(1 + rank)
        inputs = torch.randn(config["global_batch_size"] // world_size, *config["input_shape"], device=device)
        autocast = torch.bfloat16 if config["dtype"] == "bf16" else None
        steps = []
        for _ in range(config["warmup_steps"] + config["timed_steps"]):
            with Timer(device) as timer:
                training_step(wrapped, optim, inputs, None, synthetic_loss, autocast)
            steps.append(timer.seconds)
        write_rank_result(
            output, rank, world_size, config, device, {"step_seconds_all": steps[config["warmup_steps"] :]}
        )


def validation_config(
    spec: str, counted: Counted, global_batch: int, backend: str, device: str, timed_steps: int = 5
) -> dict:
    """What a validation launch gets (and is stored under)."""
    return {
        "spec": spec,
        "model": counted.name,
        "input_shape": list(counted.input_shape),
        "dtype": counted.dtype,
        "optimizer": counted.optimizer,
        "global_batch_size": global_batch,
        "backend": backend,
        "device": device,
        "bucket_cap_mb": 25,
        "warmup_steps": WARMUP_STEPS,
        "timed_steps": timed_steps,
        "timeout_seconds": 60,
    }


def stored_launch(store: ResultStore, config: dict, world_size: int, number: int, time_limit_seconds: float):
    """One launch through the store (``number`` tells the independent launches of one setting apart)."""
    keyed = {"kind": "advise_validation", "world_size": world_size, "launch": number, **config}

    def run() -> dict:
        results = launch(config, world_size, module=MODULE, time_limit_seconds=time_limit_seconds)
        return {"step_seconds_all": results[0]["step_seconds_all"], "threads": results[0]["threads"]}

    return store.measure(keyed, run)


def validate(
    store: ResultStore,
    spec: str,
    counted: Counted,
    global_batch: int,
    world_sizes,
    model_time,
    *,
    backend: str = "gloo",
    device: str = "cpu",
    launches: int = 3,
    timed_steps: int = 5,
    time_limit_seconds: float = 300,
) -> pd.DataFrame:
    """Launch DDP on every world size ``launches`` times, alternating, and compare rank 0's median step
    with ``timemodel.predict_step`` (DDP with overlap) of ``model_time``: one row per world size with the
    prediction and its band over the link's fits (``TimeModel.link_variants``), the median launch, its
    spread across launches and the error (%)."""
    config = validation_config(spec, counted, global_batch, backend, device, timed_steps)
    order = [(number, k) for number in range(launches) for k in world_sizes]
    medians: dict[int, list[list[float]]] = {k: [] for k in world_sizes}
    for number, k in tqdm(order, desc=f"DDP launches of {counted.name}"):
        record = stored_launch(store, config, k, number, time_limit_seconds)
        medians[k].append(record["result"]["step_seconds_all"])
    rows = []
    for k, runs in medians.items():
        parts, low, high = timemodel.predict_step_band(
            "ddp_overlap", counted.name, global_batch, k, model_time
        )
        predicted = parts["step_seconds"]
        per_launch = [statistics.median(steps) for steps in runs]
        measured = statistics.median(per_launch)
        ratio = launch_speedup(runs, [[predicted]] * len(runs))  # measured over predicted, across launches
        rows.append(
            {
                "model": counted.label,
                "ranks": k,
                "global_batch": global_batch,
                "predicted_seconds": predicted,
                "predicted_low_seconds": low,
                "predicted_high_seconds": high,
                "measured_seconds": measured,
                "launch_low": min(per_launch),
                "launch_high": max(per_launch),
                "launches": len(runs),
                "error_percent": (predicted / measured - 1) * 100,
                # the error's 95 % interval across launches (a bootstrap of the median launch)
                "error_low": (1 / ratio["high"] - 1) * 100,
                "error_high": (1 / ratio["low"] - 1) * 100,
            }
        )
    return pd.DataFrame(rows)


def calibrate_and_validate(
    store: ResultStore, spec: str, counted: Counted, batches, global_batch: int, world_sizes, *,
    backend: str, device: str, launches: int, timed_steps: int, repeats: int,
):  # fmt: skip
    """Chapter 7's held-out test of one model as one comparison: its one-process step times at every
    batch of ``batches`` (``measure.measure_steps``, ``repeats`` runs each), the time model they calibrate
    (``measure.time_model``) and the DDP launches that judge its prediction (``validate``). A machine's
    speed drifts from day to day, so the calibration and the launches are reused together or measured
    again together (``store.together``), never one of them alone. Returns (step times, validation)."""

    def both():
        steps = measure_steps(
            store, spec, counted, batches, device=device, repeats=repeats, timed_steps=timed_steps
        )
        model_time = time_model(store, steps, counted.parameters, backend, device)
        table = validate(
            store, spec, counted, global_batch, world_sizes, model_time,
            backend=backend, device=device, launches=launches, timed_steps=timed_steps,
        )  # fmt: skip
        return steps, table

    return store.together(both)


def as_validated(table: pd.DataFrame) -> pd.DataFrame:
    """``validate``'s rows in the form chapter 5's figure of predicted against measured steps takes: one
    panel per rank count, the launches' range as the measured spread, the link's band as the predicted one."""
    return pd.DataFrame({
        "model": table["model"], "method": table["ranks"].map(lambda k: f"DDP, {counted(k, 'rank')}"),
        "step_seconds": table["measured_seconds"], "predicted_seconds": table["predicted_seconds"],
        "predicted_low_seconds": table["predicted_low_seconds"],
        "predicted_high_seconds": table["predicted_high_seconds"],
        "step_min": table["launch_low"], "step_max": table["launch_high"],
    })  # fmt: skip


if __name__ == "__main__":
    sys.exit(worker_main(run_rank, "one rank of a DDP validation of helpers.advise"))
