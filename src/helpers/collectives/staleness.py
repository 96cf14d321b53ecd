"""Asynchronous SGD simulated in one process: what stale gradients do to training (chapter 4).

An asynchronous parameter server applies each worker's gradient when it arrives, computed on
parameters that are several updates old. Simulating it in one process makes staleness the only
difference between runs of one seed: same clips, same batches, same start, same optimizer. Several seeds
(each its own clips, batches and start) give the spread; the comparison is the number of steps to a
target loss, paired by seed.
"""

from __future__ import annotations

import statistics
from collections import deque

import pandas as pd
import torch
from torch import nn
from torch.utils.data import TensorDataset
from tqdm import tqdm

from helpers.data import load_fsdd, take
from helpers.models import build_model
from helpers.stats import MIN_LAUNCHES, verdict
from helpers.train import check_positive, epoch_batches, evaluate, make_optimizer


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
    target_loss: float | None = None,
) -> dict:
    """SGD in which the gradient applied at step t was computed on the parameters of step t−staleness.

    This is what an asynchronous parameter server does to a worker whose gradient arrives after
    ``staleness`` other updates (with k workers taking turns, staleness ≈ k−1). A queue keeps the last
    staleness+1 parameter snapshots; early steps use the oldest one there is. Staleness 0 is synchronous
    SGD. Batches are ``epoch_batches`` of ``seed``, so runs of one seed differ only in staleness.
    Returns per step the loss of the batch (at the parameters it was computed on) and, every
    ``eval_every`` steps and at the end, the current parameters' loss and accuracy on ``evaluation``.
    With ``target_loss`` the run stops at the first evaluation whose loss is at most the target, and
    ``steps_to_target`` is that step (None: not within ``steps``).
    """
    if not isinstance(staleness, int) or staleness < 0:
        raise ValueError(f"staleness must be a non-negative integer, not {staleness!r}")
    check_positive(steps=steps, batch_size=batch_size, eval_every=eval_every)
    if target_loss is not None and not target_loss > 0:
        raise ValueError(f"target_loss must be positive or None, not {target_loss!r}")
    torch.manual_seed(seed)
    model = build_model(model_name)
    stale_copy = build_model(model_name)  # where the late worker computes its gradient
    updater = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = train.tensors
    snapshots: deque[list[torch.Tensor]] = deque(maxlen=staleness + 1)
    history, reached = [], None
    for step, index in enumerate(epoch_batches(len(targets), batch_size, seed, steps), start=1):
        if staleness:
            snapshots.append([parameter.detach().clone() for parameter in model.parameters()])
            with torch.no_grad():
                for target, value in zip(stale_copy.parameters(), snapshots[0], strict=True):
                    target.copy_(value)
            worker = stale_copy
        else:  # the gradient of the current parameters: no snapshot to copy
            worker = model
        worker.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(worker(inputs[index]), targets[index])
        loss.backward()
        if staleness:
            for parameter, stale in zip(model.parameters(), stale_copy.parameters(), strict=True):
                parameter.grad = stale.grad
        updater.step()
        row = {"step": step, "staleness": staleness, "batch_loss": loss.item()}
        if step % eval_every == 0 or step == steps:
            row["eval_loss"], row["eval_accuracy"] = evaluate(model, evaluation)
            if target_loss is not None and row["eval_loss"] <= target_loss:
                reached = step
        history.append(row)
        if reached:
            break
    until = f", until the loss on the evaluated clips is at most {target_loss:g}" if target_loss else ""
    return {
        "history": history,
        "steps_to_target": reached,
        "method": f"{optimizer} (lr {lr:g}), batch {batch_size}, each epoch reshuffled; evaluated every "
        f"{eval_every} steps{until}, at most {steps} steps",
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


def stored_stale_sweep(store, model_name: str, stalenesses, seeds, train_samples, **settings) -> list[dict]:
    """``stored_stale_training`` for every staleness and seed, seeds outermost: each run's record."""
    grid = [(seed, tau) for seed in seeds for tau in stalenesses]
    return [
        stored_stale_training(store, model_name, tau, train_samples, seed=seed, **settings)
        for seed, tau in tqdm(grid, desc="staleness runs")
    ]


def stale_history(records: list[dict]) -> pd.DataFrame:
    """Every run's per-step history in one frame, with its seed."""
    return pd.concat(
        [pd.DataFrame(r["result"]["history"]).assign(seed=r["config"]["seed"]) for r in records],
        ignore_index=True,
    )


STEP_VERDICTS = {"slower": "more steps", "faster": "fewer steps"}  # stats.verdict's words, said of steps


# Each seed's steps over its synchronous run's: the median of those ratios, not a ratio of the medians.
RATIO = "per-seed ratio to τ = 0, median"


def steps_to_target_table(records: list[dict]) -> pd.DataFrame:
    """Per staleness τ: the steps each seed took to the target loss and, paired by seed, how many times
    the synchronous (τ = 0) run's steps that is — the median and range over seeds, and its verdict.

    A run that missed the target within its steps counts as that many steps, marked "≥": its ratio is a
    lower bound. The verdict is about steps, not time: ``stats.verdict`` of the synchronous steps over the
    stale ones, in words of steps — "more steps" when every seed's stale run took more, "fewer steps" when
    every one took fewer, "no measurable difference" only when every ratio lies within 10 % of 1; with
    fewer than ``stats.MIN_LAUNCHES`` seeds, or a synchronous run that missed the target, "not resolved".
    """
    runs = pd.DataFrame(
        [{"staleness": r["config"]["staleness"], "seed": r["config"]["seed"],
          "steps": r["result"]["steps_to_target"], "cap": r["config"]["steps"]} for r in records]
    )  # fmt: skip
    runs["missed"] = runs["steps"].isna()
    runs["counted"] = runs["steps"].fillna(runs["cap"]).astype(int)
    synchronous = runs[runs["staleness"] == 0].set_index("seed")
    table = []
    for tau, group in runs.groupby("staleness"):
        group = group[group["seed"].isin(synchronous.index)]
        ratios = group["counted"].to_numpy() / synchronous.loc[group["seed"], "counted"].to_numpy()
        bound = bool(group["missed"].any())
        low, high = float(ratios.min()), float(ratios.max())
        judged = verdict(1 / high, 1 / low)
        if len(group) < MIN_LAUNCHES or synchronous["missed"].any() or (bound and judged != "slower"):
            judged = "not resolved"
        judged = STEP_VERDICTS.get(judged, judged)
        marks = ["≥" if missed else "" for missed in group["missed"]]
        table.append(
            {
                "staleness τ (steps)": tau,
                "seeds": len(group),
                "steps to the target, per seed": ", ".join(
                    f"{mark}{steps}" for mark, steps in zip(marks, group["counted"], strict=True)
                ),
                "median steps": ("≥" if bound else "") + f"{statistics.median(group['counted']):g}",
                RATIO: "—" if tau == 0 else ("≥" if bound else "") + f"{statistics.median(ratios):.2f}",
                "range over seeds": "—" if tau == 0 else f"{low:.2f}–{high:.2f}",
                "verdict against τ = 0": "—" if tau == 0 else judged,
            }
        )
    return pd.DataFrame(table).set_index("staleness τ (steps)")


def describe_staleness(table: pd.DataFrame, tau: int) -> str:
    """One phrase for the chapter's prose, the verdict first: how many steps τ-stale gradients took against
    synchronous training. A verdict of direction ("more steps", "fewer steps") says no more than that
    every seed agreed: ``more steps, consistent over 3 seeds: 1.20× as many as synchronous training
    (median; 1.10–1.25× over the seeds)``; any other verdict keeps its words, ``not resolved, 1.02× as
    many as synchronous training (0.90–1.20× over 3 seeds)``."""
    if tau not in table.index:
        return f"not measured (no τ = {tau} run)"
    row = table.loc[tau]
    if tau == 0:
        return f"{row['median steps']} steps (median of {row['seeds']} seeds)"
    judged = row["verdict against τ = 0"]
    if judged in STEP_VERDICTS.values():
        return (
            f"{judged}, consistent over {row['seeds']} seeds: {row[RATIO]}× as many as synchronous training "
            f"(median; {row['range over seeds']}× over the seeds)"
        )
    return (
        f"{judged}, {row[RATIO]}× as many as synchronous training "
        f"({row['range over seeds']}× over {row['seeds']} seeds)"
    )


def describe_stalenesses(table: pd.DataFrame) -> str:
    """Every stale τ of ``table`` in one phrase, each with the workers that make it (with k workers taking
    turns a gradient is about k−1 updates old): ``with gradients 4 steps stale (about 5 workers taking
    turns), more steps, consistent over 3 seeds: 1.20× as many …``."""
    phrases = [
        f"with gradients {tau} steps stale (about {tau + 1} workers taking turns), "
        f"{describe_staleness(table, tau)}"
        for tau in table.index
        if tau
    ]
    return "; ".join(phrases) or "no stale run was measured"


def describe_method(records: list[dict]) -> str:
    """How the stale runs trained and stopped, from their settings: ``Adam (lr 0.001) on gradients τ steps
    stale, batch 20, each epoch reshuffled; the loss on the training clips after every step, until it is at
    most 1.8, at most 200 steps; 3 seeds``."""
    config = records[0]["config"]
    every = config.get("eval_every", 10)
    when = "after every step" if every == 1 else f"every {every} steps"
    optimizer = {"adam": "Adam", "sgd": "SGD"}.get(config.get("optimizer", "sgd"), config.get("optimizer"))
    until = f", until it is at most {config['target_loss']:g}" if config.get("target_loss") else ""
    seeds = len({record["config"]["seed"] for record in records})
    clips = {"train": "training", "test": "test"}[config.get("evaluate_on", "train")]
    return (
        f"{optimizer} (lr {config['lr']:g}) on gradients τ steps stale, batch {config['batch_size']}, each "
        f"epoch reshuffled; the loss on the {clips} clips {when}{until}, at most {config['steps']} steps; "
        f"{seeds} seed{'' if seeds == 1 else 's'}"
    )
