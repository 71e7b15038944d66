#!/usr/bin/python3
"""Generate graph/opset_table.def: every version of every operator of the default ONNX domain,
with what changed at that version and how graph/opset.c converts a node across the change.

    tools/gen_opset_table.py > graph/opset_table.def

Versions up to opset 17 come from the schemas of the onnx Python package (Debian's
python3-onnx 1.12: onnx.defs.get_all_schemas_with_history()), which give each version's
attributes (required ones marked '!') and its input and output counts. Opsets 18 to 25 are
written by hand below (LATER), from the operator sets of onnx/defs/operator_sets.h and the
Changelog, as changes to the version before.

Every version after an operator's first must be classified in CHANGES (or LATER): an
adapter function of graph/opset.c (or NULL) and rules that graph/opset.c applies. The
script fails on an unclassified version: nothing is taken as compatible by default.

Rules (';'-separated; "down" is towards the older version, "up" towards this one):
  types           only element types were added: nothing to do either way
  same            the documentation changed, not the meaning (as onnx's own converter has it)
  attr N[=V]      attribute N appeared here (default V); down: absent, or V (then removed)
  legacy N        attribute N went away here; it never changed results: up: removed
  drop N=V        attribute N went away here, V its old default; up: absent or V (removed)
  setup N=V       up: attribute N, absent, becomes V (its old implicit default)
  in K / out K    optional inputs / outputs from index K appeared here; down: absent (an
                  output nothing reads is dropped)
  negaxis N[@out] attribute N may be negative from here; down: negative values are made
                  positive with the rank of input 0 (output 0 with @out), which must be known
  nonneg N        down: attribute N must have no negative value
  nobcast         multidirectional broadcasting appeared here; down: every input's shape is
                  known and the same
  novalue N=V     string attribute N may be V from here; down: it must not be
  unsupported WHY a change onnxexec does not convert: fails both ways, saying why
"""
import sys

import onnx
from onnx import defs

