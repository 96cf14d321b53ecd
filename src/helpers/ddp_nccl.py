"""NCCL's all-reduce of chapter 3's gradients predicted for GPUs of their own, from chapter 5's cited link
figures (nccl-tests' bus bandwidth and a ring step's α), set beside the all-reduce that the largest launches
measured here; and what those k ranks against one measure where they ran (``ddp_placement.Placement``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel.configurations import CONFIGURATIONS
from helpers.costmodel.specs import LINKS, NVLINK_ALPHA, PCIE_ALPHA, PCIE_MEASURED_FRACTION, gpu_key
from helpers.ddp import launch_steps, matching, median_of_medians
from helpers.ddp_results import allreduce_seconds, ms
from helpers.stats import PARAGRAPH_BREAK, listed, significant

if TYPE_CHECKING:
    from helpers.ddp_placement import Placement


# Where chapter 5's link figures come from, compactly, one level of parentheses: the bus bandwidth
# (nccl-tests' busbw) per link as (what it is, citation, what follows the citation), and α per ring step by
# the figure it divides (``specs.NVLINK_ALPHA``, ``specs.PCIE_ALPHA``) as (what it is, citation). Dates are
# the measurements' (``specs.LINKS``' dates of the measured links; the α comment of ``specs``).
_H100_BUSBW = (
    "an NCCL maintainer's figure for a ring over H100 SXMs' NVLink 4, its "
    f"{LINKS['NVLink 4 (H100 SXM)'].peak_bytes_per_second / 1e9:.0f} GB/s line rate less about 20 % of "
    "protocol overhead, stated rather than measured",
    f"nccl-tests issue 212, {LINKS['NVLink 4 (H100 SXM)'].date}", "",
)  # fmt: skip
_PCIE_BUSBW = (
    f"{PCIE_MEASURED_FRACTION * 100:.0f} % of the link's peak, the share measured on 8 RTX 5090s",
    f"NCCL issue 1639, {LINKS['PCIe 5.0 x16'].date}", "",
)  # fmt: skip
BUSBW_SOURCES = {
    "NVLink 4 (H200 SXM)": (
        *_H100_BUSBW[:2],
        ": the H200 SXM has the same NVLink 4 and NVSwitch; 8 H200s posted a peak busbw of 475 GB/s with "
        "NVLink SHARP, near the range's top (nccl-tests issue 272, 2024-11-27)",
    ),
    "NVLink 4 (H100 SXM)": _H100_BUSBW,
    "NVLink 3 (A100 SXM)": (
        "measured on 8 A100 80 GB", f"nccl-tests issue 149, {LINKS['NVLink 3 (A100 SXM)'].date}", "",
    ),
    "NVLink 2 (V100 SXM2)": ("67 % of the link's peak, the share measured on A100s", None, ": an assumption"),
    "PCIe 3.0 x16, host bridge": _PCIE_BUSBW,
    "PCIe 4.0 x16": _PCIE_BUSBW,
    "PCIe 5.0 x16": _PCIE_BUSBW,
}  # fmt: skip
ALPHA_SOURCES = {
    NVLINK_ALPHA: (
        f"a DGX-A100's one-channel ring all-reduce of 8 A100s, {NVLINK_ALPHA * 14e6:.1f} µs, over its 14 "
        "ring steps", "nccl-tests issue 123, 2022-12-14",
    ),
    PCIE_ALPHA: (
        f"an 8-byte all-reduce on 8 RTX 4090s over PCIe, {PCIE_ALPHA * 14e6:.2f} µs, over its 14 ring steps",
        "NCCL issue 1530",
    ),
}  # fmt: skip


def _cited(what: str, citation: str | None, after: str = "") -> str:
    return (f"{what} ({citation})" if citation else what) + after


def nccl_prediction(bucket_bytes: list[int], ranks: int, gpu_name: str | None) -> dict | None:
    """What NCCL's ring all-reduce of these buckets, one after the other, is predicted to take on ``ranks``
    GPUs of the kind named ``gpu_name``, each rank with its own, joined by the link that GPU is sold with
    (the first of chapter 5's ``CONFIGURATIONS`` with that GPU on a link; ``specs.LINKS``: nccl-tests' all-
    reduce bus bandwidth, with its low and high ends, and a ring step's latency α): the α-β ring of
    ``collectives.model`` with β = 1/busbw, centrally (``seconds``) and over the busbw range with α fixed
    (``low_seconds`` at the high busbw, ``high_seconds`` at the low). None where chapter 5's tables have no
    such GPU on a link."""
    key = gpu_key(gpu_name) if gpu_name else None
    configuration = next((c for c in CONFIGURATIONS if c.gpu == key and c.link), None)
    if configuration is None:
        return None
    spec = LINKS[configuration.link]

    def seconds(bus_bandwidth: float) -> float:
        return sum(
            ring_all_reduce_seconds(nbytes, ranks, spec.alpha_seconds, 1 / bus_bandwidth)
            for nbytes in bucket_bytes
        )

    busbw, alpha = BUSBW_SOURCES.get(spec.name), ALPHA_SOURCES.get(spec.alpha_seconds)
    return {"seconds": seconds(spec.bus_bandwidth), "low_seconds": seconds(spec.bus_bandwidth_high),
            "high_seconds": seconds(spec.bus_bandwidth_low), "bytes": sum(bucket_bytes), "link": spec.name,
            "family": spec.name.split(" (")[0], "gpu": key, "configuration": configuration.name,
            "configuration_gpus": configuration.gpus,
            "switched": "NVSwitch" in configuration.note, "bus_bandwidth": spec.bus_bandwidth,
            "bus_low": spec.bus_bandwidth_low, "bus_high": spec.bus_bandwidth_high,
            "alpha_seconds": spec.alpha_seconds,
            "busbw_source": _cited(*busbw) if busbw else _cited(spec.basis, spec.date),
            "alpha_source": _cited(*alpha) if alpha else "chapter 5's link table"}  # fmt: skip


def predicted_ms(seconds: float) -> str:
    """A predicted time in ms to two significant digits: a central estimate, not a measurement."""
    return significant(seconds * 1e3, 2)


def predicted_band(prediction: dict) -> str:
    """A prediction's band over the link's bus bandwidths, in ms: "0.41–0.62"."""
    return f"{predicted_ms(prediction['low_seconds'])}–{predicted_ms(prediction['high_seconds'])}"


def gpus_joined(prediction: dict) -> str:
    """``H200 SXM 141 GB GPUs of their own, joined by NVLink 4 through an NVSwitch``: what the prediction
    assumes the GPUs and their link are."""
    how = f"{prediction['family']} through an NVSwitch" if prediction["switched"] else prediction["family"]
    return f"{prediction['gpu']} GPUs of their own, joined by {how}"


def largest_launches(runs: list[tuple[dict, dict]], where: Placement) -> list[dict]:
    """Per model, the launches of ``where``'s backend and ranks: their median step, the hook's all-reduce,
    the bytes all-reduced per step and NCCL's predicted all-reduce of them (``nccl_prediction``)."""
    rows = []
    for model in dict.fromkeys(v["model"] for v, _ in runs):
        setup = {"model": model, "backend": where.backend, "ranks": where.ranks}
        mine = matching(runs, **setup)
        if mine:
            buckets = mine[0][1]["result"]["bucket_bytes"]
            rows.append({"model": model, "step": median_of_medians(launch_steps(mine)),
                         "allreduce": allreduce_seconds(runs, **setup), "bytes": sum(buckets),
                         "nccl": nccl_prediction(buckets, where.ranks, where.gpu_name)})  # fmt: skip
    return rows


def _allreduce_shares(rows: list[dict]) -> str:
    return listed(f"{ms(r['allreduce'])} ms of `{r['model']}`'s {ms(r['step'])} ms step" for r in rows)


def ranks_reading(rows: list[dict], where: Placement) -> str:
    """What the k ranks against one measure on this machine, for the answer beside the verdicts: on a CPU
    how DDP's machinery uses the shared cores; on one shared GPU, Gloo ranks taking turns on it with every
    bucket staged through host memory and the all-reduce's share of each step (``largest_launches``); a
    GPU per rank otherwise. (NCCL's predicted all-reduce is said once, in ``backends_answer``.)"""
    if where.device == "cpu":
        return (
            f"The ranks share the same {where.cores} cores: this measures how DDP's machinery uses them, not "
            "scaling."
        )
    staged = ", every bucket staged through host memory" if where.staged else ""
    said = f"the all-reduce is {_allreduce_shares(rows)}" if rows else ""
    if where.shares_gpu:
        return (
            f"These are {where.ranks} {where.name} ranks taking turns on {where.shared}{staged}: {said}. "
            "This measures what DDP's machinery costs on a shared GPU, not scaling."
        )
    return f"Each rank has a GPU of its own{staged}: {said}." if said else "Each rank has a GPU of its own."


def nccl_reading(rows: list[dict], where: Placement) -> str:
    """NCCL's predicted all-reduce (``nccl_prediction``) beside the one measured here: what it assumes of
    the GPUs and their link, its central figures and their band over the link's bus bandwidths; then, a
    paragraph of its own, the formula and its inputs with their sources; or why there is none."""
    predicted = [r for r in rows if r["nccl"]]
    if not predicted:
        if where.gpu_name is None:
            return "This machine has no GPU to predict NCCL on; chapter 5 predicts it on GPUs for rent."
        return (
            f"Chapter 5's tables have no link figures for the {where.gpu_name}: NCCL is not predicted here."
        )
    link = predicted[0]["nccl"]
    sizes = listed(f"`{r['model']}`'s {r['bytes']:,} bytes" for r in predicted)
    times = listed(predicted_ms(r["nccl"]["seconds"]) for r in predicted)
    bands = listed(predicted_band(r["nccl"]) for r in predicted)
    how = f" on {where.shared}" if where.shares_gpu else ""
    assumed = "SXM boards" if " SXM" in link["gpu"] else "GPUs"
    as_in, offer, total = "", link["configuration"], link["configuration_gpus"]
    if offer.startswith("AWS") and total >= where.ranks:  # an instance with at least these GPUs
        as_in = (
            f", as in {where.ranks} of the {total} GPUs of an {offer}"
            if total > where.ranks
            else f", as in an {offer}"
        )
    return (
        f"On {where.ranks} {gpus_joined(link)} (this assumes {assumed} so joined{as_in}), NCCL's ring "
        f"all-reduce of {sizes} is predicted to take about {times} ms ({bands} ms over chapter 5's range "
        f"of bus bandwidths for the link), against {_allreduce_shares(predicted)} that {where.name} took "
        f"here{how}.{PARAGRAPH_BREAK}"
        f"The prediction is the α-β ring 2(k−1)(α + nβ/k) with k = {where.ranks}. Its 1/β is nccl-tests' "
        f"bus bandwidth (busbw) for the link, {significant(link['bus_bandwidth'] / 1e9)} GB/s, "
        f"{link['busbw_source']}. Its α, {significant(link['alpha_seconds'] * 1e6)} µs per ring step, is "
        f"{link['alpha_source']}. The range takes the busbw from {significant(link['bus_low'] / 1e9)} to "
        f"{significant(link['bus_high'] / 1e9)} GB/s, with α fixed."
    )
