"""Launch worker modules with torchrun, safely: the parent side (chapter 3; chapter 4 reuses it).

``launch`` checks the request before starting anything (NCCL needs one GPU per rank: it refuses two
ranks on one GPU), then runs torchrun standalone — whose rendezvous takes a free port, so two launches
never collide — with per-rank logs, a wall-clock limit and clean-up of every process on error, interrupt
or timeout. torchrun is started as ``python -m helpers.torchrun``: torchrun itself, ended without
Python's teardown once it succeeded. Results come back through the files the ranks write
(``helpers.worker``), never through their console output; torchrun's own report is kept in the run's
folder, so that a rank killed by a signal is named with the signal.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from helpers import worker
from helpers.hardware import Machine, sharing_refusal
from helpers.processes import stop_process_tree
from helpers.train import counted
from helpers.worker import ALL_RANKS_HERE

BACKENDS = ("gloo", "nccl")
# torchrun's summary of the first rank to fail: "Root Cause (first observed failure):" then its fields
ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?time\s*:\s*(?P<time>\S+).*?rank\s*:\s*(?P<rank>\d+)"
    r".*?exitcode\s*:\s*(?P<exitcode>-?\d+)",
    re.DOTALL,
)


BACKEND_NAMES = {"gloo": "Gloo", "nccl": "NCCL", "mpi": "MPI"}  # as readers write them


def placement_words(backend: str, device: str) -> str:
    """A backend and the tensors its ranks hand it, as a reader says them: ``Gloo with CUDA tensors``."""
    return f"{BACKEND_NAMES.get(backend, backend)} with {device.upper()} tensors"


class LaunchError(RuntimeError):
    """A launch that failed, timed out, or whose ranks reported an error."""


def check_request(
    backend: str, device: str, world_size: int, gpus: int | None = None, machine: Machine | None = None
) -> None:
    """Refuse, with the reason, what cannot work, before any process starts.

    Gloo may share GPUs between ranks (``helpers.worker.gpu_index`` deals them round-robin); NCCL may not.
    GPUs in a compute mode that allows one process per GPU are refused for every CUDA launch (the
    notebook or gpu-check beside the ranks holds a context too). ``machine`` (default: this one) is
    what a plan describes; ``gpus`` caps the GPUs the launch may use.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, not {world_size!r}")
    visible = machine.gpus if machine is not None else worker.visible_gpus()
    gpus = visible if gpus is None else min(gpus, visible)
    if device == "cuda" and gpus == 0:
        raise ValueError("device 'cuda' asked for, but no CUDA device is visible")
    if backend == "nccl":
        if device != "cuda":
            raise ValueError("NCCL only moves CUDA tensors: use device 'cuda', or the gloo backend for CPU")
        if world_size > gpus:
            raise ValueError(
                f"NCCL needs one GPU per rank: {world_size} ranks asked for, {counted(gpus, 'GPU')} visible "
                "(NCCL refuses two ranks on one GPU; use gloo to share a GPU between ranks)"
            )
    if device == "cuda":
        used = list(range(min(world_size, gpus)))
        refusal = machine.sharing_refusal(used) if machine is not None else sharing_refusal(used)
        if refusal:
            raise ValueError(refusal)


def without_advice(refusal: str) -> str:
    """A refusal of ``check_request`` as a statement: what is wrong, without the advice in parentheses."""
    return refusal.split(" (")[0]


def check_launch(
    config: dict, world_size: int, nodes: int = 1, machine: Machine | None = None, module: str = "helpers.ddp"
) -> None:
    """Everything ``launch`` refuses before it starts a process (the plan of a profile asks the same):
    ``check_request``, a global batch the ranks cannot split evenly, ranks the nodes cannot split evenly,
    and the worker's own rules (Lightning: one rank per GPU)."""
    check_request(config["backend"], config["device"], world_size, config.get("gpus"), machine)
    if "global_batch_size" in config and config["global_batch_size"] % world_size:
        raise ValueError(
            f"global_batch_size {config['global_batch_size']} is not divisible by {world_size} ranks"
        )
    if world_size % nodes:
        raise ValueError(f"{world_size} ranks cannot be split evenly over {nodes} nodes")
    if module == "helpers.lightning_ddp" and config["device"] == "cuda":
        visible = machine.gpus if machine is not None else worker.visible_gpus()
        gpus = visible if config.get("gpus") is None else min(config["gpus"], visible)
        if world_size // nodes > gpus:
            raise ValueError(
                f"Lightning runs one rank per GPU: {world_size // nodes} ranks per node asked for, "
                f"{counted(gpus, 'GPU')} usable (the hand-written helpers.ddp worker can share GPUs with "
                "gloo; Lightning cannot)"
            )
        if nodes > 1:
            raise ValueError(
                "Lightning places each rank on the GPU of its local rank, so nodes simulated on one machine "
                "would put two ranks on one GPU; run the helpers.ddp worker for that, or one node per machine"
            )


