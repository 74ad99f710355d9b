"""Fixtures of the Python package's tests: the models, compiled once per session, and the
oracle, ``fadc run MODEL.so --task T --v NAME=FILE.npy ... --out DIR``'s .npy files.

The package under test is python/fadc (PYTHONPATH), over the build's libfadc.so (FADC_LIB)
and the build's fadc (FADC); tests/tests.cmake sets all three.  Each task's inputs are drawn
here with NumPy (a fixed seed) and given to both sides, so the oracle does not depend on the
package drawing them as fadc run does; declarations come from the seeded initializers on
both sides (seed 0 unless a test says otherwise).
"""

import os
import subprocess

import numpy as np
import pytest

# The sanitizer build preloads its runtime into python3 (tests/tests.cmake), for the
# instrumented libfadc.so; fadc and fadc run are executables with the runtime linked in, so
# their processes must not get it twice.  Python children that load libfadc get it back
# (test_package.py).
PRELOAD = os.environ.pop("LD_PRELOAD", None)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))


def fadc_exe():
    exe = os.environ.get("FADC") or os.path.join(ROOT, "build", "bin", "fadc")
    assert os.path.isfile(exe), f"fadc not found ({exe}): set FADC"
    return exe


# name: (source, fadc -o options).  multiheadattn at reduced sizes stands for the zoo (the
# sizes of tests/models/zoo-a-multiheadattn.ir): tasks forward, vjp, vhp, jvp.
MODELS = {
    "ppl_simple_reg": (os.path.join(ROOT, "models", "ppl_simple_reg.ir"), []),
    "ppl_robust_reg": (os.path.join(ROOT, "models", "ppl_robust_reg.ir"), []),
    "multiheadattn": (os.path.join(ROOT, "models", "multiheadattn.ir"),
                      ["-D", "B=4", "-D", "L=3", "-D", "S=5"]),
    "args": (os.path.join(HERE, "args.ir"), ["-D", "N=2,3", "--tasks", "vjp"]),
    "unbound": (os.path.join(HERE, "unbound.ir"), []),
}


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fadc-py")


@pytest.fixture(scope="session")
def models(workdir):
    """name -> path of the compiled artifact (each compiled once)."""
    out = {}
    for name, (src, opts) in MODELS.items():
        so = str(workdir / f"{name}.so")
        subprocess.run([fadc_exe(), src, "-o", so] + opts, check=True)
        out[name] = so
    return out


def draw_inputs(specs, seed):
    """The caller's inputs of a task: U[0, 1) from NumPy, in each input's dtype."""
    rng = np.random.default_rng(seed)
    return {s.name: rng.random(s.shape).astype(s.dtype) for s in specs}


class Oracle:
    """Runs ``fadc run`` on an artifact with given inputs; returns {name: array}."""

    def __init__(self, workdir):
        self.dir = workdir
        self.n = 0

    def __call__(self, so, task, inputs, seed=0, params=None, defines=()):
        self.n += 1
        d = self.dir / f"oracle{self.n}"
        d.mkdir()
        cmd = [fadc_exe(), "run", so, "--task", task, "--seed", str(seed)]
        for k, a in inputs.items():
            f = str(d / f"in.{k}.npy")
            np.save(f, a)
            # forward's arguments are bound with --params, the task's own inputs with --v
            cmd += ["--v" if k == "v" or k.startswith("v.") else "--params", f"{k}={f}"]
        for k, a in (params or {}).items():
            f = str(d / f"param.{k}.npy")
            np.save(f, a)
            cmd += ["--params", f"{k}={f}"]
        for dd in defines:
            cmd += ["-D", dd]
        out = d / "out"
        subprocess.run(cmd + ["--out", str(out)], check=True)
        return {f[:-4]: np.load(str(out / f)) for f in os.listdir(out)}


@pytest.fixture(scope="session")
def oracle(workdir):
    return Oracle(workdir)
