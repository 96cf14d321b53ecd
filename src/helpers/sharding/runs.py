"""Sharded training, the parent side (chapter 6): launch ``helpers.sharding.tasks`` through the results
store, check what each rank held against ``sharding.memory``'s arithmetic, and count, check and price
the bytes each strategy moves per step.

Every strategy's collectives per step, exactly (N parameters of 4 bytes, L layers with parameters):

- ``ddp``: all-reduce of the 4N gradient bytes, in DDP's buckets;
- ``zero1`` (``ZeroRedundancyOptimizer``): that all-reduce, then every owner broadcasts its updated
  parameters: 4N more bytes, one broadcast per parameter tensor;
- ``zero2``: per layer, one all-gather of its weights and one reduce-scatter of its gradients;
- ``fsdp`` (ZeRO-3): per layer, an all-gather before forward and again before backward, and one
  reduce-scatter.

Sharded buffers are padded: each tensor's shard has ⌈rows/k⌉ rows on every rank, so what is gathered and
reduce-scattered is k·⌈rows/k⌉ rows, a little more than the tensor when k does not divide its rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.collectives.model import bus_bandwidth_factor
from helpers.ddp import ddp_bucket_bytes
from helpers.launch import check_request, launch, without_advice
from helpers.models import build_model
from helpers.results import measured_in_rounds
from helpers.sharding.memory import (
    FLOAT,
    check_stage,
    chunk_rows,
    numel,
    parameter_shapes,
    per_rank_bytes,
)
from helpers.sharding.tasks import STRATEGIES
from helpers.stats import (
    BASELINE,
    describe_speedup,
    interval_label,
    interval_text,
    launch_speedup,
    ms,
    point_text,
    scientific,
    spread,
    verdict_words,
)

WORKER = "helpers.sharding.tasks"
OPERATIONS = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor")
SHORT_NAMES = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter"}


def check_strategy(strategy: str) -> int:
    """The ZeRO stage of ``strategy``; ValueError naming it when it is unknown."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    return STRATEGIES[strategy]


def strategy_of(stage: int) -> str:
    """The strategy that runs ZeRO ``stage`` (0–3); ValueError naming any other stage."""
    check_stage(stage)
    return next(name for name, value in STRATEGIES.items() if value == stage)


def sharding_config(**settings) -> dict:
    """A worker configuration: chapter 6's defaults, overridden by ``settings`` (checked)."""
    config = {
        "backend": "gloo", "device": "cpu", "model": "LinearNet", "strategy": "ddp", "seed": 0,
        "train_samples": 400, "global_batch_size": 40, "steps": 6, "optimizer": "adam", "lr": 1e-3,
        "timeout_seconds": 60, "tf32": False,
    }  # fmt: skip
    unknown = sorted(set(settings) - set(config) - {"threads", "gpus"})
    if unknown:
        raise ValueError(f"unknown sharding setting(s): {', '.join(unknown)}")
    config = {**config, **settings}
    check_strategy(config["strategy"])
    if config["steps"] < 2:
        raise ValueError(f"steps must be at least 2 (the first one warms up), not {config['steps']}")
    return config


def placement(backends, device: str, world_size: int, gpus: int | None = None, machine=None) -> dict:
    """Where the sharded runs go: NCCL ranks on the GPUs, one GPU each, when ``device`` is "cuda" and NCCL is
    among ``backends`` and can run ``world_size`` ranks here; otherwise Gloo ranks on the CPU, where what
    each rank holds and sends is the same bytes (FSDP's collectives on Gloo with CUDA tensors are not
    relied on). Returns the launch ``settings`` (backend, device), ``where`` ("4 Gloo ranks on the CPU")
    and a ``note`` saying which and why; ``machine`` is a plan's described machine (default: this one).
    """
    reason = None
    if device == "cuda" and "nccl" in backends:
        try:
            check_request("nccl", "cuda", world_size, gpus, machine)
            where = f"{world_size} NCCL ranks, one GPU each"
            return {"settings": {"backend": "nccl", "device": "cuda"}, "where": where, "note": where}
        except ValueError as error:
            reason = str(error)
    elif device == "cuda":
        reason = "NCCL is not among this run's backends"
    where = note = f"{world_size} Gloo ranks on the CPU"
    if reason:
        note += (
            f", not the GPU ({without_advice(reason)}; what each rank holds and sends is the same bytes "
            "on any device, but its step times are the CPU's)"
        )
    return {"settings": {"backend": "gloo", "device": "cpu"}, "where": where, "note": note}


