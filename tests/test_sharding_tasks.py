"""helpers.sharding.tasks: real Gloo launches of every strategy — what each rank holds equals the
arithmetic, the collectives counted equal the expected ones, and the losses equal DDP's."""

import pytest
import torch
import torch.distributed as dist

from helpers.launch import launch
from helpers.sharding import runs, tasks

SETTINGS = {"train_samples": 16, "global_batch_size": 8, "steps": 3}


@pytest.fixture(autouse=True)
def checked(recordings, no_leftovers):
    """Every launch here needs the recordings and must leave no process behind."""
    yield


def test_the_counter_records_each_call_and_restores_torch_distributed(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        counter = tasks.CollectiveCounter()
        real = dist.all_reduce
        with counter.step():
            dist.all_reduce(torch.ones(10))
            dist.broadcast(tensor=torch.ones(3, dtype=torch.float64), src=0)
            output = torch.empty(4)
            dist.all_gather_into_tensor(output, torch.ones(4))
        assert counter.steps == [[("all_reduce", 40), ("broadcast", 24), ("all_gather_into_tensor", 16)]]
        assert dist.all_reduce is real
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("model", ["LinearNet", "ConvNet"])
def test_every_strategy_holds_and_moves_what_the_arithmetic_says(model):
    records = []
    for strategy in tasks.STRATEGIES:
        config = runs.sharding_config(model=model, strategy=strategy, **SETTINGS)
        results = launch(config, 2, module=runs.WORKER, time_limit_seconds=180)
        records.append({"config": {**config, "world_size": 2}, "result": runs.summarize_sharding(results)})
    memory = runs.memory_check(records)
    assert memory["as computed"].all(), memory.to_string()
    traffic = runs.traffic_check(records)
    assert traffic["as expected"].all(), traffic.to_string()
    assert all(record["result"]["same_collectives_on_every_rank"] for record in records)
    parity = runs.loss_parity(records)
    assert (parity["largest loss difference"] < 1e-5).all(), parity.to_string()
