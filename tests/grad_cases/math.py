"""Gradient cases: elementwise math, MatMul, Gemm (graph/grad_math.c)."""
from . import op_model

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
