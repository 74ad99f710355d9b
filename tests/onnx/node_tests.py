# tests/onnx/node_tests.py FADC WHEEL LEG [--write-expected FILE] [-k SUBSTR]
#
# ONNX's backend node tests, read straight from the onnx==1.22.0 wheel (a
# zip; nothing is installed): each onnx/backend/test/data/node/TEST/ is a
# model.onnx with test_data_set_*/input_N.pb and output_N.pb.  Every test is
# imported by fadc and its forward run, LEG "interp" through the float64
# interpreter (`fadc run model.onnx`), LEG "compiled" through the CPU
# backend (`fadc model.onnx -o m.so`, `fadc run m.so`), and its outputs
# compared with the stored ones at ONNX's default tolerances:
# |got - want| <= 1e-7 + 1e-3 |want| elementwise (numpy.testing's
# assert_allclose, as onnx's backend test runner), shapes equal.
#
# Outcomes: pass; unsupported (fadc's "unsupported node" error, exit 1);
# fail (an error or wrong values); crash (any other exit: never allowed).
# tests/onnx/expected-failures.txt lists the tests of supported ops that
# fail, each with its reason ("NAME  reason", or "NAME  compiled: reason"
# for the compiled leg only).  The runner fails on a crash, on a failure
# not listed, on a listed test that passes (remove it from the list) and on
# a listed test that is unsupported (it is no failure of a supported op).
#
# fadc's shapes are static, so an input that an op needs at import (a
# Reshape's shape, Slice's bounds, Range's limits, reduction axes: the
# table COMPILE_TIME) is made an initializer holding the test's data, as an
# exporter's graph has it; the test is then run as stored.  Input and
# expected tensors are decoded with Debian's python3-onnx (1.12), fadc
# reads the rewritten model itself.
import collections
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import numpy_helper

fadc, wheel, leg = sys.argv[1], sys.argv[2], sys.argv[3]
assert leg in ("interp", "compiled")
args = sys.argv[4:]
write_expected = args[args.index("--write-expected") + 1] if "--write-expected" in args else None
only = args[args.index("-k") + 1] if "-k" in args else None
here = os.path.dirname(os.path.abspath(__file__))

COMPILE_TIME = {
    "Reshape": [1], "Expand": [1], "Slice": [1, 2, 3, 4], "ConstantOfShape": [0],
    "Range": [0, 1, 2], "Squeeze": [1], "Unsqueeze": [1], "Split": [1], "Clip": [1, 2],
    "Dropout": [1, 2], "Resize": [1, 2, 3], "Tile": [1], "Pad": [1, 2, 3], "TopK": [1],
    "OneHot": [1], "ReduceSum": [1], "ReduceMean": [1], "ReduceMax": [1], "ReduceMin": [1],
    "ReduceSumSquare": [1], "ReduceL1": [1], "ReduceL2": [1], "ReduceLogSum": [1],
    "ReduceLogSumExp": [1], "ReduceProd": [1],
}


def npy_name(name):
    # tools/fadc/cli.c, npy_file_name
    return "".join("%%%02X" % ord(c) if c in "/\\%" or (i == 0 and c == ".") else c
                   for i, c in enumerate(name)) + ".npy"


def load_tensor(data):
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


# The runner's workers share the cores: one LLVM thread per compile.
ENV = dict(os.environ, FADC_JOBS="1")


def run(cmd, timeout=300):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           env=ENV)
        return p.returncode, p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return -999, "timed out after %d s" % timeout


def refused(rc, err):
    """fadc's refusals that are no failure: an unsupported op, an opset
    out of fadc's range (13 to the newest)."""
    if rc != 1:
        return None
    if "unsupported node" in err:
        return "unsupported"
    if "out of the supported range" in err:
        return "opset"
    return None


def first_error(err):
    for line in err.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return err.strip().splitlines()[0] if err.strip() else "(no message)"


