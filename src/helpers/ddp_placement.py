"""Where chapter 3's DDP launches ran, read from their records: the backends and devices that ran and why
the others did not, what the ranks shared (cores, one GPU taking turns, a GPU each), one rank set beside one
process without DDP, and the answer with NCCL's all-reduce predicted for GPUs of their own (``ddp_nccl``).
Every sentence comes from the records' configurations and the measuring machine's fingerprint
(``store.hardware``), never from the plan, so a GPU edition executed elsewhere from its records says what
ran there.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd

from helpers.ddp import launch_steps, matching, median_of_medians
from helpers.ddp_nccl import gpus_joined, predicted_band, predicted_ms
from helpers.ddp_results import (
    allreduce_seconds,
    backend_changes,
    describe_change,
    ms,
    warmup_table,
)
from helpers.launch import BACKEND_NAMES, without_advice
from helpers.results import hours_apart
from helpers.stats import PARAGRAPH_BREAK, listed


@dataclass(frozen=True)
class Placement:
    """Where the chapter's largest launches ran: their backend, the device of their tensors, their ranks and
    threads per rank (from the records), the GPUs they could use, the machine's cores and its GPU's name (from
    the fingerprint of the machine that measured them)."""

    backend: str
    device: str
    ranks: int
    gpus: int
    cores: int
    threads: int
    gpu_name: str | None = None

    @property
    def name(self) -> str:
        """The backend as a reader knows it: "Gloo", "NCCL"."""
        return BACKEND_NAMES.get(self.backend, self.backend)

    @property
    def shares_gpu(self) -> bool:
        """More ranks than GPUs: the ranks take turns on them."""
        return self.device == "cuda" and self.ranks > self.gpus

    @property
    def staged(self) -> bool:
        """Gloo with CUDA tensors: every bucket is copied to host memory, reduced there and copied back."""
        return self.backend == "gloo" and self.device == "cuda"

    @property
    def shared(self) -> str:
        """What the ranks share, in words: "the 2 cores", "one NVIDIA H200", "2 GPUs"; "" where each rank has
        a GPU of its own."""
        if self.device == "cpu":
            return f"the {self.cores} cores"
        if not self.shares_gpu:
            return ""
        return f"one {self.gpu_name or 'GPU'}" if self.gpus == 1 else f"{self.gpus} GPUs"


def placement(runs: list[tuple[dict, dict]], hardware: dict, gpus: int | None = None) -> Placement:
    """The ``Placement`` of the launch with the most ranks among ``runs``, on the machine whose fingerprint is
    ``hardware`` (``store.hardware``: the machine that measured), at most ``gpus`` of its GPUs usable."""
    record = max((record for _, record in runs), key=lambda r: r["config"]["world_size"])
    config, listed = record["config"], hardware.get("gpus") or []
    names = {gpu["name"] for gpu in listed}
    return Placement(
        config["backend"], config["device"], config["world_size"],
        len(listed) if gpus is None else min(gpus, len(listed)), hardware["usable_cores"],
        record["result"]["threads_per_rank"], names.pop() if len(names) == 1 else None,
    )  # fmt: skip


def _ranks(counts) -> str:
    counts = sorted(set(counts))
    return f"{listed(counts)} rank{'' if counts == [1] else 's'}"


def _one_or(count: int, noun: str) -> str:
    """``one GPU``, ``4 GPUs``: a count in words where it is one."""
    return f"one {noun}" if count == 1 else f"{count} {noun}s"


def _refusal(reason: str, where: Placement) -> str:
    """The launcher's refusal as a statement, without its advice."""
    if reason.startswith("NCCL only moves CUDA tensors"):
        return "it needs CUDA tensors, and " + (
            "this machine has no GPU" if where.gpus == 0 else "this run uses CPU tensors"
        )
    return without_advice(reason)


