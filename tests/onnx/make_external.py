# tests/onnx/make_external.py OUTDIR -- models whose tensors are stored
# outside the .onnx file (data_location EXTERNAL), saved by onnx's own
# external-data helpers (Debian's python3-onnx 1.12), with the expected
# outputs computed here with NumPy in float64 by hand (the oracle), and the
# broken variants of the error checks: an absolute location, one with '..',
# a missing data file, a truncated one, a length that disagrees with the
# tensor's shape.
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import external_data_helper as ext
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(231)
x = rng.standard_normal((5, 4)).astype(np.float32)
W1 = rng.standard_normal((6, 4)).astype(np.float32)
b1 = rng.standard_normal((6,)).astype(np.float32)
W2 = rng.standard_normal((2, 3)).astype(np.float32)
np.save(os.path.join(out, "x.npy"), x)
# A Constant's tensor (the Reshape's shape, int64, known at import) is
# stored outside too (convert_attribute): the import needs its values.
shape = np.array([10, 3], dtype=np.int64)
nodes = [
    h.make_node("Gemm", ["x", "w1", "b1"], ["/g"], name="/gemm", transB=1),
    h.make_node("Tanh", ["/g"], ["/t"], name="/tanh"),
    h.make_node("Constant", [], ["/shape"], name="/shape", value=nh.from_array(shape)),
    h.make_node("Reshape", ["/t", "/shape"], ["/r"], name="/reshape"),
    h.make_node("Slice", ["/r", "st", "en"], ["/s"], name="/slice"),
    h.make_node("MatMul", ["/s", "w2"], ["y"], name="/mm"),
]
inits = [nh.from_array(W1, "w1"), nh.from_array(b1, "b1"), nh.from_array(W2, "w2"),
         nh.from_array(np.array([0, 1], dtype=np.int64), "st"),
         nh.from_array(np.array([10, 3], dtype=np.int64), "en")]
g = h.make_graph(nodes, "ext", [h.make_tensor_value_info("x", T.FLOAT, [5, 4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [10, 3])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
onnx.checker.check_model(m)
# Every tensor into one file in a sub-folder, at the offsets onnx picks.
os.makedirs(os.path.join(out, "ext", "data"), exist_ok=True)
ext.convert_model_to_external_data(m, all_tensors_to_one_file=True, location="data/weights.bin",
                                   size_threshold=0, convert_attribute=True)
onnx.save_model(m, os.path.join(out, "ext", "model.onnx"))
assert os.path.exists(os.path.join(out, "ext", "data", "weights.bin"))
t = np.tanh(x.astype(np.float64) @ W1.T.astype(np.float64) + b1)
want = t.reshape(10, 3)[:, 1:3] @ W2.astype(np.float64)
os.makedirs(os.path.join(out, "want"), exist_ok=True)
np.save(os.path.join(out, "want", "y.npy"), want.astype(np.float32))


def variant(name, edit):
    mm = onnx.load(os.path.join(out, "ext", "model.onnx"), load_external_data=False)
    for ti in mm.graph.initializer:
        if ti.name == "w2":
            edit(ti)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    shutil.copytree(os.path.join(out, "ext", "data"), os.path.join(d, "data"), dirs_exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(mm.SerializeToString())


def set_key(key, value):
    def edit(ti):
        for e in ti.external_data:
            if e.key == key:
                e.value = value
                return
        e = ti.external_data.add()
        e.key, e.value = key, value
    return edit


variant("absolute", set_key("location", os.path.join(out, "ext", "data", "weights.bin")))
variant("dotdot", set_key("location", "data/../../ext/data/weights.bin"))
variant("missing", set_key("location", "data/nothing.bin"))
variant("length", set_key("length", "20"))
variant("truncated", lambda ti: None)
# The file cut just before w2's last element.
for ti in onnx.load(os.path.join(out, "ext", "model.onnx"), load_external_data=False).graph.initializer:
    if ti.name == "w2":
        off = int([e.value for e in ti.external_data if e.key == "offset"][0])
        with open(os.path.join(out, "truncated", "data", "weights.bin"), "r+b") as f:
            f.truncate(off + 20)
