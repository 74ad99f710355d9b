"""tf32_drift.py -- how far PyTorch's TF32 gradients are from its fp32 ones,
by the measure gpu_check applies to fadc's --allow-tf32 artifacts.

    python3 tf32_drift.py [N] [H] [SEEDS]
    python3 tf32_drift.py --model M[,M...] [SEEDS]

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

With --model, the named models of the seed's getters instead (resnet18,
fcn_resnet, detr, transformer, deepspeech, wav2letter, multiheadattn:
vision_models / audio_text_models, full size, their own losses), each
draw a fresh getter after torch.manual_seed(draw), the same measure.  The
RNG is reseeded before every gradient, so detr's dropout (train mode)
draws the same masks in the fp32 and the TF32 run and only the arithmetic
differs.
"""
import statistics
import sys

import torch
import torch.nn.functional as F

import audio_text_models
import torch_models as models
import vision_models
from utils import extract_weights, load_weights

GETTERS = {
    "resnet18": vision_models.get_resnet18,
    "fcn_resnet": vision_models.get_fcn_resnet,
    "detr": vision_models.get_detr,
    "wav2letter": audio_text_models.get_wav2letter,
    "deepspeech": audio_text_models.get_deepspeech,
    "transformer": audio_text_models.get_transformer,
    "multiheadattn": audio_text_models.get_multiheadattn,
}
MODES = {
    "cudnn TF32 (PyTorch's default)": (True, False),
    "cudnn and matmul TF32": (True, True),
}


def set_tf32(conv, mm):
    torch.backends.cudnn.allow_tf32 = conv
    torch.backends.cuda.matmul.allow_tf32 = mm


def report(title, worst):
    print(title)
    for m, e in worst.items():
        over = sum(1 for v in e if v > 1e-2)
        print(f"{m}: {len(e)} gradients (parameters x draws): worst {max(e):.3g}, "
              f"median {statistics.median(e):.3g}, over 1e-2: {over}", flush=True)


def drift_models(names, seeds):
    dev = torch.device("cuda")
    # fp32 twice: the run-to-run spread (atomics in cuDNN's or CTC's
    # kernels), the floor under which no TF32 drift can be told apart.
    modes = dict(MODES, **{"fp32 again (run to run)": (False, False)})
    for name in names:
        worst = {m: [] for m in modes}
        for seed in range(seeds):
            torch.manual_seed(seed)
            forward, params = GETTERS[name](dev)

            def g(conv, mm):
                set_tf32(conv, mm)
                torch.manual_seed(1000 + seed)  # the same dropout masks every time
                return torch.autograd.grad(forward(*params), params)

            ref = g(False, False)
            for m, (conv, mm) in modes.items():
                for a, b in zip(g(conv, mm), ref):
                    scale = b.abs().max().item()
                    worst[m].append((a - b).abs().max().item() / (scale if scale > 0 else 1.0))
            del forward, params, ref
            torch.cuda.empty_cache()
        set_tf32(True, False)
        report(f"{name} (the seed's getter, full size), {seeds} draws, {torch.__version__}, "
               f"{torch.cuda.get_device_name(0)}", worst)


def grads(model, names, params, x, y):
    load_weights(model, names, params)
    loss = F.cross_entropy(model(x), y)
    return torch.autograd.grad(loss, params)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--model":
        names = sys.argv[2].split(",")
        for name in names:
            if name not in GETTERS:
                sys.exit(f"tf32_drift.py: unknown model {name!r} (known: {', '.join(GETTERS)})")
        drift_models(names, int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    h = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    dev = torch.device("cuda")
    modes = MODES
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
