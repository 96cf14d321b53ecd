"""The machine's speed at the moment a record is measured: a short fixed workload, stored with each record.

The same machine is not the same speed from one day to the next (a cloud host's neighbours, its clock, its
thermal state): chapter 3 re-executed on this 2-core machine took twice as long per step as the committed
run, while ratios of things measured together reproduced. So every record the store measures carries
``reference``: the rate of a fixed float32 matrix product and a fixed memory copy, each over a short
window on one CPU thread (the host that issues every step) and, where CUDA is present, on the GPU, timed
at most ``REFRESH_SECONDS`` before the measurement. The provenance page shows each machine's spread.

A reference is a witness, not a judge: on the 2-core Xeon, idle, 30 references timed 0.3 s apart
(2026-11-27, ``python -m helpers.reference_speed``) differed pairwise by a median 30 % and at the 95th
percentile by 132 % (the larger of the two figures' gaps; a reviewer's run under a load of 1.7 found 72 %
and 290 %), so one reference cannot tell a 2x slower day from noise there. What keeps a comparison honest
is measuring its halves together (``ResultStore.together``); these figures let a reader check afterwards.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import statistics
import time

import torch

from helpers.stats import plural

REFRESH_SECONDS = 60.0  # a reference older than this is timed again before the next measurement
CPU_MATMUL_SIZE = 384  # float32 n×n product: 113 MFLOP, about 1 ms on one core of the 2-core Xeon
CPU_COPY_BYTES = 16 * 2**20
CUDA_MATMUL_SIZE = 4096  # 137 GFLOP, a few ms on an H100 or H200 with TF32 off
CUDA_COPY_BYTES = 256 * 2**20
MATMUL_SECONDS, COPY_SECONDS = 0.2, 0.1  # each figure is the mean rate over this long a window

FIGURE_NAMES = {  # the figures, as the book names them
    "cpu_matmul_gflops": "one CPU thread, float32 product (GFLOP/s)",
    "cpu_copy_gbps": "one CPU thread, memory copy (GB/s)",
    "cuda_matmul_gflops": "GPU, float32 product (GFLOP/s)",
    "cuda_copy_gbps": "GPU, memory copy (GB/s)",
}

_cached: dict | None = None
_cached_at = 0.0


def _rate(work, units: float, seconds: float, synchronize=None) -> float:
    """``units`` per second of ``work()`` repeated for ``seconds`` after one warm-up call: a window, not
    a single call, because a virtual machine's speed moves from one millisecond to the next."""
    synchronize = synchronize or (lambda: None)
    work()
    synchronize()
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        work()
        synchronize()
        calls += 1
    return units * calls / (time.perf_counter() - started)


def measure() -> dict:
    """Time the fixed workload now: one-thread CPU float32 product (GFLOP/s) and copy (GB/s, read and
    written), and the same on the current CUDA device (TF32 off, as the study's default float32) where
    there is one. About 0.3 s on a CPU, 0.6 s with a GPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        n = CPU_MATMUL_SIZE
        local = torch.Generator().manual_seed(0)  # its own: the study's seeded random streams stay untouched
        a, b = torch.randn(n, n, generator=local), torch.randn(n, n, generator=local)
        source, target = torch.empty(CPU_COPY_BYTES // 4), torch.empty(CPU_COPY_BYTES // 4)
        speeds = {
            "cpu_matmul_gflops": _rate(lambda: torch.mm(a, b), 2 * n**3 / 1e9, MATMUL_SECONDS),
            "cpu_copy_gbps": _rate(lambda: target.copy_(source), 2 * CPU_COPY_BYTES / 1e9, COPY_SECONDS),
        }
    finally:
        torch.set_num_threads(threads)
    if torch.cuda.is_available():
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            n = CUDA_MATMUL_SIZE
            local = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn(n, n, device="cuda", generator=local)
            b = torch.randn(n, n, device="cuda", generator=local)
            source = torch.empty(CUDA_COPY_BYTES // 4, device="cuda")
            target = torch.empty_like(source)
            sync = torch.cuda.synchronize
            speeds["cuda_matmul_gflops"] = _rate(lambda: torch.mm(a, b), 2 * n**3 / 1e9, MATMUL_SECONDS, sync)
            speeds["cuda_copy_gbps"] = _rate(
                lambda: target.copy_(source), 2 * CUDA_COPY_BYTES / 1e9, COPY_SECONDS, sync
            )
            del a, b, source, target
            torch.cuda.empty_cache()  # leave the GPU's memory to what is measured next
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"measured_at": when, **{name: round(value, 3) for name, value in speeds.items()}}


def current() -> dict:
    """This moment's reference: the last one timed in this process if under ``REFRESH_SECONDS`` old,
    else timed now (about a fifth of a second on a CPU)."""
    global _cached, _cached_at
    if _cached is None or time.monotonic() - _cached_at > REFRESH_SECONDS:
        _cached, _cached_at = measure(), time.monotonic()
    return _cached


def speed_gap(one: dict | None, other: dict | None) -> float | None:
    """How far apart two references are: the largest ratio over the figures both hold, minus one
    (0.25: one ran some figure 1.25× faster). None when either is missing or they share no figure."""
    if not one or not other:
        return None
    shared = [name for name in one if name != "measured_at" and name in other]
    if not shared:
        return None
    return max(max(one[name], other[name]) / min(one[name], other[name]) for name in shared) - 1


def spread(references: list[dict]) -> dict:
    """Per figure, the lowest, median and highest over ``references`` (the records that carry one), and
    the largest gap between any two: a machine's speed across its records, for the provenance page."""
    figures = sorted({name for reference in references for name in reference} - {"measured_at"})
    summary = {}
    for name in figures:
        values = [reference[name] for reference in references if name in reference]
        summary[name] = {
            "records": len(values),
            "lowest": min(values),
            "median": statistics.median(values),
            "highest": max(values),
            "gap": max(values) / min(values) - 1,
        }
    return summary


