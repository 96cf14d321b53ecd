"""What k GPUs would buy (chapter 5): predicted DDP step and epoch times, speed-ups and dollars for 1–8 GPUs
over named links. Predictions, labelled so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel.money import SECONDS_PER_HOUR, exact
from helpers.costmodel.timemodel import (
    ComputeLine,
    ddp_bucket_bytes,
    overlapped_all_reduce_finish,
    split_step,
)

# Link bandwidths: vendor figures, theoretical peak, per direction (a ring step sends and receives at once).
# Collected 2026-11-22. Real all-reduce bandwidth is lower (NCCL's bus bandwidth typically reaches
# 70–90% of NVLink's peak); PCIe without peer-to-peer goes through host memory and gets less again.
LINKS = {
    "PCIe 4.0 x16": {
        # 16 GT/s per lane × 16 lanes × 128/130 (encoding) / 8 bits
        "bytes_per_second": 16e9 * 16 * 128 / 130 / 8,
        "source": "PCI-SIG, PCI Express Base Specification 4.0 (2017): 16 GT/s per lane, 128b/130b",
    },
    "PCIe 5.0 x16": {
        "bytes_per_second": 32e9 * 16 * 128 / 130 / 8,
        "source": "PCI-SIG, PCI Express Base Specification 5.0 (2019): 32 GT/s per lane, 128b/130b",
    },
    "NVLink 4 (H100 SXM)": {
        "bytes_per_second": 900e9 / 2,
        "source": "NVIDIA H100 Tensor Core GPU datasheet: NVLink 900 GB/s total (both directions)",
    },
}
LINKS_COLLECTED = "2026-11-22"
# Per-message latency of a GPU collective step: an assumption (NCCL's few-microsecond order), not a vendor
# figure; it matters only for small buckets.
GPU_ALPHA_SECONDS = 5e-6


def recommend(
    model: str,
    global_batch: int,
    gpu_counts=range(1, 9),
    links: dict | None = None,
    *,
    gpu_compute: ComputeLine,
    bucket_cap_mb: float = 25,
    alpha_seconds: float = GPU_ALPHA_SECONDS,
    optimizer_seconds: float = 0.0,
    backward_share: float = 2 / 3,
    samples: int = 2700,
    epochs: int = 20,
    hourly_price_per_gpu=None,
    worthwhile_speedup: float = 1.5,
) -> pd.DataFrame:
    """Predicted DDP step and epoch time, speed-up and dollars for 1–8 GPUs over each link. PREDICTIONS.

    ``gpu_compute`` is the single-GPU step time as a function of the per-GPU batch (a ``ComputeLine``,
    from ``fit_compute`` on GPU step timings where they exist); ``optimizer_seconds`` its Adam share.
    Each GPU computes global_batch // k samples; the gradient buckets are all-reduced over a ring with
    β = 1 / the link's per-direction bandwidth, overlapped with backward (as ``ddp_overlap``). Dollars per
    run = k × hourly price × run hours (when a price is given). ``verdict`` per link: "add GPUs" when the
    best speed-up reaches ``worthwhile_speedup``, else "stay on one".
    """
    links = links or LINKS
    rows = []
    for link, spec in links.items():
        seconds_per_byte = 1 / spec["bytes_per_second"]
        for gpus in gpu_counts:
            per_gpu = global_batch // gpus
            if per_gpu == 0:
                continue
            buckets = ddp_bucket_bytes(model, bucket_cap_mb)
            phases = split_step(gpu_compute, per_gpu, optimizer_seconds, backward_share)

            def all_reduce(nbytes: float, k=gpus, beta=seconds_per_byte) -> float:
                return ring_all_reduce_seconds(nbytes, k, alpha_seconds, beta)

            finish = overlapped_all_reduce_finish(phases["backward"], buckets, all_reduce)
            step = phases["forward"] + finish + phases["optimizer"]
            steps_per_epoch = math.ceil(samples / (per_gpu * gpus))
            run_seconds = step * steps_per_epoch * epochs
            rows.append(
                {
                    "basis": "prediction", "model": model, "link": link, "gpus": gpus,
                    "per_gpu_batch": per_gpu, "compute_seconds": gpu_compute(per_gpu),
                    "all_reduce_seconds": sum(all_reduce(size) for size in buckets), "step_seconds": step,
                    "epoch_seconds": step * steps_per_epoch, "run_hours": run_seconds / SECONDS_PER_HOUR,
                    "dollars_per_run": (
                        gpus * float(exact(hourly_price_per_gpu)) * run_seconds / SECONDS_PER_HOUR
                        if hourly_price_per_gpu is not None else float("nan")
                    ),
                }
            )  # fmt: skip
    frame = pd.DataFrame(rows)
    if 1 not in set(frame["gpus"]):
        raise ValueError("gpu_counts must include 1: speed-ups are relative to one GPU")
    single = frame[frame["gpus"] == 1].set_index("link")["epoch_seconds"]
    frame["speedup"] = frame["link"].map(single) / frame["epoch_seconds"]
    best = frame.groupby("link")["speedup"].transform("max")
    frame["verdict"] = np.where(best >= worthwhile_speedup, "add GPUs", "stay on one")
    frame.attrs["note"] = (
        f"Predictions from vendor peak link bandwidths (collected {LINKS_COLLECTED}), not measurements."
    )
    return frame
