"""Models, tasks and tensors over the runtime of include/fadc.h.

A ``Model`` owns one runtime context (a device and, on a GPU, its stream)
and one opened artifact.  ``Model.run`` turns the caller's arrays into
runtime tensors without copying them (``fadc_tensor_wrap`` over a NumPy
array's memory, ``fadc_tensor_wrap_device`` over a DLPack tensor's), passes
the outputs as tensors of the caller's too (arrays the package allocates,
or ``out=``), and calls ``fadc_run`` once.

The hot path (``run`` with the same input and ``out=`` arrays call after
call) makes one ctypes call: each input and output slot of a task keeps the
runtime tensor that wraps the array it saw last, with a reference to that
array, so the same array object (checked with ``is``) needs no new wrap.
The reference makes the check sound: the array cannot die and another take
its address, and its data pointer cannot move (NumPy refuses ``resize`` of
an array another object references).  Its dtype, shape and layout, which
can be changed in place, are checked at every call.  DLPack objects (whose
memory can move: ``torch.Tensor.set_``) are wrapped again at every call.
"""

from __future__ import annotations

import os
import weakref
from ctypes import byref, c_int, c_int64, c_uint64, c_void_p
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _dlpack, _lib
from ._errors import (ArgumentError, DeviceError, NotFoundError,
                      OutputOverwrittenError, ShapeError, error)

lib = _lib.lib

NP_OF: Dict[int, np.dtype] = {_lib.F32: np.dtype(np.float32), _lib.F64: np.dtype(np.float64),
         _lib.I64: np.dtype(np.int64), _lib.BOOL: np.dtype(np.bool_)}
FADC_OF_NP = {v: k for k, v in NP_OF.items()}
DTYPE_NAME = {_lib.F32: "f32", _lib.F64: "f64", _lib.I64: "i64", _lib.BOOL: "bool"}
ROLE_NAME = {_lib.ROLE_PARAM: "param", _lib.ROLE_CONST: "const", _lib.ROLE_INPUT: "input",
             _lib.ROLE_OUTPUT: "output"}

# What a task's slot caches hold before any array was wrapped there, and
# after their runtime tensor stopped being the one in fadc_run's array: no
# caller's object is it.
_EMPTY = object()

ArrayLike = Any  # a NumPy array, an object with __dlpack__, or a nested list / number
Device = Union[str, Tuple[str, int]]


def _v(p: c_void_p) -> int:
    """A pointer's value as an int (0 for NULL)."""
    return p.value or 0


def _type_str(dtype: int, shape: Tuple[int, ...]) -> str:
    return f"{DTYPE_NAME[dtype]}[{', '.join(str(d) for d in shape)}]"


def _np_type_str(a: np.ndarray) -> str:
    """An array's type as fadc writes types (f32[2, 3]); NumPy's dtype names for the rest."""
    code = FADC_OF_NP.get(a.dtype)
    name = DTYPE_NAME[code] if code is not None else a.dtype.name
    return f"{name}[{', '.join(str(d) for d in a.shape)}]"


def parse_device(device: Device) -> Tuple[int, int]:
    """(fadc_device_kind, index) of "cpu", "cuda", "cuda:N" or ("cuda", N)."""
    if isinstance(device, tuple):
        kind, index = device
    else:
        kind, _, idx = str(device).partition(":")
        index = int(idx) if idx else 0
    if kind == "cpu" and index == 0:
        return _lib.DEVICE_CPU, 0
    if kind == "cuda" and index >= 0:
        return _lib.DEVICE_CUDA, index
    raise DeviceError(f"unknown device {device!r} (expected \"cpu\", \"cuda\" or \"cuda:N\")")


class TensorSpec:
    """A tensor a model declares: ``name``, ``role`` ("param", "const", "input", "output"),
    ``dtype`` (a NumPy dtype), ``shape``; for declarations ``has_init`` (the model can compute
    it from its seeded initializer) and ``spec`` (the specialisation, "" if shared)."""

    __slots__ = ("name", "role", "dtype", "shape", "has_init", "spec", "code")

    def __init__(self, d: "_lib.TensorDesc", has_init: Optional[bool] = None, spec: str = ""):
        self.name: str = d.name.decode()
        self.role: str = ROLE_NAME[d.role]
        self.code: int = d.dtype
        self.dtype: np.dtype = NP_OF[d.dtype]
        self.shape: Tuple[int, ...] = tuple(d.dim[i] for i in range(d.rank))
        self.has_init = has_init
        self.spec = spec

    def __repr__(self) -> str:
        return f"TensorSpec({self.name!r}, {self.role}, {_type_str(self.code, self.shape)})"


