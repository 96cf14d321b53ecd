"""Scaling (chapter 6): speed-up and efficiency, strong and weak, and gradient accumulation — what one
device does with k times the batch, the baseline that k devices must beat.

The book's terms, defined once:

- **speed-up** S(k): how many times faster k devices do the same work as one;
- **efficiency** E(k) = S(k) / k: 1 when every device is fully used;
- **strong scaling**: the same global batch split over k devices, each doing 1/k of it; S(k) is the ratio
  of step times, one device's over k devices';
- **weak scaling**: the same batch per device, so the global batch grows with k; every device does one
  device's work, so E(k) is the ratio of step times and S(k) = k · E(k) in samples per second.

Gradient accumulation runs k micro-batches through one device before each update. Its update is the one
k ranks of DDP make with the same global batch (``helpers.ddp.GlobalBatchSampler`` gives both the same
batches), so it buys the larger batch without more devices; what more devices buy is time. It is the
baseline only where the global batch does not fit one device: where it fits, one pass at the whole batch
is the baseline (on a GPU it beats k smaller passes).

Every timing comparison here rests on independent launches (``stats.launch_speedup``); the ``*_view``
functions turn the tables into what the chapter shows: human column names with units, rounded.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.data import load_fsdd, take
from helpers.ddp import GlobalBatchSampler
from helpers.launch import launch
from helpers.models import build_model
from helpers.results import measured_in_rounds
from helpers.sharding.runs import WORKER, sharding_config, stored_sharding_run
from helpers.sharding.tasks import global_batches
from helpers.stats import (
    BASELINE,
    describe_speedup,
    interval_label,
    interval_text,
    launch_speedup,
    ms,
    point_text,
    scientific,
    verdict_words,
)
from helpers.train import Timer, check_positive, make_optimizer, to_device


def check_split(global_batch: int, world_size: int, micro_batches: int = 1) -> int:
    """The per-rank micro-batch: ValueError unless ``global_batch`` divides into ranks × micro-batches."""
    check_positive(global_batch=global_batch, world_size=world_size, micro_batches=micro_batches)
    if global_batch % (world_size * micro_batches):
        raise ValueError(
            f"a global batch of {global_batch} does not divide into {world_size} rank(s) × "
            f"{micro_batches} micro-batch(es)"
        )
    return global_batch // (world_size * micro_batches)


def scaling_variations(world_sizes, global_batch: int, per_rank_batch: int) -> list[dict]:
    """The DDP runs of a strong and a weak scaling experiment, checked before any of them starts."""
    variations = []
    for ranks in world_sizes:
        check_split(global_batch, ranks)
        variations.append({"scaling": "strong", "ranks": ranks, "global_batch_size": global_batch})
        variations.append({"scaling": "weak", "ranks": ranks, "global_batch_size": per_rank_batch * ranks})
    return variations


def stored_scaling_runs(
    store, models, variations: list[dict], launches: int = 1, **settings
) -> dict[str, list[tuple[dict, dict]]]:
    """The launches of chapter 6's timing comparisons, ``launches`` rounds of each, through the store.

    A round is every model's DDP launch of every variation (``sharding.runs.stored_sharding_run``,
    strategy "ddp"), then one device accumulating the strong variations' global batch in as many
    micro-batches as each strong variation has ranks, and in one (``stored_accumulation``, on the
    ranks' first device). A round is one ``store.together``: the accumulation is set against the DDP
    launches of its own round, never against launches measured on another day. Returns ``{"ddp":
    pairs for efficiency_table, "accumulation": pairs for accumulation_table}``, each pair a variation
    (with its model and ``launch`` number) and its record."""
    strong = [variation for variation in variations if variation["scaling"] == "strong"]
    micro_batch_counts = sorted({1, *(variation["ranks"] for variation in strong)}) if strong else []
    global_batches = {variation["global_batch_size"] for variation in strong}
    if len(global_batches) > 1:
        raise ValueError(f"strong scaling holds one global batch; these variations have {global_batches}")
    order = []
    for number in range(launches):
        order += [("ddp", number, model, variation) for model in models for variation in variations]
        order += [("accumulation", number, model, k) for model in models for k in micro_batch_counts]
    accumulate_on = "cuda:0" if settings.get("device") == "cuda" else "cpu"

    def measure(entry: tuple) -> dict:
        kind, number, model, variation = entry
        if kind == "accumulation":
            return stored_accumulation(
                store, model, settings["train_samples"], launch_number=number, micro_batches=variation,
                global_batch_size=min(global_batches), steps=settings["steps"], device=accumulate_on,
            )  # fmt: skip
        return stored_sharding_run(
            store, variation["ranks"], launch_number=number, model=model, strategy="ddp",
            global_batch_size=variation["global_batch_size"], **settings,
        )  # fmt: skip

    records = measured_in_rounds(store, order, lambda entry: entry[1], measure, "scaling runs")
    runs: dict[str, list[tuple[dict, dict]]] = {"ddp": [], "accumulation": []}
    for (kind, number, model, variation), record in zip(order, records, strict=True):
        if kind == "accumulation":
            runs[kind].append(({"model": model, "micro_batches": variation, "launch": number}, record))
        else:
            runs[kind].append(({**variation, "model": model, "launch": number}, record))
    return runs


def rounds_note(runs: dict[str, list[tuple[dict, dict]]]) -> str:
    """The sentence saying how ``stored_scaling_runs``' records were measured, to stand before the prose on
    rounds: "" when every record
    carries its round's stamp (``measured_with``: accumulation and DDP launches measured in one round);
    otherwise, for records stored before rounds were recorded, when the accumulation runs and the DDP
    launches were measured, so that a reader can see how far apart the two sides are."""
    records = {kind: [record for _, record in pairs] for kind, pairs in runs.items()}
    every = [record for kind in records.values() for record in kind]
    if not records.get("accumulation") or all(record.get("measured_with") for record in every):
        return ""
    spans = {}
    for kind, kept in records.items():
        times = sorted(pd.Timestamp(record["measured_at"]) for record in kept)
        spans[kind] = (times[0], times[-1])
    (ddp_first, ddp_last), (first, last) = spans["ddp"], spans["accumulation"]
    when = "%Y-%m-%d %H:%M UTC"
    if first >= ddp_last and first - ddp_last < pd.Timedelta(hours=1):
        minutes = round((first - ddp_last).total_seconds() / 60)
        gap = f"{minutes} min" if minutes >= 1 else "under a minute"
        return (
            "These records were not measured in rounds: from "
            f"{ddp_first.strftime(when)[:-4]} "
            f"to {last.strftime('%H:%M')} UTC in one session, with the accumulation runs after every DDP "
            f"launch (the first of them {gap} after the last DDP launch), so the ratios against DDP below "
            "compare runs made one after the other, not side by side."
        )
    return (
        "These records were not measured in rounds: the DDP launches from "
        f"{ddp_first.strftime(when)} to {ddp_last.strftime(when)}, the accumulation runs from "
        f"{first.strftime(when)} to {last.strftime(when)}, so the ratios against DDP below compare runs not "
        "made side by side."
    )


def shared_launch_note(world_sizes, per_rank_batch: int, global_batch: int) -> str:
    """The sentence saying which k's strong and weak points are one launch (k × the per-rank batch is the
    global batch there: the same run, measured once and drawn twice); "" when no k is shared."""
    shared = [k for k in world_sizes if k * per_rank_batch == global_batch]
    if not shared:
        return ""
    k = shared[0]
    return (
        f"At k = {k}, {k} × {per_rank_batch} is the global batch of {global_batch}, so the strong and the "
        "weak point there are the same launches, measured once and drawn twice."
    )


def efficiency_table(runs: list[tuple[dict, dict]]) -> pd.DataFrame:
    """Speed-up and efficiency, with their intervals, of (variation, DDP record) pairs.

    Variations name ``model``, ``scaling`` ("strong" or "weak") and ``ranks`` (and ``launch``: the
    launches of one variation are compared together, ``stats.launch_speedup``), each compared with the
    one-rank launches of the same model and scaling. A strong-scaling step does one-rank work, so the
    step-time ratio is the speed-up. A weak-scaling step does k one-rank steps' work, so its time per
    one-rank step's work is the step time / k: the speed-up counts samples per second, and its interval
    and verdict say whether k ranks get through more samples than one. Efficiency is speed-up / k.
    """
    by_variation: dict[tuple, list[list[float]]] = {}
    for variation, record in runs:
        key = (variation["model"], variation["scaling"], variation["ranks"])
        by_variation.setdefault(key, []).append(record["result"]["step_seconds_all"])
    rows = []
    for (model, scaling, ranks), steps in sorted(by_variation.items()):
        base = by_variation.get((model, scaling, 1))
        if base is None:
            continue
        work = ranks if scaling == "weak" else 1  # one-rank steps' work per step
        change = launch_speedup(base, [[seconds / work for seconds in launch] for launch in steps])
        rows.append(
            {
                "model": model, "scaling": scaling, "ranks": ranks, "launches": len(steps),
                "step_median": float(np.median([np.median(launch) for launch in steps])),
                "speedup": change["speedup"], "speedup_low": change["low"], "speedup_high": change["high"],
                "efficiency": change["speedup"] / ranks, "verdict": change["verdict"],
                "launch_counts": change["launches"],
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def efficiency_view(table: pd.DataFrame) -> pd.DataFrame:
    """``efficiency_table`` as the chapter shows it: one row per model, scaling and k, human columns; the
    one-rank rows are the baseline, S(1) = E(1) = 1 by definition, with no verdict against themselves: their
    interval is the spread of their own launches against each other, which every other row's carries."""
    baseline = table["ranks"] == 1
    view = pd.DataFrame(
        {
            "model": table["model"], "scaling": table["scaling"], "ranks k": table["ranks"],
            "launches": table["launches"], "step time (ms)": table["step_median"].map(ms),
            "speed-up S(k)": [
                point_text(*row)
                for row in table[["speedup", "speedup_low", "speedup_high", "verdict"]].to_numpy()
            ],
            interval_label(table["launch_counts"]): [
                interval_text(lo, hi, verdict)
                for lo, hi, verdict in table[["speedup_low", "speedup_high", "verdict"]].to_numpy()
            ],
            "efficiency E(k)": table["efficiency"].round(2),
            "verdict": [
                verdict_words(*row) for row in table[["verdict", "speedup_low", "speedup_high"]].to_numpy()
            ],
        }
    )  # fmt: skip
    for column, value in {"speed-up S(k)": "1", "efficiency E(k)": 1.0, "verdict": BASELINE}.items():
        view.loc[baseline.to_numpy(), column] = value
    return view.set_index(["model", "scaling", "ranks k"])