def distinct(records: list[dict]) -> list[dict]:
    """The references ``records`` carry, each once: one reference is shared by every record measured
    within ``REFRESH_SECONDS`` of it."""
    carrying = [record["reference"] for record in records if record.get("reference")]
    return list({reference["measured_at"]: reference for reference in carrying}.values())


def pooled_note(records: list[dict], what: str) -> str:
    """What a fit or check that pools ``records`` (``what``: "This section's fit and check read") can say
    of the machine's speed across them: how many records, on how many days, from when to when, and the
    largest gap between the references they carry, or that none carries one. A machine's speed drifts
    between days (chapter 3 found this one twice as slow on another day), so records pooled across days
    carry that drift into the fit unless their references show it did not."""
    if not records:
        return ""
    times = [
        when[:16].replace("T", " ")
        for when in sorted(r["measured_at"] for r in records if r.get("measured_at"))
    ]
    days = len({when[:10] for when in times})
    if not times:
        on = "at times not kept"
    elif times[0] == times[-1]:
        on = f"at {times[0]} UTC"
    elif days == 1:
        on = f"on {times[0][:10]}, from {times[0][11:]} to {times[-1][11:]} UTC"
    else:
        on = f"on {days} days, from {times[0]} to {times[-1]} UTC"
    text = f"{what} {len(records):,} {plural(len(records), 'record')} of this machine, measured {on}"
    references = distinct(records)
    if not references:
        after = ", and a drift between days would be inside the fit" if days > 1 else ""
        return text + (
            "; none of them carries the machine's reference speed (they predate it), so whether the machine "
            f"ran at one speed across them cannot be checked{after}."
        )
    carrying = sum(1 for record in records if record.get("reference"))
    gaps = spread(references)
    name, widest = max(gaps.items(), key=lambda item: item[1]["gap"])
    left = len(records) - carrying
    without = f" ({left:,} {'predates' if left == 1 else 'predate'} it)" if left else ""
    return text + (
        f"; {carrying:,} {'carries' if carrying == 1 else 'carry'} the machine's reference speed{without}, "
        f"{len(references)} distinct {plural(len(references), 'reference')} "
        f"whose widest gap is {widest['gap'] * 100:.0f} % ({FIGURE_NAMES.get(name, name)}: "
        f"{widest['lowest']:.3g} to {widest['highest']:.3g}; the reference's own noise is part of it)."
    )


def pair_gaps(references: list[dict]) -> list[float]:
    """``speed_gap`` of every pair of ``references``, smallest first: the reference's own noise when they
    were timed on one machine in one quiet spell."""
    return sorted(speed_gap(one, other) for one, other in itertools.combinations(references, 2))


def main(argv: list[str] | None = None) -> int:
    """Time the reference ``--repeats`` times and print its spread and the gaps between pairs of
    references: the reference's own noise on this machine."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="independent references to time")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between them")
    arguments = parser.parse_args(argv)
    references = []
    for _ in range(arguments.repeats):
        references.append(measure())
        time.sleep(arguments.pause)
    for name, figures in spread(references).items():
        print(
            f"{name:>20}: median {figures['median']:.1f}, {figures['lowest']:.1f}–{figures['highest']:.1f}"
            f" over {figures['records']} references (largest gap {100 * figures['gap']:.0f} %)"
        )
    gaps = pair_gaps(references)
    median, p95 = gaps[len(gaps) // 2], gaps[round(0.95 * (len(gaps) - 1))]
    print(
        f"gap between two references: median {100 * median:.0f} %, 95th percentile {100 * p95:.0f} %, "
        f"largest {100 * gaps[-1]:.0f} %"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
