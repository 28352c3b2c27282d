#!/usr/bin/env bash
# Configures (once) and builds Release into build/ (or $FA_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FA_BUILD_DIR:-build}
export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${FA_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
