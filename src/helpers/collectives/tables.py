"""The tables chapter 4 shows, from its records and frames: human column names with units, exact counts
with thousands separators, ratios with their spread and a verdict (chapter 4).

Semantics and support, exactness, the deadlock's outcome, lock-step schedules, skipped benchmark cases,
the α-β fits and what the two-rank fit predicts for more ranks, our ring against the library, pipelined
broadcasts, and the bytes per step of each topology; ``collectives.link_reading`` says in words what the
fitted link shows.
"""

from __future__ import annotations

import math
import re

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
from helpers.collectives.runs import LINK_FIT_WORLD_SIZE, alpha_beta_fits, with_model_seconds
from helpers.launch import BACKEND_NAMES, placement_words
from helpers.models import build_model, parameter_bytes
from helpers.stats import listed, speedup
from helpers.train import counted

MIB = 2**20
OPERATION_WORDS = {"send_recv": "send/recv"}  # our name for a pair of calls; the others are torch API names


def operation_label(operation: str) -> str:
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


def not_attempted(status: str) -> bool:
    """Whether a status (a semantics record's, or a support row's message) says the worker did not attempt
    the operation at all — Gloo's send and receive of CUDA tensors, a send with one rank — so that the
    backend was not probed on it."""
    return "not attempted" in status or "needs two ranks" in status


def describe_matches(
    matches: dict[str, bool], backend: str, table: pd.DataFrame | None = None, device: str | None = None
) -> str:
    """How many operations matched ``expected_semantics``, out of those ``backend`` ran, and why the others
    did not run, from the statuses of ``table`` (``semantics_frame``): ``with CUDA tensors, all 9
    operations Gloo ran, of 11 (its send/recv of CUDA tensors not attempted; Gloo has no all_to_all)``
    (the list form: ``all_to_all_single`` is an operation of its own). An operation the worker did not
    attempt was not probed: it is not one the backend lacks."""
    matched, ran, total = sum(matches.values()), len(matches), len(SEMANTIC_OPERATIONS)
    name = BACKEND_NAMES.get(backend, backend)
    which = f"all {ran}" if matched == ran else f"{matched} of the {ran}"
    where = f"with {device.upper()} tensors, " if device else ""
    if ran == total:
        return f"{where}{which} operations"
    statuses = {} if table is None else table.reset_index().groupby("operation")["status"].first().to_dict()
    skipped, lacking = [], []
    for operation in SEMANTIC_OPERATIONS:
        if operation in matches:
            continue
        status = str(statuses.get(operation) or "")
        words = OPERATION_WORDS.get(operation, operation)
        if "needs two ranks" in status:
            skipped.append(f"its {words} not attempted (one rank)")
        elif not_attempted(status):
            skipped.append(f"its {words} of {device.upper()} tensors not attempted" if device else
                           f"its {words} not attempted")  # fmt: skip
        else:
            lacking.append(words)
    reasons = [*skipped, *([f"{name} has no {listed(lacking)}"] if lacking else [])]
    return f"{where}{which} operations {name} ran, of {total} ({'; '.join(reasons)})"


ONE_RANK = "1 rank only: accepted, moves no data"


def support_matrix_table(support: pd.DataFrame) -> pd.DataFrame:
    """``runs.probe_support``'s rows as operation × (backend, device): "yes", "no", "not attempted" (the
    worker did not hand the operation to the backend: not probed), and, where the probe's semantics record
    ran on one rank (``ranks``, the world size it was stored under: NCCL on one GPU), ``ONE_RANK`` in place
    of "yes" — a one-rank group accepts a collective without moving any data."""
    ranks = support["ranks"] if "ranks" in support else pd.Series(2, index=support.index)
    here = [
        ("not attempted" if not_attempted(str(row.message)) else "no") if not row.supported
        else ONE_RANK if rank == 1 else "yes"
        for row, rank in zip(support.itertuples(), ranks, strict=True)
    ]  # fmt: skip
    marked = support.assign(here=here)
    table = marked.pivot_table(
        index="operation", columns=["backend", "device"], values="here", aggfunc="first", sort=False
    )
    return table.fillna("")