class Task:
    """One compiled task (one specialisation of it): its caller ``inputs`` and its
    ``outputs`` (TensorSpec lists, in fadc_run's order), the ``declarations`` it reads, and
    its plan (``arena_bytes``, ``nkernels``, ``targets``)."""

    def __init__(self, m: "Model", index: int, info: "_lib.TaskInfo"):
        self.name: str = info.name.decode()
        self.index = index
        self.spec: str = info.spec.decode() if info.spec else ""
        self.arena_bytes: int = info.arena_bytes
        self.nkernels: int = info.nkernels
        self.targets: List[str] = [n for bit, n in ((_lib.TARGET_CPU, "cpu"),
                                                     (_lib.TARGET_CUDA, "cuda"))
                                   if info.targets & bit]
        self.inputs: List[TensorSpec] = []
        self.declarations: List[str] = []
        d = _lib.TensorDesc()
        for i in range(info.ninputs):
            m._check(lib.fadc_task_input(m._m, index, i, byref(d)))
            if d.role == _lib.ROLE_INPUT:
                self.inputs.append(TensorSpec(d))
            else:
                self.declarations.append(d.name.decode())
        self.outputs: List[TensorSpec] = []
        for i in range(info.noutputs):
            m._check(lib.fadc_task_output(m._m, index, i, byref(d)))
            self.outputs.append(TensorSpec(d))
        self.input_names = [s.name for s in self.inputs]
        self.output_names = [s.name for s in self.outputs]
        # An output named after a caller input writes that input back
        # (docs/IR.md, "Write-backs"): the runtime copies it into the input.
        self.writeback = {s.name for s in self.outputs} & set(self.input_names)
        # fadc_run's arrays, and per slot the array last wrapped and its
        # runtime tensor (see the module's docstring).
        self.in_arr = (c_void_p * max(len(self.inputs), 1))()
        self.out_arr = (c_void_p * max(len(self.outputs), 1))()
        self.in_obj: List[Any] = [_EMPTY] * len(self.inputs)
        self.in_h: List[int] = [0] * len(self.inputs)  # 0: none
        self.out_obj: List[Any] = [_EMPTY] * len(self.outputs)
        self.out_h: List[int] = [0] * len(self.outputs)
        # For a DLPack tensor of a library with an adapter (_ADAPTERS): the capsule that
        # keeps the memory its slot wrapped alive while it is cached.
        self.in_cap: List[Any] = [None] * len(self.inputs)
        self.out_cap: List[Any] = [None] * len(self.outputs)
        # For the fast path (Model._run_cached): per slot, what the tensor's adapter read of
        # it when the slot wrapped it (its address, dtype, shape, layout and device, checked
        # against the slot's spec through DLPack then: see _ADAPTERS).
        self.in_key: List[Any] = [None] * len(self.inputs)
        self.out_key: List[Any] = [None] * len(self.outputs)
        self.n_in, self.n_out = len(self.inputs), len(self.outputs)
        self.in_dt = [s.dtype for s in self.inputs]
        self.in_sh = [s.shape for s in self.inputs]
        self.out_dt = [s.dtype for s in self.outputs]
        self.out_sh = [s.shape for s in self.outputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {_type_str(s.code, s.shape)}" for s in self.inputs)
        outs = ", ".join(f"{s.name}: {_type_str(s.code, s.shape)}" for s in self.outputs)
        sp = f" [{self.spec}]" if self.spec else ""
        return f"<fadc task {self.name}{sp}({ins}) -> ({outs})>"

    def _drop(self) -> None:
        for hs in (self.in_h, self.out_h):
            for i, h in enumerate(hs):
                if h:
                    lib.fadc_tensor_release(h)
                hs[i] = 0
        self.in_obj = [_EMPTY] * len(self.in_obj)
        self.out_obj = [_EMPTY] * len(self.out_obj)
        self.in_cap = [None] * len(self.in_cap)
        self.out_cap = [None] * len(self.out_cap)


class Tensor:
    """A tensor in fadc's memory.

    Two kinds: a buffer the package allocated from the runtime for an output (a GPU output
    when the inputs' library cannot allocate one, or ``alloc="fadc"``), which the caller
    owns like any array; and a **model-owned output** (``run(..., view=True)``), a view of
    memory the model reuses: **the next call of the same task overwrites it** (on a GPU, any
    later call may), and reading it after that raises ``OutputOverwrittenError``.  Copy it
    (``numpy()`` on a GPU, ``numpy().copy()`` on the CPU) to keep its value.

    It converts with ``numpy()``, ``np.asarray`` and DLPack (``__dlpack__``,
    ``np.from_dlpack``, ``torch.from_dlpack``): on the CPU without a copy.  A NumPy array or
    DLPack tensor made from a view is checked when it is made, not afterwards."""

    __slots__ = ("_model", "_h", "_gen", "_view", "_released", "name", "shape", "dtype", "_code",
                 "__weakref__")

    def __init__(self, model: "Model", h: int, name: str, code: int, shape: Tuple[int, ...],
                 view: bool):
        self._model = model
        self._h = h
        self._view = view
        self._gen = lib.fadc_tensor_generation(h) if view else 0
        self._released = False
        self.name = name
        self._code = code
        self.dtype: np.dtype = NP_OF[code]
        self.shape: Tuple[int, ...] = shape
        model._tensors.add(self)

    @property
    def device(self) -> str:
        return self._model.device

    @property
    def is_view(self) -> bool:
        """Model-owned (``view=True``): overwritten by a later call."""
        return self._view

    def _address(self) -> int:
        if self._released or self._model._m is None:
            raise ArgumentError(f"tensor '{self.name}' was released (or its model closed)")
        if self._view and lib.fadc_tensor_generation(self._h) != self._gen:
            raise OutputOverwrittenError(
                f"output '{self.name}' (a model-owned view) was overwritten by a later call; "
                "copy it before that call, or use caller-owned outputs (the default)")
        a = c_uint64()
        self._model._check(lib.fadc_tensor_address(self._h, byref(a)))
        return a.value

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array: on the CPU a view of the memory (a model-owned one is
        valid until the next call), on a GPU a copy."""
        addr = self._address()
        if self._model._kind == _lib.DEVICE_CPU:
            return np.from_dlpack(self)
        a = np.empty(self.shape, self.dtype)
        self._model._check(lib.fadc_tensor_read(self._h, a.ctypes.data, a.nbytes))
        del addr
        return a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack_device__(self) -> Tuple[int, int]:
        m = self._model
        return (_dlpack.CPU, 0) if m._kind == _lib.DEVICE_CPU else (_dlpack.CUDA, m._index)

    def __dlpack__(self, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule over the tensor's memory (no copy; ``copy=True`` is refused).  On a
        GPU, ``stream`` (the consumer's CUDA stream: None or 1 the legacy default, 2 the
        per-thread default, -1 no ordering) waits for fadc's work on this tensor."""
        if copy:
            raise BufferError("fadc.Tensor exports its memory without a copy only")
        m = self._model
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"fadc.Tensor is on {m.device}; it cannot export to {dl_device}")
        addr = self._address()
        if m._kind == _lib.DEVICE_CUDA:
            if stream is not None and stream != -1 and stream != 0:
                m._order(stream, wait=False)
            elif stream is None:
                m._order(1, wait=False)
        dt, di = self.__dlpack_device__()
        return _dlpack.export_dlpack(self, addr, self._code, self.shape, dt, di,
                                     _dlpack.wants_versioned(max_version), readonly=self._view)

    def release(self) -> None:
        """Gives the memory back now (a model-owned output: lets a later call reuse it)."""
        if self._released:
            return
        self._released = True
        m = self._model
        if m._m is None:
            return
        # A model-owned output is the same runtime tensor at each run of its
        # task: only the latest view may mark it dead.
        if not self._view or lib.fadc_tensor_generation(self._h) == self._gen:
            lib.fadc_tensor_release(self._h)
        m._tensors.discard(self)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        kind = "view" if self._view else "tensor"
        return f"<fadc.Tensor {kind} '{self.name}' {_type_str(self._code, self.shape)} on " \
               f"{self._model.device}>"


