# tests/onnx/make_models.py OUTDIR -- tiny ONNX models made with onnx's
# helper API alone (no torch), their weights as .npy files named for
# `fadc run --params` (docs/IR.md, "Output files": '/' is %2F), and the
# expected outputs computed here with NumPy in float64 by hand, the oracle
# (Debian's onnx 1.12 has no onnx.reference).  Also the malformed models
# of the error checks.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(23)


def fname(name):
    # tools/fadc/cli.c, npy_file_name
    s = "".join("%%%02X" % ord(c) if c in "/\\%" or (i == 0 and c == ".") else c
                for i, c in enumerate(name))
    return os.path.join(out, s + ".npy")


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


# The MLP: every op of the first set, with ONNX's names.
x = rng.standard_normal((5, 4)).astype(np.float32)
W1 = rng.standard_normal((6, 4)).astype(np.float32)  # Gemm, transB: (N, K)
b1 = rng.standard_normal((6,)).astype(np.float32)
W2 = rng.standard_normal((3, 6)).astype(np.float32)
c = np.float32(3.0).reshape(())
for name, a in [("input.1", x), ("0.weight", W1), ("0.bias", b1), ("onnx::MatMul_9", W2),
                ("0.bias_c", c)]:
    np.save(fname(name), a)
# 0.bias in float_data, the others in raw_data: --params mlp.onnx reads both.
inits = [nh.from_array(W1, "0.weight"), h.make_tensor("0.bias", T.FLOAT, [6], b1.tolist()),
         nh.from_array(W2, "onnx::MatMul_9"), nh.from_array(c, "0.bias_c"),
         nh.from_array(np.array([3, -1], dtype=np.int64), "/shape")]
nodes = [
    h.make_node("Gemm", ["input.1", "0.weight", "0.bias"], ["/0/Gemm_output_0"], name="/0/Gemm",
                transB=1, alpha=0.5, beta=2.0),
    h.make_node("Tanh", ["/0/Gemm_output_0"], ["/1/Tanh_output_0"], name="/1/Tanh"),
    h.make_node("Transpose", ["onnx::MatMul_9"], ["/t"], name="/T"),
    h.make_node("MatMul", ["/1/Tanh_output_0", "/t"], ["/2/MatMul_output_0"], name="/2/MatMul"),
    h.make_node("Sigmoid", ["/2/MatMul_output_0"], ["/s"], name="/s"),
    h.make_node("Sub", ["/s", "/2/MatMul_output_0"], ["/d"], name="/d"),
    h.make_node("Relu", ["/d"], ["/r"], name="/r"),
    h.make_node("Div", ["/r", "0.bias_c"], ["/q"], name="/q"),
    h.make_node("Softmax", ["/q"], ["/sm"], name="/sm", axis=0),
    h.make_node("Mul", ["/sm", "/q"], ["/m"], name="/m"),
    h.make_node("Flatten", ["/m"], ["/f"], name="/f", axis=0),
    h.make_node("Constant", [], ["/c0"], name="/c0",
                value=nh.from_array(np.array([0, -1], dtype=np.int64))),
    h.make_node("Reshape", ["/f", "/shape"], ["/rs"], name="/rs"),
    h.make_node("Reshape", ["/rs", "/c0"], ["/rs0"], name="/rs0"),
    h.make_node("Identity", ["/rs0"], ["out"], name="/id"),
    h.make_node("Add", ["/q", "/m"], ["/layer/Add_output_0"], name="/add"),
]
g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("input.1", T.FLOAT, [5, 4])],
                 [h.make_tensor_value_info("out", T.FLOAT, [3, 5]),
                  h.make_tensor_value_info("/layer/Add_output_0", T.FLOAT, [5, 3])], inits)
save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), "mlp.onnx")

