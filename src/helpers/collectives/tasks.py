"""The collectives worker: one process per rank, one task per launch (chapter 4).

``python -m helpers.collectives.tasks --config C --output DIR``, started by ``helpers.launch.launch``
(``helpers.collectives.runs`` does that through the results store). The tasks:

- ``semantics``: what each rank holds before and after every collective, on tiny integer tensors; an
  operation the backend lacks is recorded as ``"unsupported: …"`` (the runtime-probed support matrix);
- ``verify``: our send/recv algorithms (``helpers.collectives.p2p``) against torch.distributed's
  collectives, exactly;
- ``deadlock``: one rank skips an all-reduce; the others must end by the process-group timeout;
- ``benchmark``: nccl-tests-style algorithm and bus bandwidth over message sizes, within a time budget.
"""

from __future__ import annotations

import datetime
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

from helpers.collectives.model import BENCHMARK_OPERATIONS, SEMANTIC_OPERATIONS, bus_bandwidth_factor
from helpers.collectives.p2p import (
    _staged_through_host,
    parameter_server_step,
    ring_all_reduce,
    ring_broadcast,
)
from helpers.stats import plural
from helpers.worker import prepare_rank, process_group, worker_main, write_rank_result

# the "[/pytorch/third_party/gloo/…/unbound_buffer.cc:78] " that starts gloo's errors
SOURCE_LOCATION = re.compile(r"^\s*\[[^\]]+:\d+\]\s*")
PROBE_MAX_BYTES = 2**20  # the benchmark's probe times each operation at its smallest size and at this one
# A line through two small probes misses what makes large messages dearer per byte (caches, fresh pages):
# the plan charges each case this many times its predicted time.
PROBE_SAFETY = 2.0
PROBE_REPEATS = 3  # the probe keeps each point's fastest call: load only ever adds time


def short_error(error: BaseException, limit: int = 160) -> str:
    """An error message's first line without a leading ``[file.cc:81]``, shortened for a table cell."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    line = SOURCE_LOCATION.sub("", lines[0]).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _listed(value) -> list | None:
    """A tensor, or a list of them, as plain (nested) Python lists for the rank file."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [_listed(item) for item in value]
    return value.detach().cpu().tolist()


def rank_values(rank: int, length: int, device: torch.device) -> torch.Tensor:
    """What rank r holds in the semantics demo: [10r, 10r+1, …] (int64), readable in a table."""
    return torch.arange(length, dtype=torch.int64, device=device) + 10 * rank


