"""The check against the seed (chapter 5): its experiment — DataParallel on 1–4 GTX 1080 Ti over PCIe 3.0
through the host bridge, batch sizes 10–600, a 2,000-clip epoch — predicted with the band at every batch
of its sweep, and its own arithmetic on LinearNet's traffic against the exact bytes.

The seed's epoch times were in its plots, not its text, so no time can be compared: what can be checked
is its verdicts (four GPUs slower for LinearNet, faster for ConvNet) and its traffic arithmetic, and
either could have come out otherwise.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers.costmodel import configurations as configs
from helpers.costmodel.gpus import gradient_bytes
from helpers.costmodel.recommend import SEED_BATCH_SIZES, scenario_predictions, side, summarize
from helpers.dataparallel import bytes_per_epoch
from helpers.models import build_model

SEED_SAMPLES = 2000  # the seed's epoch
# The seed's own arithmetic on LinearNet's traffic: "50 MB × 2 transfers × 100 batches = 10 GB" per
# epoch of 2,000 clips at batch 20 (one broadcast of the parameters and one reduce of the gradients).
SEED_TRAFFIC = {"megabytes": 50, "transfers": 2, "batches": 100, "gigabytes": 10}


def seed_check(models=("LinearNet", "ConvNet")) -> pd.DataFrame:
    """The seed's experiment predicted, per scenario: DataParallel on 1-4 of its GTX 1080 Ti over PCIe 3.0
    through the host bridge, its batch sizes 10-600, its 2,000-clip epoch."""
    machine = configs.SEED_WORKSTATION
    return scenario_predictions(models, (machine,), SEED_BATCH_SIZES, "dataparallel", samples=SEED_SAMPLES,
                                gpu_counts={machine: range(1, 5)})  # fmt: skip


def seed_verdict_table(check: pd.DataFrame) -> pd.DataFrame:
    """Per model and batch of the seed's sweep, four GPUs against one: the speed-up's central value and
    band, and whether four are faster or slower whatever the inputs, or what that depends on."""
    four = summarize(check[check["gpus"] == check["gpus"].max()])
    return four[["model", "global_batch", "speedup", "speedup_low", "speedup_high", "faster"]]


def seed_verdicts(check: pd.DataFrame) -> dict[str, str]:
    """Per model, what four GPUs do to the epoch over the whole sweep and the whole band: "slower",
    "faster", or "mixed" where some batch or some input decides otherwise (chapter 2 quotes these)."""
    verdicts = {}
    for model, rows in seed_verdict_table(check).groupby("model", sort=False):
        words = {side(verdict) or "mixed" for verdict in rows["faster"]}
        verdicts[model] = words.pop() if len(words) == 1 else "mixed"
    return verdicts


def seed_traffic(model: str = "LinearNet", batch: int = 20, gpus: int = 4) -> pd.DataFrame:
    """The seed's bytes per epoch against the model's, exactly: what each GPU link carries when the
    broadcast and the reduce are pipelined rings (each carries the gradient once), and what moves between
    GPUs in all (each of the other k−1 replicas receives the parameters and sends a gradient)."""
    steps = math.ceil(SEED_SAMPLES / batch)
    per_link = SEED_TRAFFIC["transfers"] * gradient_bytes(model) * steps
    total = bytes_per_epoch(build_model(model), SEED_SAMPLES, batch, gpus)
    moved = total["broadcast_parameters"] + total["reduce_gradients"]
    seed = SEED_TRAFFIC["megabytes"] * 10**6 * SEED_TRAFFIC["transfers"] * SEED_TRAFFIC["batches"]
    return pd.DataFrame([
        {"count": "the seed: 50 MB × 2 transfers × 100 batches", "bytes per epoch": seed},
        {"count": f"the model, per GPU link: 2 × {gradient_bytes(model):,} B × {steps} steps",
         "bytes per epoch": per_link},
        {"count": f"the model, between all {gpus} GPUs: broadcast and reduce to {gpus - 1} replicas",
         "bytes per epoch": moved},
    ])  # fmt: skip
