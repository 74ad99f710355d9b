"""seed_tf32.py -- the seed's functional_autograd_benchmark.py, unchanged, at a
chosen TF32 setting (issue 19: compare strict fadc with PyTorch at TF32 off,
fadc --allow-tf32 with TF32 on for convolutions and matmuls).

    python3 seed_tf32.py off|default|on [the seed's arguments...]

off: torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32
= False; default: PyTorch's own (cuDNN convolutions in TF32, matmuls fp32);
on: both True.  The flags are set, then the seed's main() runs as if
started with the remaining arguments; the seed itself is not edited.

Peak memory (issue 19: the peers report it for the same cells): the seed
module's run_model (one model, one task, one strategy: its model and data
built, the warm-up, the timed runs) is wrapped so that, on a GPU, the
allocator's peak is reset before it and read after it; one line per
call, `seed_tf32.py: peak MODEL TASK STRATEGY: N bytes`, N being
torch.cuda.max_memory_allocated() over that call (the model and its data
are resident in it, as fadc-bench counts the declarations).
"""
import os
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
    import functional_autograd_benchmark as seed

    run_model = seed.run_model

    def measured(model_getter, args, task, run_once_fn=seed.run_once):
        gpu = args.gpu != -1 and torch.cuda.is_available()
        if gpu:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        r = run_model(model_getter, args, task, run_once_fn)
        if gpu:
            torch.cuda.synchronize()
            how = "torch.func" if run_once_fn is seed.run_once_functorch else "autograd.functional"
            name = getattr(model_getter, "__name__", "model").replace("get_", "")
            print(f"seed_tf32.py: peak {name} {task} {how}: "
                  f"{torch.cuda.max_memory_allocated()} bytes", flush=True)
        return r

    # main() looks run_model up in the module's globals at each call.
    seed.run_model = measured
    seed.main()


if __name__ == "__main__":
    main()