@dataclass(frozen=True, eq=False)
class Request:
    """One launch as planned: the worker module, its ranks, its configuration and its nodes."""

    module: str
    world_size: int
    config: dict
    nodes: int = 1

    def refusal(self, machine: Machine | None = None) -> str | None:
        """Why ``launch`` would refuse this on ``machine`` (None: it would start)."""
        try:
            check_launch(self.config, self.world_size, self.nodes, machine, self.module)
        except ValueError as error:
            return str(error)
        return None


def torchrun_command(
    world_size: int,
    config_path: Path,
    output: Path,
    logs: Path,
    rendezvous: list[str],
    module: str = "helpers.ddp",
) -> list:
    """The torchrun command line for ``world_size`` local ranks of the worker ``module``; torchrun polls
    its ranks every 0.1 s (its default), so that it notices their end within a tenth of a second."""
    return [
        sys.executable, "-m", "helpers.torchrun", *rendezvous,
        f"--nproc-per-node={world_size}", "--max-restarts=0", "--monitor-interval=0.1",
        "--log-dir", str(logs), "--redirects", "3",
        "-m", module, "--config", str(config_path), "--output", str(output),
    ]  # fmt: skip


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9, or ``signal 99`` for a number Python does not know."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def first_failures(output: Path) -> list[dict]:
    """torchrun's "first observed failure" of each node in ``output/torchrun-node*.log``.

    Each entry: the global ``rank``, torchrun's ``exitcode`` (negative: killed by that signal), the
    ``signal`` name where there is one, and torchrun's ``time`` (to the second).
    """
    failures = []
    for log in sorted(output.glob("torchrun-node*.log")):
        for match in ROOT_CAUSE.finditer(log.read_text(errors="replace")):
            exitcode = int(match["exitcode"])
            failures.append(
                {
                    "rank": int(match["rank"]),
                    "exitcode": exitcode,
                    "signal": signal_name(-exitcode) if exitcode < 0 else None,
                    "time": match["time"],
                    "log": log.name,
                }
            )
    return failures


# NCCL's watchdog aborts a rank whose collective timed out or whose communicator saw a peer fail: a rank
# killed by SIGABRT may be the echo of another rank's error, never proof of being the first to fail.
ECHO_SIGNALS = ("SIGABRT",)


def collect(output: Path, ranks: int) -> list[dict]:
    """Every rank's result file; LaunchError naming the rank that failed first, and how.

    The cause is, in order: a rank that torchrun saw killed by a signal that no peer sends (SIGKILL from
    the out-of-memory killer, SIGSEGV: it could write no error file), the first ``rank<r>.error``
    written, a rank killed by SIGABRT (NCCL's watchdog: often the echo of a peer's failure, so it comes
    after any error file), a rank that exited with an error code but no traceback, and ranks that wrote
    no result.
    """
    errors = sorted(output.glob("rank*.error"), key=lambda path: path.stat().st_mtime)
    errored = {path.stem.removeprefix("rank") for path in errors}
    deaths = sorted(first_failures(output), key=lambda f: (f["time"], f["signal"] is None))
    signalled = [f for f in deaths if f["signal"] and str(f["rank"]) not in errored]
    killed = [f for f in signalled if f["signal"] not in ECHO_SIGNALS]
    aborted = [f for f in signalled if f["signal"] in ECHO_SIGNALS]
    echoes = ", ".join(path.stem.removeprefix("rank") for path in errors)
    if killed:
        first = killed[0]
        after = f" (then rank {echoes}, after it)" if echoes else ""
        raise LaunchError(
            f"rank {first['rank']} was killed by {first['signal']} (exit code {first['exitcode']})"
            f"{after}; torchrun's report: {output / first['log']}"
        )
    if errors:  # the first error written is the cause; the others are usually its echo ("connection closed")
        cause = errors[0].read_text().strip().splitlines()[-1]
        others = [path.stem.removeprefix("rank") for path in errors[1:]]
        others += [f"{f['rank']} ({f['signal']})" for f in aborted]
        echo = f" (then rank {', '.join(others)}, after it)" if others else ""
        raise LaunchError(f"rank {errors[0].stem.removeprefix('rank')} failed: {cause}{echo}")
    if aborted:
        first = aborted[0]
        raise LaunchError(
            f"rank {first['rank']} was killed by {first['signal']} (exit code {first['exitcode']}), as "
            f"NCCL's watchdog does when a collective times out; torchrun's report: {output / first['log']}"
        )
    if deaths:
        first = deaths[0]
        raise LaunchError(
            f"rank {first['rank']} exited with code {first['exitcode']} without a traceback; "
            f"see {output / first['log']} and the rank logs beside it"
        )
    missing = [rank for rank in range(ranks) if not (output / f"rank{rank}.json").exists()]
    if missing:
        raise LaunchError(f"rank(s) {missing} wrote no result; see the logs in {output}")
    return [json.loads((output / f"rank{rank}.json").read_text()) for rank in range(ranks)]


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_rendezvous(nodes: int, endpoint: str, run_id: str) -> list[str]:
    """torchrun's options for one of ``nodes`` machines meeting at ``endpoint`` (c10d rendezvous)."""
    return [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}"]