# ---- changes up to opset 17 (versions the onnx package knows) -------------------------------
# "Op-version": (adapter, rules). An adapter is a function of graph/opset.c.
L6 = "legacy consumed_inputs"
CHANGES = {
    "Abs-6": (None, L6 + "; types"), "Abs-13": (None, "types"),
    "Add-6": (None, L6 + "; types"), "Add-7": ("ad_broadcast", ""), "Add-13": (None, "types"),
    "Add-14": (None, "types"),
    "And-7": ("ad_broadcast", ""),
    "ArgMax-11": (None, "negaxis axis"), "ArgMax-12": (None, "attr select_last_index=0"),
    "ArgMax-13": (None, "types"),
    "ArgMin-11": (None, "negaxis axis"), "ArgMin-12": (None, "attr select_last_index=0"),
    "ArgMin-13": (None, "types"),
    "AveragePool-7": (None, "attr count_include_pad=0"), "AveragePool-10": (None, "attr ceil_mode=0"),
    "AveragePool-11": (None, "same"),
    "BatchNormalization-6": ("ad_bn_consumed", ""), "BatchNormalization-7": ("ad_is_test", ""),
    "BatchNormalization-9": (None, "drop spatial=1"), "BatchNormalization-14": ("ad_bn_training", ""),
    "BatchNormalization-15": (None, "types"),
    "Cast-6": ("ad_cast_to", ""), "Cast-9": (None, "types"), "Cast-13": (None, "types"),
    "Ceil-6": (None, L6), "Ceil-13": (None, "types"),
    "Clip-6": (None, L6 + "; same"), "Clip-11": ("ad_clip_inputs", ""), "Clip-12": (None, "types"),
    "Clip-13": (None, "types"),
    "Compress-11": (None, "negaxis axis"),
    "Concat-4": (None, "setup axis=1; types"), "Concat-11": (None, "negaxis axis"),
    "Concat-13": (None, "types"),
    "Constant-9": (None, "types"), "Constant-11": ("ad_constant_sparse", ""),
    "Constant-12": ("ad_constant_values", ""), "Constant-13": (None, "types"),
    "Conv-11": (None, "same"), "ConvTranspose-11": (None, "same"),
    "CumSum-14": (None, "types"),
    "DepthToSpace-11": (None, "attr mode=DCR"), "DepthToSpace-13": (None, "types"),
    "DequantizeLinear-13": ("ad_quant_axis", ""),
    "Div-6": (None, L6 + "; types"), "Div-7": ("ad_broadcast", ""), "Div-13": (None, "types"),
    "Div-14": (None, "types"),
    "Dropout-6": (None, L6), "Dropout-7": ("ad_is_test", ""), "Dropout-10": ("ad_dropout_mask", ""),
    "Dropout-12": ("ad_dropout_ratio", ""), "Dropout-13": (None, "types"),
    "Elu-6": (None, L6),
    "Equal-7": ("ad_broadcast", ""), "Equal-11": (None, "types"), "Equal-13": (None, "types"),
    "Erf-13": (None, "types"),
    "Exp-6": (None, L6), "Exp-13": (None, "types"),
    "Expand-13": (None, "types"),
    "Flatten-9": (None, "types"), "Flatten-11": (None, "negaxis axis"), "Flatten-13": (None, "types"),
    "Floor-6": (None, L6), "Floor-13": (None, "types"),
    "GRU-3": ("ad_gru_yh", "attr linear_before_reset=0"), "GRU-7": ("ad_output_sequence", ""),
    "GRU-14": (None, "attr layout=0"),
    # Gather-11 takes negative indices too; constant ones are checked when going down
    "Gather-11": ("ad_gather_indices", "negaxis axis"), "Gather-13": (None, "types"),
    "GatherElements-13": (None, "types"),
    "GatherND-12": (None, "attr batch_dims=0"), "GatherND-13": (None, "types"),
    "Gemm-6": (None, "same"), "Gemm-7": ("ad_gemm_broadcast", ""), "Gemm-9": (None, "types"),
    "Gemm-11": ("ad_gemm_c", ""), "Gemm-13": (None, "types"),
    "GlobalLpPool-2": ("ad_lp_p", ""),
    "Greater-7": ("ad_broadcast", ""), "Greater-9": (None, "types"), "Greater-13": (None, "types"),
    "GreaterOrEqual-16": (None, "types"),
    "HardSigmoid-6": (None, L6),
    "Hardmax-11": (None, "negaxis axis"), "Hardmax-13": ("ad_softmax_axis", ""),
    "Identity-13": (None, "types"), "Identity-14": (None, "types"), "Identity-16": (None, "types"),
    "If-11": (None, "same"), "If-13": (None, "types"), "If-16": (None, "types"),
    "InstanceNormalization-6": (None, L6),
    "IsNaN-13": (None, "types"),
    "LRN-13": (None, "types"),
    "LSTM-7": ("ad_output_sequence", ""), "LSTM-14": (None, "attr layout=0"),
    "LeakyRelu-6": (None, L6), "LeakyRelu-16": (None, "types"),
    "Less-7": ("ad_broadcast", ""), "Less-9": (None, "types"), "Less-13": (None, "types"),
    "LessOrEqual-16": (None, "types"),
    "Log-6": (None, L6), "Log-13": (None, "types"),
    "LogSoftmax-11": (None, "negaxis axis"), "LogSoftmax-13": ("ad_softmax_axis", ""),
    "Loop-11": (None, "same"), "Loop-13": (None, "types"), "Loop-16": (None, "types"),
    "LpPool-2": ("ad_lp_p", ""), "LpPool-11": (None, "same"),
    "MatMul-9": (None, "types"), "MatMul-13": (None, "types"),
    "Max-6": (None, L6), "Max-8": (None, "nobcast"), "Max-12": (None, "types"), "Max-13": (None, "types"),
    "MaxPool-8": (None, "attr storage_order=0; out 1"),
    "MaxPool-10": (None, "attr ceil_mode=0; attr dilations=ones"), "MaxPool-11": (None, "same"),
    "MaxPool-12": (None, "types"),
    "MaxUnpool-11": (None, "same"),
    "Mean-6": (None, L6), "Mean-8": (None, "nobcast"), "Mean-13": (None, "types"),
    "MeanVarianceNormalization-13": (None, "types"),
    "Min-6": (None, L6), "Min-8": (None, "nobcast"), "Min-12": (None, "types"), "Min-13": (None, "types"),
    "Mod-13": (None, "types"),
    "Mul-6": (None, L6 + "; types"), "Mul-7": ("ad_broadcast", ""), "Mul-13": (None, "types"),
    "Mul-14": (None, "types"),
    "Neg-6": (None, L6 + "; types"), "Neg-13": (None, "types"),
    "NegativeLogLikelihoodLoss-13": (None, "same"),
    "NonMaxSuppression-11": (None, "same"),
    "NonZero-13": (None, "types"),
    "OneHot-11": (None, "negaxis axis"),
    "Or-7": ("ad_broadcast", ""),
    "PRelu-6": (None, L6), "PRelu-7": (None, "same"), "PRelu-9": (None, "types"),
    "PRelu-16": (None, "types"),
    "Pad-2": ("ad_pad_paddings", ""), "Pad-11": ("ad_pad_inputs", ""), "Pad-13": (None, "types"),
    "Pow-7": ("ad_broadcast", ""), "Pow-12": (None, "types"), "Pow-13": (None, "types"),
    "Pow-15": (None, "types"),
    "QuantizeLinear-13": ("ad_quant_axis", ""),
    "RNN-7": ("ad_output_sequence", ""), "RNN-14": (None, "attr layout=0"),
    "Reciprocal-6": (None, L6), "Reciprocal-13": (None, "types"),
    "ReduceL1-11": (None, "negaxis axes"), "ReduceL1-13": (None, "types"),
    "ReduceL2-11": (None, "negaxis axes"), "ReduceL2-13": (None, "types"),
    "ReduceLogSum-11": (None, "negaxis axes"), "ReduceLogSum-13": (None, "types"),
    "ReduceLogSumExp-11": (None, "negaxis axes"), "ReduceLogSumExp-13": (None, "types"),
    "ReduceMax-11": (None, "negaxis axes"), "ReduceMax-12": (None, "types"),
    "ReduceMax-13": (None, "types"),
    "ReduceMean-11": (None, "negaxis axes"), "ReduceMean-13": (None, "types"),
    "ReduceMin-11": (None, "negaxis axes"), "ReduceMin-12": (None, "types"),
    "ReduceMin-13": (None, "types"),
    "ReduceProd-11": (None, "negaxis axes"), "ReduceProd-13": (None, "types"),
    "ReduceSum-11": (None, "negaxis axes"), "ReduceSum-13": ("ad_axes_input", ""),
    "ReduceSumSquare-11": (None, "negaxis axes"), "ReduceSumSquare-13": (None, "types"),
    "Relu-6": (None, L6), "Relu-13": (None, "types"), "Relu-14": (None, "types"),
    "Reshape-5": ("ad_reshape_shape", L6), "Reshape-13": (None, "types"),
    "Reshape-14": (None, "attr allowzero=0"),
    "Resize-11": ("ad_resize_11", ""), "Resize-13": ("ad_resize_13", ""),
    "RoiAlign-16": ("ad_roialign_mode", ""),
    "Scan-9": (None, "unsupported Scan-8 has batches and sequence_lens, Scan-9 neither"), "Scan-11": (None, "nonneg scan_input_axes; nonneg scan_output_axes"),
    "Scan-16": (None, "types"),
    "Scatter-11": ("ad_scatter_rename", ""),
    "ScatterElements-13": (None, "types"), "ScatterElements-16": (None, "attr reduction=none"),
    "ScatterND-13": (None, "types"), "ScatterND-16": (None, "attr reduction=none"),
    "Selu-6": ("ad_selu_defaults", L6),
    "Shape-13": (None, "types"), "Shape-15": (None, "attr start=0; attr end"),
    "Sigmoid-6": (None, L6), "Sigmoid-13": (None, "types"),
    "Sign-13": (None, "types"),
    "Size-13": (None, "types"),
    "Slice-10": ("ad_slice_inputs", ""), "Slice-11": ("ad_slice_negaxes", ""),
    "Slice-13": (None, "types"),
    "Softmax-11": (None, "negaxis axis"), "Softmax-13": ("ad_softmax_axis", ""),
    "SoftmaxCrossEntropyLoss-13": (None, "types"),
    "SpaceToDepth-13": (None, "types"),
    "Split-2": ("ad_split_legacy", ""), "Split-11": (None, "negaxis axis"),
    "Split-13": ("ad_split_input", ""),
    "Sqrt-6": (None, L6), "Sqrt-13": (None, "types"),
    "Squeeze-11": (None, "negaxis axes"), "Squeeze-13": ("ad_axes_input", ""),
    "Sub-6": (None, L6 + "; types"), "Sub-7": ("ad_broadcast", ""), "Sub-13": (None, "types"),
    "Sub-14": (None, "types"),
    "Sum-6": (None, L6), "Sum-8": (None, "nobcast"), "Sum-13": (None, "types"),
    "Tanh-6": (None, L6), "Tanh-13": (None, "types"),
    "Tile-6": (None, "unsupported Tile-1 takes tiles and axis, Tile-6 repeats per axis"), "Tile-13": (None, "types"),
    "TopK-10": ("ad_topk_k", ""), "TopK-11": (None, "attr largest=1; attr sorted=1; negaxis axis"),
    "Transpose-13": (None, "types"),
    "Unsqueeze-11": (None, "negaxis axes@out"), "Unsqueeze-13": ("ad_axes_input", ""),
    "Upsample-7": ("ad_upsample_scales_attr", ""), "Upsample-9": ("ad_upsample_scales_input", ""),
    "Upsample-10": ("ad_upsample_to_resize", ""),
    "Where-16": (None, "types"),
    "Xor-7": ("ad_broadcast", ""),
}

