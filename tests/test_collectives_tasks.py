"""helpers.collectives.tasks: real Gloo launches: semantics, a deadlock that ends, the time budget."""

import pytest

from helpers import worker
from helpers.collectives import model, runs, tables, tasks

SEMANTICS_TWO_RANKS = {
    "send_recv": [[0, 1], [0, 1]],
    "broadcast": [[0, 1], [0, 1]],
    "scatter": [[0], [1]],
    "gather": [[0, 1, 10, 11], None],
    "reduce": [[10, 12], None],
    "all_reduce": [[10, 12], [10, 12]],
    "all_gather": [[0, 1, 10, 11], [0, 1, 10, 11]],
    "reduce_scatter": [[10], [12]],
    "all_to_all": [[0, 10], [1, 11]],
    "all_to_all_single": [[0, 10], [1, 11]],
    "barrier": [[0, 1], [10, 11]],
}
SEMANTICS_THREE_RANKS = {
    "send_recv": [[0, 1, 2], [0, 1, 2], [20, 21, 22]],
    "broadcast": [[0, 1, 2]] * 3,
    "scatter": [[0], [1], [2]],
    "gather": [[0, 1, 2, 10, 11, 12, 20, 21, 22], None, None],
    "reduce": [[30, 33, 36], None, None],
    "all_reduce": [[30, 33, 36]] * 3,
    "all_gather": [[0, 1, 2, 10, 11, 12, 20, 21, 22]] * 3,
    "reduce_scatter": [[30], [33], [36]],
    "all_to_all": [[0, 10, 20], [1, 11, 21], [2, 12, 22]],
    "all_to_all_single": [[0, 10, 20], [1, 11, 21], [2, 12, 22]],
    "barrier": [[0, 1, 2], [10, 11, 12], [20, 21, 22]],
}
GLOO_CPU_LACKS = {"all_to_all"}  # torch 2.11's Gloo offers only the single-tensor all_to_all


@pytest.mark.parametrize(("world_size", "expected"), [(2, SEMANTICS_TWO_RANKS), (3, SEMANTICS_THREE_RANKS)])
def test_semantics_table_and_support_matrix(tmp_path, no_leftovers, world_size, expected):
    assert model.expected_semantics(world_size) == expected
    results = runs.run_task("semantics", world_size, time_limit_seconds=120, output=tmp_path)
    frame = tables.semantics_frame(results).reset_index()
    assert list(frame["operation"].unique()) == list(expected)
    for operation, per_rank in expected.items():
        rows = frame[frame["operation"] == operation]
        assert rows["rank"].tolist() == list(range(world_size))
        before = [[10 * r + i for i in range(world_size)] for r in range(world_size)]
        assert rows["holds before"].tolist() == before
        if operation in GLOO_CPU_LACKS:
            assert rows["holds after"].tolist() == [None] * world_size
            assert all(status.startswith("unsupported: ") for status in rows["status"])
        else:
            assert rows["holds after"].tolist() == per_rank, operation
            assert set(rows["status"]) == {"ok"}
    matrix = {row["operation"]: row for row in runs.support_matrix(results)}
    assert {op for op, row in matrix.items() if not row["supported"]} == GLOO_CPU_LACKS
    assert matrix["all_to_all"]["message"] == "Backend gloo does not support alltoall"
    assert {(row["backend"], row["device"]) for row in matrix.values()} == {("gloo", "cpu")}


def test_a_skipped_all_reduce_ends_by_timeout(tmp_path, no_leftovers):
    # Without the 5 s group timeout the waiting ranks would hang, and the skipping rank's wait for them
    # (3 × 5 + 30 s) would fail the launch, or the launch's own 90 s limit would: LaunchError either way.
    results = runs.run_task("deadlock", 3, time_limit_seconds=90, output=tmp_path, skip_rank=1)
    assert [r["skipped_all_reduce"] for r in results] == [False, True, False]
    for waiting in (results[0], results[2]):
        assert waiting["timed_out"] is True and waiting["timeout_seconds"] == 5
        assert 5 <= waiting["seconds"] < 5 + 3
        assert waiting["error"].startswith("Timed out waiting 5000ms")


