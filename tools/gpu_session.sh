#!/bin/bash
# Everything the GPU machine is for (issue 8), in one run: build onnxexec with CUDA, check the
# GPU against outside oracles (tests/gpu_check.py: the ONNX node cases, and models against
# the CPU in fp32 and fp16), then benchmark against PyTorch (tools/gpu_bench.py). A short
# summary comes last.
#
#     source .debs/unpack-debs.sh; tools/gpu_session.sh OUT [build|check|ab|profile|bench]...
#
# (.debs: ../shared/gpu/README.md.) With no step named, build, check and bench; profile
# times every node of a few models (bench --profile: the device's times of each step); ab
# times configurations with a kernel choice switched off (OX_CUDA_CONV=-col: no im2col
# convolutions; -graph: no cuDNN graph-API ones; OX_CUDA_LT=0: GEMM biases not in cuBLASLt's
# epilogue; OX_CUDA_VEC=0: scalar elementwise, LayerNorm and attention-softmax kernels),
# alternating; AB_SPECS picks them. Eight files at most come back (the device tool returns
# few): build.log, gpu_check.txt/.json (with the gradients and the checks with im2col and
# graph-API convolutions forced), GPU_BENCHMARKS.md, gpu_bench.txt/.json,
# profile.txt, ab.txt. BENCH_BUDGET (seconds, default 300) bounds the benchmark; BENCH_ARGS
# adds options to it. NODE_DIR names the ONNX node cases (default: the onnx package's, where
# it has them), MORE_CASES more folders of cases; PARITY=0 skips the models,
# PARITY_PRECISIONS=fp32,fp16,bf16 (the default) names their precisions, GRADS=0 skips the
# gradients. OX_CUDA_TRACE=1 runs count the ways prepare chose (see `ways`).
set -u
out=${1:?usage: tools/gpu_session.sh OUT [build|check|bench]...}
shift
steps=${*:-build check bench}
mkdir -p "$out"
# the Debian packages the build and onnxexec need (protobuf-c: ../shared/gpu/README.md), where
# the caller has not sourced them (a bare machine lacks them; sourcing twice is harmless)
if [[ ":$PATH:" != *:/opt/debs/usr/bin:* && -f .debs/unpack-debs.sh ]]; then
    source .debs/unpack-debs.sh
fi
build=build-gpu
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2

if [[ " $steps " == *" build "* ]]; then
    stamp "configure and build"
    cfg=(-S . -B $build -DOX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DOX_BUILD_TESTS=OFF)
    if ! cmake "${cfg[@]}" >"$out/build.log" 2>&1; then
        # the image may lack zlib's headers: Debian's, carried in .debs/extra
        if grep -q ZLIB "$out/build.log" && ls .debs/extra/*.deb >/dev/null 2>&1; then
            for f in .debs/extra/*.deb; do dpkg -x "$f" /opt/debs; done
            z=$(ls /opt/debs/lib/x86_64-linux-gnu/libz.so.1.* | head -1)
            cmake "${cfg[@]}" -DZLIB_INCLUDE_DIR=/opt/debs/usr/include -DZLIB_LIBRARY="$z" \
                >>"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
        else
            tail -40 "$out/build.log"
            exit 1
        fi
    fi
    cmake --build $build -j16 --target onnxexec onnxexec_cuda >>"$out/build.log" 2>&1 ||
        { grep -E "error|Error" "$out/build.log" | head -40; tail -20 "$out/build.log"; exit 1; }
    stamp "built"
fi
bin=$build/onnxexec
work=$build/gpu_models
# OX_CUDA_TRACE=1's lines on stdin (the way prepare chose for each convolution, GEMM and
# attention node) counted by way: "conv graph x12; cuBLASLt algorithm 1 x48; ..."
ways() {
    sed -nE -e "s/^onnxexec cuda: conv '.*' [a-z0-9]+: ([a-z]+) \(timed.*/conv \1/p" \
        -e "s/^onnxexec cuda: gemm '.*' [0-9x]+: (cuBLASLt algorithm [0-9]+) of.*/\1/p" \
        -e "s/^onnxexec cuda: gemm '.*': cuBLAS \(.*/cuBLAS, no cuBLASLt/p" \
        -e "s/^onnxexec cuda: attention '.*' [a-z0-9]+: ([a-z ]+) \(.*/attention \1/p" |
        sort | uniq -c | awk '{c = $1; $1 = ""; printf "%s x%d;", $0, c}'
}
# the ways one run of model $1 at batch $2, precision $3 takes (environment: the caller's)
run_ways() {
    [ -f $work/$1.onnx ] || return 0
    OX_CUDA_TRACE=1 timeout 90 $bin bench $work/$1.onnx --device cuda --batch $2 --precision $3 \
        --runs 1 2>&1 >/dev/null | ways
}
# the ONNX node cases: NODE_DIR, else those of the onnx package when it has them
node=${NODE_DIR:-$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))" 2>/dev/null)}
[ -d "$node" ] || node=

