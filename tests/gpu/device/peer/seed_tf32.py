"""seed_tf32.py -- the seed's functional_autograd_benchmark.py, unchanged, at a
chosen TF32 setting (issue 19: compare strict fadc with PyTorch at TF32 off,
fadc --allow-tf32 with TF32 on for convolutions and matmuls).

    python3 seed_tf32.py off|default|on [the seed's arguments...]

off: torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32
= False; default: PyTorch's own (cuDNN convolutions in TF32, matmuls fp32);
on: both True.  The flags are set, then the seed's main() runs as if
started with the remaining arguments; the seed itself is not edited.
"""
import os
import runpy
import sys

import torch

SETTINGS = {"off": (False, False), "default": (True, False), "on": (True, True)}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in SETTINGS:
        sys.exit("usage: seed_tf32.py off|default|on [functional_autograd_benchmark.py arguments]")
    conv, mm = SETTINGS[sys.argv[1]]
    torch.backends.cudnn.allow_tf32 = conv
    torch.backends.cuda.matmul.allow_tf32 = mm
    print(f"seed_tf32.py: cudnn.allow_tf32={conv} cuda.matmul.allow_tf32={mm}", flush=True)
    sys.argv = ["functional_autograd_benchmark.py"] + sys.argv[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)  # the seed's own imports (vision_models, utils, ...)
    runpy.run_path(os.path.join(here, "functional_autograd_benchmark.py"), run_name="__main__")


if __name__ == "__main__":
    main()
