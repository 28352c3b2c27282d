#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from what the committed .clang-format makes of it.
# Uses the pinned clang-format wheel in .venv (reports/requirements.txt), so every machine
# formats alike; `scripts/check_format.sh --fix` rewrites the files in place instead.
# Exit: 0 formatted, 1 some file is not (each named with the first difference), 2 no clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=.venv/bin/clang-format
if [ ! -x "$cf" ]; then
  echo "check_format: $cf missing: run scripts/setup.sh" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
if [ "${1:-}" = --fix ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
if ! out=$("$cf" --dry-run -Werror "${files[@]}" 2>&1); then
  echo "$out" | grep -E '^[^ ].*: error:' | cut -d: -f1 | sort -u | sed 's/^/check_format: not formatted: /' >&2
  echo "check_format: $(echo "$out" | grep -c ': error:') differences; fix with scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as .clang-format says" >&2
