#!/usr/bin/env bash
# Issue 15 (fa3, the Hopper schedule) on an H200: builds fa-bench and the GPU tests with fa3, runs
# the GPU tests filtered to fa3 (correctness against the fp64 reference, the ablation schedules,
# fault injection), compute-sanitizer memcheck, racecheck (every schedule) and synccheck on small
# fa3 runs, then the table:
#   fa-bench --N 1024,2048,4096,8192,16384 --d 64,128 --causal both --variants fa2,fa3,cudnn
#            --fa3-schedule full,no-pingpong,no-overlap,persistent   (the alternatives: fa3_tune.sh)
# FA3_CHECK_STEPS picks steps (default: "tests memcheck racecheck synccheck tiles table").
# Logs and result files in OUTDIR; a summary at the end.
#   scripts/fa3_check.sh OUTDIR
#   FA3_CHECK_BUILD_ONLY=1 scripts/fa3_check.sh OUTDIR   builds and stops (a first call on a fresh
#                                                        machine, so the GPU steps get their own)
# CuTe: the build needs the nvidia-cutlass headers. Without network, carry the wheel in .whl/
# (pip download -d .whl nvidia-cutlass==4.2.0.0 on a machine with one): this script unpacks it
# into build/_deps/ and configures with -DFA_CUTLASS_INCLUDE.
# Exit codes: 0 every step ran green; 1 the build failed or fa3 was not built; 3 a step failed
# (see the summary and its log).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# Helpers, also for scripts/fa3_tune.sh (which sources this file and gets these alone).
# fa3_build OUTDIR: CuTe headers (.venv's wheel, or .whl/'s unpacked, or FA_CUTLASS_INCLUDE), the
# cudnn-frontend headers (scripts/cudnn_frontend.sh), then fa-bench and fa_tests_gpu into
# $FA_BUILD_DIR (default build), configured with $FA3_CMAKE_EXTRA too; sets $build and $bin.
# Returns 1 (one line on stderr) when the build fails or fa3 was not built.
fa3_build() {
  local out=$1 cutlass
  build=${FA_BUILD_DIR:-build}
  export PATH="$PATH:/usr/local/cuda/bin"
  cutlass=$(scripts/cute_include.sh "$build") || return 1  # its reason on stderr
  scripts/cudnn_frontend.sh >"$out/cudnn-frontend.log" 2>&1 ||
    echo "fa3: warning: no cudnn-frontend headers (the cudnn rows will say unsupported): $out/cudnn-frontend.log" >&2
  # FA3_CMAKE_EXTRA: more configure arguments (fa3_tune.sh: -DFA_FA3_ALTERNATIVES=ON)
  export FA_CMAKE_ARGS="${FA_CMAKE_ARGS:-} -DFA_CUTLASS_INCLUDE=$cutlass ${FA3_CMAKE_EXTRA:-}"
  if [ -f "$build/CMakeCache.txt" ]; then
    # shellcheck disable=SC2086  # a list of arguments
    cmake -S . -B "$build" -DFA_CUTLASS_INCLUDE="$cutlass" ${FA3_CMAKE_EXTRA:-} >"$out/configure.log" 2>&1
  fi
  # FA3_BUILD_TARGETS: what to build (default fa-bench fa_tests_gpu; an A/B's base side: fa-bench)
  # shellcheck disable=SC2086  # a list of targets
  if ! FA_BUILD_TESTS=ON FA_BUILD_DIR=$build scripts/build.sh ${FA3_BUILD_TARGETS:-fa-bench fa_tests_gpu} >"$out/build.log" 2>&1; then
    echo "fa3: build failed: $out/build.log" >&2
    tail -20 "$out/build.log" >&2
    return 1
  fi
  bin=$build/bin/fa-bench
  if ! scripts/sm90a_built.sh "$bin" fa3; then
    echo "fa3: error: fa3 was not built ($bin --list-variants)" >&2
    return 1
  fi
}