def support_summary(support: pd.DataFrame, backend: str = "gloo", device: str = "cpu") -> str:
    """One line on what ``backend`` runs on ``device`` tensors: the same on every machine with this
    PyTorch (every machine can launch Gloo on the CPU), unlike the rest of the matrix."""
    rows = support.query("backend == @backend and device == @device")
    missing = rows.query("not supported")
    line = f"{placement_words(backend, device)} runs {int(rows['supported'].sum())} of {len(rows)} operations"
    if missing.empty:
        return line
    lacking = "; ".join(
        f"{OPERATION_WORDS.get(r.operation, r.operation)} ({r.message})" for r in missing.itertuples()
    )
    return f"{line}; it has no {lacking}"


def unsupported_table(support: pd.DataFrame) -> pd.DataFrame:
    """What did not run, and why, by backend, device and operation."""
    missing = support.query("not supported")
    return missing.set_index(["backend", "device", "operation"])[["message"]].rename(
        columns={"message": "why not"}
    )


def verify_summary(result: dict, world_size: int) -> dict:
    """One line of the exactness table: which algorithms (in words: "ring all-reduce", not the function's
    name), sizes and checks ran on ``world_size`` ranks."""
    checks = pd.DataFrame(result["checks"])
    functions = sorted(checks["check"].str.split(" ").str[0].unique())
    return {
        "ranks": world_size,
        "algorithms": ", ".join(ALGORITHM_NAMES.get(name, name) for name in functions),
        "tensor sizes (elements)": ", ".join(f"{size:,}" for size in result["sizes"]),
        "checks": len(checks),
        "all exactly equal": result["all_equal"],
    }


# The p2p functions the exactness check runs, as the chapter's prose names them
ALGORITHM_NAMES = {"parameter_server_step": "parameter server", "ring_all_reduce": "ring all-reduce",
                   "ring_broadcast": "ring broadcast"}  # fmt: skip


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
            "waited (s)": f"{rank['seconds']:.2f}" if rank.get("seconds") is not None else "–",
            "error": rank.get("error") or "–",
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


def benchmark_notes(plan: pd.DataFrame, frame: pd.DataFrame, method: str) -> list:
    """What goes with the benchmark's results, in order: a line per planned launch that did not run and
    why, the cases skipped (a heading and ``skipped_cases``) and how it timed (``method``, as its record
    states it, its older "warm-up iteration(s)" counted): Markdown strings and a table."""
    notes: list = [f"Not run: {row.backend}, {counted(row.ranks, 'rank')}: {row.reason}"
                   for row in plan.query("not runs").itertuples()]  # fmt: skip
    skipped = skipped_cases(frame)
    if len(skipped):
        notes += [f"**{counted(len(skipped), 'case')} skipped:**", skipped]
    method = re.sub(
        r"(\d+) warm-up iteration\(s\)", lambda m: counted(int(m[1]), "warm-up iteration"), method
    )
    return [*notes, f"Method: {method}."]


# ---------------------------------------------------------------------------------------------------------
# The α-β fits


def microseconds(seconds: float) -> str:
    """α in µs for a table: whole µs with thousands separators from 100 µs on (``2,711``), else three
    significant figures (``20``, ``3.46``)."""
    value = seconds * 1e6
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def median_fits(frame: pd.DataFrame, world_sizes=None) -> pd.DataFrame:
    """``runs.alpha_beta_fits`` of each size's median instead of its lower quartile of iterations (the
    fit without ``seconds_all``): shown beside the fit, it shows what the stalls of a shared machine add."""
    return alpha_beta_fits(frame.drop(columns="seconds_all", errors="ignore"), world_sizes=world_sizes)


