#!/usr/bin/env bash
# Issue 12's "done when" on the H200, in one call (about 5 minutes; every step has a time limit,
# so the script always finishes and prints its table):
#   1. builds fa-bench three times in one build dir (only kernels/fa2/fa2.cu differs): the
#      normal build, a smaller-tile build (-DFA_TEST_FA2_SMALL_TILE: fa2's last compiled tile
#      becomes the default, d=64 64x64, d=128 128x32) and a slowed build (-DFA_TEST_FA2_SLOWDOWN:
#      every fa2 block holds its SM 5% longer);
#   2. five back-to-back same-build runs `fa-bench --N 4096 --d 64,128 --variants all
#      --repetitions 100`, then the smaller-tile and the slowed build once each;
#   3. gates all ten same-build pairs (each must exit 0), the smaller-tile and the slowed build
#      against run 1 (each must exit 1; the slowed one also with --time-only, so time alone
#      catches it), and the same with a baseline calibrated on runs 1-3;
#   4. the counter repeatability check: the GPU test CountersGpu.FiveCollectionsRepeat and five
#      collections of every variant at B=2 H=7 N=2048 d=128 (DRAM reads and writes within 1%
#      where >= 1 MB, L2 within 2%, tensor FLOPs exact).
# Usage: scripts/gate_h200.sh OUTDIR
#   FA_PREBUILT=DIR  use DIR/fa-bench, DIR/fa-bench-small-tile, DIR/fa-bench-slow and
#                    DIR/fa_tests_gpu where present instead of building them
#   FA_BUILD_DIR     the build dir (default build-gate; configured for sm_90a only)
# Every result file and log goes to OUTDIR; the table is printed last and kept in OUTDIR/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gate_h200.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/gate_h200.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
start=$(date +%s)
rows=()
row() { rows+=("$(printf '%-58s %-6s %s' "$1" "$2" "$3")"); echo "== $1 | $2 | $3" >>"$log"; }
elapsed() { echo "$(($(date +%s) - start))s"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >>"$log" 2>&1

# ---- 1. binaries ----
bins="$out/.bin"
mkdir -p "$bins"
build=${FA_BUILD_DIR:-build-gate}
pre=${FA_PREBUILT:-}
# Per-file definitions for fa2.cu through CMAKE_PROJECT_INCLUDE (read right after project()), so
# a reconfigure recompiles fa2.cu only.
defs_file="$out/.fa2_test_defs.cmake"
cat >"$defs_file" <<'EOF'
if(FA_TEST_FA2_DEFINITIONS)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/kernels/fa2/fa2.cu PROPERTIES
                              COMPILE_DEFINITIONS "${FA_TEST_FA2_DEFINITIONS}")
endif()
EOF
build_one() {  # name definitions targets...
  local name=$1 defs=$2
  shift 2
  timeout 400 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PROJECT_INCLUDE="$defs_file" -DFA_TEST_FA2_DEFINITIONS="$defs" >>"$log" 2>&1 &&
    timeout 400 cmake --build "$build" -j "$(nproc)" --target "$@" >>"$log" 2>&1 &&
    cp "$build/bin/fa-bench" "$bins/$name"
}
have() { [ -n "$pre" ] && [ -x "$pre/$1" ] && cp "$pre/$1" "$bins/$1"; }
ok=1
have fa-bench && have fa_tests_gpu || { build_one fa-bench "" fa-bench fa_tests_gpu &&
  cp "$build/bin/fa_tests_gpu" "$bins/fa_tests_gpu"; } || ok=0
have fa-bench-small-tile || build_one fa-bench-small-tile FA_TEST_FA2_SMALL_TILE fa-bench || ok=0
have fa-bench-slow || build_one fa-bench-slow FA_TEST_FA2_SLOWDOWN fa-bench || ok=0
[ -d "$build" ] && timeout 120 cmake -S . -B "$build" -DFA_TEST_FA2_DEFINITIONS= >>"$log" 2>&1  # back to normal
row "build (normal, smaller tile, slowed)" "$([ $ok = 1 ] && echo ok || echo FAIL)" "$(elapsed)"
if [ $ok = 0 ]; then
  tail -30 "$log"
  printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
  exit 1
fi

# ---- 2. runs ----
args=(--N 4096 --d 64,128 --variants all --repetitions 100 --require-gpu)
run() {  # binary file [extra args]
  local bin=$1 file=$2
  shift 2
  timeout 90 "$bins/$bin" "${args[@]}" "$@" --json "$out/$file" >"$out/${file%.json}.txt" 2>&1
}
for i in 1 2 3 4 5; do
  run fa-bench "same-$i.json"
  row "run same-$i" "rc=$?" "$(elapsed)"
done
run fa-bench-small-tile small-tile.json
row "run smaller-tile build" "rc=$?" "$(elapsed)"
run fa-bench-slow slowed.json
row "run slowed build" "rc=$?" "$(elapsed)"

# ---- 3. gates ----
gate() {  # label expected-rc report-name args...
  local label=$1 want=$2 name=$3
  shift 3
  timeout 60 "$bins/fa-bench" gate "$@" --markdown "$out/gate-$name.md" >"$out/gate-$name.txt" 2>&1
  local rc=$?
  local verdict
  verdict=$(grep -E '^(PASS|FAIL|ERROR)' "$out/gate-$name.txt" | tail -1 | cut -c1-60)
  row "$label" "$([ "$rc" = "$want" ] && echo ok || echo BAD)" "exit $rc (want $want): $verdict"
}
for i in 1 2 3 4 5; do
  for j in 1 2 3 4 5; do
    [ "$i" -lt "$j" ] || continue
    gate "same build: run $i vs run $j" 0 "same-$i-$j" --baseline "$out/same-$i.json" --current "$out/same-$j.json"
  done
