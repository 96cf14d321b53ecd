"""Running the collectives worker from the parent side, through the results store, and reading its results
(chapter 4).

``run_task`` checks a task's settings and launches ``helpers.collectives.tasks`` on k ranks;
``stored_*`` do it through ``helpers.results`` (a finished identical measurement is reused); the rest
turns rank files and records into the chapter's tables: the semantics table and support matrix, the
exactness summary, the benchmark frame in nccl-tests' units, the α-β fits and the ring against the library.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpers.collectives.model import (
    ALL_REDUCE_IMPLEMENTATIONS,
    BENCHMARK_OPERATIONS,
    SEMANTIC_OPERATIONS,
    expected_semantics,
    fit_alpha_beta,
    ring_all_reduce_seconds,
    ring_broadcast_seconds,
)
from helpers.dataparallel import stored_copy_calibration
from helpers.launch import launch, run_plan
from helpers.worker import MAX_TIMEOUT_SECONDS, usable_gpus

WORKER = "helpers.collectives.tasks"
BUDGET_SHARE = 0.75  # of a benchmark launch's wall-clock limit; the rest starts the ranks and probes


def semantics_frame(results: list[dict]) -> pd.DataFrame:
    """One row per (operation, rank): what the rank held before and after, and the operation's status."""
    rows = []
    for result in results:
        for record in result["operations"]:
            rows.append(
                {
                    "operation": record["operation"],
                    "rank": result["rank"],
                    "before": record["before"],
                    "after": record["after"],
                    "status": record["status"],
                }
            )
    order = {name: index for index, name in enumerate(SEMANTIC_OPERATIONS)}
    frame = pd.DataFrame(rows)
    return frame.sort_values(
        ["operation", "rank"], key=lambda c: c.map(order) if c.name == "operation" else c, ignore_index=True
    )


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


def benchmark_frame(rank0_result: dict) -> pd.DataFrame:
    """Rank 0's benchmark rows as a tidy table, algbw and busbw also in GB/s (10⁹ bytes, as nccl-tests)."""
    frame = pd.DataFrame(rank0_result["rows"])
    for column in ("bytes", "seconds", "algbw_bytes_per_second", "busbw_bytes_per_second"):
        if column not in frame:
            frame[column] = np.nan
    frame["algbw_GBps"] = frame["algbw_bytes_per_second"] / 1e9
    frame["busbw_GBps"] = frame["busbw_bytes_per_second"] / 1e9
    return frame


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


def message_size_effect(frame: pd.DataFrame, backend: str, ranks: int, chunks: int) -> dict:
    """How fast, per byte, one unchunked broadcast of N/``chunks`` bytes ran against one of N bytes (the
    largest size), from the S = 1 rows: above 1, a chunk is cheaper per byte even without any overlap."""
    naive = frame.query(
        "operation == 'ring_broadcast' and chunks == 1 and status == 'ok' and backend == @backend "
        "and world_size == @ranks"
    ).set_index("bytes")["algbw_bytes_per_second"]
    whole = naive.index.max()
    part = whole // chunks
    ratio = naive[part] / naive[whole] if part in naive.index and chunks > 1 else float("nan")
    return {"one message of N/S bytes, speed against N": ratio}


def describe_pipelining(table: pd.DataFrame) -> str:
    """A sentence per (backend, ranks) on whether the measured fastest chunk count agrees with S*."""
    sentences = []
    for _, row in table.iterrows():
        predicted, measured = row["predicted S*"], row["fastest measured S"]
        ratio = row["one message of N/S bytes, speed against N"]
        where = f"With {row['ranks']} ranks ({row['backend']})"
        if round(predicted) == measured or (predicted > 1 and abs(measured - predicted) / predicted <= 0.5):
            sentences.append(f"{where} the fastest measured S, {measured}, lies where the model puts S* "
                             f"({predicted:.1f}).")  # fmt: skip
        elif ratio == ratio and ratio > 1:  # not NaN: a cheaper chunk explains it
            sentences.append(
                f"{where} the fastest measured S is {measured} against a "
                f"predicted S* of {predicted:.1f}: here one message of N/{measured} bytes moves "
                f"{ratio:.2f}x as fast per byte as one of N bytes, which no α-β line can express — a cost "
                "per byte that grows with the message (caches, fresh pages) rewards chunks even where "
                "there is nothing to overlap."
            )
        else:
            sentences.append(f"{where} the fastest measured S is {measured} against a predicted S* of "
                             f"{predicted:.1f}.")  # fmt: skip
    return " ".join(sentences) or "No pipelined broadcast was measured here."


