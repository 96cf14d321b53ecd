"""Running the collectives worker from the parent side, through the results store (chapter 4).

``run_task`` checks a task's settings and launches ``helpers.collectives.tasks`` on k ranks;
``stored_*`` do it through ``helpers.results`` (a finished identical measurement is reused). The records
become frames here: the support matrix, the benchmark in nccl-tests' units, and the α-β fits with what
they predict. ``helpers.collectives.tables`` turns them into the chapter's tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpers.collectives.model import (
    ALL_REDUCE_IMPLEMENTATIONS,
    BENCHMARK_OPERATIONS,
    alpha_beta_seconds,
    fit_alpha_beta,
)
from helpers.dataparallel import stored_copy_calibration
from helpers.launch import launch, run_plan
from helpers.worker import MAX_TIMEOUT_SECONDS, usable_gpus

WORKER = "helpers.collectives.tasks"
BUDGET_SHARE = 0.75  # of a benchmark launch's wall-clock limit; the rest starts the ranks and probes
BENCHMARK_LIMIT_SECONDS = 600  # a benchmark launch's wall-clock limit, unless its caller gives one
# The α-β fit of the link: two ranks, one message between them per step, each rank pinned to its own
# share of the cores where there are enough (chapter 5 prices DDP's all-reduce with this fit). More ranks
# than cores measure the scheduler as well as the link.
LINK_FIT_WORLD_SIZE = 2


def support_matrix(results: list[dict]) -> list[dict]:
    """Per operation, whether the launch's backend and device ran it (not if any rank failed: why)."""
    first = results[0]
    rows = []
    for index, record in enumerate(first["operations"]):
        statuses = [result["operations"][index]["status"] for result in results]
        failed = [status for status in statuses if status != "ok"]
        rows.append(
            {
                "backend": first["backend"],
                "device": first["device_type"],
                "operation": record["operation"],
                "supported": not failed,
                "message": failed[0].removeprefix("unsupported: ") if failed else "",
            }
        )
    return rows


def probe_support(store, backends=("gloo", "nccl"), devices=("cpu", "cuda"), gpus: int | None = None):
    """Every operation attempted on every backend and device this machine can launch (two ranks, or the
    one rank a single GPU allows NCCL); a combination the launcher refuses becomes one row with its reason.
    """
    rows = []
    limit = {"gpus": gpus} if gpus is not None else {}
    for backend in backends:
        for device in devices:
            plan = run_plan([backend], device, [2, 1], gpus).query("runs")
            if plan.empty:
                reason = run_plan([backend], device, [1], gpus)["reason"].iloc[0]
                rows.append(
                    {"backend": backend, "device": device, "operation": "(all)", "supported": False,
                     "message": reason}
                )  # fmt: skip
                continue
            ranks = int(plan["ranks"].iloc[0])
            record = stored_semantics(store, ranks, backend=backend, device=device, **limit)
            rows += [{**row, "ranks": ranks} for row in record["result"]["support"]]
    return pd.DataFrame(rows)


def benchmark_frame(rank0_result: dict) -> pd.DataFrame:
    """Rank 0's benchmark rows as a tidy table, algbw and busbw also in GB/s (10⁹ bytes, as nccl-tests)."""
    frame = pd.DataFrame(rank0_result["rows"])
    for column in ("bytes", "seconds", "algbw_bytes_per_second", "busbw_bytes_per_second"):
        if column not in frame:
            frame[column] = np.nan
    frame["algbw_GBps"] = frame["algbw_bytes_per_second"] / 1e9
    frame["busbw_GBps"] = frame["busbw_bytes_per_second"] / 1e9
    return frame


def benchmark_frames(records: list[dict]) -> pd.DataFrame:
    """``benchmark_frame`` of several ``collective_benchmark`` records in one frame, each row with its
    launch's backend and device."""
    return pd.concat(
        [
            benchmark_frame(r["result"]).assign(backend=r["config"]["backend"], device=r["config"]["device"])
            for r in records
        ],
        ignore_index=True,
    )


def _cores(cores) -> str:
    """``core 0``, ``cores 0 and 1``, ``cores 0–7`` (a run of three or more), ``cores 0, 2 and 5``."""
    if len(cores) == 1:
        return f"core {cores[0]}"
    ordered = sorted(cores)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"cores {ordered[0]}–{ordered[-1]}"
    return "cores " + ", ".join(map(str, cores[:-1])) + f" and {cores[-1]}"


def is_pinned(record: dict) -> bool | None:
    """Whether a benchmark launch's ranks each ran on a share of the cores of their own (disjoint shares,
    from the cores every rank recorded); None where the placement was not recorded."""
    cores = record["result"].get("cores_per_rank")
    if not cores or None in cores:
        return None
    return len(cores) > 1 and sum(map(len, cores)) == len(set().union(*map(set, cores)))


