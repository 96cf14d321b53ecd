"""helpers.gpu_check: nothing runs without a GPU; the plan for N GPUs; the table and exit code; and every
check's own code run on the CPU."""

import json
from pathlib import Path

import pytest
import torch

from helpers import gpu_check, hardware, models


def test_without_a_gpu_it_says_so_and_runs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "visible_gpus", lambda: 0)
    monkeypatch.setattr(hardware, "_run", lambda command: None)  # no nvidia-smi: a CPU machine
    monkeypatch.setattr(gpu_check, "run_checks", lambda *a, **k: pytest.fail("ran a check without a GPU"))
    assert gpu_check.main([]) == 0
    assert "no CUDA device is visible on this machine; nothing to check" in capsys.readouterr().out


def paths(gpus: int) -> list[str]:
    return [check.path for check in gpu_check.planned_checks(gpus)]


def test_the_plan_for_one_gpu():
    planned = paths(1)
    assert [p for p in planned if p.startswith("DDP")] == ["DDP nccl, 1 rank", "DDP gloo on cuda, 2 ranks"]
    assert [p for p in planned if p.startswith("ring")] == ["ring collectives, gloo on cuda, 2 ranks"]
    assert [p for p in planned if p.startswith("DataParallel")] == ["DataParallel, 1 replica"]
    assert "NCCL, more ranks than GPUs" in planned and "peer copy GPU 0 → 1" not in planned
    for name in ("LinearNet", "ConvNet"):
        for path in ("training step", "bf16 autocast", "profiler trace", "memory"):
            assert f"{path}, {name}" in planned


def test_bf16_steps_on_16_clips_on_a_gpu_and_on_2_in_the_cpu_plan_of_the_tests():
    # a bf16 convolution is emulated on CPUs without bf16 units: ConvNet's 16 clips took 36 s on 2 cores
    def bf16_batches(checks) -> set[int]:
        return {check.run.args[-1] for check in checks if check.path.startswith("bf16 autocast")}

    assert bf16_batches(gpu_check.planned_checks(1)) == {16}
    assert bf16_batches(gpu_check.planned_checks(0, device="cpu")) == {2}


def test_the_plan_for_four_gpus():
    planned = paths(4)
    assert [p for p in planned if p.startswith("DDP nccl")] == [
        f"DDP nccl, {k} rank{'s' if k > 1 else ''}" for k in (1, 2, 3, 4)
    ]
    assert [p for p in planned if p.startswith("DDP gloo")] == [
        "DDP gloo on cuda, 2 ranks",
        "DDP gloo on cuda, 5 ranks",
    ]
    assert [p for p in planned if p.startswith("ring collectives, nccl")] == [
        f"ring collectives, nccl, {k} ranks" for k in (2, 3, 4)
    ]
    assert [p for p in planned if p.startswith("DataParallel")] == [
        f"DataParallel, {r} replica{'s' if r > 1 else ''}" for r in (1, 2, 3, 4)
    ]
    assert "peer copy GPU 0 → 1" in planned


def test_a_failing_check_becomes_a_row_and_the_exit_code(monkeypatch, tmp_path, capsys):
    def broken() -> str:
        raise RuntimeError("NCCL error: unhandled system error\nmore lines")

    checks = [
        gpu_check.Check("works", "nothing", lambda: "fine"),
        gpu_check.Check("breaks", "something", broken),
    ]
    monkeypatch.setattr(gpu_check, "visible_gpus", lambda: 1)
    monkeypatch.setattr(hardware, "cuda_problem", lambda: None)
    monkeypatch.setattr(gpu_check, "set_tf32", lambda enabled: None)
    monkeypatch.setattr(gpu_check, "planned_checks", lambda gpus: checks)
    monkeypatch.setattr(gpu_check, "load_fsdd", lambda: None)
    output = tmp_path / "check.json"
    assert gpu_check.main(["--output", str(output)]) == 1
    printed = capsys.readouterr().out
    assert "1 passed, 1 failed, 0 skipped" in printed
    written = json.loads(output.read_text())
    assert [row["result"] for row in written["checks"]] == [
        "pass: fine",
        "FAIL: RuntimeError: NCCL error: unhandled system error",
    ]
    assert written["hardware"]["cpu_model"]


def test_every_check_runs_its_own_code_on_the_cpu(recordings):
    table = gpu_check.run_checks(gpu_check.planned_checks(0, device="cpu"), progress=False)
    failed = table[~table["result"].str.startswith("pass")]
    assert failed.empty, failed.to_dict("records")
    assert set(table["path"]) >= {
        "training step, ConvNet", "bf16 autocast, LinearNet", "profiler trace, ConvNet",
        "DataParallel, 2 replicas", "DDP gloo on cpu, 2 ranks", "ring collectives, gloo on cpu, 2 ranks",
    }  # fmt: skip


def test_the_default_record_is_named_by_the_hardware():
    info = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}], "cpu_model": "x"}
    path = gpu_check.default_output(info)
    assert path.parent.name == "gpu-check" and path.name.startswith("nvidia-h100-80gb-hbm3-")


GPU_NAMES = {11: "NVIDIA GeForce GTX 1080 Ti", 24: "NVIDIA A10G", 40: "NVIDIA A100-SXM4-40GB",
             80: "NVIDIA H100 80GB HBM3"}  # fmt: skip


