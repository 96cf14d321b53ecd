"""The seed's two models on raw 12,000-sample waveforms, and their exact sizes (chapter 1).

``LinearNet`` (12,102,220 parameters) is nearly all weights and almost no activations: data-parallel
training has to move its 46 MiB of gradients every step ("network choke"). ``ConvNet`` (376,200
parameters) is the opposite: 1.4 MiB of weights but 12 MiB of activations per sample, so its cost is
compute and memory on the device ("GPU choke").
"""

from __future__ import annotations

import pandas as pd
import torch
import torchinfo
from torch import nn

from helpers.data import CLIP_SAMPLES

BYTES_PER_FLOAT32 = 4
MIB = 2**20
# glibc's malloc serves an allocation of this size or more with new pages from the kernel (mmap) every
# time (its dynamic mmap threshold stops growing at 32 MiB on 64-bit systems), and gives them back on
# free: each 4 KiB page of such a tensor faults and is zeroed by the kernel on its first write.
MMAP_THRESHOLD_MAX = 32 * MIB


class LinearNet(nn.Sequential):
    """Linear 12000->1000, ReLU, Linear 1000->100, ReLU, Linear 100->10, Sigmoid, Linear 10->10."""

    def __init__(self) -> None:
        super().__init__(
            nn.Flatten(),
            nn.Linear(CLIP_SAMPLES, 1000),
            nn.ReLU(),
            nn.Linear(1000, 100),
            nn.ReLU(),
            nn.Linear(100, 10),
            nn.Sigmoid(),
            nn.Linear(10, 10),
        )


class ConvNet(nn.Sequential):
    """Three Conv1d-ReLU-MaxPool1d blocks (50, 30, 10 channels), then Linear 2000->100, Sigmoid, 100->10."""

    def __init__(self) -> None:
        super().__init__(
            nn.Conv1d(1, 50, kernel_size=200, padding=100),
            nn.ReLU(),
            nn.MaxPool1d(4),
            nn.Conv1d(50, 30, kernel_size=100, padding=50),
            nn.ReLU(),
            nn.MaxPool1d(3),
            nn.Conv1d(30, 10, kernel_size=50, padding=25),
            nn.ReLU(),
            nn.MaxPool1d(5),
            nn.Flatten(),
            nn.Linear(2000, 100),
            nn.Sigmoid(),
            nn.Linear(100, 10),
        )


MODELS = {"LinearNet": LinearNet, "ConvNet": ConvNet}


def build_model(name: str) -> nn.Module:
    """A fresh model by name; ValueError listing the known names otherwise."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name]()


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_bytes(model: nn.Module) -> int:
    """Bytes of the trainable parameters (float32): also the bytes of one full gradient."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def parameter_sizes(model: nn.Module) -> list[int]:
    """Bytes of each trainable parameter tensor, in the model's order."""
    return [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]


def summarize(model: nn.Module, batch_size: int = 1, verbose: int = 0) -> torchinfo.ModelStatistics:
    """torchinfo summary for input ``[batch_size, 1, 12000]`` (layer output shapes and parameters)."""
    return torchinfo.summary(
        model,
        input_size=(batch_size, 1, CLIP_SAMPLES),
        col_names=("output_size", "num_params"),
        device="cpu",
        verbose=verbose,
    )


def layer_table(model: nn.Module) -> list[dict]:
    """Per leaf layer of one sample: name, output shape, output elements, parameters (from torchinfo)."""
    rows = []
    for layer in summarize(model).summary_list:
        if layer.is_leaf_layer:
            shape = list(layer.output_size[1:])
            elements = 1
            for size in shape:
                elements *= size
            rows.append(
                {
                    "layer": f"{layer.class_name}-{layer.depth_index}",
                    "output_shape": shape,
                    "output_elements": elements,
                    "parameters": layer.trainable_params,
                    "is_view": isinstance(layer.module, nn.Flatten),
                }
            )
    return rows


