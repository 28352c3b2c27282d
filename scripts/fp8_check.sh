#!/usr/bin/env bash
# Issue 16 (fp8 on sm_90a: FP8 wgmma) on an H200: builds fa-bench and the GPU tests with CuTe and
# the cudnn-frontend headers, runs the fp8 GPU tests (correctness of fp8 and fp8-sm89 against the
# fp64 reference, both scale granularities, the four input families, fault injection),
# compute-sanitizer memcheck and racecheck on the new kernel, then the tables:
#   fa-bench --N 1024,2048,4096,8192,16384 --d 64,128 --causal both
#            --variants fa3,fp8,cudnn,cudnn-fp8                         (fp8 with its quantisation)
#   the same --variants fp8 --fp8-prequantized                          (attention alone)
#   --N 4096 --d 128 --variants fp8,fp8-sm89 --inputs normal|outliers|uniform|heavy (accuracy)
#   --N 1024,4096,16384 --d 64,128 --causal both --variants fp8 --fp8-schedule all, with and
#            without --fp8-prequantized                                 (fp8's grids, step schedules)
# and prints TFLOP/s, fp8/fa3, fp8-prequantized/cudnn-fp8 and the relative RMSE.
#   scripts/fp8_check.sh OUTDIR
# FP8_CHECK_STEPS picks steps (default "tests memcheck racecheck table prequantized inputs
# schedules"); FP8_CHECK_N and FP8_CHECK_SCHEDULE_N the table's and the schedules' N lists;
# FP8_CHECK_BUILD_ONLY=1 builds and stops. Result files: OUTDIR/fp8-table.json (commit it as
# tests/data/h200-fp8-hopper-<date>.json), fp8-prequantized.json, fp8-inputs-<family>.json.
# Exit codes: 0 every step green; 1 the build failed or fp8 (sm_90a) was not built; 3 a step
# failed (see the summary and its log; a hung step says HANG and the test that was running).
set -uo pipefail
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # fa3_build (cd's to the repository root); sets build, bin
out=${1:?usage: scripts/fp8_check.sh OUTDIR}
mkdir -p "$out"
# CuTe and cudnn-frontend headers, then fa-bench and fa_tests_gpu (fp8's sm_90a kernel needs the
# same CuTe as fa3).
fa3_build "$out" || exit 1
bin=$build/bin/fa-bench
if ! scripts/sm90a_built.sh "$bin" fp8; then
  echo "fp8_check: error: fp8 (sm_90a) was not built ($bin --list-variants)" >&2
  exit 1
fi
if [ -n "${FP8_CHECK_BUILD_ONLY:-}" ]; then
  echo "fp8_check: built ($build); FP8_CHECK_BUILD_ONLY set: stopping before the GPU steps"
  exit 0
fi

summary=()
failed=0
# Every step runs under timeout(1): FP8_CHECK_STEP_TIMEOUT seconds (default 240), then KILL 10 s
# later; rc 124 (or 137) is a hang. The GPU tests have their own watchdog as well: a kernel that
# does not finish in FA_TEST_KERNEL_TIMEOUT_S (default 10 s) ends the binary with rc 124 and a
# "kernel did not finish" line naming the test and shape.
step_timeout=${FP8_CHECK_STEP_TIMEOUT:-240}
step() {  # name, command...
  local name=$1 t0=$SECONDS
  shift
  echo "fp8_check: step $name (timeout ${step_timeout} s): $out/$name.log" >&2
  timeout -k 10 "$step_timeout" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  local note=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    # gtest logs: the test that was running is the last [ RUN ] line.
    local running
    running=$(grep -E '^\[ RUN      \] ' "$out/$name.log" 2>/dev/null | tail -1 | sed 's/^\[ RUN      \] //')
    note="HANG or timeout after $((SECONDS - t0)) s${running:+; running: $running}"
    grep -h 'kernel did not finish' "$out/$name.log" 2>/dev/null | head -1 | sed 's/^/fp8_check: /' >&2
    echo "fp8_check: step $name: $note" >&2
  fi
  summary+=("$(printf '%-22s rc=%-3s %4ss  %s  %s' "$name" "$rc" $((SECONDS - t0)) "$out/$name.log" "$note")")
}
steps=" ${FP8_CHECK_STEPS:-tests memcheck racecheck table prequantized inputs schedules} "
want() { [[ "$steps" == *" $1 "* ]]; }
want tests && step gpu-tests-fp8 "$build/bin/fa_tests_gpu" \
  --gtest_filter='Watchdog.*:AllVariants/*fp8*:Fp8.*:Fp8Schedules.*:Fp8Dynamic.*:Shapes/FaultsAreCaught.*/d64_bf16_causal_N1000:Shapes/FaultsAreCaught.*/d128_bf16_full_N1000:Shapes/FaultsAreCaught.*/d128_bf16_causal_N4096'