summary=()
failed=0
step() {  # name, command... (a hung kernel ends the step after FA3_STEP_TIMEOUT s, default 240: rc 124)
  local name=$1 t0=$SECONDS
  shift
  timeout -k 10 "${FA3_STEP_TIMEOUT:-240}" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) "$out/$name.log")")
}
# The roofline ceilings measured once outside the sanitizers (cached; racecheck and synccheck
# crashed inside the ceiling kernels, H200 2026-11-23).
fa3_ceilings() { "$bin" --N 128 --d 64 --variants fa3 --no-counters --repetitions 1 >"$out/ceilings.log" 2>&1; }

[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0  # sourced: the helpers only

out=${1:?usage: scripts/fa3_check.sh OUTDIR}
mkdir -p "$out"
fa3_build "$out" || exit 1

if [ -n "${FA3_CHECK_BUILD_ONLY:-}" ]; then
  echo "fa3_check: built ($build); FA3_CHECK_BUILD_ONLY set: stopping before the GPU steps"
  exit 0
fi

# FaultsAreCaught runs every variant per shape: five shapes (the three head dims, dtypes, causal,
# a partial last block) keep it short; the full grid is in scripts/test.sh's GPU run.
steps=" ${FA3_CHECK_STEPS:-tests memcheck racecheck synccheck tiles table} "
want() { [[ "$steps" == *" $1 "* ]]; }
want tests && step gpu-tests-fa3 "$build/bin/fa_tests_gpu" \
  --gtest_filter='AllVariants/*fa3*:OtherTiles/*fa3*:Ablation/*:Fa3.*:Shapes/FaultsAreCaught.*/d64_bf16_causal_N1000:Shapes/FaultsAreCaught.*/d128_fp16_full_N1000:Shapes/FaultsAreCaught.*/d128_bf16_causal_N4096:Shapes/FaultsAreCaught.*/d64_fp16_full_N4096:Shapes/FaultsAreCaught.*/d256_bf16_causal_N1000'
# Small runs under the sanitizer (one timed repetition; verification on), at every head dim fa3
# builds.
fa3_ceilings
dims=64,128,256
san="$bin --N 1000 --d $dims --causal both --variants fa3 --batch 1 --heads 2 --warmup 0 --repetitions 1 --no-counters"
want memcheck && step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 \
  --kernel-name kns=fa3_forward_kernel $san --fa3-schedule all
# racecheck is slow on these kernels: N=300 (3 query blocks, a partial one), every schedule.
# Only fa3's kernels: the roofline ceilings (cuBLAS, the copy kernels) are measured in the same
# process, and racecheck stopped at its hazard limit inside them (H200, 2026-11-23).
want racecheck && step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name kns=fa3_forward_kernel \
  "$bin" --N 300 --d "$dims" --causal both --variants fa3 --batch 1 --heads 1 --warmup 0 \
  --repetitions 1 --no-counters --fa3-schedule all
want synccheck && step synccheck compute-sanitizer --tool synccheck --error-exitcode 9 \
  --kernel-name kns=fa3_forward_kernel \
  "$bin" --N 300 --d "$dims" --causal both --variants fa3 --batch 1 --heads 1 --warmup 0 \
  --repetitions 1 --no-counters --fa3-schedule all
# The d=64 tiles (128 and 192 query rows) side by side, with and without the intra-warpgroup
# overlap and the turns (192 rows has no causal persistent build).
for sch in full no-overlap no-pingpong; do
  want tiles && step "tiles-$sch" "$bin" --N 1024,4096,16384 --d 64 --causal both --variants fa3 \
    --block-q 128,192 --block-kv 128 --fa3-schedule "$sch" --no-counters \
    --json "$out/fa3-tiles-$sch.json"
done
want table && step table "$bin" --N "${FA3_CHECK_N:-1024,2048,4096,8192,16384}" --d "$dims" --causal both \
  --variants fa2,fa3,cudnn --fa3-schedule full,no-pingpong,no-overlap,persistent \
  --json "$out/fa3-table.json"

echo "== TFLOP/s (fa-bench median; ratio = row / cudnn, same run) =="
python3 - "$out/fa3-table.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no table: {e}")
rows, defaults = {}, {}
for c in d["configs"]:
    key = (c["d"], c["causal"], c["N"])
    for r in c["results"]:
        opts = r.get("options") or {}
        label = r["variant"] + ("~" + opts["schedule"] if "schedule" in opts and opts["schedule"] != "full" else "")
        t = (r.get("derived") or {}).get("tflops_convention")
        ver = (r.get("verification") or {}).get("passed")
        rows.setdefault(key, {})[label] = (t if r["status"] == "ok" else None, r["status"], ver)
        # The row fa3 runs for this shape when no schedule is named, as fa-bench marks it.
        if r["variant"] == "fa3" and r.get("default_options") and r.get("default_config", True):
            defaults[key] = label