class Model:
    """A compiled model (``model.so``) opened on a device: see ``fadc.load``.

    Attributes: ``name``; ``device`` ("cpu", "cuda:0"); ``tasks`` (the task names);
    ``declarations``, ``params``, ``consts`` (name -> TensorSpec); ``specs`` (the
    specialisations, [""] for one).  ``task(name)`` describes a task; ``run`` and the task
    methods (``forward``, ``vjp``, ``jvp``, ``vhp``, ``hvp``, ...) run one."""

    def __init__(self, path: Union[str, os.PathLike], device: Device = "cpu",
                 num_threads: Optional[int] = None, seed: int = 0, describe: bool = False):
        self._m: Optional[int] = None
        self._ctx: Optional[int] = None
        self._tensors: "weakref.WeakSet[Tensor]" = weakref.WeakSet()
        self._kind, self._index = parse_device(device)
        self.device = "cpu" if self._kind == _lib.DEVICE_CPU else f"cuda:{self._index}"
        # The DLPack device of the tensors the model takes where they are: (type, id).
        self._dl_device = (_dlpack.CPU, 0) if self._kind == _lib.DEVICE_CPU else (
            _dlpack.CUDA, self._index)
        if num_threads is None:
            num_threads = 0
        if not isinstance(num_threads, int) or not 0 <= num_threads <= 4096:
            raise ArgumentError(f"num_threads: {num_threads!r} is not an integer 0 .. 4096 "
                                "(0: the runtime's choice)")
        if not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
            raise ArgumentError(f"seed: {seed!r} is not an integer 0 .. 2**64 - 1")
        o = _lib.ContextOptions()
        o.device.kind, o.device.index = self._kind, self._index
        o.num_threads, o.seed = num_threads, seed
        ctx = c_void_p()
        s = lib.fadc_context_create(byref(o), byref(ctx))
        if s:
            raise error(s, lib.fadc_context_error(None).decode(errors="replace"))
        self._ctx = ctx.value
        self.path = os.fspath(path)
        m = c_void_p()
        s = lib.fadc_model_open(self._ctx, os.fsencode(self.path),
                                _lib.OPEN_DESCRIBE if describe else 0, byref(m))
        if s:
            msg = self._message()
            lib.fadc_context_destroy(self._ctx)
            self._ctx = None
            raise error(s, msg)
        self._m = m.value
        self._seed_now = seed
        self._stream: Optional[int] = None
        self.name: str = lib.fadc_model_name(self._m).decode()
        self.specs: List[str] = [lib.fadc_model_spec(self._m, i).decode()
                                 for i in range(lib.fadc_model_spec_count(self._m))]
        self.declarations: Dict[str, TensorSpec] = {}
        self._decl_list: List[TensorSpec] = []
        d = _lib.TensorDesc()
        has = c_int()
        for i in range(lib.fadc_model_decl_count(self._m)):
            self._check(lib.fadc_model_decl(self._m, i, byref(d), byref(has)))
            sp = lib.fadc_model_decl_spec(self._m, i)
            t = TensorSpec(d, bool(has.value), self.specs[sp] if sp >= 0 else "")
            self._decl_list.append(t)
            self.declarations.setdefault(t.name, t)
        self.params = {k: v for k, v in self.declarations.items() if v.role == "param"}
        self.consts = {k: v for k, v in self.declarations.items() if v.role == "const"}
        # name -> its specialisations' Task objects, in the artifact's order.
        self._tasks: Dict[str, List[Task]] = {}
        info = _lib.TaskInfo()
        for ti in range(lib.fadc_model_task_count(self._m)):
            self._check(lib.fadc_task_info_get(self._m, ti, byref(info)))
            if info.is_init:
                continue
            task = Task(self, ti, info)
            self._tasks.setdefault(task.name, []).append(task)
        self.tasks: List[str] = list(self._tasks)
        self._run = lib.fadc_run
        # The fast path: tasks of one specialisation (Model._run_cached).
        self._fast: Dict[str, Task] = {k: ts[0] for k, ts in self._tasks.items()
                                       if len(ts) == 1}
        self._mp = c_void_p(self._m)
        self._cp = c_void_p(self._ctx)  # for the hot path's unprototyped calls

    # ------------------------------------------------------------ plumbing

    def _message(self) -> str:
        return lib.fadc_context_error(self._ctx).decode(errors="replace")

    def _check(self, s: int) -> None:
        if s:
            raise error(s, self._message())

    def _live(self) -> int:
        if self._m is None:
            raise ArgumentError(f"model '{self.path}' is closed")
        return self._m

    # ------------------------------------------------------------ description

    def task(self, name: str, spec: Optional[str] = None) -> Task:
        """The task ``name`` (with several specialisations, the first, or the one named
        ``spec``, "N=8")."""
        ts = self._tasks.get(name)
        if not ts:
            raise NotFoundError(f"model '{self.name}' has no task '{name}' (it has: "
                                f"{', '.join(self.tasks)}); compile it with --tasks {name}")
        if spec is None:
            return ts[0]
        for t in ts:
            if t.spec == spec:
                return t
        raise NotFoundError(f"task '{name}' has no specialisation '{spec}' (it has: "
                            f"{', '.join(t.spec for t in ts)})")

    def inputs(self, task: str) -> List[TensorSpec]:
        """The caller's inputs of ``task`` (what ``v=`` takes), in order."""
        return self.task(task).inputs

    def outputs(self, task: str) -> List[TensorSpec]:
        """The outputs of ``task``: the keys of what ``run`` returns, in order."""
        return self.task(task).outputs

    def info(self, key: str) -> Optional[str]:
        """A descriptor field: "options", "triple", "cpu" (the CPU level loaded),
        "cpu_levels" (every level the artifact carries), "features", "source_hash",
        "cuda_arch"."""
        s = lib.fadc_model_info(self._live(), key.encode())
        return s.decode() if s is not None else None

    @property
    def num_threads(self) -> int:
        return lib.fadc_context_num_threads(self._ctx)

    @property
    def device_name(self) -> str:
        """"cpu", or the GPU's name."""
        return lib.fadc_context_device_name(self._ctx).decode()

    def memory(self) -> Dict[str, int]:
        """fadc_context_memory: the bytes the context holds (live) and its high-water mark."""
        s = _lib.MemoryStats()
        self._check(lib.fadc_context_memory(self._ctx, byref(s)))
        return {"live_bytes": s.live_bytes, "peak_bytes": s.peak_bytes}

    def __repr__(self) -> str:
        return f"<fadc.Model '{self.name}' on {self.device}: {', '.join(self.tasks)}>"

    # ------------------------------------------------------------ declarations

    def _host_tensor(self, name: str, x: ArrayLike, want: Optional[Sequence[TensorSpec]],
                     what: str) -> Tuple[int, Any]:
        """A runtime tensor holding x's values for binding: (handle, what keeps it)."""
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
            x = np.from_dlpack(x) if self._kind == _lib.DEVICE_CPU else x
        if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
            a = np.asarray(x)
            if want and not isinstance(x, (np.ndarray, np.generic)):
                a = np.asarray(x, dtype=want[0].dtype)
            if a.dtype not in FADC_OF_NP:
                raise ShapeError(f"{what} '{name}' has dtype {a.dtype} (fadc has f32, f64, "
                                 "i64, bool)")
            if want and all(a.dtype != w.dtype or a.shape != w.shape for w in want):
                raise ShapeError(f"{what} '{name}' must be "
                                 f"{' or '.join(_type_str(w.code, w.shape) for w in want)}, got "
                                 f"{_np_type_str(a)}")
            a = np.ascontiguousarray(a)
            dims = (c_int64 * max(a.ndim, 1))(*a.shape)
            h = c_void_p()
            if self._kind == _lib.DEVICE_CPU:
                self._check(lib.fadc_tensor_wrap(self._ctx, FADC_OF_NP[a.dtype], a.ndim, dims,
                                                 a.ctypes.data, byref(h)))
            else:  # a device tensor, written from the host copy
                self._check(lib.fadc_tensor_create(self._ctx, FADC_OF_NP[a.dtype], a.ndim, dims,
                                                   byref(h)))
                s = lib.fadc_tensor_write(_v(h), a.ctypes.data, a.nbytes)
                if s:
                    lib.fadc_tensor_release(_v(h))
                    self._check(s)
            return _v(h), a
        imp = _dlpack.import_dlpack(x, self._consumer_stream())
        self._check_imported(imp, name, want[0] if want else None, what, output=False)
        h = c_void_p()
        dims = (c_int64 * max(len(imp.shape), 1))(*imp.shape)
        self._check(lib.fadc_tensor_wrap_device(self._ctx, imp.dtype, len(imp.shape), dims,
                                                imp.addr, byref(h)))
        return _v(h), imp.keep

    def bind(self, name: str, value: ArrayLike) -> None:
        """Binds declaration ``name`` (a param or const) to a copy of ``value``: it stays bound
        (over its initializer) for every later run, until bound again."""
        m = self._live()
        want = [d for d in self._decl_list if d.name == name]
        if not want:
            raise NotFoundError(f"model '{self.name}' has no declaration '{name}' (it has: "
                                f"{', '.join(self.declarations)})")
        h, keep = self._host_tensor(name, value, want, "declaration")
        try:
            self._check(lib.fadc_model_bind(m, name.encode(), h))
        finally:
            lib.fadc_tensor_release(h)
            del keep

    def bind_file(self, path: Union[str, os.PathLike]) -> int:
        """Binds declarations from a .safetensors file (each tensor named like one), or one
        .npy file named after its declaration; returns how many were bound."""
        n = c_int()
        self._check(lib.fadc_model_bind_file(self._live(), os.fsencode(path), byref(n)))
        return n.value

    def init(self, seed: Optional[int] = None) -> None:
        """Computes every unbound declaration from its initializer with run seed ``seed``
        (default: the model's seed).  The first run does this if it was not done."""
        if seed is not None and (not isinstance(seed, int) or not 0 <= seed < 2 ** 64):
            raise ArgumentError(f"seed: {seed!r} is not an integer 0 .. 2**64 - 1")
        self._check(lib.fadc_model_init(self._live(), self._seed_now if seed is None else seed))

    def get(self, name: str) -> np.ndarray:
        """A copy of declaration ``name``'s current value."""
        h = c_void_p()
        self._check(lib.fadc_model_get(self._live(), name.encode(), byref(h)))
        d = self.declarations[name]
        a = np.empty(d.shape, d.dtype)
        self._check(lib.fadc_tensor_read(_v(h), a.ctypes.data, a.nbytes))
        return a

    def set_seed(self, seed: int) -> None:
        """The run seed of later calls (samplers; the initializers, if they have not run)."""
        if not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
            raise ArgumentError(f"seed: {seed!r} is not an integer 0 .. 2**64 - 1")
        self._check(lib.fadc_context_set_seed(self._ctx, seed))
        self._seed_now = seed

    def synchronize(self) -> None:
        """Waits for the work queued on the device (a no-op on the CPU)."""
        self._check(lib.fadc_context_synchronize(self._ctx))

    # ------------------------------------------------------------ streams (GPU)

    def _stream_handle(self) -> int:
        if self._stream is None:
            p = c_void_p()
            self._check(lib.fadc_context_stream(self._ctx, byref(p)))
            self._stream = p.value or 0
        return self._stream

    def _consumer_stream(self) -> Optional[int]:
        """The stream argument fadc passes to a producer's __dlpack__: its own stream on a
        GPU (the producer orders its work before it), None on the CPU."""
        return None if self._kind == _lib.DEVICE_CPU else self._stream_handle()

    def _order(self, stream: Any, wait: bool) -> None:
        s = _stream_int(stream)
        if s == -1:
            return
        f = lib.fadc_context_wait_stream if wait else lib.fadc_context_signal_stream
        self._check(f(self._ctx, s or None))

    # ------------------------------------------------------------ running

    def _pick(self, name: str, v: Any, spec: Optional[str]) -> Task:
        ts = self._tasks.get(name)
        if not ts or len(ts) == 1 or spec is not None:
            return ts[0] if ts and spec is None else self.task(name, spec)
        # Several specialisations: the first whose inputs have v's shapes.
        for t in ts:
            try:
                vals = _inputs_of(t, v)
            except ShapeError:
                continue
            if all(_shape_of(x) == s.shape for x, s in zip(vals, t.inputs)):
                return t
        raise ShapeError(f"task '{name}': no specialisation takes these inputs (the "
                         "specialisations: " + "; ".join(
                             f"{t.spec}: " + ", ".join(f"{s.name}: {_type_str(s.code, s.shape)}"
                                                       for s in t.inputs) for t in ts) + ")")

    def _check_imported(self, imp: "_dlpack.Imported", name: str, spec: Optional[TensorSpec],
                        what: str, output: bool) -> None:
        want_dev = (_dlpack.CPU, _dlpack.CUDA_HOST) if self._kind == _lib.DEVICE_CPU else (
            _dlpack.CUDA, _dlpack.CUDA_MANAGED)
        dev_text = {_dlpack.CPU: "cpu", _dlpack.CUDA: f"cuda:{imp.device_id}",
                    _dlpack.CUDA_HOST: "cuda_host", _dlpack.CUDA_MANAGED:
                    f"cuda_managed:{imp.device_id}"}.get(imp.device_type,
                                                         f"DLPack device {imp.device_type}")
        if imp.device_type not in want_dev or (self._kind == _lib.DEVICE_CUDA and
                                               imp.device_id != self._index):
            raise DeviceError(f"{what} '{name}' is on {dev_text}, the model runs on "
                              f"{self.device}")
        if spec is not None and (imp.dtype != spec.code or imp.shape != spec.shape):
            got = f"{imp.dtype_text}[{', '.join(str(d) for d in imp.shape)}]" if \
                imp.dtype is None else _type_str(imp.dtype, imp.shape)
            raise ShapeError(f"{what} '{name}' must be {_type_str(spec.code, spec.shape)}, got "
                             f"{got}")
        if imp.dtype is None:
            raise ShapeError(f"{what} '{name}' has dtype {imp.dtype_text} (fadc has f32, f64, "
                             "i64, bool)")
        if not imp.contiguous:
            raise ShapeError(f"{what} '{name}' must be dense and row-major (C order); make it "
                             "contiguous first")
        if output and imp.readonly:
            raise ArgumentError(f"{what} '{name}' is read-only")

    def _wrap(self, task: Task, j: int, x: Any, spec: TensorSpec, output: bool,
              keep: list) -> int:
        """The runtime tensor for slot j of task (an input, or an output): the cached one when
        x is the array it wraps (see the module's docstring), else a new wrap of x."""
        objs, hs = (task.out_obj, task.out_h) if output else (task.in_obj, task.in_h)
        what = "output" if output else "input"
        if type(x) is Tensor and x._model is self:
            # fadc's own tensor of this model (a buffer, or a view: an earlier output
            # chained into this call, as fadc_run takes model-owned outputs) by its
            # handle; _address raises for a released or overwritten one.
            x._address()
            if x._code != spec.code or x.shape != spec.shape:
                raise ShapeError(f"task '{task.name}': {what} '{spec.name}' must be "
                                 f"{_type_str(spec.code, spec.shape)}, got "
                                 f"{_type_str(x._code, x.shape)}")
            if output and x._view:
                raise ArgumentError(f"task '{task.name}': output '{spec.name}' is a "
                                    "model-owned view; pass an array or buffer of your own")
            objs[j] = _EMPTY  # not the slot's cached wrap
            return x._h
        if type(x) is not np.ndarray:
            ad = _adapter(type(x))
            if ad is not None and x is objs[j]:
                # The tensor wrapped last time, still over the same memory, with the
                # slot's dtype, shape and device (its library says, in a microsecond).
                if ad(x) == (task.out_key if output else task.in_key)[j]:
                    return hs[j]
            if hasattr(x, "__dlpack__"):
                imp = _dlpack.import_dlpack(x, self._consumer_stream())
                self._check_imported(imp, spec.name, spec, f"task '{task.name}': {what}",
                                     output)
                h = c_void_p()
                dims = (c_int64 * max(len(spec.shape), 1))(*spec.shape)
                self._check(lib.fadc_tensor_wrap_device(self._ctx, spec.code, len(spec.shape),
                                                        dims, imp.addr, byref(h)))
                if ad is not None:  # cached, with the capsule (see above)
                    if hs[j]:
                        lib.fadc_tensor_release(hs[j])
                    objs[j], hs[j] = x, _v(h)
                    # What the adapter reads now is what DLPack described and
                    # _check_imported accepted (the same object, read just now).
                    (task.out_key if output else task.in_key)[j] = ad(x)
                    (task.out_cap if output else task.in_cap)[j] = imp.keep
                    return _v(h)
                # Not cached (its memory could move unseen): released after the run,
                # and the slot's cached tensor is no longer the one in fadc_run's array.
                keep.append(imp.keep)
                keep.append(_Handle(_v(h)))
                objs[j] = _EMPTY
                return _v(h)
            if output:
                raise ArgumentError(f"task '{task.name}': output '{spec.name}' must be a NumPy "
                                    f"array or a DLPack tensor, got {type(x).__name__}")
            if isinstance(x, (np.ndarray, np.generic)):  # a subclass, a NumPy scalar: typed
                x = np.asarray(x)
            else:  # Python numbers and nested lists take the input's dtype
                x = np.asarray(x, dtype=spec.dtype)
        elif x is objs[j]:
            # The array wrapped last time: its dtype, shape and layout can
            # have been changed in place, its memory cannot have moved.
            if x.dtype == spec.dtype and x.shape == spec.shape and x.flags.c_contiguous:
                return hs[j]
        if self._kind != _lib.DEVICE_CPU:
            raise DeviceError(f"task '{task.name}': {what} '{spec.name}' is a NumPy array (on "
                              f"the CPU), the model runs on {self.device}; pass a tensor of "
                              f"{self.device} (through DLPack: PyTorch, CuPy, JAX)")
        if x.dtype != spec.dtype or x.shape != spec.shape:
            raise ShapeError(f"task '{task.name}': {what} '{spec.name}' must be "
                             f"{_type_str(spec.code, spec.shape)}, got {_np_type_str(x)}")
        fl = x.flags
        if not (fl.c_contiguous and fl.aligned) or (not output and spec.name in task.writeback
                                                    and not fl.writeable):
            if output:
                raise ArgumentError(f"task '{task.name}': output '{spec.name}' must be a "
                                    "C-contiguous, aligned array")
            x = np.ascontiguousarray(x)  # an input: read from a copy
            if not x.flags.writeable or x.flags.aligned is False:
                x = x.copy()
        elif output and not fl.writeable:
            raise ArgumentError(f"task '{task.name}': output '{spec.name}' is read-only")
        h = c_void_p()
        dims = (c_int64 * max(len(spec.shape), 1))(*spec.shape)
        self._check(lib.fadc_tensor_wrap(self._ctx, spec.code, len(spec.shape), dims,
                                         x.ctypes.data, byref(h)))
        if hs[j]:
            lib.fadc_tensor_release(hs[j])
        objs[j], hs[j] = x, _v(h)
        return _v(h)

    def run(self, task: str, v: Any = None, *, params: Optional[Mapping[str, ArrayLike]] = None,
            seed: Optional[int] = None, out: Any = None, view: bool = False,
            alloc: str = "auto", stream: Any = None, spec: Optional[str] = None
            ) -> Dict[str, Any]:
        """Runs ``task`` and returns its outputs by name, the names ``fadc run --out``
        writes (``out``, ``grad.beta_value``, ``hvp.beta_value``, ...).

        - ``v``: the task's inputs from the caller: one array when it has one (``v`` of vjp),
          else a dict by input name (``v.<param>`` of jvp, vhp, hvp; forward's arguments).
          NumPy arrays, DLPack tensors, or numbers and lists (converted to the input's dtype).
          A wrong dtype, shape or device raises, naming the tensor and what was expected.
        - ``params``: declarations to bind first (``bind``); they stay bound.  Unbound
          declarations come from their seeded initializers, as ``fadc run``'s.
        - ``seed``: the run seed from this call on (``set_seed``; also the initializers' if
          they have not run yet).  Default: the model's (``load(seed=...)``, 0).
        - ``out``: where the outputs go, caller-owned: a dict by output name, a sequence in
          output order, or one array for a task with one output.  Default: new arrays
          (NumPy on the CPU), the caller's from then on; nothing is copied and no later call
          overwrites them.  With ``out=`` the hot path allocates nothing.
        - ``view=True``: model-owned outputs (``fadc.Tensor`` views) instead, valid until the
          next call of the task: a read after it raises ``OutputOverwrittenError``.
        - ``alloc`` (GPU): who allocates default outputs: "auto" (the library of the inputs,
          PyTorch or CuPy, else fadc), "fadc" (a ``fadc.Tensor`` buffer), "numpy" (CPU).
        - ``stream`` (GPU): the caller's CUDA stream (an int CUstream, 1 or 2 for the
          default streams as DLPack numbers them, or a torch/CuPy stream object); default: the
          current stream of the inputs' library.  fadc's work waits for what was queued on it
          before the call, and work queued on it after the call waits for fadc's.
        - ``spec``: the specialisation ("N=8"); default: the first whose inputs fit ``v``.
        """
        t = self._fast.get(task)
        if (t is not None and type(out) is dict and params is None and seed is None and
                not view and spec is None):
            r = self._run_cached(t, v, out, stream)
            if r is not None:
                return r
        m = self._m
        if m is None:
            self._live()
        ts = self._tasks.get(task)
        t = ts[0] if ts is not None and len(ts) == 1 and spec is None else self._pick(task, v,
                                                                                     spec)
        if seed is not None:
            self.set_seed(seed)
        if params:
            for k, val in params.items():
                self.bind(k, val)
        keep: list = []
        specs = t.inputs
        in_arr = t.in_arr
        n = len(specs)
        if n == 1 and not isinstance(v, Mapping):
            if v is None:
                raise ArgumentError(f"task '{t.name}' takes input '{specs[0].name}' "
                                    f"({_type_str(specs[0].code, specs[0].shape)}): pass v=")
            in_arr[0] = self._wrap(t, 0, v, specs[0], False, keep)
        elif n:
            if not isinstance(v, Mapping):
                raise ArgumentError(f"task '{t.name}' takes {n} inputs: pass v= as a dict by "
                                    f"name ({', '.join(t.input_names)})")
            for j, s in enumerate(specs):
                x = v.get(s.name)
                if x is None:
                    raise ArgumentError(f"task '{t.name}': input '{s.name}' "
                                        f"({_type_str(s.code, s.shape)}) is missing from v")
                in_arr[j] = self._wrap(t, j, x, s, False, keep)
            if len(v) != n:
                extra = [k for k in v if k not in t.input_names]
                raise NotFoundError(f"task '{t.name}' has no input "
                                    f"{', '.join(repr(k) for k in extra)} (its inputs: "
                                    f"{', '.join(t.input_names)})")
        elif v is not None and not (isinstance(v, Mapping) and not v):
            raise ArgumentError(f"task '{t.name}' takes no inputs from the caller")
        outs = t.outputs
        out_arr = t.out_arr
        if view:
            if out is not None:
                raise ArgumentError("out= and view=True exclude each other")
            for j in range(len(outs)):
                out_arr[j] = None  # fadc_run sets the model-owned tensors there
                t.out_obj[j] = _EMPTY
            res = None
        else:
            res = self._outputs(t, out, alloc, v)
            for j, s in enumerate(outs):
                out_arr[j] = self._wrap(t, j, res[j], s, True, keep)
        cuda = self._kind == _lib.DEVICE_CUDA
        if cuda:
            cs = _caller_stream(stream, v)
            self._order(cs, wait=True)
        st = self._run(m, t.index, in_arr, n, out_arr, len(outs))
        if cuda and st == 0:
            self._order(cs, wait=False)
        for k in keep:
            if isinstance(k, _Handle):
                k.release()
        if st:
            raise error(st, self._message())
        if view:
            return {s.name: Tensor(self, out_arr[j] or 0, s.name, s.code, s.shape, True)
                    for j, s in enumerate(outs)}
        assert res is not None
        return dict(zip(t.output_names, res))

    def _run_cached(self, t: Task, v: Any, out: Dict[str, Any],
                    stream: Any) -> Optional[Dict[str, Any]]:
        """The hot path: every input and output is the object its slot wrapped last time,
        unchanged (a NumPy array: its dtype, shape and layout; a tensor of a library with an
        adapter: also its address, _ADAPTERS), so fadc_run's arrays hold their runtime
        tensors already, and the run is one ctypes call (on a GPU, between the two stream
        orderings).  None where anything differs: run() then takes the general path (which
        refills the slots)."""
        io = t.in_obj
        if t.n_in == 1:
            x = v.get(t.input_names[0], _EMPTY) if type(v) is dict and len(v) == 1 else v
            if x is not io[0] or not (
                    x.dtype == t.in_dt[0] and x.shape == t.in_sh[0] and x.flags.c_contiguous
                    if type(x) is np.ndarray else _hit(x, t.in_key[0])):
                return None
        elif t.n_in:
            if type(v) is not dict or len(v) != t.n_in:
                return None
            dt, sh = t.in_dt, t.in_sh
            for j, name in enumerate(t.input_names):
                x = v.get(name, _EMPTY)
                if x is not io[j] or not (
                        x.dtype == dt[j] and x.shape == sh[j] and x.flags.c_contiguous
                        if type(x) is np.ndarray else _hit(x, t.in_key[j])):
                    return None
        elif v is not None:
            return None
        if len(out) != t.n_out:
            return None
        oo, dt, sh, ok = t.out_obj, t.out_dt, t.out_sh, t.out_key
        for j, name in enumerate(t.output_names):
            x = out.get(name, _EMPTY)
            if x is not oo[j]:
                return None
            if type(x) is np.ndarray:
                if not (x.dtype == dt[j] and x.shape == sh[j] and x.flags.c_contiguous):
                    return None
            else:  # _hit, inlined (a call less per tensor)
                ad = _ADAPTER_OF.get(type(x))
                if ad is None or ad(x) != ok[j]:
                    return None
        if self._m is None:
            return None
        if self._kind == _lib.DEVICE_CPU:
            st = _lib.run_raw(self._mp, t.index, t.in_arr, t.n_in, t.out_arr, t.n_out)
        else:
            if stream is not None:
                s = _stream_int(stream)
            elif t.n_in:
                # The current stream of the inputs' library (as _caller_stream: the first
                # input of v; every slot holds a tensor of a library with an adapter here).
                x = v if t.n_in == 1 and type(v) is not dict else next(iter(v.values()))
                sf = _STREAM_OF.get(type(x))
                s = sf(self._index) if sf is not None else _stream_int(_caller_stream(None, v))
            else:
                s = 1  # no input to ask: the legacy default stream, as DLPack's None
            if s == -1 or s == self._stream_handle():
                # No ordering: DLPack's -1 (the caller orders), or fadc's own stream.
                st = _lib.run_raw(self._mp, t.index, t.in_arr, t.n_in, t.out_arr, t.n_out)
            else:
                cs = c_void_p(s or None)
                st = _lib.wait_raw(self._cp, cs)
                if not st:
                    st = _lib.run_raw(self._mp, t.index, t.in_arr, t.n_in, t.out_arr, t.n_out)
                    if not st:
                        st = _lib.signal_raw(self._cp, cs)
        if st:
            raise error(st, self._message())
        return dict(out)

    def _outputs(self, t: Task, out: Any, alloc: str, v: Any) -> List[Any]:
        outs = t.outputs
        if out is None:
            if self._kind == _lib.DEVICE_CPU and alloc in ("auto", "numpy"):
                return [np.empty(s.shape, s.dtype) for s in outs]
            if alloc == "numpy":
                raise DeviceError(f"alloc='numpy' on {self.device}: NumPy arrays are on the CPU")
            if alloc not in ("auto", "fadc"):
                raise ArgumentError(f"alloc={alloc!r}: expected 'auto', 'fadc' or 'numpy'")
            like = _like_library(v) if alloc == "auto" else None
            return [self._new_output(s, like) for s in outs]
        if isinstance(out, Mapping):
            res = []
            for s in outs:
                x = out.get(s.name)
                if x is None:
                    raise ArgumentError(f"task '{t.name}': out= lacks output '{s.name}' "
                                        f"({_type_str(s.code, s.shape)})")
                res.append(x)
            if len(out) != len(outs):
                extra = [k for k in out if k not in t.output_names]
                raise NotFoundError(f"task '{t.name}' has no output "
                                    f"{', '.join(repr(k) for k in extra)} (its outputs: "
                                    f"{', '.join(t.output_names)})")
            return res
        if len(outs) == 1 and (isinstance(out, np.ndarray) or hasattr(out, "__dlpack__")):
            return [out]
        if isinstance(out, (list, tuple)):
            if len(out) != len(outs):
                raise ArgumentError(f"task '{t.name}' has {len(outs)} outputs "
                                    f"({', '.join(t.output_names)}), out= gives {len(out)}")
            return list(out)
        raise ArgumentError(f"task '{t.name}': out= must be a dict by output name, a sequence "
                            "in output order, or one array for a task with one output")

    def _new_output(self, s: TensorSpec, like: Optional[str]) -> Any:
        """A caller-owned output on the model's device: from the inputs' library (PyTorch,
        CuPy) where it can allocate, else a buffer of fadc's own (a ``fadc.Tensor``)."""
        if like == "torch":
            import torch  # type: ignore
            tdt = {_lib.F32: torch.float32, _lib.F64: torch.float64, _lib.I64: torch.int64,
                   _lib.BOOL: torch.bool}[s.code]
            return torch.empty(s.shape, dtype=tdt, device=self.device)
        if like == "cupy":
            import cupy  # type: ignore
            with cupy.cuda.Device(self._index):
                return cupy.empty(s.shape, dtype=s.dtype)
        h = c_void_p()
        dims = (c_int64 * max(len(s.shape), 1))(*s.shape)
        self._check(lib.fadc_tensor_create(self._ctx, s.code, len(s.shape), dims, byref(h)))
        return Tensor(self, _v(h), s.name, s.code, s.shape, False)

    # Task methods: the usual tasks by name (others through run, or attribute access).
    def forward(self, v: Any = None, **kw: Any) -> Dict[str, Any]:
        """``run("forward", ...)``: the model's value (``out``)."""
        return self.run("forward", v, **kw)

    def vjp(self, v: Any = None, **kw: Any) -> Dict[str, Any]:
        """``run("vjp", v=...)``: ``out`` and ``grad.<param>`` for each param."""
        return self.run("vjp", v, **kw)

    def jvp(self, v: Any = None, **kw: Any) -> Dict[str, Any]:
        """``run("jvp", v={"v.<param>": ...})``: ``out`` and ``jvp.out``."""
        return self.run("jvp", v, **kw)

    def vhp(self, v: Any = None, **kw: Any) -> Dict[str, Any]:
        """``run("vhp", v={"v.<param>": ...})``: ``out`` and ``vhp.<param>``."""
        return self.run("vhp", v, **kw)

    def hvp(self, v: Any = None, **kw: Any) -> Dict[str, Any]:
        """``run("hvp", v={"v.<param>": ...})``: ``out`` and ``hvp.<param>``."""
        return self.run("hvp", v, **kw)

    def __getattr__(self, name: str) -> Any:
        tasks = self.__dict__.get("_tasks")
        if tasks is not None and name in tasks:
            return lambda v=None, **kw: self.run(name, v, **kw)
        raise AttributeError(f"'Model' object has no attribute '{name}'")

    # ------------------------------------------------------------ closing

    def close(self) -> None:
        """Closes the model and its context: its tensors (views, fadc buffers) die with it."""
        if self._m is None:
            return
        for t in list(self._tasks.values()):
            for task in t:
                task._drop()
        for x in list(self._tensors):
            x.release()
        lib.fadc_model_close(self._m)
        self._m = None
        lib.fadc_context_destroy(self._ctx)
        self._ctx = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# Adapters: for the tensor types of libraries whose memory can move under the same object
