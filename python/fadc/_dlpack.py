"""DLPack in and out, in ctypes: no compiler, no dependency.

A consumer (``import_dlpack``) asks an object's ``__dlpack__`` for a capsule
(the versioned DLManagedTensorVersioned of DLPack 1.0 where the producer
takes ``max_version``, else the legacy DLManagedTensor), reads its DLTensor
(data + byte_offset, device, dtype, shape, strides) and keeps the capsule
referenced for as long as the memory is used.  It never renames the
capsule: the producer's capsule destructor then calls the tensor's deleter
when the capsule goes, which is the borrowing the package needs (the
memory is used during one call, or while an output is alive).

A producer (``export_dlpack``) builds the struct in ctypes memory with
explicit row-major strides, a deleter (a ctypes callback) that drops the
registry entry keeping the struct, its shape and the owner alive, and a
capsule destructor that calls that deleter when no consumer took the
capsule (its name is still "dltensor").  Consumers rename a capsule they
take to "used_dltensor" and call the deleter themselves when done.

The same code serves the CPU (kDLCPU) and CUDA (kDLCUDA): on the CPU it is
tested with NumPy's own ``from_dlpack`` and ``__dlpack__`` (tests/python);
on a GPU only the device type, the stream argument and the memory differ.
"""

from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, PYFUNCTYPE, Structure, c_char_p, c_int, c_int32,
                    c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object)
from typing import Any, Dict, NamedTuple, Optional, Tuple

from . import _lib

# DLDeviceType values the package meets.
CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
# DLDataTypeCode: kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool.
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6
# fadc_dtype <-> (code, bits), lanes 1.
FADC_OF = {(_FLOAT, 32): _lib.F32, (_FLOAT, 64): _lib.F64, (_INT, 64): _lib.I64,
           (_BOOL, 8): _lib.BOOL}
DL_OF = {v: k for k, v in FADC_OF.items()}
FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


_LEGACY, _VERSIONED = b"dltensor", b"dltensor_versioned"

# The capsule API.  The variants taking the capsule as a raw pointer are for
# the capsule destructor, which runs while the capsule is being freed (no
# reference may be taken to it then).
_is_valid = PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer = PYFUNCTYPE(c_void_p, py_object, c_char_p)(("PyCapsule_GetPointer",
                                                           ctypes.pythonapi))
_new_capsule = PYFUNCTYPE(py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New",
                                                                    ctypes.pythonapi))
_is_valid_raw = PYFUNCTYPE(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer_raw = PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer",
                                                             ctypes.pythonapi))


class Imported(NamedTuple):
    """What a DLPack capsule describes; ``keep`` must stay referenced while ``addr`` is used."""
    addr: int
    dtype: Optional[int]  # fadc_dtype, None for a dtype fadc has not
    dtype_text: str
    shape: Tuple[int, ...]
    device_type: int
    device_id: int
    readonly: bool
    contiguous: bool
    keep: Any


def _dtype_text(code: int, bits: int, lanes: int) -> str:
    name = {_INT: "int", _UINT: "uint", _FLOAT: "float", _BFLOAT: "bfloat", _BOOL: "bool"}.get(
        code, f"code{code}:")
    return f"{name}{bits}" + (f"x{lanes}" if lanes != 1 else "")


def request(obj: Any, stream: Optional[int]) -> Any:
    """obj.__dlpack__'s capsule: versioned where the producer takes max_version."""
    kw = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=(1, 0), **kw)
    except TypeError:  # a producer of DLPack before 1.0 (NumPy < 2.1, ...)
        return obj.__dlpack__(**kw)


def import_dlpack(obj: Any, stream: Optional[int] = None) -> Imported:
    """Reads the DLTensor that ``obj.__dlpack__(stream=...)`` exports."""
    cap = request(obj, stream)
    mt: Any
    if _is_valid(cap, _VERSIONED):
        mt = DLManagedTensorVersioned.from_address(_get_pointer(cap, _VERSIONED))
        readonly = bool(mt.flags & FLAG_READ_ONLY)
        if mt.version.major != 1:
            raise BufferError(f"DLPack {mt.version.major}.{mt.version.minor} is not supported "
                              "(fadc reads 1.x)")
    elif _is_valid(cap, _LEGACY):
        mt = DLManagedTensor.from_address(_get_pointer(cap, _LEGACY))
        readonly = False
    else:
        raise BufferError("__dlpack__ returned no DLPack capsule (or one already consumed)")
    t = mt.dl_tensor
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    # Dense row-major: strides NULL, or each the product of the later
    # dimensions (a dimension of size 1 may have any stride, as PyTorch
    # gives them).
    contiguous = True
    if t.strides and ndim:
        want = 1
        for i in range(ndim - 1, -1, -1):
            if shape[i] != 1 and t.strides[i] != want:
                contiguous = False
                break
            want *= shape[i]
    dt = t.dtype
    code = FADC_OF.get((dt.code, dt.bits)) if dt.lanes == 1 else None
    return Imported((t.data or 0) + t.byte_offset, code, _dtype_text(dt.code, dt.bits, dt.lanes),
                    shape, t.device.device_type, t.device.device_id, readonly, contiguous, cap)


# ---------------------------------------------------------------- producing

# struct address -> (struct, shape and strides arrays, owner): what a live
# export keeps alive, until its deleter runs.
_live: Dict[int, Any] = {}


@CFUNCTYPE(None, c_void_p)
def _deleter(p: int) -> None:
    _live.pop(p, None)


@CFUNCTYPE(None, c_void_p)
def _capsule_destructor(cap: int) -> None:
    # Taken by no consumer: the export ends here.  (A consumer renamed it
    # "used_dltensor" and calls the deleter itself.)
    for name in (_LEGACY, _VERSIONED):
        if _is_valid_raw(cap, name):
            _live.pop(_get_pointer_raw(cap, name), None)
            return


_DELETER = ctypes.cast(_deleter, c_void_p).value
_DESTRUCTOR = ctypes.cast(_capsule_destructor, c_void_p).value


def live_exports() -> int:
    """How many exported capsules are still held by a consumer (for tests)."""
    return len(_live)


def export_dlpack(owner: Any, addr: int, dtype: int, shape: Tuple[int, ...], device_type: int,
                  device_id: int, versioned: bool, readonly: bool = False) -> Any:
    """A DLPack capsule over memory that ``owner`` keeps alive."""
    nd = len(shape)
    dims = (c_int64 * max(nd, 1))(*shape)
    strides = (c_int64 * max(nd, 1))()
    s = 1
    for i in range(nd - 1, -1, -1):
        strides[i] = s
        s *= shape[i]
    mt: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = mt.dl_tensor
    t.data = addr or None
    t.device.device_type, t.device.device_id = device_type, device_id
    t.ndim = nd
    t.dtype.code, t.dtype.bits = DL_OF[dtype]
    t.dtype.lanes = 1
    t.shape = ctypes.cast(dims, POINTER(c_int64))
    t.strides = ctypes.cast(strides, POINTER(c_int64))
    t.byte_offset = 0
    mt.deleter = _DELETER
    if versioned:
        mt.version.major, mt.version.minor = 1, 0
        mt.flags = FLAG_READ_ONLY if readonly else 0
    p = ctypes.addressof(mt)
    _live[p] = (mt, dims, strides, owner)
    return _new_capsule(p, _VERSIONED if versioned else _LEGACY, _DESTRUCTOR)


def wants_versioned(max_version: Optional[Tuple[int, int]]) -> bool:
    return max_version is not None and tuple(max_version)[0] >= 1
