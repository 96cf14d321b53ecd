"""helpers.launch: real torchrun launches of helpers.ddp with Gloo, and every way one must end cleanly."""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
from conftest import TEST_TAG, shared_launch, worker_processes

from helpers import ddp, hardware, launch, lightning_ddp, models, worker

RECORDED = Path(__file__).parent / "data"

CONFIG = dict(
    backend="gloo", device="cpu", model="LinearNet", seed=0, train_samples=40, test_samples=20,
    global_batch_size=20, epochs=1, optimizer="adam", lr=1e-3, bucket_cap_mb=25, timeout_seconds=60,
)  # fmt: skip


@pytest.fixture(autouse=True)
def checked(recordings, no_leftovers):
    """Every test here needs the recordings and must leave no process behind."""
    yield


# LinearNet's parameters from its last layer back (DDP's order): 10 + 100 + 10 + 1,000 + 100 + 100,000
# floats = 404,880 B close a 0.25 MiB (262,144 B) bucket with Linear(1000, 100)'s weight; the first layer's
# 1,000 + 12,000,000 floats = 48,004,000 B form the next. At 25 MiB the bucket is still under its cap when
# that 46 MiB weight arrives: one bucket of all 48,408,880 B.
BUCKETS = {("LinearNet", 25): [48_408_880], ("LinearNet", 0.25): [404_880, 48_004_000]}


# The SGD run that two ranks take step by step beside one process: launched once, read by the tests of
# its parity and of its bytes (a launch costs 5–10 s here, most of it starting torchrun and its ranks).
FOLLOWED = {**CONFIG, "optimizer": "sgd", "lr": 0.05, "epochs": 2}


@shared_launch(scope="module")
def followed(recordings, tmp_path_factory) -> dict[int, list[dict]]:
    """``FOLLOWED`` launched on one rank and on two, once for the module: {ranks: results}. Like every
    launch here it must leave no process behind."""
    return {k: launch.launch(FOLLOWED, k, time_limit_seconds=120, output=tmp_path_factory.mktemp(f"f{k}"))
            for k in (1, 2)}  # fmt: skip


def launched_for_bytes(model: str, bucket_cap_mb: float, request, output: Path) -> list[dict]:
    """Two ranks' results at ``bucket_cap_mb``: the shared ``FOLLOWED`` run where it has these settings
    (only that case asks for it: the others neither wait for it nor fail with it)."""
    if (model, bucket_cap_mb) == (FOLLOWED["model"], FOLLOWED["bucket_cap_mb"]):
        return request.getfixturevalue("followed")[2]
    config = {**CONFIG, "model": model, "bucket_cap_mb": bucket_cap_mb, "global_batch_size": 8,
              "train_samples": 16}  # fmt: skip
    return launch.launch(config, 2, time_limit_seconds=120, output=output)


@pytest.mark.parametrize(
    ("model", "bucket_cap_mb"), [("LinearNet", 25), ("LinearNet", 0.25), ("ConvNet", 0.5)]
)
def test_all_reduced_bytes_per_step_equal_the_gradient_bytes(tmp_path, model, bucket_cap_mb, request):
    results = launched_for_bytes(model, bucket_cap_mb, request, tmp_path)
    expected = models.parameter_bytes(models.build_model(model))
    for result in results:
        steps = sum(len(row["step_seconds"]) for row in result["history"])
        assert result["gradient_bytes"] == expected and steps >= 2
        assert [sum(step) for step in result["bucket_bytes_per_step"]] == [expected] * steps
        assert result["threads"] == 1  # two ranks share this machine's cores
        timed = result["bucket_seconds_per_step"]  # each bucket's all-reduce, timed in the hook
        assert [len(step) for step in timed] == [len(step) for step in result["bucket_bytes_per_step"]]
        assert all(0 < seconds < 60 for step in timed for seconds in step)
    if model == "ConvNet":
        assert len(results[0]["bucket_bytes_per_step"][-1]) > 1  # a 0.5 MB cap splits 1.5 MB of gradients
    else:  # after the first step, when DDP has rebuilt its buckets
        assert results[0]["bucket_bytes_per_step"][-1] == BUCKETS[model, bucket_cap_mb]
    assert [r["rank"] for r in results] == [0, 1] and "test_accuracy" in results[0]["history"][-1]


def test_a_failing_rank_is_named_quickly(tmp_path):
    # Rank 0 waits for rank 1 in a collective until its process group's 120 s timeout: the launch's own
    # 90 s limit would stop it first and raise "exceeded its 90 s limit" unless the failure of rank 1
    # ends the launch at once.
    config = {**CONFIG, "fail_rank": 1, "timeout_seconds": worker.MAX_TIMEOUT_SECONDS}
    assert worker.group_timeout(config).total_seconds() > 90
    with pytest.raises(launch.LaunchError, match="rank 1 failed: RuntimeError: rank 1 fails on purpose"):
        launch.launch(config, 2, time_limit_seconds=90, output=tmp_path)


