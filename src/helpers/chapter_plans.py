"""Each chapter's work as plan items (``helpers.plan``), from the chapter's own parameters and with the
same helpers its notebook calls to choose backends and rank counts (``launch.run_plan``,
``ddp.chapter_sweeps``, ``scaling.scaling_variations``, ``lightning_ddp.planned_ranks``,
``sharding.runs.placement``): what ``python -m helpers.study --plan`` lists, checks and times.
"""

from __future__ import annotations

import math

from helpers import ddp, lightning_ddp, renter_settings, scaling
from helpers.advise.validate import MODULE as ADVISE
from helpers.collectives.runs import WORKER as COLLECTIVES
from helpers.collectives.runs import check_benchmark_world_sizes, collective_config
from helpers.data import SPLIT_SIZES
from helpers.hardware import Machine
from helpers.launch import Request, run_plan
from helpers.launch import main_backend as launch_main_backend
from helpers.plan import Item, benchmark_seconds, check
from helpers.profiling import PRECISION_STEPS, PROFILED_STEPS
from helpers.results import canonical_json
from helpers.sharding.runs import WORKER as SHARDING
from helpers.sharding.runs import placement, sharding_config
from helpers.sharding.tasks import STRATEGIES
from helpers.train import WARMUP_STEPS, counted


def _device(parameters: dict, machine: Machine) -> str:
    device = parameters.get("device", "cpu")
    return ("cuda" if machine.gpus else "cpu") if device == "auto" else device


def _samples(value: int | None, split: str = "train") -> int:
    return value or SPLIT_SIZES[split]


def chapter_one(p: dict, machine: Machine) -> list[Item]:
    device, chapter = _device(p, machine), "01_single_device"
    clips = _samples(p["train_samples"])
    items = [
        Item(
            chapter,
            f"training, {m}",
            m,
            p["batch_size"],
            p["epochs"] * math.ceil(clips / p["batch_size"]),
            device,
        )
        for m in ("LinearNet", "ConvNet")
    ]
    items += [
        Item(chapter, f"batch sweep, {m}, batch {b}", m, b, p["sweep_timed_steps"] + WARMUP_STEPS, device)
        for m in p["sweep_models"]
        for b in p["sweep_batch_sizes"]
    ]
    items += [
        Item(
            chapter,
            f"precision, {m}, {dtype}",
            m,
            p["precision_batch_size"],
            p["sweep_timed_steps"] + WARMUP_STEPS,
            device,
            dtype=dtype,
        )
        for m in ("LinearNet", "ConvNet")
        for dtype in ("float32", "bf16")
    ]
    items += [  # one timed step and PRECISION_STEPS profiled ones per model and precision
        Item(chapter, f"precision profile, {m}, {dtype}", m, p["precision_batch_size"],
             WARMUP_STEPS + 1 + PRECISION_STEPS, device, dtype=dtype)
        for m in ("LinearNet", "ConvNet")
        for dtype in ("float32", "bf16")
    ]  # fmt: skip
    items += [  # five timed steps and PROFILED_STEPS profiled ones
        Item(chapter, f"profiled steps, {m}", m, p["profile_batch_size"], WARMUP_STEPS + 5 + PROFILED_STEPS,
             device)
        for m in ("LinearNet", "ConvNet")
    ]  # fmt: skip
    chosen, _ = renter_settings.applicable(p["settings_timed"], device)  # the rest: skipped, said so
    items += [  # renter_settings.settings_comparison: every setting of every model, round by round
        Item(chapter, f"settings, {m}, {setting}, round {r + 1}", m, p["settings_batch_size"],
             p["sweep_timed_steps"] + WARMUP_STEPS, device,
             dtype="bf16" if renter_settings.SETTINGS[setting].get("bf16") else "float32")
        for r in range(p["settings_rounds"])
        for m in ("LinearNet", "ConvNet")
        for setting in chosen
    ]  # fmt: skip
    return items


