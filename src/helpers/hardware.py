"""What machine a number came from: the hardware fingerprint behind every record (chapter 1).

The fingerprint names the CPU and its usable cores, memory, each GPU with its memory, the GPU topology
(``nvidia-smi topo -m``) where there is one, and the driver, CUDA, NCCL, torch and Python versions.
What a rented machine must offer is checked here too: a driver new enough for torch's CUDA
(``cuda_problem``), the GPUs torch sees under ``CUDA_VISIBLE_DEVICES`` (``visible_indices``; their links:
``helpers.topology``), and compute modes that let ranks share a GPU (``sharing_refusal``).

A process that executes a chapter from another machine's records (``python -m helpers.study
--from-records ID``) works with that machine, not this one: ``RECORDS_OF`` names it, and the probes a
chapter asks (``gpu_count``, ``gpu_name``, ``usable_cores``, ``Machine.here``, ``peer_access``) answer from
its stored fingerprint, so that the chapter computes what it computed there and finds the records it
measured there. ``fingerprint`` always describes this machine.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from helpers.paths import results_dir

# The provenance id of the machine whose records this process reads instead of measuring (set by the study
# runner for a chapter executed --from-records; unset everywhere else).
RECORDS_OF = "STUDY_RECORDS_OF"

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

# What listed_gpus asks nvidia-smi for, in this order (`nvidia-smi --help-query-gpu` names the fields)
GPU_QUERY = ("index", "name", "memory.total", "compute_mode", "driver_version", "pci.bus_id", "uuid")

# The oldest Linux x86_64 driver that runs code built with CUDA <major>.x, by CUDA minor-version compatibility
# (a toolkit's own driver may be newer: CUDA 13.0 GA ships with 580.65.06, 12.8 GA with 570.26; any driver of
# the major's family runs its wheels). Read on 2026-11-24 in NVIDIA's "CUDA Compatibility", Minor Version
# Compatibility, table 1 (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html:
# CUDA 13.x >= 580, CUDA 12.x >= 525, CUDA 11.x >= 450) and the CUDA Toolkit release notes' table "CUDA
# Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility"
# (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html: CUDA 12.x >= 525.60.13).
MINIMUM_DRIVER = {12: "525.60.13", 13: "580"}

# Compute modes under which two processes cannot both hold a CUDA context on one GPU (nvidia-smi(1), "Compute
# Mode": "Default" allows several contexts per device, "Exclusive Process" one, "Prohibited" none;
# Exclusive_Thread is the deprecated pre-CUDA-4.0 exclusive mode).
SHARING_FORBIDDEN = {
    "Exclusive_Process": "only one process may hold a CUDA context on it, so the second rank fails with "
    "'CUDA-capable device(s) is/are busy or unavailable'",
    "Exclusive_Thread": "only one thread of one process may hold a CUDA context on it",
    "Prohibited": "no process may create a CUDA context on it",
}


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
    CPUs with AVX512-BF16 or AMX; elsewhere bf16 kernels work through float32, some cheaply, some not.
    On the recorded machine (``RECORDS_OF``): its GPUs' capability; its CPU's flags only where it is this
    processor (the fingerprint does not keep them)."""
    recorded = machine_of_records()
    if str(device).startswith("cuda"):
        index = torch.device(device).index or 0
        if recorded:
            major = int(recorded["gpus"][index]["compute_capability"].split(".")[0])
        else:
            major, _ = torch.cuda.get_device_capability(torch.device(device))
        return "this GPU has bf16 tensor cores" if major >= 8 else "this GPU has no bf16 tensor cores"
    if recorded and recorded["cpu_model"] != cpu_model():
        return f"whether the recorded machine's CPU ({recorded['cpu_model']}) has bf16 units was not recorded"
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as cpuinfo:
            flags = {flag for line in cpuinfo if line.startswith("flags") for flag in line.split()[2:]}
    found = [name for flag, name in (("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX")) if flag in flags]
    if found:
        return f"this CPU has bf16 units ({' and '.join(found)})"
    return (
        "this CPU has no bf16 units: its kernels reach bf16 through float32, at a cost that depends on the "
        "operator"
    )


