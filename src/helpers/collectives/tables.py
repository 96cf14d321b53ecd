"""The tables chapter 4 shows, from its records and frames: human column names with units, exact counts
with thousands separators, ratios with their spread and a verdict (chapter 4).

Semantics and support, exactness, the deadlock's outcome, lock-step schedules, skipped benchmark cases,
the α-β fits and what the two-rank fit predicts for more ranks, our ring against the library, pipelined
broadcasts, and the bytes per step of each topology.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from helpers.collectives.model import (
    ALL_REDUCE_IMPLEMENTATIONS,
    BENCHMARK_OPERATIONS,
    SEMANTIC_OPERATIONS,
    bytes_per_step_by_topology,
    expected_semantics,
    optimal_chunks,
)
from helpers.collectives.p2p import lockstep_table
from helpers.collectives.runs import LINK_FIT_WORLD_SIZE, with_model_seconds
from helpers.models import build_model, parameter_bytes
from helpers.stats import speedup

MIB = 2**20


def listed(items) -> str:
    """``2, 3 and 4``: items in a sentence."""
    words = [str(item) for item in items]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def _label(operation: str) -> str:
    """An implementation's name in tables: ``all_reduce (our ring)``; the ring broadcast is fitted on its
    one-chunk rows, ``broadcast (our ring, S=1)``."""
    return BENCHMARK_OPERATIONS[operation][1].format(chunks=1)


def semantics_frame(results: list[dict]) -> pd.DataFrame:
    """One row per (operation, rank): what the rank held before and after, and the operation's status."""
    rows = []
    for result in results:
        for record in result["operations"]:
            rows.append(
                {
                    "operation": record["operation"],
                    "rank": result["rank"],
                    "holds before": record["before"],
                    "holds after": record["after"],
                    "status": record["status"],
                }
            )
    order = {name: index for index, name in enumerate(SEMANTIC_OPERATIONS)}
    frame = pd.DataFrame(rows)
    return frame.sort_values(
        ["operation", "rank"], key=lambda c: c.map(order) if c.name == "operation" else c, ignore_index=True
    ).set_index(["operation", "rank"])


def matches_expectation(table: pd.DataFrame, world_size: int) -> dict[str, bool]:
    """For each operation the backend ran, whether every rank's result equals ``expected_semantics``."""
    ran = table.reset_index().query("status == 'ok'")
    return {
        operation: ran.query("operation == @operation")["holds after"].tolist() == after
        for operation, after in expected_semantics(world_size).items()
        if operation in set(ran["operation"])
    }


def support_matrix_table(support: pd.DataFrame) -> pd.DataFrame:
    """``runs.probe_support``'s rows as operation × (backend, device), "yes"/"no"."""
    marked = support.assign(here=support["supported"].map({True: "yes", False: "no"}))
    table = marked.pivot_table(
        index="operation", columns=["backend", "device"], values="here", aggfunc="first", sort=False
    )
    return table.fillna("")


def support_summary(support: pd.DataFrame, backend: str = "gloo", device: str = "cpu") -> str:
    """One line on what ``backend`` runs on ``device`` tensors: the same on every machine with this
    PyTorch (every machine can launch Gloo on the CPU), unlike the rest of the matrix."""
    rows = support.query("backend == @backend and device == @device")
    missing = rows.query("not supported")
    line = f"{backend} on {device} tensors runs {int(rows['supported'].sum())} of {len(rows)} operations"
    if missing.empty:
        return line
    lacking = "; ".join(f"{r.operation} ({r.message})" for r in missing.itertuples())
    return f"{line}; it lacks {lacking}"


def unsupported_table(support: pd.DataFrame) -> pd.DataFrame:
    """What did not run, and why, by backend, device and operation."""
    missing = support.query("not supported")
    return missing.set_index(["backend", "device", "operation"])[["message"]].rename(
        columns={"message": "why not"}
    )


def verify_summary(result: dict, world_size: int) -> dict:
    """One line of the exactness table: which algorithms, sizes and checks ran on ``world_size`` ranks."""
    checks = pd.DataFrame(result["checks"])
    return {
        "ranks": world_size,
        "algorithms": ", ".join(sorted(checks["check"].str.split(" ").str[0].unique())),
        "tensor sizes (elements)": ", ".join(f"{size:,}" for size in result["sizes"]),
        "checks": len(checks),
        "all exactly equal": result["all_equal"],
    }


def exactness_table(summaries: list[dict]) -> pd.DataFrame:
    """``verify_summary`` lines, one per rank count."""
    return pd.DataFrame(summaries).set_index("ranks")


