#!/usr/bin/env bash
# Configures (once) and builds Release into build/ (or $FA_BUILD_DIR): every target, or only the
# ones named (scripts/build.sh fa-bench). Ninja's progress ([12/48] ...) goes to stderr.
#   FA_BUILD_TESTS=OFF   a first configure leaves the tests out (they need GoogleTest)
#   FA_BUILD_TESTS=ON    turns them on, also in a build folder configured without them
#   FA_CMAKE_ARGS        more arguments for the configure step (e.g. a compiler launcher)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FA_BUILD_DIR:-build}
tests=${FA_BUILD_TESTS:-}
export PATH="$PATH:/usr/local/cuda/bin"
configure() {
  mkdir -p "$build"
  echo "build: configuring $build/ (CMake, Release)" >&2
  # shellcheck disable=SC2086  # FA_CMAKE_ARGS is a list of arguments
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" ${FA_CMAKE_ARGS:-} >"$build/configure.log" 2>&1; then
    cat "$build/configure.log" >&2
    echo "build: configure failed (log: $build/configure.log)" >&2
    exit 1
  fi
}
if [ ! -f "$build/build.ninja" ]; then
  configure ${tests:+-DFA_BUILD_TESTS=$tests}
elif [ "$tests" = ON ] && grep -q '^FA_BUILD_TESTS:BOOL=OFF' "$build/CMakeCache.txt"; then
  configure -DFA_BUILD_TESTS=ON
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
echo "build: building ${*:-everything} in $build/ (the first build compiles the CUDA kernels: minutes)" >&2
cmake --build "$build" -j "$(nproc)" "${targets[@]}" >&2