def test_a_launch_over_its_limit_is_stopped(tmp_path, no_leftovers):
    with pytest.raises(launch.LaunchError, match="exceeded its 6 s limit"):
        launch.launch(
            {**CONFIG, "epochs": 1000, "train_samples": 200}, 2, time_limit_seconds=6, output=tmp_path
        )
    assert (tmp_path / "torchrun-node0.log").exists()  # it had started
    assert not list(tmp_path.glob("rank*.json"))  # and was stopped before 1,000 epochs, not after
    assert not worker_processes(no_leftovers)  # torchrun and its ranks are gone when the error arrives


def test_two_nodes_meet_over_loopback(two_node_launch):
    output, results = two_node_launch
    assert [(r["rank"], r["world_size"]) for r in results] == [(0, 2), (1, 2)]
    assert (output / "logs-node0").is_dir() and (output / "logs-node1").is_dir()


def test_a_failing_node_ends_the_wait_for_the_others_at_once(tmp_path):
    """Node 1 fails while node 0 would wait for it until its process group timed out: node 0 is stopped
    as soon as node 1 has exited, well inside the limit (which, if the wait were node by node, would
    raise instead)."""
    waiting = [sys.executable, "-c", "import time; time.sleep(600)"]
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    launch.run_processes([waiting, failing], time_limit_seconds=120, logs=tmp_path)
    with pytest.raises(launch.LaunchError, match="exceeded its 2 s limit"):
        launch.run_processes([waiting, waiting], time_limit_seconds=2, logs=tmp_path)


def test_impossible_requests_are_refused_before_starting():
    with pytest.raises(ValueError, match="NCCL only moves CUDA tensors"):
        launch.check_request("nccl", "cpu", 1)
    with pytest.raises(ValueError, match="backend must be one of"):
        launch.check_request("mpi", "cpu", 2)
    with pytest.raises(ValueError, match="positive integer"):
        launch.check_request("gloo", "cpu", 0)
    with pytest.raises(ValueError, match="not divisible by 3 ranks"):
        launch.launch(CONFIG, 3)
    with pytest.raises(ValueError, match="cannot be split evenly over 2 nodes"):
        launch.launch({**CONFIG, "global_batch_size": 30}, 3, nodes=2)
    with pytest.raises(ValueError, match="no CUDA device"):
        launch.check_request("gloo", "cuda", 1, gpus=0)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert worker.usable_gpus() == gpus and worker.usable_gpus(gpus=0) == 0
    with pytest.raises(ValueError, match="NCCL refuses two ranks on one GPU" if gpus else "no CUDA device"):
        launch.check_request("nccl", "cuda", gpus + 1)