def deadlock_table(result: dict) -> pd.DataFrame:
    """Each rank of the deadlock demonstration: whether it skipped the all-reduce, whether it timed out,
    how long it waited and the error it got."""
    rows = [
        {
            "rank": rank["rank"],
            "skipped the all-reduce": rank["skipped_all_reduce"],
            "timed out": rank["timed_out"],
            "waited (s)": f"{rank['seconds']:.2f}" if rank.get("seconds") is not None else "—",
            "error": rank.get("error") or "—",
        }
        for rank in result["ranks"]
    ]
    return pd.DataFrame(rows).set_index("rank")


def lockstep_frame(world_sizes) -> pd.DataFrame:
    """``p2p.lockstep_table`` as schedule × rank count: messages that meet no partner in their step."""
    frame = pd.DataFrame(lockstep_table(world_sizes))
    table = frame.pivot(index="schedule", columns="ranks", values="unmatched messages")
    table.columns = [f"k = {k}" for k in table.columns]
    table.columns.name = "unmatched messages"
    return table


def skipped_cases(frame: pd.DataFrame) -> pd.DataFrame:
    """The benchmark rows that did not run, and why: a collective the backend lacks, or the time budget."""
    skipped = frame[frame["status"] != "ok"]
    return pd.DataFrame(
        {
            "backend": skipped.get("backend"),
            "ranks": skipped["world_size"],
            "case": skipped["label"],
            "message (bytes)": skipped["requested_bytes"].map("{:,}".format),
            "why": skipped["status"],
        }
    ).set_index(["backend", "ranks", "case"])


# ---------------------------------------------------------------------------------------------------------
# The α-β fits


def alpha_beta_table(*fits: pd.DataFrame) -> pd.DataFrame:
    """``runs.alpha_beta_fits`` rows for readers (several fits one after the other, a fit that repeats
    an earlier one left out): α in µs per message, 1/β in GB/s, the fit's median distance from its points,
    by backend and device, implementation and the ranks it was fitted on."""
    fits = pd.concat(fits, ignore_index=True).drop_duplicates(["backend", "device", "operation", "ranks"])
    table = pd.DataFrame(
        {
            "backend/device": fits["backend"] + "/" + fits["device"],
            "implementation": fits["operation"].map(_label),
            "fitted on (ranks)": fits["ranks"],
            "α (µs per message)": (fits["alpha_seconds"] * 1e6).round(1),
            "1/β (GB/s)": (fits["bandwidth_bytes_per_second"] / 1e9).round(2),
            "fit error, median (%)": (fits["median_relative_error"] * 100).round(1),
        }
    )
    return table.set_index(["backend/device", "implementation", "fitted on (ranks)"])


