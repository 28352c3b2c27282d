#!/usr/bin/env bash
# The fa2 backward's configurations on a GPU machine, in one call (aim: 4 minutes on the H200,
# most of it the build): every compiled backward tile (Br x Bc, Bc/16 warps) with both dQ modes
# (--fa2-dq atomic|separate). Steps, each with a time limit:
#   1 scripts/cudnn_frontend.sh (the cudnn peer's headers), then build fa-bench and fa_tests_gpu
#   2 registers, stack (spills) and shared memory of every backward kernel (cuobjdump -res-usage)
#   3 the backward GPU tests (every configuration and dq mode, N 1..4096, d 64/128, causal both,
#     bf16/fp16) and the fault tests (a dropped K/V block must fail), in parallel shards
#   4 compute-sanitizer memcheck of a small backward run of every configuration, with no kernel
#     filter (every kernel of the run is checked), and the kernels it launched
#   5 fa-bench --N 4096 --d 64,128 --causal both --direction bwd --variants fa2,cudnn with every
#     configuration: TFLOP/s, fa2/cudnn, DRAM over the model and over its L2 view, the winner
#     per (d, causal).
# Everything is logged to OUTDIR/bwd_tune.log; the sweep's result is OUTDIR/bwd-tune.json; the
# summary (the table last) is printed at the end. Exit 0 when every step ran, 1 otherwise.
# Usage: scripts/bwd_tune.sh OUTDIR     (FA_BUILD_DIR: the build folder, default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/bwd_tune.sh OUTDIR}
mkdir -p "$out"
log="$out/bwd_tune.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
summary=()
status=0
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
section() { echo -e "\n######## $1" >>"$log"; }
build=${FA_BUILD_DIR:-build-gpu}
# shellcheck disable=SC2054  # the commas belong to the flags' lists
configs=(--block-q 32,64,128 --block-kv 64,128 --fa2-dq both)

section "cudnn-frontend, build"
scripts/cudnn_frontend.sh >>"$log" 2>&1 || note "cudnn-frontend headers: not found (cudnn rows will say unsupported)"
if ! { timeout 600 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=ON \
         >>"$log" 2>&1 && timeout 600 cmake --build "$build" -j "$(nproc)" --target fa-bench fa_tests_gpu \
         >>"$log" 2>&1; }; then
  tail -30 "$log"
  note "build: FAILED"
  printf '%s\n' "${summary[@]}"
  exit 1
fi
bin=$build/bin

section "backward kernels: registers, stack, shared memory (sm_90a)"
if command -v cuobjdump >/dev/null; then
  cuobjdump -arch sm_90a -res-usage "$bin/fa-bench" 2>/dev/null | c++filt >"$out/res-usage.txt"
  python3 - "$out/res-usage.txt" <<'PY' | tee -a "$log"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
rows = []
for i, line in enumerate(lines):
    m = re.search(r"Function (.*fa2_bwd[^:]*kernel<[^>]*>)", line)
    if not m or i + 1 >= len(lines):
        continue
    u = dict(re.findall(r"(\w+):(\d+)", lines[i + 1]))
    name = re.sub(r"\(anonymous namespace\)::|fa::|fa2_bwd::|__nv_", "", m.group(1))
    rows.append((name, u.get("REG", "?"), u.get("STACK", "?"), u.get("LOCAL", "?")))
spill = [r for r in rows if r[2] not in ("0", "?") or r[3] not in ("0", "?")]
print(f"{len(rows)} backward kernels; {len(spill)} with a stack or local memory (spills):")
for r in spill:
    print(f"  REG {r[1]:>3} STACK {r[2]:>3} LOCAL {r[3]:>3}  {r[0]}")
PY
  note "backward kernels: $(grep -m1 'backward kernels;' "$log")"
else
  note "cuobjdump: not found (no register/spill table)"
fi

section "backward GPU tests"
shards=8
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout 300 "$bin/fa_tests_gpu" \
    --gtest_filter='Shapes/Backward*' --gtest_brief=1 >"$out/tests-$i.log" 2>&1 &
done
wait
cat "$out"/tests-*.log >>"$log"
failed=$(cat "$out"/tests-*.log | grep -c '^\[  FAILED  \]')
passed=$(cat "$out"/tests-*.log | grep -o '^\[  PASSED  \] [0-9]*' | awk '{s += $4} END {print s + 0}')
note "backward GPU tests (every configuration and dq mode, faults): $passed passed, $failed FAILED lines"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || status=1
cat "$out"/tests-*.log | grep '^\[  FAILED  \]' | sort -u | head -20
rm -f "$out"/tests-*.log

