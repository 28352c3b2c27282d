#!/usr/bin/env bash
# The cuDNN peer on cudnn-frontend, checked on a GPU machine in one call (about 3 minutes with a
# build folder carried along; building from nothing takes longer): build, the GPU tests of the
# cuDNN peer (forward against fp64 incl. the lse, the inference forward writing no lse, the
# backward against an fp64 backward with a wrong lse caught, plans built once, and the known
# issues: the FP8 graph at d=64), then fa-bench over N 1024/2048/4096, d 64/128, causal both with
# cudnn (stats on and off) and cudnn-fp8 in one process (cudnn-fp8 at N=1024 after other cuDNN
# graphs: the old failure), and cudnn-fp8 alone at N=1024 d=128 as the first graph of a process.
# Logs and result files go to OUTDIR; a summary table is printed last.
# Usage: scripts/cudnn_check.sh OUTDIR
#   FA_PREBUILT=DIR   use DIR/fa-bench and DIR/fa_tests_gpu instead of building
#   FA_BUILD_DIR=DIR  build folder (default build-gpu, the one scripts/gpu_check.sh uses)
# The cudnn-frontend headers: .venv/cudnn-frontend-<version>/ or a wheel in .whl/ (carry one of
# them to an offline machine; scripts/headers.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/cudnn_check.sh OUTDIR}
mkdir -p "$out"
log="$out/cudnn_check.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
section() { echo -e "\n######## $1" >>"$log"; }

section nvidia-smi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$log" 2>&1
note "gpu: $(tail -1 "$log")"

if [ -n "${FA_PREBUILT:-}" ]; then
  bin=$FA_PREBUILT
else
  build=${FA_BUILD_DIR:-build-gpu}
  section "header wheels"
  scripts/headers.sh >>"$log" 2>&1 || note "header wheels: MISSING (see $log)"
  section build
  if ! { timeout 600 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=ON >>"$log" 2>&1 &&
         timeout 600 cmake --build "$build" -j "$(nproc)" --target fa-bench fa_tests_gpu >>"$log" 2>&1; }; then
    tail -30 "$log"
    note "build: FAILED"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
  bin=$build/bin
fi
grep -E "^-- cudnn:" "$log" | tail -1
note "fa-bench: $("$bin/fa-bench" --list-variants 2>/dev/null | grep -m1 'available:.*cuDNN\|available:.*cudnn' | sed 's/^ *available: *//')"

section "gpu tests (cuDNN)"
FA_CUDNN_FP8_RECHECK=1 timeout 150 "$bin/fa_tests_gpu" \
  --gtest_filter='*Cudnn*:*cudnn*' >"$out/gpu_tests.txt" 2>&1
rc=$?
cat "$out/gpu_tests.txt" >>"$log"
note "gpu tests (cuDNN): rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_tests.txt" | tail -2 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$out/gpu_tests.txt" | head -20
grep -E '^cudnn-(backward|fp8)' "$out/gpu_tests.txt"

section "fa-bench: one process, cudnn (stats both) then cudnn-fp8 per configuration"
timeout 150 "$bin/fa-bench" --N 1024,2048,4096 --d 64,128 --causal both --variants cudnn,cudnn-fp8 \
  --cudnn-stats both --no-counters --no-energy --datasheet-roofs --json "$out/sweep.json" >>"$log" 2>&1
note "fa-bench sweep: rc=$?"
section "fa-bench: cudnn-fp8 alone, N=1024 d=128 (the first cuDNN graph of its process)"
timeout 60 "$bin/fa-bench" --N 1024 --d 128 --causal both --variants cudnn-fp8 --no-counters \
  --datasheet-roofs --json "$out/fp8-alone.json" >>"$log" 2>&1
note "fa-bench cudnn-fp8 alone: rc=$?"

printf '\n%s\n' "${summary[@]}"
python3 - "$out/sweep.json" "$out/fp8-alone.json" <<'PY'
import json, sys
rows = []
for path in sys.argv[1:]:
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{path}: {e}")
        continue
    tag = "alone" if "alone" in path else "sweep"
    for c in doc["configs"]:
        for r in c["results"]:
            label = r["variant"]
            if "stats" in r.get("options", {}):
                label += "~stats=" + ("on" if r["options"]["stats"] else "off")
            t = r.get("timing") or {}
            d = r.get("derived") or {}
            v = r.get("verification") or {}
            err = v.get("relative_rmse", v.get("worst_row_ratio"))
            rows.append((tag, c["N"], c["d"], c["causal"], label, t.get("median_ms"),
                         d.get("tflops_convention"), err, r["status"], r["reason"][:70]))
print(f"\n{'run':5} {'N':>5} {'d':>4} {'causal':>6}  {'row':18} {'ms':>8} {'TFLOP/s':>8} {'err/tol|rRMSE':>13}  status")
for tag, N, d, causal, label, ms, tf, err, status, reason in rows:
    ms_s = f"{ms:8.4f}" if ms else "       -"
    tf_s = f"{tf:8.1f}" if tf else "       -"
    err_s = f"{err:13.3e}" if err is not None else "            -"
    print(f"{tag:5} {N:>5} {d:>4} {str(causal):>6}  {label:18} {ms_s} {tf_s} {err_s}  {status}"
          + (f" ({reason})" if status != "ok" else ""))
# stats off against on, same configuration and process
on = {(N, d, c): ms for t, N, d, c, l, ms, *_ in rows if l == "cudnn~stats=on" and ms}
off = {(N, d, c): ms for t, N, d, c, l, ms, *_ in rows if l == "cudnn~stats=off" and ms}
if on and off:
    print("\ninference forward (stats off) time / training forward (stats on) time:")
    for k in sorted(on):
        if k in off:
            print(f"  N={k[0]} d={k[1]} causal={k[2]}: {off[k] / on[k]:.3f}")
PY
