"""The settings a renter of a GPU turns on first, each timed against the study's strict float32 (chapter 1).

The study trains in float32 with TF32 off, ``cudnn.benchmark`` off and torch's default Adam (foreach on
CUDA), so that every number is the same arithmetic on every device. A renter usually turns on some of
these: TF32 (float32 products and convolutions on tensor cores, 10-bit mantissa), ``cudnn.benchmark``
(cuDNN tries its convolution algorithms once per shape and keeps the fastest), fused Adam (one kernel per
parameter group) and bf16 autocast. Each is timed alone and all together, in rounds that interleave them
with the strict baseline, so that a slow spell of the machine falls on every setting alike.
"""

from __future__ import annotations

from contextlib import contextmanager

import pandas as pd
import torch

from helpers.stats import describe_speedup, listed, shown_ratio, speedup
from helpers.train import check_positive, milliseconds, pick_device, time_training_steps
from helpers.worker import set_tf32

# Each setting by name: what it switches on. "float32" is the study's own, the baseline of the others.
SETTINGS = {
    "float32": {},
    "tf32": {"tf32": True},
    "cudnn_benchmark": {"cudnn_benchmark": True},
    "fused_adam": {"fused_adam": True},
    "bf16": {"bf16": True},
    "all": {"tf32": True, "cudnn_benchmark": True, "fused_adam": True, "bf16": True},
}
LABELS = {
    "float32": "strict float32 (the study's)",
    "tf32": "TF32 on",
    "cudnn_benchmark": "cudnn.benchmark on",
    "fused_adam": "fused Adam",
    "bf16": "bf16 autocast",
    "all": "all four together",
}
VERDICTS = ("faster", "no measurable difference", "not resolved", "slower")
CUDA_ONLY = {"tf32": "TF32 is a CUDA tensor-core format", "cudnn_benchmark": "cuDNN runs only on GPUs"}


def applicable(settings: list[str], device: str) -> tuple[list[str], dict[str, str]]:
    """The ``settings`` that change something on ``device`` (the strict baseline first), and each of the
    others with why it does not: TF32 and cuDNN are CUDA's; "all" on a CPU would only repeat fused Adam
    with bf16. Unknown names are refused."""
    unknown = [name for name in settings if name not in SETTINGS]
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}: choose from {list(SETTINGS)}")
    on_cuda = torch.device(device).type == "cuda"
    skipped = {name: CUDA_ONLY[name] for name in settings if name in CUDA_ONLY and not on_cuda}
    if "all" in settings and not on_cuda:
        skipped["all"] = "on a CPU it would be fused Adam with bf16 alone"
    chosen = ["float32", *[n for n in dict.fromkeys(settings) if n not in skipped and n != "float32"]]
    return (chosen if len(chosen) > 1 else []), skipped


@contextmanager
def switched_on(setting: str):
    """TF32 and ``cudnn.benchmark`` as ``setting`` asks, restored to the study's (both off) afterwards."""
    switches = SETTINGS[setting]
    set_tf32(bool(switches.get("tf32")))
    torch.backends.cudnn.benchmark = bool(switches.get("cudnn_benchmark"))
    try:
        yield
    finally:
        set_tf32(False)
        torch.backends.cudnn.benchmark = False


def time_setting(model: str, train_set, setting: str, **settings) -> dict:
    """``train.time_training_steps`` of ``model`` under ``setting`` (``SETTINGS``), Adam as the study runs it
    unless the setting fuses it."""
    switches = SETTINGS[setting]
    options = {"fused": True} if switches.get("fused_adam") else None
    dtype = torch.bfloat16 if switches.get("bf16") else None
    with switched_on(setting):
        return time_training_steps(
            model, train_set, autocast_dtype=dtype, optimizer_options=options, **settings
        )


