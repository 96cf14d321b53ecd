"""``python -m helpers.costmodel.validate``: the GPU step model checked model by model (issue 35).

Without options it prints, for every machine whose profiles the results folder holds, each model's profiled
step per batch: the step, the host's issue time and the kernels' time (medians over the runs).
``--measure`` first profiles one training step of each of the four models (the book's LinearNet and ConvNet,
chapter 7's MelCNN and WaveTransformer) at every batch of ``--batches``, three seeds each, on this machine's
first device, into the results store: each phase on the host's and the device's clocks, and every operator's
host and device time. Everything finished is stored, so a rerun on the same machine and code measures only
what is missing, and a time limit loses nothing.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd
import torch

from helpers.advise import counting, measure
from helpers.advise.examples import EXAMPLES
from helpers.data import CLIP_SAMPLES
from helpers.results import ResultStore

BOOK_MODELS = ("LinearNet", "ConvNet")
BATCHES = (8, 16, 32, 64, 128, 256, 512)
PROFILE_KIND = "advise_step_profile"


def counted_models(names=(*BOOK_MODELS, *EXAMPLES)) -> dict[str, counting.Counted]:
    """``{spec: Counted}`` of the book's models as chapter 5 counts them and of chapter 7's examples."""
    found = {}
    for name in names:
        if name in BOOK_MODELS:
            found[name] = counting.count_book_model(name)
        else:
            spec = EXAMPLES[name]
            found[spec] = counting.count(counting.load_model(spec), (1, CLIP_SAMPLES), label=name)
    return found


def profile_frame(records: list[dict]) -> pd.DataFrame:
    """One row per profiled run: machine, model, batch, seed, the unprofiled step's median (device clock
    on a GPU, host otherwise), the host's issue time (its phases' host seconds) and the kernels' time."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        steps = sorted(result["step_seconds_all"])
        rows.append({
            "machine": record["provenance_id"],
            "model": config["model"].split(" [")[0],
            "batch": config["batch_size"],
            "seed": config["seed"],
            "step (ms)": steps[(len(steps) - 1) // 2] * 1e3,
            "host issue (ms)": sum(p["host_seconds"] for p in result["phases"]) * 1e3,
            "kernels (ms)": (result["device_seconds"] or 0.0) * 1e3,
        })  # fmt: skip
    return pd.DataFrame(rows)


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.costmodel.validate", description=__doc__)
    parser.add_argument("--measure", action="store_true", help="profile the four models here first")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="batches to profile")
    parser.add_argument("--repeats", type=int, default=3, help="independent runs (seeds) per batch")
    parser.add_argument("--results-run", help="folder of data/results (default: gpu on a GPU, else cpu)")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds the profiling may take")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    try:
        batches = counting.parse_shape(args.batches, "--batches", "16,32,64")
    except counting.AdviseError as error:
        print(f"validate: error: {error}", file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    run = args.results_run or ("gpu" if device == "cuda" else "cpu")
    store = ResultStore(run)
    if args.measure:
        measure.profile_sweep(store, counted_models(), batches, device=device, repeats=args.repeats,
                              time_limit_seconds=args.time_limit)  # fmt: skip
    current = store.code_version(PROFILE_KIND)
    records = [r for r in store.records(PROFILE_KIND, all_machines=True) if r["code_version"] == current]
    if not records:
        print(f"validate: error: data/results/{run} holds no {PROFILE_KIND} records of the current code: "
              "run with --measure on a GPU machine", file=sys.stderr)  # fmt: skip
        return 2
    for machine, frame in profile_frame(records).groupby("machine"):
        print(f"machine {machine}: median over runs")
        medians = frame.groupby(["model", "batch"]).median(numeric_only=True).drop(columns="seed")
        print(medians.round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