def placement_of(record: dict) -> str:
    """Where one benchmark launch's ranks ran: ``pinned, rank 0 on core 0, rank 1 on core 1``, or ``not
    pinned, 3 ranks on 2 cores`` (more ranks than cores), or ``placement not recorded``."""
    pinned, cores = is_pinned(record), record["result"].get("cores_per_rank")
    if pinned is None:
        return "placement not recorded"
    if pinned:
        return "pinned, " + ", ".join(f"rank {rank} on {_cores(c)}" for rank, c in enumerate(cores))
    shared = len(set().union(*map(set, cores)))
    ranks = f"{len(cores)} rank{'' if len(cores) == 1 else 's'}"
    return f"not pinned, {ranks} on {shared} core{'' if shared == 1 else 's'}"


def placement(records: list[dict]) -> str:
    """``placement_of`` every benchmark launch, each named by its backend and rank count."""
    phrases = [
        f"{record['config']['backend']}, {record['config']['world_size']} ranks: {placement_of(record)}"
        for record in records
    ]
    return "; ".join(phrases) + "."


def bandwidth_reference(store, device: str, gpus: int | None = None) -> tuple[str, float] | None:
    """The line a bandwidth figure is held against: between GPUs the measured GPU-to-GPU copy, on a CPU
    a copy from one buffer in memory to another (through the store); None for ranks sharing one GPU."""
    if device == "cpu":
        copy = stored_copy_calibration(store, device="cpu", fresh=False)["result"]
        return "one buffer copied to another in memory", copy["bytes"] / copy["seconds"]
    if usable_gpus(gpus) >= 2:
        copy = stored_copy_calibration(store, device="cuda:0", to="cuda:1", fresh=False)["result"]
        return "a copy from GPU 0 to GPU 1", copy["bytes"] / copy["seconds"]
    return None


def alpha_beta_fits(frame: pd.DataFrame, world_sizes=None) -> pd.DataFrame:
    """α and β per backend, device and operation, on the rows of ``world_sizes`` (None: every world size
    of two or more ranks, pooled): each all-reduce implementation with its own formula
    (``model.alpha_beta_terms``), and the ring broadcast on its naive, one-chunk rows only — so that its
    pipelined rows stay out of the fit and test the model. ``ranks`` names the world sizes fitted.
    """
    rows = []
    usable = frame[(frame["status"] == "ok") & (frame["world_size"] > 1)]
    if world_sizes is not None:
        usable = usable[usable["world_size"].isin(list(world_sizes))]
    for (backend, device, operation), group in usable.groupby(["backend", "device", "operation"]):
        if operation == "ring_broadcast":
            group = group[group["chunks"] == 1]
        elif operation not in ALL_REDUCE_IMPLEMENTATIONS:
            continue
        if len(group) >= 2:
            fit = fit_alpha_beta(group)
            ranks = ", ".join(str(k) for k in sorted(group["world_size"].unique()))
            rows.append({"backend": backend, "device": device, "operation": operation, "ranks": ranks, **fit})
    return pd.DataFrame(rows)


def check_benchmark_world_sizes(world_sizes) -> None:
    """ValueError unless the benchmark measures ``LINK_FIT_WORLD_SIZE`` ranks, where the link is fitted."""
    if LINK_FIT_WORLD_SIZE not in world_sizes:
        raise ValueError(
            f"benchmark_world_sizes {list(world_sizes)} must include {LINK_FIT_WORLD_SIZE}: the α-β fit "
            "of the link (which chapter 5 uses) is on two ranks"
        )


