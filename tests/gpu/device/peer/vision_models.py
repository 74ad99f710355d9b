"""vision_models.py -- not provided on the GPU machine (tests/gpu/device/peer):
the names functional_autograd_benchmark.py imports, raising when asked."""


def _missing(name):
    def get(device):
        raise RuntimeError(f"{name} is not provided on this machine (tests/gpu/device/peer)")
    return get


get_resnet18 = _missing("resnet18")
get_fcn_resnet = _missing("fcn_resnet")
get_detr = _missing("detr")
