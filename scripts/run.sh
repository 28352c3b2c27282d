#!/usr/bin/env bash
# Sets up what fa-bench needs (scripts/setup.sh --cxx), builds fa-bench alone (Release, into
# build/ or $FA_BUILD_DIR; progress on stderr) and runs it with the arguments given (default:
# --N 4096 --d 64 --variants all) in the folder this was called from: relative paths such as
# --json out.json are yours, and results/ (the default result folder) is made there.
# fa-bench replaces this script's process, so Ctrl-C reaches it directly (it keeps what finished).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --cxx
FA_BUILD_TESTS=${FA_BUILD_TESTS:-OFF} "$root/scripts/build.sh" fa-bench
build=${FA_BUILD_DIR:-build}
case "$build" in
  /*) ;;
  *) build="$root/$build" ;;
esac
if [ $# -eq 0 ]; then
  set -- --N 4096 --d 64 --variants all
fi
exec "$build/bin/fa-bench" "$@"