section "compute-sanitizer memcheck (no kernel filter)"
if command -v compute-sanitizer >/dev/null; then
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/fa-bench" --N 129 \
    --d 64,128 --causal both --direction bwd --variants fa2 "${configs[@]}" --batch 1 --heads 2 \
    --repetitions 1 --warmup 0 --no-counters --datasheet-roofs --json "$out/memcheck.json" \
    >"$out/memcheck.log" 2>&1
  rc=$?
  cat "$out/memcheck.log" >>"$log"
  note "compute-sanitizer memcheck (fa2 backward, every configuration, N=129): rc=$rc, $(grep -c 'Invalid' "$out/memcheck.log") invalid accesses, $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$out/memcheck.log" | tail -1)"
  [ "$rc" -eq 0 ] || status=1
  # No --kernel-name filter: memcheck instruments every launch of the run. The kernels of the
  # run, as the profiler's kernel table lists them (nsys when present):
  if command -v nsys >/dev/null; then
    timeout 60 nsys profile -o "$out/names" --force-overwrite true "$bin/fa-bench" --N 129 --d 64,128 \
      --causal both --direction bwd --variants fa2 "${configs[@]}" --batch 1 --heads 2 \
      --repetitions 1 --warmup 0 --no-counters --datasheet-roofs --json "$out/names.json" >>"$log" 2>&1
    nsys stats -q -r cuda_gpu_kern_sum -f csv "$out/names.nsys-rep" 2>/dev/null |
      python3 -c 'import csv,sys; r=list(csv.DictReader(sys.stdin)); print("kernels launched:", len(r)); [print("  ", x.get("Name","")[:110]) for x in r]' |
      tee -a "$log"
    rm -f "$out/names.nsys-rep" "$out/names.sqlite" "$out/names.json"
  fi
else
  note "compute-sanitizer: not found"
fi

section "sweep"
timeout 420 "$bin/fa-bench" --N 4096 --d 64,128 --causal both --direction bwd --variants fa2,cudnn \
  "${configs[@]}" --min-time 0.1 --json "$out/bwd-tune.json" >>"$log" 2>&1
rc=$?
note "sweep: rc=$rc ($out/bwd-tune.json)"
[ "$rc" -le 1 ] || status=1

python3 - "$out/bwd-tune.json" <<'PY' | tee -a "$log"
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no sweep result: {e}")
    sys.exit(0)
def label(r):
    k = r.get("kernel_config") or {}
    s = r["variant"] + (f"@{k['block_q']}x{k['block_kv']}" if k else "")
    dq = (r.get("options") or {}).get("dq")
    return s + (f"~{dq}" if dq else "")
print(f"{'d':>4} {'causal':>6} {'row':<26} {'status':<8} {'TFLOP/s':>8} {'/cudnn':>7} {'DRAM/model':>10} {'DRAM/L2view':>11}")
for c in doc["configs"]:
    rows = [r for r in c["results"] if r.get("direction", "forward") == "backward"]
    tf = lambda r: (r.get("derived") or {}).get("tflops_convention") if r["status"] == "ok" else None
    cudnn = next((tf(r) for r in rows if r["variant"] == "cudnn" and tf(r)), None)
    best = None
    for r in rows:
        t = tf(r)
        m = r.get("model") or {}
        mb = (m.get("bytes_read") or 0) + (m.get("bytes_written") or 0)
        cnt = (r.get("counters") or {}).get("values") or {}
        dram = (cnt.get("dram__bytes_read.sum") or 0) + (cnt.get("dram__bytes_write.sum") or 0)
        l2v = m.get("bytes_l2_view") or 0
        ratio = f"{dram / mb:.3f}" if dram and mb else "-"
        vratio = f"{dram / l2v:.3f}" if dram and l2v else "-"
        rel = f"{t / cudnn:.2f}" if t and cudnn else "-"
        print(f"{c['d']:>4} {str(c['causal']):>6} {label(r):<26} {r['status']:<8} "
              f"{'-' if t is None else f'{t:.1f}':>8} {rel:>7} {ratio:>10} {vratio:>11}"
              + ("" if r["status"] == "ok" else f"  {r.get('reason', '')[:50]}"))
        if r["variant"] == "fa2" and t and (best is None or t > tf(best)):
            best = r
    if best:
        rel = f", {tf(best) / cudnn:.2f}x cudnn" if cudnn else ""
        print(f"     winner at N={c['N']} d={c['d']} causal={c['causal']}: {label(best)} "
              f"{tf(best):.1f} TFLOP/s{rel}")
PY
echo
printf '%s\n' "${summary[@]}"
exit $status
