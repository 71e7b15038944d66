#!/usr/bin/python3
"""Writes the hand-made broken inputs of tests/bad/ (run in tests/bad; the files are checked
in, and running it again gives the same bytes). Each file breaks one rule; tests/bad_input.sh
(through the tool) and tests/test_bad_models.c (through the library: the exact status code
and the key words of the message) say what each must give. The TorchScript archives are
written byte by byte here (a zip writer and pickle opcodes below): no torch needed."""
import struct
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])

good = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [X], [Y])
onnx.save(good, "good_relu.onnx")
data = good.SerializeToString()
open("truncated.onnx", "wb").write(data[: len(data) // 2])
open("garbage.onnx", "wb").write(bytes(range(256)) * 4)
open("empty.onnx", "wb").write(b"")

onnx.save(model([helper.make_node("FrobnicateOp", ["x"], ["y"], name="frob0")], [X], [Y]),
          "unknown_op.onnx")
onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="relu0", domain="com.example")],
                [X], [Y]), "unknown_domain.onnx")
# Softmax's axis must be an int: give it a string.
sm = helper.make_node("Softmax", ["x"], ["y"], name="softmax0")
sm.attribute.append(helper.make_attribute("axis", "one"))
onnx.save(model([sm], [X], [Y]), "wrong_attr_type.onnx")
# A node reads a value nothing produces.
onnx.save(model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add0")], [X], [Y]),
          "undefined_input.onnx")
# raw_data shorter than the dims say.
w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
w.raw_data = w.raw_data[:10]
onnx.save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [X], [Y], [w]),
          "raw_data_size.onnx")
# Inputs of the wrong shape and type for good_relu.onnx.
np.save("input_wrong_shape.npy", np.zeros((3, 3), np.float32))
np.save("input_wrong_type.npy", np.zeros((2, 3), np.int32))
np.save("input_ok.npy", np.zeros((2, 3), np.float32))
open("input_truncated.npy", "wb").write(open("input_ok.npy", "rb").read()[:100])

# ---- more ONNX rules -----------------------------------------------------------------------

# Dims: a negative one; a product that overflows 64 bits; a product that is merely huge (4 TiB,
# over the tensor_bytes limit) with 24 bytes of data.
def raw_init(name, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.raw_data = raw
    return t


six = np.ones(6, np.float32).tobytes()
for fname, dims in [("negative_dim.onnx", [-2, 3]), ("overflow_dims.onnx", [1 << 40] * 4),
                    ("huge_dims.onnx", [1 << 20, 1 << 20])]:
    onnx.save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [X], [Y],
                    [raw_init("w", dims, six)]), fname)
# A cycle: a <- Neg(b), b <- Relu(a), y <- Add(x, b).
onnx.save(model([helper.make_node("Neg", ["b"], ["a"], name="neg0"),
                 helper.make_node("Relu", ["a"], ["b"], name="relu0"),
                 helper.make_node("Add", ["x", "b"], ["y"], name="add0")], [X], [Y]),
          "cycle.onnx")
# Two nodes write the same output name.
onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="relu0"),
                 helper.make_node("Neg", ["x"], ["y"], name="neg0")], [X], [Y]),
          "duplicate_output.onnx")
# Concat without its required axis.
onnx.save(model([helper.make_node("Concat", ["x", "x"], ["y"], name="concat0")], [X],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])]),
          "missing_attr.onnx")
# TopK whose first output (values, required) is left out: only the indices are named.
onnx.save(model([helper.make_node("TopK", ["x", "k"], ["", "i"], name="topk0", axis=1)], [X],
                [helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])],
                [numpy_helper.from_array(np.array([2], np.int64), "k")]),
          "no_first_output.onnx")
# Scan-8 whose inputs disagree on the batch axis: the state has 3 items, the scan input 1
# (each item was read at b * its size: a read past the scan input).
body = helper.make_graph(
    [helper.make_node("Add", ["s_in", "nx"], ["s_out"]),
     helper.make_node("Identity", ["s_out"], ["o"])], "body",
    [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
     helper.make_tensor_value_info("nx", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
     helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])])
onnx.save(model([helper.make_node("Scan", ["", "init", "xs"], ["final", "ys"], name="scan0",
                                  num_scan_inputs=1, body=body)],
                [helper.make_tensor_value_info("init", TensorProto.FLOAT, [3, 2]),
                 helper.make_tensor_value_info("xs", TensorProto.FLOAT, [1, 4, 2])],
                [helper.make_tensor_value_info("final", TensorProto.FLOAT, [3, 2]),
                 helper.make_tensor_value_info("ys", TensorProto.FLOAT, [3, 4, 2])], opset=8),
          "scan8_batch_mismatch.onnx")