@pytest.mark.parametrize("gib", sorted(GPU_NAMES))
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_every_planned_check_on_a_described_machine_would_start(gpus, gib):
    machine = hardware.Machine.described_as(gpus, GPU_NAMES[gib], memory_gib=gib)
    table = gpu_check.plan_table(machine)
    assert not table["status"].str.startswith("refused").any(), table.query("status != 'runs'").to_dict(
        "records"
    )
    skipped = table[table["status"].str.startswith("skip")]["path"].tolist()
    assert skipped == (["sharded training, nccl on cuda, 2 ranks"] if gpus == 1 else [])
    checks = gpu_check.planned_checks(gpus, machine=machine)
    for check in checks:  # every launch's global batch divides over its ranks (3 and 5 ranks included)
        for request in check.launches:
            if "global_batch_size" in request.config:
                assert request.config["global_batch_size"] % request.world_size == 0
    windows = [check.window for check in checks if check.window]
    assert len(windows) == 2 and all(0 < low <= high for low, high in windows)


def test_the_memory_window_holds_chapter_one_s_count_and_says_which():
    # LinearNet per sample after forward: the input (48,000 B, which the first Linear keeps), the ReLU
    # outputs (4,000 and 400), the sigmoid's (40), the logits (40), log-softmax's output (40), the target
    # (int64, 8): 52,528 B. The seed's "every output twice" (17,840 B) leaves the input out.
    expected, low, high = gpu_check.memory_window("LinearNet")
    assert expected == 48_000 + 4_000 + 400 + 40 + 40 + 40 + 8 == 52_528
    assert (low, high) == (47_275, 57_780)
    assert (
        low <= expected <= high and not low <= models.activation_bytes_per_sample(models.LinearNet()) <= high
    )


class FakeAllocator:
    """CUDA's allocator counters for a model run on the CPU: a forward pass holds ``per_sample`` bytes per
    sample until the next reading starts, and the very first one also allocates a workspace that stays
    (as cuBLAS and cuDNN do on their first call)."""

    def __init__(self, per_sample: int, workspace: int) -> None:
        self.per_sample, self.workspace, self.kept, self.held = per_sample, workspace, 0, 0

    def forward(self, inputs: torch.Tensor) -> None:
        self.kept = self.workspace
        self.held = self.per_sample * len(inputs)

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: setattr(self, "held", 0))
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: self.kept + self.held)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: self.kept + 2 * self.held)


def test_the_memory_slope_is_not_bent_by_a_workspace_allocated_on_the_first_call(monkeypatch):
    """A 32 MiB workspace allocated by the first forward pass lands in no batch's reading: the warm-up
    pass pays it, so the growth per sample is what each sample holds, exactly."""
    fake = FakeAllocator(per_sample=52_528, workspace=32 * 2**20)
    fake.install(monkeypatch)
    build = models.build_model

    def counted(name):
        model = build(name)
        model.register_forward_pre_hook(lambda module, args: fake.forward(args[0]))
        return model

    monkeypatch.setattr(models, "build_model", counted)
    held, peak = gpu_check.held_and_peak_bytes_per_sample("LinearNet", "cpu", batches=(2, 6))
    assert (held, peak) == (52_528, 2 * 52_528)


def test_the_batch_of_every_ddp_check_is_sized_from_its_ranks():
    for ranks in (1, 2, 3, 5, 9):
        settings = gpu_check.ddp_settings("gloo", "cuda", ranks)
        assert settings["global_batch_size"] == 4 * ranks and settings["train_samples"] == 16 * ranks


def test_a_driver_too_old_for_torch_is_a_failure_with_the_driver_it_needs(monkeypatch, capsys):
    listed = "0, NVIDIA A100-SXM4-80GB, 81920, Default, 535.104.05, 00000000:07:00.0, GPU-1a2b3c4d"
    monkeypatch.setattr(
        hardware, "_run", lambda command: listed if "--query-gpu" in " ".join(command) else None
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(gpu_check, "run_checks", lambda *a, **k: pytest.fail("ran a check torch cannot run"))
    assert gpu_check.main([]) == 1
    printed = capsys.readouterr().err
    assert "nvidia-smi lists 1 GPU(s) with driver 535.104.05" in printed
    assert "needs NVIDIA driver >= 580" in printed


def test_plan_on_the_command_line(capsys):
    assert gpu_check.main(["--plan", "--gpus", "2", "--gpu-name", "NVIDIA A100-SXM4-40GB"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("gpu-check plan on 2x NVIDIA A100-SXM4-40GB (40 GiB), 16 cores (described)")
    assert "DDP gloo on cuda, 3 ranks" in printed and "0 refused, 0 skipped" in printed


def test_the_topology_check_compares_only_the_gpus_torch_sees(monkeypatch):
    matrix = (Path(__file__).parent / "data" / "nvidia-smi-topo-8gpu-nvlink.txt").read_text()
    monkeypatch.setattr(hardware, "fingerprint", lambda: {"gpu_topology": matrix})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert gpu_check.check_topology(2) == "2 GPUs, every pair NV18: a bonded set of 18 NVLinks"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.raises(gpu_check.CheckFailed, match="names 8 GPU"):
        gpu_check.check_topology(2)