def zero_work_note(run_device: str) -> str:
    """What ZeRO-1 may save besides bytes where the sharded ranks share a CPU's cores; "" on GPUs."""
    if run_device != "cpu":
        return ""
    return (
        "On shared cores ZeRO-1 may also save work (a reading, not measured here): only the rank that owns "
        "the big first weight runs Adam on it, where under DDP every rank does."
    )


def price_caveat(fit_device: str, run_device: str) -> str:
    """The sentence owed where the all-reduce price (fitted on ``fit_device``'s tensors) and the sharded
    runs it is set against (``run_device``'s) moved tensors on different devices; "" where they match."""
    if fit_device == run_device:
        return ""
    names = {"cuda": "CUDA", "cpu": "CPU"}
    return (
        f"The price is this machine's all-reduce fit with {names[fit_device]} tensors (chapter 4); the "
        f"sharded runs moved {names[run_device]} tensors, so read the two side by side as orders of "
        "magnitude only."
    )


def summarize_sharding(results: list[dict]) -> dict:
    """What the chapter shows of one launch: rank 0's losses and step times, every rank's held bytes,
    and the collectives of the last step (the first may differ: DDP rebuilds its buckets after it)."""
    first = results[0]
    return {
        "world_size": first["world_size"],
        "strategy": first["strategy"],
        "stage": first["stage"],
        "step_losses": first["step_losses"],
        "step_seconds_all": first["step_seconds"][1:],
        "method": "wall time of every step after the first, between barriers, on rank 0",
        "held_bytes": [result["held_bytes"] for result in results],
        "collectives": first["collectives"][-1],
        "same_collectives_on_every_rank": all(
            r["collectives"][-1] == first["collectives"][-1] for r in results
        ),
        "threads_per_rank": first["threads"],
    }


def _record_config(world_size: int, settings: dict, number: int = 0) -> dict:
    return {"kind": "sharding_run", "world_size": world_size, "launch": number, **sharding_config(**settings)}


def run_sharding(
    world_size: int, time_limit_seconds: float = 300, launch_number: int = 0, **settings
) -> dict:
    """One launch of ``world_size`` ranks of one strategy, not stored: ``{"config", "result"}`` as a stored
    record holds them, so the checks below take either. ``launch_number`` numbers independent launches of the
    same settings."""
    config = _record_config(world_size, settings, launch_number)
    worker = {k: v for k, v in config.items() if k not in ("kind", "world_size", "launch")}
    results = launch(worker, world_size, module=WORKER, time_limit_seconds=time_limit_seconds)
    return {"config": config, "result": summarize_sharding(results)}