# An IR version from the future.
m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [X], [Y])
m.ir_version = 99
onnx.save(m, "ir_version_99.onnx")


# External data: ext_data.onnx reads w (6 floats) from ext_data.bin beside it (a good model:
# tests/test_bad_models.c copies it into folders with symlinks that stay in or lead out);
# the others name a location outside the folder, or a range past the end of the file.
def ext_model(location, offset=0, length=24):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [X], [Y], [t])


open("ext_data.bin", "wb").write(np.arange(6, dtype=np.float32).tobytes())
onnx.save(ext_model("ext_data.bin"), "ext_data.onnx")
onnx.save(ext_model("sub/ext_data.bin"), "ext_data_sub.onnx")
onnx.save(ext_model("/etc/hostname"), "ext_absolute.onnx")
onnx.save(ext_model("../bad/ext_data.bin"), "ext_dotdot.onnx")
onnx.save(ext_model("ext_data.bin", offset=16), "ext_past_end.onnx")

# Models just over one limit each (tests/test_bad_models.c sets the limit one below what the
# model needs, then at it): two nodes, rank 3, subgraphs nested 2 deep, a 100-byte node name.
onnx.save(model([helper.make_node("Relu", ["x"], ["r"], name="relu0"),
                 helper.make_node("Neg", ["r"], ["y"], name="neg0")], [X], [Y]),
          "two_nodes.onnx")
X3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])
Y3 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3])
onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [X3], [Y3]),
          "rank3.onnx")
C = helper.make_tensor_value_info("c", TensorProto.BOOL, [])


def if_node(name, out, then_g, else_g):
    return helper.make_node("If", ["c"], [out], name=name, then_branch=then_g,
                            else_branch=else_g)


def branch(name, nodes, out):
    return helper.make_graph(nodes, name, [],
                             [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 3])])


inner = if_node("if_inner", "t", branch("t_then", [helper.make_node("Relu", ["x"], ["tt"])], "tt"),
                branch("t_else", [helper.make_node("Neg", ["x"], ["te"])], "te"))
onnx.save(model([if_node("if_outer", "y", branch("o_then", [inner], "t"),
                         branch("o_else", [helper.make_node("Neg", ["x"], ["oe"])], "oe"))],
                [X, C], [Y]), "nested_if.onnx")
onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="n" * 100)], [X], [Y]),
          "long_name.onnx")


# ---- TorchScript archives ------------------------------------------------------------------

def zip_archive(entries):
    """entries: (name, data, method, claimed_usize or None); DEFLATE data is compressed here."""
    body, central = b"", b""
    for name, data, method, claimed in entries:
        crc = zlib.crc32(data)
        usize = len(data) if claimed is None else claimed
        if method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            data = c.compress(data) + c.flush()
        nb = name.encode()
        fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0, crc, len(data), usize,
                             len(nb), 0)
        central += struct.pack("<IH", 0x02014B50, 20) + fields + struct.pack(
            "<HHHII", 0, 0, 0, 0, len(body)) + nb
        body += struct.pack("<I", 0x04034B50) + fields + nb + data
    n = len(entries)
    return body + central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central),
                                        len(body), 0)


def pk_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def pk_int(i):
    return b"K" + bytes([i])


def pk_global(mod, name):
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


PROTO, MARK, TUPLE, STOP = b"\x80\x02", b"(", b"t", b"."


def pk_tensor(key, dims):
    numel = int(np.prod(dims))
    strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]
    storage = MARK + pk_str("storage") + pk_global("torch", "FloatStorage") + pk_str(key) + \
        pk_str("cpu") + pk_int(numel) + TUPLE + b"Q"
    return (pk_global("torch._utils", "_rebuild_tensor_v2") + MARK + storage + pk_int(0) +
            MARK + b"".join(map(pk_int, dims)) + TUPLE + MARK + b"".join(map(pk_int, strides)) +
            TUPLE + b"\x89" + pk_global("collections", "OrderedDict") + b")R" + TUPLE + b"R")


def pk_module(state):  # __torch__.M with a BUILD state dict
    items = b"".join(pk_str(k) + v for k, v in state)
    return PROTO + pk_global("__torch__", "M") + b")\x81}" + MARK + items + b"ub" + STOP