def chapter_two(p: dict, machine: Machine) -> list[Item]:
    device, chapter = _device(p, machine), "02_dataparallel_internals"
    return [
        Item(
            chapter,
            f"DataParallel, {m}, {counted(k, 'replica')}, batch {b}",
            m,
            b,
            (p["timed_steps"] + WARMUP_STEPS) * 2,
            device,
        )
        for m in p["models_to_time"]
        for k in p["replica_counts"]
        for b in p["batch_sizes"]
    ]


def _ddp_item(chapter: str, what: str, settings: dict, ranks: int) -> Item:
    config = ddp.ddp_config(**settings)
    clips = _samples(config["train_samples"])
    steps = config["epochs"] * (clips // config["global_batch_size"])
    return Item(
        chapter,
        what,
        config["model"],
        config["global_batch_size"] // ranks,
        steps,
        config["device"],
        Request("helpers.ddp", ranks, config),
    )


def main_backend(chapter: str, plan, device: str) -> tuple[str | None, list[Item]]:
    """``launch.main_backend`` of a run plan, as the notebooks call it: the backend every section of the
    chapter uses, or None and an item carrying the launcher's refusal."""
    try:
        return launch_main_backend(plan), []
    except ValueError as error:
        return None, [Item(chapter, "every section", None, None, 0, device, refusal=str(error))]


def chapter_three(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "03_ddp_nccl_vs_gloo", p["device"]
    world_sizes = p["world_sizes"]
    plan = run_plan(p["backends"], device, world_sizes, p["gpus"], machine)
    backend, refused = main_backend(chapter, plan, device)
    if refused:
        return refused
    common = {
        "backend": backend,
        "device": device,
        "train_samples": p["train_samples"],
        "test_samples": p["test_samples"],
        "epochs": p["epochs"],
        "global_batch_size": p["global_batch_size"],
        "warmup_steps": p["warmup_steps"],  # new: part of every ddp_run record's config
        **({"gpus": p["gpus"]} if p["gpus"] is not None else {}),  # as the notebook passes it
    }
    sweeps = ddp.chapter_sweeps(
        p["models_to_time"], plan, p["bucket_caps_mb"], p["compressions"], p["parity_seeds"], p["launches"]
    )  # {section: {"variations": [...], "launches": n}}; "traffic" is gone (3.3 reads launch 0 of these)
    items = []
    for section, sweep in sweeps.items():  # scaling first: its items carry the most repeats, and
        for variation in sweep["variations"]:  # items_of keeps the first of identical configurations
            settings = {**common, **variation}
            ranks = settings.pop("ranks")
            label = ", ".join(f"{k} {v}" for k, v in variation.items() if k != "model")
            item = _ddp_item(chapter, f"DDP {section}: {settings['model']}, {label}", settings, ranks)
            item.repeats = sweep["launches"]  # ddp.launch_order lists the same launches one by one
            items.append(item)
    size = int(plan["ranks"].max())
    if size > 1:  # 3.6: chapter 4's α-β fit (timemodel.stored_all_reduce_alpha_beta); before chapter 4 runs,
        items.append(all_reduce_item(chapter, backend, device))  # a two-rank all-reduce of its backend
    lightning_size, skipped = (
        lightning_ddp.planned_ranks(world_sizes, common, machine) if p["lightning"] else (None, [])
    )
    items += [Item(chapter, "Lightning", None, None, 0, device, skipped=reason) for reason in skipped]
    for model in p["lightning_models"] if lightning_size else []:  # was models_to_time
        item = _ddp_item(
            chapter,
            f"Lightning, {model}, {counted(lightning_size, 'rank')}",
            {**common, "model": model},
            lightning_size,
        )
        item.request = Request(lightning_ddp.MODULE, lightning_size, item.request.config)
        item.repeats = p["launches"]  # one per round of the sweeps (lightning_ddp.launch_round)
        by_hand = _ddp_item(chapter, f"DDP by hand, {model}, {counted(lightning_size, 'rank')}",
                            {**common, "model": model}, lightning_size)  # fmt: skip
        by_hand.repeats = p["launches"]  # the scaling sweep's own launches where it has these settings
        items += [item, by_hand]
    single = "cuda" if device == "cuda" else "cpu"
    items += [  # ddp_compare.time_dataparallel: one timing per round, each warmup_steps + 5 steps
        Item(
            chapter,
            f"DataParallel, {m}, {size} replicas",
            m,
            p["global_batch_size"],
            p["warmup_steps"] + 5,
            single,
            repeats=p["launches"],
        )
        for m in p["models_to_time"]
    ]
    for model in p["models_to_time"]:  # against DDP's launches of the same round: the scaling sweep's
        item = _ddp_item(chapter, f"DDP against DataParallel, {model}, {counted(size, 'rank')}",
                         {**common, "model": model}, size)  # fmt: skip
        item.repeats = p["launches"]
        items.append(item)
    return items


def chapter_four(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "04_collectives", p["device"]
    check_benchmark_world_sizes(p["benchmark_world_sizes"])  # the link is fitted on two ranks
    settings = {"device": device, **({"gpus": p["gpus"]} if p["gpus"] is not None else {})}
    sizes = sorted({p["semantics_world_size"], *p["verify_world_sizes"], *p["benchmark_world_sizes"]})
    backend, refused = main_backend(
        chapter, run_plan(p["backends"], device, sizes, p["gpus"], machine), device
    )
    if refused:
        return refused

    def task(what: str, name: str, ranks: int, fixed: float = 0.0, **extra) -> Item:
        config = collective_config(name, **{"backend": backend, **settings, **extra})
        return Item(
            chapter, what, None, None, 0, device, Request(COLLECTIVES, ranks, config), fixed_seconds=fixed
        )

    items = [
        task("semantics", "semantics", p["semantics_world_size"]),
        task(
            "deadlock demonstration",
            "deadlock",
            2,
            p["deadlock_timeout_seconds"],
            timeout_seconds=p["deadlock_timeout_seconds"],
        ),
    ]
    items += [task(f"exactness, {k} ranks", "verify", k) for k in p["verify_world_sizes"]]
    for name in ("gloo", "nccl"):  # runs.probe_support: two ranks, or the one a single GPU allows NCCL
        for where in ("cpu", "cuda"):
            probe = run_plan([name], where, [2, 1], p["gpus"], machine).query("runs")
            if len(probe):
                ranks = int(probe["ranks"].iloc[0])
                items.append(
                    task(f"support probe, {name} on {where}", "semantics", ranks, backend=name, device=where)
                )
    bench = run_plan(p["backends"], device, p["benchmark_world_sizes"], p["gpus"], machine)
    for row in bench.itertuples():
        config = collective_config(
            "benchmark",
            backend=row.backend,
            **settings,
            sizes_bytes=p["message_bytes"],
            chunks=p["broadcast_chunks"],
            iterations=p["iterations"],
            time_budget_seconds=p["benchmark_budget_seconds"],  # as the notebook passes it (None: the share)
        )
        item = Item(
            chapter,
            f"benchmark, {row.backend}, {row.ranks} ranks",
            None,
            None,
            0,
            device,
            Request(COLLECTIVES, row.ranks, config),
            fixed_seconds=benchmark_seconds(config, row.ranks),
        )
        if not row.runs:  # the chapter lists what its plan cannot run, with the reason
            item.request, item.skipped = None, row.reason
        items.append(item)
    items += [  # each stops at its target loss: stale_steps is an upper bound
        Item(chapter, f"staleness {tau}, seed {seed}", p["stale_model"], p["stale_batch_size"],
             p["stale_steps"], "cpu")
        for seed in p["stale_seeds"]
        for tau in p["stalenesses"]
    ]  # fmt: skip
    return items


def chapter_five(p: dict, machine: Machine) -> list[Item]:
    chapter, device = "05_cost_model", p["device"]
    # the backend chapters 3 and 6 ran their most ranks on, as the notebook picks it
    backend, refused = main_backend(
        chapter, run_plan(p["backends"], device, p["world_sizes"], p["gpus"], machine), device
    )
    items = [
        Item(
            chapter,
            f"calibration, {m}, batch {b}, run {r + 1}",
            m,
            b,
            p["timed_steps"] + WARMUP_STEPS,
            device,
        )
        for m in p["models_to_model"]
        for b in p["calibration_batch_sizes"]
        for r in range(p["calibration_repeats"])
    ]
    return items + (refused or [all_reduce_item(chapter, backend, device)])


def all_reduce_item(chapter: str, backend: str, device: str) -> Item:
    """The two-rank all-reduce a chapter fits α and β to (``timemodel.stored_all_reduce_alpha_beta``):
    benchmarked alone only where no chapter run before it benchmarked one (``reuse_across_chapters``)."""
    config = collective_config(
        "benchmark", backend=backend, device=device, operations=["all_reduce"], chunks=[1]
    )
    return Item(
        chapter, f"all-reduce benchmark, {backend}, 2 ranks", None, None, 0, device,
        Request(COLLECTIVES, 2, config), fixed_seconds=30,
    )  # fmt: skip


def reuse_across_chapters(items: list[Item]) -> list[Item]:
    """``items`` of several chapters in run order, each all-reduce benchmark that an earlier chapter's
    two-rank benchmark of the same backend and device already measures marked as reused: no time of its own
    (the chapter reads that chapter's record)."""
    measured = {}  # (backend, device) -> the chapter whose two-rank benchmark includes the all-reduce
    for item in items:
        request = item.request
        if request is None or request.module != COLLECTIVES or request.world_size != 2:
            continue
        config = request.config
        if config.get("task") != "benchmark" or "all_reduce" not in config.get("operations", []):
            continue
        where = (config["backend"], config["device"])
        if where in measured and config["operations"] == ["all_reduce"]:
            item.what = (
                f"all-reduce benchmark, {config['backend']}: chapter {int(measured[where][:2])}'s, reused"
            )
            item.seconds, item.reused = 0.0, True
        elif not (item.skipped or item.refusal):
            measured.setdefault(where, item.chapter)
    return items


def chapter_six(p: dict, machine: Machine) -> list[Item]:
    chapter, device, launches = "06_scaling", p["device"], p["launches"]
    backend, items = main_backend(
        chapter, run_plan(p["backends"], device, p["world_sizes"], p["gpus"], machine), device
    )
    variations = scaling.scaling_variations(p["world_sizes"], p["global_batch_size"], p["per_rank_batch"])
    for model in p["scaling_models"] if backend else []:  # each launched `launches` times, alternating
        for variation in variations:
            ranks, batch = variation["ranks"], variation["global_batch_size"]
            config = sharding_config(backend=backend, device=device, gpus=p["gpus"], model=model,
                                     strategy="ddp", global_batch_size=batch, steps=p["scaling_steps"],
                                     train_samples=p["train_samples"])  # fmt: skip
            what = f"{variation['scaling']} scaling, {model}, {counted(ranks, 'rank')}"
            items.append(Item(chapter, what, model, batch // ranks, p["scaling_steps"], device,
                              Request(SHARDING, ranks, config), repeats=launches))  # fmt: skip
    k = max(p["world_sizes"])
    for optimizer in ("sgd", "adam"):  # exact, so one launch each
        config = sharding_config(
            model="LinearNet",
            global_batch_size=p["global_batch_size"],
            steps=p["scaling_steps"],
            train_samples=p["train_samples"],
            optimizer=optimizer,
        )
        what = f"accumulation parity, {optimizer}"  # stored by the process that launches it, as its own kind
        items.append(Item(chapter, what, "LinearNet", p["global_batch_size"] // k, p["scaling_steps"], "cpu",
                          Request(SHARDING, k, config), keyed=False))  # fmt: skip
    single = "cuda" if device == "cuda" else "cpu"
    items += [Item(chapter, f"accumulation, {m}, {n} micro-batches", m, p["global_batch_size"],
                   p["scaling_steps"], single, repeats=launches)
              for m in p["scaling_models"] for n in sorted({1, *p["world_sizes"]})]  # fmt: skip
    seeds, rules = len(p["critical_seeds"]), len(p["learning_rate_rules"])
    smallest = min(p["critical_batch_sizes"])
    for batch in p["critical_batch_sizes"]:  # the smallest batch has one learning rate: one run per seed
        runs = seeds if batch == smallest else seeds * rules
        items.append(Item(chapter, f"steps to loss {p['target_loss']}, batch {batch}, {runs} runs",
                          p["critical_model"], batch, p["max_steps"], "cpu", repeats=runs))  # fmt: skip
    probed = p["noise_samples"] or _samples(p["critical_train_samples"])  # per checkpoint
    steps = max(p["noise_checkpoints"]) + probed * len(p["noise_checkpoints"])
    items.append(Item(chapter, "noise scale", p["critical_model"], p["noise_batch"], steps, "cpu"))
    where = placement(p["backends"], device, p["sharding_world_size"], p["gpus"], machine)
    ranks = p["sharding_world_size"]
    for model in p["sharding_models"]:
        for stage in p["zero_stages"]:
            strategy = next(name for name, value in STRATEGIES.items() if value == stage)
            config = sharding_config(**where["settings"], model=model, strategy=strategy,
                                     global_batch_size=p["global_batch_size"], steps=p["scaling_steps"],
                                     train_samples=p["train_samples"], gpus=p["gpus"])  # fmt: skip
            items.append(Item(chapter, f"sharded, {model}, {strategy}, {ranks} ranks", model,
                              p["global_batch_size"] // ranks, p["scaling_steps"], config["device"],
                              Request(SHARDING, ranks, config), stage=stage, repeats=launches))  # fmt: skip
    return items


# chapter 7 on this 2-core machine: counting a held-out model 1.6-2.7 s; one batch timed (8 steps) and a
# DDP launch's steps of the small models well under a second each: rounded up
COUNT_SECONDS, TIMING_SECONDS = 5.0, 2.0


def chapter_seven(p: dict, machine: Machine) -> list[Item]:
    """Counting and timing each held-out model (single-process work), then its DDP launches: each rank
    count ``launches`` times, through ``helpers.advise.validate``'s worker with the launcher's rules."""

    chapter, device = "07_your_model", _device(p, machine)
    items = []
    for spec in p["held_out_specs"]:
        name = spec.rsplit(":", 1)[-1]
        timings = len({p["global_batch"] // k for k in p["world_sizes"]}) * p["calibration_repeats"]
        items.append(Item(chapter, f"count and time {name}", None, None, 0, device,
                          fixed_seconds=COUNT_SECONDS + TIMING_SECONDS * timings))  # fmt: skip
        for k in p["world_sizes"]:
            config = {"spec": spec, "global_batch_size": p["global_batch"], "backend": p["backend"],
                      "device": device, "input_shape": [1, 12_000], "dtype": "float32", "optimizer": "adam",
                      "bucket_cap_mb": 25, "warmup_steps": WARMUP_STEPS, "timed_steps": p["timed_steps"],
                      "timeout_seconds": 60}  # fmt: skip
            what = f"DDP of {name}, {counted(k, 'rank')}"
            items.append(Item(chapter, what, None, p["global_batch"] // k, 0, device,
                              Request(ADVISE, k, config), fixed_seconds=TIMING_SECONDS,
                              repeats=p["launches"]))  # fmt: skip
    return items


CHAPTERS = {
    "01_single_device": chapter_one,
    "02_dataparallel_internals": chapter_two,
    "03_ddp_nccl_vs_gloo": chapter_three,
    "04_collectives": chapter_four,
    "05_cost_model": chapter_five,
    "06_scaling": chapter_six,
    "07_your_model": chapter_seven,
}


def items_of(chapter: str, parameters: dict, machine: Machine) -> list[Item]:
    """Every item of ``chapter`` with these parameters on ``machine``, checked and timed."""
    if chapter not in CHAPTERS:
        raise ValueError(f"no plan for chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    items, seen = [], set()
    for item in CHAPTERS[chapter](parameters, machine):
        if item.request is not None:  # the store measures a configuration once; later sections reuse it
            key = (item.request.module, item.request.world_size, canonical_json(item.request.config))
            if key in seen:
                continue
            seen.add(key)
        check(item, machine)
        items.append(item)
    return items
