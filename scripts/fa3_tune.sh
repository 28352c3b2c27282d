#!/usr/bin/env bash
# Issue 15, fourth step: fa3's alternatives measured side by side against cudnn on an H200, so
# that fa3's defaults can be set with one line per (d, causal) (kernels/fa3/fa3_launch.hpp:
# fa3::default_plan; tiles: the first of each head dim in Fa3Tiles, kernels/fa3/fa3.cu).
#   scripts/fa3_tune.sh OUTDIR
# Steps (FA3_TUNE_STEPS, default "tests memcheck racecheck bench"):
#   build     (always) fa-bench and fa_tests_gpu with CuTe and -DFA_FA3_ALTERNATIVES=ON (the
#             alternatives are not compiled by default; scripts/fa3_check.sh's fa3_build;
#             cudnn-frontend headers through scripts/cudnn_frontend.sh)
#   tests     fa_tests_gpu on the new paths: the alternatives' schedule cases (TMA-store epilogue,
#             static and dynamic persistent grids, 128x176), the dynamic counter across launches,
#             the other tiles, and fault injection on fa3~dynamic-tma-store (bf16 shapes)
#   memcheck  compute-sanitizer memcheck, fa3's kernels only (fa3_forward_kernel and the
#             alternatives' fa3_alt_kernel), every schedule and tile, N=1000
#   racecheck compute-sanitizer racecheck, fa3's kernels only, every alternative, N=300; and the
#             TMA-store persistent grids at N=1024 x 17 heads (several tiles per thread block)
#   bench     fa-bench --N 1024,2048,4096,8192,16384 --d 64,128 --causal both --variants fa3,cudnn
#             --fa3-schedule full,persistent,tma-store,persistent-tma-store,dynamic,
#             dynamic-tma-store --block-q 128,192 --block-kv 128,176 (every compiled tile)
#             --no-counters, then the table (scripts/fa3_tune_table.py): each row's TFLOP/s and
#             ratio to cudnn per shape, and the winner per (d, causal) with the line to change.
# About 5 minutes of GPU time on an H200 once built. On a fresh machine build first:
#   FA3_TUNE_BUILD_ONLY=1 scripts/fa3_tune.sh OUTDIR     (minutes of nvcc, no GPU work)
# Exit codes: 0 every step green; 1 the build failed or fa3 was not built; 3 a step failed, or a
# row failed (see the summary and its log).
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # the helpers (cd's to the repository root); sets build, bin
out=${1:?usage: scripts/fa3_tune.sh OUTDIR}
mkdir -p "$out"
FA3_CMAKE_EXTRA="-DFA_FA3_ALTERNATIVES=ON" fa3_build "$out" || exit 1
if [ -n "${FA3_TUNE_BUILD_ONLY:-}" ]; then
  echo "fa3_tune: built ($build); FA3_TUNE_BUILD_ONLY set: stopping before the GPU steps"
  exit 0
fi
alternatives=persistent,tma-store,persistent-tma-store,dynamic,dynamic-tma-store
steps=" ${FA3_TUNE_STEPS:-tests memcheck racecheck bench} "
want() { [[ "$steps" == *" $1 "* ]]; }
want tests && step gpu-tests "$build/bin/fa_tests_gpu" \
  --gtest_filter='Ablation/*tma_store*:Ablation/*dynamic*:Ablation/*128x176*:Fa3Dynamic.*:OtherTiles/*fa3*:Shapes/FaultsAreCaught.*/d64_bf16_full_N1000:Shapes/FaultsAreCaught.*/d128_bf16_causal_N4096'
fa3_ceilings
san="$bin --d 64,128 --causal both --variants fa3 --batch 1 --heads 2 --warmup 0 --repetitions 1 --no-counters"
# Default tiles, and 128x128 at d=64 (the causal persistent and dynamic grids' tile there).
want memcheck && step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 \
  --kernel-name kns=fa3_ $san --N 1000 --fa3-schedule "full,$alternatives" \
  --block-q 128,192 --block-kv 128,176
want racecheck && step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name kns=fa3_ $san --N 300 --fa3-schedule "$alternatives" \
  --block-q 128 --block-kv 128
# Several tiles per thread block (136 tiles on 132 SMs): the O buffer reused, the counter taken.
want racecheck && step racecheck-multi compute-sanitizer --tool racecheck --error-exitcode 9 \
  --kernel-name kns=fa3_ "$bin" --N 1024 --d 64 --causal both --variants fa3 \
  --batch 1 --heads 17 --warmup 0 --repetitions 1 --no-counters \
  --fa3-schedule persistent-tma-store,dynamic-tma-store --block-q 128 --block-kv 128
want bench && FA3_STEP_TIMEOUT=330 step bench "$bin" --N "${FA3_TUNE_N:-1024,2048,4096,8192,16384}" \
  --d 64,128 --causal both --variants fa3,cudnn --fa3-schedule "full,$alternatives" \
  --block-q 128,192 --block-kv 128,176 --no-counters --warmup 5 --repetitions 20 \
  --json "$out/fa3-tune.json"

# The alternatives' SASS (they run as fa3_alt_kernel; the defaults' check is ctest sass_fa3): a
# spilling alternative is measured as it is, and says so here before it is made a default.
cuobjdump=$(ls .venv/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$cuobjdump" ]; then
  python3 scripts/sass_check.py --cuobjdump "$cuobjdump" --filter fa3_alt_kernel --require HGMMA \
    "$build"/CMakeFiles/fa_kernels_hopper.dir/kernels/fa3/*.o >"$out/sass-alternatives.log" 2>&1
  echo "sass (alternatives; spills do not fail this script): $(tail -1 "$out/sass-alternatives.log")"
  grep -E 'LOCAL|STL|spill|FAIL' "$out/sass-alternatives.log" | head -20
fi
if want bench; then
  scripts/fa3_tune_table.py "$out/fa3-tune.json" >"$out/table.txt" 2>&1
  rc=$?
  cat "$out/table.txt"
  [ "$rc" -eq 0 ] || failed=1
fi
echo
grep -E '^\[  PASSED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test|^\[  FAILED  \] ' "$out/gpu-tests.log" 2>/dev/null |
  sed 's/^/gpu-tests: /'
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/memcheck.log "$out"/racecheck.log "$out"/racecheck-multi.log 2>/dev/null | sed 's/^/sanitizer: /'
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
