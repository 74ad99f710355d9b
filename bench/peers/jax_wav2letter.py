#!/usr/bin/env python3
"""bench/peers/jax_wav2letter.py -- the JAX CPU peer of models/wav2letter.ir
(torchaudio's Wav2Letter on waveforms, models-spec.md §4.1): the same twelve
Conv1d + ReLU layers (kernels, strides, paddings), log_softmax over classes
and NLL over (sample, position), at the sizes given; forward and vjp (the
gradient of the scalar loss, fadc's vjp with v = 1) under jax.jit, timed per
call after warm-up (block_until_ready).  Prints the best of 5 means of 5
calls, in microseconds.  One thread:

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        taskset -c 1 python3 bench/peers/jax_wav2letter.py 4 700 250 2000 28

Arguments: N LIN C CW NCLS (the `let` sizes of the model).  The data are
random (timing does not depend on values).
"""
import sys
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_platforms", "cpu")

N, LIN, C, CW, NCLS = [int(a) for a in sys.argv[1:6]]
# (in, out, kernel, stride, padding) of each Conv1d.
layers = ([(1, C, 250, 160, 45), (C, C, 48, 2, 23)] + [(C, C, 7, 1, 3)] * 7 +
          [(C, CW, 32, 1, 16), (CW, CW, 1, 1, 0), (CW, NCLS, 1, 1, 0)])
key = jax.random.PRNGKey(0)
params = []
for (ci, co, k, s, p) in layers:
    key, k1, k2 = jax.random.split(key, 3)
    b = 1 / (ci * k) ** 0.5
    params.append((jax.random.uniform(k1, (co, ci, k), jnp.float32, -b, b),
                   jax.random.uniform(k2, (co,), jnp.float32, -b, b)))
key, k1 = jax.random.split(key)
x = jax.random.uniform(key, (N, 1, LIN), jnp.float32)


def forward(params):
    h = x
    for (w, b), (ci, co, k, s, p) in zip(params, layers):
        h = jax.lax.conv_general_dilated(h, w, (s,), [(p, p)],
                                         dimension_numbers=("NCH", "OIH", "NCH"))
        h = jax.nn.relu(h + b[None, :, None])
    lp = jax.nn.log_softmax(h, axis=1)
    labels = jax.random.randint(k1, (N, h.shape[2]), 0, NCLS)
    return -jnp.mean(jnp.take_along_axis(lp, labels[:, None, :], axis=1))


for name, fn in (("forward", jax.jit(forward)), ("vjp", jax.jit(jax.value_and_grad(forward)))):
    jax.block_until_ready(fn(params))
    best = 1e9
    for rep in range(5):
        t = time.perf_counter()
        for _ in range(5):
            jax.block_until_ready(fn(params))
        best = min(best, (time.perf_counter() - t) / 5)
    print("jax wav2letter %s: %.0f us" % (name, best * 1e6))