# (torch.Tensor.set_, resize_), how to read, in well under a microsecond and without a DLPack
# export, where a tensor's memory is now and what it is: a key of its address, dtype, shape,
# C-contiguity and device, in the library's own terms.  A slot keeps the wrap of such a
# tensor while it is the same object with the key it had when the slot wrapped it (and
# DLPack's description of it was checked against the slot's spec: Model._wrap); the types
# of other libraries are exported through DLPack at every call.  With each adapter, the
# library's current-stream accessor (the GPU hot path's default stream).  Keyed by the root
# of the type's module.
def _torch_key(x: Any) -> Tuple[Any, ...]:
    # Methods and attributes that torch answers without making objects (x.device would make
    # a torch.device); get_device() is -1 on the CPU, is_cuda tells CUDA from other devices.
    return (x.data_ptr(), x.dtype, x.shape, x.is_contiguous(), x.is_cuda, x.get_device())


def _cupy_key(x: Any) -> Tuple[Any, ...]:
    return (x.data.ptr, x.dtype, x.shape, x.flags.c_contiguous, x.device.id)


_TORCH_RAW: List[Any] = []


def _torch_stream(index: int) -> int:
    """torch's current CUDA stream on device ``index``, as a CUstream int.  Asked at every
    call (``with torch.cuda.stream(s)`` changes it between calls), through the accessor
    torch's own compiled code uses (``torch._C._cuda_getCurrentRawStream``, a fraction of a
    microsecond), else ``torch.cuda.current_stream(index).cuda_stream`` (which makes a
    Stream object: a few microseconds)."""
    if not _TORCH_RAW:
        import torch  # type: ignore
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _TORCH_RAW.append(raw if raw is not None else
                          (lambda i: torch.cuda.current_stream(i).cuda_stream))
    return _TORCH_RAW[0](index)