def accumulate(
    model_name: str,
    train_set: TensorDataset,
    *,
    global_batch_size: int,
    micro_batches: int,
    steps: int,
    optimizer: str = "adam",
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "cpu",
) -> tuple[nn.Module, dict]:
    """Train ``steps`` updates on one device, each from ``micro_batches`` micro-batches of a global batch.

    The global batches are ``GlobalBatchSampler``'s with one rank (the batches k DDP ranks share); each
    micro-batch's mean loss is divided by the number of micro-batches before its backward pass, so the
    accumulated gradient is the global batch's mean gradient. Returns the trained model and every step's
    global batch loss and seconds (``train.Timer``; the first step warms up and is not among the timed).
    """
    micro = check_split(global_batch_size, 1, micro_batches)
    torch.manual_seed(seed)
    model = build_model(model_name).to(device)
    updater = make_optimizer(optimizer, model.parameters(), lr)
    sampler = GlobalBatchSampler(len(train_set), global_batch_size, 1, 0, seed)
    inputs, targets = to_device(train_set, torch.device(device)).tensors
    step_seconds, losses = [], []
    for index in global_batches(sampler, steps):
        with Timer(device) as timer:
            updater.zero_grad(set_to_none=True)
            total = torch.zeros((), device=device)
            for part in index.to(device).split(micro):
                loss = nn.functional.cross_entropy(model(inputs[part]), targets[part])
                (loss / micro_batches).backward()
                total += loss.detach()
            updater.step()
        step_seconds.append(timer.seconds)
        losses.append(float(total) / micro_batches)
    method = f"{micro_batches} micro-batch(es) of {micro} per update; every step after the first timed"
    return model, {"step_losses": losses, "step_seconds_all": step_seconds[1:], "method": method}


