"""vision_models.py -- resnet18, fcn_resnet and detr of PyTorch's
functional_autograd_benchmark, with its getters' calling convention: a
getter takes a device and returns (forward, params), forward a function of
the params alone returning a 0-dim loss, params the module's parameters in
Module.parameters() order (utils.extract_weights); the data are drawn with
torch.rand on the device inside the getter, the model built on the CPU (CPU
generator) and moved.  Full sizes of models-spec.md §2.  The classes are in
torch_models.py (plain torch: no torchvision or scipy on the GPU machine).
Batch norm always on batch statistics, no running stats (what
replace_all_batch_norm_modules_ does with functorch present); fcn_resnet in
eval (dropout off), detr in train mode (dropout 0.1), as the benchmark."""
import torch
import torch.nn.functional as F
from torch import Tensor

import torch_models as models
from utils import GetterReturnType, extract_weights, load_weights


def get_resnet18(device: torch.device) -> GetterReturnType:
    N = 32
    model = models.ResNet18()
    model.to(device)
    params, names = extract_weights(model)

    inputs = torch.rand([N, 3, 224, 224], device=device)
    labels = torch.rand(N, device=device).mul(10).long()

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out = model(inputs)
        return F.cross_entropy(out, labels)

    return forward, params


def get_fcn_resnet(device: torch.device) -> GetterReturnType:
    N = 8
    model = models.FCN()
    model.eval()  # the benchmark: "disable dropout for consistency checking"
    model.to(device)
    params, names = extract_weights(model)

    inputs = torch.rand([N, 3, 480, 480], device=device)
    # The model has 21 classes.
    labels = torch.rand([N, 21, 480, 480], device=device)

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out = model(inputs)["out"]
        return F.mse_loss(out, labels)

    return forward, params


def get_detr(device: torch.device) -> GetterReturnType:
    # The DETR repository's CLI defaults, as the benchmark.
    N = 2
    num_classes = 91
    model = models.DETR(num_classes=num_classes, hidden_dim=256, nheads=8, num_encoder_layers=6,
                        num_decoder_layers=6)
    criterion = models.SetCriterion(num_classes=num_classes, eos_coef=0.1)
    model = model.to(device)
    criterion = criterion.to(device)
    params, names = extract_weights(model)

    inputs = torch.rand(N, 3, 800, 1200, device=device)
    labels = []
    for idx in range(N):
        targets = {}
        n_targets = int(torch.randint(5, 10, size=tuple()).item())
        targets["labels"] = torch.randint(5, 10, size=(n_targets,), device=device)
        boxes = torch.randint(100, 800, size=(n_targets, 4), device=device)
        for box in boxes:  # the benchmark's loop, aliasing and all (models-spec §2.3)
            if box[0] > box[2]:
                box[0], box[2] = box[2], box[0]
            if box[1] > box[3]:
                box[1], box[3] = box[3], box[1]
        targets["boxes"] = boxes.float()
        labels.append(targets)

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out = model(inputs)
        loss = criterion(out, labels)
        weight_dict = criterion.weight_dict
        return sum(loss[k] * weight_dict[k] for k in loss.keys() if k in weight_dict)

    return forward, params
