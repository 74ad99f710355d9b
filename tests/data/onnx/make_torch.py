# tests/data/onnx/make_torch.py -- run by hand with Debian's python3-torch
# (1.13; `/usr/bin/python3 tests/data/onnx/make_torch.py`): exports small
# versions of the seed's models to ONNX (opset 17, eval mode, weights as
# initializers; TrainingMode.PRESERVE, as EVAL folds batch norm into the
# convolutions) and stores PyTorch's float64 derivatives of each, so that
# tests/onnx/torch-parity.sh compares fadc's without torch.
#
# Each model's forward is a scalar loss of its parameters (every float
# initializer; batch norm's running statistics are parameters to fadc, but
# buffers to torch: their directions are 0, their derivatives not stored)
# and one input x.  For MODEL:
#   MODEL.onnx (f32) and MODEL_f64.onnx (the same weights in f64);
#   MODEL/f32/ and MODEL/f64/: x.npy, v.npy (1, vjp's), v.<p>.npy (fixed
#   directions), in the dtype of the model of that suffix;
#   MODEL/want/: loss, grad.<p> (vjp with v = 1), jvp.loss (with v.<p>),
#   vhp.<p> (with v.<p>), all float64 from torch.autograd.functional on
#   model.double() with exactly the f32 weights.
import os
import sys

import numpy as np
import onnx
import torch
from torch import nn
from torch.nn.utils.stateless import functional_call

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(23)


class Loss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        y = self.net(x)
        return (y * y).mean() + y.mean()


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.down = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.pool(torch.relu(self.bn1(self.conv1(x))))
        h = torch.relu(self.bn2(self.conv2(h)) + h)
        h = torch.relu(self.down(h))
        h = nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
        return torch.log_softmax(self.fc(h), dim=1)


class RNN(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


def models():
    mlp = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4), nn.Sigmoid())
    yield "mlp", mlp, torch.randn(5, 8)
    res = ResBlock()
    for bn in (res.bn1, res.bn2):  # running statistics that are not 0 and 1
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    yield "resnet", res, torch.randn(2, 3, 8, 8)
    enc = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                     batch_first=True)
    yield "transformer", enc, torch.randn(2, 5, 8)
    yield "lstm", RNN(nn.LSTM(4, 5, bidirectional=True, batch_first=True)), torch.randn(3, 6, 4)
    yield "gru", RNN(nn.GRU(4, 5, batch_first=True)), torch.randn(3, 6, 4)


def npy_name(name):
    # tools/fadc/cli.c, npy_file_name
    return "".join("%%%02X" % ord(c) if c in "/\\%" or (i == 0 and c == ".") else c
                   for i, c in enumerate(name)) + ".npy"


for name, net, x in models():
    model = Loss(net).eval()
    # Every parameter distinct: the exporter shares initializers of equal
    # values (LayerNorm's zero bias with an attention bias), which would
    # make fadc's gradient of the shared one the sum of both.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.rand(p.shape) * 0.2 - 0.1)
    out = os.path.join(here, name)
    os.makedirs(os.path.join(out, "want"), exist_ok=True)
    for dt, suffix in ((torch.float32, ""), (torch.float64, "_f64")):
        m = model.to(dt)
        path = os.path.join(here, name + suffix + ".onnx")
        # torch 1.13 casts 0-dim results to the default dtype (f32 in a
        # float64 model): the default is the model's while exporting.
        torch.set_default_dtype(dt)
        torch.onnx.export(m, (x.to(dt),), path, input_names=["x"], output_names=["loss"],
                          opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.PRESERVE)
        torch.set_default_dtype(torch.float32)
    model = model.double()
    onx = onnx.load(os.path.join(here, name + ".onnx"))
    state = dict(model.state_dict(keep_vars=True))
    names = [t.name for t in onx.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    missing = [n for n in names if n not in state]
    if missing:
        sys.exit("%s: initializers without a torch tensor of that name: %s" % (name, missing))
    # torch differentiates parameters, not batch norm's running statistics
    # (buffers): their directions are 0, and fadc's grad.<buffer> and
    # vhp.<buffer> are not compared.
    trained = [n for n in names if n in dict(model.named_parameters())]
    params = tuple(state[n].detach().clone() for n in trained)
    xd = x.double()

    def f(*ps):
        d = dict(zip(trained, ps))
        rnn = getattr(model.net, "rnn", None)
        if rnn is None:
            return functional_call(model, d, (xd,))
        # functional_call leaves an RNN's _flat_weights (what its forward
        # reads) on the module's own tensors: torch's derivatives would be
        # 0.  The step's weights are set there instead.
        old = rnn._flat_weights
        rnn._flat_weights = [d["net.rnn." + k] for k in rnn._flat_weights_names]
        try:
            return model(xd)
        finally:
            rnn._flat_weights = old

    g = torch.Generator().manual_seed(5)
    vs = tuple(torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1 for p in params)
    loss, grads = torch.autograd.functional.vjp(f, params, torch.tensor(1.0, dtype=torch.float64))
    _, jv = torch.autograd.functional.jvp(f, params, vs)
    _, vh = torch.autograd.functional.vhp(f, params, vs)
    # The inputs in both dtypes (f32/ for MODEL.onnx, f64/ for MODEL_f64.onnx).
    def save_in(fname, a):
        for dt, sub in ((np.float32, "f32"), (np.float64, "f64")):
            os.makedirs(os.path.join(out, sub), exist_ok=True)
            np.save(os.path.join(out, sub, fname), np.asarray(a, dtype=dt))

    save_in("x.npy", x.numpy())
    save_in("v.npy", np.array(1.0))
    np.save(os.path.join(out, "want", "loss.npy"), loss.detach().numpy())
    np.save(os.path.join(out, "want", "jvp.loss.npy"), jv.detach().numpy())
    for n in names:
        if n not in trained:
            save_in(npy_name("v." + n), np.zeros(tuple(state[n].shape)))
    for n, v, gr, h in zip(trained, vs, grads, vh):
        save_in(npy_name("v." + n), v.numpy())
        np.save(os.path.join(out, "want", npy_name("grad." + n)), gr.detach().numpy())
        np.save(os.path.join(out, "want", npy_name("vhp." + n)), h.detach().numpy())
    print(name, "loss", float(loss), "params", len(names))