if [[ " $steps " == *" check "* ]]; then
    stamp "models"
    python3 tools/gpu_bench.py --onnxexec $bin --work $work --export-only >>"$out/build.log" 2>&1 ||
        tail -5 "$out/build.log"
    # the nodes of bert_base's first layer as this torch exports them (the exporters of
    # torch 1.13, here, and 2.11, there, write attention differently), for the fusions
    # (run from / : the repository's onnx/ folder would shadow the onnx package)
    [ -f $work/bert_base.onnx ] && (cd / && python3 - "$OLDPWD/$work/bert_base.onnx") \
        >>"$out/build.log" 2>&1 <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
print("bert_base layer 0 as exported:")
for n in m.graph.node:
    if "layers.0/" in n.name and n.op_type not in ("Constant", "Shape", "Unsqueeze"):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        print(" ", n.op_type, list(n.input), "->", list(n.output),
              {k: v for k, v in attrs.items() if k != "value"})
PY
    models=()
    if [ "${PARITY:-1}" = 1 ]; then
        models=(--model models/fashion_mnist_cnn.onnx)
        for m in resnet18 resnet50 mobilenet_v2 bert_base; do
            [ -f $work/$m.onnx ] && models+=(--model $work/$m.onnx:N=2)
        done
        # batch 8: bert_base's attention past the one-kernel size (fp16: tensor cores)
        [ -f $work/bert_base.onnx ] && models+=(--model $work/bert_base.onnx:N=8)
    fi
    nodes=()
    [ -n "$node" ] && nodes=(--node "$node")
    # MORE_CASES: more folders of backend-layout cases (e.g. the shared corpora's models/*
    # and pytorch-* suites, carried in build-data/), each checked like the node cases
    for d in ${MORE_CASES:-}; do [ -d "$d" ] && nodes+=(--node "$d"); done
    # the scatter kernels' atomics: every reduction and element type (tests/scatter_cases.py)
    (cd / && python3 "$OLDPWD/tests/scatter_cases.py" "$OLDPWD/$build/scatter_cases") \
        >>"$out/build.log" 2>&1 && nodes+=(--node $build/scatter_cases)
    # QuantizeLinear, DequantizeLinear and QuantizeDequantize (kernels/cuda/quant.cu): the QDQ
    # cases (tests/qdq_cases.py, numpy's operators as the oracle) with the node cases, and
    # once more here exactly (rtol 0: the CUDA arithmetic is the CPU's), optimized (fused
    # pairs) and not (the two ops), with the steps that left the device
    python3 tests/qdq_cases.py $build/qdq_cases --onnxexec $bin >>"$out/build.log" 2>&1
    if [ -d $build/qdq_cases ]; then
        nodes+=(--node $build/qdq_cases)
        for opt in "" --no-optimize; do
            $bin test $build/qdq_cases --device cuda --rtol 0 --atol 0 -v $opt \
                >"$build/qdq_exact.txt" 2>&1
            echo "qdq cases on the GPU, exact ${opt:-(optimized)}: exit $? ($(tail -1 "$build/qdq_exact.txt"))" |
                tee -a "$out/gpu_check.txt"
            grep -E "FAIL| [1-9][0-9]* on the CPU" "$build/qdq_exact.txt" | head -12 >>"$out/gpu_check.txt"
        done
    fi
    # ONNX Runtime's saved-model operators (tests/ort_fused_cases.py, stop 38): FusedConv and
    # FusedGemm as onnxexec's fused ops, attention through FusedMatMul (OX_VIEW_MATPERM in the
    # views of the CUDA FusedAttention), the channel-blocked networks rewritten: each case
    # that passes on the CPU must pass on the GPU
    python3 tests/ort_fused_cases.py $build/ort_fused_cases --onnxexec $bin >>"$out/build.log" 2>&1
    for d in float nchwc; do
        [ -d $build/ort_fused_cases/$d ] && nodes+=(--node $build/ort_fused_cases/$d)
    done
    stamp "gpu_check"
    timeout ${CHECK_TIMEOUT:-200} python3 tests/gpu_check.py --onnxexec $bin "${nodes[@]}" "${models[@]}" \
        --work $build/gpu_check --timeout 20 --json-out "$out/gpu_check.json" >"$out/gpu_check.txt" 2>&1
    echo "gpu_check exit $?"
    # the im2col convolutions, the cuDNN graph-API ones and the small-K pointwise kernel,
    # each forced wherever it applies (else taken only where faster): every convolution case
    # and two models against the CPU
    if [ -n "$node" ]; then
        mkdir -p $build/conv_cases
        for c in "$node"/test_conv*; do ln -sfn "$(cd "$c" && pwd)" $build/conv_cases/; done
        cm=()
        for m in resnet18 mobilenet_v2; do
            [ -f $work/$m.onnx ] && [ "${PARITY:-1}" = 1 ] && cm+=(--model $work/$m.onnx:N=2)
        done
        for mode in col graph pwk; do
            OX_CUDA_CONV=$mode timeout 120 python3 tests/gpu_check.py --onnxexec $bin \
                --node $build/conv_cases "${cm[@]}" --work $build/gpu_check_$mode --timeout 20 \
                >"$out/gpu_check_$mode.txt" 2>&1
            echo "gpu_check with OX_CUDA_CONV=$mode exit $?" | tee -a "$out/gpu_check.txt"
            grep -v "^  [A-Za-z]* [0-9]*," "$out/gpu_check_$mode.txt" | tail -15 >>"$out/gpu_check.txt"
            rm -f "$out/gpu_check_$mode.txt"
            # that the forced way ran (a candidate that fails or disagrees leaves cuDNN's)
            for spec in "resnet18 2 fp32" "resnet18 2 fp16" "mobilenet_v2 2 fp32" "mobilenet_v2 2 fp16"; do
                [ $mode = col ] && [[ $spec == *fp16 ]] && continue
                [ $mode = graph ] && [[ $spec == mobilenet* ]] && continue
                [ $mode = pwk ] && [[ $spec == resnet* ]] && continue
                echo "  OX_CUDA_CONV=$mode, $spec: $(OX_CUDA_CONV=$mode run_ways $spec)" |
                    tee -a "$out/gpu_check.txt"
            done
        done
    fi
    # FusedAttention on the GPU: tests/optimize.py's attention cases (every exported form,
    # masks, broadcasting, float16; views cuBLAS cannot address go to the CPU) run optimized
    # on the GPU, against the CPU unoptimized and numpy; by the way each size picks (the
    # cases are small: the one-kernel way), with the cuBLAS way forced, and with the tensor-core
    # kernel forced (it takes the float16 cases)
    # (auto: also SkipLayerNormalization's cases and the batch-first Transpose's)
    for way in auto gemm tc; do
        more=()
        [ $way = auto ] && more=(-k 28 -k 29_)
        (cd / && OX_CUDA_ATTENTION=$way timeout 120 python3 "$OLDPWD/tests/optimize.py" \
            --onnxexec "$OLDPWD/$bin" --device cuda -k 27_attention "${more[@]}") \
            >"$out/attention_check.txt" 2>&1
        echo "attention cases on the GPU ($way): exit $? ($(tail -1 "$out/attention_check.txt"))" |
            tee -a "$out/gpu_check.txt"
        grep -E "^FAIL|^ {7}" "$out/attention_check.txt" | head -20 >>"$out/gpu_check.txt"
        rm -f "$out/attention_check.txt"
    done
    for way in auto tc; do
        echo "  OX_CUDA_ATTENTION=$way, bert_base 8 fp16: $(OX_CUDA_ATTENTION=$way run_ways bert_base 8 fp16)" |
            tee -a "$out/gpu_check.txt"
    done
    # gradients (the autograd issue's kind of models): the gradient graph that `grad` writes,
    # on the GPU against the CPU, every parameter's gradient within float32's tolerance
    if [ "${GRADS:-1}" = 1 ]; then
        for m in resnet18 mobilenet_v2 bert_base; do
            [ -f $work/$m.onnx ] || continue
            $bin grad $work/$m.onnx -o $work/$m.grad.onnx >/dev/null 2>>"$out/gpu_check.txt" &&
                timeout 120 $bin compare $work/$m.grad.onnx cpu cuda --outputs-only --shape N=2 \
                    >"$work/$m.grad.txt" 2>/dev/null
            echo "gradients of $m, GPU against CPU: exit $? ($(tail -1 "$work/$m.grad.txt"))" |
                tee -a "$out/gpu_check.txt"
        done
    fi
