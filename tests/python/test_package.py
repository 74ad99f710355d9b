"""Packaging: ``pip install ./python`` and ``pip wheel ./python`` from the built checkout give
a package that carries libfadc.so and runs outside the source tree (no network: --no-build-isolation --no-index,
Debian's setuptools).  The source folder is copied first, so that the in-tree build leaves
nothing behind in the checkout; FADC_LIB tells setup.py which library to copy."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import PRELOAD, ROOT


def pip(*args):
    lib = os.environ.get("FADC_LIB") or os.path.join(ROOT, "build", "lib", "libfadc.so")
    env = dict(os.environ, FADC_LIB=lib, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([sys.executable, "-m", "pip"] + list(args) + ["-q", "--no-deps",
                                                                     "--no-index"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout


def source(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    return src


@pytest.mark.parametrize("how", ["install", "wheel"])
def test_pip_install(tmp_path, models, how):
    """`pip install ./python`, and `pip wheel ./python` then the wheel installed elsewhere."""
    src, site = source(tmp_path), tmp_path / "site"
    if how == "install":
        pip("install", "--no-build-isolation", "--target", str(site), str(src))
    else:
        pip("wheel", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src))
        (wheel,) = os.listdir(tmp_path / "dist")
        assert wheel.startswith("fadc-0.1.0-py3-none-linux_") and wheel.endswith(".whl")
        pip("install", "--target", str(site), str(tmp_path / "dist" / wheel))
    assert os.path.isfile(site / "fadc" / "libfadc.so")
    # Run from elsewhere, with nothing pointing at the build: the package finds its own copy.
    env = {k: v for k, v in os.environ.items() if k not in ("FADC_LIB", "FADC_BUILD_DIR")}
    env["PYTHONPATH"] = str(site)
    if PRELOAD:
        env["LD_PRELOAD"] = PRELOAD
    code = ("import fadc, numpy as np; m = fadc.load(%r); "
            "print(fadc.library_path); print(float(m.vjp(np.float32(1))['out']))"
            % models["ppl_simple_reg"])
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    path, value = r.stdout.split()
    assert path == str(site / "fadc" / "libfadc.so")
    import fadc
    with fadc.load(models["ppl_simple_reg"]) as m:
        assert float(value) == float(m.vjp(np.float32(1))["out"])
