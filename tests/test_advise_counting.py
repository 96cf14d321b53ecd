"""helpers.advise.counting: any model counted exactly, checked by hand on a model written here; bad input
refused with one line naming what is wrong."""

import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from helpers.advise import counting
from helpers.costmodel import gpus
from helpers.models import build_model

TINY = """
from torch import nn


def build():
    return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))


def not_a_model():
    return 42


def broken():
    raise RuntimeError("no weights here")
"""


@pytest.fixture
def tiny_module(tmp_path, monkeypatch):
    """A model file a reader wrote, in the directory the command runs from."""
    (tmp_path / "my_models.py").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_models", None)  # another test's my_models.py, imported from its own folder
    yield "my_models"
    sys.modules.pop("my_models", None)


def test_a_model_in_a_file_of_the_reader_is_counted_exactly_by_hand(tiny_module):
    """Linear(6, 4) → ReLU → Linear(4, 2), plain SGD, float32, per sample unless said:

    - parameters 6·4 + 4 + 4·2 + 2 = 38; gradients in backward order: b2 8 B, W2 32 B, b1 16 B, W1 96 B;
    - forward FLOPs (2 per multiply-add): 2·6·4 = 48 and 2·4·2 = 16; backward: the last layer's weight and
      input gradients 16 + 16, the first layer's weight gradient 48 (the input needs none): 144 in all;
    - bytes, each kernel reading its inputs and writing its outputs once: the first addmm reads x (24 B) and
      writes 16 B, and reads W1 and b1 once a step (96 + 16 B); ReLU reads and writes 16 B; the second
      addmm reads 16 and writes 8, plus W2 and b2 (32 + 8 B). Backward of the last layer: dx reads dy (8)
      and writes 16, reading W2 (32) once; dW reads dy and h (8 + 16) and writes 32 once; db reads dy (8)
      and writes 8 once: 56 B per sample and 72 per step;
    - kept for backward: the input x (24 B) and the ReLU's output (16 B), which the second layer shares."""
    counted = counting.count(counting.load_model(f"{tiny_module}:build"), (6,), optimizer="sgd", label="tiny")
    assert counted.parameters == 38 and counted.costs.gradient_sizes == (8, 32, 16, 96)
    assert counted.training_flops_per_sample == 144 and counted.optimizer_state_bytes == 0
    assert (counted.activation_bytes_per_sample, counted.activation_bytes_fixed) == (40, 0)
    rows = counted.layer_table().set_index(["layer", "phase"])
    by_hand = {  # kind, FLOPs and bytes per sample, bytes per step, kernels
        ("0: Linear", "forward"): ("matmul", 48, 40, 112, 1),
        ("1: ReLU", "forward"): ("elementwise", 0, 32, 0, 1),
        ("2: Linear", "forward"): ("matmul", 16, 24, 40, 1),
        ("2: Linear", "backward"): ("matmul", 32, 56, 72, 3),
        ("1: ReLU", "backward"): ("elementwise", 0, 48, 0, 1),
        ("0: Linear", "backward"): ("matmul", 48, 56, 112, 2),
    }
    for key, (kind, flops, per_sample, fixed, kernels) in by_hand.items():
        row = rows.loc[key]
        assert (row["kind"], row["flops_per_sample"], row["bytes_per_sample"], row["fixed_bytes"],
                row["kernels"]) == (kind, flops, per_sample, fixed, kernels), key  # fmt: skip
    # registered with the roofline under a name that carries a digest of these costs
    assert counted.name.startswith("tiny [") and gpus.gradient_bytes(counted.name) == 152


def test_the_book_s_convnet_counted_as_any_model_has_the_hand_formulas_multiply_adds():
    counted = counting.count(build_model("ConvNet"), (1, 12_000), label="ConvNet as a module")
    counted_sums = counted.layer_table().groupby("phase")["multiply_add_flops_per_sample"].sum()
    book_sums = gpus.layer_costs("ConvNet").groupby("phase")["multiply_add_flops_per_sample"].sum()
    assert (
        counted_sums.to_dict() == book_sums.to_dict() == {"forward": 1_170_752_000, "backward": 2_101_484_000}
    )


def test_backward_work_goes_to_the_layer_that_did_it_not_to_an_identity_sibling():
    """Dropout(0.0) returns its input, so in backward it stays open beside the Linear that runs: the
    Linear's three backward kernels and its FLOPs are its own, and the Dropouts, which did no work in
    forward, get none in backward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.Dropout(0.0), nn.Linear(4, 2), nn.Dropout(0.0))
    rows = counting.count(model, (6,), optimizer="sgd", label="identities").layer_table()
    assert not rows["layer"].str.contains("Dropout").any()
    backward = rows[rows["phase"] == "backward"].set_index("layer")
    assert backward.loc["2: Linear", ["flops_per_sample", "kernels"]].tolist() == [32, 3]
    assert backward.loc["0: Linear", ["flops_per_sample", "kernels"]].tolist() == [48, 2]


class DownsampledBlock(nn.Module):
    """A ResNet basic block whose shortcut is a strided 1x1 convolution, run after the main branch (as
    torchvision's ``BasicBlock`` does): in backward it is entered first and, its input being the model's,
    never left, so a rule by open modules would credit it with the main branch's backward."""

    def __init__(self) -> None:
        super().__init__()
        self.downsample = nn.Sequential(nn.Conv2d(3, 8, 1, stride=2), nn.BatchNorm2d(8))
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, stride=2), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        main = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(main + self.downsample(x))


