#!/usr/bin/env bash
# The softmax exponential A/B on an H200 (kernels/common/fast_exp2.cuh): builds fa-bench and the
# GPU tests twice, with -DFA_FAST_EXP2=OFF (exp2f: MUFU.EX2 with its range fix-up, 4 instructions
# per exponential) into build-exp2f/ and with -DFA_FAST_EXP2=ON (the default: a bare
# ex2.approx.ftz, 1 instruction) into build-fast/, then runs the same table with both
#   fa-bench --N $EXP2_AB_N --d 64,128 --causal both --variants fa2,fa3,fp8,cudnn --no-counters
# and the GPU tests of every forward and backward kernel against the fp64 reference with the fast
# build (the fault table included), and prints TFLOP/s side by side with fast/base per row.
#   scripts/exp2_ab.sh OUTDIR            (two builds of about 2 minutes each on 16 cores, then
#                                         about 5 minutes of runs)
# EXP2_AB_BUILD_ONLY=1 builds both and stops (a first call; the runs in a second call on the same
# warm machine stay under its 600 s). EXP2_AB_N: the N list (default 1024,4096,16384). Exit codes: 0 both ran and every row and test
# passed; 1 a build failed; 3 a step failed (its log in OUTDIR).
set -uo pipefail
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # fa3_build (cd's to the repository root)
out=${1:?usage: scripts/exp2_ab.sh OUTDIR}
mkdir -p "$out/base" "$out/fast"
N=${EXP2_AB_N:-1024,4096,16384}

FA_BUILD_DIR=build-exp2f FA3_CMAKE_EXTRA="-DFA_FAST_EXP2=OFF" fa3_build "$out/base" || exit 1
# shellcheck disable=SC2154  # bin and build: set by fa3_build
base_bin=$bin
FA_BUILD_DIR=build-fast FA3_CMAKE_EXTRA="-DFA_FAST_EXP2=ON" fa3_build "$out/fast" || exit 1
fast_bin=$bin
fast_build=$build
if ! grep -q 'FA_FAST_EXP2:BOOL=ON' "$fast_build/CMakeCache.txt" ||
  ! grep -q 'FA_FAST_EXP2:BOOL=OFF' build-exp2f/CMakeCache.txt; then
  echo "exp2_ab: error: build-exp2f/ and $fast_build are not configured OFF and ON" >&2
  exit 1
fi
if [ -n "${EXP2_AB_BUILD_ONLY:-}" ]; then
  echo "exp2_ab: built build-exp2f/ and $fast_build; EXP2_AB_BUILD_ONLY set: stopping"
  exit 0
fi

for side in base fast; do
  b=$base_bin
  [ "$side" = fast ] && b=$fast_bin
  step "table-$side" "$b" --N "$N" --d 64,128 --causal both --variants fa2,fa3,fp8,cudnn \
    --no-counters --json "$out/$side.json"
done
step tests-fast "$fast_build/bin/fa_tests_gpu" \
  --gtest_filter='AllVariants/*:Shapes/BackwardMatchesReference.*:Fp8.*:Shapes/FaultsAreCaught.*/d64_bf16_causal_N1000:Shapes/FaultsAreCaught.*/d128_bf16_full_N1000'

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]

def rows(name):
    try:
        doc = json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return {}
    res = {}
    for c in doc.get("configs", []):
        for r in c["results"]:
            ok = r["status"] == "ok" and (r.get("verification") or {}).get("passed") is not False
            t = (r.get("derived") or {}).get("tflops_convention") if ok else None
            res[(r["variant"], c["d"], c["causal"], c["N"])] = (t, r["status"])
    return res

base, fast = rows("base.json"), rows("fast.json")
print("== TFLOP/s, exp2f (base) against bare ex2.approx.ftz (fast), fa-bench median ==")
print(f"{'variant':>8} {'d':>4} {'causal':>6} {'N':>6} {'base':>8} {'fast':>8} {'fast/base':>9}")
for key in sorted(set(base) | set(fast)):
    (tb, sb), (tf, sf) = base.get(key, (None, "-")), fast.get(key, (None, "-"))
    ratio = f"{tf / tb:.3f}" if tb and tf else "-"
    cell = lambda t, s: f"{t:8.1f}" if t else f"{s[:8]:>8}"
    print(f"{key[0]:>8} {key[1]:>4} {int(key[2]):>6} {key[3]:>6} {cell(tb, sb)} {cell(tf, sf)} {ratio:>9}")
PY
grep -E '^\[  PASSED  \] [0-9]+ test|^\[  FAILED  \] ' "$out/tests-fast.log" 2>/dev/null | sed 's/^/tests-fast: /'
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
