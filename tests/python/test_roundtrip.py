"""NumPy round trips (no copies where none is needed, caller-owned outputs) and DLPack round
trips on the CPU: inputs through ``__dlpack__`` (NumPy's own, and fadc's exporter), outputs
exporting ``__dlpack__`` to NumPy's ``from_dlpack`` without a copy, the export's lifetime."""

import gc

import numpy as np
import pytest

import fadc
from fadc import _dlpack


@pytest.fixture(scope="module")
def m(models):
    with fadc.load(models["ppl_simple_reg"]) as model:
        yield model


@pytest.fixture(scope="module")
def ref(m):
    """vjp and jvp at fixed inputs, by the default path (its values are checked against
    fadc run in test_values)."""
    vb = np.linspace(0, 1, 11, dtype=np.float32).reshape(11, 1)
    return vb, m.vjp(np.float32(1.25)), m.jvp({"v.beta_value": vb})


def test_outputs_are_callers(m, ref):
    vb, r1, _ = ref
    a = m.vjp(np.float32(1.25))
    b = m.vjp(np.float32(1.25))
    assert a["grad.beta_value"] is not b["grad.beta_value"]
    assert not np.shares_memory(a["grad.beta_value"], b["grad.beta_value"])
    m.vjp(np.float32(9))
    np.testing.assert_array_equal(a["grad.beta_value"], r1["grad.beta_value"])
    assert a["grad.beta_value"].flags.owndata and a["grad.beta_value"].flags.writeable


def test_out_written_in_place(m, ref):
    _, r1, _ = ref
    buf = np.zeros(100, np.float32)
    out = {"out": np.zeros((), np.float32), "grad.beta_value": buf[:11].reshape(11, 1)}
    r = m.vjp(np.float32(1.25), out=out)
    assert r["grad.beta_value"] is out["grad.beta_value"]
    np.testing.assert_array_equal(buf[:11], r1["grad.beta_value"].ravel())
    assert not buf[11:].any()  # nothing written past the output
    # as a list in output order, and again (the cached wraps), and with new arrays
    lst = [np.empty((), np.float32), np.empty((11, 1), np.float32)]
    for _ in range(3):
        r = m.vjp(np.float32(1.25), out=lst)
        np.testing.assert_array_equal(lst[1], r1["grad.beta_value"])
    lst[1][:] = 0
    r = m.vjp(np.float32(1.25), out=[np.empty((), np.float32), lst[1]])
    np.testing.assert_array_equal(lst[1], r1["grad.beta_value"])


def test_inputs_any_layout(m, ref):
    vb, _, r2 = ref
    # Fortran order, a strided view, a list, a read-only array: the same values.
    big = np.zeros((11, 3), np.float32)
    big[:, 1] = vb[:, 0]
    ro = vb.copy()
    ro.flags.writeable = False
    for x in (np.asfortranarray(vb), big[:, 1:2], vb.tolist(), ro):
        np.testing.assert_array_equal(m.jvp({"v.beta_value": x})["jvp.out"], r2["jvp.out"])
    # An array changed in place between calls is read anew (the cached wrap sees the memory).
    x = vb.copy()
    m.jvp({"v.beta_value": x})
    x[:] = 0
    assert m.jvp({"v.beta_value": x})["jvp.out"] == 0
    # An array whose shape was changed in place is checked again.
    y = vb.copy()
    m.jvp({"v.beta_value": y})
    y.shape = (11,)
    with pytest.raises(fadc.ShapeError):
        m.jvp({"v.beta_value": y})


def test_dlpack_inputs(m, ref):
    vb, r1, r2 = ref

    class Only:  # not an ndarray: only the DLPack protocol
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    np.testing.assert_array_equal(m.jvp({"v.beta_value": Only(vb)})["jvp.out"], r2["jvp.out"])
    np.testing.assert_array_equal(m.vjp(Only(np.asarray(np.float32(1.25))))["grad.beta_value"],
                                  r1["grad.beta_value"])
    # fadc's own exporter (the code that exports GPU outputs), legacy and versioned capsules.
    for versioned in (False, True):
        class Exp:
            def __dlpack__(self, stream=None, max_version=None):
                return _dlpack.export_dlpack(self, vb.ctypes.data, fadc._lib.F32, vb.shape,
                                             _dlpack.CPU, 0, versioned)
        imp = _dlpack.import_dlpack(Exp())
        assert imp.addr == vb.ctypes.data and imp.shape == (11, 1) and imp.contiguous
        del imp
        np.testing.assert_array_equal(m.jvp({"v.beta_value": Exp()})["jvp.out"], r2["jvp.out"])
    gc.collect()
    assert _dlpack.live_exports() == 0


