"""What machine a number came from: the hardware fingerprint behind every record (chapter 1).

The fingerprint names the CPU and its usable cores, memory, each GPU with its memory, the GPU topology
(``nvidia-smi topo -m``) where there is one, and the driver, CUDA, NCCL, torch and Python versions.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess

import pandas as pd
import torch

# nvidia-smi topo -m's legend: how the path between two GPUs runs, from the closest to the farthest
TOPOLOGY_LEGEND = {
    "NV#": "a bonded set of # NVLinks",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges, without the PCIe host bridge",
    "PHB": "PCIe and a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between PCIe host bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (e.g. QPI/UPI)",
}
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _run(command: list[str]) -> str | None:
    """A command's stripped stdout, or None when it is missing or fails."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bf16_units(device: str = "cpu") -> str:
    """Whether ``device`` computes bfloat16 natively: GPUs from compute capability 8.0 (tensor cores),
    CPUs with AVX512-BF16 or AMX; elsewhere bf16 arithmetic is converted to float32 and back."""
    if str(device).startswith("cuda"):
        major, _ = torch.cuda.get_device_capability(torch.device(device))
        return "this GPU has bf16 tensor cores" if major >= 8 else "this GPU has no bf16 tensor cores"
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as cpuinfo:
            flags = {flag for line in cpuinfo if line.startswith("flags") for flag in line.split()[2:]}
    native = bool(flags & {"avx512_bf16", "amx_bf16"})
    return (
        "this CPU has bf16 units (AVX512-BF16 or AMX)"
        if native
        else ("this CPU has no bf16 units, so bf16 is converted to float32 and back around each operation")
    )


def memory_bytes() -> int | None:
    """Total physical memory in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's total)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def nccl_version() -> str | None:
    """NCCL version bundled with torch, when the build has one."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # CPU-only builds have no NCCL
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def fingerprint() -> dict:
    """The hardware and software that measurements depend on (no dates, no host names).

    ``cuda`` and ``nccl`` are the versions torch was built with; ``driver`` is read only where GPUs exist.
    """
    gpus = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            properties = torch.cuda.get_device_properties(index)
            gpus.append(
                {
                    "index": index,
                    "name": properties.name,
                    "memory_bytes": properties.total_memory,
                    "compute_capability": f"{properties.major}.{properties.minor}",
                }
            )
    driver = None
    topology = None
    if gpus:
        driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        driver = driver.splitlines()[0] if driver else None
        topology = _run(["nvidia-smi", "topo", "-m"])
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "memory_bytes": memory_bytes(),
        "gpus": gpus,
        "gpu_topology": topology,
        "driver": driver,
        "cuda": torch.version.cuda,
        "nccl": nccl_version(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def describe(info: dict | None = None) -> str:
    """One line naming the hardware, for figure titles and chapter banners."""
    info = info or fingerprint()
    cpu = f"{info['usable_cores']}-core {info['cpu_model']}"
    if not info["gpus"]:
        return f"{cpu}, no GPU"
    names = {}
    for gpu in info["gpus"]:
        label = f"{gpu['name']} ({gpu['memory_bytes'] / 2**30:.0f} GiB)"
        names[label] = names.get(label, 0) + 1
    gpus = ", ".join(f"{count}x {label}" for label, count in names.items())
    return f"{gpus}; {cpu}"


def peer_access() -> list[dict]:
    """Which GPU pairs can read each other's memory directly (peer to peer); [] without two GPUs."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [
        {"from": a, "to": b, "peer_access": torch.cuda.can_device_access_peer(a, b)}
        for a in range(count)
        for b in range(count)
        if a != b
    ]


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
    return pd.DataFrame(pairs, columns=["gpu_a", "gpu_b", "link", "nvlinks", "meaning"])


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