def run_sharding_series(
    world_size: int, series: list[dict], time_limit_seconds: float = 300, **settings
) -> list[dict]:
    """Several runs in one launch, one after another in one process group (``series``: the settings that
    differ between runs, such as model and strategy, over ``settings``): the records ``run_sharding``
    would give each, for checks that need no independent launches. Not for timings set against each
    other: the runs share the launch's processes, cores and warm caches. Runs that differ in what the
    processes are set up with (backend, device, GPUs, threads, timeout, TF32) are refused before anything
    starts (``sharding_config`` refuses saving parameters, which each run would overwrite)."""
    configs = [_record_config(world_size, {**settings, **item}) for item in series]
    workers = [{k: v for k, v in c.items() if k not in ("kind", "world_size", "launch")} for c in configs]
    for worker in workers:  # refused before the launch: the series' processes are set up once
        for key in ("backend", "device", "gpus", "threads", "timeout_seconds", "tf32"):
            if worker.get(key) != workers[0].get(key):
                raise ValueError(f"a series runs in one process group: its runs need one {key}, not "
                                 f"{workers[0].get(key)!r} and {worker.get(key)!r}")  # fmt: skip
    results = launch({**workers[0], "series": workers}, world_size, module=WORKER,
                     time_limit_seconds=time_limit_seconds)  # fmt: skip
    runs = [[{**{k: v for k, v in rank.items() if k != "series"}, **rank["series"][i]} for rank in results]
            for i in range(len(series))]  # fmt: skip
    return [{"config": c, "result": summarize_sharding(run)} for c, run in zip(configs, runs, strict=True)]


def stored_sharding_run(
    store, world_size: int, time_limit_seconds: float = 300, launch_number: int = 0, **settings
) -> dict:
    """Launch ``world_size`` ranks of one strategy through the results store (a finished run is reused);
    ``launch_number`` numbers independent launches of the same settings, each a record of its own."""
    return store.measure(
        _record_config(world_size, settings, launch_number),
        lambda: run_sharding(world_size, time_limit_seconds, launch_number, **settings)["result"],
    )


def labels(config: dict) -> dict:
    """The columns that name a launch in the chapter's tables."""
    return {"model": config["model"], "strategy": config["strategy"], "ranks": config["world_size"]}


def stored_sharding_runs(
    store, models, strategies, world_size: int, launches: int = 1, **settings
) -> list[dict]:
    """``stored_sharding_run`` of every model with every strategy, ``launches`` times each, alternating
    (every pair once, then again, so that a slow spell of the machine falls on all of them): the records,
    each naming its ``launch`` in its config, for the checks and ``strategy_comparison`` below."""
    grid = [
        (number, model, strategy) for number in range(launches) for model in models for strategy in strategies
    ]
    return measured_in_rounds(
        store, grid, lambda entry: entry[0],
        lambda entry: stored_sharding_run(
            store, world_size, launch_number=entry[0], model=entry[1], strategy=entry[2], **settings
        ),
        "sharded runs",
    )  # fmt: skip


def first_launches(records: list[dict]) -> list[dict]:
    """The records of each configuration's first launch (the exact checks are the same in every launch:
    the chapter shows one and says whether all agree)."""
    return [record for record in records if not record["config"].get("launch")]


def gathered_bytes(model_name: str, world_size: int) -> int:
    """Bytes one all-gather of every weight moves: each tensor padded to k·⌈rows/k⌉ rows."""
    total = 0
    for shape in parameter_shapes(model_name):
        rows = chunk_rows(shape[0], world_size)[0] * world_size
        total += rows * numel(shape[1:]) * FLOAT
    return total


def sharded_layers(model_name: str) -> int:
    """Layers that hold parameters: each is one ``fully_shard`` unit, one all-gather and reduce-scatter."""
    return sum(1 for layer in build_model(model_name) if any(True for _ in layer.parameters(recurse=False)))


def expected_collectives(model_name: str, strategy: str, world_size: int, bucket_cap_mb: float = 25):
    """Per operation, the calls and bytes one training step makes, exactly (see the module's list)."""
    stage = check_strategy(strategy)
    gradient = sum(numel(shape) for shape in parameter_shapes(model_name)) * FLOAT
    layers = sharded_layers(model_name)
    padded = gathered_bytes(model_name, world_size)
    if stage <= 1:
        rows = [("all_reduce", len(ddp_bucket_bytes(model_name, bucket_cap_mb)), gradient)]
        if stage == 1:
            rows.append(("broadcast", len(parameter_shapes(model_name)), gradient))
    else:
        gathers = 1 if stage == 2 else 2
        rows = [("all_gather_into_tensor", gathers * layers, gathers * padded),
                ("reduce_scatter_tensor", layers, padded)]  # fmt: skip
    return pd.DataFrame(rows, columns=["operation", "calls", "bytes"])