def memory_bytes() -> int | None:
    """Total physical memory in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def affinity_cores() -> int:
    """Cores this process may run on here (the affinity mask, not the machine's total)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@functools.cache
def stored_fingerprint(identifier: str) -> dict:
    """The fingerprint stored under a provenance id in any run of ``data/results/`` (ValueError if none)."""
    for path in sorted(results_dir().glob(f"*/provenance/{identifier}.json")):
        return json.loads(path.read_text())["hardware"]
    raise ValueError(f"no machine {identifier!r} in {results_dir()}/*/provenance/")


def machine_of_records() -> dict | None:
    """The fingerprint of the machine whose records this process reads (``RECORDS_OF``), or None when it
    measures on this machine."""
    identifier = os.environ.get(RECORDS_OF)
    return stored_fingerprint(identifier) if identifier else None


def usable_cores() -> int:
    """Cores this process may run on: the affinity mask here, or the recorded machine's (``RECORDS_OF``)."""
    recorded = machine_of_records()
    return recorded["usable_cores"] if recorded else affinity_cores()


def gpu_count() -> int:
    """CUDA devices this process works with: torch's, or the recorded machine's (``RECORDS_OF``)."""
    recorded = machine_of_records()
    if recorded is not None:
        return len(recorded["gpus"])
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_name(index: int = 0) -> str:
    """The name the driver gives GPU ``index`` (torch's numbering), here or on the recorded machine."""
    recorded = machine_of_records()
    return recorded["gpus"][index]["name"] if recorded else torch.cuda.get_device_name(index)


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
    seen = {}
    if gpus:
        driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        driver = driver.splitlines()[0] if driver else None
        topology = _run(["nvidia-smi", "topo", "-m"])
        listed = listed_gpus()
        # the matrix rows torch used, in its order: the matrix alone lists every GPU of the machine
        seen = {"visible_gpu_indices": visible_indices(len(listed)) if listed else None}
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "usable_cores": affinity_cores(),
        "memory_bytes": memory_bytes(),
        "gpus": gpus,
        "gpu_topology": topology,
        **seen,
        "driver": driver,
        "cuda": torch.version.cuda,
        "nccl": nccl_version(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def describe(info: dict | None = None) -> str:
    """One line naming the hardware, for figure titles and chapter badges."""
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
    """Which GPU pairs can read each other's memory directly (peer to peer); [] without two GPUs. Not kept
    in a fingerprint: on a recorded machine with two GPUs or more, ValueError."""
    count = gpu_count()
    if count > 1 and machine_of_records() is not None:
        raise ValueError("peer access between the recorded machine's GPUs was not recorded")
    return [
        {"from": a, "to": b, "peer_access": torch.cuda.can_device_access_peer(a, b)}
        for a in range(count)
        for b in range(count)
        if a != b
    ]


def listed_gpus() -> list[dict]:
    """Every GPU ``nvidia-smi`` lists, in its order (PCI bus order, as ``nvidia-smi topo -m`` numbers them):
    index, name, memory in MiB, compute mode, driver version, PCI bus id and UUID; [] when nvidia-smi is
    missing or fails.

    nvidia-smi talks to the driver through NVML, not through CUDA, so it lists GPUs that torch cannot use
    (a driver too old for torch's CUDA): comparing the two is how ``cuda_problem`` finds that case.
    """
    return parse_gpu_list(_run(GPU_LIST_COMMAND.split()) or "")


GPU_LIST_COMMAND = f"nvidia-smi --query-gpu={','.join(GPU_QUERY)} --format=csv,noheader,nounits"


def parse_gpu_list(text: str) -> list[dict]:
    """The rows of ``GPU_LIST_COMMAND``'s output (``listed_gpus``), skipping what is not a row."""
    gpus = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < len(GPU_QUERY) or not cells[0].isdigit():
            continue  # not a row of the table ("No devices were found")
        index, *name, memory, mode, driver, bus_id, uuid = cells  # a name may hold a comma
        gpus.append(
            {
                "index": int(index),
                "name": ", ".join(name),
                "memory_mib": int(memory) if memory.isdigit() else None,
                "compute_mode": mode,
                "driver": driver,
                "pci_bus_id": bus_id,
                "uuid": uuid,
            }
        )
    return gpus


def _version(text: str) -> tuple[int, ...]:
    """A dotted driver version as numbers, so that 535.104.05 < 580 compares right."""
    return tuple(int(part) for part in re.findall(r"\d+", text))


def required_driver(cuda: str | None = None) -> str | None:
    """The oldest Linux driver that runs code built with CUDA ``cuda`` (default: the CUDA torch was built
    with, ``torch.version.cuda``), from ``MINIMUM_DRIVER``; None for a CPU-only torch or a major not in it."""
    cuda = torch.version.cuda if cuda is None else cuda
    if not cuda:
        return None
    return MINIMUM_DRIVER.get(_version(cuda)[0])


def _torch_cuda_reason(caught: list[warnings.WarningMessage]) -> str:
    """Why torch sees no GPU, in torch's own words, on one line.

    ``torch.cuda.is_available()`` reports a failed CUDA initialisation only as a warning, and only on the
    first call in a process (c10's ``device_count()`` keeps its result in a static); ``torch.cuda.init()``
    raises the same message as a RuntimeError on every call. So the RuntimeError is asked for first and the
    warnings ``caught`` around ``is_available`` are the fallback.
    """
    reasons = []
    try:
        torch.cuda.init()
    except Exception as error:  # RuntimeError from c10; AssertionError from a CPU-only build
        reasons.append(str(error))
    reasons += [str(warning.message) for warning in caught if "CUDA" in str(warning.message)]
    reasons = [" ".join(reason.split()) for reason in reasons]
    unique: list[str] = []
    for reason in reasons:  # the warning repeats init's message after "CUDA initialization: "
        if not any(reason in kept or kept in reason for kept in unique):
            unique.append(reason)
    return "; ".join(reason.rstrip(".") for reason in unique) or "torch gives no reason"


def cuda_problem() -> str | None:
    """One line saying why torch cannot use the GPUs nvidia-smi lists; None when torch sees GPUs, or when
    nvidia-smi lists none (a CPU machine: nothing is wrong).

    The line names how many GPUs nvidia-smi lists and the driver it reports, the torch version and the CUDA
    it was built for, torch's own reason, and the driver torch needs: the usual cause on a rented machine is
    a driver older than torch's CUDA needs (torch 2.11.0+cu130 needs 580 or newer; many machines run
    535-570), where torch would otherwise quietly fall back to the CPU.
    """
    if machine_of_records() is not None:  # the recorded machine's GPUs worked: its records say so
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if torch.cuda.is_available():
            return None
    gpus = listed_gpus()
    if not gpus:
        return None
    driver = gpus[0]["driver"]
    built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    line = (
        f"nvidia-smi lists {len(gpus)} GPU(s) with driver {driver}, but torch {torch.__version__} ({built}) "
        f"sees none: {_torch_cuda_reason(caught)}"
    )
    needed = required_driver()
    if needed is None:
        line += "; install a CUDA build of torch (make setup)"
    elif _version(driver) < _version(needed):
        line += f"; torch {torch.__version__} needs NVIDIA driver >= {needed}, this machine has {driver}"
    else:
        line += f"; the driver {driver} is new enough (torch {torch.__version__} needs >= {needed})"
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        line += f"; CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}"
    return line


def visible_indices(count: int, visible: str | None = None, source: str = "nvidia-smi") -> list[int]:
    """nvidia-smi's indices of the GPUs torch sees, in torch's order (torch's ``cuda:i`` is the i-th).

    ``visible`` is a ``CUDA_VISIBLE_DEVICES`` value (None: read the environment; unset there: all ``count``
    GPUs). Its integers are nvidia-smi's indices because ``helpers`` sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``;
    ``GPU-`` UUIDs or unique UUID prefixes are mapped through ``listed_gpus()``. As CUDA does, a negative
    integer ends the list. What CUDA would silently drop or reorder is refused with a ValueError: an index
    ``source`` does not have, a UUID that matches no GPU or several, a repeated GPU, a MIG instance.
    """
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    indices: list[int] = []
    for entry in (entry.strip() for entry in visible.split(",") if entry.strip()):
        if entry.startswith("GPU-"):
            matches = [gpu["index"] for gpu in listed_gpus() if gpu["uuid"].startswith(entry)]
            if len(matches) != 1:
                found = f"{len(matches)} GPUs" if matches else "no GPU"
                raise ValueError(f"CUDA_VISIBLE_DEVICES={visible!r}: {entry} matches {found} of nvidia-smi's")
            index = matches[0]
        elif re.fullmatch(r"[+-]?\d+", entry):
            index = int(entry)
            if index < 0:
                break
        else:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={visible!r}: {entry!r} is neither a GPU index nor a GPU- UUID "
                "(MIG instances are not supported)"
            )
        if index >= count:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={visible!r} names GPU {index}, which {source} does not have "
                f"(it has {count} GPU(s), 0-{count - 1})"
            )
        if index in indices:
            raise ValueError(f"CUDA_VISIBLE_DEVICES={visible!r} names GPU {index} twice")
        indices.append(index)
    return indices


