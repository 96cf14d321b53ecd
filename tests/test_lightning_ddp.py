"""helpers.lightning_ddp: real two-rank Gloo launches of the Lightning worker, against helpers.ddp."""

import math

import pytest
import torch
from conftest import LAUNCH_CONFIG

from helpers import launch, lightning_ddp, models, worker
from helpers.results import ResultStore

# Every test that launches Lightning needs it; the one for when it is absent fakes its absence.
needs_lightning = pytest.mark.skipif(not lightning_ddp.available(), reason="lightning is not installed")

CONFIG = LAUNCH_CONFIG


@pytest.mark.usefixtures("recordings", "no_leftovers")
@needs_lightning
def test_lightning_trains_exactly_like_the_hand_written_worker(tmp_path, plain_launch):
    results = launch.launch(
        CONFIG, 2, module=lightning_ddp.MODULE, time_limit_seconds=120, output=tmp_path / "lightning"
    )
    gradient_bytes = models.parameter_bytes(models.build_model("LinearNet"))
    assert [r["rank"] for r in results] == [0, 1]
    for result in results:
        assert result["world_size"] == 2 and result["threads"] == 1  # two ranks share this machine's cores
        assert result["cluster_environment"] == "TorchElasticEnvironment"  # torchrun's, not Lightning's own
        assert result["strategy"] == "DDPStrategy" and result["framework"].startswith("lightning 2.")
        sampler = {"type": "GlobalBatchSampler", "seed": 0, "per_rank_batch": 10}
        assert result["sampler"] == sampler  # helpers.ddp's, not Lightning's DistributedSampler
        assert [row["samples"] for row in result["history"]] == [20, 20]  # each rank sees half of 40 clips
        assert all(math.isfinite(row["train_loss"]) and row["epoch_seconds"] > 0 for row in result["history"])
        assert [sum(step) for step in result["bucket_bytes_per_step"]] == [gradient_bytes] * 4
    summary = lightning_ddp.summarize_lightning_run(results)
    assert summary["steps"] == 4 and summary["all_reduced_bytes_per_step"] == gradient_bytes
    assert 0 <= summary["test_accuracy"] <= 1 and 0 <= summary["train_accuracy"] <= 1
    assert summary["method"].endswith("epoch 2 between barriers")
    for result in results:  # every bucket of every step timed in the hook, on every rank
        assert [len(step) for step in result["bucket_seconds_per_step"]] == [1] * 4
        assert all(0 < seconds < 60 for step in result["bucket_seconds_per_step"] for seconds in step)

    # Same seed, weights, sampler, batches and optimizer: the same numbers as helpers.ddp (its launch of
    # CONFIG, shared with the launcher's tests).
    by_hand, _ = plain_launch
    for lightning_rank, hand_rank in zip(results, by_hand, strict=True):
        for ours, theirs in zip(lightning_rank["history"], hand_rank["history"], strict=True):
            assert ours["step_losses"] == pytest.approx(theirs["step_losses"], rel=1e-5)
            assert len(ours["step_seconds"]) == len(theirs["step_seconds"]) == 2
    assert results[0]["history"][-1]["test_accuracy"] == by_hand[0]["history"][-1]["test_accuracy"]


@pytest.mark.usefixtures("recordings", "no_leftovers")
@needs_lightning
def test_a_rank_failing_inside_fit_is_named_and_nothing_hangs(tmp_path):
    # Rank 0 would wait for rank 1 inside fit until its process group's 120 s timeout: the launch's own
    # 90 s limit would stop it first, and raise "exceeded its 90 s limit", unless the failure of rank 1
    # ends the launch at once.
    config = {**CONFIG, "fail_rank": 1, "timeout_seconds": worker.MAX_TIMEOUT_SECONDS}
    assert worker.group_timeout(config).total_seconds() > 90
    with pytest.raises(launch.LaunchError, match=r"rank (0, )?1 failed"):
        launch.launch(config, 2, module=lightning_ddp.MODULE, time_limit_seconds=90, output=tmp_path)
    assert "RuntimeError: rank 1 fails on purpose" in (tmp_path / "rank1.error").read_text()


