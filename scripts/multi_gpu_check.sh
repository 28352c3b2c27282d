#!/usr/bin/env bash
# The --devices / --shard / merge check on a host with two GPUs or more (issue 18; lead runs it on
# nvidia-h200-x2, about 4 minutes when build-gpu/ is built). Logs and result files go to OUTDIR;
# a summary with PASS/FAIL per check is printed last.
#   1. one sweep on GPU 0 alone, then the same with --devices all: both wall times, the ratio
#   2. the --devices rows against the one-GPU rows: the same rows, all verified ok, and
#      fa-bench gate (its own time and counter tolerances) passes
#   3. --shard 0/2 (GPU 0) and --shard 1/2 (GPU 1), run at once, merged with fa-bench merge: the
#      same rows as the unsharded run, and the gate passes
# Usage: scripts/multi_gpu_check.sh OUTDIR      (FA_BUILD_DIR: default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/multi_gpu_check.sh OUTDIR}
mkdir -p "$out"
log="$out/multi_gpu_check.log"
: >"$log"
export PATH="$PATH:/usr/local/cuda/bin"
build=${FA_BUILD_DIR:-build-gpu}
bin=$build/bin/fa-bench
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$log"; }
finish() { echo; echo "multi_gpu_check summary ($out):"; printf '  %s\n' "${summary[@]}"; exit "$1"; }
unset SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX

nvidia-smi --query-gpu=index,name,uuid,clocks.sm,temperature.gpu --format=csv >>"$log" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
note "gpus: $ngpu"
[ "$ngpu" -ge 2 ] || { note "FAIL: needs 2 GPUs or more"; finish 1; }
if [ ! -x "$bin" ]; then
  echo "building fa-bench in $build/ (log: $log)" >&2
  if ! { timeout 600 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=OFF >>"$log" 2>&1 &&
         timeout 600 cmake --build "$build" -j "$(nproc)" --target fa-bench >>"$log" 2>&1; }; then
    note "build: FAILED (tail of $log)"; tail -20 "$log"; finish 1
  fi
fi

# shellcheck disable=SC2054  # commas belong to the values
# FA_MULTI_VARIANTS: the sweep's variants (default all).
# --repetitions 10: the gate needs 5 samples a row, and under --min-time fa1 at N=8192 got 2-4
# (two H200s).
# No energy windows: about 1.3 s a row that says nothing about spreading a sweep (docs/energy.md).
sweep=(--N 1024,2048,4096,8192 --d 64,128 --causal both --variants "${FA_MULTI_VARIANTS:-all}"
  --repetitions 10 --no-energy)
sub() { awk "BEGIN { printf \"%.2f\", $1 - $2 }"; }
timed() {  # name, then fa-bench arguments: runs, logs, prints the wall time
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 300 "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc, $(sub "$t1" "$t0") s: $bin $*" >>"$log"
  echo "$rc $(sub "$t1" "$t0")"
}
ok_exit() { [ "$1" = 0 ] || [ "$1" = 1 ]; }

read -r rc1 t1 < <(timed one "${sweep[@]}" --device 0 --json "$out/one.json")
note "one GPU (--device 0): exit $rc1, wall $(printf %.1f "$t1") s"
read -r rc2 t2 < <(timed devices "${sweep[@]}" --devices all --json "$out/devices.json")
note "--devices all ($ngpu GPUs): exit $rc2, wall $(printf %.1f "$t2") s, ratio $(awk "BEGIN { printf \"%.2f\", $t2 / $t1 }") of one GPU"
grep '^gpu [0-9]*: ' "$out/devices.err" | grep -v '\[' >>"$log"

# The rows of two files: the same keys, every row verified ok in both.
same_rows() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def rows(path):
    doc = json.load(open(path))
    out = {}
    for c in doc["configs"]:
        for r in c["results"]:
            key = (c["B"], c["H"], c["N"], c["d"], c["causal"], c["dtype"], r["variant"],
                   r["direction"], json.dumps(r["kernel_config"], sort_keys=True),
                   json.dumps(r["options"], sort_keys=True))
            out[key] = r["status"]
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
bad = [k for k in a if k in b and (a[k], b[k]) != ("ok", "ok") and a[k] != "unsupported"]
print(f"{len(a)} vs {len(b)} rows, {len(set(a) ^ set(b))} not in both, "
      f"{sum(v == 'ok' for v in b.values())} ok, {len(bad)} not ok in both")
sys.exit(0 if set(a) == set(b) and not bad else 1)
PY
}
gate() {  # baseline current name
  timeout 60 "$bin" gate --baseline "$1" --current "$2" --markdown "$out/gate-$3.md" >"$out/gate-$3.out" 2>&1
  echo $?
}

if ok_exit "$rc1" && ok_exit "$rc2"; then
  if r=$(same_rows "$out/one.json" "$out/devices.json"); then note "PASS: --devices rows = one-GPU rows ($r)"; else note "FAIL: --devices rows ($r)"; fi
  g=$(gate "$out/one.json" "$out/devices.json" devices)
  if [ "$g" = 0 ]; then note "PASS: gate one.json -> devices.json"; else note "FAIL: gate one.json -> devices.json exit $g ($out/gate-devices.out: $(grep -m1 -E 'FAIL|regress|error' "$out/gate-devices.out"))"; fi
else
  note "FAIL: a sweep did not finish (see $out/one.err, $out/devices.err)"
fi

# Shards: 0/2 on GPU 0 and 1/2 on GPU 1 at the same time, then merged.
t0=$(date +%s.%N)
timeout 300 "$bin" "${sweep[@]}" --device 0 --shard 0/2 --json "$out/shard0.json" >"$out/shard0.out" 2>"$out/shard0.err" &
p0=$!
timeout 300 "$bin" "${sweep[@]}" --device 1 --shard 1/2 --json "$out/shard1.json" >"$out/shard1.out" 2>"$out/shard1.err" &
p1=$!
wait $p0; s0=$?
wait $p1; s1=$?
t3=$(sub "$(date +%s.%N)" "$t0")
note "--shard 0/2 (GPU 0) + 1/2 (GPU 1) at once: exits $s0, $s1, wall $(printf %.1f "$t3") s"
if ok_exit "$s0" && ok_exit "$s1" && "$bin" merge "$out/shard0.json" "$out/shard1.json" -o "$out/shards.json" >>"$log" 2>&1; then
  if r=$(same_rows "$out/one.json" "$out/shards.json"); then note "PASS: shards merged = unsharded rows ($r)"; else note "FAIL: shards merged ($r)"; fi
  g=$(gate "$out/one.json" "$out/shards.json" shards)
  if [ "$g" = 0 ]; then note "PASS: gate one.json -> shards.json"; else note "FAIL: gate one.json -> shards.json exit $g ($out/gate-shards.out)"; fi
else
  note "FAIL: shards or their merge (see $out/shard*.err, $log)"
fi
if printf '%s\n' "${summary[@]}" | grep -q FAIL; then finish 1; else finish 0; fi
