#!/usr/bin/env python3
"""bench/peers/jax_ppl.py -- the peer for fadc's CPU numbers: PyTorch's two
PPL benchmark models (models-spec.md §3) written in JAX, every task of
functional_autograd_benchmark.py under jax.jit, timed per call after
warm-up (block_until_ready), on the CPU.

    python3 bench/peers/jax_ppl.py --iters 1000 > peer.md

Prints a markdown table: model, task, mean and median seconds per call.
The data are random (timing does not depend on values); shapes are the
benchmark's: N = 10 observations, K + 1 = 11 features.
"""
import argparse
import time

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, xlogy

jax.config.update("jax_platform_name", "cpu")

N, K = 10, 10
key = jax.random.PRNGKey(0)
ks = jax.random.split(key, 12)
X = jax.random.uniform(ks[0], (N, K + 1))
Y = jax.random.uniform(ks[1], (N, 1))
nu_alpha = jax.random.uniform(ks[2], (1, 1))
nu_beta = jax.random.uniform(ks[3], (1, 1))
sigma_rate = jax.random.uniform(ks[4], (N, 1))
beta_mean = jax.random.uniform(ks[5], (K + 1, 1))
beta_sigma = jax.random.uniform(ks[6], (K + 1, 1))
LOG_SQRT_2PI = 0.9189385332046727


def simple_reg(beta):
    mu = X @ beta
    score = jnp.sum(Y * mu - jax.nn.softplus(mu))
    return score + jnp.sum(-0.5 * beta * beta - LOG_SQRT_2PI)


def robust_reg(nu, s, beta):
    sigma = jnp.exp(s)
    mu = X @ beta
    z = (Y - mu) / sigma
    c = jnp.log(sigma) + 0.5 * jnp.log(nu) + 0.5 * jnp.log(jnp.pi) + gammaln(0.5 * nu) - gammaln(0.5 * (nu + 1))
    ll = jnp.sum(-0.5 * (nu + 1) * jnp.log1p(z * z / nu) - c)
    nu_score = ll + xlogy(nu_alpha, nu_beta) + xlogy(nu_alpha - 1, nu) - nu_beta * nu - gammaln(nu_alpha)
    sigma_score = ll + jnp.log(sigma_rate) - sigma_rate * sigma + s
    beta_score = ll + (-((beta - beta_mean) ** 2) / (2 * beta_sigma ** 2) - jnp.log(beta_sigma) - LOG_SQRT_2PI)
    return jnp.sum(nu_score) + jnp.sum(sigma_score) + jnp.sum(beta_score)


def tasks(f, n):
    argnums = tuple(range(n))

    def vjp(x, v):
        out, fn = jax.vjp(f, *x)
        return out, fn(v[0])

    def jvp(x, v):
        return jax.jvp(f, x, v)

    def vhp(x, v):
        g = lambda *a: jax.grad(f, argnums)(*a)
        out = f(*x)
        _, fn = jax.vjp(g, *x)
        return out, fn(v)

    def hvp(x, v):
        g = lambda *a: jax.grad(f, argnums)(*a)
        return f(*x), jax.jvp(g, x, v)[1]

    return {
        "vjp": vjp,
        "vhp": vhp,
        "jvp": jvp,
        "hvp": hvp,
        "jacobian": lambda x, v: jax.jacrev(f, argnums)(*x),
        "hessian": lambda x, v: jax.hessian(f, argnums)(*x),
        "hessian_fwdrev": lambda x, v: jax.jacfwd(jax.jacrev(f, argnums), argnums)(*x),
        "hessian_revrev": lambda x, v: jax.jacrev(jax.jacrev(f, argnums), argnums)(*x),
        "jacfwd": lambda x, v: jax.jacfwd(f, argnums)(*x),
        "jacrev": lambda x, v: jax.jacrev(f, argnums)(*x),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=1000)
    args = ap.parse_args()
    beta0 = jax.random.normal(ks[7], (K + 1, 1))
    nu0 = jnp.full((1, 1), 1.5)
    s0 = jnp.log(jax.random.exponential(ks[8], (N, 1)) / sigma_rate)
    models = [
        ("ppl_simple_reg", simple_reg, (beta0,)),
        ("ppl_robust_reg", robust_reg, (nu0, s0, beta0)),
    ]
    print("| model | task | mean | median |")
    print("| -- | -- | -- | -- |")
    for name, f, x in models:
        for task, fn in tasks(f, len(x)).items():
            v = tuple(jax.random.uniform(ks[9], a.shape) for a in x)
            if task == "vjp":
                v = (jnp.float32(0.7),)
            jf = jax.jit(fn)
            jax.block_until_ready(jf(x, v))  # compile
            for _ in range(50):
                jax.block_until_ready(jf(x, v))
            ts = []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                jax.block_until_ready(jf(x, v))
                ts.append(time.perf_counter() - t0)
            ts.sort()
            print(f"| {name} | {task} | {sum(ts) / len(ts)!r} | {ts[len(ts) // 2]!r} |")


if __name__ == "__main__":
    main()
