"""The same DDP training with PyTorch Lightning, started by torchrun like the hand-written worker (chapter 3).

The seed lecture's one-liners, brought up to date: ``Trainer(accelerator="gpu", devices=k, strategy="ddp")``
is Lightning's DistributedDataParallel. Lightning 2.0 removed both the ``Trainer(gpus=...)`` argument every
one-liner of the seed passed and the single-process DataParallel strategy (``strategy="dp"``);
``one_liner_status`` asks the installed Lightning what it says to each of them today.

``python -m torch.distributed.run --nproc-per-node K -m helpers.lightning_ddp --config C --output DIR``
runs it; ``helpers.launch.launch(config, K, module="helpers.lightning_ddp")`` does the same through
``helpers.torchrun``. Lightning
recognises torchrun's environment variables (its ``TorchElasticEnvironment``), so it starts no processes
of its own: each rank builds a ``Trainer`` with ``devices=LOCAL_WORLD_SIZE`` and joins the process group.
Model, data, seed, optimizer, per-rank batch, the sampler (``helpers.ddp.GlobalBatchSampler``, given to
the Trainer with ``use_distributed_sampler=False``), bucket size and the traffic-recording hook are those
of ``helpers.ddp``, so the two workers' rank files, and their summaries, compare line by line.

Lightning is an optional extra (``pip install -e .[lightning]``): without it this module still imports,
``available()`` is False and ``stored_lightning_run`` refuses with that instruction.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader

from helpers.data import load_fsdd, take
from helpers.ddp import (
    GlobalBatchSampler,
    TrafficRecorder,
    check_timed_steps,
    ddp_config,
    launch_steps,
    loss_parity,
    median_of_medians,
    recording_allreduce_hook,
    stored_ddp_run,
    summarize_run,
)
from helpers.ddp_results import relative_difference
from helpers.launch import check_launch, launch
from helpers.models import build_model, parameter_bytes
from helpers.stats import describe_speedup, launch_speedup, significant
from helpers.train import counted, evaluate, make_optimizer, to_device
from helpers.worker import (
    group_timeout,
    leave_after_error,
    prepare_rank,
    usable_gpus,
    worker_main,
    write_rank_error,
    write_rank_result,
)

try:
    import lightning.pytorch as pl
    from lightning.pytorch.strategies import DDPStrategy
except ModuleNotFoundError:  # the optional extra is not installed
    pl = DDPStrategy = None

INSTALL_HINT = "PyTorch Lightning is an optional extra of this study: pip install -e .[lightning]"
MODULE = "helpers.lightning_ddp"

# Without Lightning the classes below still have to be definable, so that this module imports.
_LightningModule = pl.LightningModule if pl else nn.Module
_Callback = pl.Callback if pl else object


def available() -> bool:
    """Whether PyTorch Lightning is installed (the ``[lightning]`` extra)."""
    return pl is not None


def lightning_version() -> str:
    """The installed Lightning's version; ModuleNotFoundError with the install command without it."""
    if not available():
        raise ModuleNotFoundError(INSTALL_HINT)
    return pl.__version__


def quiet_lightning() -> None:
    """Silence Lightning's banners ("GPU available: ...", tips) and its advice-only warnings in a rank.

    Errors still surface; the rank's stdout and stderr go to the launcher's per-rank logs anyway.
    """
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    warnings.filterwarnings("ignore", category=PossibleUserWarning)
    warnings.filterwarnings("ignore", module=r"lightning\..*")


SEED_ONE_LINERS = {  # the seed lecture's Lightning 1.x calls with k = 2 GPUs, and "dp" without gpus=
    "Trainer(gpus=2, strategy='dp')": {"gpus": 2, "strategy": "dp"},
    "Trainer(gpus=2, strategy='ddp')": {"gpus": 2, "strategy": "ddp"},
    "Trainer(accelerator='cpu', devices=1, strategy='dp')": {
        "accelerator": "cpu", "devices": 1, "strategy": "dp"
    },
}  # fmt: skip


def trainer_status(**arguments) -> str:
    """What the installed Lightning says to ``Trainer(**arguments)``: the error's type and message, or the
    strategy it chose. Builds the Trainer only (no model, no process started); arguments that ask for GPUs
    are refused by name before any device is looked at."""
    if not available():
        return f"not checked: {INSTALL_HINT}"
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    try:
        trainer = pl.Trainer(
            **arguments, logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False,
        )  # fmt: skip
    except (TypeError, ValueError, MisconfigurationException) as error:
        return f"{type(error).__name__}: {error}"
    return f"lightning {pl.__version__} accepted it, as {type(trainer.strategy).__name__}"


