"""What chapter 4's fitted link says, in words: the two-rank α-β fit and how far it carries to more ranks,
the path the ranks' bytes took (a CPU's memory, or GPU-host copies and loopback), what chapter 5 does with
the fit, and our ring against the library's. Every sentence reads the records and the fingerprint of the
machine that measured them, so a GPU edition executed elsewhere says what ran there.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers.collectives.runs import LINK_FIT_WORLD_SIZE, is_pinned
from helpers.collectives.tables import microseconds, operation_label
from helpers.launch import BACKEND_NAMES, placement_words
from helpers.stats import MATTERS, listed


def describe_link(
    fits: pd.DataFrame, medians: pd.DataFrame | None = None, operation: str = "all_reduce"
) -> str:
    """α and 1/β of ``operation``'s first fit as a phrase, with what it was fitted to and, given
    ``medians`` (``median_fits``), the fit to the medians beside it: ``α = 20 µs per message and 1/β =
    1.00 GB/s on 2 ranks (Gloo with CPU tensors), fitted to each size's lower quartile of its iterations
    (median fit error 4%); fitted to the medians, α = 25 µs and 1/β = 0.90 GB/s``."""
    chosen = fits[fits["operation"] == operation]
    if chosen.empty:
        return f"not fitted (no {operation} measured on {LINK_FIT_WORLD_SIZE} ranks)"
    fit = chosen.iloc[0]
    phrase = (
        f"α = {microseconds(fit['alpha_seconds'])} µs per message and 1/β = "
        f"{fit['bandwidth_bytes_per_second'] / 1e9:.2f} GB/s on {fit['ranks']} ranks "
        f"({placement_words(fit['backend'], fit['device'])}), fitted to each size's lower quartile "
        "of its iterations (median fit error "
        f"{fit['median_relative_error']:.0%})"
    )
    beside = None if medians is None else medians[medians["operation"] == operation]
    if beside is not None and not beside.empty:
        median = beside.iloc[0]
        phrase += (
            f"; fitted to the medians, α = {microseconds(median['alpha_seconds'])} µs and 1/β = "
            f"{median['bandwidth_bytes_per_second'] / 1e9:.2f} GB/s"
        )
        alphas = sorted((fit["alpha_seconds"], median["alpha_seconds"]))
        if alphas[0] > 0 and alphas[1] / alphas[0] > 2:
            phrase += (
                f". Which iterations are read moves α {alphas[1] / alphas[0]:.0f}-fold: stalls of the "
                f"machine, not the link, decide it, so α is known here only within "
                f"{microseconds(alphas[0])}–{microseconds(alphas[1])} µs"
            )
    return phrase


def describe_link_path(backend: str, device: str, gpus: int) -> str:
    """Which path the fitted "link" is, from where the ranks ran (``backend``, ``device`` and the ``gpus``
    the launch could use), as a phrase: ``the link is the one these ranks used: …``."""
    if device == "cpu":
        return (
            "the link is the one these ranks used: Gloo ranks on one CPU, the host's loopback path and "
            "copies in memory, not a network"
        )
    if backend == "gloo":
        sharing = "sharing one GPU" if gpus <= 1 else f"on {gpus} GPUs"
        return (
            f"the link is the one these ranks used: Gloo ranks {sharing}, whose tensors are copied from the "
            "GPU to host memory over PCIe, pass between the ranks over the host's loopback path and are "
            "copied back, not a GPU-to-GPU link"
        )
    return f"the link is the one these ranks used: {BACKEND_NAMES.get(backend, backend)} between GPUs"


def describe_reference(reference: tuple[str, float] | None, backend: str, device: str) -> str:
    """The sentence under the bandwidth figure on its dashed line (``runs.bandwidth_reference``): what it
    is and why it bounds these ranks, or, where none was measured (ranks sharing one GPU), the path these
    ranks' bytes take instead."""
    if reference and device == "cpu":
        return (
            f'The black dashed line is {reference[0]}: on one machine the "link" between Gloo ranks is the '
            "loopback interface and memory copies, so a copy of one buffer in memory bounds what any "
            "collective here can reach."
        )
    if reference:
        return (
            f"The black dashed line is {reference[0]}, the link between two of these GPUs measured by a copy."
        )
    if device != "cpu" and backend == "gloo":
        return (
            "The figure draws no reference line: none was measured for the path these Gloo ranks share on "
            "one GPU. Each collective copies its tensor from the GPU to host memory over PCIe, passes it "
            "between the ranks' processes over the host's loopback interface and copies the result back to "
            "the GPU, all of it on one GPU and one host."
        )
    return "The figure draws no reference line: none was measured here."


