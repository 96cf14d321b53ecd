"""helpers.collectives.link_reading: the fitted link in words, on a CPU and on one shared GPU."""

import pandas as pd

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
        'The dashed line is one buffer copied to another in memory: on one machine the "link" between Gloo '
        "ranks is the loopback interface and memory copies, so a copy of one buffer in memory bounds what "
        "any collective here can reach."
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