def test_dlpack_outputs_in_place(m, ref):
    """A DLPack tensor as out=: written in place (the caller's memory, no copy)."""
    _, r1, _ = ref
    target = np.zeros((11, 1), np.float32)

    class Out:
        def __dlpack__(self, stream=None):
            return target.__dlpack__()
    m.vjp(np.float32(1.25), out={"out": np.empty((), np.float32), "grad.beta_value": Out()})
    np.testing.assert_array_equal(target, r1["grad.beta_value"])


def test_fadc_tensors_export(m, ref):
    """alloc="fadc": outputs in fadc's memory (as on a GPU), exported through DLPack."""
    _, r1, _ = ref
    r = m.vjp(np.float32(1.25), alloc="fadc")
    t = r["grad.beta_value"]
    assert isinstance(t, fadc.Tensor) and not t.is_view and t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, r1["grad.beta_value"])
    b = np.from_dlpack(t)
    assert np.shares_memory(a, b)  # no copy: both over the tensor's memory
    np.testing.assert_array_equal(np.asarray(t), a)
    # The consumers keep the tensor alive: its memory outlives the Python object.
    del r, t, b
    gc.collect()
    assert _dlpack.live_exports() == 1
    np.testing.assert_array_equal(a, r1["grad.beta_value"])
    del a
    gc.collect()
    assert _dlpack.live_exports() == 0
    # A capsule no consumer takes is freed with it; a versioned one where asked.
    t = m.vjp(np.float32(1.25), alloc="fadc")["out"]
    cap = t.__dlpack__()
    assert _dlpack.live_exports() == 1
    del cap
    gc.collect()
    assert _dlpack.live_exports() == 0
    cap = t.__dlpack__(max_version=(1, 0))
    assert _dlpack._is_valid(cap, b"dltensor_versioned")
    del cap
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))


def test_views_export_readonly(m, ref):
    _, r1, _ = ref
    v = m.vjp(np.float32(1.25), view=True)
    a = np.from_dlpack(v["grad.beta_value"])
    np.testing.assert_array_equal(a, r1["grad.beta_value"])
    cap = v["out"].__dlpack__(max_version=(1, 0))
    imp_flags = _dlpack.DLManagedTensorVersioned.from_address(
        _dlpack._get_pointer(cap, b"dltensor_versioned")).flags
    assert imp_flags & _dlpack.FLAG_READ_ONLY


def test_slot_cache(m, ref):
    """The hot path reuses each slot's wrap only while the same array is passed: a view call,
    a DLPack input or another array in between, and arrays changed in place, all give the
    values of the general path."""
    _, r1, _ = ref
    v = np.asarray(np.float32(1.25))
    out = {"out": np.empty((), np.float32), "grad.beta_value": np.empty((11, 1), np.float32)}

    def check():
        for a in out.values():
            a[...] = 0
        r = m.vjp(v, out=out)
        assert all(r[k] is out[k] for k in out)
        np.testing.assert_array_equal(out["grad.beta_value"], r1["grad.beta_value"])
    check()
    check()  # the cached path
    views = m.vjp(v, view=True)
    check()
    np.testing.assert_array_equal(views["grad.beta_value"].numpy(), r1["grad.beta_value"])

    class Only:
        def __dlpack__(self, stream=None):
            return v.__dlpack__()
    m.vjp(Only(), out=out)
    check()
    m.vjp({"v": v}, out=out)
    check()
    m.vjp(np.asarray(np.float32(4)), out=out)
    check()
    v[...] = 2  # read anew
    want = m.vjp(np.asarray(np.float32(2)))["grad.beta_value"]
    np.testing.assert_array_equal(m.vjp(v, out=out)["grad.beta_value"], want)
    v[...] = 1.25
    g = out["grad.beta_value"]
    g.shape = (11,)  # changed in place: refused, as any array of the wrong shape
    with pytest.raises(fadc.ShapeError, match="output 'grad.beta_value' must be f32"):
        m.vjp(v, out=out)
    g.shape = (11, 1)
    check()


def test_interop_api_on_the_cpu(m):
    """fadc.h's interoperation functions on a CPU context: no stream, orderings are no-ops, a
    device wrap is a host wrap, an address is the host address."""
    import ctypes
    from fadc import _lib
    lib, ctx = _lib.lib, m._ctx
    p = ctypes.c_void_p(1)
    assert lib.fadc_context_stream(ctx, ctypes.byref(p)) == 0 and p.value is None
    assert lib.fadc_context_wait_stream(ctx, None) == 0
    assert lib.fadc_context_signal_stream(ctx, 1) == 0
    a = np.arange(6, dtype=np.int64)
    dims = (ctypes.c_int64 * 1)(6)
    h = ctypes.c_void_p()
    assert lib.fadc_tensor_wrap_device(ctx, _lib.I64, 1, dims, a.ctypes.data, ctypes.byref(h)) == 0
    addr = ctypes.c_uint64()
    assert lib.fadc_tensor_address(h, ctypes.byref(addr)) == 0 and addr.value == a.ctypes.data
    lib.fadc_tensor_release(h)
    assert lib.fadc_tensor_wrap_device(ctx, _lib.I64, 1, dims, 0, ctypes.byref(h)) == _lib.ERR_ARG
    assert b"NULL data" in lib.fadc_context_error(ctx)
    assert lib.fadc_tensor_address(None, ctypes.byref(addr)) == _lib.ERR_ARG