def describe_scheduler(records, cores: int) -> str:
    """Whether any benchmark launch (``records``) had more ranks than ``cores``, where the time includes
    the scheduler's, as a phrase: ``with 3 ranks on 2 cores the time includes the scheduler's``, or that no
    launch here had."""
    sizes = sorted({record["config"]["world_size"] for record in records})
    crowded = [k for k in sizes if k > cores]
    if crowded:
        return f"with {listed(crowded)} ranks on {cores} cores the time includes the scheduler's"
    most = max(sizes, default=LINK_FIT_WORLD_SIZE)
    return (
        f"no launch here had more ranks than cores (at most {most} ranks on {cores} cores): where one has, "
        "the time includes the scheduler's"
    )


def describe_alphas(fits: pd.DataFrame, factor: float = 3.0) -> str:
    """A sentence on how our implementations' α (the ring and parameter-server all-reduces and the ring
    broadcast) compare with the library's (``dist.all_reduce``, its first fit in ``fits``, on the same
    backend and device): within the factor they lie in, computed, each α named, where every one lies within
    ``factor`` of it; else, for those further, why that is no property of the link."""
    nothing = "No implementation of ours was fitted beside the library's."
    library = fits[fits["operation"] == "all_reduce"]
    if library.empty or library["alpha_seconds"].iloc[0] <= 0:
        return nothing
    where = library.iloc[0]
    ours = fits[fits["operation"].isin(["all_reduce_ring", "parameter_server", "ring_broadcast"])
                & (fits["backend"] == where["backend"]) & (fits["device"] == where["device"])]  # fmt: skip
    ours = ours.drop_duplicates("operation")  # the first fit of each, as the library's
    if ours.empty:
        return nothing
    reference = where["alpha_seconds"]
    ratios = {operation_label(row.operation): row.alpha_seconds / reference for row in ours.itertuples()}
    far = {name: ratio for name, ratio in ratios.items() if not 1 / factor <= ratio <= factor}
    if not far:
        spread = max(max(ratio, 1 / ratio) for ratio in ratios.values())  # every ratio > 0 here
        each = ", ".join(
            f"{name} {microseconds(row.alpha_seconds)} µs"
            for name, row in zip(ratios, ours.itertuples(), strict=True)
        )
        return (
            f"Our implementations' α lie within {spread:.2g}× of the library's {microseconds(reference)} µs "
            f"({each}): per message they pay what it pays to within that factor."
        )
    listed_far = "; ".join(f"the α of {name} is {ratio:.2g}× the library's" for name, ratio in far.items())
    return (
        f"{listed_far[0].upper()}{listed_far[1:]}. Every implementation moves its bytes over the same "
        "link, so a difference this large is each one's own work per call (how it synchronises the "
        "ranks, the threads it hands the work to) and, on a busy machine, its waits for a core: it "
        "belongs to the implementation, not the link."
    )


ELSEWHERE = (  # the chapter 5 a reader sees may be another edition's, executed from another machine
    "a chapter executed from another machine's records, as another edition's chapter 5 may be, uses that "
    "machine's own fit"
)
RENTED = "The GPUs chapter 5 prices for rent use their links' published bandwidths, at an assumed share."


