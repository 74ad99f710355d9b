"""utils.py -- what functional_autograd_benchmark.py (the seed, copied
unchanged beside this file) and the getters import from PyTorch's
benchmarks/functional_autograd_benchmark/utils.py: the types,
to_markdown_table (models-spec.md §1.7), and extract_weights /
load_weights, the benchmark's way of making an nn.Module a function of its
parameters (§1: delete every nn.Parameter, re-attach the given tensors by
attribute path before each forward).  PyTorch's benchmark folder is not
part of the torch wheel on the GPU machine."""
from collections import defaultdict
from typing import Any, Callable, Dict, List, Tuple, Union

import torch
from torch import Tensor

TensorOrTensors = Union[Tensor, Tuple[Tensor, ...]]
InputsType = TensorOrTensors
GetterReturnType = Tuple[Callable[..., Tensor], InputsType]
GetterType = Callable[[torch.device], GetterReturnType]
VType = Union[None, Tensor, Tuple[Tensor, ...]]
TimingResultType = Dict[str, Dict[str, Tuple[float, ...]]]


def to_markdown_table(res: TimingResultType, header: Tuple[str, ...] = None) -> str:
    if header is None:
        header = ("model", "task", "mean", "var")
    out = ""

    def write_line(*args):
        nonlocal out
        out += f"| {' | '.join(str(a) for a in args)} |\n"

    write_line(*header)
    write_line(*["--"] * len(header))
    for model, tasks in res.items():
        for task, line in tasks.items():
            write_line(*(model, task) + line)
    return out


def _del_nested_attr(obj, names: List[str]) -> None:
    if len(names) == 1:
        delattr(obj, names[0])
    else:
        _del_nested_attr(getattr(obj, names[0]), names[1:])


def _set_nested_attr(obj, names: List[str], value: Tensor) -> None:
    if len(names) == 1:
        setattr(obj, names[0], value)
    else:
        _set_nested_attr(getattr(obj, names[0]), names[1:], value)


def extract_weights(mod: torch.nn.Module) -> Tuple[Tuple[Tensor, ...], List[str]]:
    """The module's parameters, in Module.parameters() order, as plain
    tensors that require grad, and their names; the module keeps none (it
    cannot be used until load_weights puts tensors back)."""
    orig_params = tuple(mod.parameters())
    names = []
    for name, _ in list(mod.named_parameters()):
        _del_nested_attr(mod, name.split("."))
        names.append(name)
    params = tuple(p.detach().requires_grad_() for p in orig_params)
    return params, names


def load_weights(mod: torch.nn.Module, names: List[str], params: Tuple[Tensor, ...]) -> None:
    """Attach params to the module by name (after extract_weights)."""
    for name, p in zip(names, params):
        _set_nested_attr(mod, name.split("."), p)