def semantics_task(config: dict, device: torch.device) -> dict:
    """Every collective on tiny tensors: what this rank holds before and after, or why it could not run.

    Rank r starts each operation from [10r, …, 10r+k−1] (one element per rank, so scatter-like operations
    hand out single elements). Roots are rank 0; send/recv goes from rank 0 to rank 1. ``after`` is None
    where the operation leaves this rank nothing defined (for example a non-root of reduce or gather).
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    records = []
    for operation in SEMANTIC_OPERATIONS:
        data = rank_values(rank, k, device)
        before = _listed(data)
        try:
            after = _semantic_operation(operation, data, rank, k)
            status = "ok"
        except Exception as error:  # a backend lacking the operation raises on every rank alike
            after, status = None, f"unsupported: {short_error(error)}"
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        records.append({"operation": operation, "status": status, "before": before, "after": _listed(after)})
    return {"operations": records}


def _semantic_operation(operation: str, data: torch.Tensor, rank: int, k: int):
    """Run one collective on ``data``; returns what this rank holds afterwards (None: nothing defined)."""
    if operation == "send_recv":
        if k < 2:
            raise ValueError("send/recv needs two ranks")
        if _staged_through_host(data):  # not probed: Gloo would hand the socket a device pointer
            raise ValueError("Gloo sends and receives CPU tensors only (not attempted)")
        if rank == 0:
            dist.send(data, 1)
        elif rank == 1:
            dist.recv(data, 0)
        return data
    if operation == "broadcast":
        dist.broadcast(data, src=0)
        return data
    if operation == "scatter":
        received = torch.empty(1, dtype=data.dtype, device=data.device)
        dist.scatter(received, list(data.tensor_split(k)) if rank == 0 else None, src=0)
        return received
    if operation == "gather":
        gathered = [torch.empty_like(data) for _ in range(k)] if rank == 0 else None
        dist.gather(data, gathered, dst=0)
        return torch.cat(gathered) if rank == 0 else None
    if operation == "reduce":
        dist.reduce(data, dst=0)
        return data if rank == 0 else None  # other ranks' buffers are unspecified
    if operation == "all_reduce":
        dist.all_reduce(data)
        return data
    if operation == "all_gather":
        gathered = [torch.empty_like(data) for _ in range(k)]
        dist.all_gather(gathered, data)
        return torch.cat(gathered)
    if operation == "reduce_scatter":
        received = torch.empty(1, dtype=data.dtype, device=data.device)
        dist.reduce_scatter(received, list(data.tensor_split(k)))
        return received
    if operation == "all_to_all":
        received = [torch.empty(1, dtype=data.dtype, device=data.device) for _ in range(k)]
        dist.all_to_all(received, list(data.tensor_split(k)))
        return torch.cat(received)
    if operation == "all_to_all_single":
        received = torch.empty_like(data)
        dist.all_to_all_single(received, data)
        return received
    if operation == "barrier":
        dist.barrier()
        return data
    raise ValueError(f"unknown operation {operation!r}")


def verify_task(config: dict, device: torch.device) -> dict:
    """Our send/recv algorithms against torch.distributed's collectives, on random integer-valued tensors.

    Integer values make every sum exact in any order, so the results must be equal, not merely close.
    The sizes are ``config["sizes"]`` plus k−1 and k+1 (never divisible by k > 2); the ring broadcast
    runs with each of ``config["chunks"]`` from rank 0 and from rank k−1. A transposed (non-contiguous)
    7×3 tensor checks the in-place write-back.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    sizes = sorted({*config["sizes"], *([k - 1] if k > 1 else []), k + 1})
    checks = []

    def check(name: str, ours: torch.Tensor, reference: torch.Tensor, **details) -> None:
        difference = (ours.double() - reference.double()).abs().max().item() if ours.numel() else 0.0
        equal = bool(torch.equal(ours, reference))
        checks.append(
            {
                "check": name,
                "dtype": str(ours.dtype).removeprefix("torch."),
                "numel": ours.numel(),
                **details,
                "equal": equal,
                "max_abs_difference": difference,
            }
        )

    for dtype_name in config["dtypes"]:
        dtype = getattr(torch, dtype_name)
        for size in sizes:
            generator = torch.Generator().manual_seed(config["seed"] * 1_000_003 + size * 101 + rank)
            values = torch.randint(-1000, 1000, (size,), generator=generator).to(dtype=dtype, device=device)
            reference = values.clone()
            dist.all_reduce(reference)
            check("ring_all_reduce", ring_all_reduce(values.clone()), reference)
            for server in sorted({0, k - 1}):
                check(
                    "parameter_server_step",
                    parameter_server_step(values.clone(), server),
                    reference,
                    server=server,
                )
            for src in sorted({0, k - 1}):
                reference = values.clone()
                dist.broadcast(reference, src=src)
                for chunks in config["chunks"]:
                    ours = ring_broadcast(values.clone(), src=src, chunks=chunks)
                    check("ring_broadcast", ours, reference, src=src, chunks=chunks)
        generator = torch.Generator().manual_seed(config["seed"] + rank)
        matrix = torch.randint(-1000, 1000, (7, 3), generator=generator).to(dtype=dtype, device=device).t()
        reference = matrix.clone()
        dist.all_reduce(reference)
        check("ring_all_reduce (transposed 3×7)", ring_all_reduce(matrix.clone()), reference)
    return {"checks": checks, "sizes": sizes}