def one_liner_status() -> dict[str, str]:
    """``trainer_status`` of each of the seed's one-liners (``SEED_ONE_LINERS``)."""
    return {call: trainer_status(**arguments) for call, arguments in SEED_ONE_LINERS.items()}


def dp_strategy_status() -> str:
    """What the installed Lightning says to the seed lecture's ``Trainer(strategy="dp")``, on the CPU."""
    return trainer_status(strategy="dp", accelerator="cpu", devices=1)


class Classifier(_LightningModule):
    """``build_model(name)`` with cross-entropy and ``make_optimizer``: what ``helpers.ddp`` trains.

    The weights are those of ``torch.manual_seed(seed)`` then ``build_model``, as in the hand-written worker.
    Each rank keeps its own batch losses over the epoch (no ``self.log``: no extra synchronisation).
    ``traffic`` counts the steps for the recording communication hook.
    """

    def __init__(self, config: dict, traffic: TrafficRecorder) -> None:
        super().__init__()
        torch.manual_seed(config["seed"])
        self.model = build_model(config["model"])
        self.config = config
        self.traffic = traffic
        self.losses, self.seen = [], 0

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.model(inputs)

    def on_train_epoch_start(self) -> None:
        self.losses, self.seen = [], 0

    def training_step(self, batch, batch_index: int) -> torch.Tensor:
        if self.config.get("fail_rank") == self.global_rank:
            raise RuntimeError(f"rank {self.global_rank} fails on purpose (fail_rank={self.global_rank})")
        inputs, targets = batch
        loss = nn.functional.cross_entropy(self(inputs), targets)
        self.losses.append(loss.detach())
        self.seen += len(targets)
        return loss

    def on_before_backward(self, loss: torch.Tensor) -> None:
        self.traffic.next_step()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return make_optimizer(self.config["optimizer"], self.parameters(), self.config["lr"])


class EpochRecorder(_Callback):
    """Times each epoch between barriers, as ``helpers.ddp`` does, and evaluates on rank 0 afterwards.

    It also registers the traffic-recording communication hook on Lightning's DistributedDataParallel
    (Lightning registers hooks itself only on CUDA, and this one must run on the CPU too).
    """

    def __init__(self, test_set, traffic: TrafficRecorder) -> None:
        self.test_set, self.traffic = test_set, traffic
        self.history: list[dict] = []

    def on_fit_start(self, trainer, pl_module) -> None:
        trainer.strategy.model.register_comm_hook(self.traffic, recording_allreduce_hook)
        self.test_set = to_device(self.test_set, pl_module.device)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        trainer.train_dataloader.batch_sampler.set_epoch(trainer.current_epoch)  # Lightning would not
        trainer.strategy.barrier()
        self.started = self.last = time.perf_counter()
        self.step_seconds = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_index) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        now = time.perf_counter()
        self.step_seconds.append(now - self.last)
        self.last = now
        self.traffic.settle()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        trainer.strategy.barrier()
        seconds = time.perf_counter() - self.started
        losses = torch.stack(pl_module.losses)
        torch.distributed.all_reduce(losses)  # the global batch's loss: the mean of the ranks' means
        losses = (losses / trainer.world_size).tolist()
        row = {
            "epoch": trainer.current_epoch + 1,
            "train_loss": sum(losses) / len(losses),
            "epoch_seconds": seconds,
            "step_seconds": self.step_seconds,
            "step_losses": losses,
            "samples": pl_module.seen,
        }
        last = trainer.current_epoch + 1 == trainer.max_epochs
        if trainer.global_rank == 0 and last:  # once, after training, as helpers.ddp does
            row["test_loss"], row["test_accuracy"] = evaluate(pl_module.model, self.test_set)
        self.history.append(row)


def check_lightning_request(config: dict, world_size: int, nodes: int = 1, machine=None) -> None:
    """The launcher's checks with Lightning's own rules (``helpers.launch.check_launch`` for this module):
    one rank per GPU (no sharing, even with gloo), and, since Lightning places each rank on the GPU of its
    local rank, no simulated nodes on one machine's GPUs (their local ranks would collide)."""
    check_launch(config, world_size, nodes, machine, MODULE)


