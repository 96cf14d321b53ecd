"""What chapter 5's GPU predictions rest on (chapter 5): each GPU's datasheet figures and each link's
all-reduce bandwidth, with source and date, and the inputs that are not known for a GPU the study has not
run on, each a range (``Range``): the achieved fraction of peak per layer kind, how much of it a k-GPU shard
keeps, the host time per op and the all-reduce bandwidth a link achieves. A ``Scenario`` is one value of
each; ``scenarios`` spans their corners, over which every prediction is a band.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

import pandas as pd

READ_ON = "2026-11-24"  # when the sources below were read


@dataclass(frozen=True)
class Range:
    """An input the predictions are unsure of: low, central and high values, with source and date, and
    whether the range is assumed or measured (``origin``)."""

    name: str
    low: float
    central: float
    high: float
    unit: str
    source: str
    date: str
    origin: str = "assumed"

    @property
    def measured(self) -> bool:
        """Whether the range was measured (its ``origin`` says where), not assumed."""
        return self.origin.startswith("measured")


COMPUTE_EFFICIENCY = {
    "matmul": Range(
        "achieved fraction of FP32 peak, matrix products", 0.2, 0.5, 0.8, "",
        "assumption: cuBLAS SGEMM reaches 70-90% of FP32 peak on large square products; ours have 10 to "
        "600 rows, so lower", READ_ON,
    ),
    "conv": Range(
        "achieved fraction of FP32 peak, convolutions", 0.1, 0.3, 0.6, "",
        "assumption: cuDNN on a Conv1d with 1 input channel and 200 taps, or 30-50 channels, uses the "
        "units poorly; 0.6 is a good large GEMM", READ_ON,
    ),
}  # fmt: skip
MEMORY_EFFICIENCY = Range(
    "achieved fraction of peak memory bandwidth", 0.5, 0.7, 0.9, "",
    "assumption: streaming kernels reach 70-90% of the datasheet's bandwidth, small ones less", READ_ON,
)  # fmt: skip
SHARD_EFFICIENCY = Range(
    "efficiency at a k-GPU shard of the batch, relative to the whole batch on one GPU", 0.5, 1.0, 1.0, "",
    "assumption: a product or convolution over fewer samples reaches no higher a fraction of peak (fewer "
    "rows to tile over the GPU's units), and as little as half of it at the batches that decide the "
    "verdicts; 1 keeps the one-GPU step's efficiency", READ_ON,
)  # fmt: skip
OP_MEASURED_ON = "1fcc455750dea9a9"  # the H200 machine whose host the study profiled (provenance id)
OP_MEASURED_GPU = "H200 SXM 141 GB"  # its GPU, as ``GPUS`` names it
# Measured, not assumed: ``costmodel.validate.host_seconds_per_op`` of that machine's committed profiles,
# to three significant digits (a test holds them to the records)
OP_OVERHEAD = Range(
    "host time per eager PyTorch op", 4.37e-5, 6.66e-5, 1.14e-4, "s",
    "measured: a step's host issue time (forward, backward and optimizer phases of unprofiled steps) over "
    "its op count, 4 models at batches 8-512, 3 seeds each (84 profiles), on the H200 machine's host "
    f"({OP_MEASURED_ON}: a 16-core Intel Xeon, torch 2.11; python -m helpers.costmodel.validate): lowest, "
    "median, highest. A counted op stands for a layer's kernel, so it holds several ATen calls; zero_grad "
    "is outside the timed phases; GPU-bound steps are included, whose host may wait on a full launch queue "
    "(the band's high end). One host: a faster one would fall below the band (a bare CUDA launch is 3-5 "
    "µs, NVIDIA developer forum)", "2026-11-26",
    origin=f"measured on the H200 machine's host ({OP_MEASURED_ON})",
)  # fmt: skip
RANGES = (*COMPUTE_EFFICIENCY.values(), SHARD_EFFICIENCY, MEMORY_EFFICIENCY, OP_OVERHEAD)


@dataclass(frozen=True)
class GPU:
    """Datasheet figures of one GPU: FP32 peak, memory bandwidth and size, and where they were read."""

    name: str
    fp32_flops: float  # FP32 (CUDA-core) peak, FLOP/s: what float32 training with TF32 off uses
    memory_bandwidth: float  # bytes/s
    memory_bytes: int
    source: str
    date: str
    tf32_flops: float | None = None  # dense TF32 tensor-core peak: PyTorch's default for convolutions
    bf16_flops: float | None = None  # dense BF16 tensor-core peak (half the "with sparsity" figure)


GB = 10**9
# NVIDIA's documents, identified by number and revision; their text was read through the copies named
A100_SHEET = (
    "NVIDIA A100 Tensor Core GPU datasheet, nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (1758950 r4, "
    "June 2021)"
)
A100_80_SHEET = (
    "NVIDIA A100 80GB datasheet, nvidia-a100-datasheet-nvidia-us-2188504-web.pdf (2188504, May 2022; table "
    "read in a copy)"
)
H100_SHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet, resources.nvidia.com/en-us-gpu-resources/h100-datasheet-24306 "
    "(3440270, September 2024; SXM column read in hpctech.co.jp's copy)"
)
GPUS = {
    "GTX 1080 Ti": GPU(
        "GTX 1080 Ti", 3584 * 2 * 1582e6, 484 * GB, 11 * GB,
        "no datasheet exists for GeForce cards: NVIDIA's GTX 1080 Ti specifications page (geforce.com, "
        "3,584 CUDA cores, 1,582 MHz boost, 11 GB GDDR5X at 11 Gbps on 352 bits = 484 GB/s), as reported by "
        "vortez.net and tomshardware.com (2017-03-01); FP32 = 2 x cores x boost clock = 11.34 TFLOPS",
        "2017-03-01",
    ),
    "V100 SXM2 16 GB": GPU(
        "V100 SXM2 16 GB", 15.7e12, 900 * GB, 16 * GB,
        "NVIDIA V100 Tensor Core GPU datasheet, volta-v100-datasheet-update-us-1165301-r5.pdf (1165301 r5, "
        "December 2019): SXM2 FP32 15.7 TFLOPS, 16 GB HBM2 at 900 GB/s, NVLink 300 GB/s",
        "2019-12",
    ),
    "A100 SXM 40 GB": GPU(
        "A100 SXM 40 GB", 19.5e12, 1555 * GB, 40 * GB,
        f"{A100_SHEET}: FP32 19.5 TFLOPS; 40 GB HBM2 at 1,555 GB/s; BF16 tensor 312 TFLOPS dense (624 with "
        "sparsity)", "2021-06", tf32_flops=156e12, bf16_flops=312e12,
    ),
    "A100 SXM 80 GB": GPU(
        "A100 SXM 80 GB", 19.5e12, 2039 * GB, 80 * GB,
        f"{A100_80_SHEET}: FP32 19.5 TFLOPS; 80 GB HBM2e at 2,039 GB/s; NVLink 600 GB/s; BF16 tensor "
        "312 TFLOPS dense (624 with sparsity)", "2022-05", tf32_flops=156e12, bf16_flops=312e12,
    ),
    "A100 PCIe 80 GB": GPU(
        "A100 PCIe 80 GB", 19.5e12, 1935 * GB, 80 * GB,
        f"{A100_80_SHEET}: FP32 19.5 TFLOPS; 80 GB HBM2e at 1,935 GB/s; PCIe Gen4 64 GB/s (an NVLink bridge "
        "joins at most 2 cards); BF16 tensor 312 TFLOPS dense (624 with sparsity)", "2022-05",
        tf32_flops=156e12, bf16_flops=312e12,
    ),
    "H100 SXM 80 GB": GPU(
        "H100 SXM 80 GB", 67e12, 3350 * GB, 80 * GB,
        f"{H100_SHEET}: FP32 67 TFLOPS; 80 GB HBM3 at 3.35 TB/s; NVLink 900 GB/s; BF16 tensor 989.5 "
        "TFLOPS dense (1,979 with sparsity)", "2024-09", tf32_flops=494.5e12, bf16_flops=989.5e12,
    ),
    "H100 PCIe 80 GB": GPU(
        "H100 PCIe 80 GB", 51e12, 2000 * GB, 80 * GB,
        "NVIDIA H100 PCIe product brief PB-11133-001_v02 (November 2022): 2,000 GB/s; FP32 51 TFLOPS from "
        "the PCIe column of an earlier H100 datasheet as copied by hpctech.co.jp (another NVIDIA copy prints "
        "48: a difference inside the band of achieved efficiency); PCIe Gen5 128 GB/s; BF16 tensor 756 "
        "TFLOPS dense (1,513 with sparsity)", "2022-11", tf32_flops=378e12, bf16_flops=756e12,
    ),
    "H200 SXM 141 GB": GPU(
        "H200 SXM 141 GB", 67e12, 4800 * GB, 141 * GB,
        "NVIDIA H200 Tensor Core GPU datasheet (3367400, July 2024; read in a transcription): the H100's "
        "FP32 67 TFLOPS with 141 GB of HBM3e at 4.8 TB/s; NVLink 900 GB/s; BF16 tensor 989.5 TFLOPS "
        "dense (1,979 with sparsity)", "2024-07", tf32_flops=494.5e12, bf16_flops=989.5e12,
    ),
    "L4": GPU(
        "L4", 30.3e12, 300 * GB, 24 * GB,
        "NVIDIA L4 Tensor Core GPU datasheet (nvdam.widen.net l4-datasheet-2595652; read in Cisco's copy) "
        "and product brief PB-11316-001_v01 (March 2023): FP32 30.3 TFLOPS; 24 GB GDDR6 at 300 GB/s; PCIe "
        "Gen4 x16; BF16 tensor 121 TFLOPS dense (242 with sparsity)", "2023-03", tf32_flops=60e12,
        bf16_flops=121e12,
    ),
    "L40S": GPU(
        "L40S", 91.6e12, 864 * GB, 48 * GB,
        "NVIDIA L40S datasheet (2841316, August 2023; table read in the copy at mullet.se): FP32 91.6 "
        "TFLOPS; 48 GB GDDR6 at 864 GB/s; PCIe Gen4 x16 64 GB/s; no NVLink; BF16 tensor 362 "
        "TFLOPS dense (733 with sparsity)", "2023-08", tf32_flops=183e12, bf16_flops=362e12,
    ),
}  # fmt: skip

# How drivers name these GPUs (torch.cuda.get_device_properties(i).name): the first rule whose words all
# appear in the name wins; None for an H100 NVL (a different board) and for GPUs not in the table.
DRIVER_NAMES = (
    (("H200",), "H200 SXM 141 GB"), (("H100", "NVL"), None), (("H100", "PCIE"), "H100 PCIe 80 GB"),
    (("H100",), "H100 SXM 80 GB"), (("A100", "PCIE"), "A100 PCIe 80 GB"),
    (("A100", "40GB"), "A100 SXM 40 GB"), (("A100",), "A100 SXM 80 GB"), (("V100",), "V100 SXM2 16 GB"),
    (("L40S",), "L40S"), (("L4",), "L4"), (("1080", "TI"), "GTX 1080 Ti"),
)  # fmt: skip


def gpu_key(driver_name: str) -> str | None:
    """The ``GPUS`` entry of a GPU as its driver names it ("NVIDIA H100 80GB HBM3" → "H100 SXM 80 GB").

    An A100 PCIe 40 GB is read as the 80 GB card (the same FP32 peak, 20 % less bandwidth)."""
    words = set(re.split(r"[\s\-_]+", driver_name.upper()))
    return next((key for tokens, key in DRIVER_NAMES if set(tokens) <= words), None)


@dataclass(frozen=True)
class Link:
    """How GPUs are joined: the spec's peak per direction, and the all-reduce bus bandwidth achieved on it.

    ``bus_bandwidth`` is the central value of nccl-tests' busbw for a ring all-reduce on such a link
    (bytes/s), with ``bus_bandwidth_low`` and ``bus_bandwidth_high`` bounding what a rented machine may
    achieve; ``alpha_seconds`` is the latency of one ring step (a published small-message all-reduce time
    divided by its 2(k−1) steps).
    """

    name: str
    peak_bytes_per_second: float
    bus_bandwidth: float
    bus_bandwidth_low: float
    bus_bandwidth_high: float
    alpha_seconds: float
    basis: str
    source: str
    date: str

    def bus(self, level: str = "central") -> float:
        """The all-reduce bus bandwidth at ``level`` ("low", "central" or "high")."""
        return {"low": self.bus_bandwidth_low, "central": self.bus_bandwidth,
                "high": self.bus_bandwidth_high}[level]  # fmt: skip


def pcie_peak(transfers_per_second: float) -> float:
    """Bytes/s per direction of a x16 PCIe link at ``transfers_per_second`` per lane (128b/130b)."""
    return transfers_per_second * 16 * 128 / 130 / 8


# nccl-tests on 8 RTX 5090s over PCIe (5.0 by the card; the issue never confirms the bus): busbw 28 GB/s
# (NCCL issue 1639, 2025-03-14), 44 % of a PCIe 5.0 x16 link's peak
PCIE_MEASURED_FRACTION = 28e9 / pcie_peak(32e9)
PCIE_RANGE = (0.3, 0.8)  # fraction of peak: host bridges and switches below, a clean switch above
NVLINK_RANGE = (0.6, 0.85)  # fraction of peak: NCCL's protocol overhead is about 20 % (nccl-tests 212)
PCIE_ALPHA = 42.14e-6 / 14  # 8 B all-reduce on 8 RTX 4090s over PCIe: 42.14 µs (NCCL issue 1530)
# ring all-reduce on 8 A100s (DGX-A100), one channel: 33.7 µs (nccl-tests 123, 2022-12-14)
NVLINK_ALPHA = 33.7e-6 / 14


def _pcie(name: str, rate: float, source: str, date: str) -> Link:
    peak = pcie_peak(rate)
    return Link(name, peak, PCIE_MEASURED_FRACTION * peak, PCIE_RANGE[0] * peak, PCIE_RANGE[1] * peak,
                PCIE_ALPHA,
                f"central: {PCIE_MEASURED_FRACTION:.0%} of peak, the fraction nccl-tests measured "
                f"on 8 GPUs over PCIe 5.0 (NCCL issue 1639); band {PCIE_RANGE[0]:.0%}-{PCIE_RANGE[1]:.0%} "
                "of peak (assumption)", source, date)  # fmt: skip


LINKS = {
    "PCIe 3.0 x16, host bridge": _pcie(
        "PCIe 3.0 x16, host bridge", 8e9,
        "PCI-SIG PCIe 3.0: 8 GT/s per lane, 128b/130b; the seed's GPUs meet at the host bridge (PHB)", "2010",
    ),
    "PCIe 4.0 x16": _pcie("PCIe 4.0 x16", 16e9, "PCI-SIG PCIe 4.0: 16 GT/s per lane, 128b/130b", "2017"),
    "PCIe 5.0 x16": _pcie(
        "PCIe 5.0 x16", 32e9,
        "PCI-SIG PCIe 5.0; github.com/NVIDIA/nccl/issues/1639 (8x RTX 5090: busbw 28 GB/s, 2025-03-14)",
        "2025-03-14",
    ),
    "NVLink 2 (V100 SXM2)": Link(
        "NVLink 2 (V100 SXM2)", 150e9, 0.67 * 150e9, NVLINK_RANGE[0] * 150e9, NVLINK_RANGE[1] * 150e9,
        NVLINK_ALPHA,
        "no published busbw found for 8 V100s: central 67 % of peak, the fraction measured on A100 NVLink; "
        f"band {NVLINK_RANGE[0]:.0%}-{NVLINK_RANGE[1]:.0%} of peak (assumption); p3's 8 GPUs form a hybrid "
        "cube-mesh, not a switch",
        "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s both ways per GPU (150 GB/s each way)", "2017",
    ),
    "NVLink 3 (A100 SXM)": Link(
        "NVLink 3 (A100 SXM)", 300e9, 200e9, NVLINK_RANGE[0] * 300e9, NVLINK_RANGE[1] * 300e9, NVLINK_ALPHA,
        "measured: nccl-tests all-reduce busbw about 200 GB/s on 8 A100 80 GB joined by NVLink (HPE Apollo "
        "6500); band "
        f"{NVLINK_RANGE[0]:.0%}-{NVLINK_RANGE[1]:.0%} of peak (assumption)",
        "github.com/NVIDIA/nccl-tests/issues/149 (2023-06-27); A100 datasheet: NVLink 600 GB/s both ways",
        "2023-06-27",
    ),
    "NVLink 4 (H100 SXM)": Link(
        "NVLink 4 (H100 SXM)", 450e9, 370e9, NVLINK_RANGE[0] * 450e9, 480e9, NVLINK_ALPHA,
        "stated by an NCCL maintainer, not a posted run: a ring reaches 370 GB/s busbw over H100 SXMs' "
        "NVLink 4 (450 GB/s line rate less about 20 % protocol overhead); about 480 GB/s peak with NVLink "
        f"SHARP on 8 GPUs (the band's top); band's bottom {NVLINK_RANGE[0]:.0%} of peak (assumption)",
        "github.com/NVIDIA/nccl-tests/issues/212 (answer by sjeaugey, 2024-05-06); H100 datasheet: NVLink "
        "900 GB/s both ways per GPU", "2024-05-06",
    ),
    "NVLink 4 (H200 SXM)": Link(
        "NVLink 4 (H200 SXM)", 450e9, 370e9, NVLINK_RANGE[0] * 450e9, 480e9, NVLINK_ALPHA,
        "the H100 SXM's NVLink 4 figures (the same 900 GB/s NVLink and NVSwitch baseboard), band as for the "
        "H100; 8 H200s posted a peak all-reduce busbw of 475 GB/s with NVLink SHARP, at the band's top",
        "NVIDIA H200 datasheet (July 2024): NVLink 900 GB/s both ways per GPU; "
        "github.com/NVIDIA/nccl-tests/issues/212 (2024-05-06) for the H100's busbw; "
        "github.com/NVIDIA/nccl-tests/issues/272 (2024-11-27) for 8 H200s", "2024-11-27",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """One value of every uncertain input: one point of a prediction's band.

    ``link`` is "low", "central" or "high" on each link's busbw range; ``measured`` picks the line through
    the fastest, median or slowest measured steps where a GPU was measured (``costmodel.recommend``).
    """

    matmul: float = COMPUTE_EFFICIENCY["matmul"].central
    conv: float = COMPUTE_EFFICIENCY["conv"].central
    memory: float = MEMORY_EFFICIENCY.central
    op_seconds: float = OP_OVERHEAD.central
    link: str = "central"
    measured: str = "central"
    shard: float = SHARD_EFFICIENCY.central

    def at_shard(self) -> Scenario:
        """The scenario a k-GPU shard computes in: its products and convolutions at ``shard`` times this
        scenario's efficiencies (the one-GPU step keeps them)."""
        return replace(self, matmul=self.matmul * self.shard, conv=self.conv * self.shard, shard=1.0)