labels = []
for v in rows.values():
    for lab in v:
        if lab not in labels:
            labels.append(lab)
print(f"{'d':>4} {'causal':>6} {'N':>6} " + " ".join(f"{lab:>16}" for lab in labels) +
      "   fa3/cudnn (the shape's default schedule)")
for (dd, causal, n) in sorted(rows):
    v = rows[(dd, causal, n)]
    cells = []
    for lab in labels:
        t, status, _ = v.get(lab, (None, "-", None))
        cells.append(f"{t:16.1f}" if t else f"{status:>16}")
    f3, cu = v.get(defaults.get((dd, causal, n)), (None,))[0], v.get("cudnn", (None,))[0]
    ratio = f"{f3 / cu:.2f}x" if f3 and cu else "-"
    print(f"{dd:>4} {int(causal):>6} {n:>6} " + " ".join(cells) + f"   {ratio:>8}")
if not defaults:
    print("(no fa3 row is marked default_options: a file from before 2026-11-25, or no default "
          "schedule in the run; fa3/cudnn left blank)")
bad = [(k, lab) for k, v in rows.items() for lab, (_, s, ver) in v.items() if s != "ok" or ver is False]
print(f"rows not ok or failing verification: {len(bad)}" +
      (": " + ", ".join(f"d={k[0]} causal={int(k[1])} N={k[2]} {lab}" for k, lab in bad[:8]) if bad else "") +
      (" ..." if len(bad) > 8 else ""))
print()
print("== counters over the IO model (DRAM: read+write over the compulsory bytes; L2: SM<->L2 "
      "sectors x 32, counted at the SM, over the model's bytes; TC: tensor ops over matrix FLOPs) ==")
print(f"{'d':>4} {'causal':>6} {'N':>6} {'row':>16} {'DRAM/c':>7} {'L2/m':>6} {'TC/m':>6}")
for c in sorted(d["configs"], key=lambda c: (c["d"], c["causal"], c["N"])):
    for r in c["results"]:
        cnt, m = r.get("counters") or {}, r.get("model") or {}
        v = cnt.get("values") or {}
        if cnt.get("status") != "ok" or not m:
            continue
        opts = r.get("options") or {}
        lab = r["variant"] + ("~" + opts["schedule"] if opts.get("schedule", "full") != "full" else "")
        mb = m.get("bytes_read", 0) + m.get("bytes_written", 0)
        comp = m.get("bytes_compulsory", 0)
        dram = v.get("dram__bytes_read.sum", 0) + v.get("dram__bytes_write.sum", 0)
        l2 = 32 * (v.get("l1tex__m_xbar2l1tex_read_sectors.sum", 0) + v.get("l1tex__m_l1tex2xbar_write_sectors.sum", 0))
        tc = sum(v.get(k, 0) for k in ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum"))
        fm = m.get("flops_matrix", 0)
        print(f"{c['d']:>4} {int(c['causal']):>6} {c['N']:>6} {lab:>16} {dram / comp if comp else 0:7.2f} "
              f"{l2 / mb if mb else 0:6.2f} {tc / fm if fm else 0:6.3f}")
PY
echo
# gtest's totals and the failed tests' names (not every passing one).
grep -E '^\[  PASSED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test|^\[  FAILED  \] ' "$out/gpu-tests-fa3.log" 2>/dev/null |
  sed 's/^/gpu-tests: /'
grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out"/memcheck.log "$out"/racecheck.log "$out"/synccheck.log 2>/dev/null | sed 's/^/sanitizer: /'
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