def describe_pricing(fits: pd.DataFrame, priced: dict, backend: str, device: str) -> str:
    """What chapters 5 (its step-time check), 6 and 7 price DDP's all-reduce with on the machine they
    model, and that rented GPUs are priced from their links' published bandwidths: the two-rank fit of the
    machine modelled, so that of
    this machine only where chapter 5 is executed from this machine's records; the book may show another
    machine's chapter 5, with that machine's fit, and the sentence says so (``ELSEWHERE``). ``priced`` is
    what chapter 5 would use from these records (``timemodel.all_reduce_alpha_beta`` of the results
    folder): the fit of ``dist.all_reduce`` shown here for ``backend`` on ``device``, or another record's,
    named by its α and 1/β."""
    chosen = fits.query("operation == 'all_reduce' and backend == @backend and device == @device")
    machine = (
        "Chapter 5's step-time check (5.9), chapter 6's price of the sharded runs and chapter 7's held-out "
        "test price DDP's all-reduce with the two-rank fit of the machine they model"
    )
    if (
        not chosen.empty
        and math.isclose(chosen["alpha_seconds"].iloc[0], priced["alpha_seconds"])
        and (math.isclose(chosen["seconds_per_byte"].iloc[0], priced["seconds_per_byte"]))
    ):
        return f"{machine}: this fit, where executed from this machine's records; {ELSEWHERE}. {RENTED}"
    return (
        f"{machine}; executed from this machine's records they would use another two-rank benchmark of this "
        f"results folder, the one with the most message sizes: α = {microseconds(priced['alpha_seconds'])} "
        f"µs and 1/β = {priced['bandwidth_bytes_per_second'] / 1e9:.2f} GB/s; {ELSEWHERE}. {RENTED}"
    )


CARRIES = "carries over"


def carry_over(
    beyond: pd.DataFrame,
    fit_error: float | None = None,
    ranks: int | None = None,
    implementation: str = "all_reduce (torch.distributed)",
    where: str | None = None,
    cores: int | None = None,
) -> dict | None:
    """Whether the two-rank fit carries over to ``ranks`` ranks (default: the most measured) for
    ``implementation`` (on ``where``, "gloo/cpu", default the first measured), as chapter 4 reads it from
    ``tables.beyond_the_fit``: the median ratio r (measured ÷ predicted, lower quartiles) and its range over
    message sizes, read alike on either side of 1. None where that rank count was not measured.

    ``verdict`` is "carries over" where r lies within ``stats.MATTERS`` of 1 (``reason`` "within MATTERS"),
    where the miss |r − 1| lies within ``fit_error``, the two-rank fit's own median error ("within the
    fit's own error"), or where the sizes lie on both sides of the fit and the miss is no larger than half
    their spread ("sizes on both sides"); ``within`` is then the furthest size's miss, what the fit carries
    over to within. Else "slower" (``reason`` "scheduler" with more ranks than ``cores``, else "something
    the model lacks") or "faster" ("faster than the fit"), and ``within`` None. ``median``, ``range``
    ("0.71–1.12"), ``low``, ``high``, ``miss``, ``direction`` (the side of the median), ``ranks``,
    ``where`` and ``implementation`` say what was read:
    ``{"verdict": "carries over", "within": 0.29, "median": 0.9, "range": "0.71–1.12", ...}``."""
    rows = beyond[beyond.index.get_level_values(1) == implementation]
    if where is not None:
        rows = rows[rows.index.get_level_values(0) == where]
    if ranks is None and not rows.empty:
        ranks = int(rows.index.get_level_values(2).max())
    rows = rows[rows.index.get_level_values(2) == ranks]
    if rows.empty:
        return None
    (place, name, k), row = next(iter(rows.iterrows()))
    ratio = float(row["measured ÷ two-rank model, median"])
    spread = row["range over message sizes"]
    low, high = (float(value) for value in spread.split("–"))
    miss, furthest = abs(ratio - 1), max(abs(low - 1), abs(high - 1))
    found = {"median": ratio, "range": spread, "low": low, "high": high, "miss": miss,
             "direction": "slower" if ratio > 1 else "faster", "ranks": int(k), "where": place,
             "implementation": name, "fit_error": fit_error, "within": None}  # fmt: skip
    if 1 / (1 + MATTERS) <= ratio <= 1 + MATTERS:
        return {**found, "verdict": CARRIES, "reason": "within MATTERS", "within": furthest}
    if fit_error is not None and miss <= fit_error:
        return {**found, "verdict": CARRIES, "reason": "within the fit's own error", "within": furthest}
    if low < 1 < high and miss <= (high - low) / 2:
        return {**found, "verdict": CARRIES, "reason": "sizes on both sides", "within": furthest}
    if ratio > 1:
        crowded = cores is not None and k > cores
        return {
            **found,
            "verdict": "slower",
            "reason": "scheduler" if crowded else "something the model lacks",
        }
    return {**found, "verdict": "faster", "reason": "faster than the fit"}


