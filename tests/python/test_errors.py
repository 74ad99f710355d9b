"""Every error case: each raises the exception class of its fadc_status, carrying the code and
a message naming the tensor (or file, task, name) and what was expected.  Messages of the
runtime are fadc's own (fadc_context_error)."""

import os

import numpy as np
import pytest

import fadc
from fadc import _dlpack, _lib


@pytest.fixture()
def simple(models):
    with fadc.load(models["ppl_simple_reg"]) as m:
        yield m


def raises(cls, code, *parts):
    """pytest.raises(cls) whose message holds every part, and whose code is `code`."""
    class Check:
        def __enter__(self):
            self.r = pytest.raises(cls)
            self.info = self.r.__enter__()
            return self.info

        def __exit__(self, *exc):
            ok = self.r.__exit__(*exc)
            e = self.info.value
            assert e.code == code and e.status == _lib.STATUS_NAMES[code], (e.code, e.status)
            for p in parts:
                assert p in str(e), f"{p!r} not in {str(e)!r}"
            return ok
    return Check()


def test_input_shape_dtype(simple):
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "input 'v' must be f32[], got f32[2]"):
        simple.vjp(np.zeros(2, np.float32))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "input 'v' must be f32[], got f64[]"):
        simple.vjp(np.float64(1))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "input 'v.beta_value' must be f32[11, 1]",
                "got f32[11]"):
        simple.jvp({"v.beta_value": np.zeros(11, np.float32)})


def test_inputs_missing_or_unknown(simple):
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "takes input 'v' (f32[])"):
        simple.vjp()
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "input 'v.beta_value'", "missing"):
        simple.jvp({})
    with raises(fadc.NotFoundError, _lib.ERR_NOT_FOUND, "no input 'v.gamma'",
                "its inputs: v.beta_value"):
        simple.jvp({"v.beta_value": np.zeros((11, 1), np.float32), "v.gamma": 1})
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "takes no inputs"):
        simple.forward(np.float32(1))


def test_unknown_task(simple):
    with raises(fadc.NotFoundError, _lib.ERR_NOT_FOUND, "no task 'nope'", "vjp"):
        simple.run("nope", np.float32(1))
    with pytest.raises(AttributeError):
        simple.nope


def test_outputs(simple):
    v = np.float32(1)
    good = {"out": np.empty((), np.float32), "grad.beta_value": np.empty((11, 1), np.float32)}
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "output 'grad.beta_value' must be f32[11, 1]",
                "got f32[11]"):
        simple.vjp(v, out=dict(good, **{"grad.beta_value": np.empty(11, np.float32)}))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "output 'out' must be f32[], got f64[]"):
        simple.vjp(v, out=dict(good, out=np.empty((), np.float64)))
    ro = np.empty((11, 1), np.float32)
    ro.flags.writeable = False
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "output 'grad.beta_value' is read-only"):
        simple.vjp(v, out=dict(good, **{"grad.beta_value": ro}))
    strided = np.empty((11, 2), np.float32)[:, :1]
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "output 'grad.beta_value' must be a "
                "C-contiguous"):
        simple.vjp(v, out=dict(good, **{"grad.beta_value": strided}))
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "lacks output 'grad.beta_value'"):
        simple.vjp(v, out={"out": good["out"]})
    with raises(fadc.NotFoundError, _lib.ERR_NOT_FOUND, "no output 'extra'"):
        simple.vjp(v, out=dict(good, extra=np.empty(1)))
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "has 2 outputs", "out= gives 1"):
        simple.vjp(v, out=[good["out"]])
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "exclude each other"):
        simple.vjp(v, out=good, view=True)
    # The runtime's own check: an output over an input's memory (fadc's message).
    vv = np.ones((), np.float32)
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "task 'vjp': output 'out' overlaps input 'v'"):
        simple.vjp(vv, out=dict(good, out=vv))


def test_unbound(models):
    with fadc.load(models["unbound"]) as m:
        assert m.params["u"].has_init is False
        with raises(fadc.UnboundError, _lib.ERR_UNBOUND, "'u'"):
            m.forward()
        m.bind("u", np.array([1, 2, 3], np.float32))
        assert m.forward()["out"] == 14


def test_bind_errors(simple):
    with raises(fadc.NotFoundError, _lib.ERR_NOT_FOUND, "no declaration 'gamma'",
                "beta_value"):
        simple.bind("gamma", np.zeros(1))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "declaration 'beta_value' must be f32[11, 1]",
                "got f32[3]"):
        simple.bind("beta_value", np.zeros(3, np.float32))
    with raises(fadc.FileError, _lib.ERR_IO, "nope.safetensors"):
        simple.bind_file("/nonexistent/nope.safetensors")