def test_probe_line_through_two_points_and_through_the_origin():
    assert tasks.probe_line([(1000, 0.002), (101000, 0.012)]) == pytest.approx((0.0019, 1e-7))
    assert tasks.probe_line([(4096, 0.004)]) == pytest.approx((0.0, 0.004 / 4096))
    # a slower small probe (a busy machine) never makes bytes free: the larger probe's seconds are charged
    assert tasks.probe_line([(1000, 0.005), (2000, 0.001)]) == pytest.approx((0.0045, 0.001 / 2000))
    assert tasks.probe_line([(1000, 0.003), (2000, 0.003)]) == pytest.approx((0.0015, 0.003 / 2000))


def test_budget_plan_runs_what_fits_and_gives_up_on_larger_sizes():
    cases = [
        {"case": ("all_reduce", None), "bytes": 1, "predicted_seconds": 1.0},
        {"case": ("broadcast", None), "bytes": 1, "predicted_seconds": 2.0},
        {"case": ("all_reduce", None), "bytes": 2, "predicted_seconds": 4.0},
        {"case": ("broadcast", None), "bytes": 2, "predicted_seconds": 2.0},
        {"case": ("all_reduce", None), "bytes": 4, "predicted_seconds": 0.5},  # cheap, but after a skip
    ]
    plan = tasks.budget_plan(cases, budget_seconds=6)
    assert plan[:2] == [None, None] and plan[3] is None
    assert plan[2] == "skipped: predicted 4.0 s, 3.0 s left of the 6 s time budget"
    assert plan[4] == "skipped: a smaller size of it did not fit the time budget"


def test_a_benchmark_stays_within_its_time_budget(tmp_path, no_leftovers):
    sizes = [2**10, 2**20, 2**29]
    results = runs.run_task(
        "benchmark", 2, time_limit_seconds=120, output=tmp_path, sizes_bytes=sizes,
        operations=["all_reduce", "parameter_server"], chunks=[1], iterations=3, time_budget_seconds=0.25,
    )  # fmt: skip
    budget = results[0]["budget"]
    rows = {(row["operation"], row["requested_bytes"]): row["status"] for row in results[0]["rows"]}
    assert rows[("all_reduce", 2**10)] == "ok"
    # 512 MiB, 3 times, charged twice (PROBE_SAFETY): it fits 0.25 s only if the 1 MiB probe ran at 13 GB/s
    # or more, which Gloo over loopback does not (an EPYC's 3 GB/s fitted 256 MiB into 0.5 s: too close);
    # 1 KiB fits unless a barrier and a call take 40 ms, even when the probe runs on a busy machine
    assert rows[("all_reduce", 2**29)].startswith("skipped: ")
    assert budget["time_budget_seconds"] == 0.25 and budget["skipped_cases"] >= 1
    assert budget["predicted_seconds"] <= 0.25
    assert [row["rows"] for row in results] == [results[0]["rows"]] * 2  # every rank ran the same cases


def test_ranks_are_pinned_to_disjoint_shares_of_the_cores():
    assert worker.pinned_cores(0, 2, [0, 1]) == [0] and worker.pinned_cores(1, 2, {1, 0}) == [1]
    assert [worker.pinned_cores(r, 2, range(16)) for r in range(2)] == [list(range(8)), list(range(8, 16))]
    assert worker.pinned_cores(2, 3, [4, 5, 6, 7]) == [6]  # one core each, the fourth left over
    assert worker.pinned_cores(0, 3, [0, 1]) is None  # three ranks on two cores: nothing to pin
    assert worker.pinned_cores(2, 2, [0, 1]) is None
