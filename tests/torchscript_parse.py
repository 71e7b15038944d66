#!/usr/bin/python3
"""The TorchScript code parser (importer/torchscript/parse.c) against Python's own `ast`.

Makes TorchScript archives with the installed torch (Debian's 1.13): traced and scripted
MLP, small CNN, resnet18 and mobilenet_v2; scripted densenet121 and googlenet;
TransformerEncoderLayer traced in eval under no_grad (the fused fast path), traced with grad
and scripted; LSTM and GRU traced and scripted; a scripted module with if/elif/for/while,
lists, dicts, strings with escapes, asserts, raise, NamedTuple, Final constants and a free
function. Adds the torch 2.11 archives kept in shared/torchscript/torch-2.11. Every
code/**.py record is extracted with zipfile, parsed by Python's `ast` and by the C parser
(`test_torchscript_parse --dump`), and the two one-line-per-node dumps (format in
tests/test_torchscript_parse.c) must be equal: statement kinds, targets, callees, argument
counts and keyword names, literal values, types and line numbers.

    torchscript_parse.py --dumper build/tests/test_torchscript_parse --work DIR
                         [--shared DIR] [--regen]

Archives are cached in DIR (made again with --regen, or when the torch version changes).
Exits non-zero naming the first differing line of each file that differs.
"""
import argparse
import ast
import math
import os
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- archives ---------------------------------------------------------------------------

CONTROL_SRC = r'''
from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor, nn


class Pair(NamedTuple):
    a: Tensor
    b: int


@torch.jit.script
def helper(x: Tensor, n: int) -> Tensor:
    out = x
    for i in range(n):
        out = out * 2 + i
    return out


class Control(nn.Module):
    __constants__ = ["scale_c", "sizes"]

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.n_iter = 3
        self.scale = 0.5
        self.scale_c = 2.0
        self.sizes = (1, 2)
        self.names: List[str] = ["a", "b"]
        self.table: Dict[str, int] = {"x": 1, "y\n": 2}
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: Tensor, flag: bool = True, name: str = "q\n\"x'\t\\",
                opt: Optional[Tensor] = None, big: int = 9223372036854775807) -> Tuple[Tensor, int]:
        y = self.lin(x)
        if bool(y.sum() > 0) and flag:
            y = y * self.scale
        elif bool(y.sum() < -1.5e-05) or not flag:
            y = -y
        else:
            y = y + 1
        for i in range(self.n_iter):
            y = torch.relu(y + i)
        k = 0
        while k < 5 and flag:
            k += 1
            if k == 2:
                continue
            if k > 3:
                break
        d: Dict[str, Tensor] = {"a": y, "b\t\u00e9": y * 2}
        e = {1: "one", -2: "two"}
        lst = [y, y + 1]
        for t in lst:
            y = y + t
        for key in d.keys():
            y = y + d[key]
        assert y.dim() == 2, "need a 2-d input \u00fc"
        if k > 100:
            raise ValueError("too many \x01 iterations")
        s = name + "\u00e9\\" + e[1]
        if opt is not None:
            y = y + opt
        lo, hi = float("-inf"), float("inf")
        y = torch.clamp(y, lo, hi) * self.scale_c + self.sizes[1]
        self.count = self.count + 1
        p = Pair(y, k)
        a, b = p
        names = self.names
        names.append(s)
        return (a + helper(y, b), len(names) + big % 7 + self.table["x"])
'''


