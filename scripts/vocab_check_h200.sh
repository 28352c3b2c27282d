#!/usr/bin/env bash
# Issue 14 (variant vocabulary) on a GPU: the acceptance table, the row specs the record carries,
# --fa2-order both, --profiler-range and the forced counter error. About 3 minutes on an H200
# after the build. Logs and result files in OUTDIR; a summary table at the end.
#   scripts/vocab_check_h200.sh OUTDIR        (builds build/ first if needed: scripts/build.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/vocab_check_h200.sh OUTDIR}
mkdir -p "$out"
bin=${FA_BENCH_BIN:-build/bin/fa-bench}
[ -x "$bin" ] || scripts/build.sh fa-bench fa_tests_gpu >"$out/build.log" 2>&1 || { echo "build failed: $out/build.log"; exit 1; }
summary=()
step() {  # name, command...
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-22s rc=%s' "$name" "$rc")")
}
step acceptance "$bin" --N 4096 --d 64,128 --variants all --json "$out/acceptance.json"
step fa2-order-both "$bin" --N 4096 --d 64 --variants fa2,cudnn --fa2-order both \
  --block-q 64,128 --block-kv 64 --json "$out/order.json"
step profiler-range "$bin" --N 1024 --d 64 --variants fa2 --warmup 1 --repetitions 5 \
  --profiler-range --datasheet-roofs --json "$out/range.json"
step forced-counter-error "$bin" --N 1024 --d 64 --variants fa2 --warmup 1 --repetitions 5 \
  --datasheet-roofs --test-force-counter-error insufficient_privileges --json "$out/forced.json"
if [ -x build/bin/fa_tests_gpu ]; then
  step gpu-tests build/bin/fa_tests_gpu --gtest_filter='Fa2Order.*:AllVariants/*:Fp8.*:CountersGpu.*'
fi
cat "$out/acceptance.log"
echo
echo "== rows as recorded (variant, direction, kernel_config, options; status) =="
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
for name in ("acceptance.json", "order.json"):
    p = Path(sys.argv[1]) / name
    if not p.exists():
        print(f"{name}: missing"); continue
    d = json.loads(p.read_text())
    print(f"{name}: schema {d['schema']}")
    for c in d["configs"]:
        for r in c["results"]:
            k = r["kernel_config"]
            kc = f"{k['block_q']}x{k['block_kv']} s{k['stages']}" if k else "-"
            ms = r["timing"]["median_ms"] if r.get("timing") else None
            print(f"  d={c['d']} causal={int(c['causal'])} {r['variant']:<10} {r['direction']:<8} "
                  f"{kc:<10} {json.dumps(r['options']):<28} {r['status']:<12} "
                  f"{'' if ms is None else f'{ms:.4f} ms'}")
PY
echo
echo "forced counter error: warning lines $(grep -c 'hardware counters unavailable' "$out/forced-counter-error.log"), ok rows $(grep -cE '  ok$' "$out/forced-counter-error.log")"
echo
printf '%s\n' "${summary[@]}"