CODE = """class M(Module):
  __parameters__ = ["w", ]
  __buffers__ = []
  w : Tensor
  training : bool
  def forward(self: __torch__.M,
    x: Tensor) -> Tensor:
    w = self.w
    return torch.relu(torch.add(x, w))
"""
W = np.arange(6, dtype=np.float32).tobytes()


def archive(data_pkl=None, storage=W, extra=(), code=CODE):
    data_pkl = data_pkl or pk_module([("training", b"\x89"), ("w", pk_tensor("0", [2, 3]))])
    return zip_archive([("ts/version", b"3\n", 0, None), ("ts/data.pkl", data_pkl, 0, None),
                        ("ts/code/__torch__.py", code.encode(), 8, None),
                        ("ts/constants.pkl", PROTO + b")" + STOP, 0, None),
                        ("ts/data/0", storage, 0, None)] + list(extra))


# A good archive: forward(x: [2,3]) = relu(x + w); two nodes, w float[2,3] (24 bytes, rank 2),
# its longest pickled string 'training' (8 bytes).
open("ts_good.pt", "wb").write(archive())
# Truncated: the archive cut in half (no central directory).
good = archive()
open("ts_truncated.pt", "wb").write(good[: len(good) // 2])
# A zip bomb: 20 records that claim 4 GiB each once inflated (80 GiB, over the model_bytes
# limit) from a few bytes: refused before anything is inflated.
open("ts_zip_bomb.pt", "wb").write(archive(extra=[
    ("ts/extra/bomb%d" % k, b"\0" * 1024, 8, 0xFFFFFFF0) for k in range(20)]))
# An .npz (reference values for onnxexec compare) whose member claims 4 GiB from 1 KiB of
# DEFLATE data: refused before anything is allocated.
open("npz_bomb.npz", "wb").write(zip_archive([("y.npy", b"\0" * 1024, 8, 0xFFFFFFF0)]))
# An honest 4 MiB record of zeros (4 KiB compressed): over model_bytes=1M, loads at 8M.
open("ts_inflate.pt", "wb").write(archive(extra=[("ts/extra/zeros", b"\0" * (4 << 20), 8,
                                                   None)]))
# Pickles that call what they must not: os.system and builtins.eval with arguments that would
# create the file 'pwned' in the current folder. The pickle machine never runs anything.
open("ts_pickle_system.pt", "wb").write(archive(
    PROTO + pk_global("os", "system") + pk_str("touch pwned") + b"\x85R" + STOP))
open("ts_pickle_eval.pt", "wb").write(archive(
    PROTO + pk_global("builtins", "eval") + pk_str("open('pwned', 'w')") + b"\x85R" + STOP))
# A memo index far past anything the pickle could have stored (LONG_BINPUT 0x0ffffff0).
open("ts_memo_index.pt", "wb").write(archive(PROTO + b"Nr" + struct.pack("<I", 0x0FFFFFF0) +
                                             STOP))
# The storage of w holds 12 bytes, not 24.
open("ts_truncated_storage.pt", "wb").write(archive(storage=W[:12]))
# Ifs on values known only at run time, nested 2 deep (If nodes with subgraphs).
open("ts_nested_if.pt", "wb").write(archive(code=CODE.replace(
    "    return torch.relu(torch.add(x, w))\n", """    _0 = bool(torch.gt(torch.sum(x), 0))
    if _0:
      _1 = bool(torch.gt(torch.sum(x), 1))
      if _1:
        y = torch.relu(x)
      else:
        y = torch.neg(x)
    else:
      y = torch.add(x, w)
    return y
""")))
# onnxexec's own FusedAttention (what `convert --optimize=all` writes) with view programs
# that do not fit its inputs: a Transpose perm of rank 3 for the rank-2 Q, and a program cut
# off in the middle of a Gather.
QKV = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in ("q", "k", "v")]
Y22 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
for name, prog in (("fused_attention_bad_perm.onnx", [1, 3, 0, 2, 1]),
                   ("fused_attention_cut_program.onnx", [3, 0])):
    m = model([helper.make_node("FusedAttention", ["q", "k", "v"], ["y"], name="fa0",
                                domain="ai.onnxexec", view_q=prog)], QKV, [Y22])
    m.opset_import.append(helper.make_opsetid("ai.onnxexec", 1))
    onnx.save(m, name)
