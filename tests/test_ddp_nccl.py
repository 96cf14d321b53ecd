"""helpers.ddp_nccl: NCCL's all-reduce predicted from chapter 5's cited link figures, beside the all-reduce
chapter 3's largest launches measured, on one GPU and on a CPU."""

import pytest

from helpers import ddp_nccl, ddp_placement
from tests.test_ddp_placement import (
    CPU_MACHINE,
    H200_MACHINE,
    LINEAR_BYTES,
    cpu_runs,
    deepest_parentheses,
    gpu_runs,
)


def test_nccl_s_all_reduce_is_predicted_from_chapter_5_s_link_figures():
    # NVLink 4 (H200 SXM): busbw 370 GB/s, α = 33.7 µs / 14 per ring step; four ranks: 2(k-1) = 6 steps,
    # each of n/4 bytes: 6 x 2.407 µs + 48,408,880 x 1.5 / 370e9 s = 14.44 + 196.25 µs = 0.211 ms
    predicted = ddp_nccl.nccl_prediction([LINEAR_BYTES], 4, "NVIDIA H200")
    assert predicted["link"] == "NVLink 4 (H200 SXM)" and predicted["gpu"] == "H200 SXM 141 GB"
    assert predicted["seconds"] == pytest.approx(6 * 33.7e-6 / 14 + LINEAR_BYTES * 1.5 / 370e9)
    # the band: chapter 5's busbw range for the link, 60 % of its 450 GB/s peak to 480 GB/s, α fixed
    assert predicted["low_seconds"] == pytest.approx(6 * 33.7e-6 / 14 + LINEAR_BYTES * 1.5 / 480e9)
    assert predicted["high_seconds"] == pytest.approx(6 * 33.7e-6 / 14 + LINEAR_BYTES * 1.5 / 270e9)
    assert predicted["switched"] and predicted["configuration"] == "AWS p5en.48xlarge"
    # the busbw is the H100's, an NCCL maintainer's statement of 2024-05-06 (not a posted measurement, nor
    # the H200 datasheet's 2024-07); α is a DGX-A100's
    assert predicted["busbw_source"] == (
        "an NCCL maintainer's figure for a ring over H100 SXMs' NVLink 4, its 450 GB/s line rate less about "
        "20 % of protocol overhead, stated rather than measured (nccl-tests issue 212, 2024-05-06): the H200 "
        "SXM has the same NVLink 4 and NVSwitch; 8 H200s posted a peak busbw of 475 GB/s with "
        "NVLink SHARP, near the range's top (nccl-tests issue 272, 2024-11-27)"
    )
    assert predicted["configuration_gpus"] == 8  # the p5en.48xlarge: 4 ranks are 4 of its 8 GPUs
    assert predicted["alpha_source"] == (
        "a DGX-A100's one-channel ring all-reduce of 8 A100s, 33.7 µs, over its 14 ring steps (nccl-tests "
        "issue 123, 2022-12-14)"
    )
    # every GPU chapter 5 sells on a link has its busbw and α cited
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB", "NVIDIA L4",
                 "NVIDIA L40S", "NVIDIA GeForce GTX 1080 Ti"):  # fmt: skip
        other = ddp_nccl.nccl_prediction([LINEAR_BYTES], 4, name)
        assert other["link"] in ddp_nccl.BUSBW_SOURCES, name
        assert other["alpha_source"] != "chapter 5's link table", name
    assert ddp_nccl.nccl_prediction([LINEAR_BYTES], 4, None) is None  # no GPU
    assert ddp_nccl.nccl_prediction([LINEAR_BYTES], 4, "NVIDIA RTX 9999") is None  # not in the tables
    where = ddp_placement.placement(gpu_runs()["scaling"], H200_MACHINE)
    largest = ddp_nccl.largest_launches(gpu_runs()["scaling"], where)
    # NCCL's prediction is said once in the answer box (backends_answer), not beside the rank counts
    assert ddp_nccl.ranks_reading(largest, where) == (
        "These are 4 Gloo ranks taking turns on one NVIDIA H200, every bucket staged through host memory: "
        "the all-reduce is 34.5 ms of `LinearNet`'s 40.0 ms step and 2.33 ms of `ConvNet`'s 40.7 ms step. "
        "This measures what DDP's machinery costs on a shared GPU, not scaling."
    )
    reading = ddp_nccl.nccl_reading(largest, where)
    assert reading == (
        "On 4 H200 SXM 141 GB GPUs of their own, joined by NVLink 4 through an NVSwitch (this assumes SXM "
        "boards so joined, as in 4 of the 8 GPUs of an AWS p5en.48xlarge), NCCL's ring all-reduce of "
        "`LinearNet`'s 48,408,880 bytes and `ConvNet`'s 1,504,800 bytes is predicted to take about 0.21 and "
        "0.021 ms (0.17–0.28 and 0.019–0.023 ms over chapter 5's range of bus bandwidths for the link), "
        "against 34.5 ms of `LinearNet`'s 40.0 ms step and 2.33 ms of `ConvNet`'s 40.7 ms step that Gloo "
        "took here on one NVIDIA H200.\n\n"
        "The prediction is the α-β ring 2(k−1)(α + nβ/k) with k = 4. "
        "Its 1/β is nccl-tests' bus bandwidth (busbw) for the link, 370 GB/s, an NCCL maintainer's figure "
        "for a ring over H100 SXMs' NVLink 4, its 450 GB/s line rate less about 20 % of protocol overhead, "
        "stated rather than measured (nccl-tests issue 212, 2024-05-06): the H200 SXM has the same NVLink 4 "
        "and NVSwitch; 8 H200s posted a peak busbw of 475 GB/s with "
        "NVLink SHARP, near the range's top (nccl-tests issue 272, 2024-11-27). Its α, "
        "2.41 µs per ring step, is a DGX-A100's one-channel ring all-reduce of 8 A100s, 33.7 µs, over its 14 "
        "ring steps (nccl-tests issue 123, 2022-12-14). The range takes the busbw from 270 to 480 GB/s, "
        "with α fixed."
    )
    assert "2024-07" not in reading and reading.count("(busbw)") == 1
    assert deepest_parentheses(reading) == 1
    cpu = ddp_placement.placement(cpu_runs()["scaling"], CPU_MACHINE)
    assert ddp_nccl.nccl_reading(ddp_nccl.largest_launches(cpu_runs()["scaling"], cpu), cpu) == (
        "This machine has no GPU to predict NCCL on; chapter 5 predicts it on GPUs for rent."
    )
