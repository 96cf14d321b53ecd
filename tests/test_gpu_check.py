"""helpers.gpu_check: nothing runs without a GPU; the plan for N GPUs; the table and exit code; and every
check's own code run on the CPU."""

import json

import pytest

from helpers import gpu_check


def test_without_a_gpu_it_says_so_and_runs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "visible_gpus", lambda: 0)
    monkeypatch.setattr(gpu_check, "run_checks", lambda *a, **k: pytest.fail("ran a check without a GPU"))
    assert gpu_check.main([]) == 0
    assert "no CUDA device is visible on this machine; nothing to check" in capsys.readouterr().out


def paths(gpus: int) -> list[str]:
    return [check.path for check in gpu_check.planned_checks(gpus)]


def test_the_plan_for_one_gpu():
    planned = paths(1)
    assert [p for p in planned if p.startswith("DDP")] == ["DDP nccl, 1 rank(s)", "DDP gloo on cuda, 2 ranks"]
    assert [p for p in planned if p.startswith("ring")] == ["ring collectives, gloo on cuda, 2 ranks"]
    assert [p for p in planned if p.startswith("DataParallel")] == ["DataParallel, 1 replica(s)"]
    assert "NCCL, more ranks than GPUs" in planned and "peer copy GPU 0 → 1" not in planned
    for name in ("LinearNet", "ConvNet"):
        for path in ("training step", "bf16 autocast", "profiler trace", "peak memory"):
            assert f"{path}, {name}" in planned


def test_the_plan_for_four_gpus():
    planned = paths(4)
    assert [p for p in planned if p.startswith("DDP nccl")] == [
        f"DDP nccl, {k} rank(s)" for k in (1, 2, 3, 4)
    ]
    assert [p for p in planned if p.startswith("DDP gloo")] == [
        "DDP gloo on cuda, 2 ranks",
        "DDP gloo on cuda, 5 ranks",
    ]
    assert [p for p in planned if p.startswith("ring collectives, nccl")] == [
        f"ring collectives, nccl, {k} ranks" for k in (2, 3, 4)
    ]
    assert [p for p in planned if p.startswith("DataParallel")] == [
        f"DataParallel, {r} replica(s)" for r in (1, 2, 3, 4)
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
    monkeypatch.setattr(gpu_check, "planned_checks", lambda gpus: checks)
    monkeypatch.setattr(gpu_check, "load_fsdd", lambda: None)
    output = tmp_path / "check.json"
    assert gpu_check.main(["--output", str(output)]) == 1
    printed = capsys.readouterr().out
    assert "1 passed, 1 failed" in printed
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
        "DataParallel, 2 replica(s)", "DDP gloo on cpu, 2 ranks", "ring collectives, gloo on cpu, 2 ranks",
    }  # fmt: skip


def test_the_default_record_is_named_by_the_hardware():
    info = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}], "cpu_model": "x"}
    path = gpu_check.default_output(info)
    assert path.parent.name == "gpu-check" and path.name.startswith("nvidia-h100-80gb-hbm3-")
