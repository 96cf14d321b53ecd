"""helpers.costmodel.recommend: predictions for 1-8 GPUs per link."""

from __future__ import annotations

import pytest

from helpers.collectives.model import ring_all_reduce_seconds
from helpers.costmodel import recommend, timemodel
from helpers.models import build_model, parameter_bytes

# ----- recommendation ----------------------------------------------------------------------------------


def test_recommend_separates_compute_bound_from_communication_bound():
    heavy = recommend.recommend(
        "ConvNet", 512, gpu_compute=timemodel.ComputeLine(1e-3, 1e-4), hourly_price_per_gpu="2"
    )
    assert set(heavy["verdict"]) == {"add GPUs"}
    assert (heavy["basis"] == "prediction").all()
    one = heavy[heavy["gpus"] == 1].iloc[0]
    assert one["speedup"] == 1 and one["all_reduce_seconds"] == 0
    assert one["dollars_per_run"] == pytest.approx(2 * one["run_hours"])
    light = recommend.recommend("LinearNet", 50, gpu_compute=timemodel.ComputeLine(1e-3, 1e-6))
    pcie = light[light["link"] == "PCIe 4.0 x16"]
    assert set(pcie["verdict"]) == {"stay on one"}
    nvlink = light[light["link"] == "NVLink 4 (H100 SXM)"].set_index("gpus")
    assert nvlink.loc[2, "all_reduce_seconds"] == pytest.approx(
        ring_all_reduce_seconds(
            parameter_bytes(build_model("LinearNet")), 2, recommend.GPU_ALPHA_SECONDS, 2 / 900e9
        )
    )


def test_recommend_needs_the_one_gpu_baseline():
    with pytest.raises(ValueError, match="include 1"):
        recommend.recommend("ConvNet", 64, range(2, 4), gpu_compute=timemodel.ComputeLine(0, 1e-4))


def test_link_table_is_sourced():
    assert recommend.LINKS["PCIe 4.0 x16"]["bytes_per_second"] == pytest.approx(31.5e9, rel=1e-3)
    assert recommend.LINKS["PCIe 5.0 x16"]["bytes_per_second"] == pytest.approx(63.0e9, rel=1e-3)
    assert all(link["source"] for link in recommend.LINKS.values())
