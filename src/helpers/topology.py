"""How the GPUs of a machine are linked, from ``nvidia-smi topo -m`` (chapters 2 and 4, the provenance page).

A ring all-reduce runs at the speed of its slowest link, so the book names the links between the GPUs a
run used: every pair's path (NVLink, a PCIe bridge, the CPU's host bridge, another NUMA node), restricted
to the GPUs torch saw under ``CUDA_VISIBLE_DEVICES`` and numbered as torch numbers them.
"""

from __future__ import annotations

import re

import pandas as pd

from helpers.hardware import ANSI_ESCAPE, visible_indices

# nvidia-smi topo -m's legend: how the path between two GPUs runs, from the closest to the farthest
TOPOLOGY_LEGEND = {
    "NV#": "a bonded set of # NVLinks",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges, without the PCIe host bridge",
    "PHB": "PCIe and a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between PCIe host bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (e.g. QPI/UPI)",
}


TOPOLOGY_COLUMNS = ["gpu_a", "gpu_b", "link", "nvlinks", "meaning"]


def parse_topology(text: str) -> pd.DataFrame:
    """Every GPU pair (a < b) of an ``nvidia-smi topo -m`` matrix: its link code, NVLink count, meaning.

    The GPU columns are the header's leading ``GPU<n>`` names; each ``GPU<n>`` row's first cells are its
    links to them (``X`` for itself). Tabs or spaces both separate cells; terminal colour codes are
    dropped. A matrix without GPU rows, or with a code outside the legend, is refused.
    """
    lines = [ANSI_ESCAPE.sub("", line).split() for line in text.splitlines()]
    start = next((index for index, cells in enumerate(lines) if "GPU0" in cells), None)
    if start is None:
        raise ValueError("not an nvidia-smi topo -m matrix: no header naming GPU0")
    gpus = [name for name in lines[start] if re.fullmatch(r"GPU\d+", name)]
    rows = {
        int(cells[0][3:]): cells[1 : 1 + len(gpus)]
        for cells in lines[start + 1 :]
        if cells[:1] and cells[0] in gpus
    }
    if len(rows) != len(gpus):
        raise ValueError(f"the matrix names {len(gpus)} GPUs in its header but has {len(rows)} GPU rows")
    pairs = []
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            code = rows[a][b]
            nvlinks = int(code[2:]) if re.fullmatch(r"NV\d+", code) else 0
            key = "NV#" if nvlinks else code
            if key not in TOPOLOGY_LEGEND:
                raise ValueError(f"unknown link {code!r} between GPU{a} and GPU{b}")
            meaning = TOPOLOGY_LEGEND[key].replace("#", str(nvlinks))
            pairs.append({"gpu_a": a, "gpu_b": b, "link": code, "nvlinks": nvlinks, "meaning": meaning})
    return pd.DataFrame(pairs, columns=TOPOLOGY_COLUMNS)


def describe_topology(pairs: pd.DataFrame) -> str:
    """One sentence on a parsed matrix: how every pair is linked, and the farthest path a ring must cross."""
    if pairs.empty:
        return "one GPU: no path between GPUs"
    links = pairs["link"].value_counts()
    order = [key for key in TOPOLOGY_LEGEND if key != "NV#"]
    farthest = max(pairs["link"], key=lambda code: -1 if code.startswith("NV") else order.index(code))
    gpus = pairs["gpu_b"].max() + 1
    if len(links) == 1:
        return f"{gpus} GPUs, every pair {farthest}: {pairs['meaning'].iloc[0]}"
    counted = ", ".join(f"{count} pair(s) {code}" for code, count in links.items())
    meaning = pairs.loc[pairs["link"] == farthest, "meaning"].iloc[0]
    return f"{gpus} GPUs: {counted}; the farthest pairs are {farthest}: {meaning}"


def visible_topology(text: str, visible: str | None = None) -> pd.DataFrame:
    """``parse_topology``'s pairs restricted to the GPUs torch sees and numbered as torch numbers them.

    ``nvidia-smi topo -m`` lists every GPU of the machine in PCI order; torch sees those ``visible`` names
    (a ``CUDA_VISIBLE_DEVICES`` value; None: the environment's; see ``visible_indices``), renumbered
    0..n-1 in that order. ``gpu_a`` < ``gpu_b`` are torch's numbers; ``nvidia_smi_a`` and ``nvidia_smi_b``
    keep the matrix's numbers of the same two GPUs.
    """
    pairs = parse_topology(text)
    count = int(pairs["gpu_b"].max()) + 1 if len(pairs) else 1
    order = {smi: number for number, smi in enumerate(visible_indices(count, visible, "the matrix"))}
    rows = []
    for pair in pairs.to_dict("records"):
        if pair["gpu_a"] in order and pair["gpu_b"] in order:
            a, b = sorted((pair["gpu_a"], pair["gpu_b"]), key=order.get)  # the GPU torch numbers first
            rows.append({**pair, "gpu_a": order[a], "gpu_b": order[b], "nvidia_smi_a": a, "nvidia_smi_b": b})
    columns = [*pairs.columns, "nvidia_smi_a", "nvidia_smi_b"]
    return pd.DataFrame(rows, columns=columns).sort_values(["gpu_a", "gpu_b"]).reset_index(drop=True)


def seen_topology(info: dict) -> pd.DataFrame:
    """The pairs of a fingerprint's ``gpu_topology`` between the GPUs its torch saw, in torch's numbers
    (``visible_topology`` under the recorded ``visible_gpu_indices``); every pair when none is recorded."""
    text = info.get("gpu_topology")
    if not text:
        return pd.DataFrame(columns=TOPOLOGY_COLUMNS)
    indices = info.get("visible_gpu_indices")
    if indices is None:
        return parse_topology(text)
    return visible_topology(text, ",".join(str(index) for index in indices))
