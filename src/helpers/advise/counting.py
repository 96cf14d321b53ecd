"""Any PyTorch model counted exactly (chapter 7): its parameters and the bytes of its gradients and
optimizer state, and, layer by layer, the FLOPs, bytes and host ops of one training step's forward and
backward, with the bytes autograd keeps for backward — what the book's cost model needs to price it.

How: one forward and backward pass on zeros of the given input shape, at batches 2 and 4, under a dispatch
mode that sees every ATen op with the module that issued it (``torch.utils.module_tracker``): its FLOPs by
``torch.utils.flop_counter``'s formulas (matrix products, convolutions and attention; elementwise ops
count 0 there), the bytes of its tensor inputs and outputs (each kernel reads its inputs and writes its
outputs once, the book's convention), and whether it launches work (views and aliases do not). What grows
from batch 2 to 4 is per sample, what does not (the weights) is per step. A layer is the innermost module
that issued an op in forward, and in backward the module whose forward created the autograd node running
it (``NodeOwners``); ops issued outside every module are the loss's, priced as the book prices a loss.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry
from torch.utils.module_tracker import ModuleTracker

from helpers.costmodel import gpus
from helpers.data import CLIP_SAMPLES
from helpers.models import MODELS, build_model, count_saved_tensor_bytes, saved_bytes_per_sample

DTYPES = ("float32", "bf16")
OPTIMIZERS = {  # least bytes per parameter of one update pass and its ops, as ModelCosts names them
    "adam": (gpus.ADAM_BYTES_PER_PARAMETER, gpus.ADAM_OPS, 8),  # and its state: two moments
    "sgd": (gpus.SGD_BYTES_PER_PARAMETER, gpus.SGD_OPS, 0),  # plain SGD keeps none
}
ATTENTION = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_flash_attention",
    "_efficient_attention",
)
MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul"} | {
    f"{name}{suffix}" for name in ATTENTION for suffix in ("", "_forward", "_backward")
}
CONV_OPS = {"convolution", "convolution_backward", "_convolution", "conv1d", "conv2d", "conv3d"}


class AdviseError(ValueError):
    """Input the advice refuses before anything runs: one line saying what is wrong."""


def load_model(spec: str) -> nn.Module:
    """A fresh model from ``spec``: one of the book's models by name, or ``module:callable``, a factory
    returning an ``nn.Module`` importable from the current directory."""
    if spec in MODELS:
        return build_model(spec)
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise AdviseError(
            f"{spec!r} is neither one of the book's models ({', '.join(MODELS)}) nor module:callable"
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any import failure is the reader's to see, in one line
        raise AdviseError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise AdviseError(f"{module_name!r} has no callable {attribute!r}")
    try:
        model = factory()
    except Exception as error:
        raise AdviseError(f"{spec}() raised {type(error).__name__}: {error}") from None
    if not isinstance(model, nn.Module):
        raise AdviseError(f"{spec}() returned a {type(model).__name__}, not an nn.Module")
    return model


def parse_shape(text: str, option: str = "input shape", example: str = "3,224,224") -> tuple[int, ...]:
    """ "3,224,224" → (3, 224, 224): positive integers, comma-separated (one sample's shape, or the GPU
    counts of ``--gpus``); a refusal names the ``option`` it came from."""
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise AdviseError(
            f"{option} {text!r} is not comma-separated integers (for example {example})"
        ) from None
    if not shape or min(shape) < 1:
        raise AdviseError(f"{option} {text!r} needs positive integers")
    return shape


def check_choice(name: str, value: str, choices) -> str:
    if value not in choices:
        raise AdviseError(f"{name} {value!r} is not one of {', '.join(choices)}")
    return value


class OrderedModuleTracker(ModuleTracker):
    """``ModuleTracker`` that also remembers when each module was last entered.

    In backward, ``ModuleTracker`` enters a module when the gradient of its output arrives and leaves it
    when that of its input does; a module that returns its input (``Dropout(0.0)``) is left and then
    entered again, so it stays open. ``parents`` is a set, and picking among open siblings by its
    iteration order made the attribution, and the digest of the costs, change with Python's hash seed
    from process to process; the order of entry makes it reproducible.
    """

    def __init__(self) -> None:
        super().__init__()
        self.entered: dict[str, int] = {}
        self._clock = itertools.count()

    def _get_append_fn(self, name, is_bw):
        append = super()._get_append_fn(name, is_bw)

        def fn(*args) -> None:
            append(*args)
            self.entered[name] = next(self._clock)

        return fn

    def innermost(self, working: set[str] | None = None) -> str:
        """The open module running now: the deepest, and among open siblings the most recently entered
        ("Global" when none is open). Only modules in ``working`` count when it is given: in backward,
        those that issued work in forward, since a module that did none (an identity) has no backward."""
        open_modules = [name for name in self.parents if working is None or name in working] or ["Global"]
        return max(open_modules, key=lambda name: (name.count("."), self.entered.get(name, -1)))


class NodeOwners:
    """Which module's forward created each autograd node of a pass, so that a backward op is credited to
    the module whose forward it differentiates (``torch._C._current_autograd_node()`` names the node that
    is running). ``ModuleTracker`` alone cannot tell in backward: a module whose input needs no gradient is
    never left, and a deeper one left open (a ResNet block's downsample branch) would take in every later
    backward op.

    After each module's forward (innermost first), the nodes reachable from its outputs that no inner module
    claimed, stopping at its inputs' nodes, are its own. Nodes no module created (the loss's, the
    accumulation of a parameter's gradient: views that launch nothing) are left to ``ModuleTracker``.
    """

    def __init__(self, model: nn.Module) -> None:
        root = type(model).__name__
        self.names = {module: f"{root}.{name}" if name else root for name, module in model.named_modules()}
        self.owner: dict = {}
        self._inputs: dict = defaultdict(list)
        self._hooks = [hook for module in model.modules()
                       for hook in (module.register_forward_pre_hook(self._enter),
                                    module.register_forward_hook(self._leave))]  # fmt: skip

    @staticmethod
    def _nodes(value) -> list:
        leaves = torch.utils._pytree.tree_leaves(value)
        return [t.grad_fn for t in leaves if isinstance(t, torch.Tensor) and t.grad_fn is not None]

    def _enter(self, module, args) -> None:
        self._inputs[module].append(set(self._nodes(args)))

    def _leave(self, module, args, output) -> None:
        stop, todo = self._inputs[module].pop(), self._nodes(output)
        while todo:
            node = todo.pop()
            if node in self.owner or node in stop:
                continue
            self.owner[node] = self.names[module]
            todo += [n for n, _ in node.next_functions if n is not None]

    def of(self, node) -> str | None:
        """The module whose forward created ``node``, None for a node no module created."""
        return self.owner.get(node) if node is not None else None

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()


class OpRecorder(TorchDispatchMode):
    """Every ATen op of a pass: (innermost module, phase, op name, FLOPs, bytes in and out, launches work)."""

    def __init__(self, tracker: OrderedModuleTracker, owners: NodeOwners) -> None:
        super().__init__()
        self.tracker, self.owners, self.ops = tracker, owners, []
        self.working: set[str] = set()  # modules that issued an op in forward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        flops = flop_registry[packet](*args, **kwargs, out_val=out) if packet in flop_registry else 0
        tensors = [
            t for t in torch.utils._pytree.tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)
        ]
        returns = func._schema.returns
        view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        backward = self.tracker.is_bw
        owner = self.owners.of(torch._C._current_autograd_node()) if backward else None
        inner = owner or self.tracker.innermost(self.working if backward else None)
        if not backward:
            self.working.add(inner)
        nbytes = 0 if view else sum(t.numel() * t.element_size() for t in tensors)
        self.ops.append((inner, "backward" if backward else "forward", packet.__name__, int(flops), nbytes,
                         not view))  # fmt: skip
        return out


def record_step(model: nn.Module, batch: int, shape: tuple, bf16: bool) -> list[tuple]:
    """The ops of one forward and backward pass of ``model`` on ``batch`` zero samples (grads set to None
    first, as ``zero_grad`` leaves them), under bfloat16 autocast when ``bf16``."""
    model.zero_grad(set_to_none=True)
    inputs = torch.zeros(batch, *shape)
    owners = NodeOwners(model)
    try:
        with OrderedModuleTracker() as tracker, OpRecorder(tracker, owners) as recorder:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                output = model(inputs)
            output.float().sum().backward()
    finally:
        owners.remove()
    model.zero_grad(set_to_none=True)
    return recorder.ops


def rows_by_layer(ops: list[tuple]) -> dict[tuple, dict]:
    """Per (layer, phase), in first-issued order: FLOPs, matrix-product and convolution FLOPs, bytes, ops."""
    rows: dict[tuple, dict] = {}
    for layer, phase, name, flops, nbytes, launches in ops:
        if layer == "Global":
            continue  # the loss's, priced as the book prices a loss (LOSS_OPS)
        row = rows.setdefault((layer, phase), defaultdict(int))
        kind = "conv" if name in CONV_OPS else "matmul" if name in MATMUL_OPS else None
        row["flops"] += flops
        if kind:
            row[kind] += flops
        row["bytes"] += nbytes
        row["kernels"] += int(launches)
    return rows


def check_forward(model: nn.Module, shape: tuple) -> None:
    """Run one forward pass on two samples; a failure names the layer that refused them and the shapes."""
    entered: list[tuple] = []

    def enter(module, args, name) -> None:
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        entered.append((name or type(module).__name__, type(module).__name__, shapes))

    hooks = [m.register_forward_pre_hook(lambda m, args, name=name: enter(m, args, name))
             for name, m in model.named_modules()]  # fmt: skip
    try:
        with torch.no_grad():
            model(torch.zeros(2, *shape))
    except Exception as error:
        where = f"{entered[-1][0]} ({entered[-1][1]}) got input {entered[-1][2]}" if entered else "the model"
        raise AdviseError(f"the forward pass rejects input shape (N, {', '.join(map(str, shape))}): {where}: "
                          f"{type(error).__name__}: {str(error).splitlines()[0]}") from None  # fmt: skip
    finally:
        for hook in hooks:
            hook.remove()


@dataclass(frozen=True)
class Counted:
    """What ``count`` found: the model's costs as the roofline takes them (``gpus.ModelCosts``), the bytes
    autograd keeps per sample and per step, and the settings they were counted under."""

    name: str
    module: nn.Module = field(compare=False, repr=False)
    costs: gpus.ModelCosts
    activation_bytes_per_sample: int
    activation_bytes_fixed: int
    input_shape: tuple
    dtype: str
    optimizer: str

    @property
    def label(self) -> str:
        """The name without the digest of its costs, for tables."""
        return self.name.split(" [")[0]

    @property
    def parameters(self) -> int:
        return self.costs.parameters

    @property
    def gradient_bytes(self) -> int:
        return sum(self.costs.gradient_sizes)

    @property
    def optimizer_state_bytes(self) -> int:
        return self.parameters * OPTIMIZERS[self.optimizer][2]

    def layer_table(self) -> pd.DataFrame:
        """The counted rows, as ``gpus.layer_costs`` gives the book's models."""
        return pd.DataFrame(list(self.costs.layers), columns=list(gpus.LAYER_COLUMNS))

    @property
    def training_flops_per_sample(self) -> int:
        return int(sum(row[3] for row in self.costs.layers))


def count(model: nn.Module, input_shape: tuple, dtype: str = "float32", optimizer: str = "adam",
          label: str = "model") -> Counted:  # fmt: skip
    """Count ``model`` exactly on samples of ``input_shape`` (see the module's docstring) and register its
    costs with the roofline under a name made of ``label`` and a digest of the costs."""
    check_choice("dtype", dtype, DTYPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_forward(model, input_shape)
    model = model.train()
    bf16 = dtype == "bf16"
    small, large = (rows_by_layer(record_step(model, batch, input_shape, bf16)) for batch in (2, 4))
    root = type(model).__name__
    labels = {f"{root}.{name}" if name else root: f"{name or root}: {type(module).__name__}"
              for name, module in model.named_modules()}  # fmt: skip
    layers = []
    for (layer, phase), at_two in small.items():
        at_four = large.get((layer, phase), at_two)
        per_sample = {key: (at_four[key] - at_two[key]) // 2 for key in ("flops", "matmul", "conv", "bytes")}
        fixed_bytes = max(0, at_two["bytes"] - 2 * per_sample["bytes"])
        kind = "conv" if per_sample["conv"] else "matmul" if per_sample["matmul"] else "elementwise"
        product_flops = per_sample["matmul"] + per_sample["conv"]
        layers.append((labels.get(layer, layer), kind, phase, per_sample["flops"], product_flops,
                       per_sample["bytes"], fixed_bytes, at_two["kernels"]))  # fmt: skip
    trainable = [p for p in model.parameters() if p.requires_grad]
    sizes = tuple(p.numel() * 4 for p in trainable)[::-1]  # float32 gradients, backward order
    update_bytes, update_ops, _ = OPTIMIZERS[optimizer]
    costs = gpus.ModelCosts(tuple(layers), sum(p.numel() for p in trainable), sizes, update_bytes, update_ops,
                            bf16=bf16, optimizer=optimizer)  # fmt: skip
    autocast = torch.bfloat16 if bf16 else None
    saved = [count_saved_tensor_bytes(model, torch.zeros(n, *input_shape), autocast) for n in (2, 4)]
    per_sample_saved = (saved[1] - saved[0]) // 2
    digest = hashlib.sha256(repr((costs, input_shape)).encode()).hexdigest()[:8]
    name = gpus.register(f"{label} [{digest}]", costs)
    return Counted(name, model, costs, per_sample_saved, saved[0] - 2 * per_sample_saved, tuple(input_shape),
                   dtype, optimizer)  # fmt: skip


def count_book_model(name: str, optimizer: str = "adam") -> Counted:
    """One of the book's models as chapter 5 prices it (its hand formulas, Adam, float32): what the advice
    for it must agree with."""
    if optimizer != "adam":
        raise AdviseError("the book's models are priced with Adam, as chapters 1-6 train them")
    rows = tuple(
        tuple(row) for row in gpus.layer_costs(name)[list(gpus.LAYER_COLUMNS)].itertuples(index=False)
    )
    costs = gpus.ModelCosts(rows, gpus.parameters_of(name), tuple(gpus.gradient_sizes(name)))
    model = build_model(name)
    per_sample, fixed = saved_bytes_per_sample(model)
    return Counted(name, model, costs, per_sample, fixed, (1, CLIP_SAMPLES), "float32", "adam")
