"""On a GPU: PyTorch and CuPy tensors in and out without copies (pointer equality), values
against the same artifact's CPU code, model-owned views, fadc's own buffers through
DLPack, and the ordering of fadc's stream against the caller's.

Skipped (as the whole file) without torch, without a CUDA device, or without the artifacts:
FADC_PY_GPU_MODELS names a folder holding ppl_simple_reg.so and ppl_robust_reg.so compiled
here with ``--target cpu,cuda --tasks all`` (the GPU machine has no LLVM: fadc cannot compile
there; tests/python/gpu-payload.sh makes the folder).  The tolerance against the CPU: the
two codes sum in different orders in f32, rtol 1e-4 and atol 1e-5 (gpu_check's for these
models are tighter on most outputs; these are small tasks whose outputs are O(1..100)).
"""

import os

import numpy as np
import pytest

import fadc
from fadc import _dlpack

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
MODELS = os.environ.get("FADC_PY_GPU_MODELS", "")
if not os.path.isfile(os.path.join(MODELS, "ppl_simple_reg.so")):
    pytest.skip("FADC_PY_GPU_MODELS holds no ppl_simple_reg.so", allow_module_level=True)

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module", params=["ppl_simple_reg", "ppl_robust_reg"])
def pair(request):
    so = os.path.join(MODELS, request.param + ".so")
    g = fadc.load(so, device="cuda:0")
    c = fadc.load(so, num_threads=1)
    yield g, c
    g.close()
    c.close()


def draw(specs, seed):
    rng = np.random.default_rng(seed)
    return {s.name: rng.random(s.shape).astype(s.dtype) for s in specs}


def as_v(t, vals):
    return vals[t.inputs[0].name] if len(vals) == 1 else vals


def close(got, want):
    assert set(got) == set(want)
    for k in want:
        g = got[k].cpu().numpy() if hasattr(got[k], "cpu") else np.asarray(got[k])
        np.testing.assert_allclose(g, want[k], rtol=RTOL, atol=ATOL, err_msg=k)


def test_torch_every_task(pair):
    g, c = pair
    for name in g.tasks:
        t = c.task(name)
        vals = draw(t.inputs, 1)
        want = c.run(name, as_v(t, vals))
        # a.copy(), not np.ascontiguousarray(a): that one returns at least 1-d, and a
        # task's f32[] input (vjp's v) must reach fadc as a 0-d torch tensor.
        tv = {k: torch.from_numpy(a.copy()).cuda() for k, a in vals.items()}
        assert all(tuple(x.shape) == vals[k].shape for k, x in tv.items())
        got = g.run(name, as_v(t, tv))
        for x in got.values():  # allocated by torch (fadc, without a torch input)
            if tv:
                assert isinstance(x, torch.Tensor) and x.device == torch.device("cuda:0")
            else:
                assert isinstance(x, fadc.Tensor) and x.device == "cuda:0"
        close(got, want)


def test_torch_pointers(pair):
    g, c = pair
    t = g.task("vjp")
    v = torch.full((), 1.5, device="cuda")
    out = {s.name: torch.empty(s.shape, dtype=torch.float32, device="cuda") for s in t.outputs}
    ptrs = {k: x.data_ptr() for k, x in out.items()}
    for _ in range(3):  # eager, recorded, replayed
        r = g.vjp(v, out=out)
        assert all(r[k] is out[k] and r[k].data_ptr() == ptrs[k] for k in out)
    close(r, c.vjp(np.float32(1.5)))
    # The input is read where it is: the address fadc wraps is torch's.
    assert _dlpack.import_dlpack(v).addr == v.data_ptr()


