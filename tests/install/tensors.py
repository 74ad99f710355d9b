#!/usr/bin/env python3
"""tests/install/tensors.py -- the install test's tensor files and its oracle,
in the standard library only (no numpy: this is the test's own reader, not
fadc's):

  tensors.py ones FILE.npy                 an f32 scalar 1 (vjp's v = 1)
  tensors.py safetensors FILE NAME ROWS COLS
                                           one f32 tensor NAME[ROWS, COLS],
                                           element i = 0.25 * sin(i + 1)
  tensors.py norms DIR                     for each DIR/grad.*.npy (f32 or
                                           f64, C order), "grad.<p>: norm X",
                                           then "gradient norm: X": sqrt of
                                           the sum of squares, in double
  tensors.py compare A B RTOL [normwise]   A and B hold such lines (A may
                                           hold others); every norm of B is
                                           in A, and |a - b| <= RTOL * |b|,
                                           or with normwise RTOL * B's
                                           gradient norm (the error of one
                                           parameter's gradient measured
                                           against the whole gradient, as
                                           compare-npy's normalized error
                                           measures an element against its
                                           tensor)
"""
import ast
import glob
import json
import math
import os
import struct
import sys


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack_from("<H", data, 8)
        start = 10
    else:
        (hlen,) = struct.unpack_from("<I", data, 8)
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        sys.exit(f"{path}: Fortran order")
    code = {"<f4": "f", "<f8": "d"}.get(header["descr"])
    if code is None:
        sys.exit(f"{path}: dtype {header['descr']} is not f32 or f64")
    n = math.prod(header["shape"])
    body = data[start + hlen:]
    if len(body) != n * struct.calcsize(code):
        sys.exit(f"{path}: {len(body)} bytes of data for shape {header['shape']}")
    return struct.unpack(f"<{n}{code}", body)


def write_npy(path, shape, values):
    header = repr({"descr": "<f4", "fortran_order": False, "shape": tuple(shape)})
    pad = 64 - (10 + len(header) + 1) % 64
    header = (header + " " * pad + "\n").encode("latin1")
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
        f.write(struct.pack(f"<{len(values)}f", *values))


def write_safetensors(path, name, shape, values):
    body = struct.pack(f"<{len(values)}f", *values)
    head = json.dumps({name: {"dtype": "F32", "shape": shape,
                              "data_offsets": [0, len(body)]}}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + body)


def norms(folder):
    files = sorted(glob.glob(os.path.join(folder, "grad.*.npy")))
    if not files:
        sys.exit(f"{folder}: no grad.*.npy")
    total = 0.0
    for p in files:
        s = sum(x * x for x in read_npy(p))
        total += s
        print(f"{os.path.basename(p)[:-4]}: norm {math.sqrt(s):.17g}")
    print(f"gradient norm: {math.sqrt(total):.17g}")


def parse(path):
    out = {}
    with open(path) as f:
        for line in f:
            key, sep, val = line.rstrip("\n").rpartition(": norm ")
            if not sep:
                key, sep, val = line.rstrip("\n").rpartition(": ")
                if key != "gradient norm":
                    continue
            out[key] = float(val)
    return out


def compare(a_path, b_path, rtol, normwise):
    a, b = parse(a_path), parse(b_path)
    if "gradient norm" not in b:
        sys.exit(f"{b_path}: no 'gradient norm' line")
    bad = 0
    for key, want in b.items():
        got = a.get(key)
        if got is None:
            print(f"{a_path}: no norm of {key}")
            bad = 1
            continue
        scale = abs(b["gradient norm"] if normwise else want)
        err = abs(got - want) / scale if scale else abs(got)
        ok = err <= rtol
        print(f"{key}: {got:.9g} against {want:.9g}: {'normwise' if normwise else 'relative'}"
              f" error {err:.2e} ({'within' if ok else 'BEYOND'} {rtol:g})")
        bad |= not ok
    sys.exit(bad)


def main(argv):
    if len(argv) == 3 and argv[1] == "ones":
        write_npy(argv[2], [], [1.0])
    elif len(argv) == 6 and argv[1] == "safetensors":
        rows, cols = int(argv[4]), int(argv[5])
        write_safetensors(argv[2], argv[3], [rows, cols],
                          [0.25 * math.sin(i + 1) for i in range(rows * cols)])
    elif len(argv) == 3 and argv[1] == "norms":
        norms(argv[2])
    elif len(argv) in (5, 6) and argv[1] == "compare" and argv[5:] in ([], ["normwise"]):
        compare(argv[2], argv[3], float(argv[4]), len(argv) == 6)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
