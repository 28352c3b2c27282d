#!/usr/bin/env bash
# Sets up what the tests need (scripts/setup.sh --test), builds everything, runs ctest (CPU tests
# always; GPU tests when a GPU is present, else the GPU test binary once, each test skipping with
# its reason), pytest, the JSON
# Schema check of the writers' outputs (scripts/validate_results.py), the C++ formatting
# (scripts/check_format.sh), ruff and a
# short fuzz run (scripts/fuzz.sh; FUZZ_SECONDS, default 60, 0 skips it).
# ctest's full log: build/ctest.log; printed here: failures, the totals, and one line counting
# the skipped tests by reason (instead of every skipped name).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FA_BUILD_DIR:-build}
scripts/setup.sh --test
FA_BUILD_TESTS=ON scripts/build.sh
echo "test: ctest (log: $build/ctest.log)" >&2
rc=0
# Without a GPU each of the ~1100 GPU tests would start its own process only to skip (0.17 s each,
# about 90 s of a 2-core CI run): ctest leaves them out and the GPU test binary runs once instead,
# every test skipping with its reason (counted below with ctest's).
ctest_args=()
gpu_junit=""
junits=("$build/ctest-junit.xml")
if ! nvidia-smi -L >/dev/null 2>&1; then
  ctest_args=(-LE gpu)
  gpu_junit="$build/gpu-tests-junit.xml"
  junits+=("$gpu_junit")
fi
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "${ctest_args[@]}" --output-junit ctest-junit.xml) >"$build/ctest.log" 2>&1 || rc=$?
if [ -n "$gpu_junit" ]; then
  echo "test: GPU tests without a GPU: one process (log: $build/gpu-tests.log)" >&2
  "$build/bin/fa_tests_gpu" --gtest_output="xml:$gpu_junit" >"$build/gpu-tests.log" 2>&1 || {
    rc=$?
    tail -30 "$build/gpu-tests.log"
  }
fi
# The log without its list of tests that did not run (those are summarised below).
awk '/^The following tests did not run:/ {skip = 1; next}
     skip && /\((Skipped|Disabled)\)$/ {next}
     {skip = 0; print}' "$build/ctest.log" |
  grep -vE '^ *Start +[0-9]+: |^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(Passed|\*\*\*Skipped) +[0-9.]+ sec$|^$' || true
python3 - "${junits[@]}" <<'PY'
# One line: how many tests were skipped, grouped by the reason the test gave (GTEST_SKIP), over
# ctest's JUnit file and, without a GPU, the GPU test binary's.
import collections, re, sys, xml.etree.ElementTree as ET
cases = []
for path in sys.argv[1:]:
    try:
        cases += list(ET.parse(path).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        sys.exit(f"test: no JUnit file {path} ({e})")
reasons, total = collections.Counter(), 0
for c in cases:
    total += 1
    if c.get("status") not in ("notrun", "disabled") and c.find("skipped") is None:
        continue
    text = (c.findtext("system-out") or "")
    m = re.search(r": Skipped\n(.+)", text)
    # ctest: the test's output; gtest's XML: the skip message, whose first lines are file:line
    message = c.find("skipped").get("message", "") if c.find("skipped") is not None else ""
    reason = m.group(1).strip() if m else (message.strip().splitlines() or [""])[-1]
    reason = re.sub(r"\s+", " ", reason) or "no reason given"
    reason = reason if len(reason) <= 110 else reason[:110] + "..."
    reasons[reason] += 1
skipped = sum(reasons.values())
if skipped:
    parts = "; ".join(f"{n} {r}" for r, n in reasons.most_common())
    print(f"test: {skipped} of {total} tests skipped: {parts}")
else:
    print(f"test: none of the {total} tests skipped")
PY
[ "$rc" -eq 0 ] || { echo "test: ctest FAILED (exit $rc; log: $build/ctest.log)" >&2; exit "$rc"; }
echo "test: pytest" >&2
bin=$build; [[ $bin = /* ]] || bin="$PWD/$bin"
FA_BENCH_BIN="$bin/bin/fa-bench" .venv/bin/python -m pytest -q -n "$(nproc)" tests/python
# The writers' outputs ctest wrote (C++ without a GPU, the C++ full record, the Python writer)
# against schema/fa-bench-result.schema.json; committed files: tests/python/test_json_schema.py.
echo "test: JSON Schema" >&2
.venv/bin/python scripts/validate_results.py "$bin/test-out/model-only.json" \
  "$bin/test-out/full-record.json" "$bin/test-out/from-python.json"
echo "test: formatting" >&2
scripts/check_format.sh
echo "test: ruff" >&2
.venv/bin/ruff check reports tests/python scripts/*.py
if [ "${FUZZ_SECONDS:-60}" != 0 ]; then scripts/fuzz.sh; fi
