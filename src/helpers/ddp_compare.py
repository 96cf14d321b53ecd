"""Chapter 3's comparisons with DDP's launches: chapter 2's DataParallel timed in this process, and the
same training loop under Lightning, each measured in the rounds of the chapter's sweep (``ddp.run_sweeps``
with ``alongside``) and set against that round's DDP launch of the same settings, so that a slow spell of
the machine falls on both sides of a comparison.
"""

from __future__ import annotations

import re

import pandas as pd

from helpers import lightning_ddp
from helpers.dataparallel import stored_dataparallel_timing
from helpers.ddp import median_of_medians, stored_ddp_run
from helpers.ddp_results import describe_change, in_ms, ms, setting_text
from helpers.stats import describe_speedup, launch_speedup


def chapter_rounds(
    store, models, train_set, devices: list[str], batch_size: int, warmup_steps: int,
    lightning_models, world_sizes, settings: dict,
):  # fmt: skip
    """The ``alongside`` of chapter 3's ``ddp.run_sweeps``: in round n, DataParallel timed on each of
    ``models`` (``time_dataparallel``), then Lightning's launch n of each of ``lightning_models`` where
    Lightning is installed (``lightning_ddp.launch_round``; none: no Lightning)."""

    def alongside(number: int) -> None:
        time_dataparallel(store, models, train_set, devices, batch_size, warmup_steps, number)
        if lightning_models and lightning_ddp.available():
            lightning_ddp.launch_round(store, lightning_models, world_sizes, settings, number)

    return alongside


def time_dataparallel(
    store, models, train_set, devices: list[str], batch_size: int, warmup_steps: int, number: int,
    timed_steps: int = 5,
) -> None:  # fmt: skip
    """Chapter 2's DataParallel timed in this process (seed ``number``, its own model and warm-up) on each
    of ``models``: round ``number`` of ``dataparallel_against_ddp``, run by ``ddp.run_sweeps`` beside
    that round's DDP launches."""
    for name in models:
        stored_dataparallel_timing(
            store, name, train_set, devices=devices, batch_size=batch_size, timed_steps=timed_steps,
            warmup_steps=warmup_steps, seed=number,
        )  # fmt: skip


def dataparallel_against_ddp(
    store, models, train_set, devices: list[str], batch_size: int, settings: dict, ranks: int,
    timings: int, warmup_steps: int, timed_steps: int = 5,
) -> pd.DataFrame:  # fmt: skip
    """Chapter 2's DataParallel against DDP on ``ranks`` ranks with ``settings`` (the chapter's common
    DDP settings), per model: DataParallel's timing n (``time_dataparallel``) against DDP's launch n of
    the same settings, ``timings`` rounds; both are reused from the store where the chapter's rounds
    measured them side by side. Each side's median step in ms, and DDP's speed-up over DataParallel across
    the rounds (the comparisons themselves, per model, in the table's ``attrs["changes"]``)."""
    rows, changes = [], {}
    for name in models:
        parallel, distributed = [], []
        for number in range(timings):
            parallel.append(stored_dataparallel_timing(
                store, name, train_set, devices=devices, batch_size=batch_size, timed_steps=timed_steps,
                warmup_steps=warmup_steps, seed=number)["result"]["step_seconds_all"])  # fmt: skip
            launched = stored_ddp_run(store, ranks, launch_number=number, model=name, **settings)
            distributed.append(launched["result"]["step_seconds_all"])
        changes[name] = launch_speedup(parallel, distributed)
        verdict = describe_speedup(changes[name], unit="round")
        rows.append({"model": name, "replicas": ranks,
                     "DataParallel step (ms)": ms(median_of_medians(parallel)),
                     "DDP step (ms)": ms(median_of_medians(distributed)),
                     "DDP against DataParallel": verdict})  # fmt: skip
    table = pd.DataFrame(rows).set_index("model")
    table.attrs["changes"] = changes
    return table


def dataparallel_answer(table: pd.DataFrame) -> str:
    """``dataparallel_against_ddp``'s verdicts in one phrase for the answer box: ```LinearNet``: faster,
    2.12×; …``, each without its interval (``ddp_results.describe_change``'s brief form), which the table
    gives."""
    changes = table.attrs["changes"]
    return "; ".join(f"`{m}` {describe_change(changes[m], unit='round', brief=True)}" for m in changes)


def framework_table(frameworks: dict) -> pd.DataFrame:
    """``lightning_ddp.compare``'s table as chapter 3 shows its tables: indexed by model and framework,
    steps in ms."""
    return in_ms(frameworks["table"]).set_index(["model", "framework"])


def framework_note(frameworks: dict) -> str:
    """``lightning_ddp.compare``'s note with its rank counts in the singular or plural ("1 rank", "4
    ranks"), not "rank(s)", and one launch as "1 launch each"; the launcher's reasons it quotes are left as
    they are."""
    note = re.sub(r"\b(\d+) rank\(s\)", lambda m: setting_text("ranks", int(m.group(1))), frameworks["note"])
    return re.sub(r"\b1 launches each\b", "1 launch each", note)


def framework_title(backend: str, frameworks: dict) -> str:
    """The Lightning figure's title: ``DDP (gloo, 1 rank): by hand, Lightning``."""
    return f"DDP ({backend}, {setting_text('ranks', frameworks['ranks'])}): by hand, Lightning"


def dataparallel_reading(devices: list[str], where) -> str:
    """What DataParallel on ``devices`` (its replicas' devices, as timed) against DDP's ranks where they ran
    (``ddp_placement.Placement``) ranks: the two methods' overheads on shared cores or on one shared GPU, or
    the two methods on a GPU per replica and per rank."""
    if where.device == "cpu":
        return (
            "It has all the threads while each DDP rank has its share: read this as the two methods' "
            f"overheads on the same {where.cores} cores, not as a ranking for GPUs."
        )
    replicas = len(devices)
    together = len(set(devices)) < replicas
    if not (together or where.shares_gpu):
        return f"Each of the {replicas} replicas and each DDP rank has a GPU of its own."
    placed = f"run in one process on {where.shared or 'one GPU'}" if together else "have a GPU each"
    ranks = "have a GPU each"
    if where.shares_gpu:
        ranks = "take turns on the same GPU" if together else f"take turns on {where.shared}"
    staged = ", every gradient bucket staged through host memory" if where.staged else ""
    return (
        f"Here DataParallel's {replicas} replicas {placed}, and DDP's {where.ranks} {where.name} ranks "
        f"{ranks}{staged}: read this as the two methods' overheads on a shared GPU, not as a ranking for "
        f"{replicas} GPUs."
    )