@needs_lightning
def test_the_dp_strategy_and_the_gpus_argument_are_gone():
    status = lightning_ddp.dp_strategy_status()
    assert status.startswith("ValueError: You selected an invalid strategy name: `strategy='dp'`")
    # Lightning 2.0.0's changelog: "Removed the `Trainer(gpus=...)` argument" (#16171): every one-liner
    # of the seed passed it, so each fails before its strategy is even looked at
    statuses = lightning_ddp.one_liner_status()
    gone = "TypeError: Trainer.__init__() got an unexpected keyword argument 'gpus'"
    assert statuses["Trainer(gpus=2, strategy='ddp')"] == statuses["Trainer(gpus=2, strategy='dp')"] == gone
    assert statuses["Trainer(accelerator='cpu', devices=1, strategy='dp')"] == status


@needs_lightning
def test_stored_run_uses_the_ddp_settings_and_is_reused(tmp_path, monkeypatch):
    history = [{"epoch": 1, "epoch_seconds": 2.0, "train_loss": 2.0, "test_accuracy": 0.5,
                "train_accuracy": 0.4}]  # fmt: skip
    rank = {"world_size": 2, "history": history, "bucket_bytes_per_step": [[100], [100]],
            "gradient_bytes": 100, "threads": 1, "framework": "lightning 2.x", "strategy": "DDPStrategy",
            "cluster_environment": "TorchElasticEnvironment",
            "sampler": {"type": "GlobalBatchSampler"}}  # fmt: skip
    calls = []

    def fake_launch(config, world_size, **options):
        calls.append((config, world_size, options))
        return [rank, {**rank, "rank": 1}]

    monkeypatch.setattr(lightning_ddp, "launch", fake_launch)
    store = ResultStore("test", root=tmp_path, hardware={"machine": "test"})
    record = lightning_ddp.stored_lightning_run(store, 2, model="ConvNet", epochs=1)
    assert record["kind"] == "lightning_run"
    assert record["config"]["lightning"] == lightning_ddp.lightning_version()
    assert record["result"]["epoch_seconds"] == 2.0 and record["result"]["sampler"] == "GlobalBatchSampler"
    config, world_size, options = calls[0]
    assert options["module"] == "helpers.lightning_ddp" and world_size == 2 and config["model"] == "ConvNet"
    assert "kind" not in config and "lightning" not in config and "launch" not in config
    again = lightning_ddp.stored_lightning_run(store, 2, model="ConvNet", epochs=1)
    assert again == record and len(calls) == 1  # reused, not launched again
    lightning_ddp.stored_lightning_run(store, 2, launch_number=1, model="ConvNet", epochs=1)
    assert len(calls) == 2  # another launch of the same settings is a measurement of its own
    with pytest.raises(ValueError, match="unknown DDP setting"):
        lightning_ddp.stored_lightning_run(store, 2, batchsize=10)


def test_without_lightning_the_module_imports_and_says_how_to_install(monkeypatch):
    monkeypatch.setattr(lightning_ddp, "pl", None)
    assert not lightning_ddp.available()
    with pytest.raises(ModuleNotFoundError, match=r"pip install -e \.\[lightning\]"):
        lightning_ddp.stored_lightning_run(None, 2)
    assert lightning_ddp.dp_strategy_status().startswith("not checked: ")


def test_lightning_refuses_to_share_a_gpu_between_ranks():
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    config = {**CONFIG, "device": "cuda"}
    with pytest.raises(ValueError, match="Lightning runs one rank per GPU" if gpus else "no CUDA device"):
        lightning_ddp.check_lightning_request(config, gpus + 1)


