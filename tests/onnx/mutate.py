# tests/onnx/mutate.py FADC MODEL.onnx N -- N corrupted copies of MODEL
# (flipped bits, overwritten and cut bytes, random bytes; seeded, so a
# failure repeats) each imported with `fadc --emit ir`: every one must end
# with exit status 0 or 1 (a clean error), never a crash or a hang.  A
# stand-in for fuzzing this frontend until the libFuzzer harness covers it.
import random
import subprocess
import sys
import tempfile

fadc, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(model, "rb").read()
rng = random.Random(23)
bad = 0
with tempfile.TemporaryDirectory() as d:
    path = d + "/m.onnx"
    for i in range(n):
        b = bytearray(data)
        kind = i % 4
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 2:
            b = b[: rng.randrange(len(b))]
        else:
            b = bytearray(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        open(path, "wb").write(bytes(b))
        try:
            r = subprocess.run([fadc, path, "--emit", "ir"], capture_output=True, timeout=20)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc not in (0, 1):
            bad += 1
            keep = "%s.bad%d" % (model, i)
            open(keep, "wb").write(bytes(b))
            print("mutant %d (kind %d): exit %s; kept as %s" % (i, kind, rc, keep))
sys.exit(1 if bad else 0)
