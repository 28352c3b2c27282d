#!/usr/bin/env bash
# Ctrl-C while a large model-only sweep is planning: fa-bench, run directly and through
# scripts/run.sh, must stop at the next configuration, write the result file with what it
# planned ("complete": false), say so, and exit 130 (issue 13: no file was written).
#   tests/cli_sigint.sh FA_BENCH OUTDIR [BUILD_DIR]   (BUILD_DIR: also through scripts/run.sh)
set -uo pipefail
bench=$1 out=$2 build=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out"
# fa1/fa2 IO models walk every block pair: N = 2^20..2^23 takes seconds per configuration.
sweep=(--model-only --N 1048576:8388608 --batch 1 --heads 1 --d 64,128 --causal both --variants fa1,fa2)
fail=0
interrupt() {  # name, command...
  local name=$1
  shift
  # From the output folder: run.sh must resolve the relative --json against the caller's folder.
  (cd "$out" && exec "$@" "${sweep[@]}" --json "$name.json") >"$out/$name.out" 2>"$out/$name.err" &
  local pid=$!
  local i
  for i in $(seq 600); do  # the first progress line comes after a second of planning
    grep -q "planning \[" "$out/$name.err" && break
    sleep 0.1
  done
  kill -INT "$pid"
  wait "$pid"
  local rc=$?
  local why=""
  [ "$rc" -eq 130 ] || why+=" exit $rc, expected 130;"
  grep -q "planning \[" "$out/$name.err" || why+=" no progress line;"
  grep -q "interrupted: the results file holds what finished" "$out/$name.err" || why+=" no 'interrupted' line;"
  if [ -f "$out/$name.json" ]; then
    grep -q '"complete": false' "$out/$name.json" || why+=" the result file does not say complete: false;"
  else
    why+=" no result file $out/$name.json;"
  fi
  if [ -n "$why" ]; then
    echo "FAILED: $name:$why" >&2
    sed 's/^/  stderr: /' "$out/$name.err" | tail -5 >&2
    fail=1
  else
    echo "ok: $name: exit 130, $(grep -c '"N":' "$out/$name.json") configuration(s) kept of 16"
  fi
}
interrupt direct "$bench"
if [ -n "$build" ]; then
  interrupt run.sh env FA_BUILD_DIR="$build" "$root/scripts/run.sh"
fi
exit $fail