def _visible_listed() -> list[dict]:
    """``listed_gpus()`` of the GPUs torch sees, in torch's order ([] without nvidia-smi)."""
    gpus = {gpu["index"]: gpu for gpu in listed_gpus()}
    if not gpus:
        return []
    return [gpus[index] for index in visible_indices(max(gpus) + 1) if index in gpus]


def compute_modes() -> dict[int, str]:
    """Each GPU's compute mode as nvidia-smi reports it ("Default", "Exclusive_Process", "Prohibited"), keyed
    by torch's number of the GPU; {} without nvidia-smi."""
    return {torch_index: gpu["compute_mode"] for torch_index, gpu in enumerate(_visible_listed())}


def sharing_refusal(gpus_shared: list[int]) -> str | None:
    """One line refusing a launch whose ranks share the GPUs ``gpus_shared`` (torch's numbers) when any of
    them is in a compute mode that allows fewer than two processes on it; None when all allow it (or
    nvidia-smi is missing: then the launch itself says what fails).

    Gloo ranks sharing a GPU each open their own CUDA context on it: under Exclusive_Process the second
    rank's first CUDA call fails, under Prohibited the first one's does. The line names the GPU (torch's
    and nvidia-smi's number), its mode, why, and the command that makes it shareable again.
    """
    visible = _visible_listed()
    problems, commands = [], []
    for torch_index in sorted(set(gpus_shared)):
        if torch_index >= len(visible):
            continue
        gpu = visible[torch_index]
        why = SHARING_FORBIDDEN.get(gpu["compute_mode"])
        if why:
            smi, mode = gpu["index"], gpu["compute_mode"]
            problems.append(f"GPU {torch_index} (nvidia-smi GPU {smi}) is in compute mode {mode}: {why}")
            commands.append(f"sudo nvidia-smi -i {smi} -c DEFAULT")
    if not problems:
        return None
    return (
        f"the study's processes cannot share a GPU here (ranks sharing one, or a rank beside the notebook or "
        f"gpu-check that already uses it): {'; '.join(problems)}; make it shareable with "
        f"`{' && '.join(commands)}`"
    )


