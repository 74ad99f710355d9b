"""The runtime library (libfadc.so, include/fadc.h) through ctypes.

Finding the library, in order (docs/PYTHON.md):

1. ``$FADC_LIB``: the path of a libfadc.so (an error if it is not there);
2. the copy inside the package, next to this file (what ``pip install
   ./python`` and ``pip wheel ./python`` put there from a built checkout);
3. the build tree of the checkout this file is in (``python/fadc`` run from
   the source tree): ``$FADC_BUILD_DIR/lib``, else ``build/lib``;
4. the system's loader: an installed libfadc (``make install``, issue 25),
   or one on ``LD_LIBRARY_PATH``.

Everything fadc.h declares that the package calls is given its prototype
here once (``argtypes``/``restype``), so that a wrong argument is a Python
TypeError, not a crash.  The structs mirror fadc.h field by field; ctypes
lays them out as the C compiler does (natural alignment).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int64, c_size_t, c_uint, c_uint64,
                    c_void_p)
from typing import Optional

MAXDIM = 8  # FADC_MAXDIM

# enum fadc_status, in fadc.h's order.
STATUS_NAMES = (
    "FADC_OK", "FADC_ERR_ARG", "FADC_ERR_IO", "FADC_ERR_FORMAT", "FADC_ERR_VERSION",
    "FADC_ERR_CPU", "FADC_ERR_LOAD", "FADC_ERR_NOT_FOUND", "FADC_ERR_SHAPE", "FADC_ERR_DEVICE",
    "FADC_ERR_UNBOUND", "FADC_ERR_NOMEM", "FADC_ERR_RUN", "FADC_ERR_STATE",
    "FADC_ERR_OUTPUT_OVERWRITTEN", "FADC_ERR_INDEX",
)
OK, ERR_ARG, ERR_IO, ERR_FORMAT, ERR_VERSION, ERR_CPU, ERR_LOAD, ERR_NOT_FOUND, ERR_SHAPE, \
    ERR_DEVICE, ERR_UNBOUND, ERR_NOMEM, ERR_RUN, ERR_STATE, ERR_OUTPUT_OVERWRITTEN, \
    ERR_INDEX = range(len(STATUS_NAMES))

# enum fadc_dtype, fadc_device_kind, fadc_role; FADC_OPEN_DESCRIBE; FADC_TARGET_*.
F32, F64, I64, BOOL = range(4)
DEVICE_CPU, DEVICE_CUDA = range(2)
ROLE_PARAM, ROLE_CONST, ROLE_INPUT, ROLE_OUTPUT = range(4)
OPEN_DESCRIBE = 1
TARGET_CPU, TARGET_CUDA = 1, 2


class Device(Structure):
    _fields_ = [("kind", c_int), ("index", c_int)]


class ContextOptions(Structure):
    _fields_ = [("device", Device), ("num_threads", c_int), ("seed", c_uint64)]


class TensorDesc(Structure):
    _fields_ = [("name", c_char_p), ("role", c_int), ("dtype", c_int), ("rank", c_int),
                ("dim", c_int64 * MAXDIM)]


class TaskInfo(Structure):
    _fields_ = [("name", c_char_p), ("is_init", c_int), ("ninputs", c_int), ("ncaller", c_int),
                ("noutputs", c_int), ("arena_bytes", c_uint64), ("naive_bytes", c_uint64),
                ("nkernels", c_int), ("targets", c_uint), ("cuda_launches", c_int),
                ("spec_index", c_int), ("spec", c_char_p), ("cuda_choices", c_int)]


class MemoryStats(Structure):
    _fields_ = [("live_bytes", c_uint64), ("peak_bytes", c_uint64)]


class DeviceStats(Structure):
    _fields_ = [("graphs_recorded", c_uint64), ("graphs_replayed", c_uint64),
                ("graphs_rerecorded", c_uint64), ("graphs_skipped", c_uint64),
                ("eager_runs", c_uint64), ("pool_live_blocks", c_uint64),
                ("pool_live_bytes", c_uint64), ("pool_reserved_bytes", c_uint64),
                ("choices_timed", c_uint64), ("choices_cached", c_uint64)]


P = c_void_p  # fadc_context *, fadc_model *, fadc_tensor *: opaque
PP = POINTER(c_void_p)

# name: (restype, argtypes).  fadc_run takes its tensor arrays as
# c_void_p arrays (ctypes passes an array by reference).
_PROTOS = {
    "fadc_status_name": (c_char_p, [c_int]),
    "fadc_dtype_name": (c_char_p, [c_int]),
    "fadc_context_create": (c_int, [POINTER(ContextOptions), PP]),
    "fadc_context_destroy": (None, [P]),
    "fadc_context_set_seed": (c_int, [P, c_uint64]),
    "fadc_context_error": (c_char_p, [P]),
    "fadc_context_synchronize": (c_int, [P]),
    "fadc_context_device_name": (c_char_p, [P]),
    "fadc_context_num_threads": (c_int, [P]),
    "fadc_context_memory": (c_int, [P, POINTER(MemoryStats)]),
    "fadc_context_stats": (c_int, [P, POINTER(DeviceStats)]),
    "fadc_model_open": (c_int, [P, c_char_p, c_uint, PP]),
    "fadc_model_close": (None, [P]),
    "fadc_model_name": (c_char_p, [P]),
    "fadc_model_info": (c_char_p, [P, c_char_p]),
    "fadc_model_task_count": (c_int, [P]),
    "fadc_model_spec_count": (c_int, [P]),
    "fadc_model_spec": (c_char_p, [P, c_int]),
    "fadc_task_info_get": (c_int, [P, c_int, POINTER(TaskInfo)]),
    "fadc_task_input": (c_int, [P, c_int, c_int, POINTER(TensorDesc)]),
    "fadc_task_output": (c_int, [P, c_int, c_int, POINTER(TensorDesc)]),
    "fadc_model_decl_count": (c_int, [P]),
    "fadc_model_decl": (c_int, [P, c_int, POINTER(TensorDesc), POINTER(c_int)]),
    "fadc_model_decl_spec": (c_int, [P, c_int]),
    "fadc_model_bind": (c_int, [P, c_char_p, P]),
    "fadc_model_bind_file": (c_int, [P, c_char_p, POINTER(c_int)]),
    "fadc_model_init": (c_int, [P, c_uint64]),
    "fadc_model_get": (c_int, [P, c_char_p, PP]),
    "fadc_tensor_create": (c_int, [P, c_int, c_int, POINTER(c_int64), PP]),
    "fadc_tensor_wrap": (c_int, [P, c_int, c_int, POINTER(c_int64), c_void_p, PP]),
    "fadc_tensor_release": (None, [P]),
    "fadc_tensor_generation": (c_uint64, [P]),
    "fadc_tensor_data": (c_void_p, [P]),
    "fadc_tensor_bytes": (c_size_t, [P]),
    "fadc_tensor_read": (c_int, [P, c_void_p, c_size_t]),
    "fadc_tensor_write": (c_int, [P, c_void_p, c_size_t]),
    "fadc_run": (c_int, [P, c_int, c_void_p, c_int, c_void_p, c_int]),
    # Appended to fadc.h for bindings ("interoperation").
    "fadc_tensor_wrap_device": (c_int, [P, c_int, c_int, POINTER(c_int64), c_uint64, PP]),
    "fadc_tensor_address": (c_int, [P, POINTER(c_uint64)]),
    "fadc_context_stream": (c_int, [P, PP]),
    "fadc_context_wait_stream": (c_int, [P, c_void_p]),
    "fadc_context_signal_stream": (c_int, [P, c_void_p]),
}


def _candidates() -> list:
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libfadc.so")]
    build = os.environ.get("FADC_BUILD_DIR")
    root = os.path.dirname(os.path.dirname(here))  # python/fadc -> the checkout
    if build:
        out.append(os.path.join(build, "lib", "libfadc.so"))
    if os.path.isfile(os.path.join(root, "include", "fadc.h")):
        out.append(os.path.join(root, "build", "lib", "libfadc.so"))
    return out


def find_library() -> str:
    """The path of the libfadc.so that ``import fadc`` loads (see the module's docstring)."""
    env = os.environ.get("FADC_LIB")
    if env:
        if not os.path.isfile(env):
            raise ImportError(f"fadc: FADC_LIB={env} is not a file")
        return env
    for c in _candidates():
        if os.path.isfile(c):
            return c
    found = ctypes.util.find_library("fadc")
    if found:
        return found
    raise ImportError(
        "fadc: libfadc.so not found: set FADC_LIB to its path, build the checkout "
        "(cmake --build build: build/lib/libfadc.so), or install fadc (make install); looked in "
        + ", ".join(_candidates()) + " and the system's library path")


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    missing = []
    for name, (res, args) in _PROTOS.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype = res
        f.argtypes = args
    if missing:
        raise ImportError(f"fadc: {path} lacks {', '.join(missing)} (a libfadc older than this "
                          "package: rebuild it, or point FADC_LIB at a newer one)")
    return lib


path: str = find_library()
lib: ctypes.CDLL = _load(path)
# fadc_run without a prototype, for the hot path (Model.run's fast path):
# ctypes converts nothing then (its arguments are a c_void_p, Python ints
# and ctypes arrays, passed as they are), which saves about a microsecond
# a call against the checked prototype above.  The same library (dlopen
# returns the handle it has), a second function object.
_raw = ctypes.CDLL(path)
run_raw = _raw.fadc_run
# The same for the GPU hot path's two stream orderings (their arguments are
# c_void_p objects there: an unprototyped Python int would pass as a C int).
wait_raw = _raw.fadc_context_wait_stream
signal_raw = _raw.fadc_context_signal_stream


def status_name(code: int) -> str:
    s: Optional[bytes] = lib.fadc_status_name(code)
    return s.decode() if s else f"fadc_status {code}"
