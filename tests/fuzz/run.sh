#!/bin/sh
# Run fuzz targets for a chosen time each (docs/FUZZING.md).
#
#     tests/fuzz/run.sh [--build DIR] [--time SECONDS] [--seeds-max N] [--replay-only]
#                       TARGET... | all
#
# DIR is a build folder configured with CC=clang -DOX_FUZZ=ON (default: build-fuzz beside this
# script's checkout). For each target, one after the other:
#   1. the regression corpus, tests/fuzz/regress/TARGET/ (every input that ever crashed or
#      hung), is replayed; a crash there fails the target;
#   2. unless --replay-only, the target fuzzes for SECONDS (default 60) from its corpus
#      DIR/fuzz/corpus/TARGET (what earlier runs found; kept) and its seeds
#      DIR/fuzz/seeds/TARGET (made by tests/fuzz/make_seeds.py when absent, at most N per
#      target with --seeds-max), with the dictionary tests/fuzz/dict/TARGET.dict if there is one.
# Findings go to DIR/fuzz/artifacts/TARGET/ (crash-*, leak-*, timeout-*, oom-*); a target's
# full log to DIR/fuzz/logs/TARGET.log. It prints, per target: executions, exec/s, coverage
# (cov, ft: libFuzzer's edge and feature counts), corpus size, peak RSS and findings; the
# exit status is 1 when any target crashed, hung, ran out of memory or leaked.
#
# Limits: -timeout=10 (seconds per input: over it is a hang), -rss_limit_mb=2048, and ASan's
# allocator returns NULL for a single request over 1 GiB (max_allocation_size_mb,
# allocator_may_return_null), so that a file asking for a huge tensor exercises the library's
# out-of-memory path instead of stopping the run. One process, one core; run it under
# `nice -n 19` on a shared machine.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-fuzz"
time=60
seeds_max=0
replay_only=0
targets=""
all="fuzz_onnx fuzz_tensor fuzz_zip fuzz_pickle fuzz_ts_parse fuzz_e2e"
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --time) time=$2; shift 2 ;;
    --seeds-max) seeds_max=$2; shift 2 ;;
    --replay-only) replay_only=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    all) targets="$targets $all"; shift ;;
    fuzz_*) targets="$targets $1"; shift ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$targets" ] || { echo "run.sh: name targets, or all (see --help)" >&2; exit 2; }
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build folder $build" >&2; exit 2; }

export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=1024:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export OPENBLAS_NUM_THREADS=1
limits="-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048"

failed=0
for t in $targets; do
    bin="$build/tests/fuzz/$t"
    [ -x "$bin" ] || { echo "run.sh: $bin is not built (cmake --build $build --target fuzz)" >&2; exit 2; }
    regress="$here/regress/$t"
    art="$build/fuzz/artifacts/$t"
    log="$build/fuzz/logs/$t.log"
    mkdir -p "$art" "$build/fuzz/logs" "$build/fuzz/corpus/$t"
    # 1. the regression corpus (each file run once; a folder with no files passes)
    n_regress=$(find "$regress" -type f 2>/dev/null | wc -l)
    if [ "$n_regress" -gt 0 ]; then
        if ! "$bin" $limits -runs=0 -artifact_prefix="$art/" "$regress" >"$log.regress" 2>&1; then
            echo "$t: FAILED on the regression corpus ($n_regress inputs): see $log.regress"
            tail -n 40 "$log.regress"
            failed=1
            continue
        fi
    fi
    echo "$t: regression corpus: $n_regress inputs replayed, no crash"
    [ "$replay_only" -eq 1 ] && continue
    # 2. seeds, then fuzzing for $time seconds
    if [ ! -d "$build/fuzz/seeds/$t" ]; then
        /usr/bin/python3 "$here/make_seeds.py" "$build/fuzz/seeds" --max "$seeds_max" >/dev/null ||
            { echo "run.sh: make_seeds.py failed" >&2; exit 2; }
    fi
    dict=""
    [ -f "$here/dict/$t.dict" ] && dict="-dict=$here/dict/$t.dict"
    before=$(ls "$art" | wc -l)
    start=$(date +%s)
    "$bin" $limits $dict -max_total_time="$time" -print_final_stats=1 -close_fd_mask=3 \
        -artifact_prefix="$art/" "$build/fuzz/corpus/$t" "$build/fuzz/seeds/$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    after=$(ls "$art" | wc -l)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.*\(cov: [0-9]* ft: [0-9]* corp: [^ ]*\).*/\1/p')
    printf '%s: %s s, %s executions, %s exec/s, %s, peak rss %s MB, %d new findings\n' \
        "$t" "$secs" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${rss:-?}" $((after - before))
    if [ "$rc" -ne 0 ] || [ "$after" -ne "$before" ]; then
        echo "$t: FAILED (status $rc): see $log; findings in $art"
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -n 20
        failed=1
    fi
done
exit $failed