def launch(
    config: dict,
    world_size: int,
    *,
    module: str = "helpers.ddp",
    nodes: int = 1,
    time_limit_seconds: float = 600,
    output: Path | None = None,
) -> list[dict]:
    """Run the worker ``module`` on ``world_size`` ranks; returns each rank's result, rank 0 first.

    ``config`` (JSON) reaches every rank; it names at least ``backend`` and ``device``.

    With ``nodes`` > 1 the ranks are split over that many torchrun "nodes" on this machine that meet
    through a c10d rendezvous on the loopback interface: the same command a multi-machine run uses,
    with the head node's address in place of 127.0.0.1. All of them share this machine's cores and
    GPUs, so the ranks are told to place themselves by global rank (``helpers.worker.gpu_index``).

    Without ``output`` the run's folder is temporary: removed after a successful launch, kept (and
    named in the error) after a failed one, for its logs.
    """
    check_launch(config, world_size, nodes, module=module)
    temporary = output is None
    output = Path(output or tempfile.mkdtemp(prefix=module.rsplit(".", 1)[-1] + "-"))
    output.mkdir(parents=True, exist_ok=True)
    config_path = output / "config.json"
    config_path.write_text(json.dumps({**config, ALL_RANKS_HERE: nodes > 1}, indent=1))
    if nodes == 1:
        commands = [
            torchrun_command(world_size, config_path, output, output / "logs", ["--standalone"], module)
        ]
    else:
        rendezvous = node_rendezvous(nodes, f"127.0.0.1:{free_port()}", output.name)
        commands = [
            torchrun_command(
                world_size // nodes, config_path, output, output / f"logs-node{node}", rendezvous, module
            )
            for node in range(nodes)
        ]
    try:
        run_processes(commands, time_limit_seconds, output)
        results = collect(output, world_size)
    except LaunchError as error:
        if temporary:
            raise LaunchError(f"{error} (the run's logs are kept in {output})") from None
        raise
    if temporary:
        shutil.rmtree(output, ignore_errors=True)
    return results


POLL_SECONDS = 0.1  # how often a launch's nodes are checked