def one_test(name, files):
    """The outcome of one test: (kind, message, op types)."""
    model = onnx.ModelProto()
    model.ParseFromString(files["model.onnx"])
    ops = sorted({n.op_type for n in model.graph.node})
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    sets = sorted({k.split("/")[0] for k in files if k.startswith("test_data_set_")})
    if not sets:
        return "fail", "no test data", ops
    data = []
    try:
        decode(files, sets, inputs, model, data)
    except (KeyError, ValueError, TypeError) as e:
        # A dtype that Debian's onnx 1.12 does not decode (float8, int4,
        # ...): what fadc says of the model decides.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.onnx")
            with open(path, "wb") as f:
                f.write(files["model.onnx"])
            rc, err = run([fadc, path, "--emit", "ir"])
        if refused(rc, err):
            return refused(rc, err), first_error(err), ops
        if rc not in (0, 1):
            return "crash", "exit %d: %s" % (rc, first_error(err)), ops
        return "fail", "test data onnx 1.12 cannot decode (%s); fadc: %s" % (
            e.__class__.__name__, first_error(err) if rc else "imports"), ops
    return run_data(name, files, model, ops, inputs, data)


def decode(files, sets, inputs, model, data):
    for s in sets:
        ins = [load_tensor(files["%s/input_%d.pb" % (s, k)]) for k in range(len(inputs))
               if "%s/input_%d.pb" % (s, k) in files]
        outs = [load_tensor(files["%s/output_%d.pb" % (s, k)]) for k in range(len(model.graph.output))
                if "%s/output_%d.pb" % (s, k) in files]
        data.append((ins, outs))


def run_data(name, files, model, ops, inputs, data):
    # The inputs needed at import become initializers (one data set, or the
    # same data in every set).
    fixed = set()
    for node in model.graph.node:
        for k in COMPILE_TIME.get(node.op_type, []):
            if k < len(node.input) and node.input[k] in inputs:
                fixed.add(node.input[k])
    native = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.INT64,
              onnx.TensorProto.BOOL}
    for nm in fixed:
        k = inputs.index(nm)
        vi = [i for i in model.graph.input if i.name == nm][0]
        if k >= len(data[0][0]) or vi.type.tensor_type.elem_type not in native:
            continue  # fadc says what it lacks
        v = data[0][0][k]
        if any(not np.array_equal(d[0][k], v) for d in data):
            return "fail", "input %s is needed at import and differs between data sets" % nm, ops
        model.graph.initializer.append(numpy_helper.from_array(v, nm))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        target = path
        if leg == "compiled":
            rc, err = run([fadc, path, "-o", os.path.join(d, "m.so")])
            if refused(rc, err):
                return refused(rc, err), first_error(err), ops
            if rc != 0:
                return ("fail" if rc == 1 else "crash"), "compile: exit %d: %s" % (rc, first_error(err)), ops
            target = os.path.join(d, "m.so")
        for si, (ins, outs) in enumerate(data):
            cmd = [fadc, "run", target, "--params", path, "--out", os.path.join(d, "out%d" % si)]
            for k, nm in enumerate(inputs):
                if nm in fixed or k >= len(ins):
                    continue
                p = os.path.join(d, "in%d_%d.npy" % (si, k))
                np.save(p, ins[k])
                cmd += ["--params", "%s=%s" % (nm, p)]
            rc, err = run(cmd)
            if refused(rc, err):
                return refused(rc, err), first_error(err), ops
            if rc != 0:
                return ("fail" if rc == 1 else "crash"), "exit %d: %s" % (rc, first_error(err)), ops
            for k, want in enumerate(outs):
                p = os.path.join(d, "out%d" % si, npy_name(model.graph.output[k].name))
                if not os.path.exists(p):
                    return "fail", "no output %s" % model.graph.output[k].name, ops
                got = np.load(p)
                if got.shape != want.shape:
                    return "fail", "output %d: shape %s, expected %s" % (k, got.shape, want.shape), ops
                if want.dtype == object:
                    return "fail", "output %d: a non-numeric expectation" % k, ops
                g, w = got.astype(np.float64), want.astype(np.float64)
                with np.errstate(invalid="ignore"):
                    bad = ~(np.abs(g - w) <= 1e-7 + 1e-3 * np.abs(w))
                bad &= ~((np.isnan(g) & np.isnan(w)) | ((g == w) & np.isinf(w)))
                if bad.any():
                    i = np.unravel_index(np.argmax(bad), bad.shape)
                    return "fail", "output %d: %d of %d elements off (at %s: %r, expected %r)" % (
                        k, bad.sum(), bad.size, tuple(int(x) for x in i), g[i], w[i]), ops
    return "pass", "", ops


