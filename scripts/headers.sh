#!/usr/bin/env bash
# Puts the header-only dependencies pinned in scripts/requirements-headers.txt where CMake looks
# for them: each wheel's include tree unpacked into .venv/<name>-<version>/include
#   nvidia-cudnn-frontend  include/                         -> .venv/cudnn-frontend-<v>/include
#   nvidia-cutlass         cutlass_library/source/include/  -> .venv/cutlass-<v>/include
# A wheel already in .whl/ is used as it is; online, pip downloads it there first. Offline
# machines (the GPU machine): copy .whl/ along. Idempotent: an unpacked version is not touched
# again (new mtimes would make ninja rebuild every kernel that includes it).
# Exit: 0 every header tree is there; 1 one could not be got (a line on stderr names it and what
# then happens).
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
while read -r pin; do
  name=${pin%%==*}
  version=${pin#*==}
  case "$name" in
    nvidia-cudnn-frontend) short=cudnn-frontend prefix=include/ probe=cudnn_frontend.h
      without="the cudnn rows will say unsupported" ;;
    nvidia-cutlass) short=cutlass prefix=cutlass_library/source/include/ probe=cute/tensor.hpp
      without="fa3 and fp8 will not be built" ;;
    *) echo "headers: error: no unpacking rule for $name (scripts/requirements-headers.txt)" >&2; exit 1 ;;
  esac
  dir=.venv/$short-$version
  [ -f "$dir/include/$probe" ] && continue
  # No .whl/ yet (a fresh clone): find fails, and under pipefail that must not end the script.
  wheel=$(find .whl -maxdepth 1 -name "${name//-/_}-$version-*.whl" 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    echo "headers: downloading $pin into .whl/" >&2
    if ! python3 -m pip download -q --disable-pip-version-check --retries 1 --timeout 20 --no-deps \
      --only-binary=:all: -d .whl "$pin" >&2; then
      echo "headers: warning: could not download $pin (offline? put its wheel in .whl/): $without" >&2
      rc=1
      continue
    fi
    wheel=$(find .whl -maxdepth 1 -name "${name//-/_}-$version-*.whl" | head -1)
  fi
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/include"
  if ! python3 - "$wheel" "$prefix" "$probe" "$dir.tmp/include" <<'PY'
import os, sys, zipfile
wheel, prefix, probe, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if prefix + probe not in names:
        sys.exit(f"no {prefix}{probe} in {wheel}")
    for n in names:
        target = os.path.join(dest, n[len(prefix):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(n) as src, open(target, "wb") as out:
            out.write(src.read())
PY
  then
    rm -rf "$dir.tmp"
    echo "headers: warning: could not unpack $wheel: $without" >&2
    rc=1
    continue
  fi
  mkdir -p .venv && rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo "headers: $name $version in $dir/include" >&2
done < <(grep -E '^[A-Za-z0-9_.-]+==' scripts/requirements-headers.txt)
exit "$rc"
