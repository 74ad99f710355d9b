#!/usr/bin/env python3
"""bench/peers/parity_stem.py -- how the stem convolution's f32 rounding
decides fcn_resnet's and detr's gradient errors (docs/PARITY.md, "ReLU
flips").

Runs the PyTorch float64 model of parity.py (same seed, same perturbed
parameters and data) with the output of its first convolution
(backbone.conv1, 7x7 over the 3 image channels: 147 terms per output)
replaced by that convolution computed in float32 in several ways, the rest
of the network staying in float64.  Each line gives the worst per-tensor
normalized gradient error against plain float64 and the ReLU masks that
flipped (call number, pre-activation / max of its tensor in f64):

  torch        PyTorch's own f32 convolution (oneDNN)
  rounded      the f64 result rounded to f32 (what f64 accumulation gives)
  sequential   one f32 accumulator, terms in order of k = (c, kh, kw):
               fadc's GEMM order (codegen/llvm_gemm.c); the product is
               rounded before the add (no FMA), which changes nothing here
  blocked B    partial sums of B terms, then the sum of the partials
  order i      sequential in a random order of the 147 terms

    python3 bench/peers/parity_stem.py --model fcn_resnet --seed 0

Needs torch, numpy (and scipy for detr), as parity.py.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="fcn_resnet", choices=["fcn_resnet", "detr"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--orders", type=int, default=5, help="random summation orders to try")
    ap.add_argument("--fadc", default=os.path.join(parity.ROOT, "build", "bin", "fadc"))
    a = ap.parse_args()
    defs = parity.reduced_defs(a.model) + parity.EXTRA_DEFS.get(a.model, [])
    sizes, _, _ = parity.fadc_module(a.fadc, a.model, defs)
    build = parity.BUILDERS[a.model]
    gen = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)
    m32, c32, _ = build(sizes, gen, torch.float32)
    parity.perturb_(m32, gen)
    gen = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)
    m64, _, l64 = build(sizes, gen, torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(m32.named_parameters(), m64.named_parameters()):
            q.copy_(p.double())
    names = [n for n, _ in m64.named_parameters()]
    stem = m64.backbone.conv1
    x = c32["inputs" if "inputs" in c32 else "images"]
    w = m32.backbone.conv1.weight.detach()
    st, pd = stem.stride, stem.padding
    cols = F.unfold(x, w.shape[-2:], padding=pd, stride=st)  # (N, K, L)
    W = w.reshape(w.shape[0], -1)
    K = W.shape[1]
    oshape = F.conv2d(x, w, stride=st, padding=pd).shape

    def run(y32):
        """Gradients and ReLU inputs of the f64 model, the stem's output
        replaced by y32 (its gradient path kept)."""
        parity.RELU_SEEN = []
        h = stem.register_forward_hook(lambda m, i, o: o + (y32.double() - o.detach()))
        ps = [p for _, p in m64.named_parameters()]
        g = torch.autograd.grad(l64(), ps)
        h.remove()
        seen, parity.RELU_SEEN = parity.RELU_SEEN, None
        return {n: t.detach().numpy() for n, t in zip(names, g)}, seen

    def sequential(order):
        acc = torch.zeros(x.shape[0], W.shape[0], cols.shape[2])
        for k in order:
            acc = acc + W[None, :, k, None] * cols[:, None, k, :]
        return acc.reshape(oshape)

    def blocked(b):
        parts = [sequential(range(k0, min(K, k0 + b))) for k0 in range(0, K, b)]
        tot = torch.zeros(oshape)
        for p in parts:
            tot = tot + p
        return tot

    ref, seen64 = run(F.conv2d(x.double(), w.double(), stride=st, padding=pd))
    cands = [("torch", F.conv2d(x, w, stride=st, padding=pd)),
             ("rounded", F.conv2d(x.double(), w.double(), stride=st, padding=pd).float()),
             ("sequential", sequential(range(K)))]
    cands += [("blocked %d" % b, blocked(b)) for b in (8, 16, 32)]
    g = torch.Generator().manual_seed(5)
    cands += [("order %d" % i, sequential(torch.randperm(K, generator=g).tolist()))
              for i in range(a.orders)]
    print("%s seed %d: the stem's output in f32, the rest in f64 (K = %d terms)" %
          (a.model, a.seed, K))
    for label, y in cands:
        got, seen = run(y)
        err, worst = max((np.abs(got[n] - ref[n]).max() / np.abs(ref[n]).max(), n) for n in names)
        flips = []
        for j, (u, v) in enumerate(zip(seen, seen64)):
            for i in ((u > 0) != (v > 0)).nonzero().tolist():
                flips.append("%d: %.1e" % (j, v[tuple(i)].item() / v.abs().max().item()))
        print("  %-11s worst %.2g (%s); ReLU flips %s" % (label, err, worst, flips or "none"))


if __name__ == "__main__":
    main()
