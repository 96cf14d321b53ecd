"""helpers.ddp: the traffic recorder and the ring formula (the worker itself runs in tests/test_launch.py)."""

import pytest

from helpers import ddp


def test_recorder_groups_buckets_by_step():
    recorder = ddp.TrafficRecorder()
    recorder.next_step()
    recorder.buckets[recorder.step] += [100, 28]
    recorder.next_step()
    assert recorder.buckets == [[100, 28], []]


@pytest.mark.parametrize(("world_size", "sent"), [(1, 0), (2, 100), (4, 150), (8, 175)])
def test_ring_all_reduce_sends_two_k_minus_one_over_k(world_size, sent):
    assert ddp.ring_bytes_per_rank(100, world_size) == sent