def activation_bytes_per_sample(model: nn.Module) -> int:
    """The seed's accounting: every layer's output elements x 2 (forward + backward) x 4 bytes.

    Flatten is left out: it returns a view of its input and allocates nothing. This reproduces the
    seed's "12 MB created per training instance" for ConvNet (12.07 MiB).
    """
    elements = sum(row["output_elements"] for row in layer_table(model) if not row["is_view"])
    return elements * 2 * BYTES_PER_FLOAT32


def largest_batch(
    model: nn.Module, memory_bytes: int, optimizer_states: int = 2, activation_bytes: int | None = None
) -> int:
    """Largest batch whose activations fit beside weights, gradients and optimizer state.

    Static memory is parameters x (1 weight + 1 gradient + ``optimizer_states``) x 4 bytes (Adam keeps
    two states, plain SGD none); what is left is divided by the activation bytes of one sample.
    """
    static = parameter_bytes(model) * (2 + optimizer_states)
    per_sample = activation_bytes or activation_bytes_per_sample(model)
    return max(0, (memory_bytes - static) // per_sample)


def saved_bytes_per_sample(model: nn.Module, autocast_dtype=None, device="cpu") -> tuple[int, int]:
    """(bytes per sample, bytes independent of the batch) that autograd keeps for backward.

    Measured at batch sizes 2 and 4: the difference divided by 2 is exactly the per-sample part; what
    remains (for example bf16 copies of the weights under autocast) does not grow with the batch.
    """
    model = model.to(device)
    small, large = (
        count_saved_tensor_bytes(model, torch.zeros(n, 1, CLIP_SAMPLES, device=device), autocast_dtype)
        for n in (2, 4)
    )
    per_sample = (large - small) // 2
    return per_sample, small - 2 * per_sample


def count_saved_tensor_bytes(model: nn.Module, inputs: torch.Tensor, autocast_dtype=None) -> int:
    """Bytes that autograd really keeps for backward in one forward pass (measured, not estimated).

    Counts each distinct storage saved by autograd once. With ``autocast_dtype`` (for example
    ``torch.bfloat16``) the forward runs under autocast on the inputs' device type.
    """
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    autocast = torch.autocast(inputs.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast:
        model(inputs)
    return sum(size for pointer, size in storages.items() if pointer not in parameters)


def held_bytes_per_sample(model: nn.Module) -> int:
    """Bytes per sample alive once a training step's forward pass and loss are computed: the input, every
    tensor autograd keeps for backward (the model's and the loss's), the logits and the targets, each
    storage counted once (the first layer keeps the input itself, so it is not counted twice).

    This is what a GPU's ``torch.cuda.memory_allocated`` grows by per added sample from before the batch
    is moved to the device to the end of the forward pass: no backward buffers or cuDNN workspace are
    alive then, unlike at the step's peak. Measured at batches 2 and 4, as ``saved_bytes_per_sample``.
    """
    counts = []
    for batch in (2, 4):
        inputs = torch.zeros(batch, 1, CLIP_SAMPLES)
        targets = torch.zeros(batch, dtype=torch.long)
        storages: dict[int, int] = {}

        def keep(tensor: torch.Tensor, storages=storages) -> None:
            storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            keep(tensor)
            return tensor

        parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            logits = model(inputs)
            loss = nn.functional.cross_entropy(logits, targets)
        for tensor in (inputs, targets, logits):
            keep(tensor)
        del loss
        counts.append(sum(size for pointer, size in storages.items() if pointer not in parameters))
    return (counts[1] - counts[0]) // 2


def size_table(names=("LinearNet", "ConvNet")) -> pd.DataFrame:
    """Per model: parameters, their bytes, activation bytes per sample (the seed's accounting) and the
    bytes autograd really saves for backward per sample (measured), exact integers."""
    rows = []
    for name in names:
        model = build_model(name)
        rows.append(
            {
                "model": name,
                "parameters": parameter_count(model),
                "parameter bytes": parameter_bytes(model),
                "activation bytes per sample (seed)": activation_bytes_per_sample(model),
                "saved for backward, bytes per sample": saved_bytes_per_sample(model)[0],
            }
        )
    return pd.DataFrame(rows).set_index("model")


def largest_batch_table(budgets_gib, names=("LinearNet", "ConvNet"), readable: bool = False) -> pd.DataFrame:
    """The largest batch per model and memory budget (GiB), by the seed's accounting and as measured.

    ``readable``: one row per budget, a column per model and accounting, with thousands separators.
    """
    rows = []
    for name in names:
        model = build_model(name)
        saved, _ = saved_bytes_per_sample(model)
        for gib in budgets_gib:
            rows.append(
                {
                    "model": name,
                    "memory GiB": gib,
                    "largest batch (seed's accounting)": largest_batch(model, int(gib * 2**30)),
                    "largest batch (measured)": largest_batch(
                        model, int(gib * 2**30), activation_bytes=saved
                    ),
                }
            )
    table = pd.DataFrame(rows)
    if not readable:
        return table
    wide = table.pivot(index="memory GiB", columns="model").swaplevel(axis=1)
    wide = wide[[(name, kind) for name in names for kind in table.columns[2:]]]
    wide.columns = pd.MultiIndex.from_tuples(
        [(name, kind.removeprefix("largest batch (").removesuffix(")")) for name, kind in wide.columns]
    )
    return wide.map("{:,}".format).rename_axis("device memory (GiB)")


def kept_weight_copies(model: nn.Module, autocast_dtype=torch.bfloat16, device="cpu") -> list[str]:
    """The layers whose ``autocast_dtype`` copy of the weight autograd keeps for backward (``"3: Conv1d"``).

    Autocast casts each weight for its layer's forward; the copy outlives the forward only where backward
    needs it: a matrix product keeps its weight only for the gradient of its input, so the first layer of
    ``LinearNet`` (whose input, the waveform, needs none) keeps none, while a convolution keeps its weight
    whatever it will compute.
    """
    model = model.to(device)
    shapes = {
        tuple(module.weight.shape): f"{index}: {type(module).__name__}"
        for index, module in enumerate(model)
        if isinstance(getattr(module, "weight", None), torch.Tensor)
    }
    kept: set[str] = set()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        shape = tuple(tensor.shape)  # a matrix product saves the transposed view of the copy
        for candidate in (shape, shape[::-1]):
            if tensor.dtype == autocast_dtype and candidate in shapes:
                kept.add(shapes[candidate])
        return tensor

    inputs = torch.zeros(3, 1, CLIP_SAMPLES, device=device)  # 3: no weight has a dimension of 3
    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
    with hooks, torch.autocast(inputs.device.type, dtype=autocast_dtype):
        model(inputs)
    return [name for name in shapes.values() if name in kept]


def weight_copy_table(names=("LinearNet", "ConvNet"), autocast_dtype=torch.bfloat16) -> pd.DataFrame:
    """Per layer with weights: its weights and whether autograd keeps their ``autocast_dtype`` copy for
    backward, with the bytes that copy takes: the batch-independent memory that autocast adds."""
    rows = []
    for name in names:
        model = build_model(name)
        kept = kept_weight_copies(model, autocast_dtype)
        element = torch.empty((), dtype=autocast_dtype).element_size()
        for index, module in enumerate(model):
            if isinstance(getattr(module, "weight", None), torch.Tensor):
                layer = f"{index}: {type(module).__name__}"
                weights = module.weight.numel()
                rows.append({"model": name, "layer": layer, "weights": f"{weights:,}",
                             "copy kept for backward": "yes" if layer in kept else "no",
                             "bytes kept": f"{weights * element if layer in kept else 0:,}"})  # fmt: skip
    return pd.DataFrame(rows).set_index(["model", "layer"])