def read_expected():
    exp = {}
    path = os.path.join(here, "expected-failures.txt")
    for line in open(path):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        reason = reason.strip()
        legs = ("interp", "compiled")
        m = re.match(r"(interp|compiled): (.*)", reason)
        if m:
            legs, reason = (m.group(1),), m.group(2)
        if leg in legs:
            exp[name] = reason
    return exp


def main():
    z = zipfile.ZipFile(wheel)
    prefix = "onnx/backend/test/data/node/"
    tests = collections.defaultdict(dict)
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            t, _, rest = n[len(prefix):].partition("/")
            tests[t][rest] = None
    names = sorted(t for t in tests if not only or only in t)
    for t in names:
        for f in tests[t]:
            tests[t][f] = z.read(prefix + t + "/" + f)
    expected = read_expected()
    workers = int(os.environ.get("FADC_NODE_JOBS", "2"))
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        results = dict(zip(names, ex.map(lambda t: one_test(t, tests[t]), names)))
    problems = []
    per_op = collections.defaultdict(collections.Counter)
    for t in names:
        kind, msg, ops = results[t]
        key = ops[0] if len(ops) == 1 else ("(%d ops)" % len(ops) if ops else "(none)")
        if "_expanded" in t:
            key = "expanded"
        listed = t in expected
        per_op[key][kind if not (kind == "fail" and listed) else "listed"] += 1
        if kind == "crash":
            problems.append("%s: crashed: %s" % (t, msg))
        elif kind == "fail" and not listed and not write_expected:
            problems.append("%s: failed, and is not in expected-failures.txt: %s" % (t, msg))
        elif kind == "pass" and listed:
            problems.append("%s: passes now; remove it from expected-failures.txt (%s)" % (t, expected[t]))
        elif kind in ("unsupported", "opset") and listed:
            problems.append("%s: listed, but refused (%s): %s" % (t, kind, msg))
    if write_expected:
        with open(write_expected, "w") as f:
            for t in names:
                kind, msg, ops = results[t]
                if kind == "fail":
                    f.write("%s  %s\n" % (t, expected.get(t, msg)))
    counts = collections.Counter(r[0] for r in results.values())
    listed = sum(1 for t in names if results[t][0] == "fail" and t in expected)
    print("onnx node tests (%s): %d tests: %d passed, %d failed as listed, %d unsupported ops, "
          "%d opsets out of range, %d other failures, %d crashes" % (
              leg, len(names), counts["pass"], listed, counts["unsupported"], counts["opset"],
              counts["fail"] - listed, counts["crash"]))
    print("per op (single-op tests; 'expanded' are onnx's function expansions):")
    for op in sorted(per_op):
        c = per_op[op]
        if c["pass"] or c["listed"] or c["fail"] or c["crash"]:
            print("  %-24s pass %3d  listed %3d  fail %3d  crash %d  opset %d  unsupported %d" % (
                op, c["pass"], c["listed"], c["fail"], c["crash"], c["opset"], c["unsupported"]))
    for p in problems:
        print("PROBLEM: " + p)
    return 1 if problems else 0


sys.exit(main())