def test_a_branch_left_open_in_backward_does_not_take_in_the_other_branch_s_work():
    """Each convolution's backward is its own, by the autograd node that runs it: per sample of 3x8x8,
    the 1x1 shortcut makes 8·3·16 = 384 multiply-adds forward (768 FLOPs), conv1 8·27·16 = 3,456 (6,912
    FLOPs), conv2 8·72·16 = 9,216 (18,432 FLOPs). In backward the shortcut and conv1, whose input is the
    model's, compute only the weight gradient (the forward's FLOPs); conv2 also its input's (twice)."""
    torch.manual_seed(0)
    rows = counting.count(nn.Sequential(DownsampledBlock(), nn.Flatten()), (3, 8, 8), optimizer="sgd",
                          label="block").layer_table()  # fmt: skip
    backward = rows[rows["phase"] == "backward"].set_index("layer")
    assert backward.loc["0.downsample.0: Conv2d", "flops_per_sample"] == 768
    assert backward.loc["0.conv1: Conv2d", "flops_per_sample"] == 6_912
    assert backward.loc["0.conv2: Conv2d", "flops_per_sample"] == 2 * 18_432
    assert {"0.bn1: BatchNorm2d", "0.bn2: BatchNorm2d", "0.downsample.1: BatchNorm2d"} <= set(backward.index)
    assert (backward["kind"] == "conv").sum() == 3


def test_the_digest_of_a_model_s_costs_is_the_same_in_every_process():
    """Python's hash seed changes the iteration order of sets from process to process; the layer each op
    is attributed to, and so the digest chapter 7 keys its records by, must not depend on it (seeds 1
    and 2 gave two digests for WaveTransformer before the order of entry decided)."""
    script = (
        "from helpers.advise import counting, examples;"
        "print(counting.count(examples.wave_transformer(), (1, 12000), label='w').name)"
    )
    processes = [  # started together: each spends seconds importing torch
        subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed},
                         stdout=subprocess.PIPE, text=True)
        for seed in ("1", "2", "4")
    ]  # fmt: skip
    names = set()
    try:
        for process in processes:
            out, _ = process.communicate(timeout=300)
            assert process.returncode == 0
            names.add(out.strip())
    finally:
        for process in processes:
            process.kill()
    assert len(names) == 1 and next(iter(names)).startswith("w [")


def test_adam_keeps_two_moments_and_bf16_is_counted_under_autocast(tiny_module):
    model = counting.load_model(f"{tiny_module}:build")
    assert counting.count(model, (6,), label="tiny adam").optimizer_state_bytes == 38 * 8
    bf16 = counting.count(model, (6,), dtype="bf16", label="tiny bf16")
    assert bf16.costs.bf16 and bf16.training_flops_per_sample == 144  # the same FLOPs, at another peak


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ResNet", "'ResNet' is neither one of the book's models (LinearNet, ConvNet) nor module:callable"),
        ("no_such_module:build", "cannot import 'no_such_module': ModuleNotFoundError"),
        ("my_models:missing", "'my_models' has no callable 'missing'"),
        ("my_models:not_a_model", "my_models:not_a_model() returned a int, not an nn.Module"),
        ("my_models:broken", "my_models:broken() raised RuntimeError: no weights here"),
    ],
)
def test_a_model_that_cannot_be_had_is_refused_in_one_line(tiny_module, spec, message):
    with pytest.raises(counting.AdviseError) as refused:
        counting.load_model(spec)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_an_input_shape_the_forward_pass_rejects_names_the_layer_and_the_shapes(tiny_module):
    with pytest.raises(
        counting.AdviseError, match=r"rejects input shape \(N, 5\): 0 \(Linear\) got input \[\(2, 5\)\]"
    ):
        counting.count(counting.load_model(f"{tiny_module}:build"), (5,))


@pytest.mark.parametrize(("text", "message"), [("3,x", "not comma-separated integers"), ("3,0", "positive")])
def test_shapes_dtypes_and_optimizers_are_checked(text, message):
    with pytest.raises(counting.AdviseError, match=message):
        counting.parse_shape(text)
    assert counting.parse_shape("3,224,224") == (3, 224, 224)
    with pytest.raises(counting.AdviseError, match="dtype 'fp8' is not one of float32, bf16"):
        counting.count(nn.Linear(2, 2), (2,), dtype="fp8")
    with pytest.raises(counting.AdviseError, match="optimizer 'lamb' is not one of adam, sgd"):
        counting.count(nn.Linear(2, 2), (2,), optimizer="lamb")


def test_the_book_s_models_are_priced_as_chapter_5_prices_them():
    counted = counting.count_book_model("LinearNet")
    assert counted.name == "LinearNet" and counted.parameters == 12_102_220
    assert counted.layer_table().equals(gpus.layer_costs("LinearNet")[list(gpus.LAYER_COLUMNS)])
    # what chapter 1 measured autograd keeping: the input and the layers' outputs, 52,440 B a sample
    assert counted.activation_bytes_per_sample == 52_440
    with pytest.raises(counting.AdviseError, match="priced with Adam"):
        counting.count_book_model("LinearNet", "sgd")
    assert torch.get_num_threads() >= 1