def _cupy_stream(index: int) -> int:
    import cupy  # type: ignore
    return cupy.cuda.get_current_stream().ptr


_ADAPTERS: Dict[str, Any] = {"torch": _torch_key, "cupy": _cupy_key}
_STREAMS: Dict[str, Any] = {"torch": _torch_stream, "cupy": _cupy_stream}
_ADAPTER_OF: Dict[type, Any] = {}
_STREAM_OF: Dict[type, Any] = {}  # filled with _ADAPTER_OF (by _adapter)


def _hit(x: Any, key: Any) -> bool:
    """Is x, a tensor of a library with an adapter, still what its slot wrapped (``key``)?"""
    ad = _ADAPTER_OF.get(type(x))
    return ad is not None and ad(x) == key


def _adapter(tp: type) -> Any:
    try:
        return _ADAPTER_OF[tp]
    except KeyError:
        root = tp.__module__.split(".")[0]
        a = _ADAPTERS.get(root) if hasattr(tp, "__dlpack__") else None
        if a is not None:
            _STREAM_OF[tp] = _STREAMS.get(root)
        _ADAPTER_OF[tp] = a
        return a


class _Handle:
    """A runtime tensor wrapped for one call (a DLPack input), released after it."""
    __slots__ = ("h",)

    def __init__(self, h: int):
        self.h = h

    def release(self) -> None:
        if self.h:
            lib.fadc_tensor_release(self.h)
            self.h = 0