def beyond_the_fit(frame: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """How the two-rank fit (``fits``, on ``LINK_FIT_WORLD_SIZE`` ranks) predicts the all-reduce at other
    rank counts: measured ÷ predicted seconds per implementation and k, median and range over sizes.

    Near 1 the model carries over; well above 1 something the model lacks costs time, such as ranks
    that wait for a core (more ranks than cores), which no property of the link explains.
    """
    rows = []
    others = frame[
        (frame["status"] == "ok")
        & ~frame["world_size"].isin([1, LINK_FIT_WORLD_SIZE])
        & frame["operation"].isin(ALL_REDUCE_IMPLEMENTATIONS)
    ]
    for (backend, device, operation, k), group in others.groupby(
        ["backend", "device", "operation", "world_size"]
    ):
        ratio = (group["seconds"] / with_model_seconds(group, fits, operation)["model_seconds"]).dropna()
        if ratio.empty:
            continue
        rows.append(
            {
                "backend/device": f"{backend}/{device}",
                "implementation": _label(operation),
                "ranks": k,
                "measured ÷ two-rank model, median": round(float(ratio.median()), 2),
                "range over message sizes": f"{ratio.min():.2f}–{ratio.max():.2f}",
            }
        )
    columns = ["backend/device", "implementation", "ranks"]
    measured = ["measured ÷ two-rank model, median", "range over message sizes"]
    return pd.DataFrame(rows, columns=[*columns, *measured]).set_index(columns)


def describe_link(fits: pd.DataFrame, operation: str = "all_reduce") -> str:
    """α and 1/β of ``operation``'s first fit as a phrase: ``α = 91 µs per message and 1/β = 1.93 GB/s
    (gloo on cpu, 2 ranks; the line lies 4 % from the points, median)``."""
    chosen = fits[fits["operation"] == operation]
    if chosen.empty:
        return f"not fitted (no {operation} measured on {LINK_FIT_WORLD_SIZE} ranks)"
    fit = chosen.iloc[0]
    return (
        f"α = {fit['alpha_seconds'] * 1e6:,.0f} µs per message and 1/β = "
        f"{fit['bandwidth_bytes_per_second'] / 1e9:.2f} GB/s ({fit['backend']} on {fit['device']}, "
        f"{fit['ranks']} ranks; the line lies {fit['median_relative_error']:.0%} from the points, median)"
    )


def describe_beyond(beyond: pd.DataFrame, cores: int, implementation: str = "all_reduce (torch.distributed)"):
    """A sentence on how the two-rank fit predicted ``implementation`` at the other rank counts."""
    if beyond.empty:
        return (
            f"Only {LINK_FIT_WORLD_SIZE} ranks were measured here, so the fit is not tested at other rank "
            "counts."
        )
    sentences = []
    for (where, name, k), row in beyond.iterrows():
        if name != implementation:
            continue
        ratio = row["measured ÷ two-rank model, median"]
        crowded = f" on this machine's {cores} cores" if k > cores else ""
        sentences.append(
            f"With {k} ranks{crowded} ({where}), {name} took {ratio:.2f}× what the two-rank fit predicts "
            f"(median over message sizes; {row['range over message sizes']}×)."
        )
    return " ".join(sentences)


def describe_ring(table: pd.DataFrame) -> str:
    """Our ring against the library at the largest message measured, as a phrase, verdict first."""
    if table.empty:
        return "not measured (no message large enough)"
    (where, k, mib), row = next(iter(table.iloc[::-1].iterrows()))
    return (
        f"{row['verdict']}, {row['ours ÷ library']:.2f}× the library's bus bandwidth "
        f"({row['range (min–max pairing)']}×, min–max pairing of the iterations) at {mib} MiB on {k} "
        f"{where} ranks"
    )


def ring_against_library(frame: pd.DataFrame, min_bytes: int = 16 * MIB) -> pd.DataFrame:
    """Our ring all-reduce against ``dist.all_reduce`` at every size ≥ ``min_bytes``: both bus bandwidths,
    and ours as a fraction of the library's with its interval (``stats.speedup`` of the iterations, which
    took turns in one launch) and verdict."""
    ok = frame[(frame["status"] == "ok") & (frame["bytes"] >= min_bytes) & (frame["world_size"] > 1)]
    rows = []
    for (backend, device, k, nbytes), group in ok.groupby(["backend", "device", "world_size", "bytes"]):
        by = group.set_index("operation")
        if not {"all_reduce", "all_reduce_ring"} <= set(by.index):
            continue
        compared = speedup(by.loc["all_reduce", "seconds_all"], by.loc["all_reduce_ring", "seconds_all"])
        rows.append(
            {
                "backend/device": f"{backend}/{device}",
                "ranks": k,
                "message (MiB)": f"{nbytes / MIB:g}",
                "dist.all_reduce busbw (GB/s)": round(by.loc["all_reduce", "busbw_GBps"], 2),
                "our ring busbw (GB/s)": round(by.loc["all_reduce_ring", "busbw_GBps"], 2),
                "ours ÷ library": round(compared["speedup"], 2),
                "range (min–max pairing)": f"{compared['low']:.2f}–{compared['high']:.2f}",
                "verdict": compared["verdict"],
            }
        )
    columns = ["backend/device", "ranks", "message (MiB)"]
    compared = ["dist.all_reduce busbw (GB/s)", "our ring busbw (GB/s)", "ours ÷ library",
                "range (min–max pairing)", "verdict"]  # fmt: skip
    return pd.DataFrame(rows, columns=[*columns, *compared]).set_index(columns)


# ---------------------------------------------------------------------------------------------------------
# Pipelined broadcast

SPEED_OF_A_CHUNK = "one N/S message: speed per byte ÷ one N message"


def message_size_effect(frame: pd.DataFrame, backend: str, ranks: int, chunks: int) -> float:
    """How fast, per byte, one unchunked broadcast of N/``chunks`` bytes runs against one of N bytes (the
    largest size), from the S = 1 rows: above 1, a chunk is cheaper per byte even without any overlap.

    Where N/S was not measured, the speed is interpolated between the measured sizes around it (straight
    on log-log axes); NaN below the smallest size.
    """
    naive = (
        frame.query(
            "operation == 'ring_broadcast' and chunks == 1 and status == 'ok' and backend == @backend "
            "and world_size == @ranks"
        )
        .set_index("bytes")["algbw_bytes_per_second"]
        .sort_index()
    )
    whole = naive.index.max()
    part = whole / chunks
    if part < naive.index.min():
        return float("nan")
    if part in naive.index:
        return float(naive[part] / naive[whole])
    sizes, speeds = np.log(naive.index.to_numpy(float)), np.log(naive.to_numpy(float))
    return float(np.exp(np.interp(np.log(part), sizes, speeds)) / naive[whole])


def pipelining(frame: pd.DataFrame, fits: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """The pipelined ring broadcast at the largest message, per backend and rank count: a table (predicted
    best S*, fastest measured S and how much cheaper per byte one chunk of N/S moves) and, for each
    figure, the rows with the model's seconds, S* and a title."""
    rows, cases = [], []
    broadcasts = frame.query("operation == 'ring_broadcast' and status == 'ok'")
    for (backend, ranks), group in broadcasts.groupby(["backend", "world_size"]):
        largest = with_model_seconds(group[group["bytes"] == group["bytes"].max()], fits, "ring_broadcast")
        fit = fits.query("backend == @backend and operation == 'ring_broadcast'")
        if largest["model_seconds"].isna().all() or fit.empty:
            continue
        nbytes = int(largest["bytes"].iloc[0])
        best = optimal_chunks(nbytes, ranks, fit["alpha_seconds"].iloc[0], fit["seconds_per_byte"].iloc[0])
        fastest = int(largest.loc[largest["seconds"].idxmin(), "chunks"])
        title = f"Ring broadcast of {nbytes / MIB:g} MiB, {backend}, k = {ranks}"
        cases.append({"rows": largest, "best": best, "title": title})
        rows.append(
            {
                "backend": backend,
                "ranks": ranks,
                "message (MiB)": f"{nbytes / MIB:g}",
                "predicted best S*": round(best, 1),
                "fastest measured S": fastest,
                SPEED_OF_A_CHUNK: round(message_size_effect(frame, backend, ranks, fastest), 2),
            }
        )
    table = pd.DataFrame(rows, columns=["backend", "ranks", "message (MiB)", "predicted best S*",
                                        "fastest measured S", SPEED_OF_A_CHUNK])  # fmt: skip
    return table.set_index(["backend", "ranks"]), cases


def describe_pipelining(table: pd.DataFrame) -> str:
    """A sentence per (backend, ranks) on whether the measured fastest chunk count agrees with S*."""
    sentences = []
    for (backend, ranks), row in table.iterrows():
        predicted, measured = row["predicted best S*"], row["fastest measured S"]
        ratio = row[SPEED_OF_A_CHUNK]
        where = f"With {ranks} ranks ({backend})"
        if round(predicted) == measured or (predicted > 1 and abs(measured - predicted) / predicted <= 0.5):
            sentences.append(f"{where} the fastest measured S, {measured}, lies where the model puts S* "
                             f"({predicted:.1f}).")  # fmt: skip
        elif not math.isnan(ratio) and ratio > 1:  # a cheaper chunk explains it
            sentences.append(
                f"{where} the fastest measured S is {measured} against a "
                f"predicted S* of {predicted:.1f}: here one message of N/{measured} bytes moves "
                f"{ratio:.2f}× as fast per byte as one of N bytes, which no α-β line can express — a cost "
                "per byte that grows with the message (caches, fresh pages) rewards chunks even where "
                "there is nothing to overlap."
            )
        else:
            sentences.append(f"{where} the fastest measured S is {measured} against a predicted S* of "
                             f"{predicted:.1f}.")  # fmt: skip
    return " ".join(sentences) or "No pipelined broadcast was measured here."


# ---------------------------------------------------------------------------------------------------------
# Topologies


def topology_table(model_names, world_size: int, shards: int) -> pd.DataFrame:
    """``model.bytes_per_step_by_topology`` for each model's gradient, exact, with thousands separators."""
    rows = []
    for name in model_names:
        gradient = parameter_bytes(build_model(name))
        for row in bytes_per_step_by_topology(gradient, world_size, shards):
            rows.append(
                {
                    "model": name,
                    "topology": row["topology"],
                    "bytes moved per step": f"{row['bytes_moved']:,}",
                    "busiest link, per direction (bytes)": f"{row['busiest_link_bytes']:,}",
                    "busiest": row["busiest"],
                    "a worker's link, per direction (bytes)": f"{row['worker_link_bytes']:,}",
                }
            )
    return pd.DataFrame(rows).set_index(["model", "topology"])


def topology_uses(world_size: int, shards: int) -> pd.DataFrame:
    """Where each topology suits, as the seed lecture sees it."""
    rows = bytes_per_step_by_topology(4, world_size, shards)
    return pd.DataFrame(rows)[["topology", "suits"]].set_index("topology")
