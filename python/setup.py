"""Copies the runtime library into the package when it is built.

The library is the checkout's build/lib/libfadc.so (python/libfadc.cmake),
or $FADC_LIB, or $FADC_BUILD_DIR/lib/libfadc.so.  Without one, the package is
built without it and finds an installed libfadc at import (fadc/_lib.py).
A wheel that carries the library is platform-specific but not tied to a
Python version (the library is loaded through ctypes, not the C API of
Python): py3-none-<platform>.
"""

import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdists and installs only
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def library():
    for c in (os.environ.get("FADC_LIB"),
              os.environ.get("FADC_BUILD_DIR") and os.path.join(os.environ["FADC_BUILD_DIR"],
                                                                "lib", "libfadc.so"),
              os.path.join(HERE, "..", "build", "lib", "libfadc.so")):
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = library()
        if lib is None:
            sys.stderr.write("fadc: no libfadc.so found (build the checkout first, or set "
                             "FADC_LIB): the package will look for an installed one\n")
            return
        dst = os.path.join(self.build_lib, "fadc", "libfadc.so")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(lib, dst)


class BinaryDistribution(Distribution):
    """Carries a shared library: a platform wheel, installed into platlib."""

    def has_ext_modules(self):
        return library() is not None


cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        def get_tag(self):
            python, abi, plat = super().get_tag()
            return ("py3", "none", plat) if not self.root_is_pure else (python, abi, plat)

    cmdclass["bdist_wheel"] = BdistWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