def test_open_errors(tmp_path):
    with raises(fadc.FileError, _lib.ERR_IO, "missing.so"):
        fadc.load(str(tmp_path / "missing.so"))
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF not an artifact" * 10)
    with pytest.raises(fadc.FadcError) as e:
        fadc.load(str(bad))
    assert e.value.code == _lib.ERR_FORMAT and "bad.so" in str(e.value)
    with raises(fadc.DeviceError, _lib.ERR_DEVICE, "unknown device 'tpu'"):
        fadc.load(str(bad), device="tpu")
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "num_threads"):
        fadc.load(str(bad), num_threads=-1)


def test_no_gpu_here(models):
    """Without a CUDA driver, a cuda context is fadc's FADC_ERR_DEVICE with its message."""
    try:
        m = fadc.load(models["ppl_simple_reg"], device="cuda:0")
    except fadc.DeviceError as e:
        assert e.code == _lib.ERR_DEVICE and "CUDA" in str(e)
        return
    m.close()
    pytest.skip("a CUDA device is present")


def test_views_overwritten(simple):
    a = simple.vjp(np.float32(1), view=True)
    first = a["grad.beta_value"].numpy().copy()
    b = simple.vjp(np.float32(3), view=True)
    with raises(fadc.OutputOverwrittenError, _lib.ERR_OUTPUT_OVERWRITTEN,
                "output 'grad.beta_value'", "overwritten by a later call"):
        a["grad.beta_value"].numpy()
    with pytest.raises(fadc.OutputOverwrittenError):
        np.from_dlpack(a["out"])
    np.testing.assert_array_equal(b["grad.beta_value"].numpy(),
                                  simple.vjp(np.float32(3))["grad.beta_value"])
    # Caller-owned outputs (the default) are never overwritten.
    c = simple.vjp(np.float32(1))
    simple.vjp(np.float32(5))
    np.testing.assert_array_equal(c["grad.beta_value"], first)


def test_dlpack_wrong_device_dtype(simple):
    class Fake:
        """A DLPack producer claiming CUDA memory (fadc's own exporter)."""
        def __init__(self, a, dev):
            self.a, self.dev = a, dev

        def __dlpack__(self, stream=None):
            return _dlpack.export_dlpack(self, self.a.ctypes.data, _lib.F32, self.a.shape,
                                         self.dev, 0, False)

        def __dlpack_device__(self):
            return (self.dev, 0)
    with raises(fadc.DeviceError, _lib.ERR_DEVICE, "input 'v' is on cuda:0",
                "the model runs on cpu"):
        simple.vjp(Fake(np.ones((), np.float32), _dlpack.CUDA))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "input 'v' must be f32[], got f64[]"):
        simple.vjp(np.ones((), np.float64).__dlpack__ and _Wrap(np.ones((), np.float64)))
    with raises(fadc.ShapeError, _lib.ERR_SHAPE, "dense and row-major"):
        simple.jvp({"v.beta_value": _Wrap(np.ones((11, 2), np.float32)[:, :1])})


class _Wrap:
    """An object that is not an ndarray but exports one through DLPack."""
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_closed(models):
    m = fadc.load(models["ppl_simple_reg"])
    r = m.vjp(np.float32(1), view=True)
    m.close()
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "closed"):
        m.vjp(np.float32(1))
    with raises(fadc.ArgumentError, _lib.ERR_ARG, "released"):
        r["out"].numpy()
    m.close()  # twice is fine


def test_compile_errors(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("param w: f32[2] = normal(0, 1, seed=1)\n"
                   "def forward() -> f32[] {\n  return sum(w @ q)\n}\n")
    with pytest.raises(fadc.CompileError) as e:
        fadc.compile(str(bad), str(tmp_path / "bad.so"))
    assert e.value.returncode == 1 and "bad.ir:3:" in str(e.value) and "error" in str(e.value)
    assert "q" in e.value.diagnostics
    with pytest.raises(fadc.CompileError) as e:
        fadc.compile(str(bad), str(tmp_path / "bad.so"), tasks="nonsense")
    assert e.value.returncode in (1, 2) and "nonsense" in str(e.value)
    with pytest.raises(FileNotFoundError):
        fadc.compile(str(bad), str(tmp_path / "x.so"), fadc=str(tmp_path / "no-fadc"))
    assert not os.path.exists(tmp_path / "bad.so")


def test_compile_and_run(tmp_path, oracle):
    src = os.path.join(os.path.dirname(__file__), "args.ir")
    so = fadc.compile(src, str(tmp_path / "a.so"), tasks=["vjp"], defines={"N": 3})
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    want = oracle(so, "vjp", {"x": x, "v": np.float32(1)})
    with fadc.load(so) as m:
        assert m.tasks == ["forward", "vjp"]
        r = m.vjp({"x": x, "v": np.float32(1)})
        for k in want:
            np.testing.assert_array_equal(r[k], want[k])
