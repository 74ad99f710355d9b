"""Exceptions: one class per fadc_status, each carrying fadc's code and message.

Every error of the runtime (a non-zero fadc_status) becomes the class of its
status with the message of fadc_context_error; the checks the package makes
itself before calling the runtime (a NumPy array of the wrong shape, dtype
or device) raise the same classes with the same codes, so that a caller
catches one kind of error whichever side found it.  Each class also derives
from the built-in exception a Python caller would expect (ValueError for a
shape, KeyError-like LookupError for a name, ...).
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _lib


class FadcError(Exception):
    """An error of fadc: ``code`` is the fadc_status (an int), ``status`` its
    name ("FADC_ERR_SHAPE"), ``message`` fadc's text."""

    code: int = -1

    def __init__(self, message: str, code: Optional[int] = None):
        if code is not None:
            self.code = code
        self.status = _lib.STATUS_NAMES[self.code] if 0 <= self.code < len(
            _lib.STATUS_NAMES) else f"fadc_status {self.code}"
        self.message = message
        super().__init__(f"{message} [{self.status}]")


class ArgumentError(FadcError, ValueError):
    code = _lib.ERR_ARG


class FileError(FadcError, OSError):
    code = _lib.ERR_IO


class FormatError(FadcError, ValueError):
    code = _lib.ERR_FORMAT


class VersionError(FadcError):
    code = _lib.ERR_VERSION


class CPUFeatureError(FadcError):
    code = _lib.ERR_CPU


class LoadError(FadcError):
    code = _lib.ERR_LOAD


class NotFoundError(FadcError, LookupError):
    code = _lib.ERR_NOT_FOUND


class ShapeError(FadcError, ValueError):
    """A tensor of the wrong dtype or shape: the message names it and what was expected."""
    code = _lib.ERR_SHAPE


class DeviceError(FadcError):
    """A tensor on the wrong device, or a device that is not available."""
    code = _lib.ERR_DEVICE


class UnboundError(FadcError):
    code = _lib.ERR_UNBOUND


class OutOfMemoryError(FadcError, MemoryError):
    code = _lib.ERR_NOMEM


class RunError(FadcError, RuntimeError):
    code = _lib.ERR_RUN


class StateError(FadcError, RuntimeError):
    code = _lib.ERR_STATE


class OutputOverwrittenError(FadcError):
    """A model-owned output (``view=True``) read after a later call overwrote it."""
    code = _lib.ERR_OUTPUT_OVERWRITTEN


class DataIndexError(FadcError, IndexError):
    """An index in the data out of its range (a class label, a token id)."""
    code = _lib.ERR_INDEX


class CompileError(FadcError):
    """``fadc.compile`` failed: ``diagnostics`` is what fadc printed, ``returncode`` its exit
    status (1: an error in the input, 2: a usage error), ``command`` what was run."""

    def __init__(self, message: str, diagnostics: str, returncode: int, command: list):
        self.diagnostics = diagnostics
        self.returncode = returncode
        self.command = command
        super().__init__(message, code=-1)
        self.status = "compile"
        self.args = (f"{message}\n{diagnostics}".rstrip(),)

    def __str__(self) -> str:
        return self.args[0]


_BY_CODE: Dict[int, Type[FadcError]] = {
    c.code: c for c in (ArgumentError, FileError, FormatError, VersionError, CPUFeatureError,
                        LoadError, NotFoundError, ShapeError, DeviceError, UnboundError,
                        OutOfMemoryError, RunError, StateError, OutputOverwrittenError,
                        DataIndexError)
}


def error(code: int, message: str) -> FadcError:
    """The exception of fadc_status `code` with `message`."""
    cls = _BY_CODE.get(code, FadcError)
    return cls(message, code) if cls is FadcError else cls(message)
