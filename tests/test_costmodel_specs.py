"""helpers.costmodel.specs: the datasheet figures and the uncertain inputs the GPU predictions rest on."""

import pytest

from helpers.costmodel import specs


def test_link_figures_follow_the_spec_and_their_sources():
    assert specs.pcie_peak(8e9) == pytest.approx(15.754e9, rel=1e-4)
    assert specs.LINKS["PCIe 5.0 x16"].bus_bandwidth == 28e9
    assert specs.LINKS["PCIe 3.0 x16, host bridge"].bus_bandwidth == pytest.approx(
        28e9 / specs.pcie_peak(32e9) * specs.pcie_peak(8e9)
    )
    assert specs.LINKS["NVLink 4 (H100 SXM)"].bus("high") == 480e9  # NVLink SHARP
    for link in specs.LINKS.values():
        assert link.bus("low") <= link.bus() <= link.bus("high") <= link.peak_bytes_per_second * 1.1
    table = specs.assumptions_table()
    assert len(table) == 5 + len(specs.GPUS) + len(specs.LINKS)  # five uncertain inputs, then the tables
    assert table["source"].str.len().min() > 10 and table["date"].str.len().min() >= 4


def test_gpu_figures_are_the_datasheets():
    assert (
        specs.GPUS["H100 SXM 80 GB"].fp32_flops == 67e12 and specs.GPUS["H100 PCIe 80 GB"].fp32_flops == 51e12
    )
    assert specs.GPUS["V100 SXM2 16 GB"].fp32_flops == 15.7e12
    assert specs.GPUS["GTX 1080 Ti"].fp32_flops == 3584 * 2 * 1582e6
    for gpu in specs.GPUS.values():
        assert "datasheet" in gpu.source  # NVIDIA's, or a statement that there is none


def test_driver_names_map_to_the_gpu_table():
    assert specs.gpu_key("NVIDIA H100 80GB HBM3") == "H100 SXM 80 GB"
    assert specs.gpu_key("NVIDIA H100 PCIe") == "H100 PCIe 80 GB"
    assert specs.gpu_key("NVIDIA H100 NVL") is None  # another board, not in the table
    assert specs.gpu_key("NVIDIA H200") == "H200 SXM 141 GB"
    assert specs.gpu_key("NVIDIA A100-SXM4-40GB") == "A100 SXM 40 GB"
    assert specs.gpu_key("NVIDIA A100-SXM4-80GB") == "A100 SXM 80 GB"
    assert specs.gpu_key("NVIDIA A100 80GB PCIe") == "A100 PCIe 80 GB"
    assert specs.gpu_key("NVIDIA L4") == "L4" and specs.gpu_key("NVIDIA L40S") == "L40S"
    assert specs.gpu_key("NVIDIA GeForce GTX 1080 Ti") == "GTX 1080 Ti"
    assert specs.gpu_key("Tesla T4") is None
