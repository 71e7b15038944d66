#!/bin/sh
# Installs what onnxexec needs to build and test on Debian 12, skipping what is there.
# Runtime: protobuf-c, OpenBLAS; zlib for `onnxexec train` (gzip'd IDX files). Build: cmake, a
# C compiler, protoc-c, the ONNX schema, pkg-config. Tests only: the ONNX backend test data,
# Python with numpy/onnx/torch (model generation) and scikit-learn (the classical-ML models'
# oracle), Fashion-MNIST (training tests); for the
# install test, groff (the man page) and libgfortran's development files (OpenBLAS's
# pkg-config file names -lgfortran for static links); valgrind for the memcheck test; clang
# and its compiler-rt (libFuzzer, the sanitizers' runtimes) for the fuzz targets (tests/fuzz).
# Optional: libpng and libjpeg (image inputs: -i x=cat.png; the tool builds without them),
# Graphviz at run time (`onnxexec graph` renders SVG/PNG with its dot; without it, DOT is
# written); PIL for the image input test.
set -e
PKGS="build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev
      libopenblas-dev libonnx-testdata python3 python3-numpy python3-onnx python3-torch
      python3-torchvision zlib1g-dev dataset-fashion-mnist groff-base libgfortran-12-dev
      valgrind clang libclang-rt-14-dev graphviz libpng-dev libjpeg62-turbo-dev python3-pil
      python3-sklearn"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