def stored_accumulation(
    store, model_name: str, train_samples: int | None, launch_number: int = 0, **settings
) -> dict:
    """``accumulate`` on a seeded subset of FSDD's training clips, through the results store;
    ``launch_number`` numbers independent repeats of the same settings, each a record of its own."""
    config = {"kind": "accumulation_run", "model": model_name, "train_samples": train_samples,
              "threads": torch.get_num_threads(), "launch": launch_number, **settings}  # fmt: skip

    def measure() -> dict:
        train_set = take(load_fsdd().split("train"), train_samples, settings.get("seed", 0))
        return accumulate(model_name, train_set, **settings)[1]

    return store.measure(config, measure)


ACCUMULATED = ("global_batch_size", "steps", "optimizer", "lr", "seed")


def accumulation_parity(
    model_name: str, world_size: int, *, global_batch_size: int, steps: int, train_samples: int,
    seed: int = 0, lr: float = 1e-3, optimizer: str = "adam", time_limit_seconds: float = 300,
) -> dict:  # fmt: skip
    """Train ``world_size`` DDP ranks and one process accumulating as many micro-batches, on the same
    global batches, and compare their weights after ``steps`` updates: the largest difference of any
    weight, next to the largest weight and the largest distance any weight moved from its initial value
    (float32 rounding is all that should part them; a wrong accumulation differs by about that move)."""
    settings = {"model": model_name, "global_batch_size": global_batch_size, "steps": steps,
                "train_samples": train_samples, "seed": seed, "lr": lr, "optimizer": optimizer}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="accumulation-") as folder:
        config = {**sharding_config(strategy="ddp", **settings), "save_parameters": True}
        launch(config, world_size, module=WORKER, output=Path(folder), time_limit_seconds=time_limit_seconds)
        distributed = torch.load(Path(folder) / "parameters.pt")
    train_set = take(load_fsdd().split("train"), train_samples, seed)
    model, _ = accumulate(
        model_name, train_set, micro_batches=world_size, **{k: settings[k] for k in ACCUMULATED}
    )
    weights = dict(model.named_parameters())
    difference = max(
        float((weights[name].detach() - value).abs().max()) for name, value in distributed.items()
    )
    largest = max(float(value.abs().max()) for value in distributed.values())
    torch.manual_seed(seed)  # the initial weights both runs started from (``accumulate``'s seeding)
    initial = dict(build_model(model_name).named_parameters())
    moved = max(float((weights[name].detach() - initial[name].detach()).abs().max()) for name in weights)
    return {"largest_difference": difference, "largest_weight": largest, "largest_change": moved,
            "tensors": len(distributed)}  # fmt: skip