@dataclass(frozen=True)
class Machine:
    """The GPUs and cores that launches are placed on: this machine (``here``), or one described for a
    plan (``described``, ``from_gpu_list``), so that a profile is checked before a GPU is rented.

    ``compute_modes`` are per GPU in torch's numbering; ``gpu_memory_bytes`` is the smallest GPU's.
    """

    gpus: int
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    compute_modes: tuple[str, ...] = ()
    cores: int = 1
    described: bool = False

    @classmethod
    def here(cls) -> Machine:
        """This machine as torch and nvidia-smi see it; the recorded machine (``RECORDS_OF``) as its
        fingerprint describes it."""
        if (recorded := machine_of_records()) is not None:
            return cls.from_fingerprint(recorded)
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        properties = [torch.cuda.get_device_properties(index) for index in range(count)]
        modes = compute_modes() if count else {}
        return cls(
            gpus=count,
            gpu_name=properties[0].name if properties else None,
            gpu_memory_bytes=min(p.total_memory for p in properties) if properties else None,
            compute_modes=tuple(modes.get(index, "Default") for index in range(count)),
            cores=affinity_cores(),
        )

    @classmethod
    def from_fingerprint(cls, hardware: dict) -> Machine:
        """The machine a stored fingerprint describes (its GPUs ran, so their compute modes let it)."""
        gpus = hardware["gpus"]
        return cls(len(gpus), gpus[0]["name"] if gpus else None,
                   min(g["memory_bytes"] for g in gpus) if gpus else None, ("Default",) * len(gpus),
                   hardware["usable_cores"], described=True)  # fmt: skip

    @classmethod
    def described_as(
        cls, gpus: int, gpu_name: str, memory_gib: float | None = None, cores: int = 16
    ) -> Machine:
        """``gpus`` GPUs named ``gpu_name`` as the driver names them ("NVIDIA A100-SXM4-40GB"); their memory
        is ``memory_gib`` or, when omitted, read from a "<n>GB" in the name (ValueError when neither)."""
        if not isinstance(gpus, int) or gpus < 0:
            raise ValueError(f"gpus must be a whole number >= 0, not {gpus!r}")
        if memory_gib is None:
            found = re.search(r"(\d+)\s*GB", gpu_name, re.IGNORECASE)
            if not found:
                raise ValueError(f"no memory size in the GPU name {gpu_name!r}: give it (--gpu-memory-gib)")
            memory_gib = float(found[1])
        return cls(gpus, gpu_name, int(memory_gib * 2**30), ("Default",) * gpus, cores, described=True)

    @classmethod
    def from_gpu_list(cls, text: str, cores: int = 16) -> Machine:
        """A machine from a recorded ``GPU_LIST_COMMAND`` output (``nvidia-smi --query-gpu=...``)."""
        gpus = parse_gpu_list(text)
        if not gpus:
            raise ValueError(f"no GPU in the recorded list; record it with: {GPU_LIST_COMMAND}")
        sizes = [gpu["memory_mib"] * 2**20 for gpu in gpus if gpu["memory_mib"]]
        return cls(len(gpus), gpus[0]["name"], min(sizes) if sizes else None,
                   tuple(gpu["compute_mode"] for gpu in gpus), cores, described=True)  # fmt: skip

    def sharing_refusal(self, gpus_used: list[int]) -> str | None:
        """``sharing_refusal`` of these GPUs: this machine's from nvidia-smi, a described one's from its
        modes."""
        if not self.described:
            return sharing_refusal(gpus_used)
        modes = dict(enumerate(self.compute_modes))
        bad = [
            (index, modes[index]) for index in sorted(set(gpus_used)) if modes.get(index) in SHARING_FORBIDDEN
        ]
        if not bad:
            return None
        named = "; ".join(
            f"GPU {index} is in compute mode {mode}: {SHARING_FORBIDDEN[mode]}" for index, mode in bad
        )
        return (
            f"the study's processes cannot share a GPU here: {named}; set it shareable: nvidia-smi -c DEFAULT"
        )

    def describe(self) -> str:
        """One line: "4x NVIDIA A100-SXM4-40GB (40 GiB), 16 cores (described)"."""
        gpus = (
            f"{self.gpus}x {self.gpu_name} ({self.gpu_memory_bytes / 2**30:.0f} GiB)"
            if self.gpus
            else "no GPU"
        )
        return f"{gpus}, {self.cores} cores" + (" (described)" if self.described else "")