def describe_beyond(
    beyond: pd.DataFrame,
    cores: int,
    records=(),
    implementation: str = "all_reduce (torch.distributed)",
    fit_error: float | None = None,
) -> str:
    """A sentence on how the two-rank fit predicted ``implementation`` at the other rank counts, each read
    by ``carry_over``, on either side of 1 alike, from the median ratio r (measured ÷ predicted) and its
    range over message sizes:

    - r within ``stats.MATTERS`` of 1: the fit carries over (naming the furthest size's miss where the
      range reaches beyond ``MATTERS``);
    - the miss |r − 1| within ``fit_error``, the two-rank fit's own median error: faster or slower, it
      singles out no saving or cost of the extra ranks;
    - sizes on both sides of the fit and a miss no larger than half their spread: the fit carries over to
      within the furthest size's miss, and the fit's own error is named beside it;
    - else slower (with more ranks than ``cores``: the scheduler's time; else something the model lacks)
      or faster (the fit does not carry over; where the benchmark ``records`` say the two-rank launch was
      pinned and this one not, that difference is named).
    """
    if beyond.empty:
        return (
            f"Only {LINK_FIT_WORLD_SIZE} ranks were measured here, so the fit is not tested at other rank "
            "counts."
        )
    pinned = {record["config"]["world_size"]: is_pinned(record) for record in records}
    sentences = []
    for where, name, k in beyond.index:
        if name != implementation:
            continue
        read = carry_over(beyond, fit_error, k, implementation, where, cores)
        ratio, direction, miss = read["median"], read["direction"], read["miss"]
        straddles = read["low"] < 1 < read["high"] and read["reason"] != "within MATTERS"
        took = (
            f"With {k} ranks ({placement_words(*where.split('/'))}), {name} took {ratio:.2f}× what the "
            "two-rank fit predicts (lower "
            f"quartiles, median over message sizes; {read['range']}×"
            + (", so some sizes lie on the other side of the fit)" if straddles else ")")
        )
        own = f" (on two ranks it lies {fit_error:.0%} from its own points, median)" if fit_error else ""
        if read["reason"] == "within MATTERS":
            why = (
                "the fit carries over"
                + (f", every size to within {read['within']:.0%}" if read["within"] > MATTERS else "")
                + (f", even with {k} ranks on {cores} cores" if k > cores else "")
            )
        elif read["reason"] == "within the fit's own error":
            why = (
                f"about {miss:.0%} {direction} than predicted, within the two-rank fit's own error "
                f"({fit_error:.0%}), so it singles out no {'cost' if ratio > 1 else 'saving'} of the extra "
                "ranks"
            )
        elif read["reason"] == "sizes on both sides":
            why = (
                f"about {miss:.0%} {direction} than predicted over the sizes (median), a miss smaller than "
                f"the spread over sizes, so the fit carries over to within about {read['within']:.0%}{own}"
            )
        elif read["reason"] == "scheduler":
            why = (
                f"with {k} ranks on {cores} cores some rank waits for a core at every step: the scheduler's "
                "time, which no property of the link explains"
            )
        elif read["verdict"] == "slower":
            why = "something the two-rank model lacks costs time"
        else:
            why = "faster than the two-rank fit predicts, so it does not carry over to this launch"
            if pinned.get(LINK_FIT_WORLD_SIZE) and pinned.get(k) is False:
                why += (
                    "; the launches differ in more than k: the two ranks of the fit were pinned to cores "
                    "of their own, these were not, and a pinned rank cannot leave a core that another "
                    "process holds"
                )
        sentences.append(f"{took}: {why}.")
    return " ".join(sentences)


