#!/usr/bin/env bash
# Plots and a report from fa-bench result files, with the project's venv:
#   scripts/report.sh RESULTS.json [MORE.json ...] -o OUTDIR
# writes OUTDIR/*.png, *.svg, report.md and a self-contained report.html (docs/reports.md).
# Needs no GPU and no CUDA: when .venv is missing or stale it is made here the way
# scripts/setup.sh makes it (pinned reports/requirements.txt, same stamp).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
stamp="$root/.venv/.requirements.sha256"
want=$(sha256sum "$root/reports/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$root/.venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "report: creating .venv from reports/requirements.txt" >&2
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -q --disable-pip-version-check -r "$root/reports/requirements.txt"
  echo "$want" >"$stamp"
fi
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "$root/.venv/bin/python" -m reports "$@"