X, A, B, C, D = (v.astype(np.float64) for v in (x, W1, b1, W2, c))
t = np.tanh(0.5 * (X @ A.T) + 2.0 * B)
mm = t @ C.T
q = np.maximum(1 / (1 + np.exp(-mm)) - mm, 0) / D
sm = np.exp(q - q.max(axis=0)) / np.exp(q - q.max(axis=0)).sum(axis=0)
m = sm * q
os.makedirs(os.path.join(out, "want"), exist_ok=True)
np.save(os.path.join(out, "want", "out.npy"), m.reshape(1, 15).reshape(3, 5).astype(np.float32))
np.save(os.path.join(out, "want", "%2Flayer%2FAdd_output_0.npy"), (q + m).astype(np.float32))

# The other ops, on one input (opset 13: ReduceSum's, Squeeze's and
# Unsqueeze's axes are inputs, ReduceMean's and ReduceMax's attributes).
import math
x2 = rng.standard_normal((2, 3)).astype(np.float32)
np.save(fname("x"), x2)
one_, p15 = np.float32(1.0).reshape(()), np.float32(1.5).reshape(())
np.save(fname("one"), one_)
np.save(fname("1.5"), p15)
i64 = lambda v: np.array(v, dtype=np.int64)
inits = [nh.from_array(one_, "one"), nh.from_array(p15, "1.5"), nh.from_array(i64([1]), "/ax1"),
         nh.from_array(i64([0]), "/ax0")]
N = h.make_node
nodes = [
    N("Abs", ["x"], ["a"]), N("Add", ["a", "one"], ["a1"]), N("Sqrt", ["a1"], ["sq"]),
    N("Log", ["a1"], ["lg"]), N("Neg", ["x"], ["nx"]), N("Exp", ["nx"], ["e"]),
    N("Erf", ["x"], ["er"]), N("Pow", ["a1", "1.5"], ["p"]), N("LeakyRelu", ["x"], ["lr"], alpha=0.2),
    N("LogSoftmax", ["x"], ["ls"], axis=1),
    N("Concat", ["sq", "lg", "e", "er", "p", "lr", "ls"], ["cat"], axis=0),
    N("ReduceSum", ["cat", "/ax1"], ["rs"], keepdims=0),
    N("ReduceMean", ["cat"], ["rm"], axes=[0]),
    N("ReduceMax", ["cat"], ["rmax"], keepdims=0),
    N("Unsqueeze", ["rs", "/ax0"], ["us"]), N("Squeeze", ["rm", "/ax0"], ["sqz"]),
]
for k, nd in enumerate(nodes):
    nd.name = "/n%d/%s" % (k, nd.op_type)
g = h.make_graph(nodes, "ops", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                 [h.make_tensor_value_info("us", T.FLOAT, [1, 14]),
                  h.make_tensor_value_info("sqz", T.FLOAT, [3]),
                  h.make_tensor_value_info("rmax", T.FLOAT, [])], inits)
save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), "ops.onnx")
X = x2.astype(np.float64)
a1 = np.abs(X) + 1
ls = X - X.max(axis=1, keepdims=True)
ls = ls - np.log(np.exp(ls).sum(axis=1, keepdims=True))
cat = np.concatenate([np.sqrt(a1), np.log(a1), np.exp(-X), np.vectorize(math.erf)(X), a1 ** 1.5,
                      np.where(X > 0, X, 0.2 * X), ls], axis=0)
os.makedirs(os.path.join(out, "want-ops"), exist_ok=True)
for name, v in [("us", cat.sum(axis=1)[None, :]), ("sqz", cat.mean(axis=0)), ("rmax", cat.max())]:
    np.save(os.path.join(out, "want-ops", name + ".npy"), np.asarray(v, dtype=np.float32))

# Einsum (its node tests are opset 12, below fadc's range): a batched
# product, a transpose with a sum, a three-operand contraction, an inner
# product in implicit mode; NumPy's einsum in float64 is the oracle.
ea = rng.standard_normal((2, 3, 4)).astype(np.float32)
eb = rng.standard_normal((2, 4, 5)).astype(np.float32)
ec = rng.standard_normal((5, 3)).astype(np.float32)
ev = rng.standard_normal((4,)).astype(np.float32)
for nm, a in [("ea", ea), ("eb", eb), ("ec", ec), ("ev", ev)]:
    np.save(fname(nm), a)
