# tests/data/onnx/make_fd.py [OUTDIR] -- the float64 models of the
# finite-difference check (tests/onnx/onnx-fd.sh, docs/ONNX.md): the ops the
# importer maps that no PyTorch export of torch-parity.sh differentiates.
# Made with onnx's helper API alone (Debian's onnx 1.12); OUTDIR defaults to
# tests/data/onnx/fd.  Each model is one scalar output
#     loss = sum_k <C_k, y_k>
# over its branches y_k (one op under test each, on float initializers of
# its own: fadc's parameters), C_k fixed random weights, initializers named
# C<k> that the check imports with --const (so that no symmetry, such as
# sum(softmax) = 1, hides a derivative).  Each parameter is also written as
# OUTDIR/MODEL/NAME.npy, the base point that the check perturbs, and
# OUTDIR/MODEL/consts.txt lists the C<k>.  Values are chosen away from
# kinks: |x| >= 0.2 where Abs, Sign, LeakyRelu, Reciprocal are not smooth at
# 0, Floor's arguments >= 0.1 from an integer, Max/Min/Clip operands >= 0.1
# from a tie or bound, the elements under a maximum (ReduceMax, MaxPool,
# GlobalMaxPool) a permutation of values 0.05 apart; the check's steps are
# ~1e-6.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx import shape_inference

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fd")
rng = np.random.default_rng(2323)
i64 = lambda v: np.array(v, dtype=np.int64)


def normal(*shape):
    return rng.standard_normal(shape)


def away(*shape, m=0.2):
    # |x| >= m, both signs.
    u = rng.standard_normal(shape)
    return np.sign(u) * (m + np.abs(u))


def positive(*shape, lo=0.5, hi=2.0):
    return rng.uniform(lo, hi, shape)


def distinct(*shape, gap=0.05):
    # A permutation of values gap apart: no ties under a maximum.
    n = int(np.prod(shape))
    return (rng.permutation(n) - n / 2).reshape(shape) * gap


