#!/bin/sh
# Broken models and inputs (tests/bad/, made by make_bad.py): each must give a non-zero
# exit, no crash (no signal), and one clear message naming what is wrong.
#   bad_input.sh ONNXEXEC BADDIR TMPDIR
X=$1
B=$2
T=$3
mkdir -p "$T"
fails=0
n=0

# expect DESCRIPTION EXPECTED-SUBSTRING -- ARGS...
expect() {
    what=$1
    want=$2
    shift 3
    n=$((n + 1))
    "$X" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "FAIL $what: exit status 0"
        fails=$((fails + 1))
    elif [ $rc -ge 128 ]; then
        echo "FAIL $what: killed by signal $((rc - 128))"
        fails=$((fails + 1))
    elif ! grep -qF -- "$want" "$T/err"; then
        echo "FAIL $what: message lacks '$want':"
        cat "$T/err"
        fails=$((fails + 1))
    else
        echo "ok   $what: $(tail -n 1 "$T/err")"
    fi
}

expect "missing file" "no_such_model.onnx" -- run "$B/no_such_model.onnx"
expect "empty file" "empty.onnx" -- run "$B/empty.onnx"
expect "truncated file" "truncated.onnx" -- run "$B/truncated.onnx"
expect "not ONNX" "garbage.onnx" -- run "$B/garbage.onnx"
expect "unknown op" "FrobnicateOp" -- run "$B/unknown_op.onnx"
expect "unknown domain" "com.example" -- run "$B/unknown_domain.onnx"
expect "wrong attribute type" "attribute 'axis' must be of type int" -- run "$B/wrong_attr_type.onnx"
expect "undefined input" "ghost" -- run "$B/undefined_input.onnx"
expect "raw_data size" "raw_data" -- run "$B/raw_data_size.onnx"
expect "wrong input shape" "expected shape float[2,3]" -- run "$B/good_relu.onnx" -i "x=$B/input_wrong_shape.npy"
expect "wrong input type" "expected element type float" -- run "$B/good_relu.onnx" -i "x=$B/input_wrong_type.npy"
expect "unknown input name" "nope" -- run "$B/good_relu.onnx" -i "nope=$B/input_ok.npy"
expect "missing input file" "missing.npy" -- run "$B/good_relu.onnx" -i "x=$B/missing.npy"
expect "truncated npy" "input_truncated.npy" -- run "$B/good_relu.onnx" -i "x=$B/input_truncated.npy"
expect "bad -i syntax" "-i" -- run "$B/good_relu.onnx" -i
expect "unknown command" "frobnicate" -- frobnicate
expect "test on a missing dir" "no_such_dir" -- test "$B/no_such_dir"
# limits (tests/test_bad_models.c checks every one through the library)
expect "over --limit nodes" "over the limit nodes=1 (raise it: ox_limits.nodes, or onnxexec --limit nodes=N)" -- run "$B/two_nodes.onnx" --limit nodes=1
expect "over --limit=tensor_bytes" "over the limit tensor_bytes=23" -- info "$B/ext_data.onnx" --limit=tensor_bytes=23
expect "over the default tensor_bytes" "--limit tensor_bytes=N" -- info "$B/huge_dims.onnx"
expect "over --limit plan_bytes" "over the limit plan_bytes=63" -- bench "$B/good_relu.onnx" --limit plan_bytes=63 --runs 1
expect "a zip bomb" "over the limit model_bytes" -- convert "$B/ts_zip_bomb.pt" "$T/bomb.onnx" --shape x=2,3
expect "an .npz bomb" "more than DEFLATE can give" -- compare "$B/good_relu.onnx" cpu "$B/npz_bomb.npz"
expect "--limit unknown name" "no limit 'bogus'" -- run "$B/good_relu.onnx" --limit bogus=1
expect "--limit bad value" "'12Q' is not a positive number" -- info "$B/good_relu.onnx" --limit rank=12Q
expect "--limit rank too high" "rank can be at most 16" -- info "$B/good_relu.onnx" --limit rank=17
expect "--limit without a value" "--limit needs NAME=VALUE" -- info "$B/good_relu.onnx" --limit
expect "--device unknown" "unknown device 'tpu' (expected cpu, cuda or cuda:N)" -- run "$B/good_relu.onnx" --device tpu
expect "--device cuda:x" "expected cuda:N" -- bench "$B/good_relu.onnx" --device cuda:x
expect "--precision unknown" "--precision 'fp8': expected fp32, tf32, fp16 or bf16" -- run "$B/good_relu.onnx" --precision fp8
expect "--precision fp16 on the CPU" "precision other than fp32 is for GPUs" -- run "$B/good_relu.onnx" --precision fp16
expect "compare side cuda:fp8" "expected cuda[:N][:fp32|tf32|fp16][:noopt]" -- compare "$B/good_relu.onnx" cpu cuda:fp8

# and the good model runs, also with limits raised to what the models need (K/M suffixes)
if "$X" run "$B/good_relu.onnx" -i "x=$B/input_ok.npy" >"$T/out" 2>&1; then
    echo "ok   good model runs"
else
    echo "FAIL good model: $(cat "$T/out")"
    fails=$((fails + 1))
fi
if "$X" run "$B/two_nodes.onnx" --limit nodes=2 --limit plan_bytes=1K >"$T/out" 2>&1 &&
    "$X" convert "$B/ts_inflate.pt" "$T/inflate.onnx" --shape x=2,3 --limit model_bytes=8M \
        >"$T/out" 2>&1; then
    echo "ok   models just within raised limits run"
else
    echo "FAIL raised limits: $(cat "$T/out")"
    fails=$((fails + 1))
fi
echo "bad input: $((n - fails)) of $n rejected with a clear message"
[ $fails -eq 0 ]