def backend_statements(
    runs: dict[str, list[tuple[dict, dict]]], plan: pd.DataFrame, backends: list[str], where: Placement
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What ran and what did not, per backend, as (backend's name, words) pairs.

    Ran: every backend among the records of ``runs`` (each section's launches), with its tensors' device,
    its rank counts and what they share, all from the records' configurations. Not run: each backend of
    ``plan`` (``launch.run_plan`` of NCCL and the chapter's ``backends``) with no record, and why: the
    launcher's refusal of every rank count; not among ``backends``; or only one rank possible here, which
    ``ddp.chapter_sweeps`` launches only on the backend that runs the most ranks."""
    ran: dict[str, dict] = {}
    for pairs in runs.values():
        for _, record in pairs:
            entry = ran.setdefault(record["config"]["backend"], {"devices": set(), "ranks": set()})
            entry["devices"].add(record["config"]["device"])
            entry["ranks"].add(record["config"]["world_size"])
    measured = []
    for backend, entry in ran.items():
        largest = max(entry["ranks"])
        if "cuda" not in entry["devices"]:
            share = f"on the machine's {where.cores} cores"
        elif largest <= where.gpus:
            share = "a GPU per rank"
        elif where.gpus == 1:
            share = f"the {largest} ranks taking turns on one {where.gpu_name or 'GPU'}"
        else:
            share = f"the {largest} ranks sharing {where.gpus} GPUs"
        devices = " and ".join(sorted(device.upper() for device in entry["devices"]))
        refused = plan[(plan["backend"] == backend) & ~plan["runs"].astype(bool)]
        if len(refused):  # e.g. NCCL's one rank on one GPU: not the chapter's largest count, and why
            counts = listed(sorted(set(int(k) for k in refused["ranks"])))
            share = f"not {counts}, since {_refusal(refused.iloc[0]['reason'], where)}"
        words = f"with {devices} tensors, {_ranks(entry['ranks'])} ({share})"
        measured.append((BACKEND_NAMES.get(backend, backend), words))
    missing = []
    for backend in dict.fromkeys(plan["backend"]):
        if backend in ran:
            continue
        rows, name = plan[plan["backend"] == backend], BACKEND_NAMES.get(backend, backend)
        can, refused = sorted(int(k) for k in rows.query("runs")["ranks"]), rows.query("not runs")
        if not can:
            why = _refusal(refused.iloc[0]["reason"], where)
        elif backend not in backends:
            why = "not among the backends this run was asked to compare"
        else:
            limit = f" ({_refusal(refused.iloc[0]['reason'], where)})" if len(refused) else ""
            gpus, most = _one_or(where.gpus, "GPU"), _one_or(max(can), "rank")
            why = (
                f"with {gpus} it can start only {most}{limit}; the chapter's one-rank baseline runs on "
                f"{where.name}, the backend that can run all its rank counts here, so no {name} run is among "
                "these records"
            )
        missing.append((name, why))
    return measured, missing


def measured_statement(
    runs: dict[str, list[tuple[dict, dict]]], plan: pd.DataFrame, backends: list[str], where: Placement
) -> str:
    """``backend_statements`` as the chapter's bold "Measured here" line (Markdown)."""
    measured, missing = backend_statements(runs, plan, backends, where)
    parts = [f"**Measured here:** {'; '.join(f'{n} {w}' for n, w in measured) or 'nothing'}."]
    return " ".join(parts + [f"**Not measured here: {name}** — {why}." for name, why in missing])


def backends_headline(runs: dict[str, list[tuple[dict, dict]]]) -> str:
    """The answer to the chapter title's question, in a few words: "compared on 4 ranks" where NCCL and Gloo
    both ran the same rank count (``ddp_results.backend_changes``), with the largest count they could not
    compare on ("compared on one rank, not on 4": one GPU), "not compared on this machine" otherwise."""
    changes = backend_changes(runs["scaling"])
    if not changes:
        return "not compared on this machine"
    ranks, most = max(k for _, k in changes), max(v["ranks"] for v, _ in runs["scaling"])
    return f"compared on {_one_or(ranks, 'rank')}" + (f", not on {most}" if ranks < most else "")


def _one_rank_gap(runs: list[tuple[dict, dict]], changes: dict, models: list[str]) -> str:
    """What the hook's all-reduce times say of the step difference between one NCCL and one Gloo rank, and
    which of the compared launches were still getting faster in their timed steps (``warmup_table``)."""
    reduced = {
        (m, name): allreduce_seconds(runs, model=m, backend=name, ranks=1)
        for m in models
        for name in ("nccl", "gloo")
    }
    steps = listed(ms(changes[m, 1]["baseline_seconds"] - changes[m, 1]["candidate_seconds"]) for m in models)
    spans = listed(_launch_gap(runs, m) for m in models)
    gaps = listed(ms(reduced[m, "gloo"] - reduced[m, "nccl"]) for m in models)
    said = (
        "With no peer neither moves a byte between GPUs. The steps differ by "
        f"{steps} ms (medians of the launches; {spans} ms from any Gloo launch to any NCCL one), the "
        f"all-reduces as the hook timed them by {gaps} ms (NCCL's "
        f"{listed(ms(reduced[m, 'nccl']) for m in models)} against Gloo's "
        f"{listed(ms(reduced[m, 'gloo']) for m in models)}, which stages every bucket through host memory); "
        "the hook's times overlap the rest of the step, so they need not add up to its "
        "difference."
    )
    readings = warmup_table(runs)["reading"]
    unsettled = [
        f"`{m}`'s {BACKEND_NAMES.get(b, b)} rank"
        for (m, b, k), reading in readings.items()
        if k == 1 and m in models and reading.startswith("still getting faster")
    ]
    if unsettled:
        said += (
            f" {listed(unsettled)} {'was' if len(unsettled) == 1 else 'were'} still getting faster in the "
            "timed steps (section 3.2's warm-up table), so its median may overstate its settled step."
        )
    return said


def _launch_gap(runs: list[tuple[dict, dict]], model: str) -> str:
    """How far one Gloo rank's median step lies above one NCCL rank's, from the closest pair of launches to
    the farthest: "0.98–1.12" ("1.05" when every pair differs by as much)."""
    medians = {
        backend: [statistics.median(s) for s in launch_steps(runs, model=model, backend=backend, ranks=1)]
        for backend in ("gloo", "nccl")
    }
    low = min(medians["gloo"]) - max(medians["nccl"])
    high = max(medians["gloo"]) - min(medians["nccl"])
    return ms(low) if ms(low) == ms(high) else f"{ms(low)}–{ms(high)}"


def _why_not_compared(
    runs: dict[str, list[tuple[dict, dict]]], plan: pd.DataFrame, backends: list[str], where: Placement
) -> str:
    """Why NCCL and Gloo were not compared here, in one clause, from the plan and the records."""
    ran = {record["config"]["backend"] for pairs in runs.values() for _, record in pairs}
    names = listed(BACKEND_NAMES.get(b, b) for b in sorted(ran))
    nccl = plan[plan["backend"] == "nccl"]
    can = sorted(int(k) for k in nccl.query("runs")["ranks"])
    gpus = _one_or(where.gpus, "GPU")
    if "nccl" in ran and can and max(can) < where.ranks:
        most = _one_or(max(can), "rank")
        return (
            f"With {gpus} NCCL cannot start more than {most} (it needs a GPU per rank), so the runs of "
            f"{where.ranks} ranks here are {where.name}'s"
        )
    if "nccl" in ran:
        return f"Gloo ran no rank count that NCCL ran, so the runs here are {names}'s"
    if not can:
        reason = nccl.query("not runs")["reason"].iloc[0] if len(nccl) else ""
        if reason.startswith("NCCL only moves CUDA tensors"):
            has = "this machine has no GPU" if where.gpus == 0 else "this run uses CPU tensors"
            return f"NCCL needs CUDA tensors and {has}, so every run here is {names}"
        return f"NCCL cannot start here ({without_advice(reason)}), so every run here is {names}"
    if "nccl" not in backends:
        return f"NCCL was not among the backends this run was asked to compare, so every run here is {names}"
    most = _one_or(max(can), "rank")
    return (
        f"With {gpus} NCCL cannot start more than {most} (it needs a GPU per rank), so every run here is "
        f"{names}"
    )


def _backends_apart(runs: list[tuple[dict, dict]], ranks: int, models: list[str]) -> float:
    """Hours between the compared Gloo and NCCL launches where they were not launched in alternating
    rounds (``results.hours_apart``: 0 where their times overlap)."""
    picked = {backend: [r for v, r in runs if v["backend"] == backend and v["ranks"] == ranks
                        and v["model"] in models] for backend in ("gloo", "nccl")}  # fmt: skip
    return hours_apart(picked["gloo"], picked["nccl"])


def _backend_verdicts(changes: dict, brief: bool = False) -> tuple[int, list[str], str]:
    """Of ``backend_changes``, the most ranks both backends ran, the models compared there and NCCL's
    speed-up over Gloo for each, as one phrase (``brief``: without the intervals)."""
    ranks = max(k for _, k in changes)
    compared = [model for model, k in changes if k == ranks]
    said = [f"`{m}` {describe_change(changes[m, ranks], brief=brief)}" for m in compared]
    return ranks, compared, "; ".join(said)


def backends_brief(runs: dict[str, list[tuple[dict, dict]]]) -> str:
    """The answer box's line after ``backends_headline``: NCCL's speed-up over Gloo per model where both
    ran the same ranks, or that they were not compared here (``backends_answer`` says why)."""
    changes = backend_changes(runs["scaling"])
    if not changes:
        return "They were not compared here: see below."
    ranks, compared, verdicts = _backend_verdicts(changes, brief=True)
    who = "a GPU per rank" if ranks > 1 else "one rank each on the same GPU"
    hours = _backends_apart(runs["scaling"], ranks, compared)
    apart = f" (the two launched {hours:.1f} h apart)" if hours else ""
    return f"NCCL's speed-up over Gloo, {who}: {verdicts}{apart}."


def backends_answer(
    runs: dict[str, list[tuple[dict, dict]]],
    plan: pd.DataFrame,
    backends: list[str],
    where: Placement,
    largest: list[dict],
) -> str:
    """What follows ``backends_headline`` in the answer box. Where NCCL and Gloo ran the same ranks, NCCL's
    speed-up over Gloo per model. Otherwise why they were not compared (the plan's refusal, the backends
    asked for, or one GPU), then, where 3.4 predicts it (``ddp_nccl.largest_launches``' ``nccl``), NCCL's
    all-reduce of the largest model's gradients on GPUs of their own, its band over chapter 5's bus
    bandwidths, beside the all-reduce measured here. Markdown: the comparison and the rest are paragraphs of
    their own."""
    changes, said = backend_changes(runs["scaling"]), ""
    if changes:
        ranks, compared, verdicts = _backend_verdicts(changes)
        if ranks > 1:
            said = f"NCCL's speed-up over Gloo, a GPU per rank (section 3.4): {verdicts}."
        else:
            said = (
                f"One NCCL rank against one Gloo rank on the same GPU (section 3.4): {verdicts}. "
                + _one_rank_gap(runs["scaling"], changes, compared)
            )
        hours = _backends_apart(runs["scaling"], ranks, compared)
        if hours:
            said += (
                f" NCCL's and Gloo's launches ran {hours:.1f} h apart, not in alternating rounds, so these "
                "ratios compare runs made hours apart, not side by side."
            )
        if ranks >= where.ranks:
            return said
        said += PARAGRAPH_BREAK  # what was compared, then why no more was: a paragraph each
    said += _why_not_compared(runs, plan, backends, where) + "."
    predicted = [row for row in largest if row["nccl"]]
    if predicted:
        row = max(predicted, key=lambda r: r["bytes"])
        nccl = row["nccl"]
        said += (
            f" On {where.ranks} {gpus_joined(nccl)}, NCCL is predicted to all-reduce `{row['model']}`'s "
            f"gradients in about {predicted_ms(nccl['seconds'])} ms ({predicted_band(nccl)} ms over chapter "
            f"5's range of bus bandwidths for the link); {where.name} took {ms(row['allreduce'])} ms here "
            "(section 3.4)"
            + (f", its {where.ranks} ranks taking turns on {where.shared}." if where.shares_gpu else ".")
        )
    elif where.gpu_name is None:
        said += " Chapter 5 predicts NCCL on GPUs for rent."
    return said


def plain_step_seconds(
    step_records: list[dict],
    model: str,
    device: str,
    batch_size: int,
    optimizer: str,
    lr: float,
    threads: int,
) -> tuple[float, int] | None:
    """Chapter 1's step of one process without DDP (``step_timing`` records in float32) of ``model`` at
    ``batch_size`` on ``device`` (its first GPU for "cuda") with the same optimizer, learning rate and
    threads: the median of the matching records' medians, and how many matched; None where chapter 1 timed
    none into this results folder."""
    wanted = {"model": model, "device": "cuda:0" if device == "cuda" else device, "batch_size": batch_size,
              "optimizer": optimizer, "lr": lr, "threads": threads, "autocast": None}  # fmt: skip
    found = [
        statistics.median(record["result"]["step_seconds_all"])
        for record in step_records
        if all(record["config"].get(key) == value for key, value in wanted.items())
    ]
    return (statistics.median(found), len(found)) if found else None


def one_rank_rows(runs: list[tuple[dict, dict]], step_records: list[dict]) -> list[dict]:
    """Per model and backend, its one-rank launches beside one process without DDP (``plain_step_seconds``,
    None where chapter 1 timed none): the backend, device and batch, the median steps and the one rank's
    all-reduce."""
    rows = []
    for model, backend in dict.fromkeys((v["model"], v["backend"]) for v, _ in runs if v["ranks"] == 1):
        setup = {"model": model, "backend": backend, "ranks": 1}
        mine = matching(runs, **setup)
        config, result = mine[0][1]["config"], mine[0][1]["result"]
        plain = plain_step_seconds(step_records, model, config["device"], config["global_batch_size"],
                                   config["optimizer"], config["lr"], result["threads_per_rank"])  # fmt: skip
        rows.append({"model": model, "backend": backend, "device": config["device"],
                     "batch": config["global_batch_size"], "plain": plain[0] if plain else None,
                     "rank": median_of_medians(launch_steps(mine)),
                     "allreduce": allreduce_seconds(runs, **setup)})  # fmt: skip
    return rows


def one_rank_table(rows: list[dict]) -> pd.DataFrame:
    """``one_rank_rows`` as a table, in ms, per model and backend: one process without DDP, one rank, its
    all-reduce, the difference."""
    table = [
        {"model": row["model"], "backend": BACKEND_NAMES.get(row["backend"], row["backend"]),
         "one process, no DDP (ms)": ms(row["plain"]) if row["plain"] else "– (chapter 1 did not time it)",
         "one rank (ms)": ms(row["rank"]),
         "its all-reduce, timed in the hook (ms)": ms(row["allreduce"]),
         "one rank less one process (ms)": ms(row["rank"] - row["plain"]) if row["plain"] else "–"}
        for row in rows
    ]  # fmt: skip
    return pd.DataFrame(table).set_index(["model", "backend"])


def _one_backend(rows: list[dict], lead: str) -> str:
    """One backend's one-rank steps beside one process's, and the share of its all-reduce, in words."""
    first = rows[0]
    name = BACKEND_NAMES.get(first["backend"], first["backend"])
    said = lead + listed(
        f"{ms(r['rank'])} against {ms(r['plain'])} ms a step for `{r['model']}`" for r in rows
    )
    reduced = [r for r in rows if not math.isnan(r["allreduce"])]
    if reduced:
        how = (
            f"which {name} stages through host memory even for one rank, each bucket copied off the GPU and "
            "back"
            if first["backend"] == "gloo" and first["device"] == "cuda"
            else f"which {name} runs even for one rank"
        )
        said += (
            f"; {listed(ms(r['allreduce']) for r in reduced)} ms of the rank's "
            f"{'steps are' if len(reduced) > 1 else 'step is'} the all-reduce, {how}"
        )
    return said + "."


def one_rank_sentence(rows: list[dict]) -> str:
    """What one rank costs over one process without DDP, from ``one_rank_rows``, backend by backend: the
    steps side by side and the share of the all-reduce a rank with no peer still runs (Gloo with CUDA
    tensors stages it through host memory); models chapter 1 did not time are named as such."""
    if not rows:
        return "No launch of one rank is among these records."
    first = rows[0]
    on = "the same GPU" if first["device"] == "cuda" else "the same CPU"
    timed = [row for row in rows if row["plain"]]
    untimed = list(dict.fromkeys(f"`{row['model']}`" for row in rows if not row["plain"]))
    sentences = []
    backends = list(dict.fromkeys(row["backend"] for row in timed))
    for number, backend in enumerate(backends):
        name = BACKEND_NAMES.get(backend, backend)
        lead = (
            f"One {name} rank, with no peer to exchange gradients with, against one process without DDP: "
            if number == 0
            else f"One {name} rank: "
        )
        sentences.append(_one_backend([row for row in timed if row["backend"] == backend], lead))
    if timed:
        sentences.append(
            "The process without DDP is chapter 1's step timing of the same model, batch of "
            f"{first['batch']}, optimizer and threads on {on}, on this same machine. Its batches come from a "
            "data set already in the device's memory, while a DDP rank's step also loads its batch through "
            f"a DataLoader{' and copies it to the GPU' if first['device'] == 'cuda' else ''}: the difference "
            "is DDP and that loading together, not DDP alone."
        )
    if untimed:
        sentences.append(
            f"This machine's records hold no chapter 1 timing of a process without DDP of {listed(untimed)} "
            f"at a batch of {first['batch']} on {first['device']}, so one rank has nothing beside it here."
        )
    return " ".join(sentences)


def ranks_intro(where: Placement) -> str:
    """What 3.4's comparison of k ranks with one measures, given where the ranks ran."""
    if where.device == "cpu":
        return (
            f"With {where.name} on one CPU the ranks share its {where.cores} cores (each rank gets an equal "
            "share of threads), so as in chapter 2 this measures what the machinery costs, not a speed-up."
        )
    if where.shares_gpu:
        return (
            f"Here the {where.ranks} {where.name} ranks take turns on {where.shared} (each with "
            f"{where.threads} threads, its share of the machine's {where.cores} cores), so as in chapter 2 "
            "this measures what the machinery costs, not a speed-up."
        )
    return (
        f"Here each of the {where.ranks} ranks has a GPU of its own, so this measures a speed-up: what the "
        "extra GPUs gain, less what DDP's machinery costs."
    )


def scaling_context(where: Placement) -> str:
    """What the k ranks and the one process differ in, beyond DDP's arithmetic, given where they ran."""
    if where.device == "cpu":
        return (
            f"On a CPU no extra hardware is at work: the comparison is between two ways of using the same "
            f"{where.cores} cores (one process with all the threads against several processes with a share "
            f"of them each), plus what DDP adds (a process per rank, an all-reduce of every gradient through "
            f"{where.name}'s loopback sockets)."
        )
    exchange = (
        "that Gloo copies from the GPU to host memory, exchanges over loopback sockets and copies back"
        if where.staged
        else f"through {where.name}"
    )
    if where.shares_gpu:
        return (
            f"On {where.shared} no extra hardware is at work: the comparison is between one process with the "
            f"whole batch and {where.ranks} processes that take turns on the GPU with 1/{where.ranks} of it "
            f"each, plus what DDP adds (a process per rank, and an all-reduce of every gradient {exchange})."
        )
    return (
        f"Each rank has a GPU of its own: the comparison is between one GPU with the whole batch and "
        f"{where.ranks} GPUs with 1/{where.ranks} of it each, plus what DDP adds (a process per rank, and an "
        f"all-reduce of every gradient {exchange})."
    )


def scaling_sentence(changes: dict[str, dict], ranks: int, where: Placement) -> str:
    """What the ranks against one process mean where they ran, per verdict (``changes``: model →
    ``compare`` result). On shared cores or a shared GPU, processes that won used the shared hardware better
    than one process, which is not DDP scaling, and processes that lost paid for what DDP adds; with a GPU
    per rank, the extra GPUs won or DDP's costs lost. An unresolved comparison says nothing. The models of a
    verdict are named, or "Both" / "All n" where every model got it."""
    if not changes:
        return "With one rank there is nothing to compare."
    by_verdict: dict[str, list[str]] = {}
    for model, change in changes.items():
        by_verdict.setdefault(change["verdict"], []).append(f"`{model}`")
    through = " through host memory" if where.staged else ""
    words = {
        "cpu": (
            f"{{}} won: {ranks} processes with a share of the threads each beat one process with all of "
            "them, so the cores were used better by processes than by one operator's threads at a small "
            "batch; that is not DDP scaling.",
            "{} lost: what DDP adds cost more than any better use of the cores gained.",
            "For {} the two ways of using the cores came out the same.",
        ),
        "shared": (
            f"{{}} won: {ranks} ranks taking turns on {where.shared} beat one process, keeping the GPU "
            "busier than one process did, each issuing its own kernels; that is not DDP scaling.",
            "{} lost: what DDP adds here (processes taking turns on the GPU, and the all-reduce"
            f"{through}) cost more than splitting the batch saved.",
            "For {} the ranks sharing the GPU and one process came out the same.",
        ),
        "own": (
            f"{{}} won on {ranks} GPUs of their own: the extra GPUs did it, which is DDP scaling.",
            f"{{}} lost: what DDP adds (a process per rank and the all-reduce{through}) cost more than the "
            "extra GPUs gained.",
            "For {} the extra GPUs and DDP's costs came out even.",
        ),
    }["cpu" if where.device == "cpu" else "shared" if where.shares_gpu else "own"]

    def who(models: list[str], opening: bool) -> str:
        if len(models) == len(changes) > 1:
            every = "both" if len(models) == 2 else f"all {len(models)}"
            return every.capitalize() if opening else f"{every} models"
        return listed(models)

    sentences = []
    for verdict, text in zip(("faster", "slower", "no measurable difference"), words, strict=True):
        if verdict in by_verdict:
            sentences.append(text.format(who(by_verdict[verdict], not text.startswith("For"))))
    if "not resolved" in by_verdict:
        sentences.append(
            f"For {who(by_verdict['not resolved'], False)} the launches do not resolve a difference."
        )
    return " ".join(sentences)


def loopback_sentence(where: Placement) -> str:
    """How the all-reduce's bytes travel here (3.6), and what slower links would do."""
    later = "across links much slower than memory the all-reduce, and so what compression can save, grows"
    if where.staged:
        return (
            "Gloo copies every bucket from the GPU to host memory, sends it over loopback through the "
            "kernel's TCP stack and copies the average back to the GPU; NCCL on GPUs of their own would move "
            f"it GPU to GPU (section 3.4 predicts how fast), and {later} (chapter 5 prices the links)."
        )
    if where.device == "cuda":
        return f"{where.name} moves every byte GPU to GPU; {later} (chapter 5 prices the links)."
    return (
        f"Over loopback, {where.name} sends every byte through the kernel's TCP stack; {later} (chapter 5 "
        "prices the links)."
    )


def machine_reading(where: Placement, missing: list[tuple[str, str]]) -> str:
    """ "What this machine can and cannot show", from where the ranks ran and the backends that did not run
    (``backend_statements``'s second list)."""
    shows = (
        "These measurements show what DDP's machinery costs (a process per rank, a process group, a bucketed "
        "all-reduce{}), how much of a step its all-reduce can be, and whether it trains the same model as "
        "one process, up to float32 rounding."
    )
    absent = " ".join(f"{name} was not measured: {why}." for name, why in missing)
    if where.device == "cpu":
        return " ".join(filter(None, [
            f"On a CPU-only machine every rank shares the same {where.cores} cores, so more ranks add no "
            "hardware: a faster run here means the cores were used better, not that DDP scaled.",
            shows.format(f" through {where.name} over the loopback interface"), absent,
            "NCCL needs GPUs — one per rank. The `gpu` profile runs every section on GPUs, NCCL against Gloo "
            "at each rank count above one with a GPU per rank; on a single-GPU machine Gloo's ranks share "
            "the GPU.",
        ]))  # fmt: skip
    through = (
        ", which Gloo copies from the GPU to host memory, exchanges over the loopback interface and copies "
        "back"
        if where.staged
        else f" through {where.name}"
    )
    if where.shares_gpu:
        first = (
            f"On this machine the {where.ranks} ranks take turns on {where.shared}, so more ranks add no "
            f"hardware: a faster run here would mean the GPU was kept busier, not that DDP scaled."
        )
    else:
        first = f"On this machine each of the {where.ranks} ranks has a GPU of its own: more ranks add GPUs."
    return " ".join(filter(None, [first, shows.format(through), absent]))


# How 3.6's bounds (``ddp_bounds.communication_bound``) treat what the backward pass can hide.
_HIDDEN = (
    "which let the part of an all-reduce before the backward pass's last gradient hide at no cost (a step "
    "holding between the all-reduce's tail after that gradient and all of it)"
)


def overlap_reading(where: Placement) -> str:
    """Why what bucket overlap buys can or cannot show here (beside what NCCL does differently)."""
    if where.device == "cpu":
        return (
            f"Here {where.name}'s threads run the all-reduce on the same {where.cores} cores as the backward "
            "pass, so the overlap that DDP's buckets arrange competes with the computation for the cores, "
            'and what bucket overlap buys cannot show: an all-reduce "hidden" behind the backward pass still '
            f"takes its core's time here, so the bounds above, {_HIDDEN}, are the GPU's picture, where the "
            "hidden part is free."
        )
    if where.shares_gpu:
        host = (
            "copies each bucket off the GPU and reduces it on the host, while "
            if where.staged
            else "runs, while "
        )
        return (
            f"Here {where.name} {host}the {where.ranks} ranks' backward passes take turns on {where.shared}: "
            "a bucket handed over early waits for the other ranks' backward passes, so the hook's time in "
            "flight holds that wait, and what bucket overlap buys cannot show. The bounds above, "
            f"{_HIDDEN}, are the picture of GPUs of their own, where the hidden part is free."
        )
    if where.staged:
        return (
            "Here Gloo copies each bucket off its GPU and reduces it on the host: the copies and the "
            "reduction overlap the backward pass only as far as the copy engines and the host's cores allow."
        )
    return f"Here {where.name} ran on GPUs of their own, so the bounds above are that picture."