eqs = [("e1", ["ea", "eb"], "bij,bjk->bik"), ("e2", ["ea"], "bij->jb"),
       ("e3", ["ea", "eb", "ec"], "bij,bjk,kl->il"), ("e4", ["ev", "ev"], "i,i")]
nodes = [h.make_node("Einsum", ins, [o], name="/" + o, equation=q) for o, ins, q in eqs]
env = {"ea": ea, "eb": eb, "ec": ec, "ev": ev}
want = {o: np.einsum(q, *[env[i].astype(np.float64) for i in ins]) for o, ins, q in eqs}
g = h.make_graph(nodes, "einsum", [h.make_tensor_value_info(k, T.FLOAT, list(v.shape))
                                   for k, v in env.items()],
                 [h.make_tensor_value_info(o, T.FLOAT, list(want[o].shape)) for o, _, _ in eqs])
save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), "einsum.onnx")
os.makedirs(os.path.join(out, "want-einsum"), exist_ok=True)
for o, v in want.items():
    np.save(os.path.join(out, "want-einsum", o + ".npy"), np.array(v, dtype=np.float32, order="C"))

# LSTM in layout 1 (batch first) with initial states, both directions and
# both biases: what neither the node tests (layout 1 without states) nor
# torch's export (layout 0) reach.  NumPy by hand, ONNX's gate order i o f c.
Tn, Bn, In, Hn = 4, 2, 3, 5
lx = rng.standard_normal((Bn, Tn, In)).astype(np.float32)
lW = (rng.standard_normal((2, 4 * Hn, In)) * 0.5).astype(np.float32)
lR = (rng.standard_normal((2, 4 * Hn, Hn)) * 0.5).astype(np.float32)
lB = (rng.standard_normal((2, 8 * Hn)) * 0.5).astype(np.float32)
lh = rng.standard_normal((Bn, 2, Hn)).astype(np.float32)
lc = rng.standard_normal((Bn, 2, Hn)).astype(np.float32)
lenv = {"lx": lx, "lW": lW, "lR": lR, "lB": lB, "lh": lh, "lc": lc}
for nm, a in lenv.items():
    np.save(fname(nm), a)
sig = lambda v: 1 / (1 + np.exp(-v))
Y = np.zeros((Bn, Tn, 2, Hn))
Yh, Yc = np.zeros((Bn, 2, Hn)), np.zeros((Bn, 2, Hn))
for d in range(2):
    W, R, b = (v[d].astype(np.float64) for v in (lW, lR, lB))
    hh, cc = lh[:, d].astype(np.float64), lc[:, d].astype(np.float64)
    for t in (range(Tn) if d == 0 else reversed(range(Tn))):
        z = lx[:, t].astype(np.float64) @ W.T + hh @ R.T + b[:4 * Hn] + b[4 * Hn:]
        i, o, f, g = sig(z[:, :Hn]), sig(z[:, Hn:2 * Hn]), sig(z[:, 2 * Hn:3 * Hn]), np.tanh(z[:, 3 * Hn:])
        cc = f * cc + i * g
        hh = o * np.tanh(cc)
        Y[:, t, d] = hh
    Yh[:, d], Yc[:, d] = hh, cc
node = h.make_node("LSTM", ["lx", "lW", "lR", "lB", "", "lh", "lc"], ["Y", "Y_h", "Y_c"],
                   name="/lstm", hidden_size=Hn, direction="bidirectional", layout=1)
g = h.make_graph([node], "lstm", [h.make_tensor_value_info(k, T.FLOAT, list(v.shape))
                                  for k, v in lenv.items()],
                 [h.make_tensor_value_info("Y", T.FLOAT, list(Y.shape)),
                  h.make_tensor_value_info("Y_h", T.FLOAT, list(Yh.shape)),
                  h.make_tensor_value_info("Y_c", T.FLOAT, list(Yc.shape))])
save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), "lstm.onnx")
os.makedirs(os.path.join(out, "want-lstm"), exist_ok=True)
for nm, v in (("Y", Y), ("Y_h", Yh), ("Y_c", Yc)):
    np.save(os.path.join(out, "want-lstm", nm + ".npy"), v.astype(np.float32))