def counted_collectives(record: dict) -> pd.DataFrame:
    """Per operation, the calls and bytes a launch counted in its last step."""
    frame = pd.DataFrame(record["result"]["collectives"], columns=["operation", "bytes"])
    return (
        frame.groupby("operation", sort=False)
        .agg(calls=("bytes", "size"), bytes=("bytes", "sum"))
        .reset_index()
    )


def traffic_check(records: list[dict]) -> pd.DataFrame:
    """Counted against expected collectives per launch (model, strategy, k): equal or not, exactly."""
    rows = []
    for record in records:
        config = record["config"]
        expected = expected_collectives(config["model"], config["strategy"], config["world_size"])
        counted = counted_collectives(record)
        merged = expected.merge(counted, on="operation", how="outer", suffixes=("_expected", "_counted"))
        for row in merged.fillna(0).itertuples(index=False):
            rows.append({**labels(config),
                         "operation": SHORT_NAMES.get(row.operation, row.operation),
                         "calls": int(row.calls_counted), "bytes": int(row.bytes_counted),
                         "as expected": int(row.calls_counted) == int(row.calls_expected)
                         and int(row.bytes_counted) == int(row.bytes_expected)})  # fmt: skip
    return pd.DataFrame(rows)


def latency_steps(operation: str, world_size: int) -> int:
    """Messages in sequence of a ring (or pipelined chain) implementation: each costs one latency α."""
    k = world_size
    return 2 * (k - 1) if operation == "all_reduce" else k - 1


def link_bytes(operation: str, nbytes: float, world_size: int) -> float:
    """Bytes each rank's link carries for an ``operation`` on a buffer of ``nbytes`` (nccl-tests' bus
    factor: all-reduce 2(k−1)/k, all-gather and reduce-scatter (k−1)/k, broadcast 1)."""
    return bus_bandwidth_factor(SHORT_NAMES.get(operation, operation), world_size) * nbytes


