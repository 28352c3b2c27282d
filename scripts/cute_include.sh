#!/usr/bin/env bash
# Prints the directory of the CuTe/CUTLASS headers the sm_90a kernels (fa3, fp8) build against,
# or says on stderr why there is none and exits 1. Looked up in this order:
#   $FA_CUTLASS_INCLUDE; .venv's nvidia-cutlass (scripts/setup.sh); the wheel in .whl/ (offline
#   machines: the GPU machine), unpacked once into BUILD_DIR/_deps/cutlass.
#   scripts/cute_include.sh BUILD_DIR
# Unpacked once per build folder: unpacking again gives every CuTe header a new mtime, and ninja
# then rebuilt all sm_90a kernels for each side of an A/B or a sweep (about 2.5 minutes a side on
# the H100 machine, 2026-11-25, where only fp8_quant.cu had changed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/cute_include.sh BUILD_DIR}
[[ $build = /* ]] || build=$PWD/$build
cutlass=${FA_CUTLASS_INCLUDE:-}
if [ -z "$cutlass" ]; then
  cutlass=$(ls -d .venv/lib/python3*/site-packages/cutlass_library/source/include 2>/dev/null | head -1 || true)
fi
if [ -z "$cutlass" ] && ls .whl/nvidia_cutlass-4.2.0.0-*.whl >/dev/null 2>&1; then
  if [ ! -f "$build/_deps/cutlass/cutlass_library/source/include/cute/tensor.hpp" ]; then
    mkdir -p "$build/_deps/cutlass"
    python3 -m zipfile -e .whl/nvidia_cutlass-4.2.0.0-*.whl "$build/_deps/cutlass"
  fi
  cutlass="$build/_deps/cutlass/cutlass_library/source/include"
fi
if [ -z "$cutlass" ] || [ ! -f "$cutlass/cute/tensor.hpp" ]; then
  echo "cute_include: error: no CuTe headers (.venv nvidia-cutlass, .whl/nvidia_cutlass-4.2.0.0-*.whl or FA_CUTLASS_INCLUDE)" >&2
  exit 1
fi
echo "$cutlass"