CENTRAL = Scenario()
# Each uncertain input: the Scenario field it sets, its low and high values, and what measures it.
# Plain text, no Markdown: these reach tables, where backticks would show.
GPU_CHECK = '"make gpu-check", which times a step of almost nothing but per-op time (LinearNet at batch 8)'
SWEEP = 'the gpu profile\'s single-GPU sweep (chapter 1, "make study PROFILE=gpu")'
INPUTS = {
    "matrix-product efficiency": ("matmul", COMPUTE_EFFICIENCY["matmul"].low,
                                  COMPUTE_EFFICIENCY["matmul"].high, SWEEP),
    "convolution efficiency": ("conv", COMPUTE_EFFICIENCY["conv"].low, COMPUTE_EFFICIENCY["conv"].high,
                               SWEEP),
    "memory-bandwidth fraction": ("memory", MEMORY_EFFICIENCY.low, MEMORY_EFFICIENCY.high, SWEEP),
    "per-op host overhead": ("op_seconds", OP_OVERHEAD.low, OP_OVERHEAD.high, GPU_CHECK),
    "efficiency at the smaller per-GPU batch": ("shard", SHARD_EFFICIENCY.low, SHARD_EFFICIENCY.high, SWEEP),
    "achieved link bandwidth": ("link", "low", "high",
                                "chapter 4's all-reduce benchmark on the rented machine "
                                '("make study PROFILE=gpu")'),
    "spread of the measured steps": ("measured", "low", "high", "more timed steps (the gpu profile)"),
}  # fmt: skip
ROOFLINE_INPUTS = tuple(name for name in INPUTS if name != "spread of the measured steps")
# one GPU's step: everything but what only a k-GPU shard has
SINGLE_GPU_INPUTS = tuple(name for name in ROOFLINE_INPUTS if INPUTS[name][0] != "shard")
MEASURED_INPUTS = ("spread of the measured steps", "per-op host overhead", "achieved link bandwidth")