def run_processes(commands: list[list], time_limit_seconds: float, logs: Path) -> None:
    """Start every command and wait until all have exited, one has failed, or the limit has passed;
    then stop every process tree still running.

    A node that fails ends the wait at once: its peers would otherwise sit in a collective until their
    process group's timeout. Command n's output goes to ``logs/torchrun-node<n>.log``. Only processes not
    yet waited for are stopped: a reaped process's PID may already belong to another program.
    """
    processes = []
    for node, command in enumerate(commands):
        with (logs / f"torchrun-node{node}.log").open("w") as log:
            processes.append(
                subprocess.Popen(command, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
            )
    deadline = time.monotonic() + time_limit_seconds
    try:
        while True:
            codes = [process.poll() for process in processes]
            if all(code == 0 for code in codes) or any(code not in (None, 0) for code in codes):
                return
            if time.monotonic() > deadline:
                raise LaunchError(f"the launch exceeded its {time_limit_seconds:.0f} s limit and was stopped")
            time.sleep(POLL_SECONDS)
    finally:
        for process in processes:
            stop_process_tree(process, grace_seconds=5)


def backend_support() -> list[dict]:
    """What this torch build and machine offer: each backend and device, whether a launch of two ranks may
    use it here, and the reason when it may not."""
    available = {
        "gloo": torch.distributed.is_gloo_available(),
        "nccl": torch.distributed.is_nccl_available(),
        "mpi": torch.distributed.is_mpi_available(),
    }
    rows = []
    for backend, built in available.items():
        for device in ("cpu", "cuda"):
            runs, reason = False, ""
            if not built:
                reason = "not built into this torch"
            elif backend == "mpi":
                reason = "built, but not used by this study"
            else:
                try:
                    check_request(backend, device, 2)
                    runs = True
                except ValueError as error:
                    reason = str(error)
            rows.append({"backend": backend, "tensors on": device, "in this build": built,
                         "2 ranks here": runs, "reason": reason})  # fmt: skip
    return rows


def support_here() -> pd.DataFrame:
    """``backend_support`` with one row per backend: whether it is compiled into this torch, and whether
    two ranks may start here with CPU and with CUDA tensors ("yes", "no", or "not used by this study"
    for a backend compiled in that the study never launches)."""
    rows: dict[str, dict] = {}
    for row in backend_support():
        entry = rows.setdefault(
            row["backend"],
            {"backend": row["backend"], "compiled into this torch": "yes" if row["in this build"] else "no"},
        )
        runs = "yes" if row["2 ranks here"] else "no"
        if row["in this build"] and row["backend"] not in BACKENDS:
            runs = "not used by this study"
        entry[f"2 ranks here, {row['tensors on'].upper()} tensors"] = runs
    return pd.DataFrame(list(rows.values())).set_index("backend")


def backend_rules(
    world_size: int = 2, gpu_counts: tuple[int, ...] = (0, 1, 2)
) -> tuple[pd.DataFrame, list[str]]:
    """The launcher's rules for ``world_size`` ranks, the same on every machine: for Gloo and NCCL with CPU
    or CUDA tensors, whether a machine with each of ``gpu_counts`` GPUs (described, not this one) may start
    them, and the distinct reasons for a refusal. This machine's own answer is ``backend_support``."""
    rows, reasons = [], []
    for backend in BACKENDS:
        for device in ("cpu", "cuda"):
            row = {"backend": backend, "tensors on": device}
            for gpus in gpu_counts:
                machine = Machine(gpus, compute_modes=("Default",) * gpus, described=True)
                column = f"{gpus} GPU{'' if gpus == 1 else 's'}"
                try:
                    check_request(backend, device, world_size, machine=machine)
                    row[column] = "yes"
                except ValueError as error:
                    row[column] = "no"
                    reasons += [] if str(error) in reasons else [str(error)]
            rows.append(row)
    return pd.DataFrame(rows).set_index(["backend", "tensors on"]), reasons


def run_plan(
    backends: list[str],
    device: str,
    world_sizes: list[int],
    gpus: int | None = None,
    machine: Machine | None = None,
):
    """Which (backend, ranks) pairs can run on ``machine`` (default: here) and, for those that cannot, the
    launcher's reason."""
    rows = []
    for backend in backends:
        for size in world_sizes:
            try:
                check_request(backend, device, size, gpus, machine)
                reason = ""
            except ValueError as error:
                reason = str(error)
            rows.append({"backend": backend, "ranks": size, "runs": not reason, "reason": reason})
    return pd.DataFrame(rows)


def measured_statement(plan: pd.DataFrame) -> str:
    """What a chapter measures on this machine and what it cannot, from its run plan: the backends that
    run here with their largest rank count, and each refused backend with the launcher's reason."""
    ran = plan.query("runs").groupby("backend", sort=False)["ranks"].max()
    refused = plan.query("not runs").drop_duplicates("backend")
    refused = refused[~refused["backend"].isin(ran.index)]
    parts = [
        "**Measured here:** "
        f"{', '.join(f'{BACKEND_NAMES.get(b, b)} (up to {k} ranks)' for b, k in ran.items()) or 'nothing'}."
    ]
    for row in refused.itertuples():
        parts.append(f"**Not measured here: {BACKEND_NAMES.get(row.backend, row.backend)}** — {row.reason}.")
    return " ".join(parts)


def main_backend(plan: pd.DataFrame) -> str:
    """The first backend of the plan that can run its largest number of ranks (it runs every section)."""
    largest = plan["ranks"].max()
    able = plan.query("ranks == @largest and runs")["backend"]
    if able.empty:
        raise ValueError(f"no backend can run {largest} ranks here:\n{plan.to_string(index=False)}")
    return able.iloc[0]


def multi_node_command(nodes: int, ranks_per_node: int, head_address: str = "HEAD_NODE_ADDRESS") -> str:
    """The torchrun line to type on each of ``nodes`` machines for a multi-node run of the worker."""
    rendezvous = node_rendezvous(nodes, f"{head_address}:29500", "gpu-study")
    command = torchrun_command(ranks_per_node, Path("config.json"), Path("results"), Path("logs"), rendezvous)
    return " ".join(["torchrun", *command[3:]])