class Model:
    def __init__(self, name, opset=17):
        self.name, self.opset = name, opset
        self.nodes, self.inits, self.branches, self.consts = [], [], [], []

    def param(self, name, value):
        self.inits.append(nh.from_array(np.asarray(value, dtype=np.float64), name))
        return name

    def const(self, name, value):
        a = np.asarray(value)
        self.nodes.append(h.make_node("Constant", [], [name], name="/" + name,
                                      value=nh.from_array(a, name)))
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(h.make_node(op, ins, outs, name="/%s/%d" % (op, len(self.nodes)),
                                      **attrs))
        return outs[0]

    def branch(self, y, shape=None):
        self.branches.append((y, shape))

    def save(self, check=True):
        # Shapes of the branches from onnx's inference (or given), then the loss.
        g = h.make_graph(self.nodes, self.name, [], [h.make_tensor_value_info("loss", T.DOUBLE, [])],
                         self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        shapes = {}
        if check:
            inf = shape_inference.infer_shapes(m, strict_mode=True)
            for vi in inf.graph.value_info:
                shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        terms = []
        for k, (y, shape) in enumerate(self.branches):
            shape = shape if shape is not None else shapes[y]
            c = "C%d" % k
            self.consts.append(nh.from_array(normal(*shape), c))
            p = self.node("Mul", [y, c], ["w%d" % k])
            terms.append(self.node("ReduceSum", [p], ["t%d" % k], keepdims=0))
        acc = terms[0]
        for k, t in enumerate(terms[1:]):
            acc = self.node("Add", [acc, t], ["s%d" % k])
        self.node("Identity", [acc], ["loss"])
        g = h.make_graph(self.nodes, self.name, [], [h.make_tensor_value_info("loss", T.DOUBLE, [])],
                         self.inits + self.consts)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        if check:
            onnx.checker.check_model(m, full_check=True)
        os.makedirs(os.path.join(out, self.name), exist_ok=True)
        onnx.save(m, os.path.join(out, self.name + ".onnx"))
        with open(os.path.join(out, self.name, "consts.txt"), "w") as f:
            f.write("".join(c.name + "\n" for c in self.consts))
        for t in self.inits:
            np.save(os.path.join(out, self.name, t.name + ".npy"), nh.to_array(t))


# Elementwise ops, each on (3, 4) parameters of its own.
m = Model("elementwise")
N = m.node
m.branch(N("Sub", [m.param("sub_a", normal(3, 4)), m.param("sub_b", normal(4))], ["sub"]))
m.branch(N("Div", [m.param("div_a", normal(3, 4)), m.param("div_b", away(3, 1, m=0.5))], ["div"]))
m.branch(N("Pow", [m.param("pow_a", positive(3, 4)), m.param("pow_b", normal(4))], ["pow"]))
m.branch(N("Neg", [m.param("neg", normal(3, 4))], ["neg_y"]))
m.branch(N("Exp", [m.param("exp", normal(3, 4))], ["exp_y"]))
m.branch(N("Log", [m.param("log", positive(3, 4))], ["log_y"]))
m.branch(N("Sqrt", [m.param("sqrt", positive(3, 4))], ["sqrt_y"]))
m.branch(N("Erf", [m.param("erf", normal(3, 4))], ["erf_y"]))
m.branch(N("Abs", [m.param("abs", away(3, 4))], ["abs_y"]))
m.branch(N("Sin", [m.param("sin", normal(3, 4))], ["sin_y"]))
m.branch(N("Cos", [m.param("cos", normal(3, 4))], ["cos_y"]))
m.branch(N("Softplus", [m.param("softplus", normal(3, 4))], ["softplus_y"]))
m.branch(N("Reciprocal", [m.param("reciprocal", away(3, 4, m=0.5))], ["reciprocal_y"]))
# Floor and Sign have derivative 0: times their argument, the product's
# derivative is floor(u) (sign(u)).
fl = rng.integers(-3, 3, (3, 4)) + rng.uniform(0.1, 0.9, (3, 4))
m.branch(N("Mul", [N("Floor", [m.param("floor", fl)], ["floor_y"]), "floor"], ["floor_u"]))
m.branch(N("Mul", [N("Sign", [m.param("sign", away(3, 4))], ["sign_y"]), "sign"], ["sign_u"]))
# Max of three operands (one broadcast), Min of two; 0.1 apart at least.
ma = normal(3, 4)
mb = ma + rng.choice([-1, 1], (3, 4)) * rng.uniform(0.1, 1, (3, 4))
mc = np.where(rng.random(4) < 0.5, ma.max(0) + 0.3, ma.min(0) - 0.3)
m.branch(N("Max", [m.param("max_a", ma), m.param("max_b", mb), m.param("max_c", mc)], ["max_y"]))
m.branch(N("Min", [m.param("min_a", ma + 0.01), m.param("min_b", mb - 0.01)], ["min_y"]))
cond = N("Greater", [m.const("where_k", normal(3, 4)), m.const("zero", np.float64(0))], ["where_c"])
m.branch(N("Where", [cond, m.param("where_a", normal(3, 4)), m.param("where_b", normal(1, 4))],
           ["where_y"]))
cl = rng.uniform(-1.5, 1.5, (3, 4))
cl = np.where(np.abs(np.abs(cl) - 0.7) < 0.1, cl + 0.25, cl)  # 0.1 from the bounds
m.branch(N("Clip", [m.param("clip", cl), m.const("lo", np.float64(-0.7)),
                    m.const("hi", np.float64(0.7))], ["clip_y"]))
m.branch(N("LeakyRelu", [m.param("leakyrelu", away(3, 4))], ["leakyrelu_y"], alpha=0.3))
m.branch(N("Softmax", [m.param("softmax", normal(3, 4))], ["softmax_y"], axis=0))
m.branch(N("LogSoftmax", [m.param("logsoftmax", normal(3, 4))], ["logsoftmax_y"], axis=0))
m.branch(N("Cast", [m.param("cast", normal(3, 4))], ["cast_y"], to=T.DOUBLE))
m.branch(N("Dropout", [m.param("dropout", normal(3, 4))], ["dropout_y"]))
m.save()

# Gelu (opset 20: past onnx 1.12's checker, so unchecked; shapes given).
m = Model("gelu", opset=20)
m.branch(m.node("Gelu", [m.param("gelu", normal(3, 4))], ["gelu_y"]), [3, 4])
m.branch(m.node("Gelu", [m.param("gelu_tanh", normal(3, 4))], ["gelu_tanh_y"], approximate="tanh"),
         [3, 4])
m.save(check=False)

# Reductions (opset 17: ReduceSum's axes an input, the others' attributes).
m = Model("reduce")
N = m.node
m.branch(N("ReduceSum", [m.param("sum", normal(2, 3, 4)), m.const("ax1", i64([1]))], ["sum_y"],
           keepdims=0))
m.branch(N("ReduceMax", [m.param("max", distinct(2, 3, 4))], ["max_y"], axes=[2], keepdims=0))
m.branch(N("ReduceMin", [m.param("min", distinct(2, 3, 4))], ["min_y"], axes=[0, 2]))
m.branch(N("ReduceLogSumExp", [m.param("logsumexp", normal(2, 3, 4))], ["logsumexp_y"], axes=[1]))
m.branch(N("ReduceSumSquare", [m.param("sumsquare", normal(2, 3, 4))], ["sumsquare_y"], axes=[-1]))
m.branch(N("ReduceL1", [m.param("l1", away(2, 3, 4))], ["l1_y"], axes=[0]))
m.branch(N("ReduceL2", [m.param("l2", normal(2, 3, 4))], ["l2_y"], axes=[1, 2], keepdims=0))
m.branch(N("ReduceLogSum", [m.param("logsum", positive(2, 3, 4))], ["logsum_y"], axes=[2]))
m.branch(N("ReduceMax", [m.param("max_all", distinct(2, 3, 4))], ["max_all_y"], keepdims=0))
m.branch(N("ReduceMean", [m.param("mean", normal(2, 3, 4))], ["mean_y"], axes=[0, 2]))
m.branch(N("GlobalMaxPool", [m.param("globalmax", distinct(1, 2, 3, 3))], ["globalmax_y"]))
m.save()

# Indexing and shape ops on data (the exports use Gather, Slice, Expand,
# Concat, Squeeze only on shapes known at import).
m = Model("shape")
N = m.node
m.branch(N("Gather", [m.param("gather", normal(3, 5)), m.const("gi", i64([0, -1, 2, 0, 4]))],
           ["gather_y"], axis=1))  # index 0 twice: the vjp adds
m.branch(N("Gather", [m.param("gather2", normal(4, 3)), m.const("gi2", i64([[1, -4], [3, 1]]))],
           ["gather2_y"], axis=0))
m.branch(N("Slice", [m.param("slice", normal(4, 6)), m.const("ss", i64([-1, 1])),
                     m.const("se", i64([-10, 6])), m.const("sa", i64([0, 1])),
                     m.const("st", i64([-2, 2]))], ["slice_y"]))
sp = N("Split", [m.param("split", normal(2, 5)), m.const("sps", i64([1, 4]))], ["split0", "split1"],
       axis=1)
m.branch("split0")
m.branch("split1")
m.branch(N("Expand", [m.param("expand", normal(3, 1)), m.const("es", i64([2, 3, 4]))], ["expand_y"]))
m.branch(N("Concat", [m.param("concat_a", normal(2, 3)), m.param("concat_b", normal(2, 1))],
           ["concat_y"], axis=1))
m.branch(N("Squeeze", [m.param("squeeze", normal(2, 1, 3)), m.const("sqa", i64([1]))], ["squeeze_y"]))
m.branch(N("MatMul", [m.param("mm_a", normal(2, 3, 4)), m.param("mm_v", normal(4))], ["mm_y"]))
m.branch(N("MatMul", [m.param("mm_w", normal(3)), m.param("mm_b", normal(2, 3, 4))], ["mm2_y"]))
ea, eb, ec, ev = (m.param(n, normal(*s)) for n, s in
                  [("ein_a", (2, 3, 4)), ("ein_b", (2, 4, 5)), ("ein_c", (5, 3)), ("ein_v", (4,))])
# (onnx 1.12 infers no Einsum shapes: given)
m.branch(N("Einsum", [ea, eb], ["ein1"], equation="bij,bjk->bik"), [2, 3, 5])
m.branch(N("Einsum", [ea], ["ein2"], equation="bij->jb"), [4, 2])
m.branch(N("Einsum", [ea, eb, ec], ["ein3"], equation="bij,bjk,kl->il"), [3, 3])
m.branch(N("Einsum", [ev, ev], ["ein4"], equation="i,i"), [])
m.branch(N("Einsum", [ea, ev], ["ein5"], equation="bij,j"), [2, 3])
m.save()

# Convolutions, pools, resizes, normalizations.
m = Model("conv")
N = m.node
m.branch(N("ConvTranspose", [m.param("ct_x", normal(1, 2, 3, 3)), m.param("ct_w", normal(2, 3, 3, 3)),
                             m.param("ct_b", normal(3))], ["ct_y"],
           strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))
m.branch(N("ConvTranspose", [m.param("ct1_x", normal(1, 4, 5)), m.param("ct1_w", normal(4, 1, 3))],
           ["ct1_y"], group=2, dilations=[2], pads=[0, 1]))
m.branch(N("Conv", [m.param("c1_x", normal(1, 4, 9)), m.param("c1_w", normal(6, 2, 3)),
                    m.param("c1_b", normal(6))], ["c1_y"], group=2, dilations=[2], strides=[2],
           pads=[1, 2]))
m.branch(N("Conv", [m.param("c2_x", normal(1, 2, 5, 5)), m.param("c2_w", normal(3, 2, 2, 3))],
           ["c2_y"], auto_pad="SAME_UPPER"))
m.branch(N("AveragePool", [m.param("ap_x", normal(1, 2, 5, 5))], ["ap_y"], kernel_shape=[3, 3],
           strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1))
m.branch(N("AveragePool", [m.param("ap2_x", normal(1, 2, 5, 5))], ["ap2_y"], kernel_shape=[3, 2],
           pads=[1, 0, 1, 1], count_include_pad=1))
m.branch(N("MaxPool", [m.param("mp_x", distinct(1, 2, 5, 5))], ["mp_y"], kernel_shape=[2, 2],
           strides=[2, 2], ceil_mode=1))
m.branch(N("MaxPool", [m.param("mp1_x", distinct(1, 2, 8))], ["mp1_y"], kernel_shape=[2],
           dilations=[2], pads=[1, 0]))
scales = m.const("rs2", np.array([1, 1, 2, 2], dtype=np.float32))
roi = m.const("roi", np.zeros(0, dtype=np.float32))
for k, ct in enumerate(["half_pixel", "align_corners", "pytorch_half_pixel"]):
    m.branch(N("Resize", [m.param("rl%d_x" % k, normal(1, 2, 3, 4)), roi, scales], ["rl%d_y" % k],
               mode="linear", coordinate_transformation_mode=ct))
m.branch(N("Resize", [m.param("rn_x", normal(1, 2, 3, 4)), roi,
                      m.const("rs3", np.array([1, 1, 2.5, 1.5], dtype=np.float32))], ["rn_y"],
           mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
m.branch(N("BatchNormalization", [m.param("bn_x", normal(3, 2, 2, 2)), m.param("bn_s", normal(2)),
                                  m.param("bn_b", normal(2)), m.const("bn_m", normal(2)),
                                  m.const("bn_v", positive(2))], ["bn_y", "bn_rm", "bn_rv"], training_mode=1))
m.branch(N("LayerNormalization", [m.param("ln_x", normal(2, 3, 4)), m.param("ln_s", normal(3, 4)),
                                  m.param("ln_b", normal(3, 4))], ["ln_y"], axis=1))
m.branch(N("Gemm", [m.param("gemm_a", normal(4, 2)), m.param("gemm_b", normal(3, 4)),
                    m.param("gemm_c", normal(3))], ["gemm_y"], transA=1, transB=1, alpha=0.7,
           beta=1.3))
m.save()

# Recurrences: RNN, GRU both ways of linear_before_reset, LSTM with
# initial states in layout 1 (torch's exports: LSTM and GRU, forward,
# linear_before_reset 1, layout 0, no initial states as inputs).
m = Model("rnn", opset=14)
N = m.node
Tn, Bn, In, Hn = 3, 2, 3, 4
x = m.param("x", normal(Tn, Bn, In))
m.branch(N("RNN", [x, m.param("rnn_w", 0.5 * normal(2, Hn, In)), m.param("rnn_r", 0.5 * normal(2, Hn, Hn)),
                   m.param("rnn_b", 0.5 * normal(2, 2 * Hn)), "", m.param("rnn_h", normal(2, Bn, Hn))],
           ["rnn_y", "rnn_yh"], hidden_size=Hn, direction="bidirectional"))
m.branch("rnn_yh")
for lbr in (0, 1):
    m.branch(N("GRU", [x, m.param("gru%d_w" % lbr, 0.5 * normal(1, 3 * Hn, In)),
                       m.param("gru%d_r" % lbr, 0.5 * normal(1, 3 * Hn, Hn)),
                       m.param("gru%d_b" % lbr, 0.5 * normal(1, 6 * Hn)), "",
                       m.param("gru%d_h" % lbr, normal(1, Bn, Hn))], ["gru%d_y" % lbr],
               hidden_size=Hn, direction="reverse", linear_before_reset=lbr))
xl = m.param("lstm_x", normal(Bn, Tn, In))
m.branch(N("LSTM", [xl, m.param("lstm_w", 0.5 * normal(2, 4 * Hn, In)),
                    m.param("lstm_r", 0.5 * normal(2, 4 * Hn, Hn)),
                    m.param("lstm_b", 0.5 * normal(2, 8 * Hn)), "", m.param("lstm_h", normal(Bn, 2, Hn)),
                    m.param("lstm_c", normal(Bn, 2, Hn))], ["lstm_y", "lstm_yh", "lstm_yc"],
           hidden_size=Hn, direction="bidirectional", layout=1))
m.branch("lstm_yh")
m.branch("lstm_yc")
m.save()