# Resize nearest, NumPy by hand (ONNX's coordinate rules and rounding):
# an axis of 2 -> 5 (indices written as a literal) and one of 150 -> 375
# (more than 256: computed in the model from iota), three modes.
rx = rng.standard_normal((1, 2, 2, 150)).astype(np.float32)
np.save(fname("rx"), rx)
rsc = np.array([1, 1, 2.5, 2.5], dtype=np.float32)
rz = lambda v: np.zeros(v, dtype=np.float32)
inits = [nh.from_array(rsc, "rscales"), nh.from_array(rz(0), "roi")]


def nearest_idx(n_in, n_out, s, ct, nm):
    i = np.arange(n_out, dtype=np.float64)
    c = {"half_pixel": (i + 0.5) / s - 0.5, "asymmetric": i / s,
         "align_corners": i * (n_in - 1) / (n_in * s - 1)}[ct]
    r = {"round_prefer_floor": np.where(c - np.floor(c) == 0.5, np.floor(c), np.floor(c + 0.5)),
         "round_prefer_ceil": np.floor(c + 0.5), "floor": np.floor(c), "ceil": np.ceil(c)}[nm]
    return np.clip(r, 0, n_in - 1).astype(np.int64)


nodes, want = [], {}
for k, (ct, nm) in enumerate([("half_pixel", "round_prefer_floor"), ("asymmetric", "floor"),
                              ("align_corners", "round_prefer_ceil")]):
    nodes.append(h.make_node("Resize", ["rx", "roi", "rscales"], ["r%d" % k], name="/rs%d" % k,
                             mode="nearest", coordinate_transformation_mode=ct, nearest_mode=nm))
    ih, iw = nearest_idx(2, 5, 2.5, ct, nm), nearest_idx(150, 375, 2.5, ct, nm)
    want["r%d" % k] = rx[:, :, ih][:, :, :, iw]
g = h.make_graph(nodes, "resize", [h.make_tensor_value_info("rx", T.FLOAT, [1, 2, 2, 150])],
                 [h.make_tensor_value_info(o, T.FLOAT, [1, 2, 5, 375]) for o in want], inits)
save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), "resize.onnx")
os.makedirs(os.path.join(out, "want-resize"), exist_ok=True)
for o, v in want.items():
    np.save(os.path.join(out, "want-resize", o + ".npy"), np.array(v, dtype=np.float32, order="C"))

# Errors.
def one(nodes, inputs, outputs, inits=(), opset=13, name=None):
    g = h.make_graph(nodes, "e", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    onnx.save(m, os.path.join(out, name))

vi = h.make_tensor_value_info
one([h.make_node("Hardmax", ["x"], ["y"], name="hm1"), h.make_node("Relu", ["y"], ["z"], name="r"),
     h.make_node("Foo", ["z"], ["w"], name="foo", domain="com.example")],
    [vi("x", T.FLOAT, [1, 1, 3, 3])], [vi("w", T.FLOAT, [1])], name="unsupported.onnx")
one([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])],
    opset=11, name="opset11.onnx")
one([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.INT32, [2])], [vi("y", T.INT32, [2])],
    name="int32.onnx")
one([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, ["N", 2])],
    [vi("y", T.FLOAT, ["N", 2])], name="symbolic.onnx")
one([h.make_node("MatMul", ["x", "w"], ["y"], name="/mm")], [vi("x", T.FLOAT, [2, 3]),
    vi("w", T.FLOAT, [4, 5])], [vi("y", T.FLOAT, [2, 5])], name="matmul-shapes.onnx")
one([h.make_node("Not", ["x"], ["y"], name="/not")], [vi("x", T.FLOAT, [2, 3])],
    [vi("y", T.BOOL, [2, 3])], name="not-float.onnx")
one([h.make_node("Reshape", ["x", "s"], ["y"], name="/r")], [vi("x", T.FLOAT, [2, 3]),
    vi("s", T.INT64, [2])], [vi("y", T.FLOAT, [3, 2])], name="reshape-input.onnx")
data = open(os.path.join(out, "mlp.onnx"), "rb").read()
open(os.path.join(out, "truncated.onnx"), "wb").write(data[: len(data) // 2])