def _stream_int(stream: Any) -> int:
    if stream is None:
        return 1  # the legacy default stream, as DLPack's None means
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise ArgumentError(f"stream={stream!r}: expected an int (a CUstream) or a stream object "
                        "with .cuda_stream or .ptr")


def _first_dlpack(v: Any) -> Any:
    vals = v.values() if isinstance(v, Mapping) else [v]
    for x in vals:
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
            return x
    return None


def _like_library(v: Any) -> Optional[str]:
    x = _first_dlpack(v)
    if x is None:
        return None
    root = type(x).__module__.split(".")[0]
    return root if root in ("torch", "cupy") else None


def _caller_stream(stream: Any, v: Any) -> Any:
    """The caller's stream: given, else the current stream of the inputs' library."""
    if stream is not None:
        return stream
    lib_name = _like_library(v)
    if lib_name == "torch":
        return _torch_stream(_first_dlpack(v).device.index)
    if lib_name == "cupy":
        return _cupy_stream(0)
    return None


def _inputs_of(t: Task, v: Any) -> List[Any]:
    if len(t.inputs) == 1 and not isinstance(v, Mapping):
        return [v]
    if not isinstance(v, Mapping):
        raise ShapeError("inputs by name")
    return [v.get(s.name) for s in t.inputs]


def _shape_of(x: Any) -> Optional[Tuple[int, ...]]:
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else np.shape(x)


def load(path: Union[str, os.PathLike], device: Device = "cpu", num_threads: Optional[int] = None,
         seed: int = 0, describe: bool = False) -> Model:
    """Opens a compiled model (``fadc MODEL.ir -o model.so``) on ``device`` ("cpu",
    "cuda", "cuda:N").

    ``num_threads``: CPU threads for large kernels (None or 0: ``$FADC_NUM_THREADS``, else
    the CPUs online).  ``seed``: the run seed of the initializers and samplers, as
    ``fadc run --seed`` (0).  ``describe=True`` reads the descriptor only (no code is
    loaded: the model can be described, not run).

    Opening checks the artifact's checksum, versions and CPU features, then loads it:
    loading a shared library runs its code, so open only artifacts you trust."""
    return Model(path, device, num_threads, seed, describe)