def test_lightning_is_compared_at_the_largest_size_it_can_run_and_says_what_it_skipped(monkeypatch):
    # One GPU, Gloo on CUDA tensors at 1, 2 and 4 ranks (the gpu profile of chapter 3): the hand-written
    # worker shares the GPU, Lightning cannot, so the comparison falls back to one rank and says why.
    monkeypatch.setattr(worker, "visible_gpus", lambda: 1)
    settings = {"backend": "gloo", "device": "cuda", "global_batch_size": 100}
    size, skipped = lightning_ddp.planned_ranks([1, 2, 4], settings)
    assert size == 1 and [reason.split(":")[0] for reason in skipped] == ["4 ranks", "2 ranks"]
    assert all("Lightning runs one rank per GPU" in reason for reason in skipped)
    monkeypatch.setattr(worker, "visible_gpus", lambda: 4)
    assert lightning_ddp.planned_ranks([1, 2, 4], settings) == (4, [])


def test_when_lightning_can_run_nothing_the_comparison_is_empty_and_says_why(monkeypatch):
    monkeypatch.setattr(worker, "visible_gpus", lambda: 1)
    monkeypatch.setattr(lightning_ddp, "stored_ddp_run", lambda *a, **k: pytest.fail("launched"))
    settings = {"backend": "gloo", "device": "cuda", "global_batch_size": 100}
    frameworks = lightning_ddp.compare(None, ["LinearNet"], [2, 4], settings)
    assert frameworks["launches"].empty and frameworks["table"].empty and frameworks["ranks"] is None
    assert frameworks["note"].startswith("Not compared: Lightning can run none of the sizes. Skipped 4 ranks")


def test_a_round_launches_lightning_at_the_size_the_comparison_reads(monkeypatch):
    launched = []
    monkeypatch.setattr(worker, "visible_gpus", lambda: 1)
    monkeypatch.setattr(
        lightning_ddp, "stored_lightning_run",
        lambda store, size, launch_number, **config: launched.append((config["model"], size, launch_number)),
    )  # fmt: skip
    settings = {"backend": "gloo", "device": "cuda", "global_batch_size": 100}
    lightning_ddp.launch_round(None, ["LinearNet"], [1, 2, 4], settings, 2)
    assert launched == [("LinearNet", 1, 2)]  # one GPU: Lightning's one rank, round 2
    lightning_ddp.launch_round(None, ["LinearNet"], [2, 4], settings, 0)
    assert launched == [("LinearNet", 1, 2)]  # no size it can run: nothing launched


@needs_lightning
def test_the_comparison_table_says_identical_losses_in_words(monkeypatch):
    def run(seconds):
        return {"result": {"step_seconds_all": [seconds] * 3, "train_loss": 1.5,
                           "history": [{"step_losses": [2.0, 1.5]}]}}  # fmt: skip

    numbers = []  # the hand-written launch each Lightning launch is set against
    monkeypatch.setattr(
        lightning_ddp, "stored_ddp_run", lambda *a, **k: numbers.append(k["launch_number"]) or run(1.0)
    )
    monkeypatch.setattr(lightning_ddp, "stored_lightning_run", lambda *a, **k: run(2.0))
    settings = {"backend": "gloo", "device": "cpu", "global_batch_size": 20}
    frameworks = lightning_ddp.compare(None, ["LinearNet"], [2], settings, launches=3)
    assert numbers == [0, 1, 2]  # the sweep's own launches of these settings, round by round
    table = frameworks["table"].set_index("framework")
    lightning = f"Lightning {lightning_ddp.lightning_version()}"
    # the same losses at every step: no difference to print in scientific notation
    assert table.loc[lightning, "loss difference (relative)"] == "0 (identical)"
    # by hand 1.0 s, Lightning 2.0 s in every launch: Lightning's speed-up over it is 0.5, twice as long
    assert (
        table.loc[lightning, "against by hand"]
        == "slower, taking 2.00× as long (2.00–2.00×, 3 launches each)"
    )
    assert frameworks["note"] == "Compared at 2 ranks, 3 launches each."
