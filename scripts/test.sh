#!/usr/bin/env bash
# Sets up if needed, builds, runs ctest (CPU tests always; GPU tests when a GPU is present,
# skipped with a reason otherwise), pytest and a short fuzz run (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
FA_BENCH_BIN="$PWD/build/bin/fa-bench" .venv/bin/python -m pytest -q tests/python
.venv/bin/ruff check reports tests/python scripts/*.py
# A short fuzz of the result-file reader and the gate (FUZZ_SECONDS, default 60; 0 skips).
if [ "${FUZZ_SECONDS:-60}" != 0 ]; then scripts/fuzz.sh; fi