fi

if [[ " $steps " == *" bench "* ]]; then
    stamp "bench"
    python3 tools/gpu_bench.py --onnxexec $bin --work $work --budget "${BENCH_BUDGET:-300}" \
        --out "$out/GPU_BENCHMARKS.md" --json-out "$out/gpu_bench.json" ${BENCH_ARGS:-} \
        >"$out/gpu_bench.txt" 2>&1
    echo "gpu_bench exit $?"
fi

if [[ " $steps " == *" ab "* ]]; then
    # A/B: each configuration with and without a kernel choice, alternating, medians of
    # AB_RUNS runs each (after 10 warm-ups); the session's first runs are not timed
    stamp "A/B"
    median() { python3 -c "import json,sys; print(json.load(sys.stdin)['median_ms'])" 2>/dev/null; }
    # AB_SPECS: "model batch precision VAR=value" entries separated by ';' (default: below)
    specs=${AB_SPECS:-"resnet18 32 fp16 OX_CUDA_CONV=-graph;resnet50 32 fp16 OX_CUDA_CONV=-graph;\
resnet18 1 fp16 OX_CUDA_CONV=-graph;mobilenet_v2 32 fp16 OX_CUDA_CONV=-pwk;\
mobilenet_v2 32 fp32 OX_CUDA_CONV=-pwk;bert_base 1 fp32 OX_CUDA_ATTENTION=gemm;\
bert_base 32 fp16 OX_CUDA_ATTENTION=gemm;bert_base 1 fp32 OX_CUDA_LT=first;\
bert_base 32 fp16 OX_FUSE_SKIP_LAYERNORM=0;resnet18 32 fp32 OX_CUDA_VEC=0"}
    IFS=';' read -ra spec_list <<<"$specs"
    for spec in "${spec_list[@]}"; do
        set -- $spec
        [ -f $work/$1.onnx ] || continue
        line="$1 b$2 $3, default vs $4:"
        for round in 1 2; do
            a=$($bin bench $work/$1.onnx --device cuda --batch $2 --precision $3 \
                --runs ${AB_RUNS:-100} --json 2>/dev/null | median)
            b=$(env $4 $bin bench $work/$1.onnx --device cuda --batch $2 --precision $3 \
                --runs ${AB_RUNS:-100} --json 2>/dev/null | median)
            line="$line $a / $b ms;"
        done
        echo "$line" | tee -a "$out/ab.txt"
    done
