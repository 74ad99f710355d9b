# tests/onnx/op_fuzz.py FADC DIR N SEED -- N models per supported op, each
# one node with random inputs (of several ranks and dtypes, known and not,
# missing, too many), output counts and attributes (out of range, wrong
# lengths, other ops'), imported with `fadc --emit ir`: every one must end
# with exit status 0 or 1, never a crash.  Seeded, so a failure repeats; a
# crashing model is kept in DIR.  (It found missing-input and rank-0 cases
# of the folding that the corrupt-file test did not.)
import os
import random
import subprocess
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ops = [  # the supported ops (frontend/onnx.c, supported[])
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Tanh", "Sigmoid", "Neg",
    "Exp", "Log", "Sqrt", "Erf", "Abs", "Reciprocal", "Floor", "Sin", "Cos", "Softplus",
    "Sign", "LeakyRelu", "Gelu", "Softmax", "LogSoftmax", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Max", "Min", "Where", "Clip",
    "Cast", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split",
    "Slice", "Gather", "Expand", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
    "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "Identity", "Dropout", "Constant", "Shape", "Size", "ConstantOfShape", "Range", "Conv",
    "ConvTranspose", "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool",
    "GlobalAveragePool", "GlobalMaxPool", "Resize", "Einsum", "LSTM", "GRU", "RNN",
]
fadc, d, per_op, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
inits = [nh.from_array(np.array([1, -1], dtype=np.int64), "i2"), nh.from_array(np.array([], dtype=np.int64), "i0"),
         nh.from_array(np.array(3, dtype=np.int64), "is"), nh.from_array(np.array([[0, 5], [2, 1]], dtype=np.int64), "i22"),
         nh.from_array(np.array([0.5, 2], dtype=np.float32), "f2")]
inputs = [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5]), h.make_tensor_value_info("y", T.FLOAT, [3]),
          h.make_tensor_value_info("s", T.FLOAT, []), h.make_tensor_value_info("b", T.BOOL, [2, 1]),
          h.make_tensor_value_info("e", T.FLOAT, [0, 2])]
names = ["x", "y", "s", "b", "e", "i2", "i0", "is", "i22", "f2", ""]
attrs_pool = [{}, {"axis": 7}, {"axis": -1}, {"perm": [0, 0]}, {"kernel_shape": [2, 2]}, {"kernel_shape": [9, 9], "pads": [1, 1, 1, 1]},
              {"pads": [-1, 0, 0, 0], "kernel_shape": [1, 1]}, {"strides": [0, 1], "kernel_shape": [1, 1]}, {"to": 1}, {"to": 3},
              {"equation": "ij,jk"}, {"equation": "..."}, {"equation": "aa->a"}, {"hidden_size": 3}, {"direction": "bidirectional", "hidden_size": 2},
              {"split": [1, 1]}, {"num_outputs": 3}, {"mode": "linear"}, {"auto_pad": "SAME_UPPER", "kernel_shape": [3, 3]}, {"ceil_mode": 1, "kernel_shape": [3, 3], "strides": [2, 2]},
              {"group": 3}, {"output_shape": [1, 1]}, {"value": nh.from_array(np.array([1.5], dtype=np.float32))}, {"training_mode": 1}]
bad = 0
n = 0
for op in ops:
    for trial in range(per_op):
        k = rng.randint(0, 5)
        ins = [rng.choice(names) for _ in range(k)]
        nout = rng.choice([1, 1, 1, 2, 3])
        outs = ["o%d" % i for i in range(nout)]
        if rng.random() < 0.1 and nout > 1: outs[0] = ""
        at = rng.choice(attrs_pool)
        try:
            node = h.make_node(op, ins, outs, name="n", **at)
        except Exception:
            continue
        g = h.make_graph([node], "g", inputs, [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs if o], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
        p = os.path.join(d, "m.onnx")
        open(p, "wb").write(m.SerializeToString())
        r = subprocess.run([fadc, p, "--emit", "ir"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        n += 1
        if r.returncode not in (0, 1):
            bad += 1
            print("CRASH", r.returncode, op, ins, outs, at, r.stderr.decode()[-300:])
            open(os.path.join(d, "crash%d.onnx" % bad), "wb").write(m.SerializeToString())
print(n, "models,", bad, "crashes")
sys.exit(1 if bad else 0)
