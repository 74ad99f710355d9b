"""``fadc.compile``: the ``fadc`` executable, run as a subprocess.

The package never links the compiler (LLVM, NVRTC): compiling is ``fadc
MODEL.ir -o MODEL.so [options]``, with the executable found as
``compile(fadc=...)``, ``$FADC``, ``fadc`` on PATH, or the checkout's
``build/bin/fadc``; fadc's diagnostics (``file:line:col: error: ...`` with
the source line and a caret) become the ``CompileError``'s text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Iterable, Mapping, Optional, Sequence, Union

from ._errors import CompileError


def find_fadc(fadc: Optional[str] = None) -> str:
    """The fadc executable ``compile`` runs."""
    for c in (fadc, os.environ.get("FADC")):
        if c:
            if not (os.path.isfile(c) and os.access(c, os.X_OK)):
                raise FileNotFoundError(f"fadc: the compiler '{c}' is not an executable file")
            return c
    c = shutil.which("fadc")
    if c:
        return c
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for d in (os.environ.get("FADC_BUILD_DIR"), os.path.join(root, "build")):
        if d and os.path.isfile(os.path.join(d, "bin", "fadc")):
            return os.path.join(d, "bin", "fadc")
    raise FileNotFoundError("fadc: the compiler was not found: put fadc on PATH or set FADC "
                            "to its path")


def _join(x: Union[str, int, Iterable]) -> str:
    return x if isinstance(x, str) else str(x) if isinstance(x, int) else ",".join(
        str(e) for e in x)


def compile(source: Union[str, os.PathLike], output: Union[str, os.PathLike],
            tasks: Union[None, str, Sequence[str]] = None, target: Union[None, str,
                                                                        Sequence[str]] = None,
            defines: Optional[Mapping[str, Union[int, Sequence[int]]]] = None,
            cpu: Optional[str] = None, opt: Optional[int] = None,
            args: Sequence[str] = (), fadc: Optional[str] = None) -> str:
    """Compiles ``source`` (a model in fadc's IR) into the artifact ``output`` and returns
    its path.

    ``tasks``: "vjp,hvp", a list, or "all" (default: the model's ``tasks``); ``target``:
    "cpu", "cuda" or "cpu,cuda" (or a list); ``defines``: sizes, ``{"N": 32}``, or
    specialisations ``{"N": [8, 32]}``; ``cpu``: the CPU level (``--cpu``); ``opt``: LLVM's
    level 0-3; ``args``: more options, as the command line takes them.  Raises
    ``CompileError`` with fadc's diagnostics."""
    exe = find_fadc(fadc)
    cmd = [exe, os.fspath(source), "-o", os.fspath(output)]
    if tasks is not None:
        cmd += ["--tasks", _join(tasks)]
    if target is not None:
        cmd += ["--target", _join(target)]
    for k, v in (defines or {}).items():
        cmd += ["-D", f"{k}={_join(v)}"]
    if cpu is not None:
        cmd += ["--cpu", cpu]
    if opt is not None:
        cmd += [f"-O{int(opt)}"]
    cmd += list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        kind = "usage error" if r.returncode == 2 else "error"
        raise CompileError(f"fadc: compiling {os.fspath(source)} failed ({kind}, exit "
                           f"{r.returncode})", r.stderr, r.returncode, cmd)
    return os.fspath(output)
