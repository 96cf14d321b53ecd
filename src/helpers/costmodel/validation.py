"""Validation of the time model (chapter 5): every multi-rank step that chapters 2 and 3 measured —
none of which the calibration saw — predicted by each method and compared, with each method's error
reported on its own (never the best one picked after the fact) and its bias, where all predictions fall
on one side of the measurements.
"""

from __future__ import annotations

import pandas as pd

from helpers.costmodel.timemodel import TimeModel, _model_facts, calibration_records, predict_step_band
from helpers.dataparallel import chunk_sizes
from helpers.results import canonical_json
from helpers.stats import spread


def checked_records(
    records: list[dict], min_ranks: int = 2, backend: str | None = None, device: str | None = None
) -> list[dict]:
    """The records ``measured_frame`` validates on: ``ddp_run`` with at least ``min_ranks`` ranks (of
    ``backend``, where given) and ``dataparallel_timing`` with at least as many replicas, on ``device``'s
    kind where given."""

    def on(config: dict) -> str:
        return str(config.get("device") or config.get("devices", ["cpu"])[0])

    return [
        record for record in records
        if (device is None or on(record["config"]).startswith(device))
        and (
            (record["kind"] == "ddp_run" and record["config"]["world_size"] >= min_ranks
             and (backend is None or record["config"]["backend"] == backend))
            or (record["kind"] == "dataparallel_timing" and len(record["config"]["devices"]) >= min_ranks)
        )
    ]  # fmt: skip


