#!/bin/bash
# The command-line tool under valgrind's memcheck on the shipped models: every run must
# report 0 errors and 0 leaked bytes (definite, indirect and possible leaks all count).
#
#   valgrind.sh ONNXEXEC SOURCE_DIR SCRATCH
#
# Runs: `run` (optimized and --no-optimize, 2 threads), `bench` (a few runs), `info`, `graph`,
# `plan`, `convert` (export, optimized), `grad` (the gradient graph written out), `gradcheck`,
# `compare cpu cpu:noopt`, `train` (one small epoch) and `run` of a TorchScript archive when
# the shared fixtures are beside the checkout. Exit status: 0 clean, 1 errors or leaks,
# 77 skipped (no valgrind; tools/install-deps.sh installs it).
set -u
EXE=$1
SRC=$2
T=$3
if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind not found (tools/install-deps.sh installs it)"
    exit 77
fi
rm -rf "$T" && mkdir -p "$T" || exit 1
M=$SRC/models
export OPENBLAS_NUM_THREADS=1 # the tool would restart itself to set it: keep one process
# and so it would to set OPENBLAS_CORETYPE where OpenBLAS picked older kernels than the CPU
# runs (valgrind follows no exec); SSE3 kernels, which valgrind's CPU runs
export OPENBLAS_CORETYPE=Prescott
fail=0
n=0
# NAME OK_STATUS ARGS...: memcheck one command (its output in $T/NAME.log); it passes when
# valgrind finds nothing and the command exits 0 or OK_STATUS
check_status() {
    local name=$1 okst=$2
    shift 2
    n=$((n + 1))
    valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
        "$EXE" "$@" >"$T/$name.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq "$okst" ]; then
        echo "ok   $name"
    else
        echo "FAIL $name (exit $rc; 99: valgrind found errors or leaks); $T/$name.log:"
        tail -30 "$T/$name.log"
        fail=1
    fi
}
check() { # NAME ARGS...: the command must succeed
    local name=$1
    shift
    check_status "$name" 0 "$@"
}
check run run "$M/fashion_mnist_cnn.onnx" --threads 2 -o "$T/out"
check run_noopt run "$M/fashion_mnist_cnn.onnx" --no-optimize --threads 2
check bench bench "$M/fashion_mnist_cnn.onnx" --runs 3 --threads 2
check info info "$M/fashion_mnist_cnn.onnx" --json
check graph graph "$M/fashion_mnist_cnn.onnx" -o "$T/graph.dot"
check plan plan "$M/fashion_mnist_cnn.onnx" -o "$T/plan.svg" --batch 2
check convert convert "$M/fashion_mnist_cnn.onnx" "$T/converted.onnx" --optimize
check grad grad "$M/fmnist_cnn.onnx" -o "$T/grad.onnx"
# valgrind has no AVX-512, so the kernels take their portable paths there; a float32
# finite difference that lands on a ReLU kink may then disagree (exit 1): memory is judged
check_status gradcheck 1 gradcheck "$M/fmnist_cnn.onnx" --checks 2
check compare compare "$M/fashion_mnist_cnn.onnx" cpu cpu:noopt
if [ -d /usr/share/datasets/fashion-mnist ]; then
    check train train "$M/fmnist_cnn.onnx" --data /usr/share/datasets/fashion-mnist --limit 64 \
        --test-limit 32 --batch 32 --threads 2 -o "$T/trained.onnx"
fi
TS=$SRC/../shared/torchscript/torch-2.11
if [ -f "$TS/mlp_traced.pt" ]; then
    check torchscript run "$TS/mlp_traced.pt"
fi
if [ $fail -eq 0 ]; then
    echo "valgrind: $n commands, 0 errors, 0 leaks"
    rm -rf "$T"
fi
exit $fail