# First versions with an adapter that renames the node into an older operator going down.
FIRST = {
    "Resize-10": "ad_resize_to_upsample",
    "ScatterElements-11": "ad_scatter_rename",
}

# ---- opsets 18 to 25, by hand -----------------------------------------------------------------
# (op, since, adapter, rules, changes to the version before: "+attr", "-attr", "in A-B",
#  "out A-B"); a new operator is ("new", with its attributes "*": not checked).
TYPES22 = """EyeLike RandomUniform RandomNormal RandomUniformLike RandomNormalLike Multinomial
Bernoulli ThresholdedRelu Selu Elu Mish HardSigmoid HardSwish Softsign Softplus Sin Cos Tan Asin
Acos Atan Sinh Cosh Asinh Acosh Atanh Round Det NegativeLogLikelihoodLoss AveragePool MaxPool
MaxUnpool LpPool MaxRoiPool Conv ConvTranspose DeformConv GlobalAveragePool GlobalMaxPool
GlobalLpPool InstanceNormalization LpNormalization Dropout RoiAlign RNN GRU LSTM
GridSample""".split()
# element types only (float8, int4, float4e2m1, float8e8m0, int2/uint2 at 19, 21, 23, 24, 25)
TYPES_IO = """Constant ConstantOfShape Flatten Identity If Loop Pad Reshape Scan Shape Size Squeeze
Transpose Unsqueeze""".split()
REDUCE18 = "ReduceSumSquare ReduceLogSum ReduceLogSumExp ReduceL1 ReduceL2 ReduceMax ReduceMin ReduceMean ReduceProd".split()