def make_archives(work):
    """Write the archives into work/archives; returns their paths."""
    import importlib.util

    import torch
    import torchvision
    from torch import nn

    out = os.path.join(work, "archives")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    made, notes = [], []

    def save(name, make):
        path = os.path.join(out, name + ".pt")
        try:
            torch.jit.save(make(), path)
            made.append(path)
        except Exception as e:  # a model that does not script here is noted, not fatal
            notes.append("%s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:120]))

    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    save("mlp_traced", lambda: torch.jit.trace(mlp, torch.randn(2, 8)))
    save("mlp_scripted", lambda: torch.jit.script(mlp))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, stride=2), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(8, 10)).eval()
    save("smallcnn_traced", lambda: torch.jit.trace(cnn, torch.randn(1, 3, 32, 32)))
    save("smallcnn_scripted", lambda: torch.jit.script(cnn))
    img = torch.randn(1, 3, 64, 64)
    for name, ctor in (("resnet18", torchvision.models.resnet18),
                       ("mobilenet_v2", torchvision.models.mobilenet_v2)):
        m = ctor().eval()
        save(name + "_traced", lambda: torch.jit.trace(m, img))
        save(name + "_scripted", lambda: torch.jit.script(m))
    save("densenet121_scripted", lambda: torch.jit.script(torchvision.models.densenet121().eval()))
    save("googlenet_scripted", lambda: torch.jit.script(
        torchvision.models.googlenet(init_weights=False, aux_logits=False).eval()))
    enc = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    src = torch.randn(2, 5, 32)

    def fast_path():
        with torch.no_grad():
            return torch.jit.trace(enc, src)

    save("transformer_enc_fastpath_traced", fast_path)
    save("transformer_enc_traced", lambda: torch.jit.trace(enc, src, check_trace=False))
    save("transformer_enc_scripted", lambda: torch.jit.script(enc))

    class LstmHead(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn
            self.fc = nn.Linear(20, 5)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.fc(out[:, -1, :])

    seq = torch.randn(2, 7, 10)
    for name, cls in (("lstm", nn.LSTM), ("gru", nn.GRU)):
        rnn = cls(10, 20, 2, batch_first=True)
        save(name + "_traced", lambda: torch.jit.trace(LstmHead(rnn).eval(), seq))
        save(name + "_scripted", lambda: torch.jit.script(rnn))
    # the control module comes from a real file, as torch.jit.script reads the source
    src_path = os.path.join(work, "control_module.py")
    with open(src_path, "w", encoding="utf-8") as f:
        f.write(CONTROL_SRC)
    spec = importlib.util.spec_from_file_location("control_module", src_path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["control_module"] = mod
    spec.loader.exec_module(mod)
    save("control_scripted", lambda: torch.jit.script(mod.Control()))
    with open(os.path.join(out, "STAMP"), "w") as f:
        f.write(torch.__version__ + "\n" + "\n".join(notes) + "\n")
    return notes


def torch_version():
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip()


def extract(archives, work):
    """code/**.py records of each archive into work/code/<archive>/...; returns the paths."""
    files = []
    for arc in archives:
        stem = os.path.splitext(os.path.basename(arc))[0]
        base = os.path.join(work, "code", stem)
        with zipfile.ZipFile(arc) as z:
            for name in z.namelist():
                parts = name.split("/")
                if len(parts) < 3 or parts[1] != "code" or not name.endswith(".py"):
                    continue
                dest = os.path.join(base, *parts[1:])
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as f:
                    f.write(z.read(name))
                files.append(dest)
    return files


# ---- the dump from Python's ast (same format as the C dumper) ----------------------------

def qstr(s):
    out = ['"']
    for c in s.encode("utf-8", "surrogatepass"):
        if c in (0x5C, 0x22):
            out.append("\\" + chr(c))
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    out.append('"')
    return "".join(out)


def fnum(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return "%.17g" % v


def dotted(e):
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        b = dotted(e.value)
        return None if b is None else b + "." + e.attr
    return None


def type_str(e):
    if e is None:
        return "-"
    if isinstance(e, ast.Constant) and e.value is None:
        return "NoneType"
    if isinstance(e, ast.Subscript):
        args = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return "%s[%s]" % (dotted(e.value), ",".join(type_str(a) for a in args))
    name = dotted(e)
    return "NoneType" if name == "None" else name


def expr_tree(e):
    """(text without the line, line, children) with the C parser's folding of '-'."""
    L = e.lineno
    if isinstance(e, ast.Name):
        if e.id in ("inf", "nan"):
            return ["float", L, e.id, []]
        return ["name", L, e.id, []]
    if isinstance(e, ast.Constant):
        v = e.value
        if isinstance(v, bool):
            return ["bool", L, str(int(v)), []]
        if v is None:
            return ["none", L, None, []]
        if isinstance(v, int):
            return ["int", L, v, []]
        if isinstance(v, float):
            return ["float", L, v if not isinstance(v, str) else v, []]
        if isinstance(v, str):
            return ["str", L, qstr(v), []]
        raise ValueError("constant %r" % (v,))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        x = expr_tree(e.operand)
        if x[0] == "int":
            return ["int", L, -x[2], []]
        if x[0] == "float":
            v = float(x[2]) if isinstance(x[2], str) else x[2]
            return ["float", L, -v, []]
        return ["neg", L, None, [x]]
    if isinstance(e, ast.Attribute):
        return ["attr", L, e.attr, [expr_tree(e.value)]]
    if isinstance(e, ast.Call):
        kids = [expr_tree(e.func)] + [expr_tree(a) for a in e.args]
        kids += [expr_tree(k.value) for k in e.keywords]
        info = "n=%d kw=%s" % (len(e.args) + len(e.keywords), ",".join(k.arg for k in e.keywords))
        return ["call", L, info, kids]
    if isinstance(e, ast.Subscript):
        return ["subscript", L, None, [expr_tree(e.value), expr_tree(e.slice)]]
    if isinstance(e, (ast.Tuple, ast.List)):
        kind = "tuple" if isinstance(e, ast.Tuple) else "list"
        return [kind, L, "n=%d" % len(e.elts), [expr_tree(x) for x in e.elts]]
    if isinstance(e, ast.Dict):
        kids = []
        for k, v in zip(e.keys, e.values):
            kids += [expr_tree(k), expr_tree(v)]
        return ["dict", L, "n=%d" % len(e.keys), kids]
    raise ValueError("expression %s at line %d" % (type(e).__name__, L))


def put_tree(out, t, d):
    kind, line, payload, kids = t
    if kind == "float":
        payload = fnum(float(payload))
    text = "%s L%d" % (kind, line) + ("" if payload is None else " %s" % payload)
    out.append(" " * d + text)
    for k in kids:
        put_tree(out, k, d + 1)


def put_expr(out, e, d):
    put_tree(out, expr_tree(e), d)


def put_block(out, what, stmts, d):
    out.append(" " * d + "%s n=%d" % (what, len(stmts)))
    for s in stmts:
        put_stmt(out, s, d + 1)


def put_stmt(out, s, d):
    pad = " " * d
    L = s.lineno
    if isinstance(s, (ast.Assign, ast.AnnAssign)):
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise ValueError("chained assignment at line %d" % L)
            t, ty = s.targets[0], "-"
        else:
            t, ty = s.target, type_str(s.annotation)
        if isinstance(t, ast.Name):
            out.append(pad + "assign L%d names=%s tuple=0 type=%s" % (L, t.id, ty))
        elif isinstance(t, (ast.Tuple, ast.List)):
            out.append(pad + "assign L%d names=%s tuple=1 type=%s"
                       % (L, ",".join(x.id for x in t.elts), ty))
        else:
            out.append(pad + "assign L%d target type=%s" % (L, ty))
            put_expr(out, t, d + 1)
        put_expr(out, s.value, d + 1)
    elif isinstance(s, ast.Expr):
        out.append(pad + "expr L%d" % L)
        put_expr(out, s.value, d + 1)
    elif isinstance(s, ast.Return):
        out.append(pad + "return L%d" % L)
        if s.value is not None:
            put_expr(out, s.value, d + 1)
    elif isinstance(s, ast.Pass):
        out.append(pad + "pass L%d" % L)
    elif isinstance(s, ast.Break):
        out.append(pad + "break L%d" % L)
    elif isinstance(s, ast.Continue):
        out.append(pad + "continue L%d" % L)
    elif isinstance(s, ast.If):
        out.append(pad + "if L%d" % L)
        put_expr(out, s.test, d + 1)
        put_block(out, "body", s.body, d + 1)
        if s.orelse:
            put_block(out, "else", s.orelse, d + 1)
    elif isinstance(s, ast.For):
        out.append(pad + "for L%d %s" % (L, s.target.id))
        put_expr(out, s.iter, d + 1)
        put_block(out, "body", s.body, d + 1)
    elif isinstance(s, ast.While):
        out.append(pad + "while L%d" % L)
        put_expr(out, s.test, d + 1)
        put_block(out, "body", s.body, d + 1)
    elif isinstance(s, ast.Assert):
        out.append(pad + "assert L%d msg=%d" % (L, s.msg is not None))
        put_expr(out, s.test, d + 1)
        if s.msg is not None:
            put_expr(out, s.msg, d + 1)
    elif isinstance(s, ast.Raise):
        out.append(pad + "raise L%d" % L)
        if s.exc is not None:
            put_expr(out, s.exc, d + 1)
    else:
        raise ValueError("statement %s at line %d" % (type(s).__name__, L))


def put_func(out, f, d):
    out.append(" " * d + "def %s L%d ret=%s" % (f.name, f.lineno, type_str(f.returns)))
    args = f.args.args
    defaults = [None] * (len(args) - len(f.args.defaults)) + list(f.args.defaults)
    for a, dflt in zip(args, defaults):
        out.append(" " * (d + 1) + "param %s : %s" % (a.arg, type_str(a.annotation)))
        if dflt is not None:
            put_expr(out, dflt, d + 2)
    put_block(out, "body", f.body, d + 1)


def put_class(out, c):
    base = dotted(c.bases[0]) if c.bases else "-"
    out.append("class %s base=%s L%d" % (c.name, base, c.lineno))
    params, buffers, slots, methods = None, None, [], []
    for item in c.body:
        if isinstance(item, ast.FunctionDef):
            methods.append(item)
        elif isinstance(item, ast.Pass):
            pass
        elif isinstance(item, ast.AnnAssign):
            slots.append((item.target.id, type_str(item.annotation), item.value))
        elif isinstance(item, ast.Assign):
            t = item.targets[0]
            if isinstance(t, ast.Subscript):  # __annotations__["k"] = T
                slots.append((t.slice.value, type_str(item.value), None))
            elif t.id == "__parameters__":
                params = [x.value for x in item.value.elts]
            elif t.id == "__buffers__":
                buffers = [x.value for x in item.value.elts]
            else:
                slots.append((t.id, "-", item.value))
        else:
            raise ValueError("class item %s at line %d" % (type(item).__name__, item.lineno))
    if params:
        out.append(" parameters " + ",".join(qstr(p) for p in params))
    if buffers:
        out.append(" buffers " + ",".join(qstr(b) for b in buffers))
    for name, ty, value in slots:
        out.append(" slot %s : %s" % (qstr(name), ty))
        if value is not None:
            put_expr(out, value, 2)
    for m in methods:
        put_func(out, m, 1)


def python_dump(path):
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), filename=path)
    out = []
    for s in tree.body:
        if isinstance(s, ast.ClassDef):
            put_class(out, s)
    for s in tree.body:
        if isinstance(s, ast.FunctionDef):
            put_func(out, s, 0)
    for s in tree.body:
        if not isinstance(s, (ast.ClassDef, ast.FunctionDef)):
            put_stmt(out, s, 0)
    return out


def c_dumps(dumper, files):
    """{path: lines} from one run of the C dumper per batch of files."""
    res = {}
    for k in range(0, len(files), 400):
        batch = files[k:k + 400]
        run = subprocess.run([dumper, "--dump"] + batch, capture_output=True, text=True,
                             encoding="utf-8", errors="surrogateescape")
        cur = None
        for line in run.stdout.split("\n"):
            if line.startswith("file "):
                cur = line[5:]
                res[cur] = []
            elif cur is not None and line:
                res[cur].append(line)
        if run.returncode not in (0, 1):
            sys.exit("dumper failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dumper", required=True, help="test_torchscript_parse")
    p.add_argument("--work", required=True, help="cache folder for archives and code files")
    p.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "torchscript",
                                                    "torch-2.11"),
                   help="folder of kept torch 2.11 archives")
    p.add_argument("--regen", action="store_true", help="make the archives again")
    a = p.parse_args()

    work = os.path.abspath(a.work)
    stamp = os.path.join(work, "archives", "STAMP")
    notes = []
    fresh = a.regen or not os.path.exists(stamp)
    if not fresh:
        with open(stamp) as f:
            lines = f.read().splitlines()
        fresh = not lines or lines[0] != torch_version()
        notes = [x for x in lines[1:] if x]
    if fresh:
        notes = make_archives(work)
    archives = sorted(os.path.join(work, "archives", x)
                      for x in os.listdir(os.path.join(work, "archives")) if x.endswith(".pt"))
    n_own = len(archives)
    if os.path.isdir(a.shared):
        archives += sorted(os.path.join(a.shared, x) for x in os.listdir(a.shared)
                           if x.endswith(".pt") and zipfile.is_zipfile(os.path.join(a.shared, x)))
    else:
        notes.append("no torch 2.11 archives at %s" % a.shared)
    code_root = os.path.join(work, "code")
    if os.path.isdir(code_root):
        subprocess.run(["rm", "-rf", code_root], check=True)
    files = extract(archives, work)
    for n in notes:
        print("note:", n)

    got = c_dumps(a.dumper, files)
    n_nodes = n_bad = 0
    for path in files:
        want = python_dump(path)
        have = got.get(path, ["error (no output)"])
        if have == want:
            n_nodes += len(want)
            continue
        n_bad += 1
        k = next((i for i, (x, y) in enumerate(zip(have, want)) if x != y),
                 min(len(have), len(want)))
        print("DIFF %s (node %d)\n  C:      %s\n  Python: %s"
              % (os.path.relpath(path, work), k + 1, have[k] if k < len(have) else "(end)",
                 want[k] if k < len(want) else "(end)"))
    print("%d archives (%d made with torch %s, %d kept from torch 2.11), %d code files, "
          "%d nodes compared with Python's ast, %d files differ"
          % (len(archives), n_own, torch_version() if fresh else "(cached)", len(archives) - n_own,
             len(files), n_nodes, n_bad))
    return 1 if n_bad or not files else 0


if __name__ == "__main__":
    sys.exit(main())
