#!/usr/bin/env bash
# One call on a GPU machine: build (or use prebuilt binaries), GPU and CPU tests,
# compute-sanitizer (memcheck, racecheck, synccheck) on every kernel and schedule of ours, forward
# and backward, at a small size, and a small benchmark.
# Every step has a time limit, so the script always finishes and reports. Everything is appended
# to OUTDIR/gpu_check.log; result files go to OUTDIR. A short summary is printed last.
# Usage: scripts/gpu_check.sh OUTDIR [extra fa-bench sweep args]
#   FA_PREBUILT=DIR   use DIR/fa-bench, DIR/fa_tests_gpu, DIR/fa_tests_cpu instead of building
#   FA_QUICK=1        skip the memory-skip case (a 172 GB configuration)
#   FA_NO_SANITIZER=1 skip compute-sanitizer (a quick check between full ones)
#   FA_GTEST_FILTER=F run only the GPU tests matching F
#   FA_NO_GPU_TESTS=1 skip the GPU tests (the second of two calls: on an H100 the GPU tests alone
#                     ran past 380 s, so build, tests, sanitizers and bench do not fit one 600 s
#                     call)
# The fault-injection tests' table (fault x variant x precision: caught or not) goes to
# OUTDIR/fault_table.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/gpu_check.sh OUTDIR}
shift
mkdir -p "$out"
log="$out/gpu_check.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
section() { echo -e "\n######## $1" >>"$log"; }

section nvidia-smi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >>"$log" 2>&1
note "gpu: $(tail -1 "$log")"

if [ -n "${FA_PREBUILT:-}" ]; then
  bin=$FA_PREBUILT
  note "binaries: prebuilt in $bin"
else
  build=${FA_BUILD_DIR:-build-gpu}
  section build
  # The sm_90a kernels (fa3, fp8) need CuTe and the cuDNN peers cudnn-frontend: header-only
  # wheels, from .whl/ on this offline machine; without them the build succeeds and those rows
  # and tests say "not built".
  timeout 120 scripts/headers.sh >>"$log" 2>&1 ||
    note "build: header wheels missing (scripts/headers.sh, see the log): fa3/fp8 or cudnn will not be built"
  if ! { timeout 900 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 &&
         timeout 900 cmake --build "$build" -j "$(nproc)" >>"$log" 2>&1; }; then
    tail -40 "$log"
    note "build: FAILED"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
  bin=$build/bin
  note "build: ok ($(grep -c 'spill' "$log") spill warnings)"
fi
# On an sm_90 GPU a build without fa3 is a check that cannot see half of the kernels: say so.
# (--list-variants says "built for sm_90a" under fa3 when its kernels are in the binary.)
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.0' &&
  ! "$bin/fa-bench" --list-variants 2>/dev/null | grep -A12 -E '^fa3( |$)' | grep -q 'built for sm_90a'; then
  note "build: FAILED: fa3 and fp8 (sm_90a) are not in these binaries on an sm_90 GPU; their tests fail"
fi

if [ -z "${FA_NO_GPU_TESTS:-}" ]; then
  section "gpu tests"
  timeout 480 "$bin/fa_tests_gpu" --gtest_filter="${FA_GTEST_FILTER:-*}" >"$out/.gpu_tests.txt" 2>&1  # full output: a hang shows its test
  rc=$?
  cat "$out/.gpu_tests.txt" >>"$log"
  note "gpu tests: rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/.gpu_tests.txt" | tail -2 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/.gpu_tests.txt" | head -20
  grep '^fault-table' "$out/.gpu_tests.txt" | cut -d'|' -f2- >"$out/fault_table.txt"
  note "fault injection: $(grep -c '| caught' "$out/fault_table.txt") caught, $(grep -c 'not caught' "$out/fault_table.txt") NOT caught; true kernels: $(grep -c '| passes' "$out/fault_table.txt") pass, $(grep -c '| FAILS' "$out/fault_table.txt") fail"
  rm -f "$out/.gpu_tests.txt"
else
  note "gpu tests: skipped (FA_NO_GPU_TESTS)"
fi
section "cpu tests"
timeout 120 "$bin/fa_tests_cpu" --gtest_brief=1 >>"$log" 2>&1
note "cpu tests: rc=$?"

# Our kernels only: the cuDNN peer is the library's business (and compiles graphs slowly under the tools).
# Every row of ours: forward and backward, every head dim a variant builds (d=256: fa3's 128x80
# tile and standard; the others say unsupported there), every fa3 and fp8 schedule, both fp8 scale
# granularities, both fa2 dQ modes; N=130 leaves a partial last block. memcheck and racecheck in
# both dtypes, synccheck (barriers and warp syncs) in bf16: five runs of up to 180 s; with
# FA_NO_GPU_TESTS they fit one 600 s call only if they finish early; FA_NO_SANITIZER splits them off.
# shellcheck disable=SC2054  # commas belong to the values
small=(--N 130 --batch 2 --heads 3 --d 64,128,256 --causal both --direction both
  --variants standard,fa1,fa2,fa3,fp8 --fa3-schedule all --fp8-schedule all --fp8-scale both
  --fa2-dq both --warmup 0 --repetitions 1 --warm --no-counters --no-energy --datasheet-roofs)
