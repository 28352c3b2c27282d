#!/usr/bin/env bash
# Issue 43's "done when" on a GPU machine (docs/energy.md): builds fa-bench and the GPU tests, runs
# the energy GPU tests, runs `fa-bench --N 1024:16384 --d 64,128 --variants all` three times with
# the one build, checks the three files with scripts/energy_check.py (every row has energy, the
# runs agree within 3% per row, the model within 15%) and writes the report.
# Usage: scripts/energy_gpu_check.sh OUTDIR [extra fa-bench args]
#   FA_BUILD_DIR=DIR        the build directory (default build-gpu)
#   FA_ENERGY_BUDGET_S=S    start no run that would end past S seconds after the script began
#                           (default 500): the runs that did not fit are said (exit 3), and a
#                           second call on the still-warm machine goes on from there (runs are kept
#                           in DIR/energy-runs/)
#   FA_ENERGY_RUNS=N        how many runs (default 3)
#   FA_ENERGY_RUN_S=S       what a run is taken to last before one has been timed (default 240)
#   FA_ENERGY_FAST=1        runs after the first with --no-counters (about half the time each; the
#                           energy is measured the same way, and energy_check.py judges the model on
#                           the first run's counted bytes)
# OUTDIR gets at most 8 files (what a device call brings back): energy_check.log (everything, the
# build and the runs' consoles included), energy_check.txt (the check), run1..3.json, and, where
# python3 has matplotlib and jsonschema, report.md with energy-split.png and energy-roofline.png
# (else scripts/report.sh makes the report from the run files on any machine).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/energy_gpu_check.sh OUTDIR [extra fa-bench args]}
shift
mkdir -p "$out"
log="$out/energy_check.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
start=$SECONDS
budget=${FA_ENERGY_BUDGET_S:-500}
runs=${FA_ENERGY_RUNS:-3}
build=${FA_BUILD_DIR:-build-gpu}
keep="$build/energy-runs"
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
section() { echo -e "\n######## $1" >>"$log"; }
finish() {
  cp -f "$keep"/run*.json "$out"/ 2>/dev/null
  echo
  printf '%s\n' "${summary[@]}"
  exit "$1"
}

section nvidia-smi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv >>"$log" 2>&1
note "gpu: $(tail -1 "$log")"

section build
timeout 120 scripts/headers.sh >>"$log" 2>&1 ||
  note "build: header wheels missing (scripts/headers.sh): fa3/fp8 or cudnn rows will say not built"
if ! { timeout 900 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 &&
       timeout 900 cmake --build "$build" --target fa-bench fa_tests_gpu -j "$(nproc)" >>"$log" 2>&1; }; then
  tail -30 "$log"
  note "build: FAILED"
  finish 1
fi
bin=$build/bin
note "build: ok after $((SECONDS - start)) s"

section "energy gpu tests"
tests="$build/energy_gpu_tests.txt"
timeout 120 "$bin/fa_tests_gpu" --gtest_filter='EnergyGpu.*' >"$tests" 2>&1
rc=$?
cat "$tests" >>"$log"
note "energy gpu tests: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$tests" | tr '\n' ' ')"
grep -E '^(copy 1 GiB|energy model|  [a-z0-9]+ .* residual)' "$tests"

mkdir -p "$keep"
# The unavailable paths on this healthy machine: NVML refusing every reading, then a driver without
# the energy counter. Each run must finish (exit 0), its rows timed, and say why there is no energy.
for how in no_permission no_counter; do
  section "forced: $how"
  timeout 120 "$bin/fa-bench" --N 1024 --d 64 --variants fa2 --warmup 1 --repetitions 5 --no-counters \
    --datasheet-roofs --test-force-energy-error "$how" --json "$keep/forced-$how.json" >"$keep/forced.txt" 2>&1
  rc=$?
  cat "$keep/forced.txt" >>"$log"
  note "forced $how: rc=$rc, ok rows: $(grep -cE '  ok$' "$keep/forced.txt"), $(grep -m1 -E '^  energy unavailable:' "$keep/forced.txt" || echo 'NO energy line')"
done
# A run is not started unless it fits the budget: the last run's duration, or the guess before one.
last=${FA_ENERGY_RUN_S:-240}
for i in $(seq 1 "$runs"); do
  file="$keep/run$i.json"
  if [ -f "$file" ] && grep -q '"complete": true' "$file"; then
    note "run $i: kept from an earlier call ($file)"
    continue
  fi
  if [ $((SECONDS - start + last)) -gt "$budget" ]; then
    note "run $i: not started ($((SECONDS - start)) s used, a run takes ${last} s, budget ${budget} s): call again on the warm machine"
    finish 3
  fi
  section "run $i"
  fast=()
  [ -n "${FA_ENERGY_FAST:-}" ] && [ "$i" -gt 1 ] && fast=(--no-counters)
  t0=$SECONDS
  timeout 900 "$bin/fa-bench" --N 1024:16384 --d 64,128 --variants all --json "$file" "${fast[@]}" "$@" \
    >"$keep/run$i.txt" 2>&1
  rc=$?
  last=$((SECONDS - t0))
  cp -f "$file" "$out"/  # the call may end before the next run does: keep what finished
  cat "$keep/run$i.txt" >>"$log"
  note "run $i: rc=$rc in ${last} s; energy lines under the tables: $(grep -cE '^  energy (refused|unavailable|error):' "$keep/run$i.txt") (one per reason), clock held down: $(grep -c '^  SM clock held down' "$keep/run$i.txt"); $(grep -m1 '^mJ:' "$keep/run$i.txt")"
done

section "energy_check"
check_out="$out/energy_check.txt"
mapfile -t files < <(for i in $(seq 1 "$runs"); do echo "$keep/run$i.json"; done)
python3 scripts/energy_check.py "${files[@]}" >"$check_out" 2>&1
rc=$?
cat "$check_out" >>"$log"
note "energy_check: rc=$rc: $(tail -1 "$check_out")"
grep '^FAIL' "$check_out" | head -20

section report
if python3 -c 'import matplotlib, jsonschema' 2>/dev/null; then
  PYTHONPATH=. timeout 300 python3 -m reports "$keep/run1.json" -o "$keep/report" >>"$log" 2>&1
  note "report: rc=$? ($keep/report; report.md, energy-split.png, energy-roofline.png in $out)"
  cp -f "$keep/report/report.md" "$keep/report/energy-split.png" "$keep/report/energy-roofline.png" "$out"/ 2>/dev/null
  grep -A8 '^## Where the energy goes' "$keep/report/report.md" 2>/dev/null | tee -a "$log"
else
  note "report: not written here (python3 lacks matplotlib or jsonschema): scripts/report.sh run1.json -o DIR on any machine"
fi
finish 0
