#!/usr/bin/python3
"""Seed corpora for the fuzz targets (tests/fuzz, docs/FUZZING.md), made from the conformance
data and small files written here. Nothing of it is checked in: run it into a build folder.

    tests/fuzz/make_seeds.py OUT_DIR [--max N] [--no-torch] [--source DIR] [--shared DIR]

writes OUT_DIR/<target>/ for each target, one file per seed, named by its content's hash
(so that duplicates fold):
  fuzz_onnx      model.onnx files of Debian's libonnx-testdata, ../shared/onnx-tests, the
                 project's tests/ and models/ (each under 64 KiB)
  fuzz_e2e       the same models under 16 KiB, and the .pt archives under 64 KiB
  fuzz_tensor    input_*.pb / output_*.pb of the same cases (under 16 KiB), .npy files of
                 every dtype and layout the reader knows (v1/v2/v3 headers, big-endian,
                 Fortran order, 0-d, empty), .npz archives (numpy.savez and savez_compressed)
  fuzz_zip       the .pt archives, small zips (stored, deflated, zip64 extras) and raw DEFLATE
                 streams after a 2-byte output size / 16 (the target's format)
  fuzz_pickle    every .pkl record of the .pt archives, and protocol-2 pickles of plain values
  fuzz_ts_parse  every code/ .py record of the .pt archives
The .pt archives: the torch 2.11 fixtures of ../shared/torchscript, and small models traced
and scripted here with Debian's torch 1.13 (skipped with --no-torch, or when torch is not
installed). --max N keeps at most N seeds per target (an even sample of the sorted list), for
short runs such as CI's.
"""
import argparse
import glob
import hashlib
import io
import os
import pickle
import struct
import sys
import tempfile
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESTDATA = "/usr/share/libonnx-testdata/data"


def small_files(patterns, limit):
    out = []
    for pat in patterns:
        for p in glob.glob(pat, recursive=True):
            try:
                if os.path.isfile(p) and os.path.getsize(p) < limit:
                    out.append(p)
            except OSError:
                pass
    return sorted(set(out))


def model_dirs(source, shared):
    roots = [TESTDATA, os.path.join(shared, "onnx-tests")]
    dirs = []
    for r in roots:
        if os.path.isdir(r):
            dirs.append(r)
    dirs += [os.path.join(source, "tests"), os.path.join(source, "models")]
    return dirs


def torch_archives(work):
    """Small traced and scripted models saved by this machine's torch (1.13 on Debian 12)."""
    try:
        import torch
    except Exception:
        return []
    import warnings

    warnings.filterwarnings("ignore")  # the tracer's notes on the Python `if` (on purpose)
    torch.manual_seed(0)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 3)
            self.fc2 = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))).softmax(-1)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(2)
            self.pool = torch.nn.MaxPool2d(2)

        def forward(self, x):
            y = self.pool(torch.relu(self.bn(self.conv(x))))
            return y.flatten(1).sum(dim=1, keepdim=True)

    class Control(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 3

        def forward(self, x):
            y = x
            for i in range(self.k):
                y = y * 2.0 + float(i)
            if bool(x.sum() > 0):
                y = y - 1.0
            else:
                y = y + 1.0
            return torch.cat([y, x], dim=0)[: x.shape[0]]

    class RNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 2, batch_first=True)

        def forward(self, x):
            out, (h, c) = self.lstm(x)
            return out + h.transpose(0, 1)

    made = []
    cases = [
        ("mlp", MLP(), torch.randn(2, 4)),
        ("cnn", CNN().eval(), torch.randn(1, 1, 4, 4)),
        ("control", Control(), torch.randn(2, 3)),
        ("rnn", RNN(), torch.randn(1, 3, 3)),
    ]
    for name, mod, x in cases:
        for how in ("traced", "scripted"):
            try:
                m = torch.jit.trace(mod, x) if how == "traced" else torch.jit.script(mod)
                path = os.path.join(work, "%s_%s.pt" % (name, how))
                torch.jit.save(m, path)
                made.append(path)
            except Exception as e:  # a model torch cannot script is only a missing seed
                print("make_seeds: %s %s: %s" % (name, how, e), file=sys.stderr)
    return made


