#!/usr/bin/env bash
# The shared online softmax (issue 14) costs nothing: before/after on the H200, about 4 minutes.
#   1. builds "before" (commit 460142f: fa1, fa2, fp8 with their own softmax copies) and "after"
#      (this tree) for sm_90a only, fa-bench and (after) fa_tests_gpu;
#   2. runs `fa-bench --N 4096 --d 64,128 --causal both --variants fa2,fp8 --repetitions 50` with
#      each, alternately: before, after, before, after (two rounds each);
#   3. runs the GPU tests `*Fault*:*Kernel*` with the after build;
#   4. prints variant, d, causal, median TFLOP/s before / after (median of the two rounds) and the
#      ratio after/before; kept in OUTDIR/summary.txt.
# Usage: scripts/softmax_ab.sh OUTDIR
#   FA_BEFORE_SRC=DIR  a source tree of 460142f already unpacked (where this copy has no git
#                      history: `git archive 460142f | tar -x -C DIR` on a clone)
# Exit codes: 0 done (read the table); 1 a build, run or the GPU tests failed (see OUTDIR/*.log);
# 2 usage or no source for "before".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${1:-}
if [ -z "$out" ]; then
  echo "usage: scripts/softmax_ab.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$out" && out=$(cd "$out" && pwd)
export PATH="$PATH:/usr/local/cuda/bin"
log="$out/softmax_ab.log"
: >"$log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >>"$log" 2>&1

before_src=${FA_BEFORE_SRC:-}
if [ -z "$before_src" ]; then
  before_src="$out/before-src"
  rm -rf "$before_src" && mkdir -p "$before_src"
  if ! git archive 460142f 2>>"$log" | tar -x -C "$before_src"; then
    echo "softmax_ab: error: no git history here to unpack 460142f: set FA_BEFORE_SRC" >&2
    exit 2
  fi
fi

build() {  # srcdir builddir targets...
  local src=$1 dir=$2
  shift 2
  # shellcheck disable=SC2086  # FA_CMAKE_ARGS is a list of arguments
  (cd "$src" && timeout 300 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFA_CUDA_ARCHITECTURES=90a -DFA_BUILD_TESTS=ON ${FA_CMAKE_ARGS:-} >>"$log" 2>&1 &&
    timeout 400 cmake --build "$dir" -j "$(nproc)" --target "$@" >>"$log" 2>&1)
}
echo "softmax_ab: building before (460142f) and after" >&2
build "$before_src" "$out/build-before" fa-bench &
pid=$!
build "$PWD" "$out/build-after" fa-bench fa_tests_gpu || { echo "softmax_ab: after build failed ($log)" >&2; exit 1; }
wait $pid || { echo "softmax_ab: before build failed ($log)" >&2; exit 1; }

args=(--N 4096 --d "64,128" --causal both --variants "fa2,fp8" --repetitions 50 --require-gpu)
for round in 1 2; do
  for side in before after; do
    echo "softmax_ab: round $round, $side" >&2
    timeout 120 "$out/build-$side/bin/fa-bench" "${args[@]}" --json "$out/$side-$round.json" \
      >"$out/$side-$round.txt" 2>&1 || { echo "softmax_ab: $side run $round failed" >&2; exit 1; }
  done
done

echo "softmax_ab: GPU tests *Fault*:*Kernel* (after)" >&2
timeout 240 "$out/build-after/bin/fa_tests_gpu" --gtest_filter='*Fault*:*Kernel*' >"$out/gpu_tests.log" 2>&1
tests_rc=$?

python3 - "$out" "$tests_rc" <<'EOF' | tee "$out/summary.txt"
import json, statistics, sys
out, tests_rc = sys.argv[1], int(sys.argv[2])
def rows(path):
    d = json.load(open(path))
    for c in d["configs"]:
        for r in c["results"]:
            if r.get("status") == "ok" and not r.get("peer"):
                yield (r["algorithm"], c["d"], c["causal"]), r["derived"]["tflops_convention"]
tf = {}
for side in ("before", "after"):
    for rnd in (1, 2):
        for key, v in rows(f"{out}/{side}-{rnd}.json"):
            tf.setdefault(key, {}).setdefault(side, []).append(v)
print(f"{'variant':8} {'d':>4} {'causal':>6} {'before TFLOP/s':>15} {'after TFLOP/s':>14} {'after/before':>13}")
for key in sorted(tf):
    b, a = tf[key].get("before", []), tf[key].get("after", [])
    if not b or not a:
        print(f"{key[0]:8} {key[1]:>4} {str(key[2]):>6} missing on one side")
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"{key[0]:8} {key[1]:>4} {str(key[2]):>6} {mb:15.1f} {ma:14.1f} {ma / mb:13.3f}"
          f"   (rounds {', '.join(f'{x:.1f}' for x in b)} | {', '.join(f'{x:.1f}' for x in a)})")
print(f"GPU tests *Fault*:*Kernel* (after): {'passed' if tests_rc == 0 else f'FAILED (exit {tests_rc})'}")
EOF
[ "$tests_rc" = 0 ] || exit 1
