"""Gradient cases: elementwise math, reductions, CumSum, MatMul, Gemm (graph/grad_math.c)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import F64, op_model, rng

CASES = [
    ("Add_broadcast", op_model("Add", [("a", [2, 3, 4]), ("b", [3, 1])])),
    ("Add_leading", op_model("Add", [("a", [1, 4]), ("b", [2, 3, 4])])),
    ("Sub_broadcast", op_model("Sub", [("a", [3, 1, 4]), ("b", [2, 1])])),
    ("Mul_broadcast", op_model("Mul", [("a", [2, 3, 4]), ("b", [4])])),
    ("Mul_same", op_model("Mul", [("a", [5]), ("a", [5])])),
    ("Div_broadcast", op_model("Div", [("a", [2, 3]), ("b", [1, 3])])),
    ("Neg", op_model("Neg", [("a", [3, 2])])),
    ("Identity", op_model("Identity", [("a", [3, 2])])),
    ("Relu", op_model("Relu", [("a", [4, 5])])),
    ("Sum_three", op_model("Sum", [("a", [2, 3]), ("b", [3]), ("c", [2, 1])])),
    ("MatMul_batched", op_model("MatMul", [("a", [2, 1, 3, 4]), ("b", [5, 4, 2])])),
    ("MatMul_vec_mat", op_model("MatMul", [("a", [4]), ("b", [2, 4, 3])])),
    ("MatMul_mat_vec", op_model("MatMul", [("a", [2, 3, 4]), ("b", [4])])),
    ("MatMul_vec_vec", op_model("MatMul", [("a", [4]), ("b", [4])])),
    ("Gemm_plain", op_model("Gemm", [("a", [3, 4]), ("b", [4, 5]), ("c", [5])])),
    ("Gemm_trans", op_model("Gemm", [("a", [4, 3]), ("b", [5, 4]), ("c", [3, 1])],
                            {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0})),
    ("Gemm_no_c", op_model("Gemm", [("a", [1, 4]), ("b", [4, 2])], {"transB": 0})),
]

# ---- elementwise unary, on random inputs (standard normal) ----
_UNARY = ["Exp", "Abs", "Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh",
          "Softplus", "Softsign", "HardSwish"]
CASES += [(op, op_model(op, [("a", [2, 3, 1, 4])])) for op in _UNARY]


def _fixed(seed, shape, lo, hi):
    """A float64 initializer, uniform in [lo, hi): for ops defined on part of the line."""
    return rng(seed).uniform(lo, hi, size=shape)


def _away(seed, shape, lo, hi):
    """Uniform in [lo, hi) in magnitude, with random signs: away from 0."""
    r = rng(seed)
    return r.uniform(lo, hi, size=shape) * r.choice([-1.0, 1.0], size=shape)


CASES += [
    ("Log", op_model("Log", [("a", _fixed(1, [3, 1, 4], 0.2, 3.0))])),
    ("Sqrt", op_model("Sqrt", [("a", _fixed(2, [2, 5], 0.2, 3.0))])),
    ("Reciprocal", op_model("Reciprocal", [("a", _away(3, [2, 1, 3], 0.3, 2.0))])),
    ("Tan", op_model("Tan", [("a", _fixed(4, [3, 4], -1.2, 1.2))])),
    ("Asin", op_model("Asin", [("a", _fixed(5, [2, 1, 4], -0.9, 0.9))])),
    ("Acos", op_model("Acos", [("a", _fixed(6, [4, 3], -0.9, 0.9))])),
    ("Acosh", op_model("Acosh", [("a", _fixed(7, [3, 1], 1.1, 4.0))])),
    ("Atanh", op_model("Atanh", [("a", _fixed(8, [1, 5], -0.9, 0.9))])),
    ("HardSwish_wide", op_model("HardSwish", [("a", _away(9, [4, 6], 0.1, 6.0))])),
    ("Elu", op_model("Elu", [("a", [2, 3, 4])])),
    ("Elu_alpha", op_model("Elu", [("a", [3, 1, 4])], {"alpha": 0.4})),
    ("Selu", op_model("Selu", [("a", [2, 1, 5])])),
    ("Selu_attrs", op_model("Selu", [("a", [4, 3])], {"alpha": 2.0, "gamma": 0.5})),
    ("Celu", op_model("Celu", [("a", [2, 3, 4])])),
    ("Celu_alpha", op_model("Celu", [("a", [1, 3, 4])], {"alpha": 0.5})),
    ("LeakyRelu", op_model("LeakyRelu", [("a", [3, 1, 4])])),
    ("LeakyRelu_alpha", op_model("LeakyRelu", [("a", [2, 5])], {"alpha": 0.3})),
    ("HardSigmoid", op_model("HardSigmoid", [("a", _away(10, [4, 5], 0.1, 4.0))])),
    ("HardSigmoid_attrs", op_model("HardSigmoid", [("a", [3, 1, 4])],
                                   {"alpha": 0.5, "beta": 0.3})),
    ("ThresholdedRelu", op_model("ThresholdedRelu", [("a", [3, 4])])),
    ("ThresholdedRelu_alpha", op_model("ThresholdedRelu", [("a", [2, 1, 4])], {"alpha": -0.2})),
    ("Gelu_none", op_model("Gelu", [("a", [2, 3, 4])], opset=20)),
    ("Gelu_tanh", op_model("Gelu", [("a", [3, 1, 4])], {"approximate": "tanh"}, opset=20)),
    ("Mish", op_model("Mish", [("a", [2, 1, 5])], opset=18)),
    ("Exp_opset13", op_model("Exp", [("a", [2, 3])], opset=13)),
    ("Selu_opset13", op_model("Selu", [("a", [2, 3])], opset=13)),
]



# ---- elementwise, several inputs ----
def _scalar(v):
    """A rank-0 float64 initializer (Clip's bounds, a scalar exponent)."""
    return np.array(v, dtype=np.float64)


CASES += [
    ("PRelu_channel", op_model("PRelu", [("a", [2, 3, 4]), ("s", [3, 1])])),
    ("PRelu_last", op_model("PRelu", [("a", [2, 1, 4]), ("s", [4])])),
    ("PRelu_same", op_model("PRelu", [("a", [3, 4]), ("s", [3, 4])])),
    ("Clip_both", op_model("Clip", [("a", [3, 4, 2]), ("lo", _scalar(-0.5)),
                                    ("hi", _scalar(0.7))])),
    ("Clip_min", op_model("Clip", [("a", [2, 1, 5]), ("lo", _scalar(0.1))])),
    ("Clip_max", op_model("Clip", [("a", [4, 3]), None, ("hi", _scalar(-0.2))])),
    ("Clip_crossed", op_model("Clip", [("a", [3, 4]), ("lo", _scalar(0.5)),
                                       ("hi", _scalar(-0.5))])),
    ("Clip_none", op_model("Clip", [("a", [2, 3])])),
    ("Pow_broadcast", op_model("Pow", [("a", _fixed(11, [2, 3, 1], 0.5, 2.0)), ("b", [3, 4])])),
    ("Pow_scalar_exp", op_model("Pow", [("a", _fixed(12, [3, 4], 0.5, 2.0)),
                                        ("b", _scalar(2.5))])),
    ("Pow_int_exp", op_model("Pow", [("a", [2, 3]), ("b", np.array([2, 3, 1], dtype=np.int64))])),
    ("Max_three", op_model("Max", [("a", [2, 3, 1]), ("b", [3, 4]), ("c", [1, 1, 4])])),
    ("Max_one", op_model("Max", [("a", [3, 2])])),
    ("Max_same", op_model("Max", [("a", [4]), ("a", [4])])),
    ("Min_three", op_model("Min", [("a", [3, 1]), ("b", [2, 1, 4]), ("c", [4])])),
    ("Min_two", op_model("Min", [("a", [2, 3]), ("b", [2, 3])])),
    ("Mean_three", op_model("Mean", [("a", [2, 3, 1]), ("b", [4]), ("c", [3, 4])])),
    ("Mean_one", op_model("Mean", [("a", [3, 2])])),
    ("Where_broadcast", op_model("Where", [("c", rng(13).random([3, 1]) < 0.5), ("a", [2, 3, 4]),
                                           ("b", [4])])),
    ("Where_cond_wide", op_model("Where", [("c", rng(14).random([2, 3, 4]) < 0.5), ("a", [3, 1]),
                                           ("b", [1, 4])])),
]

# Cast: through float32 and back (small values, so that float32 rounding stays far below the
# finite-difference step); and a path through int64 that carries no gradient.
_small = rng(15).normal(size=[3, 4]) * 1e-4
CASES += [
    ("Cast_f32", op_model("Cast", [("a", _small)], {"to": TensorProto.FLOAT}, outputs=["_c"],
                          extra_nodes=[helper.make_node("Cast", ["_c"], ["z"], to=F64)])),
    ("Cast_same", op_model("Cast", [("a", [2, 3])], {"to": F64})),
    ("Cast_int_path", op_model("Cast", [("a", _fixed(16, [2, 3], -3.0, 3.0) + 0.25)],
                               {"to": TensorProto.INT64}, outputs=["_i"],
                               extra_nodes=[helper.make_node("Cast", ["_i"], ["_f"], to=F64),
                                            helper.make_node("Mul", ["_f", "a"], ["z"])])),
    ("CastLike_f32", op_model("CastLike", [("a", _small), ("like", np.zeros([1], np.float32))],
                              outputs=["_c"],
                              extra_nodes=[helper.make_node("Cast", ["_c"], ["z"], to=F64)])),
    ("CastLike_same", op_model("CastLike", [("a", [3, 2]), ("like", np.zeros([1]))])),
]

# Piecewise constant ops: no gradient; a second path (z = y0 * a) keeps the check non-vacuous.
for _op in ["Floor", "Ceil", "Round", "Sign"]:
    CASES.append((_op, op_model(_op, [("a", _away(17, [3, 4], 0.1, 3.0) + 0.03)], outputs=["y"],
                                extra_nodes=[helper.make_node("Mul", ["y", "a"], ["z"])])))

# ---- reductions ----
_REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _axes(v):
    return np.array(v, dtype=np.int64)


def _reduce_x(op, seed, shape):
    """The input: random, or positive for ReduceLogSum, away from 0 for ReduceProd."""
    if op == "ReduceLogSum":
        return ("x", _fixed(seed, shape, 0.2, 2.0))
    if op == "ReduceProd":
        return ("x", _away(seed, shape, 0.5, 1.5))
    return ("x", shape)


def _reduce_cases(op):
    """Attribute form (opset 17; ReduceSum input form from 13) and input form (opset 18)."""
    attr_form = op != "ReduceSum"
    out = []
    variants = [  # (name, axes, keepdims)
        ("axes_keep", [1], 1),
        ("axes_drop", [0, 2], 0),
        ("neg_axes_drop", [-1, 1], 0),
        ("all_keep", None, 1),
        ("all_drop", None, 0),
    ]
    for k, (name, axes, keep) in enumerate(variants):
        x = _reduce_x(op, 20 + k, [2, 3, 4])
        if attr_form:
            attrs = {"keepdims": keep}
            if axes is not None:
                attrs["axes"] = axes
            out.append((f"{op}_{name}", op_model(op, [x], attrs)))
        else:
            ins = [x] + ([("axes", _axes(axes))] if axes is not None else [])
            out.append((f"{op}_{name}", op_model(op, ins, {"keepdims": keep})))
    # the input form at opset 18: axes given, empty (everything), noop_with_empty_axes
    out += [
        (f"{op}_18_axes", op_model(op, [_reduce_x(op, 30, [3, 1, 4]), ("axes", _axes([-3]))],
                                   {"keepdims": 0}, opset=18)),
        (f"{op}_18_empty", op_model(op, [_reduce_x(op, 31, [2, 3]), ("axes", _axes([]))],
                                    {"keepdims": 1}, opset=18)),
        (f"{op}_18_noop", op_model(op, [_reduce_x(op, 32, [2, 3]), ("axes", _axes([]))],
                                   {"keepdims": 0, "noop_with_empty_axes": 1}, opset=18)),
        (f"{op}_18_omitted", op_model(op, [_reduce_x(op, 33, [2, 1, 3])], {"keepdims": 0},
                                      opset=18)),
    ]
    return out


for _op in _REDUCE:
    CASES += _reduce_cases(_op)



def _const_axes_model():
    """ReduceMean whose axes (opset 18 input) come from a Constant node."""
    m = op_model("ReduceMean", [("x", [2, 3, 4]), ("axes", _axes([0, -1]))], {"keepdims": 0},
                 opset=18)
    g = m.graph
    del g.initializer[:]
    const = helper.make_node("Constant", [], ["axes"],
                             value=numpy_helper.from_array(_axes([0, -1]), "axes"))
    g.node.insert(0, const)
    return m


CASES.append(("ReduceMean_const_axes", _const_axes_model()))

# ---- CumSum: axis is an input ----
for _name, _attrs, _axis in [("plain", {}, 1), ("exclusive", {"exclusive": 1}, 0),
                             ("reverse", {"reverse": 1}, -1),
                             ("exclusive_reverse", {"exclusive": 1, "reverse": 1}, 2)]:
    CASES.append((f"CumSum_{_name}", op_model(
        "CumSum", [("x", [3, 4, 2]), ("axis", np.array(_axis, dtype=np.int64))], _attrs)))

# ---- symbolic dims (the rules' dynamic forms: Shape/Size arithmetic) and ties ----
CASES += [
    ("ReduceMean_symbolic", op_model("ReduceMean", [("x", ["N", 3, 4])],
                                     {"axes": [0, 2], "keepdims": 0})),
    ("ReduceMax_symbolic", op_model("ReduceMax", [("x", [3, "N"])], {"axes": [-1]})),
    ("PRelu_symbolic", op_model("PRelu", [("a", ["N", 3, 4]), ("s", [3, 1])])),
    ("Max_symbolic", op_model("Max", [("a", ["N", 3]), ("b", [3])])),
    ("Where_symbolic", op_model("Where", [("c", rng(18).random([4, 1]) < 0.5), ("a", ["N", 4, 3]),
                                          ("b", [3])])),
    # two-way ties: the gradient is split in halves, which is what central differences see
    ("ReduceMax_tie_pairs", op_model("ReduceMax", [("x", np.array([[1.0, 3.0, 3.0],
                                                                   [2.0, 0.5, 2.0]]))],
                                     {"axes": [1], "keepdims": 0})),
]

# ---- Shrink, Swish, SwiGLU ----
CASES += [
    ("Shrink", op_model("Shrink", [("a", [3, 4])])),
    ("Shrink_attrs", op_model("Shrink", [("a", [2, 1, 5])], {"lambd": 0.3, "bias": 0.2})),
    ("Shrink_lambd0", op_model("Shrink", [("a", _away(40, [3, 3], 0.05, 2.0))],
                               {"lambd": 0.0, "bias": 1.5})),
    ("Swish", op_model("Swish", [("a", [2, 3, 4])], opset=24)),
    ("Swish_alpha", op_model("Swish", [("a", [3, 1, 4])], {"alpha": 1.7}, opset=24)),
    ("SwiGLU", op_model("SwiGLU", [("a", [2, 3, 4]), ("b", [2, 3, 4])], opset=28)),
    ("SwiGLU_alpha", op_model("SwiGLU", [("a", [3, 5]), ("b", [3, 5])], {"alpha": 0.6},
                              opset=28)),
]


# ---- Mod of floats: quotients kept away from whole numbers (the steps of trunc/floor) ----
def _mod_inputs(seed, a_shape, b_shape):
    r = rng(seed)
    b = r.uniform(0.5, 2.0, size=b_shape) * r.choice([-1.0, 1.0], size=b_shape)
    q = r.integers(-3, 4, size=a_shape) + r.uniform(0.1, 0.9, size=a_shape)
    return q * np.broadcast_to(b, np.broadcast_shapes(a_shape, b_shape)), b


_ma, _mb = _mod_inputs(41, [2, 3, 4], [3, 1])
_ma2, _mb2 = _mod_inputs(42, [3, 4], [3, 4])
CASES += [
    ("Mod_fmod_broadcast", op_model("Mod", [("a", _ma), ("b", _mb)], {"fmod": 1})),
    ("Mod_floor_broadcast", op_model("Mod", [("a", _ma), ("b", _mb)])),
    ("Mod_fmod_same", op_model("Mod", [("a", _ma2), ("b", _mb2)], {"fmod": 1}, opset=13)),
    ("Mod_floor_same", op_model("Mod", [("a", _ma2), ("b", _mb2)], {"fmod": 0})),
]

# ---- Range of floats (the count stays put under the step), Det ----
_sing = rng(43).normal(size=[3, 2]) @ rng(44).normal(size=[2, 3])  # rank 2: det 0
CASES += [
    ("Range_float", op_model("Range", [("s", _scalar(0.3)), ("l", _scalar(2.55)),
                                       ("d", _scalar(0.5))], opset=13)),
    ("Range_float_down", op_model("Range", [("s", _scalar(1.0)), ("l", _scalar(-2.3)),
                                            ("d", _scalar(-0.7))])),
    ("Det_3", op_model("Det", [("x", [3, 3])])),
    ("Det_batched_4", op_model("Det", [("x", [2, 4, 4])])),
    ("Det_batched_2", op_model("Det", [("x", [3, 1, 2, 2])])),
    ("Det_1", op_model("Det", [("x", [2, 1, 1])])),
    ("Det_singular", op_model("Det", [("x", _sing)])),
    ("Det_symbolic", op_model("Det", [("x", ["N", 3, 3])], opset=13)),
]

# ---- ops whose output depends on the input's shape only, or is sampled: no gradient; a
# second path (z = y * a) keeps the check non-vacuous ----
_p = _fixed(45, [3, 4], 0.2, 0.8)
CASES += [
    ("EyeLike", op_model("EyeLike", [("a", [3, 4])], {"k": 1}, outputs=["y"],
                         extra_nodes=[helper.make_node("Mul", ["y", "a"], ["z"])])),
    ("RandomNormalLike", op_model("RandomNormalLike", [("a", [3, 4])], {"seed": 2.0},
                                  outputs=["y"],
                                  extra_nodes=[helper.make_node("Mul", ["y", "a"], ["z"])])),
    ("RandomUniformLike", op_model("RandomUniformLike", [("a", [2, 3])], {"seed": 3.0},
                                   outputs=["y"],
                                   extra_nodes=[helper.make_node("Mul", ["y", "a"], ["z"])])),
    ("Bernoulli", op_model("Bernoulli", [("a", _p)], {"seed": 4.0}, outputs=["y"], opset=15,
                           extra_nodes=[helper.make_node("Mul", ["y", "a"], ["z"])])),
]

# ---- DequantizeLinear: the scale's gradient (x is an integer initializer) ----
_q8 = rng(46).integers(-100, 100, size=[2, 3, 5]).astype(np.int8)
_u8 = rng(47).integers(0, 255, size=[4, 3]).astype(np.uint8)
CASES += [
    ("DequantizeLinear_tensor", op_model("DequantizeLinear", [("x", _q8), ("s", [])])),
    ("DequantizeLinear_tensor_zp", op_model("DequantizeLinear",
                                            [("x", _u8), ("s", [1]),
                                             ("z", np.array([7], np.uint8))], opset=13)),
    ("DequantizeLinear_axis1", op_model("DequantizeLinear", [("x", _q8), ("s", [3]),
                                                             ("z", np.array([1, -2, 0], np.int8))])),
    ("DequantizeLinear_axis_neg1", op_model("DequantizeLinear", [("x", _q8), ("s", [5])],
                                            {"axis": -1})),
    ("DequantizeLinear_axis0", op_model("DequantizeLinear", [("x", _u8), ("s", [4])],
                                        {"axis": 0}, opset=19)),
    ("DequantizeLinear_blocked", op_model("DequantizeLinear", [("x", _q8), ("s", [2, 3, 2])],
                                          {"axis": -1, "block_size": 3}, opset=21)),
    ("DequantizeLinear_blocked_axis0", op_model("DequantizeLinear",
                                                [("x", _u8), ("s", [2, 3]),
                                                 ("z", np.full([2, 3], 3, np.uint8))],
                                                {"axis": 0, "block_size": 2}, opset=21)),
    ("DequantizeLinear_ms", op_model("DequantizeLinear", [("x", _q8), ("s", [3])], {"axis": 1},
                                     domain="com.microsoft")),
]

# ---- CumProd (opset 26): with a zero in the input (the rule divides by nothing) ----
_cp = rng(48).uniform(0.5, 1.5, size=[3, 4, 2]) * rng(48).choice([-1.0, 1.0], size=[3, 4, 2])
_cp[1, 2, 0] = 0.0
_cp[2, 0, 1] = 0.0
for _name, _attrs, _axis in [("plain", {}, 1), ("exclusive", {"exclusive": 1}, 0),
                             ("reverse", {"reverse": 1}, -1),
                             ("exclusive_reverse", {"exclusive": 1, "reverse": 1}, 1)]:
    CASES.append((f"CumProd_{_name}", op_model(
        "CumProd", [("x", [3, 4, 2]), ("axis", np.array(_axis, dtype=np.int64))], _attrs,
        opset=26)))
    CASES.append((f"CumProd_{_name}_zeros", op_model(
        "CumProd", [("x", _cp), ("axis", np.array(_axis, dtype=np.int64))], _attrs, opset=26)))
CASES.append(("CumProd_symbolic", op_model(
    "CumProd", [("x", ["N", 5]), ("axis", np.array(1, dtype=np.int64))], opset=26)))