def alpha_beta_table(*fits: pd.DataFrame, medians: pd.DataFrame | None = None) -> pd.DataFrame:
    """``runs.alpha_beta_fits`` rows for readers (several fits one after the other, a fit that repeats
    an earlier one left out): α in µs per message (``microseconds``), 1/β in GB/s, the fit's median
    distance from its points, by backend and device, implementation and the ranks it was fitted on; with
    ``medians`` (``median_fits``) the same implementation's α and 1/β fitted to the medians beside them."""
    keys = ["backend", "device", "operation", "ranks"]
    fits = pd.concat(fits, ignore_index=True).drop_duplicates(keys)
    table = pd.DataFrame(
        {
            "backend/device": fits["backend"] + "/" + fits["device"],
            "implementation": fits["operation"].map(operation_label),
            "fitted on (ranks)": fits["ranks"],
            "α (µs per message)": fits["alpha_seconds"].map(microseconds),
            "1/β (GB/s)": (fits["bandwidth_bytes_per_second"] / 1e9).round(2),
            "fit error, median (%)": (fits["median_relative_error"] * 100).round(1),
        }
    )
    if medians is not None:
        beside = fits[keys].merge(medians, on=keys, how="left")
        table["α, fitted to medians (µs)"] = [
            "–" if math.isnan(value) else microseconds(value) for value in beside["alpha_seconds"]
        ]
        table["1/β, fitted to medians (GB/s)"] = [
            "–" if math.isnan(value) else f"{value / 1e9:.2f}"
            for value in beside["bandwidth_bytes_per_second"]
        ]
    return table.set_index(["backend/device", "implementation", "fitted on (ranks)"])


def _lower_quartiles(group: pd.DataFrame) -> pd.Series:
    """Each row's lower quartile of its iterations (``seconds_all``), the statistic the α-β fit uses; its
    ``seconds`` where the iterations were not kept."""
    if "seconds_all" not in group:
        return group["seconds"]
    return group["seconds_all"].map(lambda times: float(np.percentile(times, 25)))


