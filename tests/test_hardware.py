"""helpers.hardware: the fingerprint names what measurements depend on."""

from pathlib import Path

import pytest
import torch

from helpers import hardware


def test_fingerprint_names_cpu_gpus_and_versions():
    info = hardware.fingerprint()
    assert info["usable_cores"] >= 1 and info["cpu_model"]
    assert info["torch"] == torch.__version__
    assert len(info["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_describe_names_gpus_or_their_absence():
    cpu_only = {"usable_cores": 2, "cpu_model": "Xeon", "gpus": []}
    assert hardware.describe(cpu_only) == "2-core Xeon, no GPU"
    gpu = {"name": "NVIDIA H200", "memory_bytes": 150 * 2**30}
    two = {**cpu_only, "gpus": [gpu, gpu]}
    assert hardware.describe(two) == "2x NVIDIA H200 (150 GiB); 2-core Xeon"


RECORDED = Path(__file__).parent / "data"


def test_the_seeds_four_gpus_behind_the_host_bridge():
    pairs = hardware.parse_topology((RECORDED / "nvidia-smi-topo-4gpu-phb.txt").read_text())
    assert len(pairs) == 6 and set(pairs["link"]) == {"PHB"} and set(pairs["nvlinks"]) == {0}
    assert pairs[["gpu_a", "gpu_b"]].values.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    assert hardware.describe_topology(pairs) == (
        "4 GPUs, every pair PHB: PCIe and a PCIe host bridge (typically the CPU)"
    )


def test_eight_gpus_on_nvlink_with_nics_and_colour_codes():
    text = (RECORDED / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    assert "\x1b[4m" in text  # as a terminal capture has it
    pairs = hardware.parse_topology(text)
    assert len(pairs) == 28 and set(pairs["link"]) == {"NV18"} and set(pairs["nvlinks"]) == {18}
    assert hardware.describe_topology(pairs) == "8 GPUs, every pair NV18: a bonded set of 18 NVLinks"


def test_a_mixed_matrix_names_its_farthest_pairs():
    text = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tNV4\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\t0-7\nGPU2\tSYS\tSYS\t X \t8-15\n"
    )
    pairs = hardware.parse_topology(text)
    assert pairs["link"].tolist() == ["NV4", "SYS", "SYS"]
    assert hardware.describe_topology(pairs).startswith("3 GPUs: 2 pair(s) SYS, 1 pair(s) NV4; the farthest")
    assert hardware.describe_topology(hardware.parse_topology("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n")) == (
        "one GPU: no path between GPUs"
    )


def test_what_is_not_a_topology_matrix_is_refused():
    with pytest.raises(ValueError, match="no header naming GPU0"):
        hardware.parse_topology("No devices were found")
    with pytest.raises(ValueError, match="unknown link 'QQQ' between GPU0 and GPU1"):
        hardware.parse_topology("\tGPU0\tGPU1\nGPU0\t X \tQQQ\nGPU1\tQQQ\t X \n")
    with pytest.raises(ValueError, match="2 GPUs in its header but has 1 GPU rows"):
        hardware.parse_topology("\tGPU0\tGPU1\nGPU0\t X \tPHB\n")