def test_cupy(pair):
    cupy = pytest.importorskip("cupy")
    g, c = pair
    t = c.task("hvp")
    vals = draw(t.inputs, 2)
    want = c.run("hvp", vals)
    cv = {k: cupy.asarray(a) for k, a in vals.items()}
    got = g.run("hvp", cv)
    for x in got.values():
        assert isinstance(x, cupy.ndarray)
    close({k: cupy.asnumpy(x) for k, x in got.items()}, want)
    out = {s.name: cupy.empty(s.shape, dtype=s.dtype) for s in t.outputs}
    ptrs = {k: x.data.ptr for k, x in out.items()}
    r = g.run("hvp", cv, out=out)
    assert all(r[k].data.ptr == ptrs[k] for k in out)
    close({k: cupy.asnumpy(x) for k, x in r.items()}, want)


def test_fadc_buffers_and_views(pair):
    g, c = pair
    want = c.vjp(np.float32(2))
    v = torch.full((), 2.0, device="cuda")
    r = g.vjp(v, alloc="fadc")
    t = r["grad.beta_value"]
    assert isinstance(t, fadc.Tensor) and t.__dlpack_device__() == (_dlpack.CUDA, 0)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t._address()  # no copy
    close({k: torch.from_dlpack(y) for k, y in r.items()}, want)
    views = g.vjp(v, view=True)
    close({k: y.numpy() for k, y in views.items()}, want)
    g.vjp(v, view=True)  # the next call of the task: on the device it reuses the memory
    with pytest.raises(fadc.OutputOverwrittenError):
        views["grad.beta_value"].numpy()
    with pytest.raises(fadc.DeviceError, match="NumPy array"):
        g.vjp(np.float32(1))


def test_stream_ordering(pair):
    """fadc's work waits for the caller's stream (an input written there just before the
    call, behind a long kernel), and the caller's stream waits for fadc's (outputs read
    there right after the call, while fadc's stream is held back by a long kernel); on the
    general path and on the hot path."""
    g, c = pair
    t = c.task("jvp")
    names = [i.name for i in t.inputs]  # ppl_robust_reg's jvp has two
    want = c.jvp({i.name: np.full(i.shape, 0.5, np.float32) for i in t.inputs})
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        v = {i.name: torch.zeros(i.shape, device="cuda") for i in t.inputs}
        torch.cuda._sleep(200_000_000)  # about 0.1 s on the caller's stream
        for x in v.values():
            x.fill_(0.5)
        got = g.jvp(v)  # stream: torch's current, s
        close({k: x.cpu() for k, x in got.items()}, want)
    # fadc's stream held back by a long kernel on another stream.
    s2 = torch.cuda.Stream()
    with torch.cuda.stream(s2):
        torch.cuda._sleep(200_000_000)
    g._order(s2.cuda_stream, wait=True)
    with torch.cuda.stream(s):
        v = {n: torch.full(i.shape, 0.5, device="cuda") for n, i in zip(names, t.inputs)}
        out = {o.name: torch.full(o.shape, float("nan"), device="cuda") for o in t.outputs}
        g.jvp(v, out=out)
        host = {k: x.cpu() for k, x in out.items()}  # copies queued on s after the call
    close(host, want)
    # Again with the same tensors: the hot path (every slot holds its tensor already, so the
    # call is the orderings around one fadc_run), both ways at once: the inputs rewritten
    # behind a long kernel on s, fadc's stream held back by one on s2.
    tg = g.task("jvp")
    assert all(tg.in_obj[j] is v[n] for j, n in enumerate(tg.input_names))
    assert all(tg.out_obj[j] is out[n] for j, n in enumerate(tg.output_names))
    with torch.cuda.stream(s2):
        torch.cuda._sleep(200_000_000)
    g._order(s2.cuda_stream, wait=True)
    with torch.cuda.stream(s):
        for x in v.values():
            x.zero_()
        for x in out.values():
            x.fill_(float("nan"))
        torch.cuda._sleep(200_000_000)
        for x in v.values():
            x.fill_(0.5)
        g.jvp(v, out=out)
        host = {k: x.cpu() for k, x in out.items()}
    close(host, want)
