#!/usr/bin/env bash
# The backward pass on a GPU machine, in one call (about 5 minutes on the H200): build fa-bench
# and the GPU tests, run the backward GPU tests (every backward row at N 1..4096, d 64/128, causal
# both, bf16 and fp16) and the backward fault tests (a dropped K/V block must fail), compute-
# sanitizer memcheck on a small backward run, then the sweep
#   fa-bench --N 1024,4096,16384 --d 64,128 --causal both --direction both \
#            --variants standard,fa2,cudnn
# and a table (TFLOP/s by the convention, DRAM bytes / model) of its rows. Everything is logged to
# OUTDIR/bwd_check.log, the sweep's result to OUTDIR/bwd-sweep.json; the summary is printed last.
# Usage: scripts/bwd_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bwd_check.sh OUTDIR}
mkdir -p "$out"
log="$out/bwd_check.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
build=${FA_BUILD_DIR:-build-gpu}

echo "######## build" >>"$log"
if ! { timeout 900 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=ON \
         >>"$log" 2>&1 && timeout 900 cmake --build "$build" -j "$(nproc)" --target fa-bench fa_tests_gpu \
         >>"$log" 2>&1; }; then
  tail -40 "$log"
  note "build: FAILED"
  printf '%s\n' "${summary[@]}"
  exit 1
fi
grep -A2 "fa2_bwd_kernel" "$log" | grep -c "bytes spill stores" >/dev/null &&
  note "fa2 backward spills (ptxas): $(grep -A2 'fa2_bwd_kernel' "$log" | grep -o '[0-9]* bytes spill stores' | sort | uniq -c | tr '\n' ' ')"
bin=$build/bin

echo "######## backward GPU tests" >>"$log"
timeout 240 "$bin/fa_tests_gpu" --gtest_filter='Shapes/Backward*' --gtest_brief=1 >>"$log" 2>&1
rc=$?
note "backward GPU tests (112 shapes + 8 fault cases): rc=$rc, $(grep -c '^\[  FAILED  \]' "$log") FAILED lines"
grep '^\[  FAILED  \]' "$log" | head -20

echo "######## compute-sanitizer memcheck" >>"$log"
if command -v compute-sanitizer >/dev/null; then
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/fa-bench" --N 129 --d 64,128 \
    --causal both --direction bwd --variants standard,fa2 --batch 1 --heads 2 --repetitions 1 \
    --warmup 0 --no-counters --datasheet-roofs --json "$out/memcheck.json" >>"$log" 2>&1
  note "compute-sanitizer memcheck (backward, N=129): rc=$? ($(grep -c 'Invalid' "$log") invalid accesses)"
else
  note "compute-sanitizer: not found"
fi

echo "######## sweep" >>"$log"
timeout 420 "$bin/fa-bench" --N 1024,4096,16384 --d 64,128 --causal both --direction both \
  --variants standard,fa2,cudnn --min-time 0.1 --json "$out/bwd-sweep.json" >>"$log" 2>&1
note "sweep: rc=$? ($out/bwd-sweep.json)"

python3 - "$out/bwd-sweep.json" <<'PY' | tee -a "$log"
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no sweep result: {e}"); sys.exit(0)
print(f"{'N':>6} {'d':>4} {'causal':>6} {'row':<22} {'status':<12} {'TFLOP/s':>8} {'ms':>8} {'DRAM/model':>10}")
for c in doc["configs"]:
    s = c
    for r in c["results"]:
        name = r["variant"] + (" bwd" if r.get("direction") == "backward" else "")
        tf = (r.get("derived") or {}).get("tflops_convention")
        ms = ((r.get("timing") or {}).get("stats") or {}).get("median")
        model = (r.get("model") or {})
        mb = (model.get("bytes_read") or 0) + (model.get("bytes_written") or 0)
        cnt = (r.get("counters") or {}).get("values") or {}
        dram = (cnt.get("dram__bytes_read.sum") or 0) + (cnt.get("dram__bytes_write.sum") or 0)
        ratio = f"{dram / mb:.3f}" if dram and mb else "-"
        print(f"{s['N']:>6} {s['d']:>4} {str(s['causal']):>6} {name:<22} {r['status']:<12} "
              f"{tf if tf is None else round(tf, 1)!s:>8} {ms if ms is None else round(ms, 3)!s:>8} {ratio:>10}"
              + ("" if r["status"] == "ok" else f"  {r.get('reason', '')[:60]}"))
PY
echo
printf '%s\n' "${summary[@]}"