def skipped_cases(frame: pd.DataFrame) -> pd.DataFrame:
    """The benchmark rows that did not run, and why: a collective the backend lacks, or the time budget."""
    skipped = frame[frame["status"] != "ok"]
    return pd.DataFrame(
        {
            "backend": skipped.get("backend"),
            "ranks": skipped["world_size"],
            "case": skipped["label"],
            "bytes": skipped["requested_bytes"],
            "why": skipped["status"],
        }
    ).reset_index(drop=True)


def matches_expectation(table: pd.DataFrame, world_size: int) -> dict[str, bool]:
    """For each operation the backend ran, whether every rank's result equals ``expected_semantics``."""
    ran = table.query("status == 'ok'")
    return {
        operation: ran.query("operation == @operation")["after"].tolist() == after
        for operation, after in expected_semantics(world_size).items()
        if operation in set(ran["operation"])
    }


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


def support_matrix_table(support: pd.DataFrame) -> pd.DataFrame:
    """``probe_support``'s rows as operation × (backend, device), "yes"/"no"."""
    marked = support.assign(here=support["supported"].map({True: "yes", False: "no"}))
    table = marked.pivot_table(
        index="operation", columns=["backend", "device"], values="here", aggfunc="first", sort=False
    )
    return table.fillna("")


def verify_summary(result: dict, world_size: int) -> dict:
    """One line of the exactness table: which algorithms, sizes and checks ran on ``world_size`` ranks."""
    checks = pd.DataFrame(result["checks"])
    return {
        "ranks": world_size,
        "algorithms": ", ".join(sorted(checks["check"].str.split(" ").str[0].unique())),
        "sizes": ", ".join(map(str, result["sizes"])),
        "checks": len(checks),
        "all exactly equal": result["all_equal"],
    }


def alpha_beta_fits(frame: pd.DataFrame) -> pd.DataFrame:
    """α and β per backend, device and operation: each all-reduce implementation on all its rows (two or
    more ranks), and the ring broadcast on its naive, one-chunk rows only — so that its pipelined rows
    stay out of the fit and test the model.
    """
    rows = []
    usable = frame[(frame["status"] == "ok") & (frame["world_size"] > 1)]
    for (backend, device, operation), group in usable.groupby(["backend", "device", "operation"]):
        if operation == "ring_broadcast":
            group = group[group["chunks"] == 1]
        elif operation not in ALL_REDUCE_IMPLEMENTATIONS:
            continue
        if len(group) >= 2:
            fit = fit_alpha_beta(group)
            rows.append({"backend": backend, "device": device, "operation": operation, **fit})
    return pd.DataFrame(rows)


def with_model_seconds(frame: pd.DataFrame, fits: pd.DataFrame, operation: str = "all_reduce"):
    """The benchmark rows with what the α-β model predicts for them, from ``operation``'s fit.

    All-reduce rows use the ring all-reduce formula, ring-broadcast rows the pipelined broadcast formula.
    """
    predicted = []
    for row in frame.itertuples():
        fit = fits.query("backend == @row.backend and device == @row.device and operation == @operation")
        if fit.empty or row.status != "ok":
            predicted.append(np.nan)
            continue
        alpha, beta = fit["alpha_seconds"].iloc[0], fit["seconds_per_byte"].iloc[0]
        if row.collective == "all_reduce":
            predicted.append(ring_all_reduce_seconds(row.bytes, row.world_size, alpha, beta))
        elif row.operation == "ring_broadcast":
            predicted.append(ring_broadcast_seconds(row.bytes, row.world_size, int(row.chunks), alpha, beta))
        else:
            predicted.append(np.nan)
    return frame.assign(model_seconds=predicted)


def ring_against_library(frame: pd.DataFrame, min_bytes: int = 16 * 2**20) -> pd.DataFrame:
    """busbw of our ring all-reduce as a fraction of ``dist.all_reduce``'s, at every size ≥ ``min_bytes``."""
    ok = frame[
        (frame["status"] == "ok")
        & (frame["bytes"] >= min_bytes)
        & (frame["world_size"] > 1)
        & frame["operation"].isin(["all_reduce", "all_reduce_ring"])
    ]
    table = ok.pivot_table(
        index=["backend", "device", "world_size", "bytes"], columns="operation", values="busbw_GBps"
    ).reset_index()
    library, ours = "dist.all_reduce busbw GB/s", "our ring busbw GB/s"
    table = table.rename(columns={"all_reduce": library, "all_reduce_ring": ours})
    table["ring / dist"] = table[ours] / table[library]
    return table[["backend", "device", "world_size", "bytes", library, ours, "ring / dist"]]


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


def stored_benchmark(store, world_size: int, time_limit_seconds: float = 600, **settings) -> dict:
    """The benchmark through the results store; result: rank 0's rows (``benchmark_frame`` tabulates them)."""
    return _stored(
        store,
        "collective_benchmark",
        "benchmark",
        world_size,
        time_limit_seconds,
        lambda results: results[0],
        **settings,
    )
