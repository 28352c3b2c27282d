#!/usr/bin/env bash
# Fuzzes the result-file reader (bench/result_json.cpp) and the gate on what it reads, with
# libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer:
#
#   scripts/fuzz.sh              # build into build-fuzz/, run 60 s
#   FUZZ_SECONDS=600 scripts/fuzz.sh
#
# Seeds: small inputs cut from a real H200 result file (tests/fuzz/make_seeds.py) and the
# committed tests/data/gate-*.json. A crash, a sanitizer report, a leak, a hang (> 10 s on one
# input) or an exception other than ResultFileError fails the script; the input that did it is
# left in build-fuzz/ (crash-*, timeout-*, leak-*). Reproduce: build-fuzz/fuzz_result_reader FILE.
# Needs clang++ with libFuzzer (Debian: clang), nlohmann-json and fmt; no GPU, nothing of CUDA:
# the reader and the gate depend on the vocabulary (kernels/variant.hpp) alone, not on the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
out=${FA_FUZZ_DIR:-build-fuzz}
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: error: $cxx not found (scripts/setup.sh installs clang)" >&2
  exit 1
fi
mkdir -p "$out/obj"
common=(-std=c++20 -g -O1 -fno-omit-frame-pointer -I.)
# shellcheck disable=SC2054  # a comma-separated value
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all)
# Coverage-instrumented: what the fuzzer explores.
sources=(tests/fuzz/fuzz_result_reader.cpp bench/result_json.cpp bench/result.cpp bench/gate.cpp
         bench/gate_outputs.cpp profiler/stats.cpp profiler/counters.cpp profiler/roofline.cpp
         profiler/energy_json.cpp
         kernels/problem.cpp kernels/variant.cpp)

compile() {  # source, extra flags...
  local src=$1
  shift
  local obj
  obj="$out/obj/$(echo "$src" | tr / _).o"
  "$cxx" -c "${common[@]}" "${sanitize[@]}" "$@" -MMD -MF "$obj.d" "$src" -o "$obj"
}
export -f compile
export out cxx
pids=()
for s in "${sources[@]}"; do
  compile "$s" -fsanitize=fuzzer-no-link &
  pids+=($!)
  # At most nproc compilers at a time.
  while (($(jobs -rp | wc -l) >= $(nproc))); do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
objs=()
for s in "${sources[@]}"; do objs+=("$out/obj/$(echo "$s" | tr / _).o"); done
"$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -lfmt -o "$out/fuzz_result_reader"

rm -rf "$out/seeds"
python3 tests/fuzz/make_seeds.py "$out/seeds"
cp tests/data/gate-truncated.json tests/data/gate-no-gpu.json "$out/seeds/"
mkdir -p "$out/corpus"
echo "fuzz: running the result-file reader for ${seconds}s" >&2
# -max_len: the seeds are at most ~10 kB; longer inputs mostly cost time.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$out/fuzz_result_reader" "$out/corpus" "$out/seeds" -dict=tests/fuzz/result.dict \
  -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1 2>"$out/fuzz.log" || {
  tail -60 "$out/fuzz.log" >&2
  echo "fuzz: FAILED; the input is in $out/ (crash-*, timeout-*, leak-*, oom-*)" >&2
  exit 1
}
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ *DONE" "$out/fuzz.log" >&2 || true
echo "fuzz: ok (${seconds}s, corpus $(find "$out/corpus" -maxdepth 1 -type f | wc -l) inputs)" >&2
