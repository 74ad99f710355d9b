#!/usr/bin/env python3
"""bench/peers/check_torch_peers.py -- checks the PyTorch peers of the GPU
machine (tests/gpu/device/peer: the getters functional_autograd_benchmark.py
imports) on this machine's CPU, at the benchmark's full sizes:

  1. each getter builds, and its params tuple has the shapes, in order, of
     PyTorch's own parameter list (tests/data/params/MODEL.tsv, taken from
     the benchmark's upstream getters: models-spec.md §6), and the module
     it builds has the names of that list;
  2. forward(*params) returns a finite 0-dim loss;
  3. with --vjp, torch.autograd.grad of it gives a finite gradient for
     every param (the seed's vjp cell, without its timing);
  4. the numpy Hungarian (torch_models.hungarian, detr's matcher where
     scipy is absent) against scipy's linear_sum_assignment on random
     rectangular matrices, when scipy is here.

    python3 bench/peers/check_torch_peers.py [--models a,b] [--vjp] [--threads N]

Needs torch and numpy; never a dependency of the tests.  Exits 1 on any
failure; prints one line per model with its loss and timings."""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu", "device", "peer"))
import audio_text_models  # noqa: E402
import torch_models  # noqa: E402
import vision_models  # noqa: E402

GETTERS = {
    "resnet18": vision_models.get_resnet18, "fcn_resnet": vision_models.get_fcn_resnet,
    "detr": vision_models.get_detr, "wav2letter": audio_text_models.get_wav2letter,
    "deepspeech": audio_text_models.get_deepspeech,
    "transformer": audio_text_models.get_transformer,
    "multiheadattn": audio_text_models.get_multiheadattn,
}


# The module each getter builds, for the names (the getters keep them).
MODULES = {
    "resnet18": lambda: torch_models.ResNet18(), "fcn_resnet": lambda: torch_models.FCN(),
    "detr": lambda: torch_models.DETR(), "wav2letter": lambda: torch_models.Wav2Letter(),
    "deepspeech": lambda: torch_models.DeepSpeech(),
    "transformer": lambda: torch_models.TransformerModel(),
}


def tsv_shapes(model):
    rows = []
    for line in open(os.path.join(ROOT, "tests", "data", "params", model + ".tsv")):
        if line.startswith("#") or not line.strip():
            continue
        _, name, shape, _ = line.rstrip("\n").split("\t")
        rows.append((name, tuple(int(d) for d in shape.split("x"))))
    return rows


def check_hungarian(trials=200):
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        print("hungarian: scipy absent, not compared")
        return True
    rng = np.random.default_rng(0)
    for t in range(trials):
        n, m = int(rng.integers(1, 12)), int(rng.integers(1, 120))
        c = rng.standard_normal((n, m)) * 10 ** rng.uniform(-3, 3)
        if t % 2:
            c = c.T
        if t % 5 == 0:
            c = np.round(c)  # ties: the minimum must still agree
        r1, c1 = torch_models.hungarian(c)
        r2, c2 = linear_sum_assignment(c)
        a, b = c[r1, c1].sum(), c[r2, c2].sum()
        if len(r1) != len(r2) or len(set(r1)) != len(r1) or len(set(c1)) != len(c1) \
                or not np.all(np.diff(r1) > 0) or abs(a - b) > 1e-9 * max(1, abs(b)):
            print("hungarian: trial %d (%dx%d): cost %r, scipy %r" % (t, c.shape[0], c.shape[1], a, b))
            return False
        if t % 5 and not (np.array_equal(r1, r2) and np.array_equal(c1, c2)):
            print("hungarian: trial %d: another assignment of the same cost" % t)
            return False
    print("hungarian: %d random matrices, the same assignment as scipy" % trials)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(GETTERS))
    ap.add_argument("--vjp", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    bad = 0 if check_hungarian() else 1
    print("detr's matcher here: linear_sum_assignment from %s" % torch_models.HUNGARIAN)
    for m in a.models.split(","):
        t0 = time.time()
        forward, params = GETTERS[m](torch.device("cpu"))
        want = tsv_shapes(m)
        got = [tuple(p.shape) for p in params]
        if got != [s for _, s in want]:
            for i, (w, g) in enumerate(zip(want + [None] * len(got), got + [None] * len(want))):
                if w is None or g is None or w[1] != g:
                    print("%s: param %d: PyTorch's list has %s, the peer %s" % (m, i, w, g))
                    break
            bad += 1
            continue
        if m in MODULES:
            names = [n for n, _ in MODULES[m]().named_parameters()]
            if names != [n for n, _ in want]:
                i = next(i for i, (x, (y, _)) in enumerate(zip(names, want)) if x != y)
                print("%s: param %d: PyTorch's is named %s, the peer's %s" % (m, i, want[i][0],
                                                                             names[i]))
                bad += 1
                continue
        t1 = time.time()
        if a.vjp:
            loss = forward(*params)
            grads = torch.autograd.grad(loss, params)
            finite = all(bool(torch.isfinite(g).all()) for g in grads)
        else:
            with torch.no_grad():
                loss = forward(*params)
            finite = True
        t2 = time.time()
        ok = loss.dim() == 0 and math.isfinite(loss.item()) and finite
        bad += not ok
        print("%s: %d params, %d scalars, shapes and names as PyTorch's; loss %.6g%s; build %.1fs, %s %.1fs: %s"
              % (m, len(params), sum(p.numel() for p in params), loss.item(),
                 ", gradient finite" if a.vjp and finite else "", t1 - t0,
                 "vjp" if a.vjp else "forward", t2 - t1, "ok" if ok else "FAIL"))
        sys.stdout.flush()
        del forward, params, loss
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