def priced_traffic(models, world_size: int, links: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Per model and strategy: bytes per step and per rank's link, and seconds per step on each link.

    ``links`` maps a name to (α seconds, β seconds per byte); a step's communication costs, per call,
    its latency steps × α plus its link bytes × β: the bandwidth-optimal ring (pipelined broadcast)
    bound, without overlap with compute.
    """
    rows = []
    for model in models:
        for strategy in STRATEGIES:
            expected = expected_collectives(model, strategy, world_size)
            on_link = sum(link_bytes(r.operation, r.bytes, world_size) for r in expected.itertuples())
            row = {"model": model, "strategy": strategy, "stage": STRATEGIES[strategy],
                   "bytes per step": int(expected["bytes"].sum()),
                   "link bytes per rank": on_link}  # fmt: skip
            for name, (alpha, beta) in links.items():
                row[f"seconds, {name}"] = sum(
                    r.calls * latency_steps(r.operation, world_size) * alpha
                    + link_bytes(r.operation, r.bytes, world_size) * beta
                    for r in expected.itertuples()
                )
            rows.append(row)
    return pd.DataFrame(rows)


def memory_check(records: list[dict]) -> pd.DataFrame:
    """Every rank's held bytes against ``per_rank_bytes``, per launch: equal or not, exactly.

    Weights are compared as held between forward and backward (the step's peak: stage 2 holds them
    whole there); gradients and Adam's state as held after the update.
    """
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        expected = per_rank_bytes(config["model"], result["stage"], config["world_size"])
        for rank, (held, want) in enumerate(zip(result["held_bytes"], expected, strict=True)):
            measured = {"parameters": held["parameters_in_step"], "gradients": held["gradients"],
                        "optimizer": held["optimizer"]}  # fmt: skip
            rows.append({**labels(config),
                         "rank": rank, **{f"{key} measured": value for key, value in measured.items()},
                         "at rest, parameters": held["parameters"],
                         "as computed": measured == {key: want[key] for key in measured}})  # fmt: skip
    return pd.DataFrame(rows)


def loss_parity(records: list[dict]) -> pd.DataFrame:
    """Per launch, the largest difference of its step losses from DDP's with the same model and ranks."""
    baseline = {
        (r["config"]["model"], r["config"]["world_size"]): r["result"]["step_losses"]
        for r in records
        if r["config"]["strategy"] == "ddp"
    }
    rows = []
    for record in records:
        config = record["config"]
        reference = baseline.get((config["model"], config["world_size"]))
        if reference is None:
            continue
        losses = record["result"]["step_losses"]
        difference = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
        rows.append({**labels(config), "steps": len(losses), "largest loss difference": difference})
    return pd.DataFrame(rows)


def loss_parity_view(parity: pd.DataFrame) -> pd.DataFrame:
    """``loss_parity`` for reading: strategies by name, the difference as a reader writes it ("0", or
    "1.2 × 10⁻⁷": ``stats.scientific``), by model and strategy."""
    shown = (
        named(parity)
        .drop(columns="ranks")
        .assign(**{"largest loss difference": parity["largest loss difference"].map(scientific)})
    )
    return shown.set_index(["model", "strategy"])


def step_time_table(records: list[dict]) -> pd.DataFrame:
    """Median and min–max step seconds per launch."""
    rows = []
    for record in records:
        config = record["config"]
        times = spread(record["result"]["step_seconds_all"])
        rows.append({**labels(config), "launch": config.get("launch", 0),
                     "step median s": times.median, "min s": times.low, "max s": times.high,
                     "steps timed": times.count})  # fmt: skip
    return pd.DataFrame(rows)


def strategy_comparison(records: list[dict], baseline: str = "ddp") -> pd.DataFrame:
    """Per model and strategy: the median of its launches' median steps and its speed-up over
    ``baseline``'s launches with the same model and ranks (``stats.launch_speedup``: a bootstrap
    interval over launches, and its verdict); the baseline's own row compares it with itself."""
    launches: dict[tuple, list[list[float]]] = {}
    for record in records:
        config = record["config"]
        key = (config["model"], config["world_size"], config["strategy"])
        launches.setdefault(key, []).append(record["result"]["step_seconds_all"])
    rows = []
    for (model, ranks, strategy), steps in launches.items():
        base = launches.get((model, ranks, baseline))
        if base is None:
            continue
        change = launch_speedup(base, steps)
        rows.append({"model": model, "strategy": strategy, "ranks": ranks, "launches": len(steps),
                     "step_median": float(np.median([np.median(s) for s in steps])),
                     "speedup": change["speedup"], "low": change["low"], "high": change["high"],
                     "verdict": change["verdict"], "launch_counts": change["launches"]})  # fmt: skip
    return pd.DataFrame(rows)


STRATEGY_NAMES = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "fsdp": "FSDP"}


def strategy_view(table: pd.DataFrame) -> pd.DataFrame:
    """``strategy_comparison`` as the chapter shows it: human columns with units, the strategies by name
    and steps in ms; DDP's own rows are the baseline, with no verdict against themselves but the spread of
    their own launches against each other (``stats.BASELINE``)."""
    view = pd.DataFrame(
        {
            "model": table["model"], "strategy": named(table)["strategy"],
            "launches": table["launches"], "step time (ms)": table["step_median"].map(ms),
            "speed-up over DDP": [
                point_text(*row) for row in table[["speedup", "low", "high", "verdict"]].to_numpy()
            ],
            interval_label(table["launch_counts"]): [
                interval_text(*row) for row in table[["low", "high", "verdict"]].to_numpy()
            ],
            "verdict": [verdict_words(*row) for row in table[["verdict", "low", "high"]].to_numpy()],
        }
    )  # fmt: skip
    for column, value in {"speed-up over DDP": "1", "verdict": BASELINE}.items():
        view.loc[(table["strategy"] == "ddp").to_numpy(), column] = value
    return view.set_index(["model", "strategy"])


