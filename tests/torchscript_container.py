#!/usr/bin/env python3
"""The zip and pickle layers of TorchScript archives against Python's own readers.

For each archive (the torch 2.11 files kept beside the checkout, and archives written here
by Debian's torch 1.13 and by Python's zipfile), `test_torchscript_container --dump` lists
what importer/torchscript/zip.c and pickle.c read, and this script checks it against:
- zipfile: the archive folder, every entry's name, method, sizes, CRC and data offset, and
  every entry's bytes (DEFLATE records inflated byte for byte as zipfile reads them);
- pickle with a restricted Unpickler that records the globals a pickle names and never
  imports anything: the value tree of every *.pkl and *.debug_pkl record, written in the
  same text form as the C program writes it (shared values marked, so references must be
  references on both sides);
- torch.jit.load / torch.load (1.13 archives): module class names, scalar attributes, and
  every parameter's and buffer's dtype, shape, strides, storage offset, requires_grad and
  storage bytes.
Usage: torchscript_container.py --tool BUILD/tests/test_torchscript_container
           [--fixtures DIR] [--work DIR]
"""
import argparse
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))

# SPEC-torchscript.md §2.4: Storage class -> dtype (as onnxexec names them)
STORAGE_DTYPES = {
    "ByteStorage": "uint8", "CharStorage": "int8", "ShortStorage": "int16",
    "IntStorage": "int32", "LongStorage": "int64", "HalfStorage": "float16",
    "FloatStorage": "float", "DoubleStorage": "double", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "BoolStorage": "bool", "BFloat16Storage": "bfloat16",
}

failures = []
n_checks = 0


def check(cond, msg):
    global n_checks
    n_checks += 1
    if not cond:
        failures.append(msg)
        print("FAIL", msg)


# ---- the restricted unpickler ----------------------------------------------------------------

class StorageType:
    def __init__(self, name):
        self.dtype = STORAGE_DTYPES[name]


class Storage:
    def __init__(self, key, dtype, numel, location):
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


class Tensor:
    def __init__(self, storage, offset, size, stride, requires_grad, *rest):
        self.storage, self.offset = storage, offset
        self.size, self.stride, self.requires_grad = tuple(size), tuple(stride), requires_grad


class Device:
    def __init__(self, s, index=None):
        self.s = s if index is None else "%s:%d" % (s, index)


class Obj:
    """A __torch__ object: the class name and the BUILD state."""
    cls = None

    def __setstate__(self, state):
        self.state = state


class ODict(dict):
    """collections.OrderedDict as the machine makes it: a dict with an optional state."""

    def __setstate__(self, state):
        self.state = state


class Refused(Exception):
    pass