def add_machine_arguments(parser, gpus: bool = True) -> None:
    """The options that describe the machine a plan is for (``--plan`` of the study and of gpu-check);
    ``gpus`` False where the parser has its own ``--gpus``, which then counts the described GPUs."""
    group = parser.add_argument_group("a described machine (with --plan; default: this machine)")
    if gpus:
        group.add_argument("--gpus", type=int, help="GPUs of the described machine (with --gpu-name)")
    group.add_argument("--gpu-name", help='as the driver names it, e.g. "NVIDIA A100-SXM4-40GB"')
    group.add_argument("--gpu-memory-gib", type=float, help="memory per GPU (default: read from the name)")
    group.add_argument("--cores", type=int, default=16, help="CPU cores of the described machine (16)")
    group.add_argument("--gpu-list", type=Path, help=f"a recorded `{GPU_LIST_COMMAND}` output instead")


def machine_from_arguments(args) -> Machine:
    """The machine ``add_machine_arguments``' options describe; this machine when they describe none."""
    if args.gpu_list is not None:
        return Machine.from_gpu_list(args.gpu_list.read_text(), cores=args.cores)
    if args.gpu_name is not None:
        if args.gpus is None:
            raise ValueError("--gpu-name needs --gpus: how many of them the machine has")
        return Machine.described_as(args.gpus, args.gpu_name, args.gpu_memory_gib, args.cores)
    if args.gpu_memory_gib is not None:
        raise ValueError("--gpu-memory-gib describes a GPU: give --gpus and --gpu-name with it")
    return Machine.here()


def busy_warning(threshold: float = 0.5) -> str | None:
    """One line when the 1-minute load average says other work runs here (above ``threshold`` per usable
    core): timings measured now would be disturbed by it. None on a quiet machine or where the load
    average is unknown."""
    if not hasattr(os, "getloadavg"):
        return None
    load, cores = os.getloadavg()[0], affinity_cores()
    if load <= threshold * cores:
        return None
    return (
        f"warning: this machine is busy (1-minute load average {load:.1f} on {cores} cores): timings "
        "measured now are slowed by the other work; every record keeps the load it was measured under"
    )