CORNER = "corner: "  # a corner scenario's label: "corner: <input> low; <input> high; …"


def scenarios(inputs=ROOFLINE_INPUTS) -> list[tuple[str, Scenario]]:
    """(label, scenario) pairs spanning ``inputs``: the central values, each input alone at its low and
    high end (labelled "<input>: low/high", for naming what a verdict depends on), and every corner
    (labelled "corner: <input> low; <input> high; …", for naming the inputs a crossing needs together)."""
    found = [("central", CENTRAL)]
    for name in inputs:
        field, low, high, _ = INPUTS[name]
        found += [(f"{name}: low", replace(CENTRAL, **{field: low})),
                  (f"{name}: high", replace(CENTRAL, **{field: high}))]  # fmt: skip
    ends = [(INPUTS[name][0], INPUTS[name][1:3]) for name in inputs]
    for sides in itertools.product(("low", "high"), repeat=len(ends)):
        values = {field: pair[side == "high"] for (field, pair), side in zip(ends, sides, strict=True)}
        label = "; ".join(f"{name} {side}" for name, side in zip(inputs, sides, strict=True))
        found.append((f"{CORNER}{label}", replace(CENTRAL, **values)))
    return found


def input_origin(name: str) -> str:
    """Whether the input ``assumptions_table`` names ``name`` was measured (and on which machine) or is
    "assumed" (every other: an assumption, a datasheet or a link's quoted figures)."""
    return next((r.origin for r in RANGES if r.name == name), "assumed")