def train_rank(config: dict, output: Path) -> None:
    """Train with Lightning's DDP strategy on this rank and write ``rank<r>.json``."""
    if not available():
        raise ModuleNotFoundError(INSTALL_HINT)
    quiet_lightning()
    local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
    if config["device"] == "cuda" and local_world_size > usable_gpus(config.get("gpus")):
        raise ValueError(
            f"Lightning runs one rank per GPU; {local_world_size} ranks on one node are too many"
        )
    rank, world_size, _ = prepare_rank(config)  # threads per rank; Lightning places the model itself
    pl.seed_everything(config["seed"], verbose=False)
    fsdd = load_fsdd(download=False)
    train_set = take(fsdd.split("train"), config.get("train_samples"), config["seed"])
    test_set = take(fsdd.split("test"), config.get("test_samples"), config["seed"])
    sampler = GlobalBatchSampler(
        len(train_set), config["global_batch_size"], world_size, rank, config["seed"]
    )
    loader = DataLoader(train_set, batch_sampler=sampler)
    traffic = TrafficRecorder(config.get("compression"), cuda=config["device"] == "cuda")
    module = Classifier(config, traffic)
    recorder = EpochRecorder(test_set, traffic)
    timeout = group_timeout(config)
    strategy = DDPStrategy(
        process_group_backend=config["backend"], timeout=timeout, bucket_cap_mb=config["bucket_cap_mb"]
    )
    trainer = pl.Trainer(
        accelerator="gpu" if config["device"] == "cuda" else "cpu",
        devices=local_world_size,
        num_nodes=world_size // local_world_size,
        strategy=strategy,
        max_epochs=config["epochs"],
        callbacks=[recorder],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # keep helpers.ddp's sampler: the same batches on the same ranks
    )
    try:
        trainer.fit(module, loader)
        rank = trainer.global_rank
        history = recorder.history
        if rank == 0:
            _, history[-1]["train_accuracy"] = evaluate(module.model, to_device(train_set, module.device))
        used = trainer.train_dataloader.batch_sampler
        write_rank_result(
            output,
            rank,
            trainer.world_size,
            config,
            module.device,
            {
                "history": history,
                "bucket_bytes_per_step": traffic.buckets,
                "bucket_seconds_per_step": traffic.seconds,
                "bucket_marks_per_step": traffic.marks,
                "gradient_bytes": parameter_bytes(module.model),
                "framework": f"lightning {pl.__version__}",
                "strategy": type(trainer.strategy).__name__,
                "cluster_environment": type(trainer.strategy.cluster_environment).__name__,
                "sampler": {
                    "type": type(used).__name__,
                    "seed": getattr(used, "seed", None),
                    "per_rank_batch": getattr(used, "per_rank", None),
                },
            },
        )
    except BaseException:  # the error file first, then leave without waiting for peers (helpers.worker)
        write_rank_error(output)
        leave_after_error()
        raise
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def main() -> NoReturn:
    """Entry point for torchrun: ``-m helpers.lightning_ddp --config CONFIG.json --output DIR``."""
    return worker_main(train_rank, main.__doc__)


def summarize_lightning_run(results: list[dict], warmup_steps: int = 0) -> dict:
    """``helpers.ddp.summarize_run`` of the rank files, plus what Lightning chose (rank 0's view)."""
    first = results[0]
    return {
        **summarize_run(results, warmup_steps),
        "framework": first["framework"],
        "strategy": first["strategy"],
        "cluster_environment": first["cluster_environment"],
        "sampler": first["sampler"]["type"],
    }


def stored_lightning_run(
    store, world_size: int, time_limit_seconds: float = 900, launch_number: int = 0, **settings
) -> dict:
    """``helpers.ddp.stored_ddp_run`` with Lightning: the same settings, kind ``lightning_run``, and
    ``launch_number`` numbering independent launches of them.

    A finished identical run (same settings, launch number and Lightning version, on this hardware) is
    reused.
    """
    if not available():
        raise ModuleNotFoundError(INSTALL_HINT)
    config = {"kind": "lightning_run", "world_size": world_size, "launch": launch_number,
              "lightning": lightning_version(), **ddp_config(**settings)}  # fmt: skip
    check_timed_steps(config)
    worker = {k: v for k, v in config.items() if k not in ("kind", "world_size", "launch", "lightning")}
    check_lightning_request(worker, world_size)
    return store.measure(
        config,
        lambda: summarize_lightning_run(
            launch(worker, world_size, module=MODULE, time_limit_seconds=time_limit_seconds),
            config["warmup_steps"],
        ),
    )