def deadlock_task(config: dict, device: torch.device) -> dict:
    """One rank skips an all-reduce the others enter: they must give up at the process-group timeout.

    The skipping rank stays alive (waiting on the rendezvous store until the others report) so that
    the waiting ranks see a genuine timeout, not a closed connection.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    skip_rank = config["skip_rank"] if config["skip_rank"] is not None else k - 1
    if not 0 <= skip_rank < k:
        raise ValueError(f"skip_rank {skip_rank} is not a rank of {k}")
    store = dist.distributed_c10d._get_default_store()
    waiting = [r for r in range(k) if r != skip_rank]
    timeout = config["timeout_seconds"]
    dist.barrier()
    if rank == skip_rank:
        store.wait([f"deadlock-demo/{r}" for r in waiting], datetime.timedelta(seconds=3 * timeout + 30))
        return {"skipped_all_reduce": True, "timed_out": False}
    tensor = torch.ones(4, device=device)
    started = time.perf_counter()
    try:
        work = dist.all_reduce(tensor, async_op=True)
        work.wait()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        outcome = {"timed_out": False, "error": None}
    except Exception as error:
        message = short_error(error, limit=300)
        outcome = {
            "timed_out": "timed out" in message.lower() or "timeout" in message.lower(),
            "error": message,
            "error_type": type(error).__name__,
        }
    outcome["seconds"] = time.perf_counter() - started
    outcome["timeout_seconds"] = timeout
    store.set(f"deadlock-demo/{rank}", "done")
    return {"skipped_all_reduce": False, **outcome}


def _benchmark_cases(config: dict, size_bytes: int, k: int, device: torch.device) -> list[dict]:
    """One case per operation (and ring-broadcast chunk count) at one message size: what to run, the bytes
    nccl-tests would report and the collective whose bus factor applies.

    Tensors are float32 zeros, shared by the in-place operations (sums of zeros stay zero, however often
    they repeat). As in nccl-tests, the size of all_gather and reduce_scatter is the whole gathered or
    scattered buffer, k per-rank parts.
    """
    count, part = max(1, size_bytes // 4), max(1, size_bytes // (4 * k))
    tensor = torch.zeros(count, device=device)
    if {"all_gather", "reduce_scatter"} & set(config["operations"]):
        whole, one = torch.zeros(part * k, device=device), torch.zeros(part, device=device)
    runs = {
        "all_reduce": lambda chunks: (lambda: dist.all_reduce(tensor), count * 4),
        "all_reduce_ring": lambda chunks: (lambda: ring_all_reduce(tensor), count * 4),
        "parameter_server": lambda chunks: (lambda: parameter_server_step(tensor), count * 4),
        "all_gather": lambda chunks: (lambda: dist.all_gather_into_tensor(whole, one), part * k * 4),
        "reduce_scatter": lambda chunks: (lambda: dist.reduce_scatter_tensor(one, whole), part * k * 4),
        "broadcast": lambda chunks: (lambda: dist.broadcast(tensor, src=0), count * 4),
        "ring_broadcast": lambda chunks: (lambda: ring_broadcast(tensor, src=0, chunks=chunks), count * 4),
    }
    cases = []
    for operation in config["operations"]:
        collective, label = BENCHMARK_OPERATIONS[operation]
        for chunks in config["chunks"] if operation == "ring_broadcast" else [None]:
            run, nbytes = runs[operation](chunks)
            cases.append(
                {
                    "operation": operation,
                    "label": label.format(chunks=chunks),
                    "chunks": chunks,
                    "run": run,
                    "bytes": nbytes,
                    "collective": collective,
                }
            )
    return cases


def _timed(run, device: torch.device) -> float:
    """Seconds of one ``run()`` on this rank, started together with the others (barrier, synchronise)."""
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def _slowest(times: list[float], device: torch.device) -> list[float]:
    """Each of this rank's ``times``, replaced by the largest any rank measured (the same on every rank)."""
    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def probe_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, seconds per byte) of the line through a case's probe points (bytes, seconds), both ≥ 0.

    One point (or two at one size) gives a line through the origin: every second is charged to bytes.
    When the larger probe ran no slower than the smaller one (a busy machine delayed the small one), the
    slope is the larger probe's seconds per byte: no slope would price a gigabyte like a kilobyte.
    """
    (small_bytes, small_seconds), (large_bytes, large_seconds) = min(points), max(points)
    if large_bytes == small_bytes:
        return 0.0, max(small_seconds, large_seconds) / max(large_bytes, 1)
    slope = (large_seconds - small_seconds) / (large_bytes - small_bytes)
    if slope <= 0:
        slope = large_seconds / large_bytes
    return max(0.0, small_seconds - slope * small_bytes), slope


def budget_plan(cases: list[dict], budget_seconds: float) -> list[str | None]:
    """Which cases fit the time budget: None to run it, else why it is skipped.

    ``cases`` come in running order, smallest sizes first, each with ``case`` (what it measures, e.g.
    the operation and chunk count), ``bytes`` and ``predicted_seconds`` (all its iterations). A case runs
    when its prediction fits in what is left of the budget; once one size of a case is skipped, its
    larger sizes are skipped too.
    """
    left, given_up, plan = budget_seconds, set(), []
    for case in cases:
        if case["case"] in given_up:
            plan.append("skipped: a smaller size of it did not fit the time budget")
        elif case["predicted_seconds"] > left:
            given_up.add(case["case"])
            plan.append(
                f"skipped: predicted {case['predicted_seconds']:.1f} s, {max(left, 0):.1f} s left of the "
                f"{budget_seconds:g} s time budget"
            )
        else:
            left -= case["predicted_seconds"]
            plan.append(None)
    return plan


def _probe(config: dict, k: int, device: torch.device) -> tuple[dict, dict, float]:
    """Time each case at the smallest size and at min(largest, 1 MiB), after one warm-up call, keeping
    the fastest of ``PROBE_REPEATS`` calls.

    Returns the probe line of each case (``probe_line``, from the slowest rank's times), the cases the
    backend cannot run (the warm-up's error, the same on every rank) and the seconds of one barrier.
    """
    smallest = min(config["sizes_bytes"])
    sizes = sorted({smallest, max(smallest, min(max(config["sizes_bytes"]), PROBE_MAX_BYTES))})
    unsupported, measured = {}, []
    for size in sizes:
        for case in _benchmark_cases(config, size, k, device):
            key = (case["operation"], case["chunks"])
            if key in unsupported:
                continue
            try:
                case["run"]()
            except Exception as error:  # e.g. a collective the backend does not implement
                unsupported[key] = f"unsupported: {short_error(error)}"
                continue
            best = min(_timed(case["run"], device) for _ in range(PROBE_REPEATS))
            measured.append((key, case["bytes"], best))
    barrier = _timed(dist.barrier, device)
    slowest = _slowest([seconds for *_, seconds in measured] + [barrier], device)
    points: dict[tuple, list] = {}
    for (key, nbytes, _), seconds in zip(measured, slowest, strict=False):
        points.setdefault(key, []).append((nbytes, seconds))
    return {key: probe_line(found) for key, found in points.items()}, unsupported, slowest[-1]


def benchmark_task(config: dict, device: torch.device) -> dict:
    """nccl-tests-style timings: per operation and message size the median over iterations of the slowest
    rank's time, algbw = bytes / seconds and busbw = algbw × the collective's bus factor.

    ``cores`` are the cores this rank may run on (its own share when ``config["pin_cores"]`` pinned it).
    A probe first times every case at two sizes (``_probe``) and predicts each case's iterations from the
    line through them, charged ``PROBE_SAFETY`` times; cases that would overrun
    ``config["time_budget_seconds"]`` are skipped and say so (``budget_plan``), so that gigabyte
    messages, Gloo's host staging of CUDA tensors or a parameter server moving k×N per call cannot push
    a launch past its wall-clock limit. Every rank plans from the
    same slowest-rank probe, so all ranks run the same cases. At each size the operations take turns
    iteration by iteration, so that background load slows them alike.
    """
    k = dist.get_world_size()
    started = time.perf_counter()
    lines, unsupported, barrier = _probe(config, k, device)
    calls = config["iterations"] + max(1, config["warmup_iterations"])
    planned = []
    for size in sorted(config["sizes_bytes"]):
        for case in _benchmark_cases(config, size, k, device):
            key = (case["operation"], case["chunks"])
            if key in lines:
                intercept, slope = lines[key]
                predicted = PROBE_SAFETY * calls * (barrier + intercept + slope * case["bytes"])
                planned.append(
                    {"case": key, "bytes": case["bytes"], "size": size, "predicted_seconds": predicted}
                )
    decisions = dict(
        zip(
            [(p["case"], p["size"]) for p in planned],
            budget_plan(planned, config["time_budget_seconds"]),
            strict=True,
        )
    )
    rows, predicted_total = [], 0.0
    for size in sorted(config["sizes_bytes"]):
        runnable = []
        for case in _benchmark_cases(config, size, k, device):
            key = (case["operation"], case["chunks"])
            row = {name: case[name] for name in ("operation", "label", "chunks")}
            row.update(world_size=k, requested_bytes=size)
            skipped = unsupported.get(key) or decisions[(key, size)]
            if skipped:
                rows.append({**row, "status": skipped})
                continue
            predicted_total += next(
                p["predicted_seconds"] for p in planned if (p["case"], p["size"]) == (key, size)
            )
            for _ in range(max(1, config["warmup_iterations"])):
                case["run"]()
            runnable.append((case, row))
        if not runnable:
            continue
        times = [_timed(case["run"], device) for _ in range(config["iterations"]) for case, _ in runnable]
        slowest = torch.tensor(_slowest(times, device)).reshape(-1, len(runnable))
        for (case, row), case_times in zip(runnable, slowest.t().tolist(), strict=True):
            seconds = statistics.median(case_times)
            factor = bus_bandwidth_factor(case["collective"], k)
            rows.append(
                {
                    **row,
                    "status": "ok",
                    "collective": case["collective"],
                    "bytes": case["bytes"],
                    "seconds": seconds,
                    "seconds_all": case_times,
                    "bus_factor": factor,
                    "algbw_bytes_per_second": case["bytes"] / seconds,
                    "busbw_bytes_per_second": case["bytes"] / seconds * factor,
                }
            )
    order = {operation: index for index, operation in enumerate(BENCHMARK_OPERATIONS)}
    rows.sort(key=lambda row: (order[row["operation"]], row["chunks"] or 0, row["requested_bytes"]))
    warmups = max(1, config["warmup_iterations"])
    return {
        "rows": rows,
        "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "budget": {
            "time_budget_seconds": config["time_budget_seconds"],
            "predicted_seconds": predicted_total,
            "seconds": time.perf_counter() - started,
            "skipped_cases": sum(1 for row in rows if row["status"].startswith("skipped")),
        },
        "method": f"median over {config['iterations']} iterations of the slowest rank's time, after "
        f"{warmups} {plural(warmups, 'warm-up iteration')}; barrier"
        + (" and CUDA synchronise" if device.type == "cuda" else "")
        + " before each iteration; operations take turns; cases that a probe predicted to overrun the "
        f"{config['time_budget_seconds']:g} s time budget were skipped",
    }


TASK_FUNCTIONS = {
    "semantics": semantics_task,
    "verify": verify_task,
    "deadlock": deadlock_task,
    "benchmark": benchmark_task,
}


def run_rank(config: dict, output: Path) -> None:
    """Run ``config["task"]`` on this rank and write ``rank<r>.json``."""
    if config["task"] not in TASK_FUNCTIONS:
        raise ValueError(f"task must be one of {sorted(TASK_FUNCTIONS)}, not {config['task']!r}")
    rank, world_size, device = prepare_rank(config)
    if config["backend"] == "nccl" and config["task"] == "deadlock":
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"  # wait() raises at the timeout instead of aborting
    with process_group(config, device, output):
        result = TASK_FUNCTIONS[config["task"]](config, device)
        write_rank_result(
            output, rank, world_size, config, device,
            {"device_type": device.type, "task": config["task"], **result},
        )  # fmt: skip


def main() -> NoReturn:
    """Entry point for torchrun: ``-m helpers.collectives.tasks --config CONFIG.json --output DIR``."""
    return worker_main(run_rank, main.__doc__)


if __name__ == "__main__":
    sys.exit(main())