def assumptions_table() -> pd.DataFrame:
    """Every figure the GPU predictions rest on, with its source and date: the uncertain inputs with
    their ranges, each GPU's datasheet peaks and each link's bandwidths and latency."""
    rows = [
        {"input": r.name, "low": r.low, "central": r.central, "high": r.high, "unit": r.unit,
         "source": r.source, "date": r.date}
        for r in RANGES
    ]  # fmt: skip
    for gpu in GPUS.values():
        rows.append({"input": f"{gpu.name}: FP32 peak (TFLOP/s); memory (GB/s)", "low": None,
                     "central": f"{gpu.fp32_flops / 1e12:.1f}; {gpu.memory_bandwidth / 1e9:,.0f}",
                     "high": None,
                     "unit": "", "source": gpu.source, "date": gpu.date})  # fmt: skip
    for link in LINKS.values():
        peak = link.peak_bytes_per_second / 1e9
        rows.append({"input": f"{link.name}: all-reduce busbw (GB/s); peak {peak:.1f} "
                              f"GB/s, α {link.alpha_seconds * 1e6:.1f} µs",
                     "low": round(link.bus_bandwidth_low / 1e9, 1),
                     "central": round(link.bus_bandwidth / 1e9, 1),
                     "high": round(link.bus_bandwidth_high / 1e9, 1), "unit": "GB/s",
                     "source": f"{link.basis}. {link.source}", "date": link.date})  # fmt: skip
    return pd.DataFrame(rows)
