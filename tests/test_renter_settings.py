"""helpers.renter_settings: which settings apply where, what each switches, and the comparison's sums."""

import pytest
import torch

from helpers import renter_settings
from helpers.results import ResultStore


def test_a_cpu_times_only_what_changes_something_there_and_says_why_not_the_rest():
    every = ["tf32", "cudnn_benchmark", "fused_adam", "bf16", "all"]
    assert renter_settings.applicable(every, "cuda") == (["float32", *every], {})
    chosen, skipped = renter_settings.applicable(every, "cpu")
    assert chosen == ["float32", "fused_adam", "bf16"]
    assert skipped == {
        "tf32": "TF32 is a CUDA tensor-core format",
        "cudnn_benchmark": "cuDNN runs only on GPUs",
        "all": "on a CPU it would be fused Adam with bf16 alone",
    }
    assert renter_settings.applicable(["tf32"], "cpu") == ([], {"tf32": "TF32 is a CUDA tensor-core format"})
    assert renter_settings.applicable([], "cuda") == ([], {})
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['fp8'\]"):
        renter_settings.applicable(["fp8"], "cuda")


def test_the_switches_are_the_study_s_again_afterwards_even_on_error():
    with renter_settings.switched_on("all"):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert torch.backends.cudnn.benchmark
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert not torch.backends.cudnn.benchmark
    with pytest.raises(RuntimeError), renter_settings.switched_on("tf32"):
        raise RuntimeError("a failed timing")
    assert not torch.backends.cuda.matmul.allow_tf32


def test_each_setting_reaches_the_training_step_as_it_says(monkeypatch):
    seen = {}

    def fake(model, train_set, *, autocast_dtype, optimizer_options, **settings):
        seen[model] = (autocast_dtype, optimizer_options, torch.backends.cudnn.benchmark,
                       torch.backends.cuda.matmul.allow_tf32)  # fmt: skip
        return {}

    monkeypatch.setattr(renter_settings, "time_training_steps", fake)
    for setting in renter_settings.SETTINGS:
        renter_settings.time_setting(setting, None, setting, batch_size=2)
    assert seen == {
        "float32": (None, None, False, False),
        "tf32": (None, None, False, True),
        "cudnn_benchmark": (None, None, True, False),
        "fused_adam": (None, {"fused": True}, False, False),
        "bf16": (torch.bfloat16, None, False, False),
        "all": (torch.bfloat16, {"fused": True}, True, True),
    }


def test_fused_adam_really_runs_fused():
    # the optimizer the timed step builds, asked what it is: fused, on the CPU as on CUDA
    from helpers.train import make_optimizer

    fused = make_optimizer("adam", [torch.nn.Parameter(torch.zeros(3))], 1e-3, fused=True)
    assert fused.defaults["fused"] is True and not fused.defaults["foreach"]


def test_rounds_interleave_and_each_model_is_held_against_its_own_float32(tmp_path, monkeypatch):
    order = []
    step = {("A", "float32"): 0.010, ("A", "bf16"): 0.005, ("A", "fused_adam"): 0.010,
            ("B", "float32"): 0.040, ("B", "bf16"): 0.010, ("B", "fused_adam"): 0.020}  # fmt: skip

    def fake(model, train_set, setting, **settings):
        order.append((model, setting))
        seconds = step[model, setting] * (1 + 0.01 * len(order) % 3)
        return {"step_seconds_all": [seconds] * 4}

    monkeypatch.setattr(renter_settings, "time_setting", fake)
    store = ResultStore("test", root=tmp_path, hardware={"machine": "test"})
    clips = torch.utils.data.TensorDataset(torch.zeros(6, 1), torch.zeros(6))
    found = renter_settings.settings_comparison(
        store, ["A", "B"], clips, ["tf32", "bf16", "fused_adam"], 2, batch_size=2, device="cpu"
    )
    # round by round, every model's every setting, the strict float32 first
    per_round = [(m, s) for m in "AB" for s in ("float32", "bf16", "fused_adam")]
    assert order == per_round * 2
    assert found["skipped"] == {"tf32": "TF32 is a CUDA tensor-core format"}
    assert len(found["steps"]) == 2 * 6 * 4
    assert found["speedups"]["B", "bf16"]["speedup"] == pytest.approx(4.0, rel=0.03)
    assert found["speedups"]["A", "fused_adam"]["verdict"] == "no measurable difference"
    # measured once: the same comparison again reads the store
    again = renter_settings.settings_comparison(
        store, ["A", "B"], clips, ["bf16", "fused_adam"], 2, batch_size=2, device="cpu"
    )
    assert len(order) == 12 and again["steps"].equals(found["steps"])
    table = renter_settings.settings_table(found)
    assert table.loc[("B", "bf16 autocast"), "against strict float32"] == "faster, 3.96× (3.75–4.19×)"
    assert table.loc[("A", "strict float32 (the study's)"), "against strict float32"] == "—"
    sentence = renter_settings.settings_sentence(found)
    assert sentence.startswith(
        "`A`, a strict float32 step of 10.4 ms (10.1–10.7, 8 steps): bf16 autocast 1.98× faster; fused Adam "
        "changed nothing measurable. `B`, a strict float32 step of"
    )
    assert "bf16 autocast 3.96× and fused Adam 1.96× faster." in sentence
    assert sentence.endswith("Not timed on this device: TF32 on (TF32 is a CUDA tensor-core format).")
    # a slower setting is said as the time it takes: a speed-up of 0.8 takes 1/0.8 = 1.25 times as long
    fused = {**found["speedups"]["A", "fused_adam"], "speedup": 0.8, "verdict": "slower"}
    slowed = {**found, "speedups": {**found["speedups"], ("A", "fused_adam"): fused}}
    assert "bf16 autocast 1.98× faster; fused Adam slower, taking 1.25× as long. `B`" in (
        renter_settings.settings_sentence(slowed)
    )
    assert renter_settings.settings_answer(found).startswith("each against strict float32: `A` bf16 autocast")
    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        renter_settings.settings_comparison(store, ["A"], clips, ["bf16"], 0, batch_size=2)