def planned_ranks(world_sizes, settings: dict, machine=None) -> tuple[int | None, list[str]]:
    """The largest of ``world_sizes`` that Lightning can run with ``settings`` here (or on the described
    ``machine``), and why each larger one cannot (``check_lightning_request``'s reasons): the hand-written
    worker's sizes, cut where Lightning's one-rank-per-GPU rule refuses them, so that a one-GPU machine
    still compares the two at one rank."""
    skipped = []
    for size in sorted(set(world_sizes), reverse=True):
        try:
            check_lightning_request(ddp_config(**settings), size, machine=machine)
        except ValueError as error:
            skipped.append(f"{counted(size, 'rank')}: {error}")
            continue
        return size, skipped
    return None, skipped


def launch_round(store, models, world_sizes, settings: dict, number: int) -> None:
    """Lightning's launch ``number`` of each of ``models`` at ``planned_ranks``' size (nothing where it
    can run none): round ``number`` of ``compare``, run by ``ddp.run_sweeps`` beside that round's
    hand-written launches."""
    size, _ = planned_ranks(world_sizes, settings)
    for name in models if size else []:
        stored_lightning_run(store, size, launch_number=number, **{**settings, "model": name})


def compare(store, models, world_sizes, settings: dict, launches: int = 3) -> dict:
    """The hand-written DDP worker against Lightning on each of ``models``, through the store, at the
    largest of ``world_sizes`` that Lightning can run here (``planned_ranks``), ``launches`` rounds:
    Lightning's launch n against the hand-written launch n of the same settings. Both are reused from the
    store where the chapter's rounds (``ddp.run_sweeps`` with ``launch_round`` alongside) measured them
    side by side; a comparison of launches made far apart would measure whatever else changed in between.

    Returns ``launches`` (one row per launch: model, framework, launch, its median step; empty when
    nothing could run), ``table`` (per model and framework: the median over launches of the launch
    medians, Lightning's speed-up over the hand-written loop across launches, the last training loss and
    the largest per-step relative loss difference from the hand-written run of the same launch, "0
    (identical)" where none differs),
    ``ranks`` (the size compared, or None) and ``note`` (one sentence: what was compared and what was
    skipped, with the reasons).
    """
    size, skipped = planned_ranks(world_sizes, settings)
    lightning = f"Lightning {lightning_version()}" if size else ""
    runs = []
    for number in range(launches if size else 0):
        for name in models:
            configured = {**settings, "model": name}
            by_hand = stored_ddp_run(store, size, launch_number=number, **configured)
            by_lightning = stored_lightning_run(store, size, launch_number=number, **configured)
            runs += [({"model": name, "framework": "by hand", "launch": number}, by_hand),
                     ({"model": name, "framework": lightning, "launch": number}, by_lightning)]  # fmt: skip
    rows = []
    for name in models if size else []:
        hand, ours = (launch_steps(runs, model=name, framework=f) for f in ("by hand", lightning))
        change = launch_speedup(hand, ours)
        pairs = zip(launch_records(runs, name, "by hand"), launch_records(runs, name, lightning), strict=True)
        difference = relative_difference(max(loss_parity(a, b)["largest_rel_difference"] for a, b in pairs))
        for framework, steps in (("by hand", hand), (lightning, ours)):
            last = launch_records(runs, name, framework)[0]["result"]
            ours_row = framework == lightning
            rows.append({"model": name, "framework": framework,
                         "step time (s)": significant(median_of_medians(steps)),
                         "against by hand": describe_speedup(change) if ours_row else "",
                         "train loss": f"{last['train_loss']:.4g}",
                         "loss difference (relative)": difference if ours_row else ""})  # fmt: skip
    compared = (
        f"Compared at {counted(size, 'rank')}, {counted(launches, 'launch')} each."
        if size
        else "Not compared: Lightning can run none of the sizes."
    )
    note = " ".join([compared, *(f"Skipped {reason}." for reason in skipped)])
    medians = [{**variation, "step time (s)": statistics.median(record["result"]["step_seconds_all"])}
               for variation, record in runs]  # fmt: skip
    return {"launches": pd.DataFrame(medians), "table": pd.DataFrame(rows), "ranks": size, "note": note}


def launch_records(runs: list[tuple[dict, dict]], model: str, framework: str) -> list[dict]:
    """The records of ``model`` with ``framework`` among ``runs``, in launch order."""
    return [record for v, record in runs if v["model"] == model and v["framework"] == framework]


if __name__ == "__main__":
    sys.exit(main())
