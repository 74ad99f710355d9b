"""utils.py -- what functional_autograd_benchmark.py (the seed, copied
unchanged beside this file) imports from PyTorch's benchmarks/
functional_autograd_benchmark/utils.py: the types and to_markdown_table,
written from models-spec.md §1.7 (PyTorch's benchmark folder is not part
of the torch wheel on the GPU machine)."""
from collections import defaultdict
from typing import Any, Callable, Dict, Tuple, Union

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
