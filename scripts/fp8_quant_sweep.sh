#!/usr/bin/env bash
# fp8's settings against each other in one device call: one build folder, one fa-bench per side
# (the pass's settings reach kernels/fp8/fp8_quant.cu alone, the attention's FA_FP8_DESCALE_AHEAD
# its two sm_90a sources, so after the first full build a side recompiles those and relinks),
# then the same table from every side and the pass under ncu (scripts/fp8_quant_profile.sh),
# side by side with each side's ratio to the first (scripts/ab_table.py).
#   scripts/fp8_quant_sweep.sh OUTDIR LABEL="CMAKE ARGS" [LABEL="CMAKE ARGS" ...]
# Every side starts from the defaults (fp8's switches and settings in CMakeLists.txt), then
# its own arguments, so a side is what it names and nothing an earlier side set. The first side
# is the base of the ratios; "" is the defaults. E.g.
#   scripts/fp8_quant_sweep.sh OUT base="" stages43="-DFA_FP8_QUANT_STAGES_D64=4
#     -DFA_FP8_QUANT_STAGES_D128=3" rows128="-DFA_FP8_QUANT_ROWS_D64=128
#     -DFA_FP8_QUANT_WARP_AMAX=OFF" first_form="-DFA_FP8_QUANT_PIPELINED=OFF"
# The table: fa-bench --N $QS_N --d $QS_D --causal both --variants $QS_VARIANTS --no-counters
# (QS_VARIANTS default fp8,cudnn: cudnn is the control, untouched by the settings; QS_N default
# 1024,4096,16384; QS_D default 64,128; QS_FLAGS more flags, e.g. --fp8-prequantized for the
# attention alone). QS_TESTS=1 also runs the fp8 GPU tests with every side (not only its verified
# rows); QS_TEST_FILTER narrows them (a gtest filter; the default, every fp8 test, takes more than
# 240 s per side on the H200, past a step's limit). QS_PROFILE=0 skips the pass under ncu (an A/B
# of the attention's settings).
# Exit codes: 0 every side built and ran; 1 a build failed; 3 a run failed (its log in OUTDIR).
set -uo pipefail
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # fa3_build, step (cd's to the repository root)
out=${1:?usage: scripts/fp8_quant_sweep.sh OUTDIR LABEL="CMAKE ARGS" ...}
shift
[ $# -ge 1 ] || { echo "fp8_quant_sweep: name at least one side (LABEL=\"CMAKE ARGS\")" >&2; exit 2; }
mkdir -p "$out/bin"
# -U drops fp8's cached switches and settings, so CMakeLists.txt's defaults come back before the
# side's own arguments.
defaults="-UFA_FP8_*"
with_tests=${QS_TESTS:-0}
test_filter=${QS_TEST_FILTER:-AllVariants/*fp8*:Fp8.*:Fp8Quant.*:Fp8Schedules.*:Fp8Dynamic.*}
labels=()
for spec in "$@"; do
  label=${spec%%=*} args=${spec#*=}
  mkdir -p "$out/$label"
  targets=fa-bench
  [ "$with_tests" = 1 ] && targets="fa-bench fa_tests_gpu"
  # A subshell: fa3_build exports FA_CMAKE_ARGS, which must not carry one side's arguments into
  # the next.
  (FA_BUILD_DIR=build-qsweep FA3_BUILD_TARGETS=$targets FA3_CMAKE_EXTRA="$defaults $args" \
    fa3_build "$out/$label") || exit 1
  cp build-qsweep/bin/fa-bench "$out/bin/fa-bench-$label"
  [ "$with_tests" = 1 ] && cp build-qsweep/bin/fa_tests_gpu "$out/bin/fa_tests_gpu-$label"
  labels+=("$label")
done
tables=() profiles=()
for label in "${labels[@]}"; do
  # shellcheck disable=SC2086  # QS_FLAGS: a list of flags
  step "table-$label" "$out/bin/fa-bench-$label" --N "${QS_N:-1024,4096,16384}" \
    --d "${QS_D:-64,128}" --causal both --variants "${QS_VARIANTS:-fp8,cudnn}" --no-counters \
    ${QS_FLAGS:-} --json "$out/$label.json"
  [ "$with_tests" = 1 ] && step "tests-$label" "$out/bin/fa_tests_gpu-$label" \
    --gtest_filter="$test_filter"
  tables+=("$label=$out/$label.json")
  profiles+=("$label=$out/bin/fa-bench-$label")
done
echo "== TFLOP/s (fa-bench median), each side against ${labels[0]} =="
python3 scripts/ab_table.py "${tables[@]}"
if [ "${QS_PROFILE:-1}" != 0 ]; then
  echo "== the pass under ncu (cold L2, base clocks), N=4096 =="
  QP_N=4096 scripts/fp8_quant_profile.sh "$out/ncu" "${profiles[@]}" >"$out/ncu.txt"
  grep -v copy_unrolled "$out/ncu.txt"
  # The copy kernel (the bar's roof), profiled the same way in each side's process: the median
  # of its launches per side.
  python3 - "$out/ncu.txt" <<'PY'
import re, statistics, sys
gbs = {}
for line in open(sys.argv[1]):
    m = re.search(r"([0-9.]+) GB/s", line)
    if "copy_unrolled" in line and m:
        gbs.setdefault(line.split()[0], []).append(float(m.group(1)))
for label, v in gbs.items():
    print(f"{label:6s} copy kernel: median {statistics.median(v):.1f} GB/s of {len(v)} launches")
PY
fi
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || exit 3
