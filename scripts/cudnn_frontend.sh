#!/usr/bin/env bash
# Puts the cudnn-frontend headers where CMake looks for them: the include/ folder of the wheel
# pinned in scripts/requirements-cudnn-frontend.txt, unpacked into
# .venv/cudnn-frontend-<version>/include (FA_CUDNN_FRONTEND_INCLUDE names another copy). The
# headers are the same in every platform's wheel of a version, so any wheel of it in .whl/ will
# do; online, pip downloads one there. Offline machines (the GPU machine): copy .whl/ along.
# Called by scripts/setup.sh (every mode) and scripts/cudnn_check.sh. Idempotent.
# Exit: 0 the headers are there; 1 they could not be got (one line on stderr says why).
set -euo pipefail
cd "$(dirname "$0")/.."
pin=$(grep -E '^nvidia-cudnn-frontend==' scripts/requirements-cudnn-frontend.txt | head -1)
version=${pin#*==}
dir=.venv/cudnn-frontend-$version
[ -f "$dir/include/cudnn_frontend.h" ] && exit 0
wheel() { find .whl -maxdepth 1 -name "nvidia_cudnn_frontend-$version-*.whl" 2>/dev/null | head -1; }
if [ -z "$(wheel)" ]; then
  echo "cudnn-frontend: downloading $pin into .whl/" >&2
  if ! python3 -m pip download -q --disable-pip-version-check --retries 1 --timeout 20 --no-deps --only-binary=:all: \
    -d .whl "$pin" >&2; then
    echo "cudnn-frontend: warning: could not download $pin (offline? put its wheel in .whl/); the cudnn rows will say unsupported" >&2
    exit 1
  fi
fi
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
if ! python3 - "$(wheel)" "$dir.tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if "include/cudnn_frontend.h" not in names:
        sys.exit("no include/cudnn_frontend.h in " + sys.argv[1])
    for n in names:
        z.extract(n, sys.argv[2])
PY
then
  rm -rf "$dir.tmp"
  echo "cudnn-frontend: warning: could not unpack $(wheel); the cudnn rows will say unsupported" >&2
  exit 1
fi
rm -rf "$dir" && mv "$dir.tmp" "$dir"
echo "cudnn-frontend: $version headers in $dir/include" >&2