def measured_frame(
    records: list[dict], min_ranks: int = 2, backend: str | None = None, device: str | None = None
) -> pd.DataFrame:
    """Multi-rank step times to validate on: ``ddp_run`` (chapter 3) and ``dataparallel_timing`` (chapter 2).

    One row per configuration with at least ``min_ranks`` ranks or replicas. A DDP configuration launched
    several times (chapter 3's ``launch`` numbers) is one measurement: the median of its launches' median
    steps, and the fastest and slowest launch median (one launch: its fastest and slowest step). With
    ``backend`` only the DDP runs of that backend count (the time model prices one backend's all-reduce),
    with ``device`` ("cpu" or "cuda") only the runs on that kind of device.
    """
    groups: dict[str, dict] = {}
    for record in checked_records(records, min_ranks, backend, device):
        config, result = record["config"], record["result"]
        if record["kind"] == "ddp_run":
            row = {"kind": "ddp", "ranks": config["world_size"],
                   "global_batch": config["global_batch_size"], "threads": result["threads_per_rank"],
                   "bucket_cap_mb": config["bucket_cap_mb"],
                   "compression": config.get("compression")}  # fmt: skip
        else:
            row = {"kind": "dataparallel", "ranks": len(config["devices"]),
                   "global_batch": config["batch_size"], "threads": config["threads"],
                   "bucket_cap_mb": None, "compression": None}  # fmt: skip
        same = canonical_json({key: value for key, value in config.items() if key != "launch"})
        group = groups.setdefault(same, {"measurement": record["key"], "model": config["model"], **row,
                                         "launches": []})  # fmt: skip
        group["launches"].append(result["step_seconds_all"])
    rows = []
    for group in groups.values():
        launches = group.pop("launches")
        medians = [spread(steps).median for steps in launches]
        timing = spread(medians) if len(launches) > 1 else spread(launches[0])
        rows.append({**group, "launches": len(launches), "step_seconds": spread(medians).median,
                     "step_min": timing.low, "step_max": timing.high})  # fmt: skip
    columns = ["measurement", "kind", "model", "ranks", "global_batch", "threads", "bucket_cap_mb",
               "compression", "launches", "step_seconds", "step_min", "step_max"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def pooled_records(
    records: list[dict], models, *, backend: str, timed_steps: int, device: str = "cpu", devices: int = 1
) -> list[dict]:
    """Every record the time model and its check read for ``models``: the calibration
    (``timemodel.calibration_records``) and the multi-rank runs it is checked on (``checked_records``),
    each once: what ``reference_speed.pooled_note`` speaks of."""
    used = calibration_records(
        records, models, backend=backend, timed_steps=timed_steps, device_type=device, devices=devices
    )
    checked = [
        r for r in checked_records(records, backend=backend, device=device) if r["config"]["model"] in models
    ]
    return list({id(r): r for r in [*(r for group in used.values() for r in group), *checked]}.values())


def predict_measured(measured: pd.DataFrame, time_model: TimeModel) -> pd.DataFrame:
    """Predictions for every row of ``measured_frame``, at the threads each measurement really had.

    DataParallel rows get the ``dataparallel`` method, DDP rows both ``ddp_no_overlap`` and ``ddp_overlap``.
    ``predicted_low_seconds`` and ``predicted_high_seconds``: the least and most over the all-reduce's
    uncertain link fits (``TimeModel.link_variants``; equal where no all-reduce is priced).
    """
    rows = []
    for row in measured.itertuples():
        methods = ("dataparallel",) if row.kind == "dataparallel" else ("ddp_no_overlap", "ddp_overlap")
        options = {"threads": int(row.threads)}
        if row.kind == "ddp":
            compression = row.compression if isinstance(row.compression, str) else None  # None, not NaN
            options.update(bucket_cap_mb=row.bucket_cap_mb, compression=compression)
        for method in methods:
            parts, low, high = predict_step_band(
                method, row.model, int(row.global_batch), int(row.ranks), time_model, **options
            )
            rows.append(
                {
                    "measurement": row.measurement,
                    "method": method,
                    "predicted_seconds": parts["step_seconds"],
                    "predicted_low_seconds": low,
                    "predicted_high_seconds": high,
                    "predicted_compute_seconds": parts["compute_seconds"],
                    "predicted_communication_seconds": parts["communication_seconds"],
                }
            )
    return pd.DataFrame(rows)


def validate(predictions: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Absolute percentage error of each prediction and the MAPE of its (model, method) group.

    ``predictions``: columns ``measurement``, ``method``, ``predicted_seconds``; ``measured``: columns
    ``measurement``, ``model``, ``step_seconds``. APE = |predicted − measured| / measured × 100;
    ``mape_percent`` is the mean APE over the rows of the same model and method.
    """
    joined = predictions.merge(measured, on="measurement", how="inner", validate="many_to_one")
    if len(joined) != len(predictions):
        raise ValueError("some predictions name a measurement that is not in the measured frame")
    joined["ape_percent"] = (
        (joined["predicted_seconds"] - joined["step_seconds"]).abs() / joined["step_seconds"] * 100
    )
    joined["mape_percent"] = joined.groupby(["model", "method"])["ape_percent"].transform("mean")
    if {"step_min", "step_max"} <= set(joined.columns):
        joined["within_spread"] = joined["predicted_seconds"].between(joined["step_min"], joined["step_max"])
        joined["spread_percent"] = (joined["step_max"] - joined["step_min"]) / joined["step_seconds"] * 100
    return joined


def link_band_percent(validated: pd.DataFrame) -> pd.Series:
    """How far the link's fits move each prediction: (highest − lowest) / central, in %."""
    width = validated["predicted_high_seconds"] - validated["predicted_low_seconds"]
    return width / validated["predicted_seconds"] * 100


def validation_summary(validated: pd.DataFrame) -> pd.DataFrame:
    """Per model and method: the number of measurements and of distinct configurations among them (ranks,
    batch, threads, buckets, compression), the MAPE, its spread over the measurements
    (smallest and largest APE, %), the mean signed error (%, positive: predictions too slow) and how many
    predictions lie above their measurement (a bias when all do), and, where the measurements carry their
    spread, how many predictions fall inside the measured min–max and how wide that range is (median, % of
    the median step), and how far the link's fits move a prediction at most (``link_band_percent``)."""
    validated = validated.assign(
        error_percent=(validated["predicted_seconds"] - validated["step_seconds"])
        / validated["step_seconds"]
        * 100,
        above=validated["predicted_seconds"] > validated["step_seconds"],
    )
    if "predicted_high_seconds" in validated:
        validated = validated.assign(link_band_percent=link_band_percent(validated))
    keys = [c for c in ("ranks", "global_batch", "threads", "bucket_cap_mb", "compression") if c in validated]
    validated = validated.assign(configuration=validated[keys].apply(lambda row: repr(tuple(row)), axis=1))
    groups = validated.groupby(["model", "method"])
    summary = groups["ape_percent"].agg(
        points="count", mape_percent="mean", min_ape_percent="min", max_ape_percent="max"
    )
    summary["configurations"] = groups["configuration"].nunique()  # a setting measured twice counts once
    summary["mean_error_percent"] = groups["error_percent"].mean()
    summary["predictions_above"] = groups["above"].sum()
    if "within_spread" in validated:
        summary["within_measured_range"] = groups["within_spread"].sum()
        summary["measured_range_percent"] = groups["spread_percent"].median()
    if "predicted_high_seconds" in validated:
        summary["link_band_percent"] = groups["link_band_percent"].max()
    return summary.reset_index()


def replicas_side_by_side(time_model: TimeModel, model: str, global_batch: int, replicas: int) -> float:
    """DataParallel's compute on a CPU if its replicas, which run in parallel threads, each had
    cores // replicas threads of their own (queued ⌈replicas / cores⌉ deep when they outnumber the
    cores): the largest chunk's line at that thread count per replica in the queue, plus one optimizer
    step. The shared-device model prices the replicas as one process at all threads doing all the work;
    where a model's kernels use one thread better than two, this is the faster of the two. NaN when that
    thread count was not calibrated."""
    threads = max(1, time_model.cores // replicas)
    try:
        line = time_model.line(model, threads)
    except ValueError:
        return float("nan")
    optimizer = min(
        time_model.optimizer_seconds(_model_facts(model)["parameters"], threads), line.intercept_seconds
    )
    depth = -(-replicas // time_model.cores)
    return depth * (line(max(chunk_sizes(global_batch, replicas))) - optimizer) + optimizer


def dataparallel_sharing(validated: pd.DataFrame, time_model: TimeModel) -> pd.DataFrame:
    """The DataParallel rows of ``validate``: measured, predicted, and ``replicas_side_by_side`` plus the
    same predicted transfers, each with its signed error (%); no rows where nothing was validated."""
    if validated.empty:  # no multi-rank measurement in the store: an empty table, said so beside it
        return pd.DataFrame(columns=["model", "replicas", "global batch"])
    rows = validated[validated["method"] == "dataparallel"].copy()
    rows["side_by_side_seconds"] = [
        replicas_side_by_side(time_model, row.model, int(row.global_batch), int(row.ranks))
        + row.predicted_communication_seconds
        for row in rows.itertuples()
    ]
    rows = rows.sort_values(["model", "ranks", "global_batch"])
    return pd.DataFrame(
        {
            "model": rows["model"],
            "replicas": rows["ranks"],
            "global batch": rows["global_batch"],
            "measured (s)": rows["step_seconds"],
            "model (s)": rows["predicted_seconds"],
            "model error (%)": (rows["predicted_seconds"] / rows["step_seconds"] - 1) * 100,
            "side by side (s)": rows["side_by_side_seconds"],
            "side by side error (%)": (rows["side_by_side_seconds"] / rows["step_seconds"] - 1) * 100,
        }
    )