def stored_accumulation_parity(store, model_name: str, world_size: int, **settings) -> dict:
    """``accumulation_parity`` through the results store."""
    config = {"kind": "accumulation_parity", "model": model_name, "world_size": world_size, **settings}
    return store.measure(config, lambda: accumulation_parity(model_name, world_size, **settings))


def accumulation_table(accumulated: list[tuple[dict, dict]], distributed: list[tuple[dict, dict]]):
    """Per model and k > 1: one device accumulating k micro-batches against two candidates with the same
    global batch and updates: k DDP ranks, and the same process making one pass over the whole batch
    (one micro-batch: what a device does where the batch fits). Speed-ups over the accumulation, across
    launches (``stats.launch_speedup``), with their intervals and verdicts.

    ``accumulated`` pairs name ``model``, ``micro_batches`` (and ``launch``); ``distributed`` pairs are
    DDP launches naming ``model`` and ``ranks`` (those of weak scaling, another global batch, are left out).
    """
    launches: dict[tuple, list[list[float]]] = {}
    for variation, record in distributed:
        if variation.get("scaling", "strong") != "strong":
            continue  # weak scaling changes the global batch
        key = ("ranks", variation["model"], variation["ranks"])
        launches.setdefault(key, []).append(record["result"]["step_seconds_all"])
    for variation, record in accumulated:
        key = ("accumulated", variation["model"], variation["micro_batches"])
        launches.setdefault(key, []).append(record["result"]["step_seconds_all"])
    rows = []
    for (kind, model, k), base in sorted(launches.items()):
        if kind != "accumulated" or k == 1:
            continue
        for label, candidate in (
            (f"{k} DDP ranks", ("ranks", model, k)),
            ("one pass", ("accumulated", model, 1)),
        ):
            if candidate not in launches:
                continue
            change = launch_speedup(base, launches[candidate])
            rows.append({"model": model, "k": k, "candidate": label, "launches": len(base),
                         "accumulation step s": _median_of_medians(base),
                         "candidate step s": _median_of_medians(launches[candidate]),
                         "speedup": change["speedup"], "low": change["low"], "high": change["high"],
                         "verdict": change["verdict"], "launch_counts": change["launches"]})  # fmt: skip
    return pd.DataFrame(rows)


def _median_of_medians(launches: list[list[float]]) -> float:
    return float(np.median([np.median(steps) for steps in launches]))


