"""helpers.sharding.tasks: real Gloo launches of every strategy — what each rank holds equals the
arithmetic, the collectives counted equal the expected ones, and the losses equal DDP's."""

import pytest
import torch
import torch.distributed as dist
from conftest import shared_launch

from helpers.sharding import runs, tasks

SETTINGS = {"train_samples": 16, "global_batch_size": 8, "steps": 3}


MODELS = ("LinearNet", "ConvNet")


@shared_launch(scope="module")
def series(recordings) -> list[dict]:
    """Every strategy of both models, in one launch of two Gloo ranks (``runs.run_sharding_series``): a
    check of bytes and losses needs no independent launches. It must leave no process behind."""
    runs_ = [{"model": model, "strategy": strategy} for model in MODELS for strategy in tasks.STRATEGIES]
    return runs.run_sharding_series(2, runs_, time_limit_seconds=300, **SETTINGS)


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


@pytest.mark.parametrize("model", MODELS)
def test_every_strategy_holds_and_moves_what_the_arithmetic_says(series, model):
    records = [record for record in series if record["config"]["model"] == model]
    assert [record["result"]["strategy"] for record in records] == list(tasks.STRATEGIES)
    assert all(record["config"]["strategy"] == record["result"]["strategy"] for record in records)
    memory = runs.memory_check(records)
    assert memory["as computed"].all(), memory.to_string()
    traffic = runs.traffic_check(records)
    assert traffic["as expected"].all(), traffic.to_string()
    assert all(record["result"]["same_collectives_on_every_rank"] for record in records)
    parity = runs.loss_parity(records)
    assert (parity["largest loss difference"] < 1e-5).all(), parity.to_string()


@pytest.mark.usefixtures("no_leftovers")
def test_a_run_in_a_series_is_the_run_launched_alone(series):
    """A series shares one process group; each run in it still holds, sends and learns exactly what it
    does launched alone (issue 39: the shared launch loses no coverage)."""
    alone = runs.run_sharding(2, 180, **{**SETTINGS, "model": "ConvNet", "strategy": "fsdp"})
    shared = next(
        r for r in series if r["config"]["model"] == "ConvNet" and r["config"]["strategy"] == "fsdp"
    )
    assert shared["config"] == alone["config"]
    for key in ("strategy", "stage", "held_bytes", "collectives", "same_collectives_on_every_rank"):
        assert shared["result"][key] == alone["result"][key], key
    assert shared["result"]["step_losses"] == pytest.approx(alone["result"]["step_losses"], rel=1e-6)


def test_a_series_refuses_runs_its_one_process_group_cannot_hold():
    """Each run's record would claim settings the shared processes never had: refused before a launch."""
    with pytest.raises(ValueError, match="its runs need one backend, not 'gloo' and 'nccl'"):
        runs.run_sharding_series(2, [{"strategy": "ddp"}, {"strategy": "ddp", "backend": "nccl"}], **SETTINGS)
    with pytest.raises(ValueError, match="unknown sharding setting"):  # each run would overwrite the last
        runs.run_sharding_series(2, [{"strategy": "ddp", "save_parameters": True}], **SETTINGS)
