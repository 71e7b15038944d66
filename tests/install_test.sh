#!/bin/bash
# The installed onnxexec, as a user gets it: `cmake --install BUILD --prefix TMP/prefix`,
# then examples/run_model.c built against that tree with pkg-config (shared; libonnxexec.a
# with --static; all static with cc -static) and with CMake's find_package
# (onnxexec::onnxexec and onnxexec::onnxexec_static), each binary run on the shipped
# Fashion-MNIST model and its printed values compared with PyTorch's logits
# (models/fashion_mnist_cnn.expected.npy) or, for an input of ones, with
# models/numpy_reference.py. Also: the installed files, the SONAME and its links, the
# symbols (the shared library exports exactly the functions of onnxexec.h, the static one
# has no other global names), the header compiling alone, and the man page rendering
# without warnings and describing every option of every command's --help; the Python
# module, installed, finding the installed library and giving PyTorch's logits.
#
#   install_test.sh BUILD_DIR SOURCE_DIR CMAKE CC PYTHON [EXTRA_FLAGS]
#
# EXTRA_FLAGS go to every compile and link (the sanitizer flags of an OX_SANITIZE build).
# Exit status: 0 pass, 1 fail, 77 skipped (a tool it needs is missing; tools/install-deps.sh
# installs them all).
# shellcheck disable=SC2015 # `test && ok ... || bad ...`: ok (an echo) does not fail
set -u
BUILD=$1
SRC=$2
CMAKE=$3
CC=$4
PY=$5
EXTRA=${6:-}

missing=""
for tool in pkg-config make readelf nm groff "$CMAKE" "$CC" "$PY"; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -z "$missing" ] && ! "$PY" -c "import numpy, onnx" 2>/dev/null; then
    missing=" python3-numpy/python3-onnx"
fi
if [ -n "$missing" ]; then
    echo "SKIP: not found:$missing (tools/install-deps.sh installs them)"
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/onnxexec-install.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
P=$T/prefix
M=$SRC/models/fashion_mnist_cnn.onnx
export OPENBLAS_NUM_THREADS=1 # see examples/run_model.c
fails=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
# run LOG COMMAND...: run quietly; on failure show the log.
run() {
    log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        bad "$*"
        sed 's/^/     | /' "$log" | tail -30
        return 1
    fi
}

# ---- the installed tree --------------------------------------------------------------
run "$T/install.log" "$CMAKE" --install "$BUILD" --prefix "$P" || exit 1
for f in lib/libonnxexec.so.0.1.0 lib/libonnxexec.so.1 lib/libonnxexec.so lib/libonnxexec.a \
    include/onnxexec.h bin/onnxexec share/man/man1/onnxexec.1 lib/pkgconfig/onnxexec.pc \
    lib/cmake/onnxexec/onnxexecConfig.cmake lib/cmake/onnxexec/onnxexecConfigVersion.cmake \
    lib/cmake/onnxexec/onnxexecTargets.cmake; do
    [ -e "$P/$f" ] || bad "not installed: $f"
done
version=$("$P/bin/onnxexec" --version | sed -n 's/^onnxexec //p')
so=$(cd "$P/lib" && ls libonnxexec.so.*.*.* 2>/dev/null)
[ "$so" = "libonnxexec.so.$version" ] && ok "library file $so (onnxexec --version: $version)" ||
    bad "library file '$so', onnxexec --version '$version'"