for tool in $([ -n "${FA_NO_SANITIZER:-}" ] || echo memcheck racecheck synccheck); do
  dtypes=(bf16 fp16)
  [ "$tool" = synccheck ] && dtypes=(bf16)
  for dtype in "${dtypes[@]}"; do
    section "sanitizer $tool $dtype"
    tlog="$out/.sanitize.tmp"
    timeout 180 compute-sanitizer --tool "$tool" --print-limit 100000 --error-exitcode 9 "$bin/fa-bench" "${small[@]}" \
      --dtype "$dtype" --json "$out/.sanitize.json" >"$tlog" 2>&1
    rc=$?
    # cuBLAS's nvjet kernels order shared memory with TMA and mbarriers, which racecheck does not
    # model: it reports hazards inside them. Excluding them with
    # --kernel-name-exclude crashed the sanitizer ("failed to handle a hardware exception"), so
    # they run instrumented and hazards are counted per kernel: ours must have none.
    ours=$(grep -E "Race reported between|Error: .* at |Invalid .* at " "$tlog" | grep -vEc "nvjet|cudnn|sdpa")
    theirs=$(grep -E "Race reported between" "$tlog" | grep -Ec "nvjet|cudnn|sdpa")
    failed_rows=$(grep -cE "  (error:|FAILED)" "$tlog")
    ok_rows=$(grep -cE "  ok$" "$tlog")
    note "sanitizer $tool $dtype: rc=$rc, reports in our kernels: $ours, in cuBLAS nvjet / cuDNN: $theirs, rows ok: $ok_rows, failed: $failed_rows; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$tlog" | tail -1)"
    grep -vE "^=========     (and|Read|Write)" "$tlog" | head -200 >>"$log"
    rm -f "$tlog" "$out/.sanitize.json"
  done
done

section "bench N=4096 d=64"
# --remeasure: the ceilings and the energy model's calibration (about 10 s) are measured again.
timeout 180 "$bin/fa-bench" --N 4096 --d 64 --variants all --remeasure --json "$out/n4096-d64.json" >"$out/.bench.txt" 2>&1
note "bench N=4096 d=64: rc=$?, energy: $(grep -c '^energy\|  energy [a-z]*:' "$out/.bench.txt") refusal line(s); $(grep -m1 '^mJ:' "$out/.bench.txt")"
tee -a "$log" <"$out/.bench.txt"

# --stall-reasons: every row counted, and how many rows name their stall reasons in the reading
# under the table.
section "stall reasons"
timeout 120 "$bin/fa-bench" --N 1024 --d 64,128 --variants fa2,fa3,fp8 --stall-reasons --warmup 1 \
  --repetitions 5 --datasheet-roofs --json "$out/stall-reasons.json" >"$out/.bench.txt" 2>&1
note "stall reasons: rc=$?, rows with stalls: $(grep -c 'stalls per issued instruction' "$out/.bench.txt"), counter failure lines (one per reason): $(grep -c 'counters not counted' "$out/.bench.txt"), warnings: $(grep -c 'warning' "$out/.bench.txt")"
cat "$out/.bench.txt" >>"$log"

# Counters unavailable: forced (no permission) and real (Nsight Compute holds the counters).
# Either way the run must finish with timing, exit 0, and say why the counter columns are empty.
small_run=(--N 1024 --d 64 --variants fa2 --warmup 1 --repetitions 5 --datasheet-roofs)
section "counters: forced no permission"
timeout 60 "$bin/fa-bench" "${small_run[@]}" --test-force-counter-error insufficient_privileges \
  --json "$out/counters-no-permission.json" >"$out/.bench.txt" 2>&1
note "counters forced no-permission: rc=$?, warning lines: $(grep -c 'hardware counters unavailable' "$out/.bench.txt"), ok rows: $(grep -cE '  ok$' "$out/.bench.txt")"
cat "$out/.bench.txt" >>"$log"
if command -v ncu >/dev/null; then
  section "counters: under Nsight Compute"
  timeout 120 ncu --metrics gpu__time_duration.sum -c 1 "$bin/fa-bench" "${small_run[@]}" \
    --json "$out/counters-under-ncu.json" >"$out/.bench.txt" 2>&1
  note "counters under ncu: rc=$?, warning lines: $(grep -c 'hardware counters unavailable' "$out/.bench.txt"), ok rows: $(grep -cE '  ok$' "$out/.bench.txt")"
  cat "$out/.bench.txt" >>"$log"
fi

if [ -z "${FA_QUICK:-}" ]; then
section "memory skip"
# A configuration whose S/P buffer cannot fit (172 GB): standard must say "skipped", fa2 runs.
timeout 300 "$bin/fa-bench" --N 65536 --batch 1 --heads 20 --d 64 --variants standard,fa2 --warmup 1 --repetitions 3 \
  --json "$out/memory-skip.json" >"$out/.bench.txt" 2>&1
note "memory skip (N=65536, H=20): rc=$?, $(grep -c 'skipped: needs' "$out/.bench.txt") skipped row(s)"
cat "$out/.bench.txt" >>"$log"
fi
if [ $# -gt 0 ]; then
  section "sweep $*"
  timeout 300 "$bin/fa-bench" "$@" --json "$out/sweep.json" >"$out/.bench.txt" 2>&1
  note "sweep ($*): rc=$?"
  cat "$out/.bench.txt" >>"$log"
fi
rm -f "$out/.bench.txt"
echo
echo "summary:" | tee -a "$log"
printf '  %s\n' "${summary[@]}" | tee -a "$log"