fi

if [[ " $steps " == *" profile "* ]]; then
    # where the time goes: every node timed on its own (no graph replay), per op type
    stamp "profile"
    for spec in "resnet18 1 fp32" "resnet50 1 fp32" "bert_base 1 fp32" "bert_base 1 fp16" \
        "bert_base 32 fp32" "bert_base 32 fp16" "resnet18 32 fp16" "mobilenet_v2 32 fp32"; do
        set -- $spec
        [ -f $work/$1.onnx ] || continue
        OX_CUDA_TRACE=1 $bin bench $work/$1.onnx --device cuda --batch $2 --precision $3 --runs 5 \
            --profile >>"$out/profile.txt" 2>"$work/trace.txt"
        grep -v "^onnxexec cuda: " "$work/trace.txt" >>"$out/profile.txt"
        echo "ways of $spec: $(ways <"$work/trace.txt")" >>"$out/profile.txt"
    done
fi

stamp "summary"
[ -f "$out/gpu_check.txt" ] && grep -v "^  [A-Za-z]* [0-9]*," "$out/gpu_check.txt" | tail -40
[ -f "$out/gpu_bench.txt" ] && grep -v "^\[" "$out/gpu_bench.txt" | tail -45
[ -f "$out/ab.txt" ] && cat "$out/ab.txt"
[ -f "$out/profile.txt" ] && grep -E "^model|^runs|^profile|^ways|^  [A-Za-z]+ +[0-9]+ " "$out/profile.txt" | head -100
true
