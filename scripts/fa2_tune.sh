#!/usr/bin/env bash
# Issue 15, fa2 against FlashAttention-2's own kernels (PyTorch's flash backend) on an H200, in one
# call (about 4 minutes with a warm build; every step has a time limit, so the script always
# finishes and prints its table):
#   1. builds fa-bench and fa_tests_gpu for sm_90a only (the build of scripts/gpu_check.sh, one
#      architecture), or uses FA_PREBUILT=DIR (DIR/fa-bench, DIR/fa_tests_gpu) as gpu_check does;
#   2. the fa2 GPU tests: every compiled tile against the fp64 reference (AllVariants, OtherTiles)
#      and fault injection in every tile (Fa2/Fa2TileFaults), plus the default-tile fault grid at
#      N=1000;
#   3. fa-bench --N 4096 --d 64,128 --causal both --variants fa2 with every compiled tile (each tile
#      is one warp layout: kernels/fa2/fa2.cu, Fa2Tiles), and scripts/peers_torch.py's torch-flash
#      rows at the same shapes;
#   4. prints the table (TFLOP/s, ratio to torch-flash) and the fastest tile per (d, causal).
# To keep a winner as fa2's default: move its Fa2Shape line to the top of its head dim in
# kernels/fa2/fa2.cu (one line per head dim).
# Usage: scripts/fa2_tune.sh OUTDIR
#   FA_PREBUILT=DIR   use DIR/fa-bench and DIR/fa_tests_gpu instead of building
#   FA_BUILD_DIR      the build dir (default build-fa2-tune)
#   FA_PYTHON         the Python with torch for peers_torch.py (default .venv/bin/python, else python3)
# Exit codes: 0 every step ran green; 1 the build failed; 3 a step failed (see the summary).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/fa2_tune.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/fa2_tune.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
summary=()
failed=0
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
section() { echo -e "\n######## $1" >>"$log"; }
step() {  # name, limit (s), command...: output to OUTDIR/name.log, rc in the summary
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  section "$name: $*"
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  note "$(printf '%-12s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) "$out/$name.log")"
  return "$rc"
}

section nvidia-smi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >>"$log" 2>&1
note "gpu: $(tail -1 "$log")"

if [ -n "${FA_PREBUILT:-}" ]; then
  bin=$FA_PREBUILT
  note "binaries: prebuilt in $bin"
else
  build=${FA_BUILD_DIR:-build-fa2-tune}
  section build
  if ! { timeout 600 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DFA_CUDA_ARCHITECTURES=90a -DFA_BUILD_TESTS=ON >>"$log" 2>&1 &&
         timeout 600 cmake --build "$build" -j "$(nproc)" --target fa-bench fa_tests_gpu >>"$log" 2>&1; }; then
    tail -40 "$log"
    note "build: FAILED"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
  bin=$build/bin
  note "build: ok ($(grep -c 'spill' "$log") spill warnings)"
fi

step tests 240 "$bin/fa_tests_gpu" \
  --gtest_filter='AllVariants/*fa2*:OtherTiles/*fa2*:Fa2/Fa2TileFaults.*:Shapes/FaultsAreCaught.*/*_N1000'
grep -E '^\[  (PASSED|FAILED)  \]' "$out/tests.log" | tail -3
grep '^fault-table' "$out/tests.log" | grep ' fa2' | cut -d'|' -f2- >"$out/fault_table_fa2.txt"
note "fa2 faults: $(grep -c '| caught' "$out/fault_table_fa2.txt") caught, $(grep -c 'not caught' "$out/fault_table_fa2.txt") NOT caught"

# Every compiled tile: --block-q/--block-kv list all values, the planner keeps the compiled pairs.
step fa2 150 "$bin/fa-bench" --N 4096 --d 64,128 --causal both --variants fa2 \
  --block-q 64,128,256 --block-kv 32,64,128 --json "$out/fa2-tiles.json"
py=${FA_PYTHON:-}
[ -z "$py" ] && { [ -x .venv/bin/python ] && py=.venv/bin/python || py=python3; }
step torch 120 "$py" scripts/peers_torch.py --N 4096 --d 64,128 --causal both --backends flash \
  --fa-bench "$bin/fa-bench" --json "$out/torch-flash.json"

echo
echo "== TFLOP/s at N=4096 (fa-bench median; torch-flash: peers_torch.py, same machine) ==" | tee -a "$log"
python3 - "$out/fa2-tiles.json" "$out/torch-flash.json" <<'PY' | tee -a "$log" "$out/table.txt"
import json, sys
rows = {}  # (d, causal) -> {label: tflops or status}
for path in sys.argv[1:]:
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"(no result file {path}: {e})")
        continue
    for c in doc["configs"]:
        for r in c["results"]:
            kc = r.get("kernel_config") or {}
            label = r["variant"] + (f"@{kc['block_q']}x{kc['block_kv']}" if kc else "")
            t = (r.get("derived") or {}).get("tflops_convention")
            rows.setdefault((c["d"], c["causal"]), {})[label] = t if r["status"] == "ok" else r["status"]
for (d, causal), cells in sorted(rows.items()):
    ref = cells.get("torch-flash")
    print(f"d={d} {'causal' if causal else 'full  '}")
    ours = {k: v for k, v in cells.items() if k.startswith("fa2") and isinstance(v, (int, float))}
    for label, v in sorted(cells.items(), key=lambda kv: kv[0]):
        if isinstance(v, (int, float)):
            ratio = f"{v / ref:5.2f}x" if isinstance(ref, (int, float)) and ref else "   - "
            print(f"  {label:16s} {v:7.1f}  {ratio}")
        else:
            print(f"  {label:16s} {v}")
    if ours:
        best = max(ours, key=ours.get)
        ratio = ours[best] / ref if isinstance(ref, (int, float)) and ref else float("nan")
        print(f"  winner: {best} ({ours[best]:.1f} TFLOP/s, {ratio:.2f}x torch-flash)")
PY
echo
echo "summary:" | tee -a "$log"
printf '  %s\n' "${summary[@]}" | tee -a "$log"
[ "$failed" -eq 0 ] || exit 3
