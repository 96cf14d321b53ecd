"""helpers.hardware: the fingerprint names what measurements depend on."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from helpers import hardware


def test_fingerprint_names_cpu_gpus_and_versions():
    info = hardware.fingerprint()
    assert info["usable_cores"] >= 1 and info["cpu_model"]
    assert info["torch"] == torch.__version__
    assert len(info["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_the_fingerprint_of_a_gpu_machine_names_each_gpu_its_driver_and_links(monkeypatch):
    """The GPU branch, with two faked GPUs and a faked nvidia-smi: what a record from a GPU machine holds."""
    properties = {"name": "NVIDIA H100 80GB HBM3", "total_memory": 85_520_809_984, "major": 9, "minor": 0}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), properties))
    listed = "\n".join(
        f"{i}, NVIDIA H100 80GB HBM3, 81559, Default, 580.82.07, 00000000:{i + 24:02X}:00.0, GPU-{i}a"
        for i in range(4)
    )
    answers = {"--query-gpu=driver_version": "580.82.07\n580.82.07", "topo": "GPU0\tX\tNV18",
               hardware.GPU_LIST_COMMAND.split()[1]: listed}  # fmt: skip
    monkeypatch.setattr(hardware, "_run", lambda command: answers[command[1]])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")  # two of the machine's four GPUs, in this order
    info = hardware.fingerprint()
    assert info["visible_gpu_indices"] == [3, 1]  # what the whole machine's matrix is read through
    assert [gpu["index"] for gpu in info["gpus"]] == [0, 1]
    assert info["gpus"][1] == {"index": 1, "name": "NVIDIA H100 80GB HBM3",
                               "memory_bytes": 85_520_809_984, "compute_capability": "9.0"}  # fmt: skip
    assert info["driver"] == "580.82.07" and info["gpu_topology"] == "GPU0\tX\tNV18"
    assert hardware.describe(info).startswith("2x NVIDIA H100 80GB HBM3 (80 GiB); ")


def test_describe_names_gpus_or_their_absence():
    cpu_only = {"usable_cores": 2, "cpu_model": "Xeon", "gpus": []}
    assert hardware.describe(cpu_only) == "2-core Xeon, no GPU"
    gpu = {"name": "NVIDIA H200", "memory_bytes": 150 * 2**30}
    two = {**cpu_only, "gpus": [gpu, gpu]}
    assert hardware.describe(two) == "2x NVIDIA H200 (150 GiB); 2-core Xeon"


RECORDED = Path(__file__).parent / "data"


# What `nvidia-smi --query-gpu=index,name,memory.total,compute_mode,driver_version,pci.bus_id,uuid
# --format=csv,noheader,nounits` prints on a machine with four GPUs and the 535 driver: faked after the
# format of nvidia-smi's CSV output (UUIDs and bus ids invented), not recorded.
FOUR_GPUS_535 = "\n".join(
    f"{index}, NVIDIA A100-SXM4-80GB, 81920, {mode}, 535.104.05, 00000000:{bus}:00.0, GPU-{uuid}"
    for index, (mode, bus, uuid) in enumerate(
        [
            ("Default", "07", "1a2b3c4d-0000-1111-2222-333344445555"),
            ("Default", "0F", "5e6f7a8b-0000-1111-2222-333344445555"),
            ("Exclusive_Process", "47", "9c0d1e2f-0000-1111-2222-333344445555"),
            ("Prohibited", "4E", "9c0d1e3a-0000-1111-2222-333344445555"),
        ]
    )
)
# torch's reason, as c10/cuda/CUDAFunctions.cpp words it for a driver that supports only CUDA 12.2
TOO_OLD = (
    "The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
    "version of the CUDA driver."
)


def fake_nvidia_smi(monkeypatch, output: str | None):
    """hardware._run answering the GPU query with ``output`` (None: nvidia-smi missing) and nothing else."""

    def run(command):
        assert command == [
            "nvidia-smi",
            "--query-gpu=index,name,memory.total,compute_mode,driver_version,pci.bus_id,uuid",
            "--format=csv,noheader,nounits",
        ]
        return output

    monkeypatch.setattr(hardware, "_run", run)


def fake_torch_without_gpus(monkeypatch, warn: bool, init_raises: bool = True):
    """torch 2.11.0+cu130 on a driver too old for it: is_available() is False and warns only when ``warn``
    (torch warns on a process's first call only); init() raises torch's RuntimeError when ``init_raises``."""

    def is_available():
        if warn:
            warnings.warn(f"CUDA initialization: {TOO_OLD}", UserWarning, stacklevel=2)
        return False

    def init():
        if init_raises:
            raise RuntimeError(TOO_OLD)

    monkeypatch.setattr(torch.cuda, "is_available", is_available)
    monkeypatch.setattr(torch.cuda, "init", init)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_listed_gpus_reads_nvidia_smi_on_the_path(tmp_path, monkeypatch):
    script = tmp_path / "nvidia-smi"
    expected = "--query-gpu=index,name,memory.total,compute_mode,driver_version,pci.bus_id,uuid"
    script.write_text(
        f'#!/bin/sh\n[ "$1" = "{expected}" ] && [ "$2" = "--format=csv,noheader,nounits" ] || exit 9\n'
        f"cat <<'END'\n{FOUR_GPUS_535}\nEND\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    gpus = hardware.listed_gpus()
    assert [gpu["index"] for gpu in gpus] == [0, 1, 2, 3]
    assert gpus[2] == {
        "index": 2,
        "name": "NVIDIA A100-SXM4-80GB",
        "memory_mib": 81920,
        "compute_mode": "Exclusive_Process",
        "driver": "535.104.05",
        "pci_bus_id": "00000000:47:00.0",
        "uuid": "GPU-9c0d1e2f-0000-1111-2222-333344445555",
    }


def test_listed_gpus_is_empty_without_nvidia_smi_or_devices(monkeypatch):
    fake_nvidia_smi(monkeypatch, None)
    assert hardware.listed_gpus() == []
    fake_nvidia_smi(monkeypatch, "No devices were found")
    assert hardware.listed_gpus() == []


def test_required_driver_follows_nvidias_minor_version_table():
    assert hardware.required_driver("13.0") == "580"
    assert hardware.required_driver("12.8") == "525.60.13"
    assert hardware.required_driver("") is None  # a CPU-only torch
    assert hardware.required_driver("99.0") is None


@pytest.mark.parametrize(("warn", "init_raises"), [(True, True), (False, True), (True, False)])
def test_cuda_problem_names_gpus_driver_reason_and_the_driver_torch_needs(monkeypatch, warn, init_raises):
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    fake_torch_without_gpus(monkeypatch, warn, init_raises)
    line = hardware.cuda_problem()
    assert "\n" not in line
    assert line.startswith("nvidia-smi lists 4 GPU(s) with driver 535.104.05, but torch 2.11.0+cu130 ")
    assert "(built for CUDA 13.0) sees none: " in line
    assert "The NVIDIA driver on your system is too old (found version 12020). Please update" in line
    assert line.count("too old") == 1  # the warning repeats init's message: said once
    assert line.endswith("; torch 2.11.0+cu130 needs NVIDIA driver >= 580, this machine has 535.104.05")


def test_cuda_problem_names_cuda_visible_devices_when_it_hides_the_gpus(monkeypatch):
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535.replace("535.104.05", "580.95.05"))
    fake_torch_without_gpus(monkeypatch, warn=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    line = hardware.cuda_problem()
    assert "the driver 580.95.05 is new enough (torch 2.11.0+cu130 needs >= 580)" in line
    assert line.endswith("; CUDA_VISIBLE_DEVICES=''")


def test_no_cuda_problem_without_nvidia_smi_or_when_torch_sees_gpus(monkeypatch):
    fake_torch_without_gpus(monkeypatch, warn=True)
    fake_nvidia_smi(monkeypatch, None)
    assert hardware.cuda_problem() is None  # a CPU machine: nothing is wrong
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert hardware.cuda_problem() is None


def test_no_cuda_problem_on_this_machine_as_it_is():
    # unfaked: a CPU machine without nvidia-smi, or a GPU machine whose GPUs torch sees
    assert hardware.cuda_problem() is None


def test_importing_helpers_orders_cuda_devices_as_nvidia_smi_does():
    for inherited in (None, "FASTEST_FIRST"):
        env = {key: value for key, value in os.environ.items() if key != "CUDA_DEVICE_ORDER"}
        if inherited:
            env["CUDA_DEVICE_ORDER"] = inherited
        result = subprocess.run(
            [sys.executable, "-c", "import os, helpers; print(os.environ['CUDA_DEVICE_ORDER'])"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.strip() == "PCI_BUS_ID"


def test_compute_modes_are_keyed_by_torchs_numbers(monkeypatch):
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hardware.compute_modes() == {0: "Default", 1: "Default", 2: "Exclusive_Process", 3: "Prohibited"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert hardware.compute_modes() == {0: "Exclusive_Process", 1: "Default"}
    fake_nvidia_smi(monkeypatch, None)
    assert hardware.compute_modes() == {}


def test_sharing_refusal_names_the_gpu_its_mode_and_the_fix(monkeypatch):
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert hardware.sharing_refusal([0]) is None  # nvidia-smi's GPU 1: Default
    line = hardware.sharing_refusal([0, 1])
    assert line == (
        "the study's processes cannot share a GPU here (ranks sharing one, or a rank beside the notebook or "
        "gpu-check that already uses it): GPU 1 (nvidia-smi GPU 2) is in compute mode Exclusive_Process: "
        "only one process may hold a CUDA context on it, so the second rank fails with 'CUDA-capable "
        "device(s) is/are busy or unavailable'; make it shareable with `sudo nvidia-smi -i 2 -c DEFAULT`"
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    line = hardware.sharing_refusal([2, 3])
    assert "GPU 3 (nvidia-smi GPU 3) is in compute mode Prohibited: no process may create" in line
    assert "`sudo nvidia-smi -i 2 -c DEFAULT && sudo nvidia-smi -i 3 -c DEFAULT`" in line
    fake_nvidia_smi(monkeypatch, None)
    assert hardware.sharing_refusal([0, 1]) is None


def test_a_machine_described_for_a_plan_or_read_from_a_recorded_gpu_list(monkeypatch):
    described = hardware.Machine.described_as(4, "NVIDIA A100-SXM4-40GB")
    assert (described.gpus, described.gpu_memory_bytes, described.described) == (4, 40 * 2**30, True)
    assert described.describe() == "4x NVIDIA A100-SXM4-40GB (40 GiB), 16 cores (described)"
    assert hardware.Machine.described_as(1, "NVIDIA L4", memory_gib=24).gpu_memory_bytes == 24 * 2**30
    with pytest.raises(ValueError, match="no memory size in the GPU name 'NVIDIA L4'"):
        hardware.Machine.described_as(1, "NVIDIA L4")
    recorded = hardware.Machine.from_gpu_list(FOUR_GPUS_535)
    assert recorded.gpus == 4 and recorded.compute_modes[2] == "Exclusive_Process"
    assert recorded.sharing_refusal([0, 1]) is None
    assert "GPU 2 is in compute mode Exclusive_Process" in recorded.sharing_refusal([2])
    with pytest.raises(
        ValueError, match="no GPU in the recorded list; record it with: nvidia-smi --query-gpu="
    ):
        hardware.Machine.from_gpu_list("No devices were found")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    here = hardware.Machine.here()
    assert here.gpus == 0 and not here.described and here.cores == hardware.usable_cores()


def test_a_busy_machine_is_said_to_be_busy(monkeypatch):
    monkeypatch.setattr(hardware, "usable_cores", lambda: 2)
    monkeypatch.setattr(hardware.os, "getloadavg", lambda: (0.9, 0.5, 0.4))
    assert hardware.busy_warning() is None  # one process on two cores
    monkeypatch.setattr(hardware.os, "getloadavg", lambda: (3.2, 2.0, 1.0))
    assert hardware.busy_warning().startswith("warning: this machine is busy (1-minute load average 3.2 on 2")