@pytest.mark.parametrize("compression", ["fp16", "bf16"])
def test_compression_halves_the_all_reduced_bytes(tmp_path, compression):
    config = {**CONFIG, "compression": compression}
    results = launch.launch(config, 2, time_limit_seconds=120, output=tmp_path)
    assert [sum(step) for step in results[0]["bucket_bytes_per_step"]] == [48_408_880 // 2] * 2


def test_the_launcher_s_rules_are_the_same_on_every_machine():
    rules, reasons = launch.backend_rules(world_size=2, gpu_counts=(0, 1, 2))
    assert rules.reset_index().values.tolist() == [
        ["gloo", "cpu", "yes", "yes", "yes"], ["gloo", "cuda", "no", "yes", "yes"],
        ["nccl", "cpu", "no", "no", "no"], ["nccl", "cuda", "no", "no", "yes"],
    ]  # fmt: skip
    assert list(rules.columns) == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert [reason.split(":")[0] for reason in reasons] == [
        "device 'cuda' asked for, but no CUDA device is visible", "NCCL only moves CUDA tensors",
        "NCCL needs one GPU per rank",
    ]  # fmt: skip


def test_backend_table_and_multi_node_command():
    table = {(row["backend"], row["tensors on"]): row for row in launch.backend_support()}
    assert table[("gloo", "cpu")]["2 ranks here"] and table[("gloo", "cpu")]["reason"] == ""
    assert not table[("nccl", "cpu")]["2 ranks here"]
    assert "NCCL only moves CUDA tensors" in table[("nccl", "cpu")]["reason"]
    command = launch.multi_node_command(nodes=2, ranks_per_node=4, head_address="10.0.0.1")
    assert command.startswith("torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500")
    assert "--nproc-per-node=4" in command and command.endswith(
        "-m helpers.ddp --config config.json --output results"
    )


def test_run_plan_gives_the_reason_and_the_main_backend_is_the_first_that_runs():
    plan = launch.run_plan(["nccl", "gloo"], "cpu", [1, 2])
    assert plan[["backend", "ranks", "runs"]].values.tolist() == [
        ["nccl", 1, False], ["nccl", 2, False], ["gloo", 1, True], ["gloo", 2, True]
    ]  # fmt: skip
    assert plan["reason"].iloc[0].startswith("NCCL only moves CUDA tensors")
    assert launch.main_backend(plan) == "gloo"
    with pytest.raises(ValueError, match="no backend can run 2 ranks"):
        launch.main_backend(launch.run_plan(["nccl"], "cpu", [1, 2]))


def test_collect_names_the_rank_whose_error_came_first(tmp_path):
    (tmp_path / "rank1.error").write_text("Traceback\nValueError: unknown model 'Nope'")
    os.utime(tmp_path / "rank1.error", (1_000, 1_000))
    (tmp_path / "rank0.error").write_text("Traceback\nRuntimeError: Connection closed by peer")
    cause = r"^rank 1 failed: ValueError: unknown model 'Nope' \(then rank 0"
    with pytest.raises(launch.LaunchError, match=cause):
        launch.collect(tmp_path, 2)


def test_a_rank_aborted_by_nccl_s_watchdog_is_an_echo_of_the_rank_that_wrote_its_error(tmp_path):
    # NCCL's watchdog kills the waiting peer with SIGABRT, possibly before torchrun sees the failing rank
    # exit: the rank that wrote its error is the cause, the aborted one its echo.
    report = (RECORDED / "torchrun-rank1-sigkill.log").read_text()
    report = report.replace("exitcode  : -9 (pid: 2490)", "exitcode  : -6 (pid: 2490)")
    (tmp_path / "torchrun-node0.log").write_text(report.replace("Signal 9 (SIGKILL)", "Signal 6 (SIGABRT)"))
    (tmp_path / "rank0.error").write_text("Traceback\nValueError: unknown model 'Nope'")
    with pytest.raises(launch.LaunchError, match=r"^rank 0 failed: ValueError: unknown model 'Nope' "
                       r"\(then rank 1 \(SIGABRT\), after it\)"):  # fmt: skip
        launch.collect(tmp_path, 2)
    (tmp_path / "rank0.error").unlink()  # alone, the abort is reported with what it usually means
    with pytest.raises(launch.LaunchError, match=r"^rank 1 was killed by SIGABRT .*NCCL's watchdog"):
        launch.collect(tmp_path, 2)


def rank_process(rank: int, timeout: float = 60) -> psutil.Process:
    """The live helpers.ddp process of ``rank`` that this test launched (found by its environment: its
    rank and the test's tag, never another run's rank), waiting for it to start."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in worker_processes(os.environ[TEST_TAG]):
            try:
                is_ddp_worker = "helpers.ddp" in " ".join(process.cmdline())
                if is_ddp_worker and process.environ().get("RANK") == str(rank):
                    return process
            except psutil.Error:  # ended meanwhile
                continue
        time.sleep(0.2)
    raise TimeoutError(f"rank {rank} never started")


def connected(one: psutil.Process, other: psutil.Process) -> bool:
    """Whether the two processes hold the two ends of one TCP connection: Gloo connects every pair of
    ranks while they join their process group (the rendezvous store is torchrun's, not a rank's)."""
    ends = {(c.laddr, c.raddr) for c in one.net_connections("tcp") if c.raddr}
    return any((c.raddr, c.laddr) in ends for c in other.net_connections("tcp") if c.raddr)


def test_a_rank_killed_by_a_signal_is_named_with_the_signal(tmp_path):
    failure = {}

    def run() -> None:
        try:
            launch.launch({**CONFIG, "epochs": 1000, "train_samples": 200}, 2, time_limit_seconds=120,
                          output=tmp_path)  # fmt: skip
        except launch.LaunchError as error:
            failure["error"] = str(error)

    thread = threading.Thread(target=run)
    thread.start()
    ranks = rank_process(0), rank_process(1)
    deadline = time.monotonic() + 60
    while not connected(*ranks):  # past their start: both have joined the process group
        assert thread.is_alive() and time.monotonic() < deadline, "the ranks never joined their group"
        time.sleep(0.1)
    ranks[1].send_signal(signal.SIGKILL)  # what the kernel's out-of-memory killer does
    thread.join(timeout=90)
    assert not thread.is_alive()
    assert failure["error"].startswith("rank 1 was killed by SIGKILL (exit code -9)")
    assert (tmp_path / "torchrun-node0.log").exists()


def test_torchrun_report_names_the_first_failure_before_the_echoes(tmp_path):
    shutil.copy(RECORDED / "torchrun-rank1-sigkill.log", tmp_path / "torchrun-node0.log")
    assert launch.first_failures(tmp_path) == [
        {"rank": 1, "exitcode": -9, "signal": "SIGKILL", "time": "2026-11-23_06:08:17",
         "log": "torchrun-node0.log"}
    ]  # fmt: skip
    (tmp_path / "rank0.error").write_text("Traceback\nRuntimeError: Connection closed by peer")
    with pytest.raises(
        launch.LaunchError, match=r"^rank 1 was killed by SIGKILL .*\(then rank 0, after it\)"
    ):
        launch.collect(tmp_path, 2)


def test_a_temporary_run_folder_goes_after_success_and_stays_after_failure(
    tmp_path, monkeypatch, plain_launch
):
    results, left = plain_launch  # launched without an output folder, into a temporary one
    assert [result["rank"] for result in results] == [0, 1] and left == []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(launch.LaunchError, match="the run's logs are kept in") as raised:
        launch.launch({**CONFIG, "fail_rank": 0}, 2, time_limit_seconds=120)
    kept = [path for path in tmp_path.iterdir() if str(path) in str(raised.value)]
    assert len(kept) == 1 and (kept[0] / "logs").is_dir()


def test_lightning_refuses_nodes_simulated_on_one_machine_s_gpus(monkeypatch):
    monkeypatch.setattr(worker, "visible_gpus", lambda: 4)
    config = {**CONFIG, "device": "cuda", "backend": "nccl"}
    lightning_ddp.check_lightning_request(config, 2)  # two ranks on four GPUs, one node: fine
    with pytest.raises(ValueError, match="nodes simulated on one machine would put two ranks on one GPU"):
        lightning_ddp.check_lightning_request(config, 2, nodes=2)


def test_two_ranks_follow_one_process_step_by_step(followed):
    one, two = followed[1][0], followed[2][0]
    parity = ddp.loss_parity({"result": one}, {"result": two})
    assert parity["steps"] == 4 and parity["largest_rel_difference"] < 1e-5  # float32 rounding only
    assert [len(row["step_seconds"]) for row in two["history"]] == [2, 2]


def test_what_is_measured_here_and_what_is_not():
    statement = launch.measured_statement(launch.run_plan(["nccl", "gloo"], "cpu", [1, 2]))
    assert statement.startswith("**Measured here:** Gloo (up to 2 ranks).")
    assert "**Not measured here: NCCL** — NCCL only moves CUDA tensors" in statement


def test_gpus_that_forbid_sharing_are_refused_before_a_cuda_launch_starts(monkeypatch):
    # Gloo ranks sharing a GPU, or a rank beside the notebook's kernel, need the Default compute mode.
    listed = "\n".join(
        f"{index}, NVIDIA A100-SXM4-80GB, 81920, {mode}, 580.65.06, 00000000:0{index}:00.0, GPU-{index}aaa"
        for index, mode in enumerate(["Default", "Exclusive_Process"])
    )
    monkeypatch.setattr(worker, "visible_gpus", lambda: 2)
    monkeypatch.setattr(
        hardware, "_run", lambda command: listed if "--query-gpu" in " ".join(command) else None
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    launch.check_request("gloo", "cuda", 1)  # GPU 0 is shareable
    with pytest.raises(ValueError, match=r"GPU 1 \(nvidia-smi GPU 1\) is in compute mode Exclusive_Process"):
        launch.check_request("gloo", "cuda", 3)  # three ranks on two GPUs: GPU 1 would be shared
    described = hardware.Machine.from_gpu_list(listed)
    assert "Exclusive_Process" in launch.Request("helpers.ddp", 2, {**CONFIG, "device": "cuda"}).refusal(
        described
    )
    launch.check_request("gloo", "cpu", 3, machine=described)  # CPU ranks need no GPU


def test_this_build_s_support_has_one_row_per_backend():
    table = launch.support_here()
    assert table.index.tolist() == ["gloo", "nccl", "mpi"]
    assert table.columns.tolist() == [
        "compiled into this torch", "2 ranks here, CPU tensors", "2 ranks here, CUDA tensors"
    ]  # fmt: skip
    rows = {(row["backend"], row["tensors on"]): row for row in launch.backend_support()}
    for backend in table.index:  # one verdict per backend, the same for both devices: no contradiction
        built = {rows[backend, device]["in this build"] for device in ("cpu", "cuda")}
        assert table.loc[backend, "compiled into this torch"] == ("yes" if built == {True} else "no")
    # NCCL moves CUDA tensors only, on every machine
    assert table.loc["nccl", "2 ranks here, CPU tensors"] == "no"
    assert table.loc["gloo", "2 ranks here, CPU tensors"] == "yes"
