"""tf32_drift.py -- how far PyTorch's TF32 gradients are from its fp32 ones,
by the measure gpu_check applies to fadc's --allow-tf32 artifacts.

    python3 tf32_drift.py [N] [H] [SEEDS]

resnet18 of the peer models (vision_models.get_resnet18's model, train
mode, cross-entropy loss), at batch N and image size H (8 and 128: the
sizes at which gpu_check measured fadc's TF32 artifact), on the GPU: the
gradient of the loss for every parameter twice, once with TF32 off
everywhere (torch.backends.cudnn.allow_tf32 = False,
torch.backends.cuda.matmul.allow_tf32 = False: strict fp32) and once
with PyTorch's defaults (cuDNN convolutions in TF32, matmuls in fp32).
Each parameter's error is max |g_tf32 - g_fp32| / max |g_fp32|, the
normalized error of gpu_check (docs/CUDA.md), over SEEDS (3) draws of
weights and inputs; printed: the worst, the median, and how many of the
parameters pass gpu_check's TF32 tolerance (1e-2).  Also with TF32 in the
matmuls too (what fadc's --allow-tf32 does: every GEMM, the convolutions'
included).
"""
import statistics
import sys

import torch
import torch.nn.functional as F

import torch_models as models
from utils import extract_weights, load_weights


def grads(model, names, params, x, y):
    load_weights(model, names, params)
    loss = F.cross_entropy(model(x), y)
    return torch.autograd.grad(loss, params)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    h = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    dev = torch.device("cuda")
    modes = {
        "cudnn TF32 (PyTorch's default)": (True, False),
        "cudnn and matmul TF32": (True, True),
    }
    worst = {m: [] for m in modes}
    for seed in range(seeds):
        torch.manual_seed(seed)
        model = models.ResNet18().to(dev)
        params, names = extract_weights(model)
        x = torch.rand([n, 3, h, h], device=dev)
        y = torch.rand(n, device=dev).mul(10).long()
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        ref = grads(model, names, params, x, y)
        for m, (conv, mm) in modes.items():
            torch.backends.cudnn.allow_tf32 = conv
            torch.backends.cuda.matmul.allow_tf32 = mm
            g = grads(model, names, params, x, y)
            for a, b in zip(g, ref):
                scale = b.abs().max().item()
                err = (a - b).abs().max().item() / (scale if scale > 0 else 1.0)
                worst[m].append(err)
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"resnet18 N={n} H={h}, {seeds} draws, {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}")
    for m, e in worst.items():
        over = sum(1 for v in e if v > 1e-2)
        print(f"{m}: {len(e)} gradients (parameters x draws): worst {max(e):.3g}, "
              f"median {statistics.median(e):.3g}, over 1e-2: {over}")


if __name__ == "__main__":
    main()
