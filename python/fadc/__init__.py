"""fadc in Python: run models compiled by fadc (``model.so``) on NumPy arrays and DLPack tensors.

    import fadc, numpy as np
    fadc.compile("models/ppl_simple_reg.ir", "model.so")
    m = fadc.load("model.so")                   # device="cpu" | "cuda:0", num_threads=, seed=
    m.tasks                                      # ['forward', 'vjp', 'vhp', ...]
    m.params                                     # {'beta_value': TensorSpec(f32[11, 1])}
    r = m.vjp(v=np.float32(1))                   # {'out': ..., 'grad.beta_value': ...}
    out = {k: np.empty_like(a) for k, a in r.items()}
    m.vjp(v=np.float32(1), out=out)              # the hot path: no allocation, no copy

The package sits on the runtime library (libfadc.so, include/fadc.h) through ctypes: no
compiler is needed to install it.  See docs/PYTHON.md.
"""

from ._compile import compile, find_fadc
from ._errors import (ArgumentError, CompileError, CPUFeatureError, DataIndexError,
                      DeviceError, FadcError, FileError, FormatError, LoadError, NotFoundError,
                      OutOfMemoryError, OutputOverwrittenError, RunError, ShapeError, StateError,
                      UnboundError, VersionError)
from ._lib import find_library
from ._lib import path as library_path
from ._model import Model, Task, Tensor, TensorSpec, load

__version__ = "0.1.0"

__all__ = [
    "load", "compile", "find_fadc", "find_library", "library_path", "Model", "Task", "Tensor",
    "TensorSpec", "FadcError", "ArgumentError", "FileError", "FormatError", "VersionError",
    "CPUFeatureError", "LoadError", "NotFoundError", "ShapeError", "DeviceError",
    "UnboundError", "OutOfMemoryError", "RunError", "StateError", "OutputOverwrittenError",
    "DataIndexError", "CompileError",
]