def stored_settings_timing(store, model: str, train_set, setting: str, round_number: int, **settings) -> dict:
    """``time_setting`` through the results store, one record per model, setting and round."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {list(SETTINGS)}, not {setting!r}")
    settings["device"] = str(pick_device(settings.get("device", "auto")))
    config = {"kind": "settings_timing", "model": model, "setting": setting, "round": round_number,
              "train_samples": len(train_set), "threads": torch.get_num_threads(), **settings}  # fmt: skip
    return store.measure(config, lambda: time_setting(model, train_set, setting, **settings))


def settings_comparison(store, models, train_set, settings: list[str], rounds: int, **timing) -> dict:
    """Every applicable setting (``applicable``) of every model, ``rounds`` times, each round timing all of
    them in turn: ``steps`` (every timed step: model, setting, round, seconds), ``speedups`` against the
    strict float32 of the same model ({(model, setting): ``stats.speedup``} over all rounds' steps) and
    ``skipped`` ({setting: why not on this device})."""
    check_positive(rounds=rounds)
    device = str(pick_device(timing.get("device", "auto")))
    chosen, skipped = applicable(settings, device)
    rows = []
    for round_number in range(rounds):
        for model in models:
            for setting in chosen:
                record = stored_settings_timing(store, model, train_set, setting, round_number, **timing)
                rows += [
                    {"model": model, "setting": setting, "round": round_number, "seconds": seconds}
                    for seconds in record["result"]["step_seconds_all"]
                ]
    steps = pd.DataFrame(rows, columns=["model", "setting", "round", "seconds"])
    speedups = {}
    for (model, setting), group in steps.groupby(["model", "setting"], sort=False):
        if setting != "float32":
            baseline = steps.query("model == @model and setting == 'float32'")["seconds"]
            speedups[model, setting] = speedup(baseline.tolist(), group["seconds"].tolist())
    return {"steps": steps, "speedups": speedups, "skipped": skipped, "rounds": rounds, "device": device}


def settings_table(comparison: dict) -> pd.DataFrame:
    """``settings_comparison`` to read: per model and setting, the median step with the fastest and slowest
    of every round's timed steps, and its verdict against the strict float32 with the ratio (a speed-up, or
    below 1 the time taken: ``stats.describe_speedup``)."""
    rows = []
    for (model, setting), group in comparison["steps"].groupby(["model", "setting"], sort=False):
        change = comparison["speedups"].get((model, setting))
        rows.append({"model": model, "setting": LABELS[setting],
                     "step (ms)": milliseconds(group["seconds"].tolist(), unit=""),
                     "against strict float32":
                         describe_speedup(change) if change else "—"})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "setting"])


def settings_sentence(comparison: dict) -> str:
    """The comparison read, per model: the settings that made its step measurably faster (with their
    speed-ups), those with no measurable difference, those the spread of its steps leaves unresolved, and
    any that made it slower; then the settings not timed on this device and why."""
    said = []
    for model in dict.fromkeys(model for model, _ in comparison["speedups"]):
        mine = {s: c for (m, s), c in comparison["speedups"].items() if m == model}
        groups = {verdict: [s for s, c in mine.items() if c["verdict"] == verdict] for verdict in VERDICTS}
        parts = []
        if groups["faster"]:
            parts.append(
                listed(f"{LABELS[s]} {mine[s]['speedup']:.2f}×" for s in groups["faster"]) + " faster"
            )
        if groups["no measurable difference"]:
            parts.append(listed(LABELS[s] for s in groups["no measurable difference"]) + " changed nothing "
                         "measurable")  # fmt: skip
        if groups["not resolved"]:
            parts.append(listed(LABELS[s] for s in groups["not resolved"]) + " not resolved against the "
                         "spread of its steps")  # fmt: skip
        if groups["slower"]:  # as the time taken (stats.shown_ratio), as every slower verdict is said
            longer = listed(f"{shown_ratio(mine[s])[0]:.2f}×" for s in groups["slower"])
            parts.append(f"{listed(LABELS[s] for s in groups['slower'])} slower, taking {longer} as long")
        steps = comparison["steps"].query("model == @model and setting == 'float32'")["seconds"]
        said.append(
            f"`{model}`, a strict float32 step of {milliseconds(steps.tolist())}: {'; '.join(parts)}."
        )
    if comparison["skipped"]:
        said.append(
            "Not timed on this device: "
            + "; ".join(f"{LABELS[s]} ({why})" for s, why in comparison["skipped"].items())
            + "."
        )
    return " ".join(said) or "No setting was timed here."


def settings_answer(comparison: dict) -> str:
    """The chapter's answer in one sentence: all the settings together against strict float32 per model
    where "all" was timed, else each setting that was."""
    speedups = comparison["speedups"]
    if not speedups:
        return "no setting was timed here"
    models = list(dict.fromkeys(model for model, _ in speedups))
    if all((model, "all") in speedups for model in models):
        verdicts = "; ".join(f"`{m}` {describe_speedup(speedups[m, 'all'], brief=True)}" for m in models)
        return f"all four together against strict float32: {verdicts}"
    parts = []
    for model in models:
        mine = [
            f"{LABELS[s]} {describe_speedup(c, brief=True)}" for (m, s), c in speedups.items() if m == model
        ]
        parts.append(f"`{model}` " + ", ".join(mine))
    return f"each against strict float32: {'; '.join(parts)}"