LATER = [
    # opset 18
    ("Pad", 18, "ad_pad_axes", "", ["in 2-4"]),
    ("CenterCropPad", 18, "new"), ("Col2Im", 18, "new"), ("Mish", 18, "new"),
    ("BitwiseAnd", 18, "new"), ("BitwiseOr", 18, "new"), ("BitwiseXor", 18, "new"),
    ("BitwiseNot", 18, "new"), ("GroupNormalization", 18, "new"),
    ("Resize", 18, None, "attr antialias=0; attr axes; attr keep_aspect_ratio_policy=stretch",
     ["+antialias", "+axes", "+keep_aspect_ratio_policy"]),
    # both take an optional tensor or sequence from 18 (before: an optional only)
    ("OptionalGetElement", 18, "ad_optional_input", "", []),
    ("OptionalHasElement", 18, "ad_optional_input", "", ["in 0-1"]),
    ("Split", 18, "ad_split_num_outputs", "", ["+num_outputs"]),
    ("ScatterND", 18, None, "novalue reduction=max; novalue reduction=min", []),
    ("ScatterElements", 18, None, "novalue reduction=max; novalue reduction=min", []),
    ("LpPool", 18, None, "attr ceil_mode=0; attr dilations=ones", ["+ceil_mode", "+dilations"]),
] + [(op, 18, "ad_axes_input", "", ["-axes", "+noop_with_empty_axes", "in 1-2"]) for op in REDUCE18] + [
    # opset 19
    ("Equal", 19, None, "types", []),
    ("AveragePool", 19, None, "attr dilations=ones", ["+dilations"]),
    ("Cast", 19, None, "attr saturate=1; types", ["+saturate"]),
    ("CastLike", 19, None, "attr saturate=1; types", ["+saturate"]),
    ("DeformConv", 19, "new"),
    ("DequantizeLinear", 19, None, "types", []),
    ("QuantizeLinear", 19, None, "attr saturate=1; types", ["+saturate"]),
    ("Pad", 19, None, "novalue mode=wrap", []),
    ("Resize", 19, None, "novalue coordinate_transformation_mode=half_pixel_symmetric", []),
] + [(op, 19, None, "types", []) for op in "Constant Identity If Loop Reshape Scan Shape Size".split()] + [
    # opset 20
    ("AffineGrid", 20, "new"), ("Gelu", 20, "new"), ("ImageDecoder", 20, "new"),
    ("RegexFullMatch", 20, "new"), ("StringConcat", 20, "new"), ("StringSplit", 20, "new"),
    ("ConstantOfShape", 20, None, "types", []),
    ("DFT", 20, "ad_dft_axis", "", ["-axis", "in 1-3"]),
    ("GridSample", 20, "ad_gridsample_modes", "", []),
    ("IsInf", 20, None, "types", []), ("IsNaN", 20, None, "types", []),
    ("ReduceMax", 20, None, "types", []), ("ReduceMin", 20, None, "types", []),
] + [(op, 21, None, "types", []) for op in TYPES_IO + ["Cast", "CastLike", "QLinearMatMul"]] + [
    # opset 21: blocked quantization; GroupNormalization's scale and bias per channel
    ("DequantizeLinear", 21, None, "attr block_size=0; types", ["+block_size"]),
    ("QuantizeLinear", 21, None, "attr block_size=0; attr output_dtype=0; types",
     ["+block_size", "+output_dtype"]),
    ("GroupNormalization", 21, "ad_groupnorm_channels", "attr stash_type=1", ["+stash_type"]),
] + [(op, 22, None, "types", []) for op in TYPES22] + [
    # opset 23
    ("Attention", 23, "new"), ("RMSNormalization", 23, "new"), ("RotaryEmbedding", 23, "new"),
    ("DequantizeLinear", 23, None, "attr output_dtype=0; types", ["+output_dtype"]),
    ("QuantizeLinear", 23, None, "attr precision=0; types", ["+precision"]),
] + [(op, 23, None, "types", []) for op in TYPES_IO + ["Cast", "CastLike"]] + [
    # opset 24: Attention takes nonpad_kv_seqlen, and attn_mask may be shorter than the keys
    ("Attention", 24, "ad_attention_mask", "in 6", ["in 3-7"]),
    ("Swish", 24, "new"), ("TensorScatter", 24, "new"),
    ("SplitToSequence", 24, None, "types", []), ("TopK", 24, None, "types", []),
] + [(op, 24, None, "types", []) for op in TYPES_IO + ["Cast", "CastLike", "DequantizeLinear",
                                                       "QuantizeLinear"]] + [
    # opset 25: int2/uint2; Cast's round_mode for float8e8m0
    ("Cast", 25, None, "attr round_mode=up; types", ["+round_mode"]),
    ("CastLike", 25, None, "attr round_mode=up; types", ["+round_mode"]),
] + [(op, 25, None, "types", []) for op in TYPES_IO + ["DequantizeLinear", "QuantizeLinear"]]

