"""helpers.collectives.link_reading: the fitted link in words, on a CPU and on one shared GPU."""

import pandas as pd
import pytest

from helpers.collectives import link_reading


def test_an_alpha_far_from_the_library_s_belongs_to_the_implementation():
    operations = ["all_reduce", "all_reduce_ring", "parameter_server"]
    fits = pd.DataFrame(
        {"backend": "gloo", "device": "cpu", "operation": operations, "alpha_seconds": [1e-3, 1.1e-3, 1e-4]}
    )
    assert link_reading.describe_alphas(fits).startswith(
        "The α of all_reduce (our parameter server) is 0.1× the library's. Every implementation moves its "
        "bytes over the same link"
    )
    assert (
        link_reading.describe_alphas(fits.iloc[:1])
        == "No implementation of ours was fitted beside the library's."
    )


def test_cpu_edition_prose_keeps_the_cpu_s_wording():
    path = link_reading.describe_link_path("gloo", "cpu", 0)
    assert "one CPU" in path and "PCIe" not in path and "GPU" not in path
    assert link_reading.describe_reference(
        ("one buffer copied to another in memory", 3e9), "gloo", "cpu"
    ) == (
        "The black dashed line is one buffer copied to another in memory: on one machine the "
        '"link" between Gloo ranks is the loopback interface and memory copies, so a copy of one buffer in '
        "memory bounds what any collective here can reach."
    )
    records = [{"config": {"world_size": k}} for k in (2, 3)]
    assert (
        link_reading.describe_scheduler(records, 2)
        == "with 3 ranks on 2 cores the time includes the scheduler's"
    )
    costs = link_reading.describe_ring_costs("gloo", "cpu")
    assert costs.startswith("At large messages both are limited by the same copies and the same link")
    assert "pageable" not in costs and "GPU" not in costs
    assert (
        link_reading.describe_ring_costs("nccl", "cuda") == costs
    )  # NCCL moves GPU memory itself: no staging


def beyond_rows(*rows) -> pd.DataFrame:
    """``tables.beyond_the_fit``'s frame: (where, implementation, ranks, median ratio, range)."""
    columns = ["backend/device", "implementation", "ranks"]
    frame = pd.DataFrame(
        rows, columns=[*columns, "measured ÷ two-rank model, median", "range over message sizes"]
    )
    return frame.set_index(columns)


def test_whether_the_two_rank_fit_carries_over_is_data_the_sentence_is_built_from():
    """chapter 4's verdict on k ranks as data (chapter 3 reads the fit exactly so): the H200's Gloo ranks,
    0.90x over the sizes (median), 0.71-1.12x: on both sides of the fit, a miss within their spread, so it
    carries over to within 29 %; and describe_beyond says what carry_over found."""
    library = "all_reduce (torch.distributed)"
    beyond = beyond_rows(
        ("gloo/cuda", library, 3, 1.30, "1.20–1.40"),
        ("gloo/cuda", library, 4, 0.90, "0.71–1.12"),
        ("gloo/cuda", "all_reduce (our ring)", 4, 0.5, "0.40–0.60"),
    )
    read = link_reading.carry_over(beyond, fit_error=0.069)
    assert read["ranks"] == 4  # the most ranks measured, by default
    assert {key: read[key] for key in ("verdict", "within", "median", "range")} == {
        "verdict": "carries over", "within": pytest.approx(0.29), "median": 0.9, "range": "0.71–1.12",
    }  # fmt: skip
    assert read["reason"] == "sizes on both sides" and read["direction"] == "faster"
    sentence = link_reading.describe_beyond(beyond.iloc[1:2], cores=16, fit_error=0.069)
    assert f"about {read['miss']:.0%} faster than predicted over the sizes (median)" in sentence
    assert "carries over to within about 29%" in sentence
    # three ranks on two cores, 1.3x and every size above the fit: slower, the scheduler's time
    crowded = link_reading.carry_over(beyond, ranks=3, cores=2)
    assert crowded["verdict"] == "slower" and crowded["reason"] == "scheduler" and crowded["within"] is None
    assert link_reading.carry_over(beyond, ranks=3, cores=16)["reason"] == "something the model lacks"
    # within 10 % of 1, or within the fit's own error: carries over, either side
    assert link_reading.carry_over(beyond_rows(("gloo/cpu", library, 3, 1.05, "0.98–1.30")))["reason"] == (
        "within MATTERS"
    )
    excused = link_reading.carry_over(beyond_rows(("gloo/cpu", library, 3, 0.88, "0.80–0.95")), 0.15)
    assert excused["verdict"] == "carries over" and excused["reason"] == "within the fit's own error"
    ours = link_reading.carry_over(beyond, implementation="all_reduce (our ring)")
    assert ours["verdict"] == "faster" and ours["within"] is None
    assert link_reading.carry_over(beyond, ranks=8) is None
    assert link_reading.carry_over(beyond, where="gloo/cpu") is None