def map_seeds():
    """MapProtos (int64 and string keys) and a SequenceProto of maps, as ZipMap's expected
    outputs are stored (the backend data has none)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from case_dir import seq_of_maps
    seqs = [seq_of_maps("z", [3, 1], [[0.25, 0.75], [1.0, 0.0]]),
            seq_of_maps("z", ["a", "b", "c"], [[0.5, 0.25, 0.25]])]
    return [s.SerializeToString() for s in seqs] + [s.map_values[0].SerializeToString()
                                                     for s in seqs]


def npy_seeds():
    import numpy as np

    out = []

    def npy(a, version=None):
        b = io.BytesIO()
        if version is None:
            np.save(b, a, allow_pickle=False)
        else:
            np.lib.format.write_array(b, a, version=version, allow_pickle=False)
        out.append(b.getvalue())

    rng = np.random.default_rng(0)
    base = rng.standard_normal((2, 3))
    for dt in ["<f2", "<f4", "<f8", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8",
               "|b1", "<c8", "<c16", ">f4", ">i8", ">c16"]:
        npy(base.astype(dt) if dt[1] != "b" else base > 0)
    npy(np.asfortranarray(rng.standard_normal((3, 4, 2)).astype(np.float32)))
    npy(np.float32(1.5).reshape(()))
    npy(np.zeros((0, 3), np.int64))
    npy(np.arange(6, dtype=np.int32).reshape(1, 2, 3, 1), version=(2, 0))
    npy(np.arange(4, dtype=np.float64), version=(3, 0))
    npy(np.ones((1,) * 8, np.uint8))
    return out


def npz_seeds(npys):
    import numpy as np

    out = []
    for compressed in (False, True):
        b = io.BytesIO()
        save = np.savez_compressed if compressed else np.savez
        save(b, x=np.arange(6, dtype=np.float32).reshape(2, 3), y=np.array([1, 2], np.int64),
             **{"a/b": np.ones((2, 2), np.bool_)})
        out.append(b.getvalue())
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.npy", npys[1])
        z.writestr("note.txt", b"not an array")
        with z.open("forced64.npy", "w", force_zip64=True) as f:
            f.write(npys[0])
    out.append(b.getvalue())
    return out


def zip_seeds():
    out = []
    payload = b"def forward(self, x):\n    return x\n" * 4
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w", method) as z:
            z.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
            z.writestr("archive/code/__torch__.py", payload)
            z.writestr("archive/version", b"3\n")
            with z.open("archive/data/0", "w", force_zip64=True) as f:
                f.write(struct.pack("<4f", 1, 2, 3, 4))
        out.append(b.getvalue())
    raw = []
    for level in (0, 1, 6, 9):
        for data in (b"", b"a", payload, bytes(range(256)) * 3, b"\0" * 5000):
            c = zlib.compressobj(level, zlib.DEFLATED, -15)
            stream = c.compress(data) + c.flush()
            n = (len(data) + 15) // 16
            if n * 16 != len(data):  # the target inflates exactly n * 16 bytes
                data = data + b"\0" * (n * 16 - len(data))
                c = zlib.compressobj(level, zlib.DEFLATED, -15)
                stream = c.compress(data) + c.flush()
            raw.append(struct.pack("<H", n) + stream)
    # a fixed-Huffman block (zlib picks it for short data) and a stored one
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_FIXED)
    raw.append(struct.pack("<H", 2) + c.compress(b"abcabcabcabcabca" * 2) + c.flush())
    return out, raw


def pickle_seeds():
    vals = [None, True, 1, -1, 2 ** 40, 1.5, "s", "ü", (), (1,), (1, 2), (1, 2, 3, 4),
            [1, [2, [3]]], {"a": 1, "b": [1.0, 2.0]}, ("x", {"k": (1, None)})]
    shared = [1, 2]
    vals.append([shared, shared])
    return [pickle.dumps(v, protocol=2) for v in vals]


def archive_records(archives):
    pkls, code = [], []
    for a in archives:
        try:
            with zipfile.ZipFile(a) as z:
                for n in z.namelist():
                    if n.endswith(".pkl"):
                        pkls.append(z.read(n))
                    elif "/code/" in n and n.endswith(".py"):
                        code.append(z.read(n))
        except (zipfile.BadZipFile, OSError) as e:
            print("make_seeds: %s: %s" % (a, e), file=sys.stderr)
    return pkls, code


def write(out, target, groups, max_n):
    """Each group (a list of seeds from one source) sampled evenly, in proportion to its
    size but keeping up to 20 of each, when max_n asks for fewer seeds than there are."""
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    seen = set()
    groups = [sorted({hashlib.sha1(b).hexdigest(): b for b in g}.items()) for g in groups]
    total = sum(len(g) for g in groups)
    n = 0
    for g in groups:
        if max_n and total > max_n:
            want = max(min(len(g), 20), len(g) * max_n // total)
            g = [g[i * len(g) // want] for i in range(want)] if want < len(g) else g
        for k, b in g:
            if k in seen:
                continue
            seen.add(k)
            with open(os.path.join(d, k), "wb") as f:
                f.write(b)
            n += 1
    print("make_seeds: %-14s %5d seeds" % (target, n))


def read_all(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--max", type=int, default=0, help="at most N seeds per target")
    ap.add_argument("--no-torch", action="store_true", help="no archives made with torch")
    ap.add_argument("--source", default=ROOT)
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    args = ap.parse_args()

    dirs = model_dirs(args.source, args.shared)
    onnx64 = small_files([os.path.join(d, "**", "*.onnx") for d in dirs], 64 << 10)
    onnx16 = [p for p in onnx64 if os.path.getsize(p) < 16 << 10]
    pbs = small_files([os.path.join(d, "**", "test_data_set_*", "*.pb") for d in dirs], 16 << 10)
    pbs += small_files([os.path.join(args.source, "tests", "**", "*.pb")], 16 << 10)
    maps = map_seeds()

    with tempfile.TemporaryDirectory() as work:
        archives = small_files([os.path.join(args.shared, "torchscript", "**", "*.pt")], 1 << 20)
        if not args.no_torch:
            archives += torch_archives(work)
        pkls, code = archive_records(archives)
        pt64 = [p for p in archives if os.path.getsize(p) < 64 << 10]

        npys = npy_seeds()
        npys += read_all(small_files([os.path.join(args.source, d, "**", "*.npy")
                                      for d in ("tests", "models")], 16 << 10))
        zips, raw = zip_seeds()
        write(args.out, "fuzz_onnx", [read_all(onnx64)], args.max)
        write(args.out, "fuzz_e2e", [read_all(onnx16), read_all(pt64)], args.max)
        write(args.out, "fuzz_tensor", [read_all(pbs), maps, npys, npz_seeds(npys)], args.max)
        write(args.out, "fuzz_zip", [read_all(pt64), zips, raw], args.max)
        write(args.out, "fuzz_pickle", [pkls, pickle_seeds()], args.max)
        write(args.out, "fuzz_ts_parse", [code], args.max)


if __name__ == "__main__":
    main()