MAX_OPSET = 25

# TensorProto element types by name (the innermost type of seq(...) and optional(...)).
DTYPES = {"float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7,
          "string": 8, "bool": 9, "float16": 10, "double": 11, "uint32": 12, "uint64": 13,
          "complex64": 14, "complex128": 15, "bfloat16": 16}


# Kinds of value, above the element type bits.
KINDS = {"tensor": 27, "seq": 28, "optional": 29, "sparse_tensor": 30}


def type_mask(type_strs):
    mask = 0
    for t in type_strs:
        inner = t
        while "(" in inner:
            inner = inner[inner.index("(") + 1:inner.rindex(")")]
        kind = t[:t.index("(")]
        if inner not in DTYPES or kind not in KINDS:
            raise SystemExit(f"gen_opset_table.py: unknown type {t!r}")
        mask |= 1 << DTYPES[inner] | 1 << KINDS[kind]
    return mask


def io_masks(schema):
    """Element types each input and output may have, as bit masks by TensorProto number:
    "in,in,...|out,..." (the last of a list stands for any further ones)."""
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    def masks(params):
        return ",".join(hex(type_mask(allowed.get(p.typeStr, [p.typeStr]))) for p in params)
    return masks(schema.inputs) + "|" + masks(schema.outputs)


def main():
    rows = {}  # op -> {since: row}
    for s in defs.get_all_schemas_with_history():
        if s.domain != "" or s.since_version > 17:
            continue
        attrs = []
        for name in sorted(s.attributes):
            attrs.append(name + ("!" if s.attributes[name].required else ""))
        max_in = -1 if s.max_input > 1000 else s.max_input
        max_out = -1 if s.max_output > 1000 else s.max_output
        rows.setdefault(s.name, {})[s.since_version] = {
            "attrs": ",".join(attrs), "min_in": s.min_input, "max_in": max_in,
            "min_out": s.min_output, "max_out": max_out, "adapter": None, "rules": "",
            "deprecated": s.deprecated, "types": io_masks(s)}
    errors = []
    for op, vs in rows.items():
        first = min(vs)
        for v, r in vs.items():
            key = f"{op}-{v}"
            if v == first:
                r["rules"] = "new"
                r["adapter"] = FIRST.get(key)
                continue
            if key not in CHANGES:
                errors.append(f"{key} is not classified")
                continue
            r["adapter"], r["rules"] = CHANGES[key]
            if r["deprecated"]:
                r["rules"] = ("removed; " + r["rules"]).strip("; ")
    for key in CHANGES:
        op, v = key.rsplit("-", 1)
        if int(v) not in rows.get(op, {}):
            errors.append(f"{key} is classified but is no version of the onnx package")
    for entry in LATER:
        op, since = entry[0], entry[1]
        vs = rows.setdefault(op, {})
        if since in vs:
            errors.append(f"{op}-{since} twice")
            continue
        if entry[2] == "new":
            vs[since] = {"attrs": "*", "min_in": -1, "max_in": -1, "min_out": -1, "max_out": -1,
                         "adapter": None, "rules": "new", "deprecated": False, "types": "*"}
            continue
        prev = [v for v in vs if v < since]
        if not prev:
            errors.append(f"{op}-{since}: no earlier version")
            continue
        r = dict(vs[max(prev)])
        r["adapter"], r["rules"], r["deprecated"] = entry[2], entry[3], False
        attrs = [a for a in r["attrs"].split(",") if a] if r["attrs"] != "*" else None
        for d in entry[4]:
            if d[0] in "+-":
                if attrs is not None and d[0] == "+":
                    attrs.append(d[1:])
                elif attrs is not None:
                    attrs = [a for a in attrs if a.rstrip("!") != d[1:]]
            elif d.startswith("in "):
                r["min_in"], r["max_in"] = (int(x) for x in d[3:].split("-"))
            elif d.startswith("out "):
                r["min_out"], r["max_out"] = (int(x) for x in d[4:].split("-"))
            else:
                errors.append(f"{op}-{since}: bad change {d!r}")
        r["attrs"] = "*" if attrs is None else ",".join(sorted(attrs))
        # new element types or inputs: not described here, so not checked
        if "types" in r["rules"] or any(d.startswith(("in ", "out ")) for d in entry[4]):
            r["types"] = "*"
        vs[since] = r
    if errors:
        sys.exit("gen_opset_table.py:\n  " + "\n  ".join(errors))
    out = sys.stdout
    out.write("/* Generated by tools/gen_opset_table.py: do not edit; edit the script and run it.\n"
              " *\n"
              " * Every version of every operator of the default ONNX domain up to opset "
              f"{MAX_OPSET}, one row each:\n"
              " * OX_OPSET_ROW(op, since, min_in, max_in, min_out, max_out, attrs, types, rules,\n"
              " *              adapter)\n"
              " * attrs: the version's attributes, required ones marked '!' (\"*\": not checked);\n"
              " * types: the element types each input and output takes, bit masks by TensorProto\n"
              " * number, with the kinds of value at bits 27 (tensor), 28 (sequence), 29\n"
              " * (optional), 30 (sparse tensor); \"in,in,..|out,..\" (the last of a list also\n"
              " * covers any further ones; \"*\": not checked);\n"
              " * counts of -1: unbounded (max) or not checked; rules and adapter: how a node\n"
              " * crosses from the version before to this one (tools/gen_opset_table.py lists the\n"
              " * rules; \"new\": the first version). No include guard: read by an X-macro. */\n")
    out.write(f"#define OX_OPSET_TABLE_MAX {MAX_OPSET}\n")
    for op in sorted(rows):
        for v in sorted(rows[op]):
            r = rows[op][v]
            out.write(f'OX_OPSET_ROW("{op}", {v}, {r["min_in"]}, {r["max_in"]}, {r["min_out"]}, '
                      f'{r["max_out"]}, "{r["attrs"]}", "{r["types"]}", "{r["rules"]}", '
                      f'{r["adapter"] or "NULL"})\n')


if __name__ == "__main__":
    main()
