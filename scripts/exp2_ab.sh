#!/usr/bin/env bash
# The softmax exponential A/B on an H200 (kernels/common/fast_exp2.cuh): builds fa-bench twice,
# "base" and "cand", each with its own CMake arguments, runs the same table with both
#   fa-bench --N $EXP2_AB_N --d 64,128 --causal both --variants $EXP2_AB_VARIANTS --no-counters
# and the GPU tests of every forward and backward kernel against the fp64 reference with the
# candidate build (the fault table included), and prints TFLOP/s side by side with cand/base.
#   scripts/exp2_ab.sh OUTDIR
# Defaults (the first A/B, 2026-11-23): base -DFA_FAST_EXP2=OFF (exp2f: MUFU.EX2 with its range
# fix-up) against cand -DFA_FAST_EXP2=ON (a bare ex2.approx.ftz), variants fa2,fa3,fp8,cudnn.
#   EXP2_AB_BASE_ARGS, EXP2_AB_CAND_ARGS  the two sides' CMake arguments; e.g. the polynomial
#       share: EXP2_AB_BASE_ARGS=-DFA_EXP2_POLY_EVERY=0 EXP2_AB_CAND_ARGS=-DFA_EXP2_POLY_EVERY=4
#   EXP2_AB_VARIANTS  the table's variants;  EXP2_AB_N  its N list (default 1024,4096,16384);
#   EXP2_AB_FLAGS  more fa-bench flags for both sides (e.g. --fp8-prequantized)
#   EXP2_AB_TESTS=0  no GPU tests after the tables (each table row is still verified)
#   EXP2_AB_TEST_FILTER  the GPU tests' gtest filter (default: every forward and backward variant,
#       fp8's own tests and two shapes of the fault table; the whole set can pass 600 s)
#   EXP2_AB_BUILD_ONLY=1  builds both and stops (a first call; the runs in a second call on the
#       same warm machine)
# Builds: build-ab-base/ (fa-bench alone) and build-ab-cand/ (fa-bench, and the GPU tests), about
# 1-2 minutes each on 16 cores. Exit codes: 0 both ran and every row and test passed; 1 a build
# failed; 3 a step failed (its log in OUTDIR).
set -uo pipefail
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # fa3_build (cd's to the repository root)
out=${1:?usage: scripts/exp2_ab.sh OUTDIR}
mkdir -p "$out/base" "$out/cand"
N=${EXP2_AB_N:-1024,4096,16384}
base_args=${EXP2_AB_BASE_ARGS--DFA_FAST_EXP2=OFF}  # set but empty: the defaults
cand_args=${EXP2_AB_CAND_ARGS--DFA_FAST_EXP2=ON}
variants=${EXP2_AB_VARIANTS:-fa2,fa3,fp8,cudnn}

# Each side is configured afresh: CMake's cache would keep a switch an earlier A/B set on that
# side (the objects stay, so only what the arguments change is rebuilt).
rm -f build-ab-base/CMakeCache.txt build-ab-cand/CMakeCache.txt build-ab-base/build.ninja \
  build-ab-cand/build.ninja  # build.sh configures where build.ninja is missing
FA_BUILD_DIR=build-ab-base FA3_BUILD_TARGETS=fa-bench FA3_CMAKE_EXTRA="$base_args" \
  fa3_build "$out/base" || exit 1
# shellcheck disable=SC2154  # bin and build: set by fa3_build
base_bin=$bin
cand_targets="fa-bench fa_tests_gpu"
[ "${EXP2_AB_TESTS:-1}" = 0 ] && cand_targets=fa-bench
FA_BUILD_DIR=build-ab-cand FA3_BUILD_TARGETS=$cand_targets FA3_CMAKE_EXTRA="$cand_args" \
  fa3_build "$out/cand" || exit 1
cand_bin=$bin
cand_build=$build
echo "exp2_ab: base ($base_args): $base_bin; cand ($cand_args): $cand_bin"
if [ -n "${EXP2_AB_BUILD_ONLY:-}" ]; then
  echo "exp2_ab: EXP2_AB_BUILD_ONLY set: stopping after the builds"
  exit 0
fi

for side in base cand; do
  b=$base_bin
  [ "$side" = cand ] && b=$cand_bin
  # shellcheck disable=SC2086  # EXP2_AB_FLAGS: a list of flags
  step "table-$side" "$b" --N "$N" --d 64,128 --causal both --variants "$variants" \
    --no-counters ${EXP2_AB_FLAGS:-} --json "$out/$side.json"
done
[ "${EXP2_AB_TESTS:-1}" = 0 ] ||  # EXP2_AB_TESTS=0: the tables alone (their rows are verified)
  step tests-cand "$cand_build/bin/fa_tests_gpu" \
  --gtest_filter="${EXP2_AB_TEST_FILTER:-AllVariants/*:Shapes/BackwardMatchesReference.*:Fp8.*:Fp8Schedules.*:Shapes/FaultsAreCaught.*/d64_bf16_causal_N1000:Shapes/FaultsAreCaught.*/d128_bf16_full_N1000}"

echo "== TFLOP/s, base ($base_args) against cand ($cand_args), fa-bench median =="
python3 scripts/ab_table.py base="$out/base.json" cand="$out/cand.json"
grep -E '^\[  PASSED  \] [0-9]+ test|^\[  FAILED  \] ' "$out/tests-cand.log" 2>/dev/null | sed 's/^/tests-cand: /'
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