def test_adapter_slot_cache(m, ref):
    """A library with an adapter (PyTorch, CuPy on a GPU; here a stand-in over NumPy): its
    tensor is exported through DLPack once, then reused while it is the same object over the
    same memory; memory that moved under the same object is exported again."""
    from fadc import _model
    _, r1, _ = ref

    class Lib:
        exports = 0

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            Lib.exports += 1
            return self.a.__dlpack__()

    def key(x):
        a = x.a
        return (a.ctypes.data, _model.FADC_OF_NP.get(a.dtype), a.shape, a.flags.c_contiguous,
                _dlpack.CPU, 0)
    _model._ADAPTERS[Lib.__module__.split(".")[0]] = key
    _model._ADAPTER_OF.pop(Lib, None)
    try:
        v = Lib(np.asarray(np.float32(1.25)))
        g = Lib(np.empty((11, 1), np.float32))
        out = {"out": np.empty((), np.float32), "grad.beta_value": g}
        for _ in range(3):
            g.a[:] = 0
            m.vjp(v, out=out)
            np.testing.assert_array_equal(g.a, r1["grad.beta_value"])
        assert Lib.exports == 2  # once each, then cached
        assert m._run_cached(m.task("vjp"), v, out, None) is not None  # the fast path
        g.a = np.zeros((11, 1), np.float32)  # the memory moved under the same object
        m.vjp(v, out=out)
        np.testing.assert_array_equal(g.a, r1["grad.beta_value"])
        assert Lib.exports == 3
        g.a = np.zeros((11,), np.float32)  # and its shape changed: refused by name
        with pytest.raises(fadc.ShapeError, match="output 'grad.beta_value' must be f32"):
            m.vjp(v, out=out)
    finally:
        _model._ADAPTERS.pop(Lib.__module__.split(".")[0], None)
        _model._ADAPTER_OF.pop(Lib, None)


def test_chained_tensors(m, ref):
    """fadc's own tensors go back in by their handles: a view chained into the next call (no
    copy), a buffer as out=; a stale view is refused."""
    vb, r1, _ = ref
    views = m.vjp(np.float32(1.25), view=True)
    g = views["grad.beta_value"]
    want = m.jvp({"v.beta_value": r1["grad.beta_value"]})
    np.testing.assert_array_equal(m.jvp({"v.beta_value": g})["jvp.out"], want["jvp.out"])
    buf = m.jvp({"v.beta_value": vb}, alloc="fadc")
    m.jvp({"v.beta_value": g}, out=buf)
    np.testing.assert_array_equal(np.from_dlpack(buf["jvp.out"]), want["jvp.out"])
    with pytest.raises(fadc.ArgumentError, match="model-owned view"):
        m.jvp({"v.beta_value": g}, out={"out": views["out"], "jvp.out": buf["jvp.out"]})
    with pytest.raises(fadc.ShapeError, match="input 'v.beta_value' must be f32\\[11, 1\\], "
                       "got f32\\[\\]"):
        m.jvp({"v.beta_value": views["out"]})
    m.vjp(np.float32(2), view=True)
    with pytest.raises(fadc.OutputOverwrittenError):
        m.jvp({"v.beta_value": g})


def test_call_sequences(m):
    """Random sequences of calls mixing every way in and out (the same arrays again, new
    ones, views, fadc buffers, DLPack stand-ins, lists), from a fixed seed: each result
    equals that of a fresh call on copies, whatever the slots cached before."""
    rng = np.random.default_rng(24)
    vals = [np.asarray(np.float32(x)) for x in (0.5, 1.25, -2.0)]
    want = {float(v): {k: a.copy() for k, a in m.vjp(v.copy()).items()} for v in vals}
    outs = [{"out": np.empty((), np.float32), "grad.beta_value": np.empty((11, 1), np.float32)}
            for _ in range(2)]

    class Only:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()
    for step in range(300):
        v = vals[rng.integers(3)]
        vin = [v, Only(v), float(v), {"v": v}][rng.integers(4)]
        how = rng.integers(4)
        if how == 0:
            r = m.vjp(vin)
        elif how == 1:
            o = outs[rng.integers(2)]
            for a in o.values():
                a[...] = np.nan
            r = m.vjp(vin, out=o)
            assert all(r[k] is o[k] for k in o)
        elif how == 2:
            r = {k: t.numpy().copy() for k, t in m.vjp(vin, view=True).items()}
        else:
            r = {k: np.from_dlpack(t) for k, t in m.vjp(vin, alloc="fadc").items()}
        for k, a in want[float(v)].items():
            np.testing.assert_array_equal(r[k], a, err_msg=f"step {step}: {k}")