# The roofline ceilings once, outside the sanitizers (cached).
timeout -k 10 "$step_timeout" "$bin" --N 128 --d 64 --variants fp8 --no-counters --repetitions 1 \
  >"$out/ceilings.log" 2>&1 || echo "fp8_check: warning: the ceilings run failed (rc $?): $out/ceilings.log" >&2
want memcheck && step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 \
  --kernel-name kns=fp8_sm90_forward_kernel \
  "$bin" --N 1000 --d 64,128 --causal both --variants fp8 --batch 1 --heads 2 --warmup 0 \
  --repetitions 1 --no-counters --fp8-scale both --fp8-schedule all
want racecheck && step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name kns=fp8_sm90_forward_kernel \
  "$bin" --N 300 --d 64,128 --causal both --variants fp8 --batch 1 --heads 1 --warmup 0 \
  --repetitions 1 --no-counters --fp8-schedule all
N=${FP8_CHECK_N:-1024,2048,4096,8192,16384}
want table && step table "$bin" --N "$N" --d 64,128 --causal both \
  --variants fa3,fp8,cudnn,cudnn-fp8 --no-counters --json "$out/fp8-table.json"
want prequantized && step prequantized "$bin" --N "$N" --d 64,128 --causal both \
  --variants fp8 --fp8-prequantized --no-counters --json "$out/fp8-prequantized.json"
NS=${FP8_CHECK_SCHEDULE_N:-1024,4096,16384}
want schedules && step schedules "$bin" --N "$NS" --d 64,128 --causal both \
  --variants fp8 --fp8-schedule all --no-counters --json "$out/fp8-schedules.json"
want schedules && step schedules-pq "$bin" --N "$NS" --d 64,128 --causal both \
  --variants fp8 --fp8-schedule all --fp8-prequantized --no-counters \
  --json "$out/fp8-schedules-pq.json"
for fam in normal outliers uniform heavy; do
  want inputs && step "inputs-$fam" "$bin" --N 4096 --d 128 --variants fp8,fp8-sm89 \
    --fp8-scale both --inputs "$fam" --no-counters --json "$out/fp8-inputs-$fam.json"
done

echo "== TFLOP/s (fa-bench median, same run; fp8 with its quantisation, fp8-pq: --fp8-prequantized) =="
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]

def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None

def rows_of(doc, tag="", schedules=False):
    """Rows by (d, causal, N, inputs) and label; schedules: label fp8's schedule unless tiles
    (the schedule runs). Elsewhere each shape runs its default schedule, under the plain label."""
    res = {}
    for c in (doc or {}).get("configs", []):
        for r in c["results"]:
            opts = r.get("options") or {}
            lab = r["variant"] + tag
            if opts.get("fp8_scale", "block") != "block":
                lab += "~" + opts["fp8_scale"]
            if schedules and opts.get("fp8_schedule", "tiles") != "tiles":
                lab += "~" + opts["fp8_schedule"]
            t = (r.get("derived") or {}).get("tflops_convention") if r["status"] == "ok" else None
            v = r.get("verification") or {}
            res.setdefault((c["d"], c["causal"], c["N"], c.get("inputs")), {})[lab] = (
                t, r["status"], v.get("passed"), v.get("rmse"), v.get("baseline_rmse"))
    return res