def accumulation_view(table: pd.DataFrame) -> pd.DataFrame:
    """``accumulation_table`` as the chapter shows it: human columns with units, rounded."""
    view = pd.DataFrame(
        {
            "model": table["model"], "k": table["k"], "run compared": table["candidate"],
            "launches": table["launches"],
            "accumulating: step (ms)": table["accumulation step s"].map(ms),
            "run compared: step (ms)": table["candidate step s"].map(ms),
            "speed-up over accumulating": [
                point_text(*row) for row in table[["speedup", "low", "high", "verdict"]].to_numpy()
            ],
            interval_label(table["launch_counts"]): [
                interval_text(*row) for row in table[["low", "high", "verdict"]].to_numpy()
            ],
            "verdict": [verdict_words(*row) for row in table[["verdict", "low", "high"]].to_numpy()],
        }
    )  # fmt: skip
    return view.set_index(["model", "k", "run compared"])


def phrase(row, per: str = "", brief: bool = False) -> str:
    """A comparison row of ``efficiency_table`` or ``accumulation_table`` as one phrase for a sentence:
    "not resolved, 1.02× (0.74–1.90×, 3 launches each)" (``stats.describe_speedup``; ``per`` what a slower
    one's time taken is of, where the comparison is of a rate; ``brief``, its brief form)."""
    low, high = ("low", "high") if "low" in row else ("speedup_low", "speedup_high")
    result = {"speedup": row["speedup"], "low": row[low], "high": row[high], "verdict": row["verdict"],
              "launches": row["launch_counts"]}  # fmt: skip
    return describe_speedup(result, per=per, brief=brief)


def shares_device(hardware: dict, device: str, ranks: int) -> bool:
    """Whether ``ranks`` ranks on ``device`` share one device: always on a CPU (they share its cores), on
    a GPU machine when there are more ranks than GPUs (``hardware``: ``store.hardware``)."""
    return device != "cuda" or ranks > len(hardware.get("gpus") or [])


