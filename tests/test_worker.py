"""helpers.worker: which GPU and how many threads each rank takes, for every layout; the process group."""

import collections
import datetime
import itertools

import pytest
import torch

from helpers import worker


def layout(nodes: int, ranks_per_node: int, gpus: int, simulated: bool) -> list[int]:
    """The GPU of every rank of a launch of ``nodes`` × ``ranks_per_node`` ranks, by global rank."""
    return [
        worker.gpu_index(node * ranks_per_node + local, local, gpus, simulated)
        for node in range(nodes)
        for local in range(ranks_per_node)
    ]


@pytest.mark.parametrize(
    ("nodes", "ranks_per_node", "gpus"), list(itertools.product([1, 2, 4], [1, 2, 3, 4], range(1, 9)))
)
def test_nodes_simulated_on_one_machine_never_share_a_gpu_under_nccl(nodes, ranks_per_node, gpus):
    world_size = nodes * ranks_per_node
    placed = layout(nodes, ranks_per_node, gpus, simulated=nodes > 1)
    assert all(0 <= gpu < gpus for gpu in placed)
    counts = collections.Counter(placed)
    if world_size <= gpus:  # what launch.check_request lets NCCL run: one GPU each
        assert len(counts) == world_size
    else:  # Gloo only: dealt round-robin
        assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == gpus


def test_placing_by_local_rank_would_collide():
    # The bug this placement fixes: two simulated nodes of two ranks on four GPUs.
    by_local_rank = layout(nodes=2, ranks_per_node=2, gpus=4, simulated=False)
    assert by_local_rank == [0, 1, 0, 1]
    assert layout(nodes=2, ranks_per_node=2, gpus=4, simulated=True) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="no usable GPU"):
        worker.gpu_index(0, 0, 0, False)


@pytest.fixture
def four_gpus(monkeypatch):
    """A machine that claims four GPUs; setting the device is recorded, not done."""
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(worker, "usable_cores", lambda: 8)
    yield chosen
    torch.set_num_threads(1)


def rank_environment(monkeypatch, rank, world_size, local_rank, local_world_size):
    for name, value in dict(RANK=rank, WORLD_SIZE=world_size, LOCAL_RANK=local_rank,
                            LOCAL_WORLD_SIZE=local_world_size).items():  # fmt: skip
        monkeypatch.setenv(name, str(value))


def test_a_rank_of_a_simulated_second_node_takes_its_own_gpu_and_cores(monkeypatch, four_gpus):
    rank_environment(monkeypatch, rank=3, world_size=4, local_rank=1, local_world_size=2)
    config = {"device": "cuda", worker.ALL_RANKS_HERE: True}
    assert worker.prepare_rank(config) == (3, 4, torch.device("cuda", 3))
    assert four_gpus == [torch.device("cuda", 3)] and torch.get_num_threads() == 2  # 8 cores, 4 ranks here
    separate = {"device": "cuda", worker.ALL_RANKS_HERE: False}  # a real second machine
    assert worker.prepare_rank(separate)[2] == torch.device("cuda", 1) and torch.get_num_threads() == 4
    assert worker.prepare_rank({**separate, "gpus": 1})[2] == torch.device("cuda", 0)


def test_cpu_ranks_share_the_cores(monkeypatch, four_gpus):
    rank_environment(monkeypatch, rank=0, world_size=3, local_rank=0, local_world_size=3)
    assert worker.prepare_rank({"device": "cpu"}) == (0, 3, torch.device("cpu"))
    assert torch.get_num_threads() == 2 and four_gpus == []
    worker.prepare_rank({"device": "cpu", "threads": 1})
    assert torch.get_num_threads() == 1


def test_the_launcher_tells_simulated_nodes_to_place_by_global_rank(two_node_launch):
    output, results = two_node_launch
    written = (output / "config.json").read_text()
    assert f'"{worker.ALL_RANKS_HERE}": true' in written
    assert [r["threads"] for r in results] == [max(1, worker.usable_cores() // 2)] * 2


def test_process_groups_time_out_within_two_minutes_and_bind_nccl_to_the_gpu(monkeypatch, tmp_path):
    assert worker.group_timeout({"timeout_seconds": 5}) == datetime.timedelta(seconds=5)
    assert worker.group_timeout({"timeout_seconds": 600}) == datetime.timedelta(seconds=120)
    calls = []
    monkeypatch.setattr(worker.dist, "init_process_group", lambda backend, **kw: calls.append((backend, kw)))
    monkeypatch.setattr(worker.dist, "destroy_process_group", lambda: calls.append("destroyed"))
    monkeypatch.setattr(worker.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(worker.dist, "get_backend", lambda: "gloo")
    monkeypatch.setenv("RANK", "1")
    gpu = torch.device("cuda", 2)
    with worker.process_group({"backend": "nccl", "timeout_seconds": 30}, gpu, tmp_path):
        pass
    with pytest.raises(RuntimeError), worker.process_group({"backend": "gloo"}, gpu, tmp_path):
        raise RuntimeError("a failing rank still leaves its group")
    timeout = datetime.timedelta(seconds=30)
    assert calls == [
        ("nccl", {"timeout": timeout, "device_id": gpu}),  # eager: the communicator exists at once
        "destroyed",
        ("gloo", {"timeout": datetime.timedelta(seconds=60), "device_id": None}),
        "destroyed",
    ]
    assert (tmp_path / "rank1.error").read_text().strip().endswith("a failing rank still leaves its group")


def test_a_failing_nccl_rank_names_itself_before_it_aborts_instead_of_waiting_for_its_peers(
    monkeypatch, tmp_path
):
    """destroy_process_group can block while the peers sit in a collective: the error file must exist
    before the rank leaves, and an NCCL group is aborted, not destroyed."""
    import torch.distributed.distributed_c10d as c10d

    events = []
    error_file = tmp_path / "rank0.error"
    monkeypatch.setattr(worker.dist, "init_process_group", lambda backend, **kw: events.append("joined"))
    monkeypatch.setattr(worker.dist, "destroy_process_group", lambda: events.append("destroyed"))
    monkeypatch.setattr(worker.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(worker.dist, "get_backend", lambda: "nccl")
    monkeypatch.setattr(c10d, "_abort_process_group", lambda: events.append(f"aborted {error_file.exists()}"))
    monkeypatch.setenv("RANK", "0")
    with (
        pytest.raises(ValueError, match="bad batch"),
        worker.process_group({"backend": "nccl"}, torch.device("cuda", 0), tmp_path),
    ):
        raise ValueError("bad batch")
    assert events == ["joined", "aborted True"]  # written first, then aborted; never destroyed
    assert "ValueError: bad batch" in error_file.read_text()


def test_every_rank_applies_the_tf32_setting_and_records_it(monkeypatch, four_gpus, tmp_path):
    rank_environment(monkeypatch, rank=0, world_size=1, local_rank=0, local_world_size=1)
    worker.set_tf32(True)  # as a process may start: PyTorch lets cuDNN convolutions use TF32 by default
    worker.prepare_rank({"device": "cpu"})
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    worker.write_rank_result(tmp_path, 0, 1, {"backend": "gloo"}, "cpu", {})
    assert '"tf32": false' in (tmp_path / "rank0.json").read_text()
    worker.prepare_rank({"device": "cpu", "tf32": True})
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    worker.set_tf32(False)