table = rows_of(load("fp8-table.json"))
for k, v in rows_of(load("fp8-prequantized.json"), "-pq").items():
    table.setdefault(k, {}).update(v)
labels = ["fa3", "fp8", "fp8-pq", "cudnn", "cudnn-fp8"]
print(f"{'d':>4} {'causal':>6} {'N':>6} " + " ".join(f"{l:>10}" for l in labels) +
      f" {'fp8/fa3':>8} {'pq/cudnn8':>9} {'fp8 RMSE':>9}")
bad = []
for key in sorted(table):
    v = table[key]
    cells = []
    for l in labels:
        t, st, ok, _, _ = v.get(l, (None, "-", None, None, None))
        cells.append(f"{t:10.1f}" if t else f"{st[:10]:>10}")
        if l in v and (st not in ("ok", "unsupported") or ok is False):
            bad.append(f"d={key[0]} causal={int(key[1])} N={key[2]} {l}")
    get = lambda l: v.get(l, (None,))[0]
    r1 = f"{get('fp8') / get('fa3'):.2f}x" if get("fp8") and get("fa3") else "-"
    r2 = f"{get('fp8-pq') / get('cudnn-fp8'):.2f}x" if get("fp8-pq") and get("cudnn-fp8") else "-"
    rm = v.get("fp8", (None,) * 5)[3]
    print(f"{key[0]:>4} {int(key[1]):>6} {key[2]:>6} " + " ".join(cells) +
          f" {r1:>8} {r2:>9} {rm if rm is not None else float('nan'):9.2e}")
print(f"rows not ok or failing verification: {len(bad)}" + (": " + ", ".join(bad[:8]) if bad else ""))
print()
print("== fp8's schedules (TFLOP/s; pq: --fp8-prequantized; ratio to tiles in brackets) ==")
sched = rows_of(load("fp8-schedules.json"), schedules=True)
for k, v in rows_of(load("fp8-schedules-pq.json"), "-pq", schedules=True).items():
    sched.setdefault(k, {}).update(v)
names = ["", "~persistent-tma-store", "~dynamic-tma-store"]
for tag in ("", "-pq"):
    print(f"{'d':>4} {'causal':>6} {'N':>6} " + " ".join(f"{'fp8' + tag + n:>28}" for n in names))
    for key in sorted(sched):
        v = sched[key]
        base = v.get("fp8" + tag, (None,))[0]
        cells = []
        for n in names:
            t, st, ok, _, _ = v.get("fp8" + tag + n, (None, "-", None, None, None))
            cell = f"{t:.1f}" + (f" ({t / base:.2f}x)" if base else "") if t else st[:20]
            cells.append(f"{cell + ('' if ok is not False else ' FAIL'):>28}")
        print(f"{key[0]:>4} {int(key[1]):>6} {key[2]:>6} " + " ".join(cells))
print()
print("== accuracy, N=4096 d=128 non-causal: relative RMSE (plain per-head FP8 in brackets) ==")
for fam in ("normal", "outliers", "uniform", "heavy"):
    rows = rows_of(load(f"fp8-inputs-{fam}.json"))
    cells = []
    for key, v in sorted(rows.items()):
        for lab, (t, st, ok, rm, base) in sorted(v.items()):
            if rm is not None:
                cells.append(f"{lab} {rm:.2e} ({base:.2e}){'' if ok else ' FAIL'}")
    print(f"{fam:>9}: " + ("; ".join(cells) if cells else "no result"))
PY
echo
grep -E '^\[  PASSED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test|^\[  FAILED  \] ' "$out/gpu-tests-fp8.log" 2>/dev/null |
  sed 's/^/gpu-tests: /'
echo "== issue 16's outlier bar (relative RMSE <= 0.40x plain per-tensor FP8; Fp8.MeetsTheRmseBars) =="
grep -h '^fp8-outlier-bar' "$out/gpu-tests-fp8.log" 2>/dev/null | sed 's/^fp8-outlier-bar | //'
grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out"/memcheck.log "$out"/racecheck.log 2>/dev/null | sed 's/^/sanitizer: /'
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
