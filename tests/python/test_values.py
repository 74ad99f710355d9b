"""Values: every task of the ppl models and of multiheadattn (reduced sizes), run through the
package, equal ``fadc run``'s .npy files exactly (the same compiled code on the same inputs:
bit-identical), under exactly the names ``fadc run --out`` writes; with default outputs,
preallocated ``out=`` and model-owned views alike."""

import numpy as np
import pytest

import fadc
from conftest import draw_inputs

PPL_TASKS = ["forward", "vjp", "vhp", "jvp", "hvp", "jacobian", "hessian", "hessian_fwdrev",
             "hessian_revrev", "jacfwd", "jacrev"]
CASES = [(m, t) for m in ("ppl_simple_reg", "ppl_robust_reg") for t in PPL_TASKS] + \
    [("multiheadattn", t) for t in ("forward", "vjp", "vhp", "jvp")]


@pytest.fixture(scope="module")
def loaded(models):
    ms = {}
    yield lambda name: ms.setdefault(name, fadc.load(models[name], num_threads=1))
    for m in ms.values():
        m.close()


def same(got, want):
    assert set(got) == set(want), f"names {sorted(got)} vs fadc run's {sorted(want)}"
    for k in want:
        g = np.asarray(got[k])
        assert g.dtype == want[k].dtype and g.shape == want[k].shape, k
        np.testing.assert_array_equal(g, want[k], err_msg=k)


def test_every_task_is_described(models, loaded):
    for name in ("ppl_simple_reg", "ppl_robust_reg"):
        assert sorted(loaded(name).tasks) == sorted(PPL_TASKS)
    assert sorted(loaded("multiheadattn").tasks) == ["forward", "jvp", "vhp", "vjp"]


@pytest.mark.parametrize("model,task", CASES)
def test_task_equals_fadc_run(models, loaded, oracle, model, task):
    m = loaded(model)
    t = m.task(task)
    v = draw_inputs(t.inputs, seed=len(task))
    want = oracle(models[model], task, v)
    arg = v["v"] if list(v) == ["v"] else v
    got = m.run(task, v=arg)
    same(got, want)
    # Preallocated outputs: written in place, returned as given.
    out = {k: np.full_like(a, np.nan) for k, a in got.items()}
    got2 = m.run(task, v=arg, out=out)
    assert all(got2[k] is out[k] for k in out)
    same(got2, want)
    # Model-owned views.
    views = m.run(task, v=arg, view=True)
    assert all(isinstance(x, fadc.Tensor) and x.is_view for x in views.values())
    same({k: x.numpy().copy() for k, x in views.items()}, want)


def test_seed_as_fadc_run(models, oracle):
    """load(seed=N) draws the initializers as fadc run --seed N (they differ from seed 0)."""
    so = models["ppl_robust_reg"]
    v = {"v": np.float32(1)}
    want5, want0 = oracle(so, "vjp", v, seed=5), oracle(so, "vjp", v, seed=0)
    assert not np.array_equal(want5["grad.beta_value"], want0["grad.beta_value"])
    with fadc.load(so, seed=5) as m:
        same(m.vjp(v["v"]), want5)
    with fadc.load(so) as m:  # run(seed=) before the first run: the initializers' seed too
        same(m.vjp(v["v"], seed=5), want5)


def test_params_bound_stay_bound(models, oracle):
    so = models["ppl_simple_reg"]
    beta = np.linspace(-1, 1, 11, dtype=np.float32).reshape(11, 1)
    want = oracle(so, "vjp", {"v": np.float32(2)}, params={"beta_value": beta})
    with fadc.load(so) as m:
        same(m.vjp(np.float32(2), params={"beta_value": beta}), want)
        beta[:] = 7  # bound by copy: the caller's array is free again
        same(m.vjp(np.float32(2)), want)  # and it stays bound
        np.testing.assert_array_equal(m.get("beta_value"), np.linspace(-1, 1, 11, dtype=np.float32)
                                      .reshape(11, 1))
        m.bind("beta_value", beta)
        assert not np.array_equal(m.vjp(np.float32(2))["out"], want["out"])


def test_forward_arguments_and_specialisations(models, oracle):
    so = models["args"]
    with fadc.load(so) as m:
        assert m.specs == ["N=2", "N=3"]
        assert [t.spec for t in m._tasks["vjp"]] == ["N=2", "N=3"]
        for n in (2, 3):
            x = np.random.default_rng(n).random((n, 4)).astype(np.float32)
            want = oracle(so, "vjp", {"x": x, "v": np.float32(1.5)}, defines=[f"N={n}"])
            same(m.vjp({"x": x, "v": np.float32(1.5)}), want)
            same(m.run("vjp", {"x": x, "v": 1.5}, spec=f"N={n}"), want)
            wf = oracle(so, "forward", {"x": x}, defines=[f"N={n}"])
            same(m.forward({"x": x}), wf)


def test_describe(models):
    with fadc.load(models["ppl_robust_reg"]) as m:
        assert m.name == "ppl_robust_reg" and m.device == "cpu"
        assert list(m.params) == ["nu_value", "sigma_unconstrained_value", "beta_value"]
        p = m.params["beta_value"]
        assert (p.role, p.dtype, p.shape, p.has_init) == ("param", np.float32, (11, 1), True)
        assert m.consts["X"].shape == (10, 11) and m.consts["X"].role == "const"
        t = m.task("hvp")
        assert [s.name for s in t.inputs] == ["v.nu_value", "v.sigma_unconstrained_value",
                                              "v.beta_value"]
        assert t.output_names == ["out", "hvp.nu_value", "hvp.sigma_unconstrained_value",
                                  "hvp.beta_value"]
        assert [s.shape for s in m.inputs("vjp")] == [()]
        assert m.info("source_hash") and len(m.info("source_hash")) == 16
    with fadc.load(models["multiheadattn"], describe=True) as m:
        assert m.consts["attn_mask"].dtype == np.bool_
        with pytest.raises(fadc.StateError, match="describe only"):
            m.vjp(np.float32(1))