def modelled_all_reduces(frame: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """Every all-reduce row of the benchmark with what its own implementation's fit predicts for it."""
    return pd.concat(
        [
            with_model_seconds(frame[frame["operation"] == operation], fits, operation)
            for operation in ALL_REDUCE_IMPLEMENTATIONS
        ],
        ignore_index=True,
    )


def with_model_seconds(frame: pd.DataFrame, fits: pd.DataFrame, operation: str = "all_reduce"):
    """The benchmark rows with what the α-β model predicts for them from ``operation``'s fit (the first
    such row of ``fits`` for the row's backend and device), each row with its own implementation's
    formula: ring all-reduce, parameter server or pipelined ring broadcast."""
    predicted = []
    for row in frame.itertuples():
        fit = fits.query("backend == @row.backend and device == @row.device and operation == @operation")
        formula = row.operation if row.operation in (*ALL_REDUCE_IMPLEMENTATIONS, "ring_broadcast") else None
        if fit.empty or row.status != "ok" or formula is None:
            predicted.append(np.nan)
            continue
        alpha, beta = fit["alpha_seconds"].iloc[0], fit["seconds_per_byte"].iloc[0]
        chunks = int(row.chunks) if formula == "ring_broadcast" else 1
        predicted.append(float(alpha_beta_seconds(formula, row.bytes, row.world_size, alpha, beta, chunks)))
    return frame.assign(model_seconds=predicted)


# ---------------------------------------------------------------------------------------------------------
# Launching, through the results store


TASK_DEFAULTS = {
    "semantics": {"timeout_seconds": 30},
    "verify": {
        "timeout_seconds": 60,
        "sizes": [1, 7, 1000, 1001],
        "chunks": [1, 2, 3, 8],
        "dtypes": ["int64", "float64"],
        "seed": 0,
    },
    "deadlock": {"timeout_seconds": 5, "skip_rank": None},
    "benchmark": {
        "timeout_seconds": 60,
        "sizes_bytes": [2**p for p in range(10, 27, 2)],
        "operations": list(BENCHMARK_OPERATIONS),
        "chunks": [1, 4, 16],
        "iterations": 10,
        "warmup_iterations": 2,
        "time_budget_seconds": None,  # None: BUDGET_SHARE of the launch's wall-clock limit
        "pin_cores": True,  # one share of the cores per rank where there are enough (helpers.worker)
    },
}


def collective_config(task: str, **settings) -> dict:
    """A worker configuration for ``task``: backend gloo on the CPU and the task's defaults, overridden."""
    if task not in TASK_DEFAULTS:
        raise ValueError(f"task must be one of {', '.join(TASK_DEFAULTS)}, not {task!r}")
    config = {"task": task, "backend": "gloo", "device": "cpu", **TASK_DEFAULTS[task]}
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown {task} setting(s): {', '.join(unknown)}")
    config.update(settings)
    if not 0 < config["timeout_seconds"] <= MAX_TIMEOUT_SECONDS:
        raise ValueError(
            f"timeout_seconds must be in (0, {MAX_TIMEOUT_SECONDS}], not {config['timeout_seconds']!r}"
        )
    unknown_operations = sorted(set(config.get("operations", [])) - set(BENCHMARK_OPERATIONS))
    if unknown_operations:
        raise ValueError(
            f"unknown operation(s) {unknown_operations}; known: {', '.join(BENCHMARK_OPERATIONS)}"
        )
    return config


def run_task(
    task: str, world_size: int, time_limit_seconds: float = 300, output: Path | None = None, **settings
) -> list[dict]:
    """Launch ``task`` on ``world_size`` ranks (checked before anything starts); every rank's result."""
    config = collective_config(task, **settings)
    if task == "deadlock" and world_size < 2:
        raise ValueError("the deadlock demo needs at least two ranks: one to skip, one to wait")
    if task == "benchmark":
        budget = config["time_budget_seconds"] or BUDGET_SHARE * time_limit_seconds
        if not 0 < budget <= BUDGET_SHARE * time_limit_seconds:
            raise ValueError(
                f"time_budget_seconds must be positive and at most {BUDGET_SHARE:.0%} of the launch's "
                f"{time_limit_seconds:g} s limit, not {config['time_budget_seconds']!r}"
            )
        config["time_budget_seconds"] = budget
    return launch(config, world_size, module=WORKER, time_limit_seconds=time_limit_seconds, output=output)


def _stored(store, kind: str, task: str, world_size: int, time_limit_seconds: float, summarize, **settings):
    config = {"kind": kind, "world_size": world_size, **collective_config(task, **settings)}
    return store.measure(
        config, lambda: summarize(run_task(task, world_size, time_limit_seconds, **settings))
    )


def stored_semantics(store, world_size: int, time_limit_seconds: float = 180, **settings) -> dict:
    """The semantics demo through the results store; result: every rank's record and the support matrix."""
    return _stored(
        store,
        "collective_semantics",
        "semantics",
        world_size,
        time_limit_seconds,
        lambda results: {"ranks": results, "support": support_matrix(results)},
        **settings,
    )


def stored_verify(store, world_size: int, time_limit_seconds: float = 180, **settings) -> dict:
    """The exactness checks through the results store; result: rank 0's checks, whether all ranks passed."""

    def summarize(results: list[dict]) -> dict:
        return {
            "checks": results[0]["checks"],
            "sizes": results[0]["sizes"],
            "all_equal": all(c["equal"] for r in results for c in r["checks"]),
        }

    return _stored(
        store, "collective_verify", "verify", world_size, time_limit_seconds, summarize, **settings
    )


def stored_deadlock(store, world_size: int, time_limit_seconds: float = 120, **settings) -> dict:
    """The deadlock demo through the results store; result: every rank's outcome."""
    return _stored(
        store,
        "collective_deadlock",
        "deadlock",
        world_size,
        time_limit_seconds,
        lambda results: {"ranks": results},
        **settings,
    )


def stored_benchmark(
    store, world_size: int, time_limit_seconds: float = BENCHMARK_LIMIT_SECONDS, **settings
) -> dict:
    """The benchmark through the results store; result: rank 0's rows (``benchmark_frame`` tabulates them)
    and the cores every rank ran on (``cores_per_rank``, for ``placement``)."""
    return _stored(
        store,
        "collective_benchmark",
        "benchmark",
        world_size,
        time_limit_seconds,
        lambda results: {**results[0], "cores_per_rank": [result.get("cores") for result in results]},
        **settings,
    )