def beyond_the_fit(frame: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """How the two-rank fit (``fits``, on ``LINK_FIT_WORLD_SIZE`` ranks) predicts the all-reduce at other
    rank counts: measured ÷ predicted seconds per implementation and k, median and range over sizes, the
    measured seconds being each size's lower quartile of its iterations, as in the fit.

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
        modelled = with_model_seconds(group, fits, operation)["model_seconds"]
        ratio = (_lower_quartiles(group) / modelled).dropna()
        if ratio.empty:
            continue
        rows.append(
            {
                "backend/device": f"{backend}/{device}",
                "implementation": operation_label(operation),
                "ranks": k,
                "measured ÷ two-rank model, median": round(float(ratio.median()), 2),
                "range over message sizes": f"{ratio.min():.2f}–{ratio.max():.2f}",
            }
        )
    columns = ["backend/device", "implementation", "ranks"]
    measured = ["measured ÷ two-rank model, median", "range over message sizes"]
    return pd.DataFrame(rows, columns=[*columns, *measured]).set_index(columns)


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


TIED_WITH_FASTEST = "S within the fastest's iteration spread"


def _iterations(row) -> list[float]:
    """A benchmark row's timed iterations (``seconds_all``), or its ``seconds`` where they were not kept."""
    times = row.get("seconds_all")
    return list(times) if isinstance(times, list | tuple | np.ndarray) else [row["seconds"]]


def tied_with_fastest(rows: pd.DataFrame) -> list[int]:
    """The chunk counts S whose iterations the fastest S (smallest median) does not beat outright: every
    S for which ``stats.speedup`` of its iterations against the fastest's, paired min–max, is not
    "faster". The fastest S is among them; more than one means the best S is not resolved."""
    fastest = rows.loc[rows["seconds"].idxmin()]
    best = _iterations(fastest)
    return sorted(
        int(row["chunks"]) for _, row in rows.iterrows()
        if row["chunks"] == fastest["chunks"] or speedup(_iterations(row), best)["verdict"] != "faster"
    )  # fmt: skip


MEASURED_CHUNKS = "S tried"  # the chunk counts timed at the largest message (a time budget can skip some)


def pipelining(frame: pd.DataFrame, fits: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """The pipelined ring broadcast at the largest message, per backend and rank count: a table (the chunk
    counts S measured, predicted best S*, rounded to a whole chunk count, fastest measured S, the S
    ``tied_with_fastest`` and how much cheaper per byte one chunk of N/S moves) and, for each figure (two
    chunk counts or more measured), the rows with the model's seconds, S* and a title."""
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
        measured = sorted(int(chunks) for chunks in largest["chunks"].unique())
        title = f"Ring broadcast of {nbytes / MIB:g} MiB, {backend}, k = {ranks}"
        if len(measured) > 1:  # one chunk count alone has no curve to compare with
            cases.append({"rows": largest, "best": best, "title": title})
        rows.append(
            {
                "backend": backend,
                "ranks": ranks,
                "message (MiB)": f"{nbytes / MIB:g}",
                MEASURED_CHUNKS: ", ".join(map(str, measured)),
                "predicted best S*": f"{best:.0f}",
                "fastest measured S": fastest,
                TIED_WITH_FASTEST: ", ".join(map(str, tied_with_fastest(largest))),
                SPEED_OF_A_CHUNK: round(message_size_effect(frame, backend, ranks, fastest), 2),
            }
        )
    columns = ["backend", "ranks", "message (MiB)", MEASURED_CHUNKS, "predicted best S*",
               "fastest measured S", TIED_WITH_FASTEST, SPEED_OF_A_CHUNK]  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    return table.set_index(["backend", "ranks"]), cases


def describe_pipelining(table: pd.DataFrame) -> str:
    """A sentence per (backend, ranks): the best S not resolved where several S lie within the fastest's
    iteration spread; else whether the fastest S agrees with S*, and, where it does not and a chunk of
    N/S moved faster per byte than the whole message, that measured ratio."""
    sentences = []
    for (backend, ranks), row in table.iterrows():
        predicted, measured = float(row["predicted best S*"]), row["fastest measured S"]
        tied, ratio = row[TIED_WITH_FASTEST].split(", "), row[SPEED_OF_A_CHUNK]
        where = f"With {ranks} ranks ({BACKEND_NAMES.get(backend, backend)})"
        if "," not in row[MEASURED_CHUNKS]:  # one chunk count tried
            sentences.append(
                f"{where} only S = {row[MEASURED_CHUNKS]} was measured at the largest message (the launch's "
                f"time budget skipped the others), so the model's S* of {row['predicted best S*']} is not "
                "tested."
            )
        elif len(tied) > 1:
            sentences.append(
                f"{where} the best S is not resolved: S = {listed(tied)} lie within the iteration spread of "
                f"the fastest median, at S = {measured}; the model's S* is {row['predicted best S*']}."
            )
        elif round(predicted) == measured or (predicted > 1 and abs(measured - predicted) / predicted <= 0.5):
            sentences.append(f"{where} the fastest measured S, {measured}, lies where the model puts S* "
                             f"({row['predicted best S*']}).")  # fmt: skip
        elif not math.isnan(ratio) and ratio > 1:  # a cheaper chunk explains it
            sentences.append(
                f"{where} the fastest measured S is {measured} against a predicted S* of "
                f"{row['predicted best S*']}: here one message of N/{measured} bytes moved {ratio:.2f}× as "
                "fast per byte as one of N bytes, which no α-β line can express: a cost per byte that grows "
                "with the message rewards chunks even where there is nothing to overlap."
            )
        else:
            sentences.append(f"{where} the fastest measured S is {measured} against a predicted S* of "
                             f"{row['predicted best S*']}.")  # fmt: skip
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


def describe_topologies(model_name: str, world_size: int, shards: int) -> str:
    """One phrase on the busiest link per step under each topology, for ``model_name``'s gradient, in MB
    (10⁶ bytes, three significant figures), from ``model.bytes_per_step_by_topology``."""
    gradient = parameter_bytes(build_model(model_name))
    busiest = {
        row["topology"]: row["busiest_link_bytes"]
        for row in bytes_per_step_by_topology(gradient, world_size, shards)
    }

    def mb(nbytes: int) -> str:
        return f"{nbytes / 1e6:.3g} MB"

    return (
        f"the busiest link per step, each way, for `{model_name}`'s {mb(gradient)} gradient on "
        f"k = {world_size}: {mb(busiest['ring all-reduce'])} in a ring, "
        f"{mb(busiest['parameter server on the CPU'])} at a CPU parameter server, "
        f"{mb(busiest['parameter server on a rank'])} at one on a rank, "
        f"{mb(busiest[f'sharded parameter servers (s={shards})'])} at each of {shards} sharded servers"
    )
