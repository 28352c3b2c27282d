#!/usr/bin/env bash
# Sets up if needed, builds Release into build/, runs fa-bench with the arguments given
# (default: --N 4096 --d 64 --variants all).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --cxx  # the Python venv is for reports/, not needed here
scripts/build.sh >/dev/null
if [ $# -eq 0 ]; then
  set -- --N 4096 --d 64 --variants all
fi
exec build/bin/fa-bench "$@"