done
gate "smaller fa2 tile vs run 1" 1 small --baseline "$out/same-1.json" --current "$out/small-tile.json"
gate "slowed fa2 (~5%) vs run 1" 1 slowed --baseline "$out/same-1.json" --current "$out/slowed.json"
gate "slowed fa2 (~5%) vs run 1, --time-only" 1 slowed-time --baseline "$out/same-1.json" \
  --current "$out/slowed.json" --time-only
"$bins/fa-bench" gate --calibrate "$out/same-1.json" "$out/same-2.json" "$out/same-3.json" \
  --update-baseline "$out/calibrated.json" >"$out/calibrate.txt" 2>&1
row "calibrate on runs 1-3" "rc=$?" "$out/calibrate.txt"
for j in 4 5; do
  gate "calibrated baseline vs run $j" 0 "cal-$j" --baseline "$out/calibrated.json" --current "$out/same-$j.json"
done
gate "calibrated baseline vs smaller tile" 1 cal-small --baseline "$out/calibrated.json" --current "$out/small-tile.json"
gate "calibrated baseline vs slowed" 1 cal-slowed --baseline "$out/calibrated.json" --current "$out/slowed.json"
for f in slowed small; do  # what the fa2 rows said
  grep -E '^B=.* fa2 ' "$out/gate-$f.txt" | awk -v f="$f" '{print "   " f ": " $0}' | cut -c1-150 >>"$out/fa2-rows.txt"
done

# ---- 4. counter repeatability ----
timeout 120 "$bins/fa_tests_gpu" --gtest_filter='CountersGpu.FiveCollectionsRepeat' >"$out/counters-gtest.txt" 2>&1
row "GPU test CountersGpu.FiveCollectionsRepeat" "$([ $? = 0 ] && echo ok || echo BAD)" \
  "$(grep -E '^\[  (PASSED|FAILED|  SKIPPED)' "$out/counters-gtest.txt" | head -1)"
rep=(--N 2048 --d 128 --batch 2 --heads 7 --variants all --repetitions 10 --require-gpu)
for i in 1 2 3 4 5; do
  timeout 60 "$bins/fa-bench" "${rep[@]}" --json "$out/repeat-$i.json" >"$out/repeat-$i.txt" 2>&1
done
python3 - "$out" >"$out/repeat.txt" 2>&1 <<'EOF'
import json, sys
out = sys.argv[1]
runs = []
for i in range(1, 6):
    try:
        runs.append(json.load(open(f"{out}/repeat-{i}.json")))
    except Exception as e:
        print(f"repeat-{i}.json: {e}")
vals = {}
for d in runs:
    for c in d["configs"]:
        for r in c["results"]:
            cv = (r.get("counters") or {})
            if cv.get("status") != "ok":
                continue
            v = cv["values"]
            m = {"dram_read": v.get("dram__bytes_read.sum", 0), "dram_write": v.get("dram__bytes_write.sum", 0),
                 "l2": 32 * (v.get("l1tex__m_xbar2l1tex_read_sectors.sum", 0) + v.get("l1tex__m_l1tex2xbar_write_sectors.sum", 0)),
                 "tensor": sum(v.get(k, 0) for k in ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp8.sum"))}
            for k, x in m.items():
                vals.setdefault((r["variant"], k), []).append(x)
bad = 0
limits = {"dram_read": 0.01, "dram_write": 0.01, "l2": 0.02, "tensor": 0.0}
print(f"{'variant':<10} {'metric':<11} {'n':>2} {'min':>14} {'max':>14} {'spread':>8}  ok")
for (var, k), xs in sorted(vals.items()):
    lo, hi = min(xs), max(xs)
    spread = hi / lo - 1 if lo > 0 else (0 if hi == 0 else float("inf"))
    # DRAM writes: 1% or 1 MB (the write counter jitters by a few hundred kB; see
    # tests/test_counters_gpu.cpp FiveCollectionsRepeat).
    ok = len(xs) == 5 and (spread <= limits[k] or (k.startswith("dram") and hi < 1e6)
                           or (k == "dram_write" and hi - lo <= 1e6))
    bad += not ok
    print(f"{var:<10} {k:<11} {len(xs):>2} {lo:>14.6g} {hi:>14.6g} {100*spread:>7.2f}%  {'ok' if ok else 'BAD'}")
print(f"repeatability: {'ok' if bad == 0 and vals else 'BAD'} ({bad} bad)")
sys.exit(1 if bad or not vals else 0)
EOF
row "5 collections, all variants, N=2048 d=128 B=2 H=7" "$([ $? = 0 ] && echo ok || echo BAD)" \
  "$(tail -1 "$out/repeat.txt")"

rm -rf "$bins"
{
  echo
  echo "fa-bench gate on the H200 ($(elapsed) in all); details in $out"
  printf '%s\n' "${rows[@]}"
  echo "fa2 rows of the failing gates:"
  cat "$out/fa2-rows.txt" 2>/dev/null
  echo "counter repeatability (max/min - 1 over five collections):"
  sed 's/^/   /' "$out/repeat.txt"
} | tee "$out/summary.txt"
