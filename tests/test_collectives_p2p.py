"""helpers.collectives.p2p: lock-step schedules; our algorithms equal torch.distributed on 2 to 5 ranks."""

import itertools

import pytest
import torch

from helpers.collectives import p2p, runs
from helpers.collectives.p2p import Step


def all_ranks(schedule, world_size: int, *arguments) -> list[list[Step]]:
    return [schedule(rank, world_size, *arguments) for rank in range(world_size)]


@pytest.mark.parametrize("world_size", range(1, 9))
def test_every_algorithm_runs_in_lock_step(world_size):
    assert p2p.unmatched_messages(all_ranks(p2p.ring_all_reduce_schedule, world_size)) == []
    for src, chunks in itertools.product(sorted({0, world_size - 1}), (1, 2, 5)):
        schedules = all_ranks(p2p.ring_broadcast_schedule, world_size, src, chunks)
        assert p2p.unmatched_messages(schedules) == []
    for server in sorted({0, world_size - 1}):
        assert p2p.unmatched_messages(all_ranks(p2p.parameter_server_schedule, world_size, server)) == []


def test_posting_one_message_at_a_time_is_caught():
    # The old ring: "receive from the left", then "send to the right", each on its own. On 3 ranks every
    # rank's first step waits for a send its left neighbour posts only in its second step.
    k = 3
    one_at_a_time = [[Step(receives=(((r - 1) % k, 0),)), Step(sends=(((r + 1) % k, 0),))] for r in range(k)]
    problems = p2p.unmatched_messages(one_at_a_time)
    assert "step 0: rank 0's receive of chunk 0 with rank 2" in problems
    assert len(problems) == 2 * k  # every receive and every send is left unmatched


def test_the_ring_all_reduce_moves_what_the_formula_says():
    # k ranks: 2(k−1) steps; each sends one chunk per step, so 2(k−1)/k of the data.
    for k in (2, 3, 5):
        schedule = p2p.ring_all_reduce_schedule(0, k)
        assert len(schedule) == 2 * (k - 1)
        assert [len(step.sends) for step in schedule] == [1] * 2 * (k - 1)
        assert [step.add for step in schedule] == [True] * (k - 1) + [False] * (k - 1)


def test_the_pipelined_broadcast_takes_s_plus_k_minus_2_steps():
    for k, chunks in ((2, 1), (3, 1), (3, 4), (5, 8)):
        schedules = all_ranks(p2p.ring_broadcast_schedule, k, 0, chunks)
        assert {len(steps) for steps in schedules} == {chunks + k - 2}
        received = [sorted(c for step in steps for _, c in step.receives) for steps in schedules]
        assert received == [[]] + [list(range(chunks))] * (k - 1)  # every other rank gets every chunk


def test_a_schedule_of_one_rank_changes_nothing():
    value = torch.arange(5.0)
    p2p.run_schedule(p2p.ring_all_reduce_schedule(0, 1), list(value.tensor_split(1)))
    assert value.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("world_size", [2, 3, 4, 5])
def test_our_algorithms_equal_torch_distributed_exactly(tmp_path, no_leftovers, world_size):
    results = runs.run_task("verify", world_size, time_limit_seconds=120, output=tmp_path)
    assert len(results) == world_size
    for result in results:
        assert {world_size - 1, world_size + 1, 1, 7, 1000, 1001} <= set(result["sizes"])
        checks = result["checks"]
        failed = [c for c in checks if not c["equal"] or c["max_abs_difference"] != 0]
        assert not failed, failed[:3]
        kinds = {(c["check"], c["dtype"]) for c in checks}
        assert {"ring_all_reduce", "parameter_server_step", "ring_broadcast"} <= {kind for kind, _ in kinds}
        assert {dtype for _, dtype in kinds} == {"int64", "float64"}
        broadcasts = {(c["src"], c["chunks"]) for c in checks if c["check"] == "ring_broadcast"}
        assert broadcasts == {(src, s) for src in (0, world_size - 1) for s in (1, 2, 3, 8)}


def test_the_lockstep_table_of_the_chapter():
    rows = {(row["schedule"], row["ranks"]): row for row in p2p.lockstep_table([2, 3])}
    assert (
        rows[("ring all-reduce", 3)]["steps per rank"] == 4
        and rows[("ring all-reduce", 3)]["unmatched messages"] == 0
    )
    assert rows[("one message at a time (naive)", 3)]["unmatched messages"] == 6