soname=$(readelf -d "$P/lib/$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libonnxexec.so.1 ] && ok "SONAME $soname" || bad "SONAME '$soname'"
[ "$(readlink "$P/lib/libonnxexec.so.1")" = "$so" ] &&
    [ "$(readlink "$P/lib/libonnxexec.so")" = libonnxexec.so.1 ] &&
    ok "links libonnxexec.so -> libonnxexec.so.1 -> $so" || bad "symbolic links of $so"

# ---- symbols: the header's functions, nothing else ------------------------------------
# The header's functions, from the preprocessed header (no comments left).
"$CC" -E -P -x c "$P/include/onnxexec.h" | grep -oE '\box_[a-z0-9_]+ *\(' | tr -d ' (' |
    sort -u >"$T/api.txt"
nm -D --defined-only "$P/lib/$so" | awk '{print $3}' | sort -u >"$T/dynsym.txt"
nm -g --defined-only "$P/lib/libonnxexec.a" | awk 'NF == 3 {print $3}' | sort -u >"$T/arsym.txt"
n_api=$(wc -l <"$T/api.txt")
if [ "$n_api" -lt 40 ]; then
    bad "only $n_api functions found in onnxexec.h"
elif diff "$T/api.txt" "$T/dynsym.txt" >"$T/diff"; then
    ok "libonnxexec.so exports the $n_api functions of onnxexec.h and nothing else"
else
    bad "libonnxexec.so's exports differ from onnxexec.h's functions (<: header, >: library):"
    sed 's/^/     | /' "$T/diff" | head -30
fi
grep -v '^ox_' "$T/dynsym.txt" >"$T/non_ox" && bad "non-ox_ exports: $(head -5 "$T/non_ox")"
if diff "$T/api.txt" "$T/arsym.txt" >"$T/diff"; then
    ok "libonnxexec.a: global symbols are the $n_api functions of onnxexec.h"
else
    bad "libonnxexec.a's global symbols differ from onnxexec.h's functions:"
    sed 's/^/     | /' "$T/diff" | head -30
fi

# ---- the header alone ------------------------------------------------------------------
printf '#include <onnxexec.h>\nint main(void) { return ox_version() == 0; }\n' >"$T/alone.c"
run "$T/alone.log" "$CC" -std=c99 -Wall -Wextra -pedantic -Werror -I"$P/include" -c "$T/alone.c" \
    -o "$T/alone.o" && ok "onnxexec.h compiles alone (-std=c99 -Wall -Wextra -pedantic -Werror)"
if command -v c++ >/dev/null 2>&1; then
    cp "$T/alone.c" "$T/alone.cc"
    run "$T/alone++.log" c++ -std=c++11 -Wall -Wextra -pedantic -Werror -I"$P/include" \
        -c "$T/alone.cc" -o "$T/alone++.o" && ok "onnxexec.h compiles alone as C++11"
fi

# ---- the man page ----------------------------------------------------------------------
man1=$P/share/man/man1/onnxexec.1
groff -man -Tutf8 -ww -z "$man1" >"$T/groff.log" 2>&1
if [ -s "$T/groff.log" ]; then
    bad "groff warns about onnxexec.1:"
    sed 's/^/     | /' "$T/groff.log" | head -20
else
    ok "onnxexec.1 renders without warnings (groff -ww)"
fi
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man --warnings -l "$man1" >"$T/man.txt" 2>"$T/man.log" && [ ! -s "$T/man.log" ] &&
        ok "man -l renders it without warnings" || bad "man -l onnxexec.1: $(head -5 "$T/man.log")"
fi
grep -q "^\.TH ONNXEXEC 1 [^ ]* \"onnxexec $version\"" "$man1" && ok "man page of $version" ||
    bad "the man page's .TH line does not name version $version"
# Every option of every command's --help is in the man page (one long line per paragraph,
# no hyphenation, so that options are not broken across lines).
groff -man -Tascii -P-cbou -rLL=2000n -rHY=0 "$man1" 2>/dev/null >"$T/man_plain.txt"
undocumented=""
for cmd in run test bench info graph plan convert grad gradcheck train compare; do
    "$P/bin/onnxexec" "$cmd" --help >"$T/help.txt" 2>&1
    grep -q '^usage: onnxexec '"$cmd" "$T/help.txt" || bad "onnxexec $cmd --help prints no usage"
    grep -oE '(^|[][ ,(|])--?[a-z][a-z0-9-]*' "$T/help.txt" | sed 's/^[][ ,(|]*//' |
        sort -u >"$T/opts.txt"
    while read -r opt; do
        grep -qF -- "$opt" "$T/man_plain.txt" || undocumented="$undocumented $cmd:$opt"
    done <"$T/opts.txt"
    grep -q "^   $cmd " "$T/man_plain.txt" || undocumented="$undocumented $cmd"
done
[ -z "$undocumented" ] && ok "the man page has every command and option of the tool's help" ||
    bad "not in the man page:$undocumented"

# ---- reference data --------------------------------------------------------------------
# Inputs as the example reads them, and what they must give: PyTorch's logits for the
# test images, the numpy interpreter's for an image of ones.
cat >"$T/prepare.py" <<'EOF'
import sys
import numpy as np
from onnx import numpy_helper
sys.path.insert(0, sys.argv[1])
import numpy_reference
import onnx

d, out = sys.argv[1], sys.argv[2]
images = np.load(d + "/fashion_mnist_test_images.npy")
expected = np.load(d + "/fashion_mnist_cnn.expected.npy")
for lo, hi in ((0, 2), (7, 9)):
    t = numpy_helper.from_array(images[lo:hi], "image")
    open(f"{out}/images_{lo}_{hi}.pb", "wb").write(t.SerializeToString())
    np.save(f"{out}/ref_{lo}_{hi}.npy", expected[lo:hi])
np.save(out + "/ref_all.npy", expected)
model = onnx.load(d + "/fashion_mnist_cnn.onnx")
(y,) = numpy_reference.run(model, {"image": np.ones((1, 1, 28, 28), np.float32)})
np.save(out + "/ref_ones.npy", y)
EOF
# check.py OUT SHAPE REF.npy: the example's one output has shape SHAPE and its printed
# values are REF's first values (relative and absolute tolerance 1e-4).
cat >"$T/check.py" <<'EOF'
import re
import sys
import numpy as np

out, shape, ref = sys.argv[1], sys.argv[2], np.load(sys.argv[3]).ravel()
text = open(out).read()
m = re.search(r"^output 0: logits, float, shape \[([0-9, ]*)\]\n  first (\d+) of (\d+):(.*)$",
              text, re.M)
if not m:
    sys.exit(f"unexpected output:\n{text}")
got = np.array([float(v) for v in m.group(4).split()])
if m.group(1) != shape or int(m.group(3)) != ref.size or got.size != min(10, ref.size):
    sys.exit(f"shape [{m.group(1)}] with {m.group(3)} values, expected [{shape}], {ref.size}")
err = np.abs(got - ref[:got.size]).max()
if not np.allclose(got, ref[:got.size], rtol=1e-4, atol=1e-4):
    sys.exit(f"values differ from the reference by up to {err:.3g}:\n{got}\n{ref[:got.size]}")
print(f"[{shape}], max |difference| {err:.2g}")
EOF
run "$T/prepare.log" "$PY" "$T/prepare.py" "$SRC/models" "$T" || exit 1

# expect NAME SHAPE REF -- COMMAND...: the command succeeds and prints REF's values.
expect() {
    name=$1
    shape=$2
    ref=$3
    shift 4
    "$@" >"$T/out.txt" 2>"$T/err.txt"
    rc=$?
    if [ $rc -ne 0 ]; then
        bad "$name: exit status $rc: $(head -5 "$T/err.txt")"
    elif "$PY" "$T/check.py" "$T/out.txt" "$shape" "$ref" >"$T/check.txt" 2>&1; then
        ok "$name: $(cat "$T/check.txt")"
    else
        bad "$name: $(cat "$T/check.txt")"
    fi
}

# ---- the example, built with pkg-config ------------------------------------------------
cp -r "$SRC/examples" "$T/ex"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
pc_prefix=$(pkg-config --variable=prefix onnxexec)
[ "$pc_prefix" = "$P" ] && ok "pkg-config finds onnxexec.pc in the prefix" ||
    bad "pkg-config onnxexec: prefix '$pc_prefix'"
[ "$(pkg-config --modversion onnxexec)" = "$version" ] || bad "onnxexec.pc: not version $version"
flags="-O2 -std=c99 -Wall -Wextra -pedantic -Werror $EXTRA"
if run "$T/make.log" make -C "$T/ex" CC="$CC" CFLAGS="$flags" LDFLAGS="$EXTRA" run_model \
    run_model_static; then
    ok "make (pkg-config): run_model and run_model_static, no warnings"
    readelf -d "$T/ex/run_model" | grep -q 'NEEDED.*\[libonnxexec\.so\.1\]' &&
        ok "run_model needs libonnxexec.so.1" || bad "run_model does not need libonnxexec.so.1"
    readelf -d "$T/ex/run_model_static" | grep -q 'NEEDED.*libonnxexec' &&
        bad "run_model_static needs libonnxexec.so" || ok "run_model_static has libonnxexec.a in"
    expect "pkg-config, shared: 2 images (.pb)" "2, 10" "$T/ref_0_2.npy" -- \
        env LD_LIBRARY_PATH="$P/lib" "$T/ex/run_model" "$M" "$T/images_0_2.pb"
    expect "pkg-config --static: 1000 images (.npy)" "1000, 10" "$T/ref_all.npy" -- \
        "$T/ex/run_model_static" "$M" "$SRC/models/fashion_mnist_test_images.npy"
    # Errors come with the library's message.
    "$T/ex/run_model_static" "$T/no-such.onnx" >/dev/null 2>"$T/err.txt"
    rc=$?
    [ $rc -eq 1 ] && grep -q "^run_model: .*no-such.onnx" "$T/err.txt" &&
        ok "a missing model: exit 1, $(head -1 "$T/err.txt")" ||
        bad "a missing model: exit $rc, $(head -3 "$T/err.txt")"
    "$T/ex/run_model_static" "$M" "$SRC/models/fashion_mnist_test_labels.npy" >/dev/null \
        2>"$T/err.txt"
    rc=$?
    [ $rc -eq 1 ] && grep -q "expected element type float" "$T/err.txt" &&
        ok "an int64 input: exit 1, $(head -1 "$T/err.txt")" ||
        bad "an int64 input: exit $rc, $(head -3 "$T/err.txt")"
fi
# Everything static, as README.md shows it (not with the sanitizers, which need their
# shared runtime).
if [ -z "$EXTRA" ]; then
    # shellcheck disable=SC2046 # pkg-config's words are separate arguments
    run "$T/allstatic.log" "$CC" -static -O2 -o "$T/run_model_allstatic" "$T/ex/run_model.c" \
        $(pkg-config --cflags --static --libs onnxexec) &&
        expect "cc -static, pkg-config --static: 2 images (.pb)" "2, 10" "$T/ref_0_2.npy" -- \
            "$T/run_model_allstatic" "$M" "$T/images_0_2.pb"
fi
unset PKG_CONFIG_PATH

# ---- the example, built with CMake's find_package --------------------------------------
for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    b=$T/ex-cmake-$kind
    if run "$T/cmake-$kind.log" "$CMAKE" -S "$SRC/examples" -B "$b" -DCMAKE_PREFIX_PATH="$P" \
        -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $EXTRA" \
        -DCMAKE_EXE_LINKER_FLAGS="$EXTRA" -DRUN_MODEL_STATIC=$static &&
        run "$T/cmake-build-$kind.log" "$CMAKE" --build "$b"; then
        found=$(sed -n 's/^onnxexec_DIR:PATH=//p' "$b/CMakeCache.txt")
        [ "$found" = "$P/lib/cmake/onnxexec" ] && ok "find_package(onnxexec) ($kind): $found" ||
            bad "find_package(onnxexec) ($kind) found '$found'"
    fi
done
# The shared build runs from its build tree (CMake gives it an RPATH to the prefix).
[ -x "$T/ex-cmake-shared/run_model" ] &&
    expect "find_package, onnxexec::onnxexec: ones (no input files)" "1, 10" "$T/ref_ones.npy" -- \
        "$T/ex-cmake-shared/run_model" "$M"
[ -x "$T/ex-cmake-static/run_model" ] &&
    expect "find_package, onnxexec::onnxexec_static: images 7-8 (.pb)" "2, 10" \
        "$T/ref_7_9.npy" -- "$T/ex-cmake-static/run_model" "$M" "$T/images_7_9.pb"

# ---- the Python module ------------------------------------------------------------------
# The installed onnxexec.py finds the installed library by itself (no ONNXEXEC_LIB) and runs
# the shipped model to PyTorch's logits (tests/python_module.py on the installed copy). Not
# in sanitizer builds: Python cannot load a library built with them.
if [ -z "$EXTRA" ] && ! nm -D "$P/lib/libonnxexec.so.1" 2>/dev/null | grep -q __asan_init; then
    pydir=$P/lib/python3/dist-packages
    if [ ! -f "$pydir/onnxexec.py" ]; then
        bad "not installed: lib/python3/dist-packages/onnxexec.py"
    elif run "$T/python.log" env -u ONNXEXEC_LIB "$PY" "$SRC/tests/python_module.py" \
        --source "$SRC" --module-dir "$pydir"; then
        grep -q "^library: $P/lib/libonnxexec.so.1 " "$T/python.log" &&
            ok "python3 -c 'import onnxexec' (installed): the prefix's library, the model's logits" ||
            bad "the installed Python module loaded $(sed -n 's/^library: //p' "$T/python.log")"
    fi
fi

if [ $fails -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all checks passed"