def strategy_sentence(table: pd.DataFrame, model: str) -> str:
    """Each sharded strategy of ``model`` against DDP (``strategy_comparison``), as sentences."""
    parts = []
    for _, row in table[(table["model"] == model) & (table["strategy"] != "ddp")].iterrows():
        change = describe_speedup({"speedup": row["speedup"], "low": row["low"], "high": row["high"],
                                   "verdict": row["verdict"], "launches": row["launch_counts"]})  # fmt: skip
        parts.append(f"{STRATEGY_NAMES[row['strategy']]}: {change}.")
    return " ".join(parts)


def named(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its strategies by name (DDP, ZeRO-1, FSDP), as every table of the chapter shows them."""
    return table.assign(strategy=table["strategy"].map(STRATEGY_NAMES))


def memory_view(checked: pd.DataFrame) -> pd.DataFrame:
    """``memory_check`` as the chapter shows it: bytes with thousands separators, human columns."""
    names = {
        "parameters measured": "weights in the step (B)", "gradients measured": "gradients (B)",
        "optimizer measured": "Adam state (B)", "at rest, parameters": "weights at rest (B)",
    }  # fmt: skip
    view = named(checked).drop(columns="ranks").rename(columns=names).set_index(["model", "strategy", "rank"])
    return view.apply(lambda c: c.map("{:,}".format) if c.name in names.values() else c)


def traffic_view(traffic: pd.DataFrame) -> pd.DataFrame:
    """``traffic_check`` as the chapter shows it."""
    view = named(traffic).drop(columns="ranks").assign(bytes=traffic["bytes"].map("{:,}".format))
    return view.rename(columns={"bytes": "bytes per step"}).set_index(["model", "strategy", "operation"])


def priced_view(priced: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``priced_traffic`` as two narrow tables: bytes per step and per rank's link (MB) by model and
    strategy, and milliseconds per step with links as rows and (model, strategy) as columns."""
    priced = named(priced)
    volume = priced.set_index(["model", "strategy"])[["bytes per step", "link bytes per rank"]] / 1e6
    volume.columns = ["bytes per step (MB)", "on each rank's link (MB)"]
    seconds = [column for column in priced if column.startswith("seconds, ")]
    times = priced.set_index(["model", "strategy"])[seconds].T * 1e3
    times.index = [column.removeprefix("seconds, ") for column in seconds]
    times.index.name = "link (ms per step)"
    return volume.round(1), times.round(2)


def traffic_sentence(compared: pd.DataFrame, priced: pd.DataFrame, model: str) -> str:
    """How much longer each sharded strategy's step is than DDP's (medians of launch medians), next to
    what its extra traffic costs at ``priced``'s first link (``priced_traffic``), as one sentence."""
    steps = compared[compared["model"] == model].set_index("strategy")["step_median"]
    link = next(column for column in priced if column.startswith("seconds, "))
    seconds = priced[priced["model"] == model].set_index("strategy")[link]
    if "ddp" not in steps.index:
        return ""
    parts = []
    for strategy in (s for s in steps.index if s != "ddp"):
        measured, priced_extra = steps[strategy] - steps["ddp"], seconds[strategy] - seconds["ddp"]
        longer = "longer" if measured >= 0 else "shorter"
        parts.append(
            f"{STRATEGY_NAMES[strategy]}'s step is {abs(measured) * 1e3:,.0f} ms {longer} than DDP's, "
            f"where its extra traffic, priced, costs {priced_extra * 1e3:,.0f} ms"
        )
    return f"In medians of launches, {'; '.join(parts)}." if parts else ""
