"""helpers.topology: the links between GPUs from nvidia-smi topo -m, in torch's numbers."""

from pathlib import Path

import pytest
from test_hardware import FOUR_GPUS_535, fake_nvidia_smi

from helpers import topology

RECORDED = Path(__file__).parent / "data"


def test_the_seeds_four_gpus_behind_the_host_bridge():
    pairs = topology.parse_topology((RECORDED / "nvidia-smi-topo-4gpu-phb.txt").read_text())
    assert len(pairs) == 6 and set(pairs["link"]) == {"PHB"} and set(pairs["nvlinks"]) == {0}
    assert pairs[["gpu_a", "gpu_b"]].values.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    assert topology.describe_topology(pairs) == (
        "4 GPUs, every pair PHB: PCIe and a PCIe host bridge (typically the CPU)"
    )


def test_eight_gpus_on_nvlink_with_nics_and_colour_codes():
    text = (RECORDED / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    assert "\x1b[4m" in text  # as a terminal capture has it
    pairs = topology.parse_topology(text)
    assert len(pairs) == 28 and set(pairs["link"]) == {"NV18"} and set(pairs["nvlinks"]) == {18}
    assert topology.describe_topology(pairs) == "8 GPUs, every pair NV18: a bonded set of 18 NVLinks"


def test_a_mixed_matrix_names_its_farthest_pairs():
    text = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tNV4\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\t0-7\nGPU2\tSYS\tSYS\t X \t8-15\n"
    )
    pairs = topology.parse_topology(text)
    assert pairs["link"].tolist() == ["NV4", "SYS", "SYS"]
    assert topology.describe_topology(pairs).startswith("3 GPUs: 2 pair(s) SYS, 1 pair(s) NV4; the farthest")
    assert topology.describe_topology(topology.parse_topology("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n")) == (
        "one GPU: no path between GPUs"
    )


def test_what_is_not_a_topology_matrix_is_refused():
    with pytest.raises(ValueError, match="no header naming GPU0"):
        topology.parse_topology("No devices were found")
    with pytest.raises(ValueError, match="unknown link 'QQQ' between GPU0 and GPU1"):
        topology.parse_topology("\tGPU0\tGPU1\nGPU0\t X \tQQQ\nGPU1\tQQQ\t X \n")
    with pytest.raises(ValueError, match="2 GPUs in its header but has 1 GPU rows"):
        topology.parse_topology("\tGPU0\tGPU1\nGPU0\t X \tPHB\n")


def test_visible_topology_keeps_the_pairs_torch_sees_in_torchs_numbers(monkeypatch):
    text = (RECORDED / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    everything = topology.visible_topology(text)
    assert len(everything) == 28
    assert everything["gpu_a"].equals(everything["nvidia_smi_a"])
    assert everything["gpu_b"].equals(everything["nvidia_smi_b"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    pairs = topology.visible_topology(text)
    assert pairs[["gpu_a", "gpu_b", "link", "nvidia_smi_a", "nvidia_smi_b"]].values.tolist() == [
        [0, 1, "NV18", 2, 5]
    ]
    assert topology.describe_topology(pairs) == "2 GPUs, every pair NV18: a bonded set of 18 NVLinks"


def test_visible_topology_follows_the_order_and_uuids_of_cuda_visible_devices(monkeypatch):
    text = (
        "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
        "GPU0\t X \tNV4\tSYS\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\tSYS\t0-7\n"
        "GPU2\tSYS\tSYS\t X \tPHB\t8-15\nGPU3\tSYS\tSYS\tPHB\t X \t8-15\n"
    )
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    # torch's cuda:0 is nvidia-smi's GPU 3, cuda:1 is GPU 0 (a UUID prefix), cuda:2 is GPU 1; -1 ends the list
    pairs = topology.visible_topology(text, "3,GPU-1a2b,1,-1,2")
    assert pairs[["gpu_a", "gpu_b", "link", "nvidia_smi_a", "nvidia_smi_b"]].values.tolist() == [
        [0, 1, "SYS", 3, 0],
        [0, 2, "SYS", 3, 1],
        [1, 2, "NV4", 0, 1],
    ]
    assert topology.visible_topology(text, "").empty


def test_visible_topology_refuses_gpus_the_matrix_does_not_have(monkeypatch):
    text = (RECORDED / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    fake_nvidia_smi(monkeypatch, FOUR_GPUS_535)
    with pytest.raises(
        ValueError, match=r"names GPU 8, which the matrix does not have \(it has 8 GPU\(s\), 0-7\)"
    ):
        topology.visible_topology(text, "2,8")
    with pytest.raises(ValueError, match="names GPU 2 twice"):
        topology.visible_topology(text, "2,2")
    with pytest.raises(ValueError, match="GPU-9c0d1e matches 2 GPUs of nvidia-smi's"):
        topology.visible_topology(text, "GPU-9c0d1e")
    with pytest.raises(ValueError, match="GPU-ffff matches no GPU"):
        topology.visible_topology(text, "GPU-ffff")
    with pytest.raises(ValueError, match="neither a GPU index nor a GPU- UUID"):
        topology.visible_topology(text, "MIG-1a2b")


def test_a_fingerprint_s_topology_is_of_the_gpus_its_torch_saw():
    # nvidia-smi topo -m lists the whole machine; a run under CUDA_VISIBLE_DEVICES=2,5 used two of them
    text = (RECORDED / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    seen = topology.seen_topology({"gpu_topology": text, "visible_gpu_indices": [2, 5]})
    assert seen[["gpu_a", "gpu_b", "nvidia_smi_a", "nvidia_smi_b"]].values.tolist() == [[0, 1, 2, 5]]
    assert len(topology.seen_topology({"gpu_topology": text})) == 28  # recorded before the field existed
    assert topology.seen_topology({"gpu_topology": None}).empty