def describe_ring(table: pd.DataFrame, ranks: int = LINK_FIT_WORLD_SIZE, brief: bool = False) -> str:
    """Our ring against the library at the largest message measured on ``ranks`` ranks (the pinned launch
    of the link fit; another rank count where that is missing), as a phrase, the reading first: beat,
    fell behind, matched, can match or beat (the interval's low end within ``stats.MATTERS`` of 1), or
    not resolved; then the ratio and (not ``brief``, the answer box's form) its range from one launch's
    iterations."""
    if table.empty:
        return "not measured (no message large enough)"
    chosen = table[table.index.get_level_values("ranks") == ranks]
    (where, k, mib), row = next(iter((chosen if not chosen.empty else table).iloc[::-1].iterrows()))
    low, high = (float(value) for value in row["range (min–max pairing)"].split("–"))
    library = BACKEND_NAMES.get(where.split("/")[0], where.split("/")[0])
    if row["verdict"] == "faster":
        reading = f"our ring beat {library}'s all-reduce here"
    elif row["verdict"] == "slower":
        reading = f"our ring fell behind {library}'s all-reduce here"
    elif row["verdict"] == "no measurable difference":
        reading = f"our ring matched {library}'s all-reduce here"
    elif low >= 1 / (1 + MATTERS):
        reading = f"our ring can match or beat {library}'s all-reduce here"
    else:
        reading = "not resolved"
    bandwidth = f"{row['ours ÷ library']:.2f}× its bus bandwidth"
    said = f"{reading} — {bandwidth} at {mib} MiB on {k} ranks ({placement_words(*where.split('/'))})"
    if brief:
        return f"{said}, in one launch"
    spread = (
        f"in one launch whose iterations range {low:.2f}–{high:.2f}× when the fastest and slowest are paired"
    )
    return f"{said}, {spread}"


def describe_ring_costs(backend: str, device: str) -> str:
    """Why our ring can fall below the library's all-reduce on this backend and device, as sentences for
    the prose: its own extra work and, where Gloo holds CUDA tensors, how each stages them through host
    memory — ``p2p`` with one blocking copy each way, into a fresh host tensor in ordinary (pageable)
    memory (``p2p._in_place``: ``tensor.cpu()``), Gloo's own all-reduce through pinned buffers of its own
    with asynchronous copies (PyTorch's ``ProcessGroupGlooCuda``, on a transport without GPUDirect)."""
    own = "its own extra work (a scratch receive buffer, then a separate addition)"
    if device == "cpu" or backend != "gloo":
        return (
            "At large messages both are limited by the same copies and the same link, so the ratio could "
            f"approach 1. What can keep our ring below it is {own}, with the noise of ranks that share a "
            "machine on top."
        )
    return (
        "Both move a CUDA tensor's bytes through host memory and between the ranks over the same loopback "
        "path, but they stage them differently: `helpers.collectives.p2p` copies the whole tensor into a "
        "fresh host tensor in ordinary (pageable) memory on every call, with a blocking copy, runs the ring "
        "there and copies the result back, while Gloo's own all-reduce copies into pinned host buffers of "
        "its own, asynchronously on a stream of its own (PyTorch's `ProcessGroupGlooCuda`, on a transport "
        "without GPUDirect); a copy from pageable memory goes through a staging buffer of the driver, one "
        f"from pinned memory does not. On top come {own} and the noise of ranks that share one GPU and one "
        "host."
    )