def ranks_setting(hardware: dict, backend: str, device: str, ranks: int) -> dict[str, str]:
    """How the chapter's ``ranks`` ranks ran on the machine that measured (``store.hardware``), for its
    prose: ``ranks_where`` ("4 Gloo ranks time-sharing the one NVIDIA H200"), ``sharing`` (what that
    setting can show of scaling), and ``ceiling`` (the figure's yardstick: "k" devices' speed, or "one"
    device's where the ranks share it)."""
    cores, gpus = hardware["usable_cores"], hardware.get("gpus") or []
    name = "NCCL" if backend == "nccl" else "Gloo"
    threads = max(1, cores // ranks)
    own = (
        "With one GPU per rank, weak scaling costs only the all-reduce that is not hidden behind the "
        "backward pass, and strong scaling also costs the smaller per-device batch that chapter 1 showed "
        "runs less efficiently."
    )
    if not shares_device(hardware, device, ranks):
        return {"ranks_where": f"{ranks} {name} ranks, one GPU each", "ceiling": "k",
                "sharing": f"Here each rank has a GPU of its own. {own}"}  # fmt: skip
    if device == "cuda":
        gpu = f"the one {gpus[0]['name']}" if len(gpus) == 1 else f"{len(gpus)} {gpus[0]['name']} GPUs"
        sharing = (
            f"Here the {ranks} ranks share {gpu}: NCCL refuses two ranks on one GPU, so they run Gloo, "
            "whose all-reduce copies every gradient to host memory, sums it on the CPU and copies it back, "
            "and the GPU runs one process's kernels at a time. The dashed line, S(k) = 1, is one GPU's "
            "speed: ranks sharing it can pass it only where one rank leaves the GPU idle while its host "
            "issues kernels, and what they lose below it is what time-sharing and Gloo's round trip "
            "through the host cost, not what GPUs of their own would add. Each rank has "
            f"{threads} of the {cores} cores. {own}"
        )
        return {"ranks_where": f"{ranks} {name} ranks time-sharing {gpu}", "ceiling": "one",
                "sharing": sharing}  # fmt: skip
    over = f", so {ranks} ranks oversubscribe {cores} cores" if ranks > cores else ""
    sharing = (
        f"On a CPU the $k$ ranks share the same cores, and each rank gets cores ÷ $k$ threads (at least "
        f"one{over}). The dashed line, S(k) = 1, is one process's speed on all the cores, which ranks "
        "sharing them pass only where one process leaves cores idle: strong scaling trades one "
        "process's threads for several processes plus an "
        "all-reduce, and its efficiency measures that trade, not what extra devices would add. Weak "
        "scaling gives each rank a whole device's batch on a share of the cores, so on a quiet machine its "
        "efficiency falls, roughly as $1/k$; on a busy one, launches scatter far from that, and the "
        f"intervals say how far. {own}"
    )
    return {"ranks_where": f"{ranks} {name} ranks sharing {cores} cores", "ceiling": "one",
            "sharing": sharing}  # fmt: skip


def efficiency_sentences(table: pd.DataFrame, ranks: int, shared: bool = False, brief: bool = False) -> str:
    """What ``efficiency_table`` says at ``ranks``, one sentence per model and scaling, for the prose.
    ``shared``: the ranks shared one device, so their efficiency against k devices' ideal, which does not
    apply to them, is left out (``ranks_setting``); ``brief``: the answer box's verdicts (``phrase``)."""
    sentences = []
    for row in table[table["ranks"] == ranks].sort_values(["model", "scaling"]).itertuples(index=False):
        unit = " in samples per second" if row.scaling == "weak" else ""
        said = phrase(row._asdict(), per=" per sample" if row.scaling == "weak" else "", brief=brief)
        if shared:
            sentences.append(f"{row.model}, {row.scaling} scaling{unit}: {said}.")
        else:
            sentences.append(
                f"{row.model} keeps {row.efficiency:.2f} of the ideal under {row.scaling} scaling; its "
                f"verdict against one rank{unit}: {said}."
            )
    return " ".join(sentences)


def accumulation_caveat(table: pd.DataFrame, k: int, hardware: dict, device: str) -> str:
    """What the DDP rows of ``accumulation_table`` at ``k`` do not show, where the ranks shared a device:
    on a GPU, one GPU time-shared with Gloo's round trip through the host, always; on a CPU, why k
    processes on the same cores can beat one, where they did. "" where each rank had a GPU of its own."""
    if not shares_device(hardware, device, k):
        return ""
    if device == "cuda":
        return (
            f"Here the {k} DDP ranks time-share one GPU and all-reduce through host memory, so their "
            f"comparison with one process accumulating prices that time-sharing, not {k} GPUs against one."
        )
    rows = table[(table["k"] == k) & (table["candidate"] == f"{k} DDP ranks")]
    if not (rows["verdict"] == "faster").any():
        return ""
    return (
        f"Where {k} processes here beat one process accumulating, that is not a second device: the ranks "
        "share the same cores, and a likely cause (not measured here) is that small micro-batches keep one "
        "process's intra-op threads less busy than several processes keep the cores."
    )


def accumulation_sentences(table: pd.DataFrame, k: int, lead: str = "For") -> str:
    """What ``accumulation_table`` says at ``k``, one sentence per model, for the prose; the first
    sentence starts with ``lead`` ("For", or "On this machine, for")."""
    sentences = []
    for model, rows in table[table["k"] == k].groupby("model"):
        parts = [f"{row['candidate']}: {phrase(row)}" for _, row in rows.iterrows()]
        start = lead if not sentences else "For"
        sentences.append(f"{start} {model}, against {k} accumulated micro-batches, " + "; ".join(parts) + ".")
    return " ".join(sentences)


OPTIMIZER_NAMES = {"sgd": "SGD", "adam": "Adam"}


def parity_table(parities: dict) -> pd.DataFrame:
    """Per optimizer (``stored_accumulation_parity``'s results, keyed by optimizer): the largest weight
    difference between k micro-batches and k ranks, the largest move of a weight, the largest weight, and
    the difference over the move."""
    table = pd.DataFrame(parities).T[["largest_difference", "largest_change", "largest_weight"]].astype(float)
    table["difference / move"] = table["largest_difference"] / table["largest_change"]
    table.index.name = "optimizer"
    return table


def parity_view(table: pd.DataFrame) -> pd.DataFrame:
    """``parity_table`` for reading: optimizers by name, every number as a reader writes it (0, 0.0040,
    3.9 × 10⁻⁴: ``stats.scientific``)."""
    columns = {"largest_difference": "largest weight difference",
               "largest_change": "largest move of a weight", "largest_weight": "largest weight"}  # fmt: skip
    return table.rename(index=OPTIMIZER_NAMES, columns=columns).map(scientific)
