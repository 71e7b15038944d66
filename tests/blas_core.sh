#!/bin/sh
# OpenBLAS's kernels as the tool runs them (`onnxexec --version` names them): never older
# than the CPU runs (OpenBLAS's own detection falls back to Prescott's SSE3 kernels on CPU
# models newer than its release: 34 GFLOP/s where SkylakeX's reach 163), and the user's
# OPENBLAS_CORETYPE respected.
#   blas_core.sh ONNXEXEC
X=$1
fails=0
cfg=$(env -u OPENBLAS_CORETYPE "$X" --version | sed -n 's/^BLAS: //p')
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { echo " $flags " | grep -q " $1 "; }
if has avx512f && has avx512bw && has avx512dq && has avx512vl && has avx512cd; then
    want="SkylakeX|Cooperlake|SapphireRapids|Zen4"
elif has avx2 && has fma; then
    want="Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids|Zen4"
else
    want=""
fi
if [ -z "$cfg" ]; then
    echo "FAIL: onnxexec --version names no BLAS"
    fails=1
elif [ -n "$want" ] && ! echo "$cfg" | grep -Eqw "$want"; then
    echo "FAIL: this CPU runs ($want) kernels, and OpenBLAS runs: $cfg"
    fails=1
else
    echo "ok   kernels for this CPU: $cfg"
fi
# the user's choice stands (the kernels every x86-64 OpenBLAS has)
cfg=$(OPENBLAS_CORETYPE=Prescott "$X" --version | sed -n 's/^BLAS: //p')
if echo "$cfg" | grep -qw Prescott; then
    echo "ok   OPENBLAS_CORETYPE=Prescott kept: $cfg"
else
    echo "FAIL: OPENBLAS_CORETYPE=Prescott not kept: $cfg"
    fails=1
fi
exit $fails