class Trace(pickle.Unpickler):
    """Runs a pickle with stand-ins for the TorchScript globals; records type tags. Any
    other global raises Refused: nothing is imported or called."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.tags = {}  # id -> type tag
        self.keep = []  # keeps tagged objects alive, so ids stay unique
        self.globals = []

    def find_class(self, module, name):
        self.globals.append(module + "." + name)
        if module == "__torch__" or module.startswith("__torch__."):
            if module.startswith("__torch__.torch.classes"):
                raise Refused(module + "." + name)
            return type(name, (Obj,), {"cls": module + "." + name})
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return Tensor
        if module == "torch" and name in STORAGE_DTYPES:
            return StorageType(name)
        if (module, name) == ("collections", "OrderedDict"):
            return ODict
        if module == "torch.jit._pickle" and name in (
                "build_intlist", "build_doublelist", "build_boollist", "build_tensorlist"):
            return lambda items: items
        if (module, name) == ("torch.jit._pickle", "restore_type_tag"):
            return self.restore_type_tag
        if (module, name) == ("torch", "device"):
            return Device
        raise Refused(module + "." + name)

    def restore_type_tag(self, value, tag):
        self.tags[id(value)] = tag
        self.keep.append(value)
        return value

    def persistent_load(self, pid):
        kind, st, key, location, numel = pid
        assert kind == "storage"
        return Storage(key, st.dtype, numel, location)


def esc(b):
    return '"' + "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02x" % c
                         for c in b) + '"'


def text(v, tags):
    """The value in the text form of tests/test_torchscript_container.c (put_pv)."""
    seen = {}
    out = []

    def ident(x):
        if id(x) in seen:
            out.append("@%d" % seen[id(x)])
            return False
        seen[id(x)] = len(seen)
        out.append("#%d" % seen[id(x)])
        return True

    def storage(s):
        return "%s,%s,%d,%s" % (s.key, s.dtype, s.numel, s.location)

    def put(x):
        if x is None:
            out.append("N")
        elif x is True or x is False:
            out.append("T" if x else "F")
        elif isinstance(x, int):
            out.append("I%d" % x)
        elif isinstance(x, float):
            out.append("F%.17g" % x)
        elif isinstance(x, str):
            out.append("S" + esc(x.encode("utf-8", "surrogatepass")))
        elif isinstance(x, tuple):
            out.append("(")
            for i in x:
                put(i)
                out.append(",")
            out.append(")")
        elif isinstance(x, (list, dict)):
            out.append("L" if isinstance(x, list) else "D")
            if not ident(x):
                return
            if id(x) in tags:
                out.append("t" + esc(tags[id(x)].encode()))
            if isinstance(x, list):
                out.append("[")
                for i in x:
                    put(i)
                    out.append(",")
                out.append("]")
            else:
                out.append("{")
                for k, i in x.items():
                    put(k)
                    out.append(":")
                    put(i)
                    out.append(",")
                out.append("}")
            if getattr(x, "state", None) is not None:
                out.append("!")
                put(x.state)
        elif isinstance(x, Obj):
            out.append("O")
            if not ident(x):
                return
            out.append("<%s>!" % x.cls)
            if hasattr(x, "state"):
                put(x.state)
            else:
                out.append("-")
        elif isinstance(x, Tensor):
            out.append("A")
            if not ident(x):
                return
            out.append("<%s,%d,[%s],[%s],%d>" % (
                storage(x.storage), x.offset, "".join("%d," % i for i in x.size),
                "".join("%d," % i for i in x.stride), x.requires_grad))
        elif isinstance(x, Storage):
            out.append("P<%s>" % storage(x))
        elif isinstance(x, Device):
            out.append("V" + x.s)
        else:
            raise TypeError("unexpected %r" % type(x))

    put(v)
    return "".join(out)


def trace(data):
    t = Trace(data)
    v = t.load()
    return v, text(v, t.tags)


# ---- one archive ------------------------------------------------------------------------------

def dump(tool, path, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = subprocess.run([tool, "--dump", path, out], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "%s: --dump exited %d: %s" % (path, r.returncode, r.stderr[-2000:]))
    res = {"entries": [], "pickles": {}, "errors": []}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "prefix":
            res["prefix"] = f[1]
        elif f[0] == "entry":
            res["entries"].append((int(f[1]), f[2], int(f[3]), int(f[4]), int(f[5]),
                                   int(f[6], 16), int(f[7])))
        elif f[0] == "pickle":
            res["pickles"][f[1]] = f[2] if f[2] != "error" else ("error", f[3], f[4])
        else:
            res["errors"].append(line)
    return res


def check_archive(tool, path, work, expect_prefix=None):
    """zip.c and pickle.c against zipfile and the traced pickles; returns the traces and
    the bytes of every record."""
    name = os.path.basename(path)
    res = dump(tool, path, os.path.join(work, "dump", name))
    check(not res["errors"], "%s: %s" % (name, res["errors"][:3]))
    zf = zipfile.ZipFile(path)
    infos = zf.infolist()
    raw = open(path, "rb").read()
    prefix = infos[0].filename.split("/")[0] + "/"
    check(res.get("prefix") == prefix, "%s: prefix %r, zipfile %r" % (name, res.get("prefix"),
                                                                       prefix))
    if expect_prefix:
        check(prefix == expect_prefix, "%s: prefix %r, want %r" % (name, prefix, expect_prefix))
    check(len(res["entries"]) == len(infos),
          "%s: %d entries, zipfile %d" % (name, len(res["entries"]), len(infos)))
    records, traces = {}, {}
    n_deflated = 0
    for (i, ename, method, csize, usize, crc, off), info in zip(res["entries"], infos):
        lh = info.header_offset
        nl, xl = struct.unpack("<HH", raw[lh + 26:lh + 30])
        want = (info.filename, info.compress_type, info.compress_size, info.file_size, info.CRC,
                lh + 30 + nl + xl)
        got = (ename, method, csize, usize, crc, off)
        check(got == want, "%s: entry %d: %r, zipfile %r" % (name, i, got, want))
        data = zf.read(info)  # zipfile checks the CRC
        mine = open(os.path.join(work, "dump", name, str(i)), "rb").read() \
            if os.path.exists(os.path.join(work, "dump", name, str(i))) else None
        check(mine == data, "%s: %s: the bytes read differ from zipfile's (%s vs %d bytes)" % (
            name, ename, None if mine is None else len(mine), len(data)))
        n_deflated += method == 8
        records[ename[len(prefix):]] = data
        if ename.endswith("pkl"):
            try:
                v, t = trace(data)
            except Refused as e:
                v, t = None, ("refused", str(e))
            traces[ename[len(prefix):]] = v
            got_t = res["pickles"].get(ename)
            if isinstance(t, tuple):
                check(isinstance(got_t, tuple) and t[1] in got_t[2],
                      "%s: %s: Python refuses %s; C says %r" % (name, ename, t[1], got_t))
            else:
                check(got_t == t, "%s: %s: the value trees differ:\n  C:      %s\n  Python: %s" % (
                    name, ename, str(got_t)[:3000], t[:3000]))
    return traces, records, n_deflated


# ---- torch.jit.load as the oracle -------------------------------------------------------------

def storage_bytes(torch, t):
    full = torch.empty(0, dtype=t.dtype)
    full.set_(t.storage(), 0, (t.storage().size(),), (1,))
    return full.contiguous().view(torch.uint8).numpy().tobytes()


def check_tensor(torch, name, where, rec, t, records, ns="data/"):
    dtypes = {torch.float32: "float", torch.float64: "double", torch.float16: "float16",
              torch.int64: "int64", torch.int32: "int32", torch.int16: "int16",
              torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
              torch.bfloat16: "bfloat16"}
    got = (rec.storage.dtype, rec.size, rec.stride, rec.offset, rec.storage.numel)
    want = (dtypes.get(t.dtype), tuple(t.shape), t.stride(), t.storage_offset(),
            t.storage().size())
    check(got == want, "%s: %s: (dtype, size, stride, offset, numel) %r, torch %r" % (
        name, where, got, want))
    if rec.storage.numel:
        data = records.get(ns + rec.storage.key)
        check(data == storage_bytes(torch, t),
              "%s: %s: record %s%s differs from the tensor's storage" % (
                  name, where, ns, rec.storage.key))


def check_module(torch, name, where, obj, mod, records, shared):
    check(isinstance(obj, Obj), "%s: %s is not an object" % (name, where))
    qn = mod._c._type().qualified_name()
    check(obj.cls == qn, "%s: %s: class %s, torch %s" % (name, where, obj.cls, qn))
    for k, v in getattr(obj, "state", {}).items():
        w = "%s.%s" % (where, k)
        if isinstance(v, Obj):
            check_module(torch, name, w, v, getattr(mod, k), records, shared)
        elif isinstance(v, Tensor):
            t = getattr(mod, k)
            check_tensor(torch, name, w, v, t, records)
            check(v.requires_grad == t.requires_grad, "%s: %s: requires_grad" % (name, w))
            shared.setdefault(v.storage.key, set()).add(t.storage().data_ptr())
        elif isinstance(v, (bool, int, float, str, type(None), list, tuple, dict)):
            if isinstance(v, list) and any(isinstance(i, Tensor) for i in v):
                continue
            check(getattr(mod, k) == v, "%s: %s = %r, torch %r" % (name, w, v, getattr(mod, k)))


# ---- archives written here ---------------------------------------------------------------------

def make_archives(work):
    """Debian's torch 1.13: a traced MLP, a scripted module with attributes of every kind,
    a module saved to a buffer, views and shared storage, a torch.save state dict. Python's
    zipfile: DEFLATE streams of every block type, in a zip without zip64 records, with local
    header sizes instead of data descriptors, and with a comment."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    out = {}

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    mlp = MLP().eval()
    p = os.path.join(work, "mlp_traced.pt")
    torch.jit.save(torch.jit.trace(mlp, torch.randn(2, 8)), p)
    out[p] = ("mlp_traced/", "jit")

    class Attrs(nn.Module):
        def __init__(self):
            super().__init__()
            self.i = 7
            self.big = 1 << 40
            self.neg = -123456789
            self.f = 0.1
            self.s = "tab\there \u00e9"
            self.flag = True
            self.ints = [1, 2, 3]
            self.floats = [0.5, -1.25]
            self.bools = [True, False]
            self.table = {"a": 1, "b": 2}
            self.nested = [[1, 2], [3]]
            self.pair = (4, "x")
            self.none = None
            self.tensors = [torch.ones(2), torch.zeros(3, dtype=torch.int64)]
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.register_buffer("h16", torch.randn(2, 3).half())
            self.register_buffer("scalar", torch.tensor(3.5, dtype=torch.float64))
            self.register_buffer("empty", torch.zeros(0, 5))
            self.register_buffer("mask", torch.tensor([True, False]))

        def forward(self, x):
            y = self.bn(self.conv(x)) * self.f + self.i
            for t in self.tensors:
                y = y + t.sum()
            if self.flag:
                y = y + len(self.s) + self.table["a"] + len(self.nested)
            return y

    p = os.path.join(work, "attrs_scripted.pt")
    torch.jit.save(torch.jit.script(Attrs().eval()), p)
    out[p] = ("attrs_scripted/", "jit")

    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(nn.Linear(2, 2)), buf)
    p = os.path.join(work, "from_buffer.pt")
    open(p, "wb").write(buf.getvalue())
    out[p] = ("archive/", "jit")

    class Views(nn.Module):
        def __init__(self):
            super().__init__()
            base = torch.arange(12, dtype=torch.float32)
            self.register_buffer("base", base)
            self.register_buffer("t_view", base.view(3, 4).t())
            self.register_buffer("t_slice", base[4:].view(2, 4))
            self.register_buffer("strided", base[1::3])
            self.w = nn.Parameter(torch.randn(3, 3))
            self.tied = [self.w]

        def forward(self, x):
            return x + self.t_view.sum() + self.t_slice.sum() + self.strided.sum() + self.w.sum()

    p = os.path.join(work, "views_traced.pt")
    torch.jit.save(torch.jit.trace(Views(), torch.randn(2)), p)
    out[p] = ("views_traced/", "jit")
    p = os.path.join(work, "views_scripted.pt")
    torch.jit.save(torch.jit.script(Views()), p)
    out[p] = ("views_scripted/", "jit")

    p = os.path.join(work, "state_dict.pt")
    sd = mlp.state_dict()
    sd["shared_view"] = sd["fc1.weight"][2:4]
    torch.save(sd, p)
    out[p] = ("state_dict/", "save")

    # DEFLATE streams of every kind: stored blocks (level 0, and random data at any level),
    # fixed codes (short inputs), dynamic codes, long matches, empty records, many blocks
    import random
    rnd = random.Random(1)
    text_ = "".join("    x%d = torch.add(x%d, %d)  # line %d\n" % (i, i - 1, i * 7, i)
                    for i in range(8000)).encode()
    blobs = {
        "empty": b"", "one": b"a", "short": b"hello, hello, hello world\n",
        "text": text_, "random": bytes(rnd.getrandbits(8) for _ in range(70000)),
        "runs": b"\x00" * 100000 + b"ab" * 40000,
        "mixed": bytes(rnd.choice(b"abcd") for _ in range(50000)),
    }
    p = os.path.join(work, "deflate.zip")
    with zipfile.ZipFile(p, "w") as z:
        for level in (0, 1, 6, 9):
            for k, v in blobs.items():
                z.writestr(zipfile.ZipInfo("streams/%s_%d" % (k, level)), v,
                           compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
        z.writestr("streams/stored", b"as is", compress_type=zipfile.ZIP_STORED)
        z.comment = b"a comment after the end record " * 20
    out[p] = ("streams/", None)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--fixtures",
                    default=os.path.join(HERE, "..", "..", "shared", "torchscript", "torch-2.11"))
    ap.add_argument("--work", default="torchscript_container.tmp")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    # the torch 2.11 archives: zipfile and the pickle traces only (torch 1.13 cannot load them)
    n_fix = 0
    if os.path.isdir(a.fixtures):
        for f in sorted(os.listdir(a.fixtures)):
            if f.endswith(".pt"):
                want = "archive/" if f == "saved_to_buffer.pt" else f[:-3] + "/"
                traces, _, _ = check_archive(a.tool, os.path.join(a.fixtures, f), a.work, want)
                n_fix += 1
    else:
        print("note: %s is absent: the torch 2.11 archives are skipped" % a.fixtures)

    try:
        import torch
    except ImportError:
        torch = None
        print("note: no torch here: only the torch 2.11 archives are compared")
    n_made = 0
    if torch is not None:
        for path, (want, kind) in make_archives(a.work).items():
            traces, records, n_deflated = check_archive(a.tool, path, a.work, want)
            n_made += 1
            if kind == "jit":
                m = torch.jit.load(path)
                shared = {}
                check_module(torch, os.path.basename(path), "root", traces["data.pkl"], m, records,
                             shared)
                for key, ptrs in shared.items():
                    check(len(ptrs) == 1, "%s: storage %s is one storage in torch too" % (path, key))
            elif kind == "save":
                sd = torch.load(path)
                root = traces["data.pkl"]
                check(list(root.keys()) == list(sd.keys()), "%s: keys" % path)
                for k, t in sd.items():
                    check_tensor(torch, os.path.basename(path), k, root[k], t, records)
                check(root["fc1.weight"].storage.key == root["shared_view"].storage.key and
                      root["shared_view"].offset == 16, "%s: the view shares its storage" % path)
            else:
                check(n_deflated == 28, "%s: %d deflated records" % (path, n_deflated))
        # the views archive: views and tied parameters come back as references
        v = trace(zipfile.ZipFile(os.path.join(a.work, "views_scripted.pt")).read(
            "views_scripted/data.pkl"))[0]
        st = v.state
        check(st["tied"][0] is st["w"], "views_scripted: the tied list holds the parameter itself")
        check(len({st[k].storage.key for k in ("base", "t_view", "t_slice", "strided")}) == 1,
              "views_scripted: the buffers view one storage")

    print("%d archives from torch 2.11, %d made here; %d checks, %d failed" % (
        n_fix, n_made, n_checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
